"""The demo's pure helpers: the tenant split and its policy file, the pair of flows that
ECMP hashes onto one uplink, the collective's ranks and bulk pairs, busbw, when both
uplinks are busy, and the conversion of Prometheus ``query_range`` results into plot
series."""

from __future__ import annotations

import math

import pytest

from controller.policy import parse_policy
from mininet_scenarios.demo.jobs import bulk_pairs, busbw_mbps, iteration_seconds, spread_ranks
from mininet_scenarios.demo.plots import series_label, to_series
from mininet_scenarios.demo.story import (
    ABSENT,
    _addr,
    _xor,
    both_busy_time,
    colliding_pair,
    policy_yaml,
    split_series,
    tenants_of,
    traffic_start,
    transitions,
    uplinks,
)
from topologies import fat_tree

G = fat_tree(4, rate_mbps=10.0)


def test_tenants_split_by_pod_and_the_policy_loads() -> None:
    tenants = tenants_of(G)
    assert tenants == {
        "research": [f"h{i}" for i in range(1, 9)],
        "production": [f"h{i}" for i in range(9, 17)],
    }
    policy = parse_policy(policy_yaml(G, tenants), "demo.yaml")
    assert [t.name for t in policy.tenants] == ["research", "production"]
    assert sum(len(t.hosts) for t in policy.tenants) == 16


def test_colliding_pair_shares_an_edge_and_hashes_alike() -> None:
    (s1, d1), (s2, d2) = colliding_pair(G, tenants_of(G)["research"])
    assert (s1, d1, s2, d2) == ("h1", "h5", "h2", "h6")
    assert G.nodes[s1]["switch"] == G.nodes[s2]["switch"]
    assert G.nodes[d1]["group"] != G.nodes[s1]["group"] != G.nodes[d2]["group"]
    assert _xor(_addr(G, s1), _addr(G, d1)) == _xor(_addr(G, s2), _addr(G, d2))


def test_colliding_pair_respects_the_allowed_hosts() -> None:
    (s1, d1), (s2, d2) = colliding_pair(G, [f"h{i}" for i in range(9, 17)])
    assert {s1, d1, s2, d2} <= {f"h{i}" for i in range(9, 17)}
    with pytest.raises(ValueError, match="no pair of flows"):
        colliding_pair(G, ["h1", "h3", "h5"])  # no two senders on one edge switch


def test_uplinks_of_an_edge_switch() -> None:
    assert uplinks(G, "e0_0") == {3: "a0_0", 4: "a0_1"}


def test_ranks_spread_over_edges_and_bulk_avoids_job_pairs() -> None:
    research = tenants_of(G)["research"]
    ranks = spread_ranks(G, research, 4)
    assert ranks == ["h1", "h3", "h5", "h7"]
    assert spread_ranks(G, research, 6)[4:] == ["h2", "h4"]
    pairs = bulk_pairs(G, ranks, [h for h in research if h not in ranks])
    assert len(pairs) == 8
    for a, b in pairs:
        assert not (a in ranks and b in ranks)
        assert G.nodes[a]["group"] != G.nodes[b]["group"]
    assert {a for a, _ in pairs} >= set(ranks) and {b for _, b in pairs} >= set(ranks)


def test_busbw_and_slowest_rank() -> None:
    assert busbw_mbps(2**20, 4, 1.0) == pytest.approx(8 * 2**20 / 1e6 * 1.5)
    assert busbw_mbps(2**20, 4, 0.0) == 0.0
    assert iteration_seconds([[1.0, 2.0], [1.5, 1.0]]) == [1.5, 2.0]


def test_both_busy_time_is_when_both_uplinks_are_busy() -> None:
    samples = [(0.25, 9.5, 0.0), (0.5, 9.6, 0.1), (0.75, 9.4, 7.0), (1.0, 9.5, 9.5)]
    assert both_busy_time(samples, 10.0) == 0.75
    assert both_busy_time(samples[:2], 10.0) is None
    assert traffic_start([(0.25, 0.0, 0.0), (0.5, 2.0, 0.0), (0.75, 5.0, 0.0)], 10.0) == 0.75
    assert traffic_start([], 10.0) == 0.0


def test_split_series_around_a_moment() -> None:
    series = [2.0, 5.0, 5.0, 4.0, 6.0, 9.5, 9.5]
    assert split_series(series, 0.25, 0.75) == ([5.0, 5.0], [9.5, 9.5])
    assert split_series(series, 0.25, 0.0) == ([2.0], [5.0, 4.0, 6.0, 9.5, 9.5])


def test_query_range_result_becomes_series() -> None:
    result = [
        {"metric": {"__name__": "x", "dst_switch": "a0_1", "src_switch": "e0_0"},
         "values": [[1000.0, "2000000"], [1001.0, "NaN"]]},
        {"metric": {"dst_switch": "a0_0", "src_switch": "e0_0"},
         "values": [[1000.0, "1e6"], [1001.0, "bad"]]},
    ]  # fmt: skip
    series = to_series(result, origin=999.0, scale=1e-6, keys=("dst_switch",))
    assert [s.label for s in series] == ["dst_switch=a0_0", "dst_switch=a0_1"]
    assert series[1].times == [1.0, 2.0]
    assert series[1].values[0] == pytest.approx(2.0) and math.isnan(series[1].values[1])
    assert series[1].peak == pytest.approx(2.0)
    assert to_series(result, 0.0, label="all")[0].label == "all"
    assert series_label({"__name__": "m", "b": "2", "a": "1"}) == "a=1 b=2"
    assert series_label({}) == "value"


def test_path_transitions_keep_only_changes() -> None:
    a, b = ["e0_0", "a0_1", "c3"], ["e0_0", "a0_0", "c1"]
    polls = [ABSENT, None, None, a, a, b, b, None, ABSENT]
    assert transitions(polls) == [None, a, b]
    assert transitions([ABSENT, None, None]) == [None]
    assert transitions([]) == []
