"""Priority compression: order kept, equal priorities together, and the cuts that leave
the fewest link-sharing jobs in one queue."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.priorities import compress, sharing


def clashes(levels: dict[str, int], conflicts: set[frozenset[str]]) -> int:
    return sum(1 for pair in conflicts if len({levels[j] for j in pair}) == 1)


def test_enough_queues_give_each_priority_its_own() -> None:
    ranked = [("a", 9), ("b", 5), ("c", 1)]
    assert compress(ranked, set(), 3) == {"a": 0, "b": 1, "c": 2}


def test_the_cut_separates_the_jobs_that_share_a_link() -> None:
    """Four priorities, two queues: a and b never meet, b and c share a link. Cutting in
    the middle (a,b | c,d) keeps b and c apart; cutting after a would not."""
    ranked = [("a", 4), ("b", 3), ("c", 2), ("d", 1)]
    conflicts = {frozenset(("b", "c"))}
    levels = compress(ranked, conflicts, 2)
    assert levels["b"] != levels["c"]
    assert [levels[j] for j in "abcd"] == sorted(levels[j] for j in "abcd")  # order kept
    assert clashes(levels, conflicts) == 0


def test_equal_priorities_share_a_level_even_when_they_clash() -> None:
    ranked = [("a", 5), ("b", 5), ("c", 1)]
    levels = compress(ranked, {frozenset(("a", "b"))}, 3)
    assert levels["a"] == levels["b"] == 0 and levels["c"] == 1


def test_one_queue_holds_everyone_and_zero_is_refused() -> None:
    assert set(compress([("a", 2), ("b", 1)], set(), 1).values()) == {0}
    with pytest.raises(ValueError, match="at least 1"):
        compress([("a", 1)], set(), 0)


def test_sharing_finds_jobs_with_a_common_link() -> None:
    links = {"a": {(1, 1), (2, 3)}, "b": {(2, 3)}, "c": {(9, 9)}}
    assert sharing(links) == {frozenset(("a", "b"))}


@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=7),
    st.sets(st.tuples(st.integers(0, 6), st.integers(0, 6))),
    st.integers(1, 4),
)
def test_no_order_keeping_cut_clashes_less(
    prios: list[int], edges: set[tuple[int, int]], levels: int
) -> None:
    """Against every order-keeping split into at most ``levels`` groups (brute force)."""
    ranked = sorted(((f"j{i}", p) for i, p in enumerate(prios)), key=lambda x: (-x[1], x[0]))
    names = [n for n, _ in ranked]
    conflicts = {
        frozenset((f"j{a}", f"j{b}")) for a, b in edges if a != b and max(a, b) < len(prios)
    }
    got = compress(ranked, conflicts, levels)
    assert len(set(got.values())) <= levels
    assert [got[n] for n in names] == sorted(got[n] for n in names)
    for (n1, p1), (n2, p2) in itertools.combinations(ranked, 2):
        if p1 == p2:
            assert got[n1] == got[n2]
    cuttable = [i for i in range(1, len(names)) if ranked[i - 1][1] != ranked[i][1]]
    best = clashes(got, conflicts)
    for k in range(0, min(levels, len(cuttable) + 1)):
        for cuts in itertools.combinations(cuttable, k):
            edges_ = [0, *cuts, len(names)]
            alt = {
                names[i]: g for g in range(len(edges_) - 1) for i in range(edges_[g], edges_[g + 1])
            }
            assert clashes(alt, conflicts) >= best
