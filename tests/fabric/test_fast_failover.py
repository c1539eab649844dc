"""Fast failover on the fake fabric: with the controller told nothing, the switches'
failover groups and detour tunnels alone deliver every host pair, with no loop, after
any single link failure; with failover off, the same failure black-holes traffic."""

from __future__ import annotations

import networkx as nx
import pytest

from controller import failover, sources
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from tests.sim import LoomSim
from topologies import dragonfly, fat_tree
from topologies.graph import switch_graph

FABRICS = {
    "fat_tree(4)": lambda: fat_tree(4),
    "dragonfly(4,1,1,5)": lambda: dragonfly(a=4, p=1, h=1, g=5),
}


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_every_single_link_failure_is_bridged_by_the_switches_alone(name: str) -> None:
    sim = LoomSim(FABRICS[name](), FabricConfig(te=TeConfig(enabled=False))).start()
    links = sorted({tuple(sorted(e)) for e in nx.Graph(switch_graph(sim.graph)).edges()})
    for a, b in links:
        sim.fake.set_link(a, b, False)  # the controller hears nothing: no PortStatus
        report = sim.fake.reachability()
        assert report.ok, f"{a}-{b} down:\n{report.render()}"
        sim.fake.set_link(a, b, True)


def test_without_fast_failover_a_failure_black_holes_until_the_controller_acts() -> None:
    config = FabricConfig(te=TeConfig(enabled=False), fast_failover=False)
    sim = LoomSim(fat_tree(4), config).start()
    sim.fake.set_link("a0_0", "c1", False)
    assert not sim.fake.reachability().ok
    sim.fail_link("a0_0", "c1")  # now the PortStatus arrives: the controller reroutes
    assert sim.fake.reachability().ok


def test_detour_uses_a_tunnel_and_leaves_it_untagged() -> None:
    sim = LoomSim(fat_tree(4), FabricConfig(te=TeConfig(enabled=False))).start()
    sim.fake.set_link("c1", "a2_0", False)
    pkt = sim.fake.packet("h1", "h9")
    trace = sim.fake.trace("h1", pkt)
    assert trace.ok_unicast("h9"), trace.render()
    for branch in trace.branches:
        tagged = [hop for hop in branch.hops if "vlan_vid" in hop.packet]
        assert branch.hops[-1].packet.get("vlan_vid") is None  # delivered untagged
        if "c1" in branch.path:  # the branch that met the failure went round it, tagged
            assert tagged and len(branch.path) > 5


def test_detours_searched_over_several_calls_protect_every_link_in_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two detour searches per call (a large fabric's links take many calls): the
    fabric is busy until every link has its detour, then every failure is bridged."""
    monkeypatch.setattr(failover, "DETOURS_PER_CALL", 2)
    sim = LoomSim(fat_tree(4), FabricConfig(te=TeConfig(enabled=False))).start()
    assert not sim.core.busy and not sim.core.sources.failover.waiting
    links = sorted({tuple(sorted(e)) for e in nx.Graph(switch_graph(sim.graph)).edges()})
    for a, b in links[::3]:
        sim.fake.set_link(a, b, False)
        report = sim.fake.reachability()
        assert report.ok, f"{a}-{b} down:\n{report.render()}"
        sim.fake.set_link(a, b, True)


def test_the_ends_of_a_failed_link_stop_using_it_in_the_port_status_call_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At size a re-plan takes many calls (one slice of switches each). Until an end's
    turn, its old plan goes on without the dead port: over a live equal-cost port, or to
    the controller, never into the dead link, and no packet loops. (A switch planned
    afresh may still meet a neighbour not planned yet that sends a packet back: OVS drops
    it at the in-port; ordering the slices against that is not done yet.)"""
    monkeypatch.setattr(sources, "ROUTE_SLICE_WORK", 1)  # one switch a call, as at size
    config = FabricConfig(te=TeConfig(enabled=False), fast_failover=False)
    sim = LoomSim(fat_tree(4), config).start()
    sim.set_link("a0_0", "c1", False)  # both PortStatus, nothing else in between
    assert sim.core.sources.routing.pending  # the re-plan is not done ...
    report = sim.fake.reachability()
    reasons = {b.end.reason for t in report.traces.values() for b in t.branches}
    assert "dead-port" not in reasons, report.render()
    assert not report.looped, report.render()
    sim.advance(2.0)
    assert sim.fake.reachability().ok
