"""The TE model's summary, tables and plot, from its ``results.json`` document.

Kept apart from :mod:`.te_model` so a saved document can be re-read without the core.
Every figure is a ratio to ``nonblocking`` on the same matrix; medians are taken over
seeds after dividing (for ``ecmp``, of each seed's median over hash draws, the range over
every draw), as the patterns benchmark does.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mininet_scenarios.bench.patterns_report import TARGET, TRIMMED, WHOLE, Cell

Row = Mapping[str, Any]
LOOM_MODES = ("loom", "loom-moves")
TOLERANCE = 0.05  # the check: model within this share of the measured ratio
MODE_COLOR = {"ecmp": "tab:orange", "loom": "tab:blue", "loom-moves": "tab:green"}


def summary(runs: Sequence[Row]) -> list[dict[str, Any]]:
    """Per (fabric, pattern): every mode's figures over seeds."""
    cells: dict[tuple[str, str], list[Row]] = {}
    for r in runs:
        cells.setdefault((r["fabric"], r["pattern"]), []).append(r)
    out = []
    for (fabric, pattern), rs in cells.items():
        cell: dict[str, Any] = {
            "fabric": fabric,
            "pattern": pattern,
            "permutation": rs[0]["permutation"],
            "seeds": [r["seed"] for r in rs],
            "flows": rs[0]["flows"],
        }
        if all("ecmp" in r for r in rs):
            draws = [x for r in rs for x in r["ecmp"]["ratios"]]
            cell["ecmp"] = {
                "median": statistics.median(r["ecmp"]["median"] for r in rs),
                "min": min(draws),
                "max": max(draws),
                "worst_over_link": min(r["ecmp"]["worst_over_link"] for r in rs),
            }
        for mode in LOOM_MODES:
            if not all(mode in r for r in rs):
                continue
            got = [r[mode] for r in rs]
            cell[mode] = {
                **{f: statistics.median(g[f] for g in got) for f in ("steady", "trimmed", "whole")},
                "steady_min": min(g["steady"] for g in got),
                "worst_over_link": min(g["worst_over_link"] for g in got),
                "worst_whole_over_link": min(g["worst_whole_over_link"] for g in got),
                "moves": max(g["moves"] for g in got),
                "placement_steady_s": max(g["placement_steady_s"] for g in got),
                "tracked_data_flows": min(g["tracked_data_flows"] for g in got),
                "core_s": max(g["core_s"] for g in got),
                "wall_s": max(g["wall_s"] for g in got),
            }
            if mode == "loom" and cell["permutation"]:
                cell[mode]["meets_target"] = cell[mode]["steady"] >= TARGET
        out.append(cell)
    return out


def table(doc: Mapping[str, Any]) -> str:
    """Fabrics and patterns down; ecmp and loom's figures across (ratios to nonblocking)."""
    cells = summary(doc["runs"])
    loom = next((m for m in LOOM_MODES if m in doc["modes"]), None)
    lines = [
        f"ratio to nonblocking, median over seeds {doc['seeds']}; ecmp: [min-max] over"
        f" {doc['draws']} hash draws each; {loom or 'loom'}: {doc['seconds']:g} simulated s,"
        " steady = rates at the end, whole = first byte to last",
    ]
    if doc.get("max_flows") is not None:
        lines.append(f"DIAGNOSTIC: the core tracks at most {doc['max_flows']} flows")
    if doc.get("max_candidates") is not None:
        lines.append(f"DIAGNOSTIC: {doc['max_candidates']} candidate paths per flow")
    head = (
        f"{'fabric':<16}{'pattern':<15}{'flows':>6}  {'ecmp':<20}{'steady':>7}{'whole':>7}"
        f"{'worst':>7}{'tracked':>9}{'moves':>7}{'steady@':>8}{'core s':>8}{'wall s':>8}  target"
    )
    lines += [head, "-" * len(head)]
    for c in cells:
        e = c.get("ecmp")
        ecmp = f"{e['median']:.3f} [{e['min']:.2f}-{e['max']:.2f}]" if e else "-"
        row = f"{c['fabric']:<16}{c['pattern']:<15}{c['flows']:>6}  {ecmp:<20}"
        lo = c.get(loom) if loom else None
        if lo:
            verdict = "-"
            if "meets_target" in lo:
                verdict = f"{'yes' if lo['meets_target'] else 'NO'} (>= {TARGET:.2f})"
            row += (
                f"{lo['steady']:>7.3f}{lo['whole']:>7.3f}{lo['worst_over_link']:>7.2f}"
                f"{lo['tracked_data_flows']:>9}{lo['moves']:>7}{lo['placement_steady_s']:>7.1f}s"
                f"{lo['core_s']:>8.1f}{lo['wall_s']:>8.1f}  {verdict}"
            )
        lines.append(row)
    lines.append(
        "worst: the slowest flow at the end / link rate (over seeds); tracked: data flows the"
        " core tracks (fewest over seeds); moves: path changes of data flows (most);"
        " steady@: the last one, s after the start"
    )
    for f in doc.get("fabrics", [doc.get("fabric")]):
        if not f:
            continue
        ups = ", ".join(
            f"{m} up in {f[m]['bringup_wall_s']:.0f} s (core {f[m]['bringup_core_s']:.0f} s),"
            f" all runs {f[m].get('wall_s', 0):.0f} s"
            for m in (*LOOM_MODES, "ecmp")
            if m in f
        )
        lines.append(f"{f['name']}: {ups}")
    return "\n".join(lines)


# -- the k=4 check -------------------------------------------------------------------------
def check_rows(
    runs: Sequence[Row],
    measured: Mapping[str, Mapping[str, Mapping[str, Cell]]],
    patterns: Sequence[str],
    modes: Sequence[str],
) -> list[dict[str, Any]]:
    """Per pattern, mode and figure (trimmed, whole): the measured median ratio, the
    model's, their difference and whether the model is within ``TOLERANCE`` of it."""
    out = []
    for p in patterns:
        rs = [r for r in runs if r["pattern"] == p]
        for mode in modes:
            for figure, name in ((TRIMMED, "trimmed"), (WHOLE, "whole")):
                cell = measured[figure].get(p, {}).get(mode)
                in_range = None
                if mode == "ecmp":
                    model = statistics.median(r[mode]["median"] for r in rs)
                    per_seed = [r[mode]["median"] for r in rs]
                    draws = [x for r in rs for x in r[mode]["ratios"]]
                    if cell is not None and cell.ratios:
                        in_range = all(min(draws) <= x <= max(draws) for x in cell.ratios)
                else:
                    model = statistics.median(r[mode][name] for r in rs)
                    per_seed = [r[mode][name] for r in rs]
                got = cell.median if cell is not None else None
                out.append(
                    {
                        "pattern": p,
                        "mode": mode,
                        "figure": name,
                        "measured": got,
                        "measured_seeds": list(cell.ratios) if cell is not None else [],
                        "model": model,
                        "model_seeds": per_seed,
                        "difference": None if got is None else model - got,
                        "within": None if got is None else abs(model / got - 1) <= TOLERANCE,
                        "in_draw_range": in_range,
                    }
                )
    return out


def check_table(doc: Mapping[str, Any]) -> str:
    rows = doc["check"]
    lines = [
        f"model vs measured ({doc['measured_from']}), ratio to nonblocking, median over seeds;"
        f" ports report {doc['reported_mbps'] or 'the link rate'} Mbit/s",
        f"{'pattern':<15}{'mode':<12}{'figure':<9}{'measured':>9}{'model':>8}{'diff':>8}  within"
        f" ±{TOLERANCE:.0%}   measured seeds / model seeds (ecmp: measured seeds inside the"
        " range of the model's draws?)",
    ]
    for r in rows:
        m = "-" if r["measured"] is None else f"{r['measured']:.3f}"
        d = "-" if r["difference"] is None else f"{r['difference']:+.3f}"
        w = "-" if r["within"] is None else ("yes" if r["within"] else "NO")
        seeds = " ".join(f"{x:.3f}" for x in r["measured_seeds"])
        model = " ".join(f"{x:.3f}" for x in r["model_seeds"])
        inside = r.get("in_draw_range")
        drawn = "" if inside is None else f"  (in draw range: {'yes' if inside else 'no'})"
        lines.append(
            f"{r['pattern']:<15}{r['mode']:<12}{r['figure']:<9}{m:>9}{r['model']:>8.3f}{d:>8}"
            f"  {w:<10}  {seeds} / {model}{drawn}"
        )
    for modes, what in ((LOOM_MODES, "loom"), (("ecmp",), "ecmp")):
        judged = [r for r in rows if r["within"] is not None and r["mode"] in modes]
        if judged:
            lines.append(
                f"{what}: {sum(r['within'] for r in judged)} of {len(judged)} within"
                f" ±{TOLERANCE:.0%} of measured"
                + (
                    f"; measured inside the model's draws in"
                    f" {sum(bool(r['in_draw_range']) for r in judged)} of {len(judged)}"
                    if what == "ecmp"
                    else ""
                )
            )
    return "\n".join(lines)


# -- the plot ------------------------------------------------------------------------------
def plot(doc: Mapping[str, Any], path: Path) -> Path | None:
    """One panel per fabric: per pattern, ecmp (median, bar: range over draws) and loom
    (steady and whole-flow) as ratios to nonblocking; for the check, model beside
    measured per pattern and mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if doc.get("kind") == "check_k4":
        return _plot_check(doc, path, plt)
    cells = summary(doc["runs"])
    fabrics = list(dict.fromkeys(c["fabric"] for c in cells))
    if not fabrics:
        return None
    fig, axes = plt.subplots(1, len(fabrics), figsize=(5 * len(fabrics), 4.5), squeeze=False)
    bars = [("ecmp", "median", "ecmp"), ("loom", "steady", "loom steady")]
    bars += [("loom", "whole", "loom whole"), ("loom-moves", "steady", "loom-moves steady")]
    bars = [b for b in bars if b[0] in doc["modes"]]
    width = 0.8 / max(1, len(bars))
    for ax, fabric in zip(axes[0], fabrics, strict=True):
        mine = [c for c in cells if c["fabric"] == fabric]
        for k, (mode, figure, label) in enumerate(bars):
            xs = [i + (k - (len(bars) - 1) / 2) * width for i in range(len(mine))]
            ys = [c[mode][figure] if mode in c else 0.0 for c in mine]
            err = None
            if mode == "ecmp":
                err = [
                    [c[mode]["median"] - c[mode]["min"] for c in mine],
                    [c[mode]["max"] - c[mode]["median"] for c in mine],
                ]
            color = MODE_COLOR.get(mode, "tab:gray")
            alpha = 0.5 if figure == "whole" else 1.0
            ax.bar(xs, ys, width, yerr=err, color=color, alpha=alpha, label=label, capsize=2)
        ax.axhline(TARGET, color="k", lw=0.8, ls="--")
        ax.set_xticks(range(len(mine)), [c["pattern"] for c in mine], rotation=30, fontsize=8)
        ax.set_ylim(0, 1.1)
        ax.set_title(fabric, fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("aggregate / nonblocking")
    axes[0][0].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_check(doc: Mapping[str, Any], path: Path, plt: Any) -> Path | None:
    rows = [r for r in doc["check"] if r["measured"] is not None]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(max(8, 0.5 * len(rows)), 4.5))
    xs = list(range(len(rows)))
    ax.bar([x - 0.2 for x in xs], [r["measured"] for r in rows], 0.4, label="measured")
    ax.bar([x + 0.2 for x in xs], [r["model"] for r in rows], 0.4, label="model")
    labels = [f"{r['pattern']}\n{r['mode']} {r['figure']}" for r in rows]
    ax.set_xticks(xs, labels, rotation=60, fontsize=7)
    ax.set_ylabel("aggregate / nonblocking")
    ax.set_ylim(0, 1.2)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
