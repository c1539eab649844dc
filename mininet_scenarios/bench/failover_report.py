"""The failover benchmark's report: the table printed at the end (one row per figure, a
column per fast-failover mode, the ``docs/benchmarks.md`` §4 target beside it) and the
four-panel figure. Pure functions of ``results.json``, so a saved run can be re-plotted
(``python -m mininet_scenarios.bench.failover_report results/failover``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TARGETS = {"gap_ms": 60.0, "reroute_p95_ms": 100.0, "restart_gap_ms": 0.0}


def fmt(x: float | None, unit: str = "") -> str:
    """A figure with one decimal, or ``-`` when it was not measured."""
    return "-" if x is None else f"{x:.1f}{unit}"


def table(doc: dict[str, Any]) -> str:
    """The final table: one row per figure, a column per mode, the target beside it."""
    modes = [m for m in ("on", "off") if m in doc["modes"]]
    rows: list[tuple[str, list[str], str]] = []

    def per_mode(path: Sequence[str], fmt: str = "{:.1f}") -> list[str]:
        out = []
        for m in modes:
            node: Any = doc["modes"][m]
            for key in path:
                node = node.get(key) if isinstance(node, dict) else None
            out.append("-" if node is None else fmt.format(node))
        return out

    def pair(a: Sequence[str], b: Sequence[str]) -> list[str]:
        return [f"{x} / {y}" for x, y in zip(a, b, strict=True)]

    gap = ("gap", "summary")
    rows.append(
        (
            "link-down gap max / median, ms",
            pair(per_mode([*gap, "gap_max_ms"]), per_mode([*gap, "gap_median_ms"])),
            f"<= {TARGETS['gap_ms']:g}",
        )
    )
    rows.append(
        (
            "  sender-side outage max / median, ms",
            pair(per_mode([*gap, "outage_max_ms"]), per_mode([*gap, "outage_median_ms"])),
            "",
        )
    )
    positions = sorted(
        {
            p
            for m in modes
            for p in doc["modes"][m].get("gap", {}).get("summary", {}).get("by_position", {})
        }
    )
    for p in positions:
        rows.append(
            (
                f"  {p} gap max, ms",
                per_mode([*gap, "by_position", p, "max_ms"]),
                "",
            )
        )
    rows.append(("  datagrams lost at cuts", per_mode([*gap, "lost_total"], "{:d}"), ""))
    rows.append(("  link-up (restore) gap max, ms", per_mode([*gap, "restore_gap_max_ms"]), ""))
    rows.append(("  stream baseline max gap, ms", per_mode([*gap, "baseline_gap_max_ms"]), ""))
    rr = ("reroute", "summary")
    rows.append(
        (
            "reroute after PortStatus p50 / p95, ms",
            pair(per_mode([*rr, "reroute_p50_ms"]), per_mode([*rr, "reroute_p95_ms"])),
            f"p95 <= {TARGETS['reroute_p95_ms']:g}",
        )
    )
    rows.append(
        (
            "  worst per-cut mean, ms",
            per_mode([*rr, "reroute_event_mean_max_ms"]),
            "",
        )
    )
    rows.append(
        (
            "  PortStatus handled (sent) p50 / p95, ms",
            pair(per_mode([*rr, "handling_p50_ms"]), per_mode([*rr, "handling_p95_ms"])),
            "",
        )
    )
    lines = []
    width = max(len(r[0]) for r in rows) + 2
    head = f"{'figure':<{width}}" + "".join(f"{'ff ' + m:>22}" for m in modes) + "   target"
    lines += [head, "-" * len(head)]
    for name, vals, target in rows:
        lines.append(f"{name:<{width}}" + "".join(f"{v:>22}" for v in vals) + f"   {target}")
    off_gap = doc["modes"].get("off", {}).get("gap", {}).get("summary", {})
    if off_gap.get("events"):
        lines.append(
            "end-to-end reroute (receiver gap, fast failover off): median"
            f" {fmt(off_gap.get('gap_median_ms'), ' ms')},"
            f" max {fmt(off_gap.get('gap_max_ms'), ' ms')}"
        )
    on = doc["modes"].get("on", {})
    for r in on.get("restart", []):
        rules = r["rules"]
        lines.append(
            f"restart {r['signal']:<4}: gap {r['gap']['gap_ms']:.1f} ms ({r['gap']['lost']} lost;"
            f" target {TARGETS['restart_gap_ms']:g}), hosts back"
            f" {fmt(r['timeline_s']['hosts'], ' s')} with"
            f" {fmt(r['timeline_s'].get('hosts_read_back'))} read back from switches and"
            f" {fmt(r['timeline_s']['arp_packet_ins_when_hosts_back'])} ARP packet-ins,"
            " rules removed/added/re-added"
            f" {rules['removed']}/{rules['added']}/{rules['readded']} of {rules['flows_before']},"
            f" pingall {r['pingall_loss_pct']:.1f} %"
        )
    fl = on.get("flood")
    if fl:
        lines.append(
            f"flood: {fl['sent']} frames in {fl['seconds']} s ({fl['sent_rate_pps']} /s) ->"
            f" {fl['packet_in_rate_pps']} packet-ins/s (ratio {fl['packet_in_ratio']});"
            f" API p50/p95 {fl['api_baseline']['p50_ms']}/{fl['api_baseline']['p95_ms']} ms"
            f" idle, {fl['api_flood']['p50_ms']}/{fl['api_flood']['p95_ms']} ms flooded"
            f" ({fl['api_flood']['failed']} failed); ping loss"
            f" {max((p['loss_pct'] for p in fl['pings'].values()), default=None)} %;"
            f" controller {'alive' if fl['controller_alive'] else 'DEAD'}"
        )
    return "\n".join(lines)


def plot(doc: dict[str, Any], path: Path) -> Path:
    """Four panels: gaps per cut (both modes), arrivals around one cut, reroute times, API
    latency under flood."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    colors = {"on": "tab:blue", "off": "tab:orange"}
    ax = axes[0][0]
    positions: list[str] = []
    for m in doc["modes"].values():
        for e in m.get("gap", {}).get("events", []):
            if e["position"] not in positions:
                positions.append(e["position"])
    for j, (mode, m) in enumerate(doc["modes"].items()):
        evs = m.get("gap", {}).get("events", [])
        xs = [positions.index(e["position"]) + (j - 0.5) * 0.3 for e in evs]
        ys = [max(e["down"]["gap_ms"], 0.1) for e in evs]
        ax.scatter(xs, ys, color=colors.get(mode), label=f"ff {mode}: receiver gap", s=25)
        ys2 = [max(e["down"]["outage_ms"], 0.1) for e in evs]
        ax.scatter(xs, ys2, color=colors.get(mode), marker="x", s=20, label=f"ff {mode}: outage")
    ax.axhline(TARGETS["gap_ms"], color="red", linestyle="--", linewidth=1, label="target 60 ms")
    ax.set_yscale("log")
    ax.set_xticks(range(len(positions)))
    ax.set_xticklabels(positions, fontsize=8)
    ax.set_ylabel("gap at link down, ms")
    ax.set_title("Traffic gap per link cut (1000 pkt/s UDP)", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)

    ax = axes[0][1]
    for mode, m in doc["modes"].items():
        evs = m.get("gap", {}).get("events", [])
        if not evs:
            continue
        worst = max(evs, key=lambda e: e["down"]["gap_ms"])
        pts = worst.get("series", [])
        ax.plot(
            [p[0] - 200 for p in pts],
            [p[1] for p in pts],
            color=colors.get(mode),
            linewidth=0.8,
            label=f"ff {mode}: {worst['link']}",
        )
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("arrival time after the cut, ms")
    ax.set_ylabel("time since previous arrival, ms")
    ax.set_yscale("log")
    ax.set_title("Arrivals around the worst cut of each mode", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)

    ax = axes[1][0]
    for j, (mode, m) in enumerate(doc["modes"].items()):
        evs = m.get("reroute", {}).get("events", [])
        xs = list(range(len(evs)))
        ax.plot(
            [x + j * 0.1 for x in xs],
            [e["reroute_mean_ms"] or 0 for e in evs],
            "o-",
            color=colors.get(mode),
            label=f"ff {mode}: PortStatus -> last barrier reply",
        )
        ax.plot(
            [x + j * 0.1 for x in xs],
            [e["handling_mean_ms"] or 0 for e in evs],
            "s--",
            color=colors.get(mode),
            alpha=0.6,
            label=f"ff {mode}: PortStatus -> rules sent",
        )
        if evs:
            ax.set_xticks(xs)
            ax.set_xticklabels([e["link"] for e in evs], rotation=30, fontsize=7, ha="right")
    ax.axhline(TARGETS["reroute_p95_ms"], color="red", linestyle="--", linewidth=1)
    ax.set_ylabel("mean per cut, ms")
    ax.set_title("Controller reroute after PortStatus (loom_reroute_latency_seconds)", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)

    ax = axes[1][1]
    fl = doc["modes"].get("on", {}).get("flood")
    if fl:
        for key, label, color in (
            ("api_baseline_samples_ms", "idle", "tab:green"),
            ("api_flood_samples_ms", f"flood {fl['sent_rate_pps']} frames/s", "tab:red"),
        ):
            xs = sorted(fl[key])
            if xs:
                ax.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=label, color=color)
        ax.set_xscale("log")
        ax.set_xlabel("GET /loom/v1/health latency, ms")
        ax.set_ylabel("CDF")
    restarts = doc["modes"].get("on", {}).get("restart", [])
    note = "\n".join(
        f"restart {r['signal']}: gap {r['gap']['gap_ms']:.1f} ms, {r['gap']['lost']} lost"
        for r in restarts
    )
    if note:
        ax.text(0.02, 0.97, note, transform=ax.transAxes, va="top", fontsize=8)
    ax.set_title("REST latency under a packet-in flood; restart gaps", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    fig.suptitle(
        f"Loom failover, k=4 fat-tree at {doc['config']['rate_mbps']:g} Mbit/s, queue"
        f" {doc['config']['queue_packets']} packets",
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
    print(plot(doc, out / "failover.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
