"""The collectives workload without a network: busbw conventions, rank orders, ring
direction, the worker's parsing of ``ss``, background pairs and class-counter deltas."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from mininet_scenarios.workloads.collectives.background import (
    BACKGROUND_CPORT,
    Bulk,
    client_command,
    cross_pod_background,
)
from mininet_scenarios.workloads.collectives.diag import (
    class_delta,
    parse_socket_drops,
    shared_links,
)
from mininet_scenarios.workloads.collectives.hosts import GLOO_PORTS
from mininet_scenarios.workloads.collectives.model import (
    algbw_mbps,
    bus_factor,
    busbw_mbps,
    random_order,
    ring_direction_seen,
    ring_pairs,
    summarize,
    tcp_ceiling,
    topology_order,
    wire_bytes_per_rank,
)
from mininet_scenarios.workloads.collectives.runner import job_request
from mininet_scenarios.workloads.collectives.worker import elements, tcp_bytes_by_peer
from topologies import fat_tree, leaf_spine
from topologies.graph import host_list

FAT = fat_tree(4)
HOSTS = host_list(FAT)
MIB = 2**20


# --------------------------------------------------------------------------- busbw


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 4, 1.5),
        ("all_reduce", 16, 30 / 16),
        ("all_gather", 16, 15 / 16),
        ("all_to_all", 16, 15 / 16),
        ("all_to_all", 2, 0.5),
        ("broadcast", 8, 1.0),
    ],
)
def test_bus_factor_follows_nccl_tests(op: str, n: int, factor: float) -> None:
    assert bus_factor(op, n) == pytest.approx(factor)


def test_bus_factor_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="at least 2 ranks"):
        bus_factor("all_reduce", 1)
    with pytest.raises(ValueError, match="unknown op 'gossip'"):
        bus_factor("gossip", 4)


def test_algbw_is_the_per_rank_buffer_over_time_in_megabits() -> None:
    assert algbw_mbps(16 * MIB, 16.777216) == pytest.approx(8.0)
    with pytest.raises(ValueError, match="seconds must be positive"):
        algbw_mbps(1, 0)


def test_a_ring_at_line_rate_has_busbw_equal_to_the_link() -> None:
    # 16 ranks, 16 MiB all-reduce: each rank sends 2*15/16*16 MiB; at 10 Mbit/s that takes
    # wire*8/1e7 seconds, and busbw must come out as exactly 10 Mbit/s.
    n, size, rate = 16, 16 * MIB, 10.0
    wire = wire_bytes_per_rank("all_reduce", n, size)
    assert wire == pytest.approx(2 * 15 / 16 * size)
    t = wire * 8 / (rate * 1e6)
    assert busbw_mbps("all_reduce", n, size, t) == pytest.approx(rate)
    # all-to-all with the same per-rank buffer: half the bytes, the same busbw at line rate
    t2 = wire_bytes_per_rank("all_to_all", n, size) * 8 / (rate * 1e6)
    assert busbw_mbps("all_to_all", n, size, t2) == pytest.approx(rate)
    assert t2 == pytest.approx(t / 2)


def test_summarize_takes_the_slowest_rank_of_each_iteration() -> None:
    docs = [
        {"bytes": 4 * MIB, "seconds": [2.0, 3.0]},
        {"bytes": 4 * MIB, "seconds": [2.5, 1.0]},
        {"bytes": 4 * MIB, "seconds": [1.0, 1.0]},
        {"bytes": 4 * MIB, "seconds": [1.0, 1.0, 9.0]},  # extra iterations are ignored
    ]
    seconds, alg, bus = summarize("all_reduce", docs)
    assert seconds == [2.5, 3.0]
    assert alg[0] == pytest.approx(8 * 4 * MIB / 2.5 / 1e6)
    assert bus[1] == pytest.approx(alg[1] * 1.5)


def test_worker_buffer_splits_into_equal_chunks() -> None:
    for world in (2, 3, 4, 7, 16):
        n = elements(1.0, world)
        assert n % world == 0 and 0 <= MIB // 4 - n < world
    assert elements(1e-9, 4) == 4  # never empty


# --------------------------------------------------------------------------- rank orders


def test_random_order_is_a_seeded_permutation() -> None:
    a, b, c = random_order(HOSTS, 1), random_order(HOSTS, 1), random_order(HOSTS, 2)
    assert a == b and a != c and sorted(a) == sorted(HOSTS)
    assert host_list(FAT) == HOSTS  # the input is not shuffled in place


def _edge(h: str) -> str:
    return str(FAT.nodes[h]["switch"])


def _pod(h: str) -> int:
    return int(FAT.nodes[h]["group"])


def test_topology_order_keeps_edges_and_pods_together() -> None:
    order = topology_order(FAT, random_order(HOSTS, 3))
    assert sorted(order) == sorted(HOSTS)
    # each edge switch's and each pod's hosts form one contiguous run of ranks
    for key in (_edge, _pod):
        runs = [k for k, _ in itertools.groupby(order, key=key)]
        assert len(runs) == len(set(runs))
    # so the ring crosses each pod boundary exactly once per direction
    crossings = sum(1 for a, b in ring_pairs(order, 1) if _pod(a) != _pod(b))
    assert crossings == 4


def test_topology_order_of_a_leaf_spine_groups_by_leaf() -> None:
    g = leaf_spine(leaves=3, spines=2, hosts_per_leaf=2)
    order = topology_order(g, list(reversed(host_list(g))))
    leaves = [g.nodes[h]["switch"] for h in order]
    assert leaves == sorted(leaves, key=leaves.index) and len(set(leaves)) == 3
    assert [k for k, _ in itertools.groupby(leaves)] == ["leaf1", "leaf2", "leaf3"]


def test_ring_pairs_and_direction() -> None:
    order = ["a", "b", "c", "d"]
    assert ring_pairs(order, 1) == [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")]
    assert ring_pairs(order, -1) == [("a", "d"), ("b", "a"), ("c", "b"), ("d", "c")]
    big, small = 9_000_000, 2_000
    backward = {p: big for p in ring_pairs(order, -1)} | {p: small for p in ring_pairs(order, 1)}
    assert ring_direction_seen(order, backward) == "backward"
    forward = {p: big for p in ring_pairs(order, 1)}
    assert ring_direction_seen(order, forward) == "forward"
    both = {p: big for p in ring_pairs(order, 1) + ring_pairs(order, -1)}
    assert ring_direction_seen(order, both) == "both"
    assert ring_direction_seen(order, {}) == "none"


def test_job_request_registers_gloo_directions() -> None:
    ips = ["10.0.0.2", "10.0.0.3"]
    ar = job_request("j", "t", ips, "all_reduce")
    assert (ar["pattern"], ar["ring_direction"]) == ("ring", "backward")
    assert job_request("j", "t", ips, "all_gather")["ring_direction"] == "forward"
    a2a = job_request("j", "t", ips, "all_to_all")
    assert a2a["pattern"] == "all_to_all" and "ring_direction" not in a2a
    assert ar["hosts"] == ips and ar["traffic_class"] == "collective"


def test_cross_pod_background_loads_every_host_once_into_another_pod() -> None:
    pairs = cross_pod_background(FAT, HOSTS)
    assert len(pairs) == 16
    assert sorted(a for a, _ in pairs) == sorted(HOSTS)
    assert sorted(b for _, b in pairs) == sorted(HOSTS)  # every downlink too
    assert all(_pod(a) != _pod(b) for a, b in pairs)


def test_gloo_port_range_is_one_u32_mask() -> None:
    lo, hi = GLOO_PORTS
    span = hi - lo + 1
    assert span & (span - 1) == 0 and lo % span == 0  # a power of two, aligned
    # the background clients' ports (one per flow) stay outside it, so bulk stays bulk
    assert lo > BACKGROUND_CPORT + 64 or hi < BACKGROUND_CPORT


def test_tcp_ceiling() -> None:
    assert tcp_ceiling(1500) == pytest.approx(1448 / 1514)
    assert tcp_ceiling(9000) == pytest.approx(8948 / 9014)


# --------------------------------------------------------------------------- worker parsing

SS = """\
ESTAB 0 0 10.0.0.2:41000 10.1.0.3:45123
\t cubic wscale:9,9 rto:204 bytes_sent:100 bytes_acked:90 bytes_received:7 segs_out:3
ESTAB 0 0 10.0.0.2:41003 10.3.0.2:45000
\t cubic bytes_retrans:4380 bytes_acked:8000
ESTAB 0 0 10.0.0.2:41001 10.1.0.3:45124
\t cubic bytes_acked:10 bytes_received:3
ESTAB 0 0 10.0.0.2:41002 10.2.1.2:29500
\t cubic minrtt:0.1
ESTAB 0 0 [::1]:5 [::1]:6
\t cubic bytes_acked:5
"""


def test_tcp_bytes_by_peer_sums_connections_per_peer() -> None:
    out = tcp_bytes_by_peer(SS)
    assert out["10.1.0.3"] == {"sent": 100, "received": 10, "retrans": 0}
    assert "10.2.1.2" not in out  # no byte counters on that socket
    assert out["10.3.0.2"]["retrans"] == 4380
    assert out["::1"] == {"sent": 5, "received": 0, "retrans": 0}


SS_PROCESSES = """\
ESTAB 0 0 10.0.0.2:41000 10.1.0.3:45123 users:(("python3",pid=77,fd=9))
\t cubic bytes_acked:100 bytes_received:7
ESTAB 0 0 10.0.0.2:30001 10.1.0.3:5301 users:(("iperf3",pid=78,fd=5))
\t cubic bytes_retrans:9000 bytes_acked:5000000
"""


def test_tcp_bytes_by_peer_counts_only_the_ranks_own_sockets() -> None:
    # A bulk iperf3 flow in the same host (and to the same peer) is not the rank's traffic.
    assert tcp_bytes_by_peer(SS_PROCESSES, pid=77) == {
        "10.1.0.3": {"sent": 100, "received": 7, "retrans": 0}
    }
    assert tcp_bytes_by_peer(SS_PROCESSES)["10.1.0.3"]["retrans"] == 9000


def test_cross_pod_background_avoids_the_jobs_pairs_in_both_directions() -> None:
    for seed in range(1, 6):
        order = random_order(HOSTS, seed)
        avoid = ring_pairs(order, -1)
        pairs = cross_pod_background(FAT, HOSTS, avoid=avoid, seed=seed)
        banned = set(avoid) | {(b, a) for a, b in avoid}
        assert not banned & set(pairs)
        assert sorted(b for _, b in pairs) == sorted(HOSTS)
        assert all(_pod(a) != _pod(b) for a, b in pairs)


# --------------------------------------------------------------------------- diagnostics


def test_class_deltas_sum_link_ends_and_shared_links_need_both_classes() -> None:
    before = {
        "s1-eth1": {"collective": (1_000, 0), "bulk": (0, 0)},
        "s1-eth2": {"collective": (0, 0), "bulk": (500, 1)},
    }
    after = {
        "s1-eth1": {"collective": (2_001_000, 3), "bulk": (400_000, 0)},
        "s1-eth2": {"collective": (50_000, 0), "bulk": (900_500, 4)},
        "h1-eth0": {"collective": (7, 0), "bulk": (9, 0)},  # not in the first snapshot
    }
    total = class_delta(before, after)
    assert total["collective"] == {"bytes": 2_050_007, "dropped": 3}
    assert total["bulk"] == {"bytes": 1_300_009, "dropped": 3}
    assert total["worst_collective_drops"] == {"s1-eth1": 3}
    assert total["collective_drops_by_end"] == {"s1-eth1": 3}
    shared = shared_links(before, after)
    assert shared == {
        "s1-eth1": {
            "collective": 2_000_000,
            "bulk": 400_000,
            "collective_dropped": 3,
            "bulk_dropped": 0,
        }
    }


def test_socket_drops_are_read_per_ovs_port() -> None:
    text = (
        'p_raw 0 0 [0]:* * users:(("ovs-vswitchd",pid=1,fd=2))'
        " skmem:(r0,rb1,t0,tb1,f0,w0,o0,bl0,d3)\n"
        'p_raw 0 0 *:e0_0-eth4 * users:(("ovs-vswitchd",pid=1,fd=38))'
        " skmem:(r13824,rb212992,t0,tb16777216,f0,w0,o176,bl0,d17)\n"
        'p_raw 0 0 *:eth0 * users:(("dhclient",pid=9,fd=5)) skmem:(r0,rb1,t0,tb1,f0,w0,o0,bl0,d9)\n'
    )
    assert parse_socket_drops(text) == {"e0_0-eth4": 17}


def test_bulk_flows_send_standard_frames_unless_told_otherwise(tmp_path: Path) -> None:
    flow = Bulk("h1", "h9", 5301, BACKGROUND_CPORT, tmp_path / "bulk.json")
    assert " -M 1448 " in client_command(flow, "10.2.0.2", 60, 1448)
    assert " -M " not in client_command(flow, "10.2.0.2", 60)


def test_bytes_between_ranks_of_one_server_are_put_on_the_right_pair() -> None:
    from mininet_scenarios.workloads.collectives.runner import _tcp_sent

    hosts = ["s1n0", "s1n1", "s2n0"]
    ips = ["10.100.1.2", "10.101.1.2", "10.100.1.3"]
    docs = [  # s1n1 connected to s1n0: both ends 10.100.1.2, so s1n0 sees itself as the peer
        {"tcp_by_peer": {"10.100.1.2": {"sent": 7, "retrans": 1}, "10.100.1.3": {"sent": 5}}},
        {"tcp_by_peer": {"10.100.1.2": {"sent": 9}, "::ffff:10.100.1.2": {"sent": 3}}},
        {"tcp_by_peer": {"10.100.1.2": {"sent": 4}}},
    ]
    sent, retrans = _tcp_sent(hosts, ips, docs, ["s1", "s1", "s2"])
    assert sent == {
        ("s1n0", "s1n1"): 7,
        ("s1n0", "s2n0"): 5,
        ("s1n1", "s1n0"): 9,
        ("s2n0", "s1n0"): 4,
    }
    assert retrans == 1
    three = _tcp_sent([*hosts, "s1n2"], [*ips, "10.102.1.2"], [*docs, {}], ["s1", "s1", "s2", "s1"])
    assert ("s1n0", "s1n1") not in three[0]  # two mates on s1n0's server: whose, unknown
