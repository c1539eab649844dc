"""The scale benchmark's report: a table of every figure per fabric size beside its
``docs/benchmarks.md`` §7 target, a line per size for the link phase's reroute walk
(``scale_walk``), and a log-log figure of the core's times and rules per switch against
fabric size. Pure functions of ``results.json``, so a saved run can be
re-drawn: ``python -m mininet_scenarios.bench.scale_report results/scale``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# docs/benchmarks.md §7: upper bounds.
TARGETS = {
    "settle_s": 60.0,
    "largest_call_s": 0.1,
    "recompute_s": 1.0,
    "link_down_s": 0.1,
    "rules_per_switch": 4000.0,
}
TIMES = [  # (figure, label, colour) drawn against fabric size
    ("settle_s", "bring-up (core time)", "tab:blue"),
    ("largest_call_s", "largest single call", "tab:red"),
    ("recompute_s", "full recompute", "tab:green"),
    ("link_down_s", "one link down", "tab:orange"),
]


def dig(doc: Any, *path: str) -> Any:
    """``doc[path[0]][path[1]]...``, or ``None`` where a part is missing."""
    for key in path:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def _sum(*values: Any) -> float | None:
    got = [v for v in values if isinstance(v, int | float)]
    return sum(got) if got else None


def figures(size: dict[str, Any]) -> dict[str, Any]:
    """The figures of one size, flat; ``None`` where not measured."""
    settled = bool(dig(size, "settle", "settled"))
    f: dict[str, Any] = {
        "settled": settled,
        "settle_s": dig(size, "settle", "core_s") if settled else None,
        "settle_wall_s": dig(size, "settle", "wall_s"),
        "settle_sim_s": dig(size, "settle", "sim_s"),
        "largest_call_s": dig(size, "settle", "tally", "largest_call", "s"),
        "largest_call_kind": dig(size, "settle", "tally", "largest_call", "kind"),
        "settle_messages": dig(size, "settle", "tally", "rule_messages"),
        "arp_frames_to_hosts": dig(size, "settle", "tally", "frames_to_hosts"),
        "recompute_s": dig(size, "recompute", "call", "s"),
        "recompute_messages": dig(size, "recompute", "tally", "rule_messages"),
        "link_down_s": dig(size, "link", "down", "link_down_s"),
        "link_down_tick_s": dig(size, "link", "down", "next_tick", "s"),
        "link_down_total_s": dig(size, "link", "down", "tally", "core_s"),
        "link_down_largest_s": dig(size, "link", "down", "tally", "largest_call", "s"),
        "link_down_messages": dig(size, "link", "down", "tally", "rule_messages"),
        "link_down_switches": dig(size, "link", "down", "tally", "switches_ruled"),
        "link_up_s": _sum(
            *(e.get("s") for e in dig(size, "link", "up", "ends") or []),
            dig(size, "link", "up", "settle", "core_s"),
        ),
        "switch_down_s": dig(size, "switch", "down", "call", "s"),
        "switch_down_messages": dig(size, "switch", "down", "tally", "rule_messages"),
        "switch_back_s": _sum(
            dig(size, "switch", "back", "tally", "core_s"),
            dig(size, "switch", "back", "settle", "core_s"),
        ),
        "host_move_s": dig(size, "host_move", "host_move_s"),
        "host_move_messages": dig(size, "host_move", "tally", "rule_messages"),
        "job_create_s": dig(size, "job", "create", "call", "s"),
        "job_create_messages": dig(size, "job", "create", "tally", "rule_messages"),
        "job_delete_s": dig(size, "job", "delete", "call", "s"),
        "flows_max": dig(size, "rules", "flows_max"),
        "groups_max": dig(size, "rules", "groups_max"),
        "mismatched_switches": dig(size, "rules", "mismatched_switches"),
        "cascaded": dig(size, "rules", "flows_deleted_with_their_group"),
        "lost_modifies": dig(size, "rules", "modifies_of_missing_flows"),
        "steady_msgs_out": dig(size, "steady", "messages_out_total"),
        "steady_msgs_in": dig(size, "steady", "messages_in_total"),
        "steady_kbytes_out": _kilo(dig(size, "steady", "bytes_out_total")),
        "steady_kbytes_in": _kilo(dig(size, "steady", "bytes_in_total")),
        "steady_core_s_per_s": dig(size, "steady", "core_s_per_s"),
        "rss_mib": size.get("rss_mib"),
        "gc_in_core_s": dig(size, "gc", "in_core_s"),
    }
    return f


WALK_KEYS = ("pairs", "crossing", "moments_walked", "looped", "lost", "controller", "walk_s")


def walk_figures(walk: Any) -> dict[str, Any]:
    """The link phase's walk (``scale_walk``): pairs, moments walked, pair-moments looped,
    lost and only to the controller (summed over the moments), the worst moment."""
    walk = walk if isinstance(walk, dict) else {}
    worst = walk.get("worst")
    worst = worst if worst and any(worst.get(k) for k in ("looped", "lost", "controller")) else None
    where = f"{worst['at']} ({worst['looped']} looped, {worst['lost']} lost," if worst else "none"
    where += f" {worst['controller']} to the controller)" if worst else ""
    out = {f"walk_{k}": walk.get(k) for k in WALK_KEYS}
    return out | {"walk_worst": where if walk else None}


def walk_lines(doc: dict[str, Any]) -> list[str]:
    """A line per size that walked its reroute."""
    lines = []
    for size in doc.get("sizes", []):
        f = walk_figures(dig(size, "link", "down", "walk"))
        if f["walk_pairs"] is None:
            continue
        bad = (f["walk_looped"] or 0) + (f["walk_lost"] or 0)
        lines.append(
            f"  {size.get('name', size.get('spec'))}: {_num(f['walk_pairs'])} pairs"
            f" ({_num(f['walk_crossing'])} across the link), {_num(f['walk_moments_walked'])}"
            f" moments; looped {_num(f['walk_looped'])}, lost {_num(f['walk_lost'])}, only to"
            f" the controller {_num(f['walk_controller'])}; worst: {f['walk_worst']};"
            f" {_num(f['walk_walk_s'])} s  {'FAIL' if bad else 'PASS'}"
        )
    head = "Reroute walks (link phase; pair-moments, summed over the moments walked):"
    return ["", head, *lines] if lines else []


def _kilo(x: Any) -> float | None:
    return x / 1000 if isinstance(x, int | float) else None


def _num(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"
    return str(x)


def verdict(value: Any, target: float | None) -> str:
    """PASS or FAIL against an upper bound; nothing for a figure that was not measured."""
    if target is None or not isinstance(value, int | float) or isinstance(value, bool):
        return ""
    return "PASS" if value <= target else "FAIL"


ROWS: list[tuple[str, tuple[str, ...], float | None]] = [  # label, figures, bound
    ("settled", ("settled",), None),
    ("bring-up, core s (to the last rule sent)", ("settle_s",), TARGETS["settle_s"]),
    ("  wall s / simulated s", ("settle_wall_s", "settle_sim_s"), None),
    ("  rule messages sent", ("settle_messages",), None),
    ("  ARP frames to hosts", ("arp_frames_to_hosts",), None),
    ("largest single call in bring-up, s", ("largest_call_s",), TARGETS["largest_call_s"]),
    ("  its kind", ("largest_call_kind",), None),
    ("full recompute, s", ("recompute_s",), TARGETS["recompute_s"]),
    ("  rule messages (unchanged fabric)", ("recompute_messages",), None),
    ("link down, s (both PortStatus)", ("link_down_s",), TARGETS["link_down_s"]),
    ("  next tick, s", ("link_down_tick_s",), None),
    ("  until rerouted, core s / largest call", ("link_down_total_s", "link_down_largest_s"), None),
    ("  rule messages / switches ruled", ("link_down_messages", "link_down_switches"), None),
    ("link up until settled, core s", ("link_up_s",), None),
    ("switch down, s / rule messages", ("switch_down_s", "switch_down_messages"), None),
    ("switch back until settled, core s", ("switch_back_s",), None),
    ("host move, s (3 calls) / rule messages", ("host_move_s", "host_move_messages"), None),
    ("job create / delete, s", ("job_create_s", "job_delete_s"), None),
    ("  rule messages to create", ("job_create_messages",), None),
    ("max flows per switch", ("flows_max",), TARGETS["rules_per_switch"]),
    ("  max groups per switch", ("groups_max",), None),
    ("  switches differing from the core", ("mismatched_switches",), None),
    ("  flows gone with their group / modifies lost", ("cascaded", "lost_modifies"), None),
    ("steady msgs/s out / in", ("steady_msgs_out", "steady_msgs_in"), None),
    ("steady kB/s out / in", ("steady_kbytes_out", "steady_kbytes_in"), None),
    ("steady core s per simulated s", ("steady_core_s_per_s",), None),
    ("peak RSS, MiB", ("rss_mib",), None),
    ("gc inside core calls, s", ("gc_in_core_s",), None),
]


def table(doc: dict[str, Any]) -> str:
    """One block per size: figure, value, target, PASS/FAIL."""
    lines = [f"Loom core scale (budget {_num(doc.get('budget_s'))} s per size)"]
    for size in doc.get("sizes", []):
        head = f"{size.get('name', size.get('spec'))}: {_num(size.get('switches'))} switches"
        head += f", {_num(size.get('hosts'))} hosts, {_num(size.get('links'))} links"
        lines += ["", head]
        if size.get("skipped") or "error" in size:
            lines.append(f"  {'skipped' if size.get('skipped') else size['error']}")
            continue
        stopped = size.get("stopped")
        if stopped:
            lines.append(f"  stopped in {stopped['phase']}: {stopped['reason']}")
            progress = stopped.get("progress") or dig(size, "settle", "progress")
            if progress:
                lines.append(
                    "  progress: " + ", ".join(f"{k} {_num(v)}" for k, v in progress.items())
                )
        f = figures(size)
        lines.append(f"  {'figure':<44} {'value':>16} {'target':>9}  verdict")
        for label, keys, target in ROWS:
            v = f[keys[0]] if len(keys) == 1 else " / ".join(_num(f[k]) for k in keys)
            bound = f"<= {target:g}" if target is not None else ""
            judged = verdict(v, target) or ("FAIL" if keys == ("settle_s",) else "")
            lines.append(f"  {label:<44} {_num(v):>16} {bound:>9}  {judged}".rstrip())
    return "\n".join(lines + walk_lines(doc)) + "\n"


MARKERS = {"fat_tree": "o", "dragonfly": "s"}


def _series(ax: Any, sizes: list[dict[str, Any]], key: str, label: str, color: str) -> None:
    """One figure against fabric size, a line per fabric family."""
    for family, marker in MARKERS.items():
        pts = sorted(
            (s["switches"], figures(s)[key])
            for s in sizes
            if s.get("family") == family and figures(s)[key]
        )
        if pts:
            xs, ys = zip(*pts, strict=True)
            name = f"{label} ({family.replace('_', '-')})"
            ax.plot(xs, ys, marker=marker, color=color, label=name, linewidth=1)


def plot(doc: dict[str, Any], path: Path) -> Path | None:
    """Times against switches (log-log) with the targets; max rules per switch beside."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [s for s in doc.get("sizes", []) if s.get("switches") and "settle" in s]
    if not sizes:
        return None
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5))
    for key, label, color in TIMES:
        _series(ax, sizes, key, label, color)
        ax.axhline(TARGETS[key], color=color, linestyle="--", linewidth=0.8, alpha=0.7)
    bounds: dict[float, list[str]] = {}
    for key, label, _ in TIMES:
        bounds.setdefault(TARGETS[key], []).append(label.split(" (")[0])
    for bound, names in bounds.items():
        text = f"target: {' and '.join(names)} <= {bound:g} s"
        ax.text(0.01, bound, text, transform=ax.get_yaxis_transform(), fontsize=7, va="bottom")
    for s in sizes:  # a size that did not settle: how far its core time got
        if not figures(s)["settled"]:
            core = dig(s, "settle", "progress", "core_s") or s.get("core_total_s")
            if core:
                ax.scatter([s["switches"]], [core], marker="x", color="black", zorder=3)
                ax.annotate("did not settle", (s["switches"], core), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("switches")
    ax.set_ylabel("core time, s")
    ax.set_title("Core time against fabric size (dashed: targets)", fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6)
    ax.grid(alpha=0.3, which="both")
    for key, label, color in (
        ("flows_max", "flows", "tab:purple"),
        ("groups_max", "groups", "tab:gray"),
    ):
        _series(bx, sizes, key, f"max {label}", color)
    bx.axhline(
        TARGETS["rules_per_switch"],
        color="red",
        linestyle="--",
        linewidth=1,
        label="target 4,000 flows",
    )
    bx.set_xscale("log")
    bx.set_yscale("log")
    bx.set_xlabel("switches")
    bx.set_ylabel("per switch")
    bx.set_title("Rules on the fullest switch", fontsize=10)
    bx.legend(fontsize=7)
    bx.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(doc: dict[str, Any], out: Path) -> tuple[str, Path | None]:
    """Write ``table.txt`` and ``scale.png`` into ``out``."""
    text = table(doc)
    (out / "table.txt").write_text(text)
    return text, plot(doc, out / "scale.png")


def main(argv: Sequence[str] | None = None) -> int:
    """Re-print the table and re-draw the figure of a saved run's directory."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m mininet_scenarios.bench.scale_report RESULTS_DIR", file=sys.stderr)
        return 2
    out = Path(args[0])
    text, png = report(json.loads((out / "results.json").read_text()), out)
    print(text)
    print(f"figure: {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
