"""The headless benchmark's report: the table printed at the end (a row per scenario and
neighbour-timers mode, against the targets of ``docs/benchmarks.md``, "Headless operation")
and a three-panel figure. Pure functions of ``results.json``, so a saved run can be
re-plotted (``python -m mininet_scenarios.bench.headless_report results/headless``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mininet_scenarios.workloads.headless import TARGETS

MODES = ("default", "shortened")
COLORS = {"default": "tab:blue", "shortened": "tab:orange"}
# Neighbour states, from a usable entry at the top to none at all at the bottom.
LEVELS = ["NONE", "FAILED", "INCOMPLETE", "PROBE", "DELAY", "STALE", "REACHABLE"]
DESCRIBED = {
    "restart": "SIGKILL, new controller",
    "sigstop": "SIGSTOP",
    "hog": "CPU hog",
    "headless": "SIGSTOP, SIGKILL",
    "quorum": "etcd quorum lost",
}


def fmt(x: Any, unit: str = "") -> str:
    """A figure, or ``-`` when it was not measured."""
    if x is None:
        return "-"
    return f"{x:.1f}{unit}" if isinstance(x, float) else f"{x}{unit}"


def _label(name: str, res: dict[str, Any]) -> str:
    seconds = res.get("fault_s")
    return f"{name} ({DESCRIBED.get(name, name)}, {fmt(seconds, ' s')})"


def table(doc: dict[str, Any]) -> str:
    """One row per scenario and timers mode; the targets and the machine's load below."""
    head = (
        f"{'scenario':<44}{'timers':<11}{'lost / sent':>17}{'largest gap':>13}"
        f"{'TCP stall':>11}{'unusable':>10}{'flows again':>13}   met   states seen"
    )
    lines = [head, "-" * len(head)]
    for name, res in doc.get("scenarios", {}).items():
        if "error" in res:
            lines.append(f"{name:<44}FAILED: {res['error']}")
            continue
        for i, mode in enumerate(m for m in MODES if m in res.get("by_timers", {})):
            s = res["by_timers"][mode]
            lines.append(
                f"{_label(name, res) if i == 0 else '':<44}{mode:<11}"
                f"{s['datagrams_lost']:>8} / {s['datagrams_sent']:<6}"
                f"{fmt(s['largest_gap_ms'], ' ms'):>13}{fmt(s['longest_tcp_stall_s'], ' s'):>11}"
                f"{fmt(s['unusable_entry_s'], ' s'):>10}"
                f"{fmt(res.get('flowing_again_after_s'), ' s'):>13}"
                f"   {'yes' if s['met'] else 'NO ':<5} {'/'.join(s['neighbour_states'])}"
            )
    lines.append(
        f"targets: {TARGETS['lost']} datagrams lost and no TCP stall over"
        f" {TARGETS['tcp_stall_s']:g} s, with both timers, in every scenario. 'unusable': the"
        " longest time a host held no usable entry for its peer (FAILED, INCOMPLETE, none);"
        " 'flows again': from the end of the fault until every pair carried traffic."
    )
    for name, res in doc.get("scenarios", {}).items():
        if "error" in res:
            continue
        ovs = res.get("ovs_busiest_thread") or {}
        base = {m: v.get("datagrams_lost_in_window") for m, v in res.get("baseline", {}).items()}
        lines.append(
            f"  {name}: ovs-vswitchd busiest thread {fmt(ovs.get('cpu_pct'), ' %')}"
            f" ({ovs.get('thread', '-')}), CPU idle {fmt(res.get('cpu_idle_mean'), ' %')},"
            f" datagrams lost before the fault {base}, detail {json.dumps(res.get('detail'))}"
        )
    return "\n".join(lines)


def plot(doc: dict[str, Any], path: Path) -> Path:
    """Datagrams lost and the longest TCP stall per scenario (both timers modes), and the
    UDP senders' neighbour states through the longest outage."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = {n: r for n, r in doc.get("scenarios", {}).items() if "by_timers" in r}
    fig, axes = plt.subplots(1, 3, figsize=(17, 5))
    names = list(done)
    for ax, key, title, target in (
        (axes[0], "datagrams_lost", "Datagrams lost (1,000/s per stream)", None),
        (axes[1], "longest_tcp_stall_s", "Longest TCP stall, s", TARGETS["tcp_stall_s"]),
    ):
        for j, mode in enumerate(MODES):
            xs = [i + (j - 0.5) * 0.38 for i in range(len(names))]
            ys = [float(done[n]["by_timers"].get(mode, {}).get(key) or 0.0) for n in names]
            ax.bar(xs, ys, width=0.36, color=COLORS[mode], label=f"{mode} timers")
            for x, y in zip(xs, ys, strict=True):
                text = f"{y:,.0f}" if key == "datagrams_lost" else f"{y:.3g}"
                ax.text(x, y, text, ha="center", va="bottom", fontsize=6, rotation=90)
        highest = max(
            (
                float(r["by_timers"][m].get(key) or 0.0)
                for r in done.values()
                for m in r["by_timers"]
            ),
            default=0.0,
        )
        ax.set_ylim(0, max(highest, target or 1.0) * 20)  # room for the labels
        if target is not None:
            ax.axhline(target, color="red", linestyle="--", linewidth=1, label="target")
        ax.set_yscale("symlog", linthresh=1.0 if key == "datagrams_lost" else 0.1)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([_label(n, done[n]) for n in names], rotation=20, fontsize=7, ha="right")
        ax.set_title(title + " (target 0)" if target is None else title, fontsize=10)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, axis="y")
    ax = axes[2]
    if done:
        longest = max(names, key=lambda n: float(done[n].get("fault_s") or 0.0))
        res = done[longest]
        for row in res["pairs"]:
            if row["kind"] != "udp":
                continue
            pts = [(t, LEVELS.index(s) if s in LEVELS else 0) for t, s in row["timeline"]]
            if not pts:
                continue
            end = float(res.get("fault_s") or 0.0) + float(res.get("flowing_again_after_s") or 0.0)
            pts.append((max(pts[-1][0], end + 3.0), pts[-1][1]))
            ax.step(
                [p[0] for p in pts],
                [p[1] for p in pts],
                where="post",
                color=COLORS.get(row["timers"], "gray"),
                alpha=0.8,
                linewidth=0.9,
                label=f"{row['pair']} ({row['timers']})",
            )
        ax.axvspan(0, float(res.get("fault_s") or 0.0), color="gray", alpha=0.15, label="fault")
        ax.set_yticks(range(len(LEVELS)))
        ax.set_yticklabels(LEVELS, fontsize=7)
        ax.set_xlabel("s after the fault began")
        ax.set_title(f"UDP senders' entry for their peer, {longest}", fontsize=10)
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(alpha=0.3)
    fig.suptitle(
        "Loom with no controller answering ARP: plain k=4 fat-tree, pairs that talked before",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``OUT_DIR``: print the table of ``OUT_DIR/results.json`` and redraw its figure."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit(main.__doc__)
    out = Path(args[0])
    doc = json.loads((out / "results.json").read_text())
    print(table(doc))
    print(plot(doc, out / "headless.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
