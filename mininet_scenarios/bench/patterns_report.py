"""Ratios, medians, the printed table and the bar chart of the traffic-pattern benchmarks.

Kept apart from :mod:`mininet_scenarios.bench.patterns` (which drives the emulation) so it
can be tested on synthetic results without root, and so a saved ``results.json`` can be
re-plotted (``python -m mininet_scenarios.bench.patterns_report results/patterns/results.json``).

The figure of merit (``docs/benchmarks.md`` §1) is a *ratio measured side by side*: a run's
aggregate throughput divided by the aggregate of the ``nonblocking`` mode on the same matrix
and seed. Absolute Mbit/s drift where other emulations may run at the same time; the ratio to
a run of the same matrix does not, which is why each run is paired with its denominator by
(pattern, seed) and medians are taken over seeds only after dividing.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import networkx as nx

from mininet_scenarios.harness.processes import REPO_ROOT

FAUCET_VENV = REPO_ROOT / ".venv-faucet"
DENOMINATOR = "nonblocking"
TARGET = 0.95
# Ideal-ECMP theory for the k=4 fat-tree (docs/benchmarks.md §1): what hashing can reach at best.
FAT_TREE_ANCHORS: dict[str, dict[str, float]] = {
    "stride4": {"ideal ECMP": 0.62},
    "stride8": {"ideal ECMP": 0.62},
    "randbij": {"ideal ECMP": 0.59},
    "random": {"ideal ECMP": 0.75},
    "stag(0.2,0.3)": {"ideal ECMP": 0.84},
}

Run = Mapping[str, Any]


@dataclass(frozen=True)
class Cell:
    """Ratios of one (pattern, mode) over seeds; ``mbps``: median aggregate, for context."""

    ratios: tuple[float, ...]
    mbps: float | None

    @property
    def median(self) -> float | None:
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def low(self) -> float | None:
        return min(self.ratios) if self.ratios else None

    @property
    def high(self) -> float | None:
        return max(self.ratios) if self.ratios else None


Summary = dict[str, dict[str, Cell]]


def dragonfly_anchors(graph: nx.MultiGraph) -> dict[str, dict[str, float]]:
    """§3 caps for adversarial traffic, as fractions of the link rate per host: minimal routing
    shares the global links between consecutive groups (q of them) among a·p senders;
    Valiant sends everything twice across global links, so at most 0.5."""
    p = graph.graph["params"]
    q = sum(
        1
        for u, v, d in graph.edges(data=True)
        if d["scope"] == "global" and {graph.nodes[u]["group"], graph.nodes[v]["group"]} == {0, 1}
    )
    return {"df-adversarial": {"minimal cap": q / (p["a"] * p["p"]), "Valiant cap": 0.5}}


TRIMMED, WHOLE = "aggregate_mbps", "whole_aggregate_mbps"


def run_ratios(
    runs: Sequence[Run], denominator: str = DENOMINATOR, figure: str = TRIMMED
) -> list[dict[str, Any]]:
    """``{mode, pattern, seed, ratio}`` for every run; ``ratio`` is None when the run failed
    (``figure`` None) or its denominator run (same pattern and seed) is missing, failed or
    carried nothing. ``figure``: the middle-80 % aggregate or the whole-flow one."""
    base = {
        (r["pattern"], r["seed"]): float(r[figure])
        for r in runs
        if r["mode"] == denominator and r.get(figure) is not None
    }
    out = []
    for r in runs:
        d = base.get((r["pattern"], r["seed"]))
        agg = r.get(figure)
        ratio = float(agg) / d if d and agg is not None else None
        out.append({"mode": r["mode"], "pattern": r["pattern"], "seed": r["seed"], "ratio": ratio})
    return out


def summarize(
    runs: Sequence[Run],
    patterns: Sequence[str],
    modes: Sequence[str],
    denominator: str = DENOMINATOR,
    figure: str = TRIMMED,
) -> Summary:
    """``summary[pattern][mode]``: that mode's ratios over seeds (empty when never run)."""
    ratios = run_ratios(runs, denominator, figure)
    out: Summary = {}
    for p in patterns:
        out[p] = {}
        for m in modes:
            rs = tuple(x["ratio"] for x in ratios if (x["pattern"], x["mode"]) == (p, m))
            aggs = [
                float(r[figure])
                for r in runs
                if (r["pattern"], r["mode"]) == (p, m) and r.get(figure) is not None
            ]
            out[p][m] = Cell(
                tuple(r for r in rs if r is not None),
                statistics.median(aggs) if aggs else None,
            )
    return out


def summary_json(summary: Summary) -> dict[str, dict[str, dict[str, Any]]]:
    """The summary as plain JSON: median, min, max, ratios and median Mbit/s per cell."""
    return {
        p: {
            m: {
                "median": c.median,
                "min": c.low,
                "max": c.high,
                "ratios": list(c.ratios),
                "median_aggregate_mbps": c.mbps,
            }
            for m, c in row.items()
        }
        for p, row in summary.items()
    }


def loom_target(pattern: str, whole: bool = False) -> float | None:
    """``docs/benchmarks.md`` §1 targets for ``loom``: 0.95 on permutations and staggered, 0.92 on
    random (whole flows: 0.95 on permutations and random); none on hotspot (a sanity
    check, not a goal)."""
    if pattern.startswith(("stride", "randbij")) or (pattern.startswith("stag(") and not whole):
        return TARGET
    if pattern == "random":
        return TARGET if whole else 0.92
    return None


def verdict(pattern: str, row: Mapping[str, Cell], fabric_kind: str, whole: bool = False) -> str:
    """Does ``loom`` meet its target on this pattern? Fat-tree: the fixed targets above.
    Dragonfly (§3): at least the better of ``minimal`` and ``valiant``, measured side by side."""
    loom = row.get("loom")
    if loom is None or loom.median is None:
        return "-"
    if fabric_kind == "dragonfly":
        rivals = [row[m].median for m in ("minimal", "valiant") if m in row]
        best = max((r for r in rivals if r is not None), default=None)
        if best is None:
            return "-"
        return f"{'yes' if loom.median >= best else 'NO'} ({loom.median - best:+.2f})"
    target = loom_target(pattern, whole)
    if target is None:
        return "-"
    return f"{'yes' if loom.median >= target else 'NO'} (>= {target:.2f})"


def _cell_text(cell: Cell) -> str:
    if cell.median is None:
        return "-"
    if len(cell.ratios) > 1:
        return f"{cell.median:.2f} [{cell.low:.2f}-{cell.high:.2f}]"
    return f"{cell.median:.2f}"


def format_table(
    summary: Summary,
    patterns: Sequence[str],
    modes: Sequence[str],
    anchors: Mapping[str, Mapping[str, float]] | None = None,
    fabric_kind: str = "fat_tree",
    denominator: str = DENOMINATOR,
    whole: bool = False,
) -> str:
    """Patterns down, modes across: median ratio to the denominator [min-max over seeds];
    the denominator's own column shows its median aggregate Mbit/s instead."""
    anchors = anchors or {}
    header = ["pattern"]
    for m in modes:
        header.append(f"{m} (Mbit/s)" if m == denominator else m)
    header += ["anchors", "loom target"]
    rows = []
    for p in patterns:
        row = [p]
        for m in modes:
            cell = summary.get(p, {}).get(m, Cell((), None))
            if m == denominator:
                row.append(f"{cell.mbps:.1f}" if cell.mbps is not None else "-")
            else:
                row.append(_cell_text(cell))
        row.append(", ".join(f"{k} {v:.2f}" for k, v in anchors.get(p, {}).items()) or "-")
        row.append(verdict(p, summary.get(p, {}), fabric_kind, whole))
        rows.append(row)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [line.format(*header), line.format(*("-" * w for w in widths))]
    out += [line.format(*r) for r in rows]
    return "\n".join(out)


def plot(
    summary: Summary,
    patterns: Sequence[str],
    modes: Sequence[str],
    path: Path,
    title: str,
    anchors: Mapping[str, Mapping[str, float]] | None = None,
    target: float | None = TARGET,
    denominator: str = DENOMINATOR,
) -> Path:
    """Grouped bars (patterns on x, one bar per mode, height = median ratio, whiskers =
    min-max over seeds), anchor markers and a line at ``target``; saved as PNG."""
    import matplotlib

    matplotlib.use("Agg")  # no display on the benchmark machine
    import matplotlib.pyplot as plt

    anchors = anchors or {}
    # Modes with at least one ratio (a mode that failed to start gets no empty slot); colours
    # follow the position in ``modes`` so a mode keeps its colour from figure to figure.
    shown = [
        m
        for m in modes
        if m != denominator
        and any(summary.get(p, {}).get(m, Cell((), None)).ratios for p in patterns)
    ]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(patterns) + 2), 4.5))
    width = 0.8 / max(1, len(shown))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, mode in enumerate(shown):
        xs, ys, lo, hi = [], [], [], []
        for i, p in enumerate(patterns):
            cell = summary.get(p, {}).get(mode)
            if cell is None or cell.median is None:
                continue
            assert cell.low is not None and cell.high is not None
            xs.append(i - 0.4 + width * (j + 0.5))
            ys.append(cell.median)
            lo.append(cell.median - cell.low)
            hi.append(cell.high - cell.median)
        color = colors[list(modes).index(mode) % len(colors)]
        ax.bar(xs, ys, width * 0.92, label=mode, color=color, yerr=[lo, hi], capsize=2)
        for x, y in zip(xs, ys, strict=True):  # at the bar's foot: clear of whiskers, anchors
            inside = y > 0.12
            ax.text(
                x,
                0.015 if inside else y + 0.015,
                f"{y:.2f}",
                ha="center",
                va="bottom",
                fontsize=6,
                rotation=90,
                color="white" if inside else "black",
            )
    styles: list[Literal["-", ":", "-.", "--"]] = ["-", ":", "-.", "--"]
    labels = sorted({k for a in anchors.values() for k in a})
    for n, label in enumerate(labels):  # a black segment across the pattern's group
        pts = [(i, a[label]) for i, p in enumerate(patterns) if label in (a := anchors.get(p, {}))]
        if pts:
            ax.hlines(
                [y for _, y in pts],
                [x - 0.45 for x, _ in pts],
                [x + 0.45 for x, _ in pts],
                colors="black",
                linestyles=styles[n % len(styles)],
                linewidth=1.5,
                zorder=3,
                label=label,
            )
    if target is not None:
        ax.axhline(target, color="red", linestyle="--", linewidth=1, label=f"target {target:g}")
    ax.set_xticks(range(len(patterns)))
    ax.set_xticklabels(patterns, rotation=20, ha="right")
    ax.set_ylabel(f"aggregate ÷ {denominator} (same matrix)")
    ax.set_ylim(0, 1.35)  # room for the labels and the legend above the 1.0 line
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=len(shown) + len(labels) + 1, loc="upper center")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def report(doc: Mapping[str, Any], out_dir: Path) -> tuple[str, Path | None]:
    """Table text and PNG path for a ``results.json`` document (its runs so far)."""
    patterns, modes = list(doc["patterns"]), list(doc["modes"])
    kind = str(doc.get("fabric", {}).get("kind", "fat_tree"))
    anchors = doc.get("anchors", {})
    summary = summarize(doc["runs"], patterns, modes)
    table = format_table(summary, patterns, modes, anchors, fabric_kind=kind)
    if any(r.get(WHOLE) is not None for r in doc["runs"]):
        whole = summarize(doc["runs"], patterns, modes, figure=WHOLE)
        table += "\n\nwhole flows, first byte to last:\n"
        table += format_table(whole, patterns, modes, anchors, fabric_kind=kind, whole=True)
        table += steady_table(doc["runs"], patterns, modes)
    table += cpu_table(doc["runs"], patterns, modes)
    png = None
    if doc["runs"]:
        seeds = len(doc.get("seeds", [])) or 1
        title = (
            f"{doc.get('fabric', {}).get('name', '?')} at {doc.get('link_rate_mbps', 0):g} Mbit/s,"
            f" median of {seeds} seed{'s' if seeds > 1 else ''}"
            + (": plain fabric, Loom told nothing" if doc.get("plain") else "")
        )
        name = "dragonfly.png" if kind == "dragonfly" else "patterns.png"
        png = plot(
            summary,
            patterns,
            modes,
            out_dir / name,
            title,
            anchors,
            target=None if kind == "dragonfly" else TARGET,
        )
    return table, png


def steady_table(runs: Sequence[Run], patterns: Sequence[str], modes: Sequence[str]) -> str:
    """Per pattern and Loom mode: when placement held (the last move of any flow, s after
    its first packet), median over seeds, and the flows moved in all."""
    shown = [
        m
        for m in modes
        if any(r.get("placement_steady_s") is not None for r in runs if r["mode"] == m)
    ]
    if not shown:
        return ""
    lines = ["", "", "placement steady after, s (median over seeds) [flows moved]:"]
    for p in patterns:
        cells = []
        for m in shown:
            mine = [r for r in runs if (r["pattern"], r["mode"]) == (p, m)]
            steady = [
                r["placement_steady_s"] for r in mine if r.get("placement_steady_s") is not None
            ]
            moved = sum(
                1
                for r in mine
                for f in r.get("flows", [])
                if isinstance(f.get("last_moved_s"), float | int)
            )
            text = f"{statistics.median(steady):.1f} [{moved}]" if steady else "-"
            cells.append(f"{m} {text}")
        lines.append(f"  {p:<14} " + "  ".join(cells))
    return "\n".join(lines)


def cpu_table(runs: Sequence[Run], patterns: Sequence[str], modes: Sequence[str]) -> str:
    """Per pattern and mode, medians over seeds: ovs-vswitchd's busiest thread and the
    controller, % of one CPU. A busiest thread near 100 % caps the emulated fabric: where
    it does, the figure is the emulator's as much as the controller's."""
    if not any(r.get("ovs_busiest_pct") is not None for r in runs):
        return ""
    lines = [
        "",
        "",
        "CPU, % of one core (median over seeds): ovs-vswitchd busiest thread / controller:",
    ]
    for p in patterns:
        cells = []
        for m in modes:
            mine = [r for r in runs if (r["pattern"], r["mode"]) == (p, m)]
            ovs = [r["ovs_busiest_pct"] for r in mine if r.get("ovs_busiest_pct") is not None]
            ctl = [r["controller_cpu_pct"] for r in mine if r.get("controller_cpu_pct") is not None]
            text = "/".join(f"{statistics.median(v):.0f}" if v else "-" for v in (ovs, ctl))
            cells.append(f"{m} {text}")
        lines.append(f"  {p:<14} " + "  ".join(cells))
    return "\n".join(lines)


# --------------------------------------------------------------------------- run metadata


def _cmd(argv: Sequence[str]) -> str | None:
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=20, cwd=REPO_ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def loom_version() -> dict[str, Any]:
    """Loom's package version, git commit (+ dirty flag) and a hash of controller/*.py: the
    controller is edited while benchmarks run, so the commit alone may not say what ran."""
    digest = hashlib.sha256()
    for path in sorted((REPO_ROOT / "controller").rglob("*.py")):
        digest.update(path.relative_to(REPO_ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    try:
        from importlib.metadata import version

        pkg: str | None = version("loom")
    except Exception:
        pkg = None
    return {
        "package": pkg,
        "commit": _cmd(["git", "rev-parse", "--short", "HEAD"]),
        "dirty": bool(_cmd(["git", "status", "--porcelain", "--", "controller"])),
        "controller_sha256": digest.hexdigest()[:16],
    }


def faucet_version() -> str | None:
    py = FAUCET_VENV / "bin" / "python"
    return _cmd([str(py), "-c", "import importlib.metadata as m; print(m.version('faucet'))"])


def machine_facts() -> dict[str, Any]:
    wmem = _cmd(["sysctl", "-n", "net.core.wmem_default"])
    ovs = _cmd(["ovs-vswitchd", "--version"])
    iperf = _cmd(["iperf3", "--version"])
    return {
        "wmem_default": int(wmem) if wmem and wmem.isdigit() else None,
        "ovs": ovs.splitlines()[0] if ovs else None,
        "iperf3": iperf.splitlines()[0] if iperf else None,
        "cpus": os.cpu_count(),
    }


def rerender(
    argv: list[str] | None,
    module: str,
    render: Callable[[dict[str, Any], Path], tuple[str, Path | None]],
) -> int:
    """A report module's ``main``: re-print the table and re-draw the figure of a saved
    ``results.json`` with ``render`` (the module's ``report``)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"usage: python -m {module} RESULTS.json", file=sys.stderr)
        return 2
    path = Path(args[0])
    table, png = render(json.loads(path.read_text()), path.parent)
    print(table)
    if png:
        print(f"figure: {png}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Re-print the table and re-draw the figure of a saved ``results.json``."""
    return rerender(argv, "mininet_scenarios.bench.patterns_report", report)


if __name__ == "__main__":
    sys.exit(main())
