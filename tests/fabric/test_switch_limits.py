"""Switch profiles (the policy's ``hardware`` section) on the fake fabric, whose switches
enforce the same caps with the errors a real switch sends: Loom stays within every cap
(a strict fake raises on the first refused message) and still delivers every host pair,
before and after a link failure; optional rules that would overflow a switch's flow table
are refused and counted; a bad section is refused naming the key."""

from __future__ import annotations

import itertools

import networkx as nx
import pytest
from ryu.ofproto import ofproto_v1_3 as ofp

from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.jobspec import JobSpec
from controller.limits import OPEN_VSWITCH, SwitchLimits
from controller.model import CookieKind
from controller.policy import parse_policy
from controller.policy.loader import PolicyError
from tests.fakefabric.tables import HardwareLimits
from tests.sim import LoomSim
from topologies import dragonfly, fat_tree
from topologies.graph import host_list

OPEN = "version: 1\nfabric: {unassigned_hosts: allow}\n"


def capped(graph: nx.MultiGraph, hardware: str, caps: dict[str, HardwareLimits]) -> LoomSim:
    """``graph`` run under the ``hardware`` section, its switches in ``caps`` enforcing them."""
    sim = LoomSim(graph, FabricConfig(te=TeConfig(enabled=False)))
    for name, limits in caps.items():
        sim.fake.switches[graph.nodes[name]["dpid"]].limits = limits
    sim.apply(sim.core.apply_policy(0.0, parse_policy(OPEN + hardware)))
    return sim.start()


def switches(graph: nx.MultiGraph, prefix: str = "") -> list[str]:
    return sorted(
        n for n, d in graph.nodes(data=True) if d["kind"] == "switch" and n.startswith(prefix)
    )


def one_profile(graph: nx.MultiGraph, names: list[str], fields: str) -> str:
    """A hardware section giving switches ``names`` one profile of ``fields``."""
    dpids = ", ".join(str(graph.nodes[n]["dpid"]) for n in names)
    return f"hardware:\n  profiles:\n    p: {{{fields}}}\n  switches:\n    p: [{dpids}]\n"


def test_every_pair_delivered_within_small_group_tables_without_failover() -> None:
    graph = fat_tree(4)
    hardware = (
        "hardware:\n  profiles:\n"
        "    tiny: {select_buckets: 1, groups: 1, fast_failover: false}\n"
        "  default: tiny\n"
    )
    cap = HardwareLimits(select_buckets=1, groups=1, fast_failover=False)
    sim = capped(graph, hardware, dict.fromkeys(switches(graph), cap))
    report = sim.fake.reachability()
    assert report.ok, report.render()
    assert len(report.delivered) == 16 * 15
    for table in sim.fake.switches.values():
        assert len(table.groups) <= 1
        assert all(len(g.buckets) <= 1 for g in table.groups.values())
    sim.fail_link("a0_0", "c1")  # no failover groups: the controller's reroute delivers
    assert sim.fake.reachability().ok


def test_capped_buckets_still_use_every_uplink_across_destinations() -> None:
    graph = fat_tree(8)
    edges = switches(graph, "e")
    hardware = one_profile(graph, edges, "select_buckets: 2")
    sim = capped(graph, hardware, dict.fromkeys(edges, HardwareLimits(select_buckets=2)))
    table = sim.fake.switches[graph.nodes[edges[0]]["dpid"]]
    select = [g for g in table.groups.values() if g.type == ofp.OFPGT_SELECT]
    used = {b.watch_port for g in select for b in g.buckets}
    assert select and all(len(g.buckets) <= 2 for g in select)
    assert len(used) == 4  # a k=8 edge switch's four uplinks, each in some subset
    hosts = host_list(graph)
    pairs = [(a, b) for a in hosts[:8] for b in hosts[::9] if a != b]
    report = sim.fake.reachability(pairs)
    assert report.ok, report.render()


def test_failover_only_where_the_profile_has_it() -> None:
    graph = fat_tree(4)
    edges = switches(graph, "e")
    hardware = one_profile(graph, edges, "fast_failover: false")
    sim = capped(graph, hardware, dict.fromkeys(edges, HardwareLimits(fast_failover=False)))
    for name in switches(graph):
        groups = sim.fake.switches[graph.nodes[name]["dpid"]].groups.values()
        assert any(g.type == ofp.OFPGT_FF for g in groups) == (name not in edges), name
    # aggregation and core switches still bridge their own link failures untold
    sim.fake.set_link("a0_0", "c1", False)
    report = sim.fake.reachability()
    assert report.ok, report.render()


def test_optional_rules_that_would_overflow_a_flow_table_are_refused() -> None:
    sim = LoomSim(dragonfly(a=4, p=2, h=2, g=5), FabricConfig(te=TeConfig(enabled=False)))
    sim.start()
    hosts = host_list(sim.graph)
    ips = tuple(str(sim.graph.nodes[h]["ip"]) for h in hosts)
    members = ", ".join(f"{{ip: {ip}}}" for ip in ips)
    tenant = f"tenants:\n  - name: lab\n    hosts: [{members}]\n"
    sim.apply(sim.core.apply_policy(sim.now, parse_policy(OPEN + tenant)))  # no caps yet
    held = {d: sum(map(len, t.tables.values())) for d, t in sim.fake.switches.items()}
    full = max(held, key=lambda d: (held[d], -d))
    sim.fake.switches[full].limits = HardwareLimits(flows=held[full])
    hardware = (
        f"hardware:\n  profiles:\n    full: {{flows: {held[full]}}}\n"
        f"  switches:\n    full: [{full}]\n"
    )
    sim.apply(sim.core.apply_policy(sim.now, parse_policy(OPEN + tenant + hardware)))
    sim.apply(sim.core.create_job(sim.now, JobSpec("a2a", "lab", ips, "all_to_all")))
    assert sim.view.events["limit_refused.job"] == 1
    assert not any(
        e.cookie >> 40 & 0xFF == CookieKind.JOB
        for t in sim.fake.switches.values()
        for e in t.flows()
    )
    report = sim.fake.reachability(list(itertools.pairwise(hosts)))
    assert report.ok, report.render()  # forwarding itself is never refused


def test_hardware_section_becomes_per_switch_limits() -> None:
    policy = parse_policy(
        OPEN + "hardware:\n  profiles:\n"
        "    asic: {select_buckets: 8, groups: 1000, fast_failover: false, flows: 4000}\n"
        "  switches:\n    asic: [1, 0x1a]\n"
    )
    limits = policy.hardware.limits()
    assert limits.of(26) == SwitchLimits("asic", 8, 1000, False, 4000)
    assert limits.of(1) is limits.of(26) or limits.of(1) == limits.of(26)
    assert limits.of(2) is OPEN_VSWITCH


@pytest.mark.parametrize(
    ("hardware", "words"),
    [
        ("  default: asic\n", ["hardware", "default", "no profile 'asic'"]),
        ("  switches:\n    nope: [1]\n", ["switches", "no profile 'nope'"]),
        (
            "  profiles:\n    a: {}\n    b: {}\n  switches:\n    a: [3]\n    b: [3]\n",
            ["dpid 3 is in both 'a' and 'b'"],
        ),
        ("  profiles:\n    openvswitch: {}\n", ["built-in"]),
        ("  profiles:\n    a: {select_buckets: 0}\n", ["p.yaml:5: hardware.profiles.a.select_"]),
        ("  profiles:\n    a: {bucket: 2}\n", ["p.yaml:5", "bucket"]),
    ],
)
def test_bad_hardware_section_names_the_key(hardware: str, words: list[str]) -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy(OPEN + "hardware:\n" + hardware, "p.yaml")
    text = str(err.value)
    for word in words:
        assert word in text, text
