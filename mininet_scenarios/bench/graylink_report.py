"""Figures, verdicts, the printed table and the plot of the gray-link benchmark
(:mod:`mininet_scenarios.bench.graylink`).

Pure (no emulation, no root), so it is tested on synthetic results and re-renders a saved
run: ``python -m mininet_scenarios.bench.graylink_report results/graylink/results.json``.

Times are seconds from the release of the iperf3 clients (the ``go`` start file's mtime).
A poll of Loom's API is a list of ``{"t", "marks", "on_slow", "on_slow_elephants"}``:
``marks`` every direction Loom believed ``suspect`` or ``degraded`` at ``t`` (by label
``src:port->dst:port``), ``on_slow`` how many listed flows had the slow link's two switches
adjacent on their pinned path.
"""

from __future__ import annotations

import itertools
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mininet_scenarios.bench.patterns import CPU_IDLE_MIN
from mininet_scenarios.bench.patterns_report import rerender
from mininet_scenarios.harness.cpu import busiest_thread

DENOMINATOR = "nonblocking"
REFERENCE = "loom-healthy"
AGG_TARGET = 0.95  # loom's whole aggregate over loom-healthy's on the same traffic
WORST_SHARE = 0.9  # the worst flow's rate over the link rate ...
RECOVER_S = 5.0  # ... from this many seconds after the start at the latest
DETECT_S = 5.0  # the slow link suspected within
WINDOW_S = 1.0  # rolling mean of a flow's series
GRAY = ("suspect", "degraded")
OVS_BUSY = 90.0  # % of one CPU: ovs-vswitchd's busiest thread is saturated

Run = Mapping[str, Any]


# --------------------------------------------------------------------------- series


def rolling_mean(series: Sequence[float], n: int) -> list[float]:
    """Mean of the last ``n`` values at each point (fewer at the start)."""
    out = []
    for i in range(len(series)):
        window = series[max(0, i - n + 1) : i + 1]
        out.append(sum(window) / len(window))
    return out


def recovered_after(
    series: Sequence[float],
    threshold: float,
    interval: float = 0.5,
    window_s: float = WINDOW_S,
    length: int | None = None,
) -> float | None:
    """Seconds from the start to the beginning of the first rolling window (``window_s``)
    from which the rolling mean stays at or above ``threshold`` until the end; None if the
    last window is below it. ``length``: only the first intervals count (iperf3's last,
    short interval after ``--seconds`` is no part of the run)."""
    n = max(1, round(window_s / interval))
    values = list(series[:length] if length is not None else series)
    roll = rolling_mean(values, n)
    start = None
    for i in range(len(roll) - 1, -1, -1):
        if roll[i] < threshold:
            break
        start = i
    if start is None:
        return None
    return round(max(0, start + 1 - n) * interval, 3)


def worst_flow(flows: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the flow with the lowest whole rate (first byte to last)."""
    rated = [(f["whole_mbps"], i) for i, f in enumerate(flows) if f.get("whole_mbps") is not None]
    return min(rated)[1] if rated else None


# --------------------------------------------------------------------------- Loom's API


def on_path(path: Sequence[str] | None, a: str, b: str, alias: Mapping[str, str]) -> bool:
    """Whether ``a`` and ``b`` are adjacent on ``path`` (switch names as Loom gives them,
    mapped through ``alias``, e.g. a dpid in hex, to graph names), in either order."""
    if not path:
        return False
    names = [alias.get(x, x) for x in path]
    return any({u, v} == {a, b} for u, v in itertools.pairwise(names))


def link_label(src: Sequence[int], dst: Sequence[int], names: Mapping[int, str]) -> str:
    """``a0_0:3->c1:1`` for a directed link given as ``[dpid, port]`` ends."""
    return (
        f"{names.get(int(src[0]), hex(src[0]))}:{src[1]}"
        f"->{names.get(int(dst[0]), hex(dst[0]))}:{dst[1]}"
    )


def marked_links(topology: Mapping[str, Any], names: Mapping[int, str]) -> dict[str, str]:
    """Directions of ``GET /loom/v1/topology`` whose capacity belief is ``suspect`` or
    ``degraded``: label -> source."""
    return {
        link_label(x["src"], x["dst"], names): x["capacity_source"]
        for x in topology.get("links", [])
        if x.get("capacity_source") in GRAY
    }


def on_slow(
    flows: Iterable[Mapping[str, Any]], a: str, b: str, alias: Mapping[str, str]
) -> tuple[int, int]:
    """Listed flows (and elephants among them) whose pinned path crosses ``a``-``b``."""
    on = [f for f in flows if on_path(f.get("path"), a, b, alias)]
    return len(on), sum(1 for f in on if f.get("elephant"))


def gray_times(
    poll: Sequence[Mapping[str, Any]], slow: Sequence[str], seconds: float
) -> dict[str, Any]:
    """From a run's polls: detection (first poll showing a direction of the slow link
    ``suspect`` or ``degraded``), confirmation (first ``degraded``), the last poll within
    the run with a listed flow (an elephant) pinned across it, and every other direction
    ever marked (false detections)."""
    ok = [p for p in poll if "marks" in p]
    detect = next((p["t"] for p in ok if any(s in p["marks"] for s in slow)), None)
    confirm = next((p["t"] for p in ok if any(p["marks"].get(s) == "degraded" for s in slow)), None)
    inside = [p for p in ok if p["t"] <= seconds]
    used = [p["t"] for p in inside if p.get("on_slow")]
    elephants = [p["t"] for p in inside if p.get("on_slow_elephants")]
    other = sorted({m for p in ok for m in p["marks"] if m not in slow})
    return {
        "detection_s": detect,
        "confirmation_s": confirm,
        "last_use_s": max(used) if used else None,
        "last_elephant_use_s": max(elephants) if elephants else None,
        "on_slow_at_end": bool(inside and inside[-1].get("on_slow")),
        "other_marked": other,
        "polls": len(ok),
        "poll_errors": len(poll) - len(ok),
    }


def ovs_window(
    samples: Sequence[tuple[float, dict[int, tuple[str, float]]]], lo: float, hi: float
) -> dict[str, Any]:
    """ovs-vswitchd's CPU between the first sample at or after ``lo`` and the last at or
    before ``hi`` (``(time, thread_cpu_seconds)`` pairs): seconds used, their share of one
    CPU, and its busiest thread's share (one saturated thread caps the whole fabric)."""
    inside = [s for s in samples if lo <= s[0] <= hi and s[1]]
    if len(inside) < 2:
        return {"ovs_cpu_s": None, "ovs_cpu_pct": None, "ovs_busiest": None, "ovs_span_s": None}
    (t0, a), (t1, b) = inside[0], inside[-1]
    used = sum(c for _, c in b.values()) - sum(c for _, c in a.values())
    span = t1 - t0
    return {
        "ovs_cpu_s": round(used, 2),
        "ovs_cpu_pct": round(100 * used / span, 1) if span > 0 else None,
        "ovs_busiest": busiest_thread(a, b, span),
        "ovs_span_s": round(span, 2),
    }


# --------------------------------------------------------------------------- ratios, verdicts


def _key(r: Run) -> tuple[str, int]:
    return str(r["case"]), int(r["seed"])


def _whole(r: Run | None) -> float | None:
    x = None if r is None else r.get("whole_aggregate_mbps")
    return None if x is None else float(x)


def add_ratios(runs: Sequence[dict[str, Any]]) -> None:
    """Each run's whole aggregate over ``nonblocking``'s and ``loom-healthy``'s on the same
    (case, seed), set as ``ratio_nonblocking`` and ``ratio_healthy`` (None when missing)."""
    base = {(r["mode"], *_key(r)): r for r in runs}
    for r in runs:
        mine = _whole(r)
        for mode, field in ((DENOMINATOR, "ratio_nonblocking"), (REFERENCE, "ratio_healthy")):
            d = _whole(base.get((mode, *_key(r))))
            r[field] = round(mine / d, 4) if mine is not None and d else None


def verdicts(loom: Run, healthy: Run | None) -> list[tuple[str, bool | None]]:
    """loom's three targets on one (case, seed): the text of each and whether it is met
    (None: not measured)."""
    rate = float(loom["link_rate_mbps"])
    out: list[tuple[str, bool | None]] = []
    ratio = None
    if _whole(loom) is not None and _whole(healthy):
        ratio = float(_whole(loom) or 0.0) / float(_whole(healthy) or 1.0)
    out.append(
        (
            f"whole aggregate / loom-healthy {_num(ratio, 3)} (target >= {AGG_TARGET:g})",
            None if ratio is None else ratio >= AGG_TARGET,
        )
    )
    rec = loom.get("worst_recovered_s")
    out.append(
        (
            f"worst flow >= {WORST_SHARE:g} x {rate:g} Mbit/s from "
            f"{'never' if rec is None else f'{rec:g} s'} (target <= {RECOVER_S:g} s)",
            None if _whole(loom) is None else rec is not None and rec <= RECOVER_S,
        )
    )
    det = loom.get("detection_s")
    early = loom.get("detection_from_history_s")
    if loom.get("history_s"):  # times from the history's start, when traffic first flowed
        text = "never" if early is None else f"{early:.1f} s into the history"
        measured = _num(loom.get("detection_s"), 1)
        det, text = early, f"{text} ({measured} s from the measured flows)"
    else:
        text = "never" if det is None else f"{det:.1f} s"
    out.append(
        (
            f"detection {text} (target <= {DETECT_S:g} s)",
            None if _whole(loom) is None else det is not None and det <= DETECT_S,
        )
    )
    return out


# --------------------------------------------------------------------------- table


def _num(x: Any, digits: int = 2) -> str:
    return "-" if x is None else f"{float(x):.{digits}f}"


COLUMNS = [
    "mode",
    "whole",
    "trim",
    "/nb",
    "/healthy",
    "worst (/R)",
    ">=0.9R from",
    "detect",
    "confirm",
    "last use (eleph.)",
    "other marked",
    "cpu idle mean/min",
    "ovs cpu s (% 1cpu, busiest)",
    "ctl cpu %",
    "alive",
]


def row(r: Run) -> list[str]:
    if r.get("error"):
        return [r["mode"], f"FAILED: {r['error']}"[:60], *[""] * (len(COLUMNS) - 2)]
    rate = float(r["link_rate_mbps"])
    worst = r.get("worst_whole_mbps")
    busy = r.get("ovs_busiest") or {}
    rec = r.get("worst_recovered_s")
    ovs = (
        f"{_num(r.get('ovs_cpu_s'), 1)} ({_num(r.get('ovs_cpu_pct'), 0)}%,"
        f" {_num(busy.get('cpu_pct'), 0)}%)"
    )
    return [
        r["mode"],
        _num(r.get("whole_aggregate_mbps")),
        _num(r.get("aggregate_mbps")),
        _num(r.get("ratio_nonblocking"), 3),
        _num(r.get("ratio_healthy"), 3),
        f"{_num(worst)} ({_num(None if worst is None else worst / rate)})",
        "never" if rec is None else f"{rec:g}",
        _num(r.get("detection_s"), 1),
        _num(r.get("confirmation_s"), 1),
        f"{_num(r.get('last_use_s'), 1)} ({_num(r.get('last_elephant_use_s'), 1)})",
        str(len(r.get("other_marked") or [])) if r.get("polls") else "-",
        f"{_num(r.get('cpu_idle_mean'), 0)}/{_num(r.get('cpu_idle_min'), 0)}",
        ovs,
        _num(r.get("ctl_cpu_pct"), 0),
        "yes" if r.get("controller_alive") else "NO",
    ]


def _grid(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [line.format(*rows[0]), line.format(*("-" * w for w in widths))]
    return out + [line.format(*r).rstrip() for r in rows[1:]]


def format_table(doc: Mapping[str, Any]) -> str:
    """Per (case, seed): one row per mode, then loom's verdicts and the links marked that
    are not the slow one."""
    runs = list(doc["runs"])
    out = [
        f"{doc.get('fabric', '?')} at {doc.get('link_rate_mbps', 0):g} Mbit/s, slow link at"
        f" {doc.get('slow_share', 0.25):g}x; Mbit/s of whole flows (first byte to last) and"
        " of their middle 80 % (trim); /nb, /healthy: whole aggregate over nonblocking's and"
        " loom-healthy's; times in s from the clients' start; last use: last poll with a"
        " listed flow (an elephant) pinned across the slow link",
    ]
    keys = sorted({_key(r) for r in runs}, key=lambda k: (list(doc["cases"]).index(k[0]), k[1]))
    for case, seed in keys:
        mine = {r["mode"]: r for r in runs if _key(r) == (case, seed)}
        slow = next((r.get("slow_link") for r in mine.values() if r.get("slow_link")), "?")
        out += ["", f"{case} (slow link {slow}), seed {seed}:"]
        out += _grid([COLUMNS, *(row(mine[m]) for m in doc["modes"] if m in mine)])
        if "loom" in mine and not mine["loom"].get("error"):
            for text, ok in verdicts(mine["loom"], mine.get(REFERENCE)):
                out.append(f"  loom {text}: {'-' if ok is None else 'yes' if ok else 'NO'}")
        for m in doc["modes"]:
            other = (mine.get(m) or {}).get("other_marked")
            if other:
                out.append(f"  {m}: other directions marked: {', '.join(other)}")
    versions = Counter(_version(r.get("loom")) for r in runs if r.get("loom"))
    out += ["", *(f"controller {v}: {n} runs" for v, n in versions.items())] if versions else []
    return "\n".join(out)


def _version(v: Mapping[str, Any]) -> str:
    dirty = "+dirty" if v.get("dirty") else ""
    return f"{v.get('commit')}{dirty} (controller/*.py sha256 {v.get('controller_sha256')})"


def progress_line(rec: Run) -> str:
    """One run in a line, with warnings (a dead controller, failed flows, directions
    marked that are not the slow link's, a CPU-bound emulation)."""
    head = f"{rec['case']:<8} seed {rec['seed']} {rec['mode']:<12}"
    if rec.get("error"):
        return f"{head} FAILED {rec['error']}"
    notes = [] if rec.get("controller_alive") else ["controller DEAD"]
    if rec.get("flow_errors"):
        notes.append(f"{rec['flow_errors']} flows failed")
    if rec.get("other_marked"):
        notes.append(f"other directions marked: {', '.join(rec['other_marked'])}")
    busy = (rec.get("ovs_busiest") or {}).get("cpu_pct")
    if (rec.get("cpu_idle_mean") or 100) < CPU_IDLE_MIN or (busy or 0) > OVS_BUSY:
        notes.append("CPU-bound (machine idle or ovs-vswitchd's busiest thread)")

    def fmt(key: str) -> str:
        x = busy if key == "busy" else rec.get(key)
        return "-" if x is None else f"{x:.3g}"

    return (
        f"{head} whole {fmt('whole_aggregate_mbps')} Mbit/s (/nb {fmt('ratio_nonblocking')},"
        f" /healthy {fmt('ratio_healthy')})  worst {fmt('worst_whole_mbps')}, >=0.9R from"
        f" {fmt('worst_recovered_s')} s  detect {fmt('detection_s')} confirm"
        f" {fmt('confirmation_s')} last use {fmt('last_use_s')}  cpu idle"
        f" {fmt('cpu_idle_mean')}/{fmt('cpu_idle_min')} %  ovs {fmt('ovs_cpu_s')} s (busiest"
        f" thread {fmt('busy')} %)  controller {fmt('ctl_cpu_pct')} %"
        + (f"  WARNING {'; '.join(notes)}" if notes else "")
    )


# --------------------------------------------------------------------------- figure


def plot(doc: Mapping[str, Any], path: Path) -> Path | None:
    """Cases down, modes across: the worst flow's rate (its 1 s rolling mean bold) over
    time per seed, the link rate and 0.9 of it, detection (orange), confirmation (red)
    and the last use of the slow link (grey dotted)."""
    runs = [r for r in doc["runs"] if r.get("worst_series")]
    if not runs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = [c for c in doc["cases"] if any(r["case"] == c for r in runs)]
    modes = [m for m in doc["modes"] if any(r["mode"] == m for r in runs)]
    fig, axes = plt.subplots(
        len(cases), len(modes), figsize=(3.2 * len(modes), 2.6 * len(cases)), squeeze=False
    )
    rate = float(doc["link_rate_mbps"])
    dt = float(doc.get("interval_s", 0.5))
    for i, case in enumerate(cases):
        for j, mode in enumerate(modes):
            ax = axes[i][j]
            for r in (r for r in runs if (r["case"], r["mode"]) == (case, mode)):
                ys = r["worst_series"]
                xs = [(k + 1) * dt for k in range(len(ys))]
                ax.plot(xs, ys, linewidth=0.6, alpha=0.5, color="tab:blue")
                roll = rolling_mean(ys, max(1, round(WINDOW_S / dt)))
                ax.plot(xs, roll, linewidth=1.4, color="tab:blue")
                for key, color, style in (
                    ("detection_s", "tab:orange", "-"),
                    ("confirmation_s", "tab:red", "-"),
                    ("last_use_s", "tab:gray", ":"),
                ):
                    if r.get(key) is not None:
                        ax.axvline(r[key], color=color, linestyle=style, linewidth=1)
            ax.axhline(rate, color="black", linewidth=0.6)
            ax.axhline(WORST_SHARE * rate, color="black", linestyle="--", linewidth=0.6)
            ax.set_ylim(0, rate * 1.15)
            ax.set_title(f"{case}: {mode}", fontsize=8)
            ax.tick_params(labelsize=7)
            if i == len(cases) - 1:
                ax.set_xlabel("s from start", fontsize=7)
            if j == 0:
                ax.set_ylabel("worst flow, Mbit/s", fontsize=7)
    fig.suptitle(
        f"{doc.get('fabric', '?')} at {rate:g} Mbit/s, one link at {doc.get('slow_share'):g}x:"
        " worst flow; detection orange, confirmation red, last use grey",
        fontsize=8,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def report(doc: dict[str, Any], out_dir: Path) -> tuple[str, Path | None]:
    """Ratios set on the runs, the table (also in ``table.txt``) and the figure."""
    add_ratios(doc["runs"])
    table = format_table(doc)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "table.txt").write_text(table + "\n")
    return table, plot(doc, out_dir / "graylink.png")


def main(argv: list[str] | None = None) -> int:
    """Re-print the table and re-draw the figure of a saved ``results.json``."""
    return rerender(argv, "mininet_scenarios.bench.graylink_report", report)


if __name__ == "__main__":
    sys.exit(main())
