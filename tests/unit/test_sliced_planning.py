"""Planning a whole fabric in bounded steps gives what planning it at once gives: the
graph built afresh a few switches a call, routes read and searched a slice a call,
failover read and rebuilt a slice a call, and the cheaper forms of two array steps."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from controller import routing, topology
from controller.model import PortDesc
from controller.nexthops import _distinct_columns
from controller.protection import ProtectionPlanner
from controller.routing import RoutesBuild, compute_routes, groups_of, infer_groups
from controller.topology import Topology
from tests.graphs import switch_digraph
from topologies import dragonfly, fat_tree


def ring_topology(n: int) -> Topology:
    """``n`` switches in a ring, each with three ports (the third for a host)."""
    topo = Topology()
    for dpid in range(1, n + 1):
        topo.add_switch(dpid, [PortDesc(p, name=f"s{dpid}-eth{p}") for p in (1, 2, 3)])
    for a in range(1, n + 1):
        b = a % n + 1
        topo.link_seen(0.0, (a, 1), (b, 2))
        topo.link_seen(0.0, (b, 2), (a, 1))
    return topo


def test_a_graph_built_afresh_over_calls_equals_a_snapshot_and_the_old_stays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(topology, "GRAPH_REBUILD_AT", 3)
    topo = ring_topology(6)
    old = topo.graph()
    old_edges = sorted(old.edges(keys=True))
    for dpid in range(1, 7):  # every switch reconnects: the graph is built afresh
        topo.add_switch(dpid, [PortDesc(p, name=f"s{dpid}-eth{p}") for p in (1, 2, 3)])
    version, calls = topo.version, 0
    topo.graph_ready(0)  # (a call that starts the build)
    while not topo.graph_ready(2):
        calls += 1
        assert sorted(old.edges(keys=True)) == old_edges  # the graph in use is untouched
        if calls == 1:  # a port goes down while the new graph is half built
            topo.port_changed(1, PortDesc(1, name="s1-eth1", up=False))
    assert calls >= 2 and topo.version == version + 1
    new = topo.graph()
    assert new is not old and topo.changes_since(version) is None  # consumers start over
    assert sorted(new.edges(keys=True)) == sorted(topo.snapshot().edges(keys=True))
    assert not new.has_edge(1, 2, 1)


@pytest.mark.parametrize(
    "graph", [fat_tree(8), dragonfly(a=4, p=2, h=2, g=5)], ids=["fat_tree(8)", "dragonfly"]
)
def test_routes_built_a_slice_a_call_equal_routes_computed_at_once(
    graph: nx.MultiGraph, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = switch_digraph(graph)
    groups = infer_groups(g)
    dests = sorted(g.nodes)[::2]
    whole = compute_routes(g, dests, groups)
    monkeypatch.setattr(routing, "READ_LINKS_PER_CALL", 7)
    monkeypatch.setattr(routing, "SEARCH_LINKS_PER_CALL", 3 * g.number_of_edges())
    build, steps = RoutesBuild(g, dests, groups), 0
    while (routes := build.step()) is None:
        steps += 1
    assert steps > g.number_of_edges() // 16 + len(dests) // 3  # reads and searches sliced
    assert build.fits(g, dests, groups) and not build.fits(g, dests[1:], groups)
    assert routes.dests == whole.dests and routes.column == whole.column
    assert np.array_equal(routes.dist, whole.dist)
    assert routes.out == whole.out and routes.costs == whole.costs


def test_groups_come_from_the_pairs_ever_linked_and_fat_trees_have_none() -> None:
    assert groups_of(switch_digraph(fat_tree(8)).nodes, switch_digraph(fat_tree(8)).edges()) is None
    g = switch_digraph(dragonfly(a=4, p=2, h=2, g=5))
    pairs = {(min(u, v), max(u, v)) for u, v in g.edges()}
    expected = infer_groups(g)
    assert expected is not None and groups_of(g.nodes, pairs) == expected
    u, v = next((u, v) for u, v in sorted(pairs) if expected[u] == expected[v])
    live = nx.MultiDiGraph(g)
    live.remove_edges_from([(u, v, k) for k in list(live[u][v])])
    live.remove_edges_from([(v, u, k) for k in list(live[v][u])])
    assert infer_groups(live) != expected  # the live graph alone loses the group
    assert groups_of(live.nodes, pairs) == expected  # ever-linked pairs keep it


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(bool, st.tuples(st.integers(1, 70), st.integers(1, 40)), elements=st.booleans()))
def test_distinct_columns_are_those_numpy_unique_finds(tight: np.ndarray) -> None:
    patterns, which = np.unique(tight.T, axis=0, return_inverse=True)
    got_patterns, got_which = _distinct_columns(tight)
    assert np.array_equal(got_patterns, patterns)
    assert np.array_equal(got_which, which.ravel())


def test_failover_read_and_rebuilt_in_slices_plans_what_one_call_plans() -> None:
    g = switch_digraph(fat_tree(8))
    whole = ProtectionPlanner().plan(g, None, None, None)
    sliced, calls = ProtectionPlanner(), 0
    result = sliced.plan(g, None, None, 1)
    while result.waiting:
        calls += 1
        assert result.plans == {}  # nothing in force until the last slice
        result = sliced.plan(g, [], None, 1)
    assert calls > g.number_of_nodes()  # reads and rebuilds were sliced too
    assert result.plans == whole.plans and result.protection == whole.protection
