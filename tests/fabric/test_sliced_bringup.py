"""A fabric that comes up with every kind of planning cut into its smallest slices (the
graph built a few switches a call, routes read and searched a few links a call, failover
read, rebuilt and put in force a few switches a call, skeletons and LLDP a few switches
a call) ends with exactly the tables of one planned whole, and no switch ever refuses a
rule on the way (the fake fabric is strict: a route pointing at a group not yet there
is an error)."""

from __future__ import annotations

from typing import Any

import pytest

from controller import discovery, failover, protection, routekeeper, routing, sources, topology
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from tests.sim import LoomSim
from topologies import dragonfly, fat_tree


def smallest_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topology, "GRAPH_REBUILD_AT", 2)
    monkeypatch.setattr(routekeeper, "GRAPH_SWITCHES_PER_CALL", 3)
    monkeypatch.setattr(routekeeper, "READ_LINKS_PER_CALL", 5)
    monkeypatch.setattr(routing, "READ_LINKS_PER_CALL", 5)
    monkeypatch.setattr(routing, "SEARCH_LINKS_PER_CALL", 1)  # one destination a call
    monkeypatch.setattr(protection, "READ_LINKS_PER_DETOUR", 1)
    monkeypatch.setattr(protection, "PUBLISH_PER_DETOUR", 1)
    monkeypatch.setattr(failover, "DETOURS_PER_CALL", 3)
    monkeypatch.setattr(failover, "LAND_RULES_PER_CALL", 10)
    monkeypatch.setattr(sources, "BASE_PORTS_PER_CALL", 4)
    monkeypatch.setattr(sources, "ROUTE_SLICE_WORK", 1)
    monkeypatch.setattr(discovery, "RESEND_PER_CALL", 2)


def bring_up(sim: LoomSim) -> None:
    """What ``LoomSim.start`` does, with every slice left after an event run at once
    (as the shim does, between other events)."""

    def run(seconds: float) -> None:
        for _ in range(round(seconds / 0.1)):
            sim.advance(0.1)
            while sim.core.busy:
                sim.apply(sim.core.work(sim.now))

    sim.connect_all()
    run(1.5)
    sim.announce_hosts()
    run(1.0)


def tables(sim: LoomSim) -> dict[int, Any]:
    """Every switch's flows and groups, as the switch holds them."""
    out = {}
    for dpid in sorted(sim.fake.switches):
        flows = sorted(
            (f.table_id, f.priority, repr(sorted(f.match.items())), repr(f.instructions))
            for f in sim.fake.flows(dpid)
        )
        held = sim.fake.groups(dpid).values()
        groups = sorted((g.group_id, g.type, repr(g.buckets)) for g in held)
        out[dpid] = (flows, groups)
    return out


@pytest.mark.parametrize("graph", [fat_tree(4), dragonfly(a=4, p=1, h=1, g=5)], ids=["ft4", "df"])
def test_a_fabric_planned_in_the_smallest_slices_ends_as_one_planned_whole(
    graph: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = FabricConfig(te=TeConfig(enabled=False))
    whole = LoomSim(graph, config).start()
    calls = {"work": 0}
    with monkeypatch.context() as patched:
        smallest_slices(patched)
        sliced = LoomSim(graph, config)
        original = sliced.core.work

        def counted(now: float) -> Any:
            calls["work"] += sliced.core.busy
            return original(now)

        patched.setattr(sliced.core, "work", counted)
        bring_up(sliced)
        assert not sliced.core.busy
        assert calls["work"] > 50  # it was sliced indeed
        assert not sliced.fake.errors
        assert tables(sliced) == tables(whole)
    assert sliced.fake.reachability().ok


def test_routes_in_use_stay_on_their_own_graph_while_a_new_one_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A re-plan whose graph is built afresh over calls leaves the routes in force, and
    the graph they were computed on, untouched until the new routes are whole."""
    sim = LoomSim(fat_tree(4), FabricConfig(te=TeConfig(enabled=False))).start()
    core = sim.core
    before, edges = core.inputs.routes, sorted(core.inputs.routes.graph.edges(keys=True))
    smallest_slices(monkeypatch)
    for dpid in sorted(core.topo.switches)[:4]:  # four switches reconnect: a large change
        core.topo.add_switch(dpid, list(core.topo.switches[dpid].ports.values()))
    core.discovery.changed(sim.now)
    out = core.recompute(sim.now)
    assert core.busy and core.inputs.routes is before and not out
    steps = 0
    while core.inputs.routes is before:
        assert sorted(before.graph.edges(keys=True)) == edges
        sim.apply(core.work(sim.now))
        steps += 1
    assert steps > 3
    assert core.inputs.routes.graph is not before.graph
    assert sorted(core.inputs.routes.graph.edges(keys=True)) == edges
