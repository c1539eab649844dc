"""What a benchmark run's flows did, as iperf3 measured them and as Loom tracked them: the
records the patterns and gray-link benchmarks save, when placement held, and the CPU
samples that fall inside the window their throughput is measured over."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import networkx as nx

CPU_INTERVAL = 0.5  # s between CPU idle samples
FLOWS = "/loom/v1/flows"


def read_flows(read: Callable[[], Any]) -> list[dict[str, Any]] | None:
    """Loom's tracked flows right after a run (still tracked: they idle out later)."""
    try:
        body = read()
    except Exception as exc:  # the figure is lost, not the run
        print(f"[bench] GET flows failed: {exc}", flush=True)
        return None
    return None if body is None else list(body.get("flows", []))


def last_moves(
    graph: nx.MultiGraph, flows: Sequence[Any], cport_base: int, tracked: list[Any] | None
) -> list[float | str | None] | None:
    """Per iperf3 flow (client port ``cport_base + i``): seconds from its first packet to
    the last time Loom moved it, ``None`` if never moved, ``"untracked"`` if Loom did not
    list it; ``None`` as a whole when the controller lists no flows (not Loom)."""
    if tracked is None:
        return None
    by_key = {t["flow"]: t for t in tracked}
    out: list[float | str | None] = []
    for i, f in enumerate(flows):
        src, dst = graph.nodes[f.sender]["ip"], graph.nodes[f.receiver]["ip"]
        seen = by_key.get(f"tcp:{src}:{cport_base + i}->{dst}:{f.port}")
        out.append("untracked" if seen is None else seen.get("last_moved_s"))
    return out


def flow_records(
    flows: Sequence[Any], cport_base: int, moved: list[float | str | None] | None
) -> list[dict[str, Any]]:
    """A run's iperf3 flows as saved: rates trimmed and whole, the series, Loom's last
    move of each (``last_moves``)."""
    return [
        {
            "src": f.sender,
            "dst": f.receiver,
            "cport": cport_base + i,
            "mbps": round(f.mbps, 4),
            "whole_mbps": round(f.whole_mbps, 4),
            "last_moved_s": moved[i] if moved else None,
            "retransmits": f.retransmits,
            "error": f.error,
            "series": [round(x, 3) for x in f.series],
        }
        for i, f in enumerate(flows)
    ]


def steady_after(moved: list[float | str | None] | None) -> float | None:
    """When the run's placement held: the last move of any of its flows (0: none moved)."""
    if moved is None:
        return None
    return max((m for m in moved if isinstance(m, float | int)), default=0.0)


def cpu_window(samples: list[float], wall0: float, go: Path, seconds: float) -> list[float]:
    """The CPU idle samples inside the middle 80 % of the flows, the window the throughput
    is measured over. The whole call also holds the start of 2n iperf3 processes and clients
    polling for the start file, which floor the CPU for a moment and say nothing about the
    run; the clients start when ``go`` is created, so its mtime anchors the window."""
    try:
        start = go.stat().st_mtime
    except OSError:
        return list(samples)
    lo, hi = start + 0.1 * seconds, start + 0.9 * seconds
    return [
        x
        for k, x in enumerate(samples)
        if lo <= wall0 + k * CPU_INTERVAL and wall0 + (k + 1) * CPU_INTERVAL <= hi
    ]
