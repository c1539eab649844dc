"""Two-tier Clos (leaf-spine): every leaf links to every spine, so any two leaves are two
hops apart over ``spines * uplinks_per_spine`` equal-cost paths. Parallel uplinks to the
same spine (``uplinks_per_spine > 1``) are separate MultiGraph edges, as on a real fabric
that bundles ports without LAG.

Port plan (fixed, 1-based leaf ``i`` and spine ``j``, uplink ``u`` = 0..U-1 with
``U = uplinks_per_spine``): leaf: ``1..hosts_per_leaf`` hosts, then spine ``j`` uplink
``u`` at ``hosts_per_leaf + (j-1)*U + u + 1``; spine: leaf ``i`` uplink ``u`` at
``(i-1)*U + u + 1``. Hosts ``h1..`` are numbered leaf by leaf with IP
``10.0.{i}.{host+2}``; dpids: spines ``1..spines``, then leaves.
"""

from __future__ import annotations

import networkx as nx

from topologies.graph import TopologyError, add_host, add_link, add_switch, new_graph, validate

MAX_LEAVES = 255  # third IP octet
MAX_HOSTS_PER_LEAF = 253  # fourth IP octet is host+2, at most 254


def _check_int(name: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TopologyError(f"leaf_spine: {name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise TopologyError(f"leaf_spine: {name} must be from {low} to {high}, got {value}")
    return value


def leaf_spine(
    leaves: int = 4,
    spines: int = 2,
    hosts_per_leaf: int = 2,
    rate_mbps: float = 10.0,
    uplinks_per_spine: int = 1,
) -> nx.MultiGraph:
    leaves = _check_int("leaves", leaves, 1, MAX_LEAVES)
    spines = _check_int("spines", spines, 1, 512)
    hosts_per_leaf = _check_int("hosts_per_leaf", hosts_per_leaf, 1, MAX_HOSTS_PER_LEAF)
    uplinks = _check_int("uplinks_per_spine", uplinks_per_spine, 1, 64)
    if not isinstance(rate_mbps, int | float) or isinstance(rate_mbps, bool) or rate_mbps <= 0:
        raise TopologyError(f"leaf_spine: rate_mbps must be a positive number, got {rate_mbps!r}")
    rate = float(rate_mbps)
    g = new_graph(
        f"leaf_spine({leaves},{spines})",
        "leaf_spine",
        leaves=leaves,
        spines=spines,
        hosts_per_leaf=hosts_per_leaf,
        rate_mbps=rate,
        uplinks_per_spine=uplinks,
    )
    spine_names = [f"spine{j}" for j in range(1, spines + 1)]
    for dpid, name in enumerate(spine_names, start=1):
        add_switch(g, name, dpid, "spine")
    host_no = 0
    for i in range(1, leaves + 1):
        leaf = f"leaf{i}"
        add_switch(g, leaf, spines + i, "leaf")
        for k in range(hosts_per_leaf):
            host_no += 1
            add_host(g, f"h{host_no}", leaf, f"10.0.{i}.{k + 2}", rate, switch_port=k + 1)
        for j, spine in enumerate(spine_names):
            for u in range(uplinks):
                add_link(
                    g,
                    leaf,
                    spine,
                    rate,
                    port_a=hosts_per_leaf + j * uplinks + u + 1,
                    port_b=(i - 1) * uplinks + u + 1,
                )
    validate(g)  # e.g. interface names such as spine300-eth16384 would be too long
    return g
