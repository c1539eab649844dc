"""The scale bench's packet walker (``mininet_scenarios.bench.scale_walk``): it must see
what the fake fabric sees, catch what it is there to catch, and through every slice of
a reroute on the scale wire find no packet that loops or is lost."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import networkx as nx
import pytest

from controller import sources
from controller.conductor import Conductor
from controller.model import OFPP_IN_PORT, FlowMod, FlowRule, GroupMod, Match, Op, Output, Table
from mininet_scenarios.bench.scale import Watch, core_config, pick_link, settle
from mininet_scenarios.bench.scale_walk import RerouteWalk, Walker
from mininet_scenarios.bench.scale_wire import Wire
from tests.sim import LoomSim
from topologies import by_name, dragonfly, fat_tree, shuffle_ids
from topologies.graph import switch_graph

FABRICS: dict[str, Callable[[], nx.MultiGraph]] = {
    "fat_tree(4)": lambda: shuffle_ids(fat_tree(4), "walk"),
    "dragonfly(4,1,1,5)": lambda: shuffle_ids(dragonfly(a=4, p=1, h=1, g=5), "walk"),
}


def wire_of(sim: LoomSim) -> Wire:
    """A scale wire whose switches hold what the fake ones hold, read back as the shim
    decodes a switch's dump (so the walker reads rules that went through OpenFlow)."""
    wire = Wire(sim.graph, sim.core)
    for dpid, table in wire.tables.items():
        flows, groups, _ = sim.read_switch(dpid)
        for group in groups:
            table.apply(GroupMod(Op.ADD, group))
        for rule in flows:
            table.apply(FlowMod(Op.ADD, rule))
    return wire


def outcomes(walker: Walker) -> dict[str, set[tuple[str, str]]]:
    hosts = walker.wire.hosts
    out: dict[str, set[tuple[str, str]]] = {}
    for pair in ((a, b) for a in hosts for b in hosts if a != b):
        out.setdefault(walker.walk(*pair).outcome, set()).add(pair)
    return out


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_the_walker_agrees_with_the_fake_fabric(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settled, every pair delivered by both; then, one slice a call, right after a link
    failed, the same pairs delivered, sent to the controller, lost and looped by both."""
    monkeypatch.setattr(sources, "ROUTE_SLICE_WORK", 1)
    sim = LoomSim(FABRICS[name]()).start()
    report = sim.fake.reachability()  # asks the core for every address, as ARP would
    assert report.ok, report.render()
    assert set(outcomes(Walker(wire_of(sim)))) == {"delivered"}

    a, b = next((a, b) for a, b in sorted(switch_graph(sim.graph).edges()))
    sim.set_link(a, b, False)
    wire = wire_of(sim)
    for ref, far in wire.peer.items():
        if {wire.names[ref[0]], wire.names[far[0]]} == {a, b}:
            wire.down.update((ref, far))
    report, walked = sim.fake.reachability(), outcomes(Walker(wire))
    assert walked.get("delivered", set()) == set(report.delivered)
    assert walked.get("controller", set()) == set(report.controller) - set(report.dropped)
    assert walked.get("lost", set()) == set(report.dropped) | set(report.misdelivered)
    assert walked.get("looped", set()) == set(report.looped)


def test_the_walker_finds_loops_dead_ports_and_turned_back_packets() -> None:
    sim = LoomSim(FABRICS["fat_tree(4)"]()).start()
    sim.fake.reachability()
    wire = wire_of(sim)
    walker = Walker(wire)
    src, dst = wire.hosts[0], wire.hosts[-1]  # in two pods
    assert walker.walk(src, dst).outcome == "delivered"
    edge = wire.where[dst][0]
    up, other = sorted(p for d, p in wire.peer if d == edge)
    address = wire.view.address_of(str(wire.graph.nodes[dst]["mac"]))
    assert address is not None
    table = wire.tables[edge]

    def route(in_port: int, out: int) -> None:
        match = Match.of(eth_dst=address, in_port=in_port)
        table.apply(FlowMod(Op.ADD, FlowRule(Table.ROUTE, 999, match, (Output(out),))))

    route(up, other)  # in by one uplink, out by the other: down again, out again...
    route(other, up)
    walk = walker.walk(src, dst)
    assert walk.outcome == "looped" and "back at" in walk.failure, walk.failure

    route(up, OFPP_IN_PORT)  # back where it came from: up and down again, for ever
    walk = walker.walk(src, dst)
    assert walk.outcome == "looped", walk.failure

    route(up, up)  # the same without OFPP_IN_PORT: the switch drops it
    route(other, other)
    walk = walker.walk(src, dst)
    assert walk.outcome == "lost" and "in-port" in walk.reason, walk.failure

    for port in (up, other):
        table.apply(
            FlowMod(Op.DELETE, FlowRule(Table.ROUTE, 999, Match.of(eth_dst=address, in_port=port)))
        )
    assert walker.walk(src, dst).outcome == "delivered"
    wire.down.add(wire.where[dst])  # its cable is out: the switch does not know yet
    assert walker.refresh()
    walk = walker.walk(src, dst)
    assert walk.outcome == "lost" and walk.reason == f"dead port {wire.where[dst][1]}"


@pytest.mark.parametrize(
    ("spec", "failover"),
    [
        ("fat_tree:k=8", True),
        ("fat_tree:k=8", False),
        ("dragonfly:a=4,p=2,h=2,g=9", True),
        ("dragonfly:a=8,p=4,h=4,g=33", True),
    ],
)
def test_no_pair_loops_or_is_lost_after_any_slice_of_a_reroute(
    spec: str, failover: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bench's own check, with shuffled ids, planned one switch a call: an
    aggregation-core link of a fat-tree fails, or a global link of a dragonfly (whose
    routers wait on each other in cycles, for different destinations); every call that
    changes a switch is walked."""
    monkeypatch.setattr(sources, "ROUTE_SLICE_WORK", 1)
    config = dataclasses.replace(core_config(), fast_failover=failover)
    wire = Wire(shuffle_ids(by_name(spec), spec), Conductor(config))
    watch = Watch(wire, spec, 600.0)
    assert settle(wire, watch, cold=True)["settled"]
    ref = pick_link(wire)
    ends = {wire.roles[ref[0]], wire.roles[wire.peer[ref][0]]}
    assert ends == ({"agg", "core"} if spec.startswith("fat") else {"router"}), ends
    walk = RerouteWalk(wire, ref)
    walk.start()
    wire.set_link(ref, False)
    for _ in range(20):
        wire.step()
    result = walk.stop()
    assert result["before"]["delivered"] == result["pairs"] == 200
    assert result["crossing"] >= 100 and result["moments_walked"] > 5
    bad = [m for m in result["moments"] if m["looped"] or m["lost"]]
    assert not bad, "\n".join(result["failures"])
    assert result["final"]["delivered"] == result["pairs"]
