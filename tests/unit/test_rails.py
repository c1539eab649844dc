"""Rail discovery on generated fabrics: rail-optimized, miscabled, fat-tree, unattached."""

from __future__ import annotations

import json

import networkx as nx

from controller.rails import (
    NOT_RAIL_OPTIMIZED,
    PARTLY,
    RAIL_OPTIMIZED,
    RailReport,
    discover_rails,
    report_json,
)
from topologies import fat_tree, leaf_spine, rail_optimized
from topologies.graph import dpid_of, host_list, link_ends, switches


def attachments(g: nx.MultiGraph) -> dict[str, int]:
    """Host MAC -> dpid of the switch its one link reaches, as host learning finds it."""
    out = {}
    for h in host_list(g):
        (end,) = link_ends(g, h)
        out[g.nodes[h]["mac"]] = dpid_of(g, end.peer)
    return out


def declared(g: nx.MultiGraph) -> dict[str, list[str]]:
    """The operator's declaration for a generated rail fabric: server -> MACs by NIC."""
    out: dict[str, list[str]] = {}
    for h in host_list(g):
        d = g.nodes[h]
        nics = out.setdefault(d["server"], [])
        assert len(nics) == d["nic"]  # hosts come NIC by NIC
        nics.append(d["mac"])
    return out


def mac(g: nx.MultiGraph, host: str) -> str:
    return str(g.nodes[host]["mac"])


def rail_leaves(g: nx.MultiGraph, sus: int, nics: int) -> dict[int, tuple[int, ...]]:
    return {
        i: tuple(sorted(dpid_of(g, f"su{u}r{i}") for u in range(1, sus + 1))) for i in range(nics)
    }


def test_one_su_is_rail_optimized() -> None:
    g = rail_optimized(servers=4, nics=4, spines=2)
    report = discover_rails(declared(g), attachments(g))
    assert report.status == RAIL_OPTIMIZED
    assert report.rails == {0: (3,), 1: (4,), 2: (5,), 3: (6,)}
    assert report.rails == rail_leaves(g, 1, 4)
    assert report.broken == () and report.reasons == ()
    assert report.nic_rail == {mac(g, h): g.nodes[h]["nic"] for h in host_list(g)}


def test_several_sus_put_one_leaf_per_su_on_each_rail() -> None:
    g = rail_optimized(servers=7, nics=8, spines=4, servers_per_su=3)
    report = discover_rails(declared(g), attachments(g))
    assert report.status == RAIL_OPTIMIZED
    assert report.rails == rail_leaves(g, 3, 8)
    assert all(len(leaves) == 3 for leaves in report.rails.values())
    assert set(report.nic_rail.values()) == set(range(8))


def test_fat_tree_servers_on_one_edge_are_not_rail_optimized() -> None:
    g = fat_tree(4)
    edges = [s for s in switches(g) if g.nodes[s]["role"] == "edge"]
    servers: dict[str, list[str]] = {}
    for e in edges:
        hosts = [x.peer for x in link_ends(g, e) if g.nodes[x.peer]["kind"] == "host"]
        assert len(hosts) == 2
        servers[f"s{len(servers) + 1}"] = [mac(g, h) for h in hosts]
    report = discover_rails(servers, attachments(g))
    assert report.status == NOT_RAIL_OPTIMIZED
    assert report.broken == (0, 1)
    edge_dpids = tuple(sorted(dpid_of(g, e) for e in edges))
    assert report.rails == {0: edge_dpids, 1: edge_dpids}
    assert set(report.nic_rail.values()) == {None}  # a 1:1 tie on every edge: no rail
    first = dpid_of(g, edges[0])
    assert f"server s1: NICs 0 and 1 reach the same leaf {first:#x}" in report.reasons
    assert len(report.reasons) == 8  # one per server: the leaves add nothing


def test_nics_spread_without_index_structure_are_not_rail_optimized() -> None:
    g = leaf_spine(leaves=4, spines=2, hosts_per_leaf=4)
    on_leaf = [
        [h for h in host_list(g) if g.nodes[h]["switch"] == f"leaf{n}"] for n in (1, 2, 3, 4)
    ]
    # NIC i of server s on leaf (s + i) mod 4: every leaf has every index
    servers = {f"s{s}": [mac(g, on_leaf[(s + i) % 4][s]) for i in range(4)] for s in range(4)}
    report = discover_rails(servers, attachments(g))
    assert report.status == NOT_RAIL_OPTIMIZED
    assert report.broken == (0, 1, 2, 3)
    assert all(len(leaves) == 4 for leaves in report.rails.values())
    assert not any(r.startswith("server ") for r in report.reasons)  # no server doubles up


def test_swapped_cables_break_two_rails_and_name_the_server() -> None:
    g = rail_optimized(servers=4, nics=4, spines=2)
    attach = attachments(g)
    a, b = mac(g, "s2n0"), mac(g, "s2n1")
    attach[a], attach[b] = attach[b], attach[a]
    report = discover_rails(declared(g), attach)
    assert report.status == PARTLY
    assert report.broken == (0, 1)
    assert report.rails[0] == report.rails[1] == (3, 4)
    assert report.rails[2] == (5,) and report.rails[3] == (6,)
    assert report.reasons == (
        "leaf 0x3 is reached by NIC 0 of s1, s3, s4 and NIC 1 of s2",
        "leaf 0x4 is reached by NIC 0 of s2 and NIC 1 of s1, s3, s4",
        "rails that hold: 2 and 3; rails that do not: 0 and 1",
    )
    assert report.nic_rail[a] is None and report.nic_rail[b] is None
    assert report.nic_rail[mac(g, "s1n0")] == 0 and report.nic_rail[mac(g, "s3n1")] == 1


def test_two_nics_of_a_server_on_one_leaf() -> None:
    g = rail_optimized(servers=4, nics=4, spines=2)
    attach = attachments(g)
    attach[mac(g, "s3n2")] = attach[mac(g, "s3n1")]
    report = discover_rails(declared(g), attach)
    assert report.status == PARTLY and report.broken == (1, 2)
    assert report.reasons[0] == "server s3: NICs 1 and 2 reach the same leaf 0x4"
    assert report.rails[2] == (4, 5)
    assert report.nic_rail[mac(g, "s3n2")] is None and report.nic_rail[mac(g, "s3n1")] == 1


def test_an_unattached_nic_is_reported_not_guessed() -> None:
    g = rail_optimized(servers=4, nics=4, spines=2)
    attach = attachments(g)
    lost = mac(g, "s4n3")
    del attach[lost]
    report = discover_rails(declared(g), attach)
    assert report.status == PARTLY and report.broken == (3,)
    assert report.reasons[0] == f"NIC 3 of s4 ({lost}) is not attached"
    assert report.rails[3] == (6,)  # the other servers still show rail 3's leaf
    assert report.nic_rail[lost] is None
    assert discover_rails(declared(g), {}).status == NOT_RAIL_OPTIMIZED


def test_a_server_with_fewer_nics_is_noted_but_allowed() -> None:
    g = rail_optimized(servers=4, nics=4, spines=2)
    servers = declared(g)
    servers["s4"] = servers["s4"][:2]
    report = discover_rails(servers, attachments(g))
    assert report.status == RAIL_OPTIMIZED and report.broken == ()
    assert report.reasons == (
        "server s4 declares 2 NICs, others up to 4: it has no NIC on rails 2 and 3",
    )
    assert mac(g, "s4n3") not in report.nic_rail


def test_a_mac_declared_twice() -> None:
    g = rail_optimized(servers=2, nics=2, spines=1)
    servers = declared(g)
    servers["s2"][0] = servers["s1"][0]
    report = discover_rails(servers, attachments(g))
    assert report.status == PARTLY and report.broken == (0,)
    assert report.reasons[0] == (
        f"MAC {mac(g, 's1n0')} is declared more than once: NIC 0 of s1 and NIC 0 of s2"
    )
    assert discover_rails({}, {}).reasons == ("no server declares a NIC",)


def test_deterministic_whatever_the_input_order_and_mac_case() -> None:
    g = rail_optimized(servers=12, nics=2, spines=2, servers_per_su=4)
    attach = attachments(g)
    del attach[mac(g, "s10n0")], attach[mac(g, "s2n1")]
    servers = declared(g)
    report = discover_rails(servers, attach)
    shuffled = {name: [m.upper() for m in servers[name]] for name in reversed(list(servers))}
    again = discover_rails(shuffled, dict(reversed(list(attach.items()))))
    assert again == report == discover_rails(servers, attach)
    assert [r.split(" (")[0] for r in report.reasons[:2]] == [
        "NIC 1 of s2",
        "NIC 0 of s10",  # natural order: s2 before s10
    ]
    assert list(report.nic_rail) == sorted(report.nic_rail)


def test_report_json() -> None:
    g = rail_optimized(servers=2, nics=2, spines=1)
    attach = attachments(g)
    del attach[mac(g, "s2n1")]
    report: RailReport = discover_rails(declared(g), attach)
    data = report_json(report)
    assert json.loads(json.dumps(data)) == {
        "status": "partly rail-optimized",
        "rails": {"0": [2], "1": [3]},
        "broken": [1],
        "nic_rail": {mac(g, "s1n0"): 0, mac(g, "s1n1"): 1, mac(g, "s2n0"): 0, mac(g, "s2n1"): None},
        "reasons": [
            f"NIC 1 of s2 ({mac(g, 's2n1')}) is not attached",
            "rails that hold: 0; rails that do not: 1",
        ],
    }
