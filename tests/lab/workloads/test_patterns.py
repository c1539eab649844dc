"""Traffic-matrix generators of the benchmarks: shapes, probabilities, determinism."""

from __future__ import annotations

from collections import Counter

import pytest

from mininet_scenarios.workloads.patterns import (
    DRAGONFLY_PATTERNS,
    FAT_TREE_PATTERNS,
    PatternError,
    adversarial,
    by_name,
    hotspot,
    random_bijection,
    random_dest,
    staggered,
    stride,
    uniform_random,
)
from topologies import dragonfly, fat_tree
from topologies.graph import host_list

FT = fat_tree(4)
HOSTS = host_list(FT)
DF = dragonfly(a=4, p=1, h=1, g=5)


def is_derangement(matrix: list[tuple[str, str]], hosts: list[str]) -> bool:
    senders = [s for s, _ in matrix]
    receivers = [d for _, d in matrix]
    return (
        sorted(senders) == sorted(hosts)
        and sorted(receivers) == sorted(hosts)
        and all(s != d for s, d in matrix)
    )


@pytest.mark.parametrize("i", [1, 2, 4, 8])
def test_stride_is_a_shift_by_index(i: int) -> None:
    m = stride(HOSTS, i)
    assert is_derangement(m, HOSTS)
    for x, (s, d) in enumerate(m):
        assert s == f"h{x + 1}" and d == f"h{(x + i) % 16 + 1}"


def test_stride_that_wraps_to_self_is_refused() -> None:
    with pytest.raises(PatternError):
        stride(HOSTS, 16)


def test_stride4_crosses_pods_and_stride1_mostly_stays() -> None:
    pod = {h: FT.nodes[h]["group"] for h in HOSTS}
    assert all(pod[s] != pod[d] for s, d in stride(HOSTS, 4))
    assert sum(pod[s] == pod[d] for s, d in stride(HOSTS, 1)) == 12


@pytest.mark.parametrize("seed", range(50))
def test_random_bijection_is_a_derangement(seed: int) -> None:
    assert is_derangement(random_bijection(HOSTS, seed), HOSTS)


def test_random_bijection_varies_with_seed() -> None:
    assert len({tuple(random_bijection(HOSTS, s)) for s in range(20)}) == 20


@pytest.mark.parametrize(
    "gen",
    [
        lambda s: random_dest(HOSTS, s),
        lambda s: random_bijection(HOSTS, s),
        lambda s: hotspot(HOSTS, s),
        lambda s: staggered(FT, 0.2, 0.3, s),
        lambda s: adversarial(DF, s),
        lambda s: uniform_random(host_list(DF), s),
    ],
)
def test_deterministic_per_seed(gen: object) -> None:
    assert callable(gen)
    assert gen(7) == gen(7)
    assert any(gen(7) != gen(s) for s in range(8, 20))


def test_random_dest_one_flow_per_sender_no_self_and_collisions_happen() -> None:
    collided = 0
    for seed in range(20):
        m = random_dest(HOSTS, seed)
        assert [s for s, _ in m] == HOSTS
        assert all(s != d for s, d in m)
        collided += max(Counter(d for _, d in m).values()) > 1
    assert collided > 15  # 16 draws over 15 hosts: collisions are the rule


def test_random_dest_is_roughly_uniform() -> None:
    counts = Counter(d for seed in range(400) for _, d in random_dest(HOSTS, seed))
    # 6400 draws, 400 per host expected
    assert all(300 < c < 500 for c in counts.values()), counts


def test_hotspot_everyone_else_sends_to_one() -> None:
    m = hotspot(HOSTS, 3)
    receivers = {d for _, d in m}
    assert len(receivers) == 1 and len(m) == 15
    assert receivers.pop() not in {s for s, _ in m}


@pytest.mark.parametrize(("edge_p", "pod_p"), [(0.2, 0.3), (0.5, 0.3)])
def test_staggered_probabilities(edge_p: float, pod_p: float) -> None:
    tiers: Counter[str] = Counter()
    for seed in range(300):
        m = staggered(FT, edge_p, pod_p, seed)
        assert [s for s, _ in m] == HOSTS
        for s, d in m:
            assert s != d
            a, b = FT.nodes[s], FT.nodes[d]
            if a["switch"] == b["switch"]:
                tiers["edge"] += 1
            elif a["group"] == b["group"]:
                tiers["pod"] += 1
            else:
                tiers["other"] += 1
    n = sum(tiers.values())  # 4800 draws: 3 sigma is under 0.025
    assert abs(tiers["edge"] / n - edge_p) < 0.03
    assert abs(tiers["pod"] / n - pod_p) < 0.03
    assert abs(tiers["other"] / n - (1 - edge_p - pod_p)) < 0.03


def test_staggered_falls_back_when_a_tier_is_empty() -> None:
    # Dragonfly with p=1: no other host on the same router, so EdgeP=1 must still send.
    m = staggered(DF, 1.0, 0.0, 1)
    assert len(m) == 20 and all(s != d for s, d in m)
    assert all(DF.nodes[s]["group"] == DF.nodes[d]["group"] for s, d in m)


def test_staggered_refuses_bad_probabilities() -> None:
    with pytest.raises(PatternError):
        staggered(FT, 0.8, 0.5, 1)


@pytest.mark.parametrize("seed", range(20))
def test_adversarial_crosses_exactly_to_the_next_group(seed: int) -> None:
    hosts = host_list(DF)
    m = adversarial(DF, seed)
    assert is_derangement(m, hosts)
    for s, d in m:
        assert DF.nodes[d]["group"] == (DF.nodes[s]["group"] + 1) % 5


def test_adversarial_on_a_fat_tree_goes_pod_to_next_pod() -> None:
    m = adversarial(FT, 1)
    assert all(FT.nodes[d]["group"] == (FT.nodes[s]["group"] + 1) % 4 for s, d in m)


def test_by_name_parses_every_benchmark_pattern() -> None:
    for name in FAT_TREE_PATTERNS:
        p = by_name(name)
        assert p.name == name
        m = p.matrix(FT, 1)
        assert len(m) in (15, 16)
    for name in DRAGONFLY_PATTERNS:
        assert len(by_name(name).matrix(DF, 1)) == 20
    assert by_name("stride4").matrix(FT, 1) == stride(HOSTS, 4)
    assert by_name("stag(0.50, 0.3)").name == "stag(0.5,0.3)"
    assert by_name("stag(0.2,0.3)").matrix(FT, 9) == staggered(FT, 0.2, 0.3, 9)
    assert by_name("randbij").permutation and not by_name("random").permutation


@pytest.mark.parametrize("bad", ["stride0", "stag(0.9,0.3)", "bogus", "stride", "stag(a,b)"])
def test_by_name_refuses(bad: str) -> None:
    with pytest.raises(PatternError):
        by_name(bad)
