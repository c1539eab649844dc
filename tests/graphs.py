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
