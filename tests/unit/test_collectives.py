"""Collective jobs as pure functions: request validation, pairs, placement."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from controller.collectives import JobState, place_job
from controller.jobspec import JobError, JobSpec, parse_job
from controller.model import PortRef
from controller.routing import compute_routes
from tests.graphs import learned_topology
from topologies import fat_tree
from topologies.graph import host_list

FAT = fat_tree(4)
TOPO = learned_topology(FAT)
ROUTES = compute_routes(TOPO.graph(), sorted({h.dpid for h in TOPO.hosts.values()}))
IPS = [FAT.nodes[h]["ip"] for h in host_list(FAT)]


def capacity(link: tuple[int, int]) -> float:
    return 10e6


def job(ips: list[str], name: str = "j", pattern: str = "ring") -> JobState:
    return JobState(JobSpec(name, "t", tuple(ips), pattern), 1)


def hops_per_link(state: JobState) -> Counter[PortRef]:
    return Counter(link for path in state.paths.values() for link in path)


def test_a_random_order_16_rank_ring_gets_max_link_load_1_per_direction() -> None:
    for seed in range(40):
        order = IPS[:]
        random.Random(seed).shuffle(order)
        state = job(order)
        place_job(state, TOPO, ROUTES, capacity, {})
        assert len(state.paths) == 16 and state.placed
        assert max(hops_per_link(state).values()) == 1, f"seed {seed}"
        assert state.max_utilization <= 1.0


def test_two_concurrent_jobs_share_no_link() -> None:
    rng = random.Random(5)
    order = IPS[:]
    rng.shuffle(order)
    first, second = job(order[:8], name="a"), job(order[8:], name="b")
    place_job(first, TOPO, ROUTES, capacity, {})
    place_job(second, TOPO, ROUTES, capacity, first.link_load())
    shared = set(hops_per_link(first)) & set(hops_per_link(second))
    assert not shared


def test_all_to_all_pairs_are_spread_over_all_paths() -> None:
    state = job(IPS, pattern="all_to_all")
    place_job(state, TOPO, ROUTES, capacity, {})
    assert len(state.paths) == 16 * 15
    load = {link: bps / 10e6 for link, bps in state.link_load().items()}
    # every host sends 15 equal shares, 14 of them off its edge switch: two hosts' worth
    # over two uplinks, so the best spread loads no link beyond 14/15 of its capacity
    assert max(load.values()) == pytest.approx(14 / 15)


def test_ring_pairs_follow_direction() -> None:
    spec = JobSpec("r", "t", ("a", "b", "c"))
    assert [p for p, _ in spec.pairs()] == [("a", "b"), ("b", "c"), ("c", "a")]
    back = JobSpec("r", "t", ("a", "b", "c"), ring_direction="backward")
    assert sorted(p for p, _ in back.pairs()) == [("a", "c"), ("b", "a"), ("c", "b")]
    both = JobSpec("r", "t", ("a", "b", "c"), ring_direction="both")
    assert len(both.pairs()) == 6


def test_waiting_for_unknown_hosts() -> None:
    state = job([IPS[0], "10.9.9.9"])
    place_job(state, TOPO, ROUTES, capacity, {})
    assert state.missing == ("10.9.9.9",) and not state.placed and state.paths == {}


def test_valid_request_parses_with_defaults() -> None:
    spec = parse_job({"name": "llama-7b", "tenant": "research", "hosts": IPS[:4]})
    assert (spec.pattern, spec.traffic_class, spec.ring_direction) == (
        "ring",
        "collective",
        "forward",
    )
    assert (
        parse_job({"name": "x1", "hosts": IPS[:2], "pattern": "alltoall"}).pattern == "all_to_all"
    )


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ([1, 2], "body", "JSON object"),
        ({"hosts": ["10.0.0.2", "10.0.0.3"]}, "name", "required"),
        ({"name": "Bad Name", "hosts": ["10.0.0.2", "10.0.0.3"]}, "name", "not a job name"),
        ({"name": "a", "hosts": ["10.0.0.2"]}, "hosts", "2 to 4096 host"),
        ({"name": "a", "hosts": "10.0.0.2"}, "hosts", "list"),
        ({"name": "a", "hosts": ["10.0.0.2", "10.0.0.300"]}, "hosts[1]", "not an IPv4 address"),
        ({"name": "a", "hosts": ["10.0.0.2", "10.0.0.2"]}, "hosts", "more than once"),
        (
            {"name": "a", "hosts": ["10.0.0.2", "10.0.0.3"], "pattern": "tree"},
            "pattern",
            "expected one of",
        ),
        (
            {"name": "a", "hosts": ["10.0.0.2", "10.0.0.3"], "traffic_class": "gold"},
            "traffic_class",
            "expected",
        ),
        (
            {"name": "a", "hosts": ["10.0.0.2", "10.0.0.3"], "ring_direction": "up"},
            "ring_direction",
            "expected",
        ),
        ({"name": "a", "hosts": ["10.0.0.2", "10.0.0.3"], "ranks": 2}, "ranks", "unknown key"),
        (
            {"name": "a", "hosts": ["10.0.0.2", "10.0.0.3"], "tenant": 7},
            "tenant",
            "non-empty string",
        ),
    ],
)
def test_invalid_requests_name_the_key(body: object, field: str, words: str) -> None:
    with pytest.raises(JobError) as err:
        parse_job(body)
    assert err.value.field == field and words in str(err.value)
    assert str(err.value).startswith(f"{field}: ")
