"""``faucet_config``: the Faucet YAML of the ``faucet`` baseline, checked as data (no root,
no Faucet needed; tests/emulation/test_faucet_mode.py runs Faucet's own checker on it)."""

from __future__ import annotations

from typing import Any

import networkx as nx
import pytest
import yaml

from mininet_scenarios.harness.faucet import VLAN_NAME, faucet_config, stack_root
from topologies import dragonfly, fat_tree, leaf_spine
from topologies.graph import port_map, switches

GRAPHS = {
    "fat_tree4": lambda: fat_tree(4),
    "dragonfly": lambda: dragonfly(a=4, p=1, h=1, g=5),
    "leaf_spine": lambda: leaf_spine(),
    "leaf_spine_parallel": lambda: leaf_spine(leaves=3, spines=2, uplinks_per_spine=2),
}


@pytest.fixture(params=sorted(GRAPHS))
def graph(request: pytest.FixtureRequest) -> nx.MultiGraph:
    return GRAPHS[request.param]()


def load(graph: nx.MultiGraph, **kwargs: Any) -> dict[str, Any]:
    doc = yaml.safe_load(faucet_config(graph, **kwargs))
    assert isinstance(doc, dict)
    return doc


def test_every_switch_is_a_dp_with_its_dpid(graph: nx.MultiGraph) -> None:
    dps = load(graph)["dps"]
    assert set(dps) == set(switches(graph))
    for name, dp in dps.items():
        assert dp["dp_id"] == graph.nodes[name]["dpid"]
        assert dp["hardware"] == "Open vSwitch"


def test_every_port_of_the_graph_is_configured_and_no_other(graph: nx.MultiGraph) -> None:
    dps = load(graph)["dps"]
    for name, dp in dps.items():
        graph_ports = {port for (node, port) in port_map(graph) if node == name}
        assert set(dp["interfaces"]) == graph_ports, name


def test_host_ports_are_native_vlan_access_ports(graph: nx.MultiGraph) -> None:
    doc = load(graph, vlan=321)
    assert doc["vlans"] == {VLAN_NAME: {"vid": 321, "description": "every host of the fabric"}}
    hosts = 0
    for (node, port), (peer, _pp) in port_map(graph).items():
        if graph.nodes[node]["kind"] == "switch" and graph.nodes[peer]["kind"] == "host":
            iface = doc["dps"][node]["interfaces"][port]
            assert iface["native_vlan"] == VLAN_NAME
            assert "stack" not in iface and "tagged_vlans" not in iface
            hosts += 1
    assert hosts == sum(1 for _, d in graph.nodes(data=True) if d["kind"] == "host")


def test_fabric_links_are_stack_ports_on_both_ends(graph: nx.MultiGraph) -> None:
    dps = load(graph)["dps"]
    links = 0
    for a, b, d in graph.edges(data=True):
        if graph.nodes[a]["kind"] != "switch" or graph.nodes[b]["kind"] != "switch":
            continue
        pa, pb = d["ports"][a], d["ports"][b]
        assert dps[a]["interfaces"][pa]["stack"] == {"dp": b, "port": pb}
        assert dps[b]["interfaces"][pb]["stack"] == {"dp": a, "port": pa}
        assert "native_vlan" not in dps[a]["interfaces"][pa]
        links += 1
    stack_ends = [
        (name, port, iface["stack"])
        for name, dp in dps.items()
        for port, iface in dp["interfaces"].items()
        if "stack" in iface
    ]
    assert len(stack_ends) == 2 * links
    for name, port, peer in stack_ends:  # every end names an end that names it back
        back = dps[peer["dp"]]["interfaces"][peer["port"]]["stack"]
        assert back == {"dp": name, "port": port}


def test_exactly_one_stack_root(graph: nx.MultiGraph) -> None:
    dps = load(graph)["dps"]
    roots = [name for name, dp in dps.items() if "stack" in dp]
    assert roots == [stack_root(graph)]
    assert dps[roots[0]]["stack"] == {"priority": 1}


def test_root_is_the_highest_tier_switch_with_the_lowest_dpid() -> None:
    assert stack_root(fat_tree(4)) == "c1"  # a core switch
    ls = leaf_spine(leaves=3, spines=2)
    spines = [s for s in switches(ls) if ls.nodes[s]["role"] == "spine"]
    assert stack_root(ls) == min(spines, key=lambda s: ls.nodes[s]["dpid"])
    df = dragonfly(a=4, p=1, h=1, g=5)  # all routers: one tier, so the lowest dpid
    assert stack_root(df) == min(switches(df), key=lambda s: df.nodes[s]["dpid"])


def test_root_can_be_chosen_but_must_be_a_switch() -> None:
    g = fat_tree(4)
    dps = load(g, root="a2_1")["dps"]
    assert [n for n, dp in dps.items() if "stack" in dp] == ["a2_1"]
    for bad in ("h1", "nosuch"):
        with pytest.raises(ValueError, match="not a switch"):
            faucet_config(g, root=bad)


def test_lldp_interval_is_faucets_default_unless_asked() -> None:
    g = leaf_spine()
    assert all("lldp_beacon" not in dp for dp in load(g)["dps"].values())
    dps = load(g, lldp_interval=1)["dps"]
    assert all(dp["lldp_beacon"] == {"send_interval": 1} for dp in dps.values())


def test_output_is_deterministic_and_independent_of_insertion_order(
    graph: nx.MultiGraph,
) -> None:
    text = faucet_config(graph)
    assert faucet_config(graph) == text
    shuffled = nx.MultiGraph()
    shuffled.graph.update(graph.graph)
    shuffled.add_nodes_from(reversed(list(graph.nodes(data=True))))
    shuffled.add_edges_from(reversed(list(graph.edges(data=True))))
    assert faucet_config(shuffled) == text
    dps = list(load(graph)["dps"].values())
    assert [dp["dp_id"] for dp in dps] == sorted(dp["dp_id"] for dp in dps)
    for dp in dps:
        assert list(dp["interfaces"]) == sorted(dp["interfaces"])
