"""Topology graphs as the controller learns them, for tests of the pure core."""

from __future__ import annotations

import networkx as nx

from topologies.graph import switches


def switch_digraph(g: nx.MultiGraph) -> nx.MultiDiGraph:
    """dpid nodes, one edge per direction, edge key = the source port (like Topology.graph)."""
    d = nx.MultiDiGraph()
    for s in switches(g):
        d.add_node(g.nodes[s]["dpid"])
    for a, b, data in g.edges(data=True):
        if g.nodes[a]["kind"] == "switch" and g.nodes[b]["kind"] == "switch":
            da, db = g.nodes[a]["dpid"], g.nodes[b]["dpid"]
            d.add_edge(da, db, key=data["ports"][a], dst_port=data["ports"][b])
            d.add_edge(db, da, key=data["ports"][b], dst_port=data["ports"][a])
    return d


def edge_of(g: nx.MultiGraph, host: str) -> int:
    return int(g.nodes[g.nodes[host]["switch"]]["dpid"])


def learned_topology(g: nx.MultiGraph):  # type: ignore[no-untyped-def]
    """A ``Topology`` holding what discovery would learn from ``g``: switches, both
    directions of every link, every host."""
    from controller.model import PortDesc
    from controller.topology import Topology
    from topologies.graph import link_ends

    topo = Topology()
    for s in switches(g):
        topo.add_switch(g.nodes[s]["dpid"], [PortDesc(e.port) for e in link_ends(g, s)])
    for a, b, data in g.edges(data=True):
        if g.nodes[a]["kind"] == "switch" and g.nodes[b]["kind"] == "switch":
            ra, rb = (g.nodes[a]["dpid"], data["ports"][a]), (g.nodes[b]["dpid"], data["ports"][b])
            topo.link_seen(0.0, ra, rb)
            topo.link_seen(0.0, rb, ra)
    for h, d in g.nodes(data=True):
        if d["kind"] == "host":
            sw = g.nodes[d["switch"]]["dpid"]
            port = next(e.port for e in link_ends(g, d["switch"]) if e.peer == h)
            topo.learn_host(0.0, d["mac"], d["ip"], sw, port)
    return topo
