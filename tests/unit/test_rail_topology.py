"""The rail-optimized fabric generator: shape, attributes, port plan, addresses, errors."""

from __future__ import annotations

import ipaddress
import itertools
from collections import Counter

import networkx as nx
import pytest

from topologies import GENERATORS, TopologyError, by_name, rail_optimized
from topologies.graph import dpid_of, host_list, link_ends, switches, validate


def roles(g: nx.MultiGraph) -> Counter[str]:
    return Counter(g.nodes[s]["role"] for s in switches(g))


@pytest.mark.parametrize(
    ("servers", "nics", "spines", "per_su", "up"),
    [(4, 4, 2, None, 1), (8, 8, 4, 4, 1), (5, 2, 3, 2, 2), (1, 1, 1, None, 1)],
)
def test_counts_and_links(
    servers: int, nics: int, spines: int, per_su: int | None, up: int
) -> None:
    g = rail_optimized(servers, nics, spines, per_su, uplinks_per_spine=up)
    validate(g)
    size = per_su or servers
    sus = -(-servers // size)
    assert roles(g) == {"spine": spines, "leaf": sus * nics}
    assert len(host_list(g)) == servers * nics
    scopes = Counter(d["scope"] for _, _, d in g.edges(data=True))
    assert scopes == {"host": servers * nics, "fabric": sus * nics * spines * up}
    for u, i, j in itertools.product(range(1, sus + 1), range(nics), range(1, spines + 1)):
        assert g.number_of_edges(f"su{u}r{i}", f"spine{j}") == up
    assert g.graph["kind"] == "rail_optimized"
    assert g.graph["params"]["servers_per_su"] == size
    assert g.graph["params"]["oversubscription"] == size / (spines * up)


def test_hosts_sit_on_their_rail_leaf() -> None:
    g = rail_optimized(servers=7, nics=4, spines=2, servers_per_su=3)
    assert host_list(g)[:5] == ["s1n0", "s1n1", "s1n2", "s1n3", "s2n0"]
    for s in range(1, 8):
        u, k = (s - 1) // 3 + 1, (s - 1) % 3
        for i in range(4):
            d = g.nodes[f"s{s}n{i}"]
            assert (d["server"], d["nic"], d["group"]) == (f"s{s}", i, u)
            assert d["switch"] == f"su{u}r{i}"
            (end,) = link_ends(g, f"s{s}n{i}")
            assert (end.peer, end.peer_port) == (f"su{u}r{i}", k + 1)
    assert g.nodes["su3r2"]["group"] == 3
    assert sum(1 for e in link_ends(g, "su3r2") if e.scope == "host") == 1  # short last SU


def test_port_plan_and_dpids() -> None:
    g = rail_optimized(servers=4, nics=2, spines=2, servers_per_su=2, uplinks_per_spine=2)
    assert [dpid_of(g, s) for s in switches(g)] == list(range(1, 7))
    assert list(switches(g)) == ["spine1", "spine2", "su1r0", "su1r1", "su2r0", "su2r1"]
    assert [e.peer for e in link_ends(g, "su2r1")] == [
        "s3n1",
        "s4n1",
        "spine1",
        "spine1",
        "spine2",
        "spine2",
    ]
    spine = [(e.port, e.peer) for e in link_ends(g, "spine2")]
    assert spine == [
        (p + 1, leaf)
        for p, leaf in enumerate(x for x in ("su1r0", "su1r1", "su2r0", "su2r1") for _ in "ab")
    ]


def test_addresses_unique_and_one_subnet_per_rail() -> None:
    g = rail_optimized(servers=6, nics=8, spines=2, servers_per_su=3)
    ips = {h: ipaddress.IPv4Address(g.nodes[h]["ip"]) for h in host_list(g)}
    macs = [g.nodes[h]["mac"] for h in host_list(g)]
    assert len(set(ips.values())) == len(ips) == 48 and len(set(macs)) == 48
    assert g.nodes["s5n7"]["ip"] == "10.107.2.3"
    for h, ip in ips.items():
        rail = g.nodes[h]["nic"]
        assert ip in ipaddress.IPv4Network(f"10.{100 + rail}.0.0/16"), h
        assert ip in ipaddress.IPv4Network("10.0.0.0/8")
    prefixes = {(g.nodes[h]["nic"], str(ip).rsplit(".", 2)[0]) for h, ip in ips.items()}
    assert len(prefixes) == 8 and len({p for _, p in prefixes}) == 8  # one /16 each, distinct


def test_deterministic() -> None:
    a = rail_optimized(9, 4, 2, 4)
    b = rail_optimized(9, 4, 2, 4)
    assert list(a.nodes(data=True)) == list(b.nodes(data=True))
    assert list(a.edges(data=True)) == list(b.edges(data=True))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"servers": 0}, "rail_optimized: servers must be from 1"),
        ({"nics": 0}, "rail_optimized: nics must be from 1 to 156"),
        ({"nics": 157}, "nics must be from 1 to 156"),
        ({"spines": 0}, "spines must be from 1"),
        ({"uplinks_per_spine": 0}, "uplinks_per_spine must be from 1"),
        ({"servers_per_su": 0}, "servers_per_su must be from 1 to 253"),
        ({"servers_per_su": 254}, "servers_per_su must be from 1 to 253"),
        ({"servers": 300}, "servers_per_su must be given.*servers=300"),
        ({"servers": 600, "servers_per_su": 2}, "servers=600 with servers_per_su=2 needs 300"),
        ({"servers": "4"}, "servers must be an integer"),
        ({"nics": True}, "nics must be an integer"),
        ({"rate_mbps": 0}, "rate_mbps must be a positive number"),
    ],
)
def test_bad_params(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        rail_optimized(**kwargs)  # type: ignore[arg-type]


def test_by_name_round_trip() -> None:
    assert "rail_optimized" in GENERATORS
    g = by_name("rail_optimized:servers=4,nics=4,spines=2")
    assert g.graph["name"] == "rail_optimized(4,4,2,4)"
    validate(g)
    h = by_name("rail-optimized:8,2,servers_per_su=4,rate_mbps=5,uplinks_per_spine=2")
    assert h.graph["params"] == {
        "servers": 8,
        "nics": 2,
        "spines": 2,
        "servers_per_su": 4,
        "rate_mbps": 5.0,
        "uplinks_per_spine": 2,
        "oversubscription": 1.0,
    }
    assert {d["rate_mbps"] for _, _, d in h.edges(data=True)} == {5.0}
    assert by_name("rail_optimized:servers_per_su=none").graph["params"]["servers_per_su"] == 4
    with pytest.raises(TopologyError, match="unknown parameter 'k'"):
        by_name("rail_optimized:k=4")
