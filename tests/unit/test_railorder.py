"""Rail-aware rank order (controller/railorder.py): each server's ranks together, every
network hop of the ring (the closing one too) on one rail, deterministic, and today's
order with the reason whenever the hosts are not NICs of declared servers or their rails
do not hold. Hops are checked against the generator's cabling (the ``nic`` each host
has), not against what the code under test says."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import networkx as nx
import pytest

from controller.railorder import (
    NOT_DECLARED,
    NOT_RAIL_OPTIMIZED,
    USED,
    nic_places,
    rail_order,
    rail_ring,
)
from controller.schedulers import rank_order
from controller.servers import DeclaredNic
from tests.graphs import learned_topology
from topologies import fat_tree, rail_optimized
from topologies.graph import host_list


def servers_of(g: nx.MultiGraph, by_ip: bool = False) -> dict[str, tuple[DeclaredNic, ...]]:
    """The generator's servers, NICs in GPU order, declared by MAC (or by IP)."""
    out: dict[str, list[tuple[int, DeclaredNic]]] = {}
    for h in host_list(g):
        d = g.nodes[h]
        nic = DeclaredNic(None, d["ip"]) if by_ip else DeclaredNic(d["mac"], None)
        out.setdefault(d["server"], []).append((d["nic"], nic))
    return {s: tuple(n for _, n in sorted(nics)) for s, nics in out.items()}


def by_ip(g: nx.MultiGraph) -> dict[str, tuple[str, int]]:
    """IP -> (server, NIC index) as the generator cabled it."""
    return {g.nodes[h]["ip"]: (g.nodes[h]["server"], g.nodes[h]["nic"]) for h in host_list(g)}


def network_hops(order: Sequence[str], cabled: dict[str, tuple[str, int]]) -> list[tuple[int, int]]:
    """(exit NIC, entry NIC) of every hop between two servers, the closing hop included."""
    n = len(order)
    pairs = [(cabled[order[i]], cabled[order[(i + 1) % n]]) for i in range(n)]
    return [(a[1], b[1]) for a, b in pairs if a[0] != b[0]]


def runs(order: Sequence[str], cabled: dict[str, tuple[str, int]]) -> list[str]:
    """The servers in the order their runs of ranks come."""
    return [server for server, _ in itertools.groupby(cabled[ip][0] for ip in order)]


def hops_of(rails: list[list[int]]) -> list[tuple[int, int]]:
    m = len(rails)
    return [(rails[s][-1], rails[(s + 1) % m][0]) for s in range(m)]


# -- the rule, on rail indices -----------------------------------------------------------
@pytest.mark.parametrize("servers", range(2, 10))
@pytest.mark.parametrize("nics", range(2, 9))
def test_every_network_hop_of_the_ring_stays_on_one_rail(servers: int, nics: int) -> None:
    order, crossing = rail_ring([list(range(nics))] * servers)
    assert all(sorted(rails) == list(range(nics)) for rails in order)  # each NIC once
    hops = hops_of(order)  # the last one is the closing hop, back to server 0
    crossed = [s for s, (x, e) in enumerate(hops) if x != e]
    assert crossing == crossed
    if nics == 2 and servers % 2:
        assert len(crossed) == 1  # two rails cannot alternate around an odd ring
    else:
        assert crossed == [], (order, hops)


@pytest.mark.parametrize("servers", [3, 5, 7])
def test_two_nics_and_an_odd_number_of_servers_cannot_keep_every_hop_on_a_rail(
    servers: int,
) -> None:
    """Why one hop crosses: every choice of entry and exit crosses at least once."""
    choices = [[(0, 1), (1, 0)]] * servers
    fewest = min(
        sum(ends[s][1] != ends[(s + 1) % servers][0] for s in range(servers))
        for ends in itertools.product(*choices)
    )
    assert fewest == 1 and len(rail_ring([[0, 1]] * servers)[1]) == 1


def brute_force(asked: list[list[int]]) -> int:
    """The fewest crossing hops over every (entry, exit) choice, servers in this order."""
    options = [
        [(a[0], a[0])] if len(a) == 1 else [(e, x) for e in a for x in a if e != x] for a in asked
    ]
    m = len(asked)
    return min(
        sum(ends[s][1] != ends[(s + 1) % m][0] for s in range(m))
        for ends in itertools.product(*options)
    )


@pytest.mark.parametrize("seed", range(40))
def test_partial_servers_cross_rails_only_where_nothing_else_would_do(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(2, 5)
    asked = [sorted(rng.sample(range(n), rng.randint(1, n))) for _ in range(rng.randint(2, 5))]
    order, crossing = rail_ring(asked)
    assert [sorted(r) for r in order] == asked  # each server's asked NICs, each once
    assert len(crossing) == brute_force(asked)
    assert crossing == [s for s, (x, e) in enumerate(hops_of(order)) if x != e]
    assert rail_ring(asked) == (order, crossing)


def test_one_server_has_no_network_hop_and_a_server_needs_a_nic() -> None:
    assert rail_ring([[3, 1, 2]]) == ([[1, 2, 3]], [])
    with pytest.raises(ValueError, match="at least one NIC"):
        rail_ring([[0, 1], []])


# -- on a learned rail-optimized fabric -------------------------------------------------
G8 = rail_optimized(servers=8, nics=4, spines=2, servers_per_su=4)
TOPO8 = learned_topology(G8)


def test_the_order_keeps_servers_together_and_every_hop_on_a_rail() -> None:
    cabled = by_ip(G8)
    ips = sorted(cabled)
    random.Random(3).shuffle(ips)
    got = rail_order(TOPO8, ips, servers_of(G8))
    assert got.rails == USED and got.reasons == () and got.unknown == []
    assert sorted(got.hosts) == sorted(ips)
    # servers in today's leaf order (SU 1, then SU 2, by slot), each run once
    assert runs(got.hosts, cabled) == [f"s{i}" for i in range(1, 9)]
    hops = network_hops(got.hosts, cabled)
    assert len(hops) == 8 and all(x == e for x, e in hops), hops
    assert got.crossing == []
    for rail, ranks in got.groups.items():
        assert [cabled[got.hosts[r]][1] for r in ranks] == [rail] * 8
    assert sorted(r for ranks in got.groups.values() for r in ranks) == list(range(32))
    for seed in range(3):  # deterministic, whatever the order asked in
        random.Random(seed).shuffle(ips)
        assert rail_order(TOPO8, ips, servers_of(G8)) == got
    assert rail_order(TOPO8, ips, servers_of(G8, by_ip=True)) == got


@pytest.mark.parametrize(("servers", "nics"), [(3, 2), (5, 2), (7, 3), (9, 8), (2, 5)])
def test_hops_stay_on_rails_across_scalable_units(servers: int, nics: int) -> None:
    g = rail_optimized(servers=servers, nics=nics, spines=2, servers_per_su=2)
    cabled = by_ip(g)
    got = rail_order(learned_topology(g), sorted(cabled), servers_of(g))
    assert got.rails == USED
    assert len(runs(got.hosts, cabled)) == servers  # each server's ranks consecutive
    crossed = [(x, e) for x, e in network_hops(got.hosts, cabled) if x != e]
    assert len(crossed) == (1 if nics == 2 and servers % 2 else 0)
    assert len(got.crossing) == len(crossed)
    if crossed:
        assert got.reasons and "1 of" in got.reasons[0] and "cross rails" in got.reasons[0]
        (rank,) = got.crossing
        assert cabled[got.hosts[rank]][0] != cabled[got.hosts[(rank + 1) % len(got.hosts)]][0]


def test_a_server_asked_in_part_keeps_its_asked_nics_together() -> None:
    cabled = by_ip(G8)
    nic = {(s, i): ip for ip, (s, i) in cabled.items()}
    asked = [nic[("s1", 2)], nic[("s1", 0)], nic[("s2", 1)], nic[("s2", 2)], nic[("s2", 3)]]
    asked += [nic[("s6", i)] for i in range(4)]
    got = rail_order(TOPO8, asked[::-1], servers_of(G8))
    assert got.rails == USED and sorted(got.hosts) == sorted(asked)
    assert runs(got.hosts, cabled) == ["s1", "s2", "s6"]
    assert all(x == e for x, e in network_hops(got.hosts, cabled))
    assert got.groups == {
        r: [k for k, ip in enumerate(got.hosts) if cabled[ip][1] == r] for r in range(4)
    }


def test_a_single_nic_server_forces_a_crossing_only_when_it_must() -> None:
    cabled = by_ip(G8)
    nic = {(s, i): ip for ip, (s, i) in cabled.items()}
    asked = [nic[("s1", 0)], nic[("s2", 1)]]  # one NIC each, on different rails
    got = rail_order(TOPO8, asked, servers_of(G8))
    assert got.rails == USED and got.crossing == [0, 1]
    assert "2 of 2 network hops cross rails" in got.reasons[0]


# -- today's order, and why ----------------------------------------------------------------
def test_without_servers_the_order_is_todays_and_says_so() -> None:
    ips = sorted(by_ip(G8))
    got = rail_order(TOPO8, [*ips, "10.9.9.9"], {})
    assert got.hosts == [*rank_order(TOPO8, ips)[0], "10.9.9.9"] and got.unknown == ["10.9.9.9"]
    assert got.rails == NOT_DECLARED and got.reasons == ("the policy declares no servers",)
    assert "rail_groups" not in got.as_json() and got.as_json()["rails"] == "not declared"


def test_a_host_that_is_no_servers_nic_means_todays_order() -> None:
    cabled = by_ip(G8)
    servers = servers_of(G8)
    del servers["s8"]
    ips = sorted(cabled)
    got = rail_order(TOPO8, ips, servers)
    assert got.hosts == rank_order(TOPO8, ips)[0] and got.rails == NOT_DECLARED
    strangers = sorted(ip for ip, (s, _) in cabled.items() if s == "s8")
    assert got.reasons == tuple(f"{ip} is not a NIC of a declared server" for ip in strangers)
    many = rail_order(TOPO8, [*ips, *(f"10.9.9.{i}" for i in range(10))], servers)
    assert len(many.reasons) == 6 and many.reasons[-1] == "and 9 more like them"


def fat_tree_servers(g: nx.MultiGraph) -> dict[str, tuple[DeclaredNic, ...]]:
    """A server per edge switch: both NICs on one leaf, so no rail holds."""
    out: dict[str, list[DeclaredNic]] = {}
    for h in host_list(g):
        out.setdefault(f"srv-{g.nodes[h]['switch']}", []).append(
            DeclaredNic(g.nodes[h]["mac"], None)
        )
    return {s: tuple(n) for s, n in out.items()}


def test_a_fabric_not_rail_optimized_for_these_servers_means_todays_order() -> None:
    g = fat_tree(4)
    topo = learned_topology(g)
    ips = [g.nodes[h]["ip"] for h in host_list(g)][::-1]
    got = rail_order(topo, ips, fat_tree_servers(g))
    assert got.rails == NOT_RAIL_OPTIMIZED and got.hosts == rank_order(topo, ips)[0]
    assert any("NICs 0 and 1 reach the same leaf" in r for r in got.reasons), got.reasons
    assert got.reasons[-1] == "the asked NICs' rails 0, 1 do not hold for these servers"


def test_an_unlearned_nic_means_todays_order_with_it_last() -> None:
    g = rail_optimized(servers=3, nics=2, spines=1)
    ips = sorted(by_ip(g))
    missing = ips[0]
    unseen = g.copy()
    unseen.remove_node(next(h for h in host_list(g) if g.nodes[h]["ip"] == missing))
    topo = learned_topology(unseen)
    got = rail_order(topo, ips, servers_of(g, by_ip=True))
    assert got.rails == NOT_RAIL_OPTIMIZED and got.unknown == [missing]
    assert got.hosts == [*rank_order(topo, ips)[0], missing]
    assert got.reasons[0] == f"{missing} is not learned yet"
    assert any(f"({missing}) is not attached" in r for r in got.reasons), got.reasons


def test_only_the_servers_asked_for_must_be_rail_optimized() -> None:
    servers = servers_of(G8)
    servers["s9"] = (DeclaredNic("02:00:00:00:09:00", None),)  # never learned: rail 0 broken
    cabled = by_ip(G8)
    assert rail_order(TOPO8, sorted(cabled), servers).rails == USED


# -- the exports' view --------------------------------------------------------------------
def test_nic_places_give_every_learned_nic_its_server_and_the_rails_that_hold() -> None:
    places = nic_places(servers_of(G8), TOPO8)
    assert {ip: (p.server, p.nic) for ip, p in places.items()} == by_ip(G8)
    assert all(p.rail == p.nic for p in places.values())
    servers = servers_of(G8)
    servers["s9"] = (DeclaredNic("02:00:00:00:09:00", None),)  # rail 0 no longer holds
    places = nic_places(servers, TOPO8)
    assert {p.rail for p in places.values()} == {None, 1, 2, 3}
    assert all((p.rail is None) == (p.nic == 0) for p in places.values())
    assert nic_places({}, TOPO8) == {}


def test_servers_follow_the_leaves_not_their_names() -> None:
    """Names that sort against the cabling: the ring still goes SU by SU, slot by slot."""
    renamed = {f"gpu{9 - int(s[1:])}": nics for s, nics in servers_of(G8).items()}
    cabled = by_ip(G8)
    got = rail_order(TOPO8, sorted(cabled), renamed)
    assert got.rails == USED
    assert runs(got.hosts, cabled) == [f"s{i}" for i in range(1, 9)]
