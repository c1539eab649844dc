"""``make demo``: Loom on an emulated k=4 fat-tree, end to end.

Starts the controller and a 20-switch fat-tree of userspace Open vSwitch switches with
HTB-shaped links, lets Loom discover it with no topology file, then measures: discovery
time, a pingall, and a small iperf3 matrix of concurrent cross-pod TCP flows. Prints a
summary, saves it as JSON, and leaves nothing running unless ``--cli`` is given.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from mininet_scenarios.stack import LoomStack
from mininet_scenarios.traffic import cpu_idle_sampler, iperf3_flows
from topologies import fat_tree
from topologies.graph import switch_by_dpid

MATRIX = [("h1", "h16"), ("h6", "h11"), ("h9", "h4"), ("h14", "h7")]


def say(text: str) -> None:
    print(f"[loom demo] {text}", flush=True)


def table(rows: list[list[Any]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [line.format(*header), line.format(*("-" * w for w in widths))]
    out += [line.format(*map(str, r)) for r in rows]
    return "\n".join(out)


def print_topology(stack: LoomStack) -> dict[str, Any]:
    topo = stack.api.topology()
    names = switch_by_dpid(stack.graph)
    neighbours: dict[str, list[str]] = {}
    for link in topo["links"]:
        src, dst = names[link["src"][0]], names[link["dst"][0]]
        neighbours.setdefault(src, []).append(f"{link['src'][1]}->{dst}")
    rows = [[name, " ".join(sorted(neighbours.get(name, [])))] for name in sorted(neighbours)]
    print(table(rows, ["switch", "port->neighbour (learned by LLDP)"]))
    return topo


def core_bytes(stack: LoomStack) -> dict[str, int]:
    cores = [n for n, d in stack.graph.nodes(data=True) if d.get("role") == "core"]
    return {c: sum(p.tx_bytes for p in stack.net.port_counters(c).values()) for c in sorted(cores)}


def run(args: argparse.Namespace) -> int:
    graph = fat_tree(4, rate_mbps=args.rate)
    run_dir = Path(args.run_dir)
    summary: dict[str, Any] = {"fabric": graph.graph["name"], "link_rate_mbps": args.rate}
    say(
        f"starting the controller and a {graph.graph['name']} (20 switches, 16 hosts)"
        f" at {args.rate:g} Mbit/s"
    )
    t0 = time.monotonic()
    with LoomStack(graph, run_dir) as stack:
        summary["discovery_s"] = round(stack.discovery_seconds, 2)
        say(f"discovered every switch and link in {stack.discovery_seconds:.1f} s:")
        topo = print_topology(stack)
        summary["switches"], summary["links"] = len(topo["switches"]), len(topo["links"])

        say("pingall (every ordered host pair, ARP answered by the controller) ...")
        ping = stack.net.pingall(timeout=2.0)
        summary["pingall_loss_pct"] = ping.loss_pct
        say(
            f"pingall: {ping.loss_pct:.1f} % loss over {len(ping.pairs)} pairs"
            f" in {ping.seconds:.1f} s"
        )

        say(f"iperf3: {len(MATRIX)} concurrent cross-pod TCP flows for {args.seconds:g} s ...")
        before = core_bytes(stack)
        with cpu_idle_sampler() as cpu:
            flows = iperf3_flows(stack.net, MATRIX, seconds=args.seconds, cport_base=41000).flows
        after = core_bytes(stack)
        rows = [
            [f.sender, f.receiver, f"{f.mbps:.2f}", f"{f.mbps / args.rate:.2f}", f.retransmits]
            for f in flows
        ]
        print(table(rows, ["from", "to", "Mbit/s", "of link", "retransmits"]))
        carried = {c: round((after[c] - before[c]) / 1e6, 1) for c in after}
        say(
            f"MB forwarded by each core switch (hashed at the edge, spread by destination"
            f" above it): {carried}"
        )
        summary["core_mb"] = carried
        summary["iperf3"] = [
            {"from": f.sender, "to": f.receiver, "mbps": round(f.mbps, 2)} for f in flows
        ]
        summary["cpu_idle_pct"] = round(cpu.mean or 0.0, 1)
        if args.cli:
            from mininet_scenarios.run import loom_cli

            say(
                "Mininet CLI (exit to clean up); REST API at "
                + stack.api.base_url
                + "/loom/v1/topology"
            )
            loom_cli(stack.net)
    summary["total_s"] = round(time.monotonic() - t0, 1)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    say("summary:")
    rows = [
        [k, json.dumps(v) if isinstance(v, list | dict) else v]
        for k, v in summary.items()
        if k != "iperf3"
    ]
    print(table(rows, ["figure", "value"]))
    say(f"everything stopped and removed; results in {run_dir}/summary.json")
    ok = ping.loss_pct == 0.0 and all(f.error is None for f in flows)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="loom-demo", description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=10.0, help="link rate in Mbit/s (default 10)")
    parser.add_argument("--seconds", type=float, default=8.0, help="iperf3 duration (default 8)")
    parser.add_argument("--run-dir", default="results/demo", help="where logs and summary.json go")
    parser.add_argument("--cli", action="store_true", help="open Mininet's CLI before cleaning up")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
