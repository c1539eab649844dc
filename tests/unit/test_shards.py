"""Mastership shards: one master a switch, spread evenly, as few moves as membership allows."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.cluster.shards import assign, moves, spread

POOL = [f"loom-{i}" for i in range(1, 9)]


def everyone(n: int, members: list[str]) -> dict[int, list[str]]:
    """``n`` switches (dpids 1..n), each connected to every member."""
    return {dpid: list(members) for dpid in range(1, n + 1)}


def held(assignment: dict[int, str], member: str) -> set[int]:
    return {dpid for dpid, master in assignment.items() if master == member}


@pytest.mark.parametrize("m", range(1, 6))
def test_full_eligibility_is_balanced_within_one(m: int) -> None:
    members = POOL[:m]
    for n in range(61):
        result = assign(everyone(n, members), members, {})
        assert sorted(result) == list(range(1, n + 1)), f"n={n}"
        assert spread(result, members) == (n // m, math.ceil(n / m)), f"n={n} m={m}"


def test_every_switch_goes_once_to_an_eligible_live_member() -> None:
    switches = {1: ["loom-1", "loom-2"], 2: ["loom-2"], 3: ["loom-3"], 4: [], 5: ["loom-1"]}
    result = assign(switches, ["loom-1", "loom-2"], {})
    assert set(result) == {1, 2, 5}  # 3: only a dead member; 4: nobody
    assert all(result[dpid] in switches[dpid] for dpid in result)
    assert result[2] == "loom-2" and result[5] == "loom-1"


def test_a_switch_connected_to_one_member_goes_to_it() -> None:
    members = POOL[:3]
    switches = everyone(9, members)
    switches[4] = ["loom-3"]
    current = dict.fromkeys(range(1, 10), "loom-1")
    for _ in range(2):
        result = assign(switches, members, current)
        assert result[4] == "loom-3" and spread(result, members) == (3, 3)
        current = result


def test_a_death_moves_only_the_dead_members_switches() -> None:
    members = POOL[:4]
    before = assign(everyone(30, members), members, {})
    survivors = [m for m in members if m != "loom-2"]
    after = assign(everyone(30, members), survivors, before)
    assert moves(before, after) == len(held(before, "loom-2")) == 8
    for member in survivors:
        assert held(before, member) <= held(after, member), member
    assert spread(after, survivors) == (10, 10)


@pytest.mark.parametrize(("n", "m"), [(12, 3), (30, 4), (31, 5), (7, 2), (1, 1), (60, 5)])
def test_a_join_moves_few_switches_all_to_the_newcomer(n: int, m: int) -> None:
    members = POOL[:m]
    before = assign(everyone(n, members), members, {})
    after = assign(everyone(n, POOL[: m + 1]), POOL[: m + 1], before)
    moved = {dpid for dpid in before if before[dpid] != after[dpid]}
    assert len(moved) == moves(before, after) <= math.ceil(n / (m + 1))
    assert all(after[dpid] == POOL[m] for dpid in moved)
    assert spread(after, POOL[: m + 1]) == (n // (m + 1), math.ceil(n / (m + 1)))


def test_a_member_gives_up_its_highest_dpids_first() -> None:
    members = ["loom-1", "loom-2"]
    after = assign(everyone(10, members), members, dict.fromkeys(range(1, 11), "loom-1"))
    assert held(after, "loom-2") == {6, 7, 8, 9, 10}


def test_an_already_balanced_assignment_is_kept_whoever_holds_what() -> None:
    members = POOL[:3]
    current = {1: "loom-3", 2: "loom-3", 3: "loom-3", 4: "loom-3", 5: "loom-1"}
    current |= {6: "loom-1", 7: "loom-1", 8: "loom-2", 9: "loom-2", 10: "loom-2"}
    assert assign(everyone(10, members), members, current) == current


def test_the_extra_switch_stays_with_the_member_holding_the_most() -> None:
    members = POOL[:3]
    current = {1: "loom-3", 2: "loom-3", 3: "loom-3", 4: "loom-3", 5: "loom-3"}
    current |= {6: "loom-1", 7: "loom-1", 8: "loom-2", 9: "loom-2"}
    current |= {10: "loom-2"}
    after = assign(everyone(10, members), members, current)
    assert moves(current, after) == 1 and after[5] == "loom-1"


def test_assign_is_a_fixed_point() -> None:
    members = POOL[:4]
    switches = everyone(23, members)
    for dpid in range(1, 24, 3):
        switches[dpid] = members[dpid % 2 :: 2]
    first = assign(switches, members, {})
    assert moves(first, assign(switches, members, first)) == 0


def test_stale_entries_in_current_are_ignored() -> None:
    members = ["loom-1", "loom-2"]
    current = {1: "loom-9", 2: "loom-9", 3: "loom-1", 99: "loom-2", 100: "loom-9"}
    result = assign(everyone(4, members), members, current)
    assert sorted(result) == [1, 2, 3, 4] and result[3] == "loom-1"
    assert spread(result, members) == (2, 2)
    assert assign(everyone(4, members), members, current) == result


def test_the_order_of_the_inputs_does_not_matter() -> None:
    rng = random.Random(7)
    members = POOL[:5]
    switches = {dpid: rng.sample(members, rng.randint(1, 5)) for dpid in range(1, 41)}
    current = {dpid: rng.choice(POOL) for dpid in range(1, 50)}
    expected = assign(switches, members, current)
    for _ in range(20):
        dpids = list(switches)
        rng.shuffle(dpids)
        shuffled = {d: rng.sample(switches[d], len(switches[d])) for d in dpids}
        keys = list(current)
        rng.shuffle(keys)
        again = assign(shuffled, rng.sample(members, 5), {k: current[k] for k in keys})
        assert again == expected
        assert assign({d: set(a) for d, a in shuffled.items()}, set(members), current) == expected


def test_no_members_or_no_switches_give_nothing() -> None:
    assert assign(everyone(5, POOL[:2]), [], {1: "loom-1"}) == {}
    assert assign({}, POOL[:2], {1: "loom-1"}) == {}
    assert spread({}, []) == (0, 0) and spread({}, POOL[:2]) == (0, 0)


def test_moves_counts_dpids_present_on_both_sides() -> None:
    before = {1: "a", 2: "a", 3: "b", 4: "b"}
    assert moves(before, {1: "a", 2: "b", 3: "a", 5: "c"}) == 2


ShardCase = tuple[dict[int, list[str]], list[str], dict[int, str], bool]


@st.composite
def shard_cases(draw: st.DrawFn) -> ShardCase:
    members = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=6, unique=True))
    dpids = draw(st.lists(st.integers(1, 2**48), min_size=0, max_size=80, unique=True))
    full = draw(st.booleans())
    switches = {
        dpid: list(members) if full else draw(st.lists(st.sampled_from(POOL), min_size=1))
        for dpid in dpids
    }
    stale = draw(st.lists(st.integers(1, 2**48), max_size=10))
    current = {dpid: draw(st.sampled_from(POOL)) for dpid in dpids + stale if draw(st.booleans())}
    return switches, members, current, full


def fewest_moves(
    switches: dict[int, list[str]], members: list[str], current: dict[int, str]
) -> int:
    """With full eligibility: the dead members' switches, plus what the others hold beyond
    floor(n/m), or ceil(n/m) for the n % m members holding the most."""
    n, m = len(switches), len(members)
    kept = [d for d in switches if current.get(d) in members]
    dead = sum(1 for d in switches if d in current) - len(kept)
    holds = sorted((sum(1 for d in kept if current[d] == x) for x in members), reverse=True)
    quotas = [n // m + (i < n % m) for i in range(m)]
    return dead + sum(max(0, h - q) for h, q in zip(holds, quotas, strict=True))


@settings(max_examples=300, deadline=None)
@given(shard_cases())
def test_property_eligible_balanced_and_stable(case: ShardCase) -> None:
    switches, members, current, full = case
    result = assign(switches, members, current)
    reachable = {d for d, able in switches.items() if set(able) & set(members)}
    assert set(result) == reachable
    assert all(result[d] in members and result[d] in switches[d] for d in result)
    if full:
        low, high = spread(result, members)
        assert high - low <= 1
        assert moves(current, result) == fewest_moves(switches, members, current)
    assert moves(result, assign(switches, members, result)) == 0
