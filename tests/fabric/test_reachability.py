"""Fake-fabric tests: the real core and encoder program OpenFlow 1.3 tables, and traced
packets prove full reachability with no loop and no black hole, before and after links
fail. Discovery itself runs through the fake tables (LLDP out, packet-in back)."""

from __future__ import annotations

import networkx as nx
import pytest

from tests.sim import LoomSim
from topologies import dragonfly, fat_tree, leaf_spine, load_fabric
from topologies.graph import host_list, switch_graph


def assert_full_reachability(sim: LoomSim, explore_all: bool = True) -> None:
    report = sim.fake.reachability(explore_all=explore_all)
    assert report.ok, report.render()
    n = len(host_list(sim.graph))
    assert len(report.delivered) == n * (n - 1)


def fabric_link_count(sim: LoomSim) -> int:
    return int(switch_graph(sim.graph).number_of_edges())


FABRICS = {
    "fat_tree(4)": lambda: fat_tree(4),
    "dragonfly(4,2,2,5)": lambda: dragonfly(a=4, p=2, h=2, g=5),
    "leaf_spine(4,3)": lambda: leaf_spine(
        leaves=4, spines=3, hosts_per_leaf=2, uplinks_per_spine=2
    ),
    "lab.yaml": lambda: load_fabric("topologies/examples/lab.yaml"),
}


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_discovery_learns_every_link_and_host(name: str) -> None:
    sim = LoomSim(FABRICS[name]()).start()
    assert len(sim.view.links) == 2 * fabric_link_count(sim)
    assert len(sim.view.hosts) == len(host_list(sim.graph))
    for h in host_list(sim.graph):
        learned = sim.view.hosts[sim.graph.nodes[h]["mac"]]
        assert learned.ip == sim.graph.nodes[h]["ip"]


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_every_pair_delivered_on_every_ecmp_path(name: str) -> None:
    assert_full_reachability(LoomSim(FABRICS[name]()).start())


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_every_single_link_failure_keeps_full_reachability(name: str) -> None:
    graph = FABRICS[name]()
    sim = LoomSim(graph).start()
    simple = nx.Graph(switch_graph(graph))
    bridges = {tuple(sorted(e)) for e in nx.bridges(simple)}  # failing these partitions
    links = sorted({tuple(sorted((a, b))) for a, b in simple.edges()} - bridges)
    assert links
    for a, b in links[:: max(1, len(links) // 12)]:  # a spread of links, each failed alone
        sim.fail_link(a, b)
        assert_full_reachability(sim)
        sim.restore_link(a, b)
        sim.advance(1.2)  # LLDP rediscovers the link
        assert_full_reachability(sim)


def test_fat_tree_8_reachable_before_and_after_a_core_link_fails() -> None:
    sim = LoomSim(fat_tree(8)).start()
    assert_full_reachability(sim, explore_all=False)
    sim.fail_link("a0_0", "c1")
    assert_full_reachability(sim, explore_all=False)
    # every alternative of a sample of pairs, through the failed region
    report = sim.fake.reachability([("h1", h) for h in ("h17", "h65", "h128")])
    assert report.ok, report.render()


def test_fat_tree_uses_every_core_and_ingress_hash_differs_from_transit_choice() -> None:
    sim = LoomSim(fat_tree(4)).start()
    cores = {f"c{i}" for i in range(1, 5)}
    used: set[str] = set()
    for dst in ("h5", "h6", "h9", "h10", "h13", "h14"):
        trace = sim.fake.trace("h1", sim.fake.packet("h1", dst))
        for path in trace.paths:
            used.update(n for n in path if n in cores)
        assert len(trace.branches) == 2  # hashed over both aggregation switches, then fixed
    assert used == cores


def test_rules_per_switch_grow_with_hosts_not_host_pairs() -> None:
    sim = LoomSim(fat_tree(8)).start()
    hosts = len(host_list(sim.graph))  # 128: host pairs would be 16,256
    for dpid in (1, 9, 10, 12, 40):
        flows = len(sim.fake.flows(dpid))
        groups = len(sim.fake.groups(dpid))
        # per host: a rule from edge ports, one in transit, and a turn-back twin for
        # packets that come in where a detour leaves; plus the base pipeline and the
        # detour tunnels of fast failover (which depend on the links, not the hosts)
        assert flows <= 4 * hosts + 64, flows
        # a select group per edge switch; up to three failover groups per port
        assert groups <= 32 + 3 * 8, groups


def test_arp_never_floods_host_frames_into_the_fabric() -> None:
    sim = LoomSim(fat_tree(4)).start()
    # every ARP the hosts sent ended at the controller (CLASSIFY), never crossing a link
    a, b = sim.graph.nodes["h1"], sim.graph.nodes["h16"]
    from controller.model import ArpFrame

    trace = sim.host_sends(
        "h1",
        ArpFrame(1, a["mac"], "ff:ff:ff:ff:ff:ff", a["mac"], a["ip"], "00:00:00:00:00:00", b["ip"]),
    )
    assert [br.end.kind for br in trace.branches] == ["controller"]
    assert len(trace.branches[0].hops) == 1


def test_restart_of_the_controller_reinstalls_identical_rules() -> None:
    first = LoomSim(dragonfly(a=4, p=2, h=2, g=5)).start()
    second = LoomSim(dragonfly(a=4, p=2, h=2, g=5)).start()
    for dpid in (1, 7, 20):
        a = sorted(f.describe() for f in first.fake.flows(dpid))
        b = sorted(f.describe() for f in second.fake.flows(dpid))
        assert a == b
        assert first.fake.groups(dpid).keys() == second.fake.groups(dpid).keys()
