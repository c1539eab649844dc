"""The collectives benchmark's figures, table and plot, from its saved runs.

Kept apart from :mod:`.bench_collectives` so the figures can be recomputed from any
``results.json`` without a network: ``figures(json.load(f)["runs"])``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mininet_scenarios.workloads.collectives.model import tcp_ceiling

# docs/benchmarks.md §2: a registered random-order all-reduce >= 0.95 of the link; under
# bulk traffic >= 0.90 of its idle busbw; all-to-all and all-gather >= 0.90. Reduce-scatter
# has none: gloo sends all-reduce's bytes for it (see .collectives), so busbw / link by the
# nccl-tests convention stays under about 0.5 on any fabric.
TARGETS = {"allreduce-random": 0.95, "protection": 0.90, "alltoall": 0.90, "allgather": 0.90}
# unregistered: Loom, job not told; one-switch: the same hosts on one switch, no fabric
MODE_ORDER = ("one-switch", "ecmp", "unregistered", "no-qos", "loom")
MODE_COLORS = {
    "one-switch": "#48bb78",
    "ecmp": "#9e9e9e",
    "unregistered": "#7fb3d5",
    "no-qos": "#f0a04b",
    "loom": "#2b6cb0",
}
ONE_SWITCH = "one-switch"
FIGURES = (
    "allreduce-random",
    "allreduce-topology",
    "protection",
    "protection-jumbo",
    "alltoall",
    "alltoall-vs-one-switch",
    "allgather",
    "reducescatter",
)


def _median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def figures(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """``scenario -> mode -> figure`` (median over seeds) from the saved runs:

    * ``allreduce-random`` / ``allreduce-topology`` / ``alltoall`` / ``allgather`` /
      ``reducescatter``: busbw / link rate;
    * ``protection`` / ``protection-jumbo``: busbw with background (bulk in standard /
      jumbo frames; runs saved without ``bulk_frames`` had jumbo ones) / busbw idle, same
      mode and seed;
    * ``alltoall-vs-one-switch``: all-to-all busbw / the same rank order's on one switch
      (what the hosts get with no fabric between them).
    """
    ok = [r for r in runs if r.get("busbw_over_link") is not None]

    def pick(**kw: Any) -> list[dict[str, Any]]:
        return [r for r in ok if all(r.get(k) == v for k, v in kw.items())]

    out: dict[str, dict[str, float | None]] = {}
    for mode in MODE_ORDER:
        for name, sel in (
            ("allreduce-random", {"op": "all_reduce", "order": "random", "background": False}),
            ("allreduce-topology", {"op": "all_reduce", "order": "topology"}),
            ("alltoall", {"op": "all_to_all"}),
            ("allgather", {"op": "all_gather"}),
            ("reducescatter", {"op": "reduce_scatter"}),
        ):
            vals = [r["busbw_over_link"] for r in pick(mode=mode, **sel)]
            if vals:
                out.setdefault(name, {})[mode] = _median(vals)
        for name, frames in (("protection", "standard"), ("protection-jumbo", "jumbo")):
            ratios = []
            for bg in pick(mode=mode, op="all_reduce", background=True):
                if bg.get("bulk_frames", "jumbo") != frames:
                    continue
                idle = pick(
                    mode=mode, op="all_reduce", order="random", seed=bg["seed"], background=False
                )
                if idle:
                    ratios.append(bg["busbw_mbps"] / idle[-1]["busbw_mbps"])
            if ratios:
                out.setdefault(name, {})[mode] = _median(ratios)
    alone = out.get("alltoall", {}).get(ONE_SWITCH)
    if alone:
        out["alltoall-vs-one-switch"] = {
            m: v / alone for m, v in out["alltoall"].items() if v is not None and m != ONE_SWITCH
        }
    return out


def table(doc: dict[str, Any]) -> str:
    figs = figures(doc["runs"])
    lines = [
        f"{'scenario':<24}{'figure':<30}" + "".join(f"{m:>14}" for m in MODE_ORDER) + "  target",
    ]
    what = {
        "allreduce-random": "busbw/link, random order",
        "allreduce-topology": "busbw/link, topology order",
        "protection": "busbw bulk-loaded / idle",
        "protection-jumbo": "same, bulk in jumbo frames",
        "alltoall": "busbw/link, random order",
        "alltoall-vs-one-switch": "busbw / one switch's",
        "allgather": "busbw/link, random order",
        "reducescatter": "busbw/link (gloo: 2x bytes)",
    }
    for name in FIGURES:
        if name not in figs:
            continue
        cells = "".join(
            f"{figs[name][m]:>14.3f}" if figs[name].get(m) is not None else f"{'-':>14}"
            for m in MODE_ORDER
        )
        target = f"  loom >= {TARGETS[name]:.2f}" if name in TARGETS else ""
        lines.append(f"{name:<24}{what[name]:<30}{cells}{target}")
    lines.append("")
    lines.append(
        f"{'run':<40}{'busbw Mbit/s':>13}{'/link':>8}{'iter s':>16}{'cpu idle':>10}{'ovs wait':>10}"
        f"{'wire':>7}{'ring':>10}"
    )
    for r in doc["runs"]:
        if r.get("busbw_over_link") is None:
            lines.append(f"{r['key']:<40}  FAILED: {r.get('error', '?')[:60]}")
            continue
        its = ",".join(f"{s:.0f}" for s in r["seconds"])
        idle, ovs = r.get("cpu_idle_mean"), r.get("ovs_wait_mean")
        lines.append(
            f"{r['key']:<40}{r['busbw_mbps']:>13.2f}{r['busbw_over_link']:>8.3f}{its:>16}"
            f"{(f'{idle:.0f} %' if idle is not None else '-'):>10}"
            f"{(f'{ovs:.0f} %' if ovs is not None else '-'):>10}"
            f"{(f'{wire:.2f}' if (wire := r.get('wire_factor')) is not None else '-'):>7}"
            f"{r.get('ring_direction_seen') or '-':>10}"
        )
    return "\n".join(lines)


def plot(doc: dict[str, Any], out: Path) -> Path | None:
    """Bars per scenario and mode with the 0.90 target line (matplotlib, Agg)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figs = figures(doc["runs"])
    names = [n for n in FIGURES if n in figs]
    if not names:
        return None
    labels = {
        "allreduce-random": "all-reduce\nrandom order\nbusbw / link",
        "allreduce-topology": "all-reduce\ntopology order\nbusbw / link",
        "protection": "all-reduce\nwith bulk / idle",
        "protection-jumbo": "all-reduce with\njumbo bulk / idle",
        "alltoall": "all-to-all\nbusbw / link",
        "alltoall-vs-one-switch": "all-to-all\nbusbw / on\none switch",
        "allgather": "all-gather\nbusbw / link",
        "reducescatter": "reduce-scatter\nbusbw / link\n(gloo: all-reduce)",
    }
    colors = MODE_COLORS
    fig, ax = plt.subplots(figsize=(max(10.5, 1.5 * len(names) + 1.5), 4.8))
    width = 0.26
    shown: set[str] = set()
    for j, name in enumerate(names):
        modes = [m for m in MODE_ORDER if figs[name].get(m) is not None]
        for i, mode in enumerate(modes):
            value = figs[name][mode]
            assert value is not None
            x = j + (i - (len(modes) - 1) / 2) * width
            label = mode if mode not in shown else None
            shown.add(mode)
            bars = ax.bar([x], [value], width, label=label, color=colors[mode])
            ax.bar_label(bars, fmt="%.2f", fontsize=8)
    targeted = [(j, TARGETS[name]) for j, name in enumerate(names) if name in TARGETS]
    for k, (j, target) in enumerate(targeted):
        mark = "target" if k == 0 else "_nolegend_"
        ax.hlines(target, j - 0.45, j + 0.45, color="#c53030", linestyle="--", label=mark)
    ceiling = tcp_ceiling(int(doc["args"].get("mtu", 1500)))
    ax.axhline(ceiling, color="#555", linestyle=":", linewidth=1, label="HTB+TCP ceiling")
    ax.set_xticks(range(len(names)), [labels[n] for n in names], fontsize=9)
    ax.set_ylim(0, 1.22)
    ax.set_ylabel("ratio")
    a = doc["args"]
    ax.set_title(
        f"gloo collectives, k=4 fat-tree, 16 ranks, {a['mib']:g} MiB,"
        f" {a['rate']:g} Mbit/s links, MTU {a.get('mtu', 1500)}"
        + (": plain fabric, Loom told nothing" if doc.get("plain") else "")
    )
    ax.legend(fontsize=8, loc="upper center", ncol=5, frameon=False)
    fig.tight_layout()
    path = out / "collectives.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
