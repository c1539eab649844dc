"""The least-loaded path over every equal-cost path: flows placed one after another, each
on the path its predecessors left least loaded, use the whole fabric. And the bound on
the flows traffic engineering tracks."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

import pytest

from controller.engineer import TeConfig, TrafficEngineer
from controller.flows import FlowKey
from controller.hooks import PlanInputs
from controller.leastloaded import Path, least_loaded_path
from controller.model import ETH_TYPE_IPV4, EthFrame, PortRef
from controller.placement import is_minimal
from controller.routing import compute_routes
from controller.tenants import TenantView
from tests.graphs import edge_of, learned_topology, switch_digraph
from topologies import fat_tree
from topologies.graph import host_list

FAT8 = fat_tree(8)
HOSTS8 = host_list(FAT8)  # 128 hosts, 16 a pod, 4 an edge switch
ROUTES8 = compute_routes(switch_digraph(FAT8), sorted({edge_of(FAT8, h) for h in HOSTS8}))
CORES8 = {FAT8.nodes[n]["dpid"] for n in FAT8.nodes if str(n).startswith("c")}
DPID_NAME = {FAT8.nodes[n]["dpid"]: n for n in FAT8.nodes if FAT8.nodes[n]["kind"] == "switch"}


def place_in_turn(pairs: list[tuple[str, str]], fanout: int = 8) -> dict[int, Path]:
    """Each flow on the least-loaded path, the load being the flows placed before it."""
    load: Counter[PortRef] = Counter()
    placed = {}
    for turn, (s, d) in enumerate(pairs):
        src, dst = edge_of(FAT8, s), edge_of(FAT8, d)
        found = least_loaded_path(ROUTES8, src, dst, lambda link: float(load[link]), turn, fanout)
        assert found is not None
        path, _ = found
        assert is_minimal(ROUTES8, path, src, dst)
        placed[turn] = path
        load.update(path)
    return placed


def cores_of(path: Path) -> set[int]:
    return {dpid for dpid, _ in path if dpid in CORES8}


@pytest.mark.parametrize("fanout", [8, 2])  # every next hop followed; the 2 least loaded
def test_a_permutation_between_pods_takes_one_flow_per_link(fanout: int) -> None:
    """Every host to the same position in the next pod (Hedera's stride with N = k²/4):
    a sample of each edge pair's 16 paths put two flows on some core links."""
    n = len(HOSTS8)
    stride = [(HOSTS8[i], HOSTS8[(i + 16) % n]) for i in range(n)]
    placed = place_in_turn(stride, fanout)
    per_link = Counter(link for path in placed.values() for link in path)
    assert max(per_link.values()) == 1, per_link.most_common(3)
    assert len({c for path in placed.values() for c in cores_of(path)}) == len(CORES8)


def test_a_random_permutation_shares_few_links() -> None:
    """Placed one at a time, in no chosen order, a few flows of a random permutation find
    every free way taken (moving others, later, is the placement's work), none worse
    than sharing a link with one other."""
    rng = random.Random(3)
    receivers = list(HOSTS8)
    rng.shuffle(receivers)
    pairs = [(s, d) for s, d in zip(HOSTS8, receivers, strict=True) if s != d]
    per_link = Counter(link for path in place_in_turn(pairs).values() for link in path)
    assert max(per_link.values()) == 2
    assert sum(n - 1 for n in per_link.values() if n > 1) <= len(pairs) // 8, per_link


def test_ties_spread_over_every_uplink_and_core_switch() -> None:
    """With no load at all, the flows' turns alone pick the path: over many turns one edge
    pair between pods reaches every core switch, each about as often."""
    src, dst = edge_of(FAT8, "h1"), edge_of(FAT8, "h17")
    cores: Counter[int] = Counter()
    uplinks: Counter[PortRef] = Counter()
    for turn in range(40000, 40512):
        found = least_loaded_path(ROUTES8, src, dst, lambda link: 0.0, turn)
        assert found is not None and found[1]
        uplinks[found[0][0]] += 1
        (core,) = cores_of(found[0])
        cores[core] += 1
    assert len(uplinks) == 4
    assert set(cores) == CORES8
    assert max(cores.values()) <= 3 * min(cores.values()), cores


def test_the_path_avoids_a_loaded_link_and_is_the_same_every_time() -> None:
    src, dst = edge_of(FAT8, "h1"), edge_of(FAT8, "h33")
    free = least_loaded_path(ROUTES8, src, dst, lambda link: 0.0, 7)
    assert free is not None
    busy = free[0][1]  # its aggregation switch's uplink
    again = least_loaded_path(ROUTES8, src, dst, lambda link: 0.9 if link == busy else 0.1, 7)
    assert again is not None and busy not in again[0]
    assert least_loaded_path(ROUTES8, src, dst, lambda link: 0.0, 7) == free


def test_one_way_only_and_no_way() -> None:
    e0, e1 = edge_of(FAT8, "h1"), edge_of(FAT8, "h5")  # two edge switches of one pod
    assert least_loaded_path(ROUTES8, e0, e0, lambda link: 0.0) == ((), False)
    within = least_loaded_path(ROUTES8, e0, e1, lambda link: 0.0)
    assert within is not None and within[1] and len(within[0]) == 2
    agg = within[0][1][0]  # from an aggregation switch down to e1: one link, no choice
    assert least_loaded_path(ROUTES8, agg, e1, lambda link: 0.0) == ((within[0][1],), False)
    assert least_loaded_path(ROUTES8, e0, 999, lambda link: 0.0) is None


def tracking(config: TeConfig) -> tuple[TrafficEngineer, Callable[[str, str, int, int], bool]]:
    """An engineer on a learned k=4 fat-tree (16 hosts) and a first packet's copy to it:
    True when the flow is tracked."""
    g = fat_tree(4)
    topo = learned_topology(g)
    routes = compute_routes(topo.graph(), sorted({edge_of(g, h) for h in host_list(g)}))
    te = TrafficEngineer(config)
    inputs = PlanInputs(topo, routes, TenantView.of(None), lambda ref: 0.0)

    def first_packet(src: str, dst: str, sport: int, dport: int) -> bool:
        a, b = g.nodes[src], g.nodes[dst]
        frame = EthFrame(a["mac"], b["mac"], ETH_TYPE_IPV4, None, a["ip"], b["ip"], 6, sport, dport)
        host = topo.hosts[a["mac"]]
        te.first_packet(0.0, inputs, (host.dpid, host.port), frame)
        return FlowKey(a["ip"], b["ip"], 6, sport, dport) in te.flows.flows

    return te, first_packet


def test_ack_streams_do_not_take_the_data_flows_places() -> None:
    te, first_packet = tracking(TeConfig(max_flows=4, flows_per_host=0))
    assert all(first_packet(f"h{i}", f"h{i + 4}", 40000, 5201) for i in range(1, 5))
    assert all(first_packet(f"h{i + 4}", f"h{i}", 5201, 40000) for i in range(1, 5))  # ACKs
    assert len(te.flows.flows) == 8
    assert not first_packet("h9", "h13", 40000, 5201)  # a fifth data flow: over the bound
    assert not first_packet("h13", "h9", 5201, 40000)  # (and no ACK stream of a tracked one)


def test_the_flow_bound_grows_with_the_hosts() -> None:
    _, first_packet = tracking(TeConfig(max_flows=4, flows_per_host=1))  # 16 hosts: 16
    tracked = [
        first_packet(f"h{i}", f"h{(i % 16) + 1}", 40000 + j, 5201)
        for j in range(2)
        for i in range(1, 17)
    ]
    assert tracked == [True] * 16 + [False] * 16
