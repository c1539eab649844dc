"""GPU servers in the harness without a network: which Mininet hosts and interfaces a
server graph becomes, the NICs' prefixes, the reachability pairs and each rank's
rendezvous address. (Building them is ``tests/emulation/test_rail_servers.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.policy.loader import load_policy
from mininet_scenarios.cli import controller_env
from mininet_scenarios.harness.network import FabricNet
from mininet_scenarios.harness.ovs import FabricError
from mininet_scenarios.harness.servers import nic_ports, rail_pairs, servers_of
from mininet_scenarios.workloads.collectives.hosts import host_intf, rendezvous
from topologies import fat_tree, rail_optimized
from topologies.graph import host_list, prefixed

RAILS = rail_optimized(servers=2, nics=2, spines=2)


def test_a_server_is_one_mininet_host_with_an_interface_per_nic() -> None:
    net = FabricNet(prefixed(RAILS, "ry"))
    assert net.servers == {"rys1": ["rys1n0", "rys1n1"], "rys2": ["rys2n0", "rys2n1"]}
    assert net.mn_host_names == ["rys1", "rys2"]
    assert net.host_names == ["rys1n0", "rys1n1", "rys2n0", "rys2n1"]
    assert [net.intf(n, 0) for n in net.host_names] == [
        "rys1-eth0",
        "rys1-eth1",
        "rys2-eth0",
        "rys2-eth1",
    ]
    nic = net.nic("rys2n1")
    assert (nic.server, nic.nic, nic.intf, nic.cidr) == ("rys2", 1, "rys2-eth1", "10.101.1.3/16")
    assert host_intf(net, "rys2n1") == "rys2-eth1"  # what a worker binds gloo to
    assert net.nic("rys2n1").reaches("10.101.1.2") and not nic.reaches("10.100.1.2")
    with pytest.raises(FabricError, match="not a NIC"):
        net.nic("spine1")  # not even a host


def test_ordinary_graphs_are_built_as_before() -> None:
    g = fat_tree(4)
    net = FabricNet(g)
    assert net.nics == {} and net.servers == {}
    assert net.mn_host_names == net.host_names == host_list(g)
    assert net.intf("h1", 0) == "h1-eth0"
    hosts = host_list(g)
    ips = {h: g.nodes[h]["ip"] for h in hosts}
    assert rail_pairs({}, ips) == [(a, b) for a in hosts for b in hosts if a != b]
    assert rendezvous(net, ["h3", "h1", "h9"]) == [g.nodes["h3"]["ip"]] * 3


def test_a_nic_pings_the_nics_of_other_servers_on_its_rail() -> None:
    nics = nic_ports(RAILS)
    ips = {h: RAILS.nodes[h]["ip"] for h in host_list(RAILS)}
    assert sorted(rail_pairs(nics, ips)) == sorted(
        [("s1n0", "s2n0"), ("s2n0", "s1n0"), ("s1n1", "s2n1"), ("s2n1", "s1n1")]
    )


def test_each_rank_meets_rank_0s_server_on_its_own_rail() -> None:
    net = FabricNet(rail_optimized(servers=3, nics=2, spines=1))
    order = ["s2n1", "s2n0", "s1n0", "s3n1", "s1n1"]
    ip = {h: net.graph.nodes[h]["ip"] for h in order}
    assert rendezvous(net, order) == [ip["s2n1"], ip["s2n0"], ip["s2n0"], ip["s2n1"], ip["s2n1"]]


def test_servers_that_cannot_be_built_are_refused() -> None:
    g = rail_optimized(servers=2, nics=2, spines=1)
    g.nodes["s1n1"]["ip"] = "10.100.9.9"  # NIC 1 on rail 0's /16
    with pytest.raises(FabricError, match=r"s1: two NICs on one /16"):
        nic_ports(g)
    g = rail_optimized(servers=2, nics=2, spines=1)
    g.nodes["s1n1"]["nic"] = 0
    with pytest.raises(FabricError, match=r"s1: NIC indexes repeat"):
        nic_ports(g)
    g = rail_optimized(servers=2, nics=2, spines=1)
    g.nodes["s1n0"]["server"] = "spine1"  # a switch's name
    with pytest.raises(FabricError, match="taken by another node"):
        nic_ports(g)
    g = rail_optimized(servers=2, nics=2, spines=1)
    g.nodes["s1n0"]["server"] = "averylongserver"
    with pytest.raises(FabricError, match="over 15"):
        nic_ports(g)
    g = rail_optimized(servers=2, nics=2, spines=1)
    del g.nodes["s2n0"]["nic"]
    with pytest.raises(FabricError, match="NIC index None"):
        nic_ports(g)
    assert servers_of(nic_ports(RAILS)) == {"s1": ["s1n0", "s1n1"], "s2": ["s2n0", "s2n1"]}


def test_loom_scenario_declares_a_server_fabric_to_the_controller_it_starts(
    tmp_path: Path,
) -> None:
    """``loom-scenario rail_optimized:... --start-controller`` tells Loom the servers, in
    a policy its own loader accepts, with every host let in; ``--policy`` or a
    ``LOOM_POLICY`` already set wins, and other fabrics get none."""
    env = controller_env(None, RAILS, tmp_path, {})
    policy = load_policy(env["LOOM_POLICY"])
    assert policy.fabric.unassigned_hosts == "allow" and policy.tenants == []
    macs = {s.name: [n.mac for n in s.nics] for s in policy.servers}
    want = {
        s: [RAILS.nodes[n]["mac"] for n in nics] for s, nics in servers_of(nic_ports(RAILS)).items()
    }
    assert macs == want and list(macs) == ["s1", "s2"]
    mine = tmp_path / "mine.yaml"
    assert controller_env(mine, RAILS, tmp_path, {}) == {"LOOM_POLICY": str(mine.resolve())}
    assert controller_env(None, RAILS, tmp_path, {"LOOM_POLICY": str(mine)}) == {}
    assert controller_env(None, fat_tree(4), tmp_path, {}) == {}
