"""Jobs that must share links, by weight (``docs/benchmarks.md`` §2, "Jobs that must share
links"): real switches, real TCP, the controller started as docs/operator.md says.

    python -m mininet_scenarios.bench.weights [--seconds 20] [--repeats 2]
        [--out results/weights]

- **Fabric**: a 2:1 oversubscribed leaf-spine, 2 leaves of 4 hosts and 2 spines, every
  link 10 Mbit/s, the kernel's queues, no class tree, and Loom told nothing (plain).
- **Jobs**: ``small`` (h1, h5) and ``large`` (h2, h6, h3, h7, h4, h8) rings: every hop
  crosses leaves, so four hops leave each leaf over its two uplinks and no placement
  avoids sharing. Each hop carries one long iperf3 TCP flow; a ring runs at its slowest
  hop's rate, so a job's figure is its slowest hop ÷ the link rate.
- **Modes**, one network: ``unregistered`` (the jobs not told: traffic engineering
  alone), ``equal`` (both registered, weight 1) and ``weighted`` (``small`` at weight 3).
  **Expected**: 1/2 of a link each in the first two; 1 and 1/3 weighted (the weights'
  proportion, as TCP shares a link per connection).

Results: ``results.json`` (rewritten after every run) and ``table.txt``. Wrap in ``flock
/tmp/loom-emulation.lock`` where other emulations may run (``make bench-weights`` does).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mininet_scenarios.harness.processes import REPO_ROOT
from mininet_scenarios.workloads.collectives.model import ring_pairs
from topologies import leaf_spine

RATE_MBPS = 10.0
RINGS = {"small": ("h1", "h5"), "large": ("h2", "h6", "h3", "h7", "h4", "h8")}
MODES = {"unregistered": None, "equal": {"small": 1, "large": 1}, "weighted": {"small": 3}}


def say(text: str) -> None:
    print(f"[weights] {time.strftime('%H:%M:%S')} {text}", flush=True)


def job_figures(rates: Mapping[tuple[str, str], float], link_mbps: float) -> dict[str, float]:
    """Each job's slowest hop ÷ the link rate: the rate a lock-step ring runs at."""
    return {
        name: round(min(rates[hop] for hop in ring_pairs(ring, 1)) / link_mbps, 3)
        for name, ring in RINGS.items()
    }


def summary(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """``mode -> job -> median figure`` over the repeats, and the small ÷ large ratio."""
    out: dict[str, dict[str, float]] = {}
    for mode in MODES:
        mine = [r["jobs"] for r in runs if r["mode"] == mode]
        if not mine:
            continue
        row = {job: statistics.median(m[job] for m in mine) for job in RINGS}
        row["small/large"] = round(row["small"] / row["large"], 2) if row["large"] else 0.0
        out[mode] = row
    return out


def table(doc: Mapping[str, Any]) -> str:
    lines = [f"{'mode':<14}{'small':>8}{'large':>8}{'small/large':>13}   (slowest hop / link)"]
    for mode, row in summary(doc["runs"]).items():
        lines.append(
            f"{mode:<14}{row['small']:>8.2f}{row['large']:>8.2f}{row['small/large']:>13.2f}"
        )
    return "\n".join(lines)


def register(st: Any, weights: Mapping[str, int]) -> None:
    """Book both jobs (weight 1 unless given) and wait until Loom has placed them."""
    for name, ring in RINGS.items():
        ips = [st.graph.nodes[h]["ip"] for h in ring]
        body = {"name": name, "tenant": "bench", "hosts": ips, "weight": weights.get(name, 1)}
        st.api.request("POST", "/loom/v1/jobs", body)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if all(st.api.get(f"/loom/v1/jobs/{n}")["status"] == "active" for n in RINGS):
            return
        time.sleep(0.5)
    raise RuntimeError("the jobs were not placed within 30 s")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from mininet_scenarios.harness.stack import LoomStack
    from mininet_scenarios.workloads.iperf import iperf3_flows

    graph = leaf_spine(leaves=2, spines=2, hosts_per_leaf=4, rate_mbps=RATE_MBPS)
    doc: dict[str, Any] = {
        "benchmark": "weights (docs/benchmarks.md §2)",
        "fabric": "leaf_spine(leaves=2, spines=2, hosts_per_leaf=4), 10 Mbit/s, plain",
        "rings": RINGS,
        "weights": MODES,
        "seconds": args.seconds,
        "runs": [],
    }
    pairs = [hop for ring in RINGS.values() for hop in ring_pairs(ring, 1)]
    with LoomStack(graph, args.out / "run") as st:
        st.net.pingall(timeout=2.0)
        for mode, weights in MODES.items():
            if weights is not None:
                register(st, weights)
            for repeat in range(args.repeats):
                say(f"{mode} {repeat + 1}/{args.repeats}: {len(pairs)} flows, {args.seconds:g} s")
                res = iperf3_flows(st.net, pairs, args.seconds, cport_base=40000 + 100 * repeat)
                rates = {(f.sender, f.receiver): f.mbps for f in res.flows}
                figs = job_figures(rates, RATE_MBPS)
                say(f"{mode}: {figs}")
                doc["runs"].append(
                    {
                        "mode": mode,
                        "repeat": repeat,
                        "jobs": figs,
                        "hops_mbps": {f"{a}->{b}": round(r, 2) for (a, b), r in rates.items()},
                    }
                )
                (args.out / "results.json").write_text(json.dumps(doc, indent=1))
            if weights is not None:
                for name in RINGS:
                    st.api.request("DELETE", f"/loom/v1/jobs/{name}")
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="per run (default 20)")
    ap.add_argument("--repeats", type=int, default=2, help="runs per mode (default 2)")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "results" / "weights")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    doc = run(args)
    text = table(doc)
    (args.out / "table.txt").write_text(text + "\n")
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
