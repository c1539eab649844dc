"""k-ary fat-tree (Al-Fares et al., SIGCOMM 2008): k pods of k/2 edge and k/2 aggregation
switches, (k/2)^2 core switches, k^3/4 hosts; full bisection bandwidth.

Port plan (fixed, so a port number tells the direction):
edge: 1..k/2 hosts, k/2+1..k aggregation j=0..k/2-1;
aggregation j: 1..k/2 edge switches, k/2+1..k core switches j*(k/2)+i;
core c: port p+1 leads to pod p.
Hosts are numbered pod by pod, ``h1``.. with IP ``10.pod.edge.(host+2)``.
"""

from __future__ import annotations

import networkx as nx

from topologies.graph import TopologyError, add_host, add_link, add_switch, new_graph


def fat_tree(
    k: int = 4, rate_mbps: float = 10.0, host_rate_mbps: float | None = None
) -> nx.MultiGraph:
    if not isinstance(k, int) or isinstance(k, bool):
        raise TopologyError(f"fat_tree: k must be an integer, got {k!r}")
    if k % 2 or not 4 <= k <= 64:
        raise TopologyError(f"fat_tree: k must be an even integer from 4 to 64, got {k}")
    half = k // 2
    host_rate = rate_mbps if host_rate_mbps is None else host_rate_mbps
    g = new_graph(f"fat_tree({k})", "fat_tree", k=k, rate_mbps=rate_mbps)
    dpid = 0

    def next_dpid() -> int:
        nonlocal dpid
        dpid += 1
        return dpid

    cores = [f"c{c + 1}" for c in range(half * half)]
    for name in cores:
        add_switch(g, name, next_dpid(), "core")
    host_no = 0
    for pod in range(k):
        aggs = [f"a{pod}_{j}" for j in range(half)]
        edges = [f"e{pod}_{j}" for j in range(half)]
        for name in aggs:
            add_switch(g, name, next_dpid(), "agg", group=pod)
        for name in edges:
            add_switch(g, name, next_dpid(), "edge", group=pod)
        for e, edge in enumerate(edges):
            for h in range(half):
                host_no += 1
                add_host(g, f"h{host_no}", edge, f"10.{pod}.{e}.{h + 2}", host_rate, pod, h + 1)
            for j, agg in enumerate(aggs):
                add_link(g, edge, agg, rate_mbps, port_a=half + 1 + j, port_b=e + 1)
        for j, agg in enumerate(aggs):
            for i in range(half):
                core = cores[j * half + i]
                add_link(g, agg, core, rate_mbps, port_a=half + 1 + i, port_b=pod + 1)
    return g
