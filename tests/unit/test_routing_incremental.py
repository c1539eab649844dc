"""Routes updated after link events equal routes computed afresh, and the graph the
topology keeps up to date switch by switch equals one built from scratch."""

from __future__ import annotations

import networkx as nx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.model import PortDesc
from controller.routing import compute_routes, infer_groups, update_routes
from controller.topology import Topology
from tests.graphs import switch_digraph
from topologies import dragonfly, fat_tree

FABRICS = {
    "fat_tree(4)": switch_digraph(fat_tree(4)),
    "dragonfly(4,2,2,5)": switch_digraph(dragonfly(a=4, p=2, h=2, g=5)),
}
Cable = tuple[int, int, int, int]  # (u, port, v, port)


def cables(g: nx.MultiDiGraph) -> list[Cable]:
    return sorted((u, k, v, d["dst_port"]) for u, v, k, d in g.edges(keys=True, data=True) if u < v)


def assert_same(got: nx.MultiDiGraph, dests: list[int], groups: object, routes: object) -> None:
    fresh = compute_routes(got, dests, groups)  # type: ignore[arg-type]
    assert routes.dests == fresh.dests  # type: ignore[attr-defined]
    assert np.array_equal(routes.dist, fresh.dist)  # type: ignore[attr-defined]
    assert routes.out == fresh.out  # type: ignore[attr-defined]
    assert routes.peer() == fresh.peer()  # type: ignore[attr-defined]
    for dest in dests[:: max(1, len(dests) // 4)]:  # (from link arrays updated in place)
        assert routes.hops_to(dest) == fresh.hops_to(dest)  # type: ignore[attr-defined]


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(sorted(FABRICS)),
    steps=st.lists(st.tuples(st.integers(0, 10_000), st.booleans()), min_size=1, max_size=8),
)
def test_updated_routes_equal_routes_computed_afresh(
    name: str, steps: list[tuple[int, bool]]
) -> None:
    full = FABRICS[name]
    g = full.copy()
    groups = infer_groups(full)
    dests = sorted(g.nodes)
    routes = compute_routes(g, dests, groups)
    routes.peer()  # built before: updated in place of rebuilt
    every = cables(full)
    for pick, restore in steps:
        u, pu, v, pv = every[pick % len(every)]
        if restore and not g.has_edge(u, v, pu):
            g.add_edge(u, v, key=pu, dst_port=pv)
            g.add_edge(v, u, key=pv, dst_port=pu)
        elif g.has_edge(u, v, pu):
            g.remove_edge(u, v, pu)
            g.remove_edge(v, u, pv)
        routes = update_routes(routes, g, {u, v}, dests, groups)
        assert_same(g, dests, groups, routes)


def test_a_fat_tree_link_searches_only_the_columns_it_shifts() -> None:
    g = switch_digraph(fat_tree(8)).copy()
    dests = sorted(g.nodes)
    routes = compute_routes(g, dests, None)
    before = routes.dist.copy()  # (the update takes the array over)
    u, pu, v, pv = next(c for c in cables(g) if g.degree(c[0]) == g.degree(c[2]))
    g.remove_edge(u, v, pu)
    g.remove_edge(v, u, pv)
    after = update_routes(routes, g, {u, v}, dests, None)
    changed = np.flatnonzero(np.any(after.dist != before, axis=0))
    assert 0 < len(changed) < len(dests) // 2
    assert after.relinked == {u, v} and after.base == routes.serial
    moved = {after.nodes[i] for i in np.flatnonzero(np.any(after.dist != before, axis=1))}
    assert after.moved == moved


def test_the_topology_graph_kept_up_to_date_equals_one_built_afresh() -> None:
    topo = Topology()
    for dpid in (1, 2, 3):
        topo.add_switch(dpid, [PortDesc(p, name=f"s{dpid}-eth{p}") for p in (1, 2, 3)])
    for (a, pa), (b, pb) in [((1, 1), (2, 1)), ((2, 2), (3, 1)), ((1, 2), (3, 2))]:
        topo.link_seen(0.0, (a, pa), (b, pb))
        topo.link_seen(0.0, (b, pb), (a, pa))
    g = topo.graph()
    version = topo.version
    assert topo.changes_since(version) == set()
    topo.port_changed(2, PortDesc(2, name="s2-eth2", up=False))
    assert topo.graph() is g
    assert topo.changes_since(version) == {2, 3}
    assert sorted(g.edges(keys=True)) == sorted(topo.snapshot().edges(keys=True))
    version = topo.version
    topo.remove_switch(1)  # switches came or went: routes start over, on a graph of their own
    fresh = topo.graph()
    assert fresh is not g and 1 not in fresh and 1 in g
    assert topo.changes_since(version) is None
    assert sorted(fresh.edges(keys=True)) == sorted(topo.snapshot().edges(keys=True))


def test_a_link_event_relinks_two_switches_and_routes_as_a_fresh_plan_would() -> None:
    from tests.sim import LoomSim

    sim = LoomSim(fat_tree(8)).start()
    core = sim.core
    a, c = (int(sim.graph.nodes[n]["dpid"]) for n in ("a0_0", "c1"))
    for up in (False, True):
        sim.set_link("a0_0", "c1", up)
        sim.advance(3.0)
        # (each end's PortStatus relinks its own switch, the peer's link with it)
        assert core.inputs.routes.relinked is not None and core.inputs.routes.relinked <= {a, c}
        fresh = compute_routes(core.topo.snapshot(), core.inputs.routes.dests, None)
        assert np.array_equal(core.inputs.routes.dist, fresh.dist)
        assert core.inputs.routes.out == fresh.out
        assert sorted(core.inputs.routes.graph.edges(keys=True)) == sorted(
            fresh.graph.edges(keys=True)
        )
