"""``loom-topology SPEC [--yaml] [--summary]``: look at a fabric before running it.

The summary's bisection hint is the max flow from the first half of the hosts (by index)
to the rest: not the true bisection (a minimum over all balanced cuts) but, with hosts
numbered pod by pod or group by group, the cut that matters for most training jobs.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence

import networkx as nx

from topologies import SPEC_HELP, TopologyError, by_name, dump_fabric
from topologies.graph import host_list, link_ends, switches


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{key} {n}" for key, n in counter.items())


def bisection_hint(g: nx.MultiGraph) -> str:
    """Max flow (Mbit/s) from hosts h[0:n/2] to h[n/2:], against their line rate."""
    hosts = host_list(g)
    if len(hosts) < 2:
        return "n/a (fewer than two hosts)"
    half = len(hosts) // 2
    flow = nx.DiGraph()
    demand = [0.0, 0.0]
    for side, members in enumerate((hosts[:half], hosts[half:])):
        for h in members:
            (end,) = link_ends(g, h)
            a, b = ("src", end.peer) if side == 0 else (end.peer, "dst")
            cap = flow.get_edge_data(a, b, {"capacity": 0.0})["capacity"]
            flow.add_edge(a, b, capacity=cap + end.rate_mbps)
            demand[side] += end.rate_mbps
    for u, v, d in g.edges(data=True):
        if d["scope"] == "host":
            continue
        for a, b in ((u, v), (v, u)):
            cap = flow.get_edge_data(a, b, {"capacity": 0.0})["capacity"]
            flow.add_edge(a, b, capacity=cap + d["rate_mbps"])
    value = float(nx.maximum_flow_value(flow, "src", "dst"))
    need = min(demand)
    return (
        f"{value:g} Mbit/s from {hosts[0]}..{hosts[half - 1]} to {hosts[half]}..{hosts[-1]} "
        f"({100 * value / need:.0f}% of their {need:g} Mbit/s line rate)"
    )


def summary(g: nx.MultiGraph) -> str:
    sw = list(switches(g))
    roles = Counter(str(g.nodes[s]["role"]) for s in sw)
    scopes = Counter(str(d["scope"]) for _, _, d in g.edges(data=True))
    hosts = host_list(g)
    groups = {g.nodes[h]["group"] for h in hosts} - {None}
    radix = max((g.degree(s) for s in sw), default=0)
    params = ", ".join(f"{k}={v}" for k, v in g.graph.get("params", {}).items())
    lines = [
        f"{g.graph.get('name', 'fabric')} ({g.graph.get('kind', '?')}: {params})",
        f"switches: {len(sw)} ({_counts(roles)}), up to {radix} ports each",
        f"hosts: {len(hosts)}" + (f" in {len(groups)} groups" if groups else ""),
        f"links: {g.number_of_edges()} ({_counts(scopes)})",
        f"connected: {'yes' if len(sw) and nx.is_connected(g) else 'NO'}",
        f"bisection hint: {bisection_hint(g)}",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="loom-topology",
        description="Build a Loom fabric and summarise it or dump it.",
        epilog=SPEC_HELP,
    )
    parser.add_argument("spec", help="fabric spec, e.g. fat_tree:k=4 or lab.yaml")
    parser.add_argument("--yaml", action="store_true", help="print the fabric as YAML")
    parser.add_argument(
        "--summary",
        action="store_true",
        help="print the summary (the default; as YAML comments with --yaml)",
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2): return, do not exit
        return int(exc.code or 0)
    try:
        g = by_name(args.spec)
    except TopologyError as err:
        print(f"loom-topology: {err}", file=sys.stderr)
        return 1
    if args.yaml:
        print(dump_fabric(g), end="")
    if args.summary or not args.yaml:
        text = summary(g)
        if args.yaml:
            text = "\n".join(f"# {line}" for line in text.splitlines())
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
