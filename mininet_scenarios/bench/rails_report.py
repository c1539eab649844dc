"""The rails benchmark's figures, table and plot, from its saved runs.

Kept apart from :mod:`.rails` so the figures can be recomputed from any ``results.json``
without a network: ``figures(json.load(f)["runs"])``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# docs/benchmarks.md §15: the rail-aware all-reduce >= 0.95 of the same job on one switch
TARGET = 0.95
ONE_SWITCH = "one-switch"
MODES = (ONE_SWITCH, "ecmp", "loom")  # the order the networks are started in
COLUMNS = ("ecmp/default", "loom/default", "loom/rail", "one-switch/default", "one-switch/rail")
COLORS = {
    "ecmp/default": "#9e9e9e",
    "loom/default": "#7fb3d5",
    "loom/rail": "#2b6cb0",
    "one-switch/default": "#48bb78",
    "one-switch/rail": "#2f855a",
}
SCENARIO_TEXT = {
    "allreduce": "ring all-reduce, every NIC",
    "alltoall": "all-to-all, every NIC",
    "jobs": "jobs at once (each job)",
}
# ovs-vswitchd's forwarding thread at or above this % of a core: the emulator's figure
OVS_BOUND = 90.0


def _ratios(rec: dict[str, Any], ref: dict[str, Any] | None) -> tuple[list[float], list[float]]:
    """Each job's busbw / link, and / the reference run's same job (matched by position)."""
    jobs = rec["jobs"]
    link = [j["busbw_mbps"] / j["link_mbps"] for j in jobs]
    if ref is None or len(ref["jobs"]) != len(jobs):
        return link, []
    return link, [j["busbw_mbps"] / r["busbw_mbps"] for j, r in zip(jobs, ref["jobs"], strict=True)]


def figures(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``scenario -> "mode/order" -> figures``: ``over_link`` and ``over_one_switch``
    (median over the run's jobs; ``worst_…``: the lowest job), ``cross_rail_hops`` (summed
    over the jobs' orders) and ``ovs_busy`` (% of a core). The reference is the
    one-switch run of the same scenario and order, else of the default order."""
    ok = [r for r in runs if r.get("jobs") and "error" not in r]
    ref = {(r["scenario"], r["order"]): r for r in ok if r["mode"] == ONE_SWITCH}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in ok:
        base = ref.get((r["scenario"], r["order"])) or ref.get((r["scenario"], "default"))
        link, vs = _ratios(r, base)
        out.setdefault(r["scenario"], {})[f"{r['mode']}/{r['order']}"] = {
            "over_link": statistics.median(link),
            "worst_over_link": min(link),
            "over_one_switch": statistics.median(vs) if vs else None,
            "worst_over_one_switch": min(vs) if vs else None,
            "cross_rail_hops": sum(len(j["cross_rail_hops"]) for j in r["jobs"]),
            "ovs_busy": r.get("ovs_busy_mean"),
            "check_ok": all(j.get("check_ok") for j in r["jobs"]),
        }
    return out


def verdict(figs: dict[str, dict[str, dict[str, Any]]]) -> str:
    """The target's line: the rail-aware all-reduce / one switch, ECMP's beside it."""
    row = figs.get("allreduce", {})
    rail = row.get("loom/rail", {}).get("over_one_switch")
    ecmp = row.get("ecmp/default", {})
    if rail is None:
        return f"target: rail-aware all-reduce >= {TARGET:.2f} of one switch: not measured"
    met = "met" if rail >= TARGET else "NOT met"
    beside = (
        f"; ECMP with the default order {ecmp['over_one_switch']:.3f} (of that order on one"
        f" switch; {ecmp['over_link']:.3f} of link)"
        if ecmp.get("over_one_switch") is not None
        else ""
    )
    return f"target: rail-aware all-reduce >= {TARGET:.2f} of one switch: {rail:.3f}, {met}{beside}"


def _cell(x: Any, fmt: str) -> str:
    return f"{x:{fmt}}" if x is not None else "-"


def table(doc: dict[str, Any]) -> str:
    figs = figures(doc["runs"])
    head = f"{'scenario':<30}{'figure':<20}" + "".join(f"{c:>20}" for c in COLUMNS)
    lines = [head]
    rows = (
        ("busbw / link", "over_link", ".3f"),
        ("busbw / one switch", "over_one_switch", ".3f"),
        ("worst job / 1 switch", "worst_over_one_switch", ".3f"),
        ("cross-rail hops", "cross_rail_hops", "d"),
        ("ovs thread % core", "ovs_busy", ".0f"),
    )
    for scen, cols in figs.items():
        for i, (label, key, fmt) in enumerate(rows):
            if key.startswith("worst") and scen != "jobs":
                continue
            name = SCENARIO_TEXT.get(scen, scen) if i == 0 else ""
            cells = "".join(f"{_cell(cols.get(c, {}).get(key), fmt):>20}" for c in COLUMNS)
            lines.append(f"{name:<30}{label:<20}{cells}")
    lines += ["", verdict(figs)]
    bound = [
        f"{s} {c}"
        for s, cols in figs.items()
        for c, f in cols.items()
        if (f.get("ovs_busy") or 0) >= OVS_BOUND
    ]
    if bound:
        lines.append(
            f"the emulator's (ovs-vswitchd's forwarding thread >= {OVS_BOUND:g} % of a core):"
            f" {', '.join(bound)}"
        )
    lines += ["", f"{'run':<30}{'busbw Mbit/s per job':>26}{'alone':>14}{'ovs %':>8}{'idle %':>8}"]
    for r in doc["runs"]:
        if "error" in r or not r.get("jobs"):
            lines.append(f"{r['key']:<30}  FAILED: {str(r.get('error', '?'))[:70]}")
            continue
        bus = ",".join(f"{j['busbw_mbps']:.2f}" for j in r["jobs"])
        alone = ",".join(f"{j['alone_mbps']:.2f}" for j in r["jobs"] if j.get("alone_mbps"))
        ok = "" if all(j.get("check_ok") for j in r["jobs"]) else "  WRONG RESULT"
        lines.append(
            f"{r['key']:<30}{bus:>26}{alone or '-':>14}{_cell(r.get('ovs_busy_mean'), '.0f'):>8}"
            f"{_cell(r.get('cpu_idle_mean'), '.0f'):>8}{ok}"
        )
    return "\n".join(lines)


def plot(doc: dict[str, Any], out: Path) -> Path | None:
    """Two panels, busbw / link and / one switch, bars per scenario and mode/order, the
    target on the all-reduce; hatched bars where ovs-vswitchd's thread was the limit."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figs = figures(doc["runs"])
    scens = list(figs)
    if not scens:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6), sharey=True)
    width = 0.16
    for ax, key, title in (
        (axes[0], "over_link", "busbw / link rate"),
        (axes[1], "over_one_switch", "busbw / same job on one switch"),
    ):
        for j, scen in enumerate(scens):
            cols = [c for c in COLUMNS if figs[scen].get(c, {}).get(key) is not None]
            for i, col in enumerate(cols):
                f = figs[scen][col]
                x = j + (i - (len(cols) - 1) / 2) * width
                hatch = "//" if (f.get("ovs_busy") or 0) >= OVS_BOUND else None
                bars = ax.bar([x], [f[key]], width, color=COLORS[col], hatch=hatch, label=col)
                ax.bar_label(bars, fmt="%.2f", fontsize=7)
        if key == "over_one_switch" and "allreduce" in scens:
            j = scens.index("allreduce")
            ax.hlines(TARGET, j - 0.45, j + 0.45, color="#c53030", linestyle="--", label="target")
        ax.set_xticks(range(len(scens)), [SCENARIO_TEXT.get(s, s) for s in scens], fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylim(0, 1.35)
    handles, labels = axes[1].get_legend_handles_labels()
    seen = dict(zip(labels, handles, strict=True))
    fig.legend(seen.values(), seen.keys(), fontsize=8, loc="lower center", ncol=6, frameon=False)
    p = doc.get("fabric", {})
    a = doc["args"]
    fig.suptitle(
        f"gloo on a rail-optimized fabric: {p.get('servers')} servers x {p.get('nics')} NICs,"
        f" {p.get('spines')} spines, {a['rate']:g} Mbit/s, {a['mib']:g} MiB, plain fabric",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    path = out / "rails.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
