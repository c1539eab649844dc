"""The cluster benchmark's report: a summary of the kills (p50, p95 and max beside the
``docs/benchmarks.md`` §6 targets), the table printed at the end and a two-panel figure.
Pure functions of ``results.json`` (``python -m mininet_scenarios.bench.cluster_report DIR``
re-plots a saved run).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mininet_scenarios.harness.metrics import percentile

TARGETS = {"lost": 0, "remaster_p95_s": 1.0, "rules_rewritten": 0, "share_spread": 1}


def summarize(doc: dict[str, Any]) -> dict[str, Any]:
    kills = doc.get("kills", [])
    remaster = [k["remaster_s"] for k in kills]
    gaps = [k["gap"]["gap_ms"] for k in kills]
    jitter = [k["baseline"]["gap_ms"] for k in kills]
    shares = list(doc.get("shares", {}).values())

    def q(values: Sequence[float], p: float) -> float | None:
        got = percentile(values, p)
        return None if got is None else round(got, 3)

    return {
        "kills": len(kills),
        "remaster_s": {"p50": q(remaster, 0.5), "p95": q(remaster, 0.95), "max": q(remaster, 1.0)},
        "gap_ms": {"p50": q(gaps, 0.5), "max": q(gaps, 1.0)},
        "jitter_ms": {"p50": q(jitter, 0.5), "max": q(jitter, 1.0)},
        "lost": sum(k["stream"]["lost"] for k in kills),
        "collectives_completed": sum(1 for k in kills if k["collective"]["completed"]),
        "jobs_intact": sum(1 for k in kills if k["job_intact"]),
        "policies_intact": sum(1 for k in kills if k.get("policy_intact")),
        "rules_rewritten": sum(k["rules"]["rewritten"] for k in kills),
        "pins_removed": sum(k["rules"].get("pins_removed", 0) for k in kills),
        "share_spread": (max(shares) - min(shares)) if shares else None,
    }


def table(doc: dict[str, Any]) -> str:
    lines = []
    s = doc.get("summary")
    if s:
        r, g, j = s["remaster_s"], s["gap_ms"], s["jitter_ms"]
        lines += [
            f"cluster: {s['kills']} kills of the instance mastering the stream's first switch",
            f"  switches shared                {doc.get('shares')} (spread {s['share_spread']},"
            f" target <= {TARGETS['share_spread']})",
            f"  re-mastered, s                 p50 {r['p50']}  p95 {r['p95']}  max {r['max']}"
            f"   (target p95 <= {TARGETS['remaster_p95_s']})",
            f"  datagrams lost (all kills)     {s['lost']}   (target {TARGETS['lost']})",
            f"  largest gap, ms                p50 {g['p50']}  max {g['max']}"
            f"   (the stream's own jitter before the kill: p50 {j['p50']}  max {j['max']})",
            f"  all-reduce completed           {s['collectives_completed']} of {s['kills']}",
            f"  job intact after its instance  {s['jobs_intact']} of {s['kills']}",
            f"  policy intact                  {s['policies_intact']} of {s['kills']}",
            f"  right rules rewritten          {s['rules_rewritten']}"
            f"   (target {TARGETS['rules_rewritten']}; routes, failover, hosts, jobs, tenants)",
            f"  flow pins removed              {s['pins_removed']}"
            "   (flows' own pins: they come and go with the flows)",
        ]
    for n, per in sorted(doc.get("load", {}).items()):
        lines.append(f"load with {n} instance(s):")
        for name, f in sorted(per.items()):
            lines.append(
                f"  {name}: {f['switches']} switches, CPU {f['cpu_per_s']:.3f} s/s,"
                f" packet-ins {f['packet_ins_per_s']:.1f}/s"
            )
    return "\n".join(lines)


def plot(doc: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    kills = doc.get("kills", [])
    xs = list(range(1, len(kills) + 1))
    left.bar(
        [x - 0.2 for x in xs], [k["remaster_s"] * 1e3 for k in kills], 0.4, label="re-mastered (ms)"
    )
    left.bar(
        [x + 0.2 for x in xs],
        [k["gap"]["gap_ms"] for k in kills],
        0.4,
        label="stream's largest gap (ms)",
    )
    left.plot(xs, [k["baseline"]["gap_ms"] for k in kills], "k.", label="gap before the kill (ms)")
    left.axhline(TARGETS["remaster_p95_s"] * 1e3, color="r", ls="--", lw=1, label="target: 1 s")
    left.set_xlabel("kill")
    left.set_title("Instance killed: time to a new master, and the traffic")
    left.legend(fontsize=8)
    load = doc.get("load", {})
    labels, cpu = [], []
    for n, per in sorted(load.items()):
        for name, f in sorted(per.items()):
            labels.append(f"{n}: {name}")
            cpu.append(f["cpu_per_s"])
    right.bar(range(len(cpu)), cpu)
    right.set_xticks(range(len(cpu)), labels, rotation=45, ha="right", fontsize=8)
    right.set_ylabel("CPU seconds per second")
    right.set_title("Control-plane load per instance (cluster size: instance)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    out = Path((argv or sys.argv[1:] or ["results/cluster"])[0])
    doc = json.loads((out / "results.json").read_text())
    print(table(doc))
    plot(doc, out / "cluster.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
