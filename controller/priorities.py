"""Job priorities onto the few queues a fabric has, as Crux compresses them.

Operators may rank jobs with more priority values than a switch port has queues for
collective traffic. The order must survive (a job never ends above one ranked higher),
and what matters is that jobs *sharing a link* land in different queues, so that the
more important one goes first there; jobs that never meet may share a queue freely.
With no more distinct priorities than queues, each priority gets its own. With more, the
jobs, sorted by priority (highest first; booking order breaks ties), are cut into
``levels`` consecutive groups, choosing the cuts that leave the fewest pairs of
link-sharing jobs in the same group (dynamic programming over the cut points, O(levels ·
jobs²)); among equal cuts, the earliest. Jobs with equal priority always share a level:
the operator said they are equal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence


def compress(
    ranked: Sequence[tuple[str, int]], conflicts: set[frozenset[str]], levels: int
) -> dict[str, int]:
    """``ranked``: (job, priority) highest first; ``conflicts``: pairs of jobs sharing a
    link. Returns job -> level (0 = the highest queue), at most ``levels`` of them."""
    if levels < 1:
        raise ValueError(f"levels must be at least 1, got {levels}")
    jobs = [name for name, _ in ranked]
    n = len(jobs)
    if n == 0:
        return {}
    # A cut may only fall between two different priorities.
    cuttable = [i for i in range(1, n) if ranked[i - 1][1] != ranked[i][1]]
    bounds = [0, *cuttable, n]
    groups = len(bounds) - 1  # distinct priorities
    if groups <= levels:  # enough queues: each priority its own, as ranked
        return {jobs[i]: g for g in range(groups) for i in range(bounds[g], bounds[g + 1])}
    clash = _clash_counter(jobs, conflicts)
    best: dict[tuple[int, int], tuple[int, tuple[int, ...]]] = {}

    def solve(start: int, left: int) -> tuple[int, tuple[int, ...]]:
        """Fewest clashes splitting groups[start:] into exactly ``left`` levels."""
        key = (start, left)
        if key not in best:
            if left == 1:
                best[key] = (clash(bounds[start], bounds[groups]), ())
            else:
                options = []
                for cut in range(start + 1, groups - left + 2):
                    rest, cuts = solve(cut, left - 1)
                    options.append((clash(bounds[start], bounds[cut]) + rest, (cut, *cuts)))
                best[key] = min(options)
        return best[key]

    _, cuts = solve(0, levels)
    edges = [0, *(bounds[c] for c in cuts), n]
    return {jobs[i]: g for g in range(levels) for i in range(edges[g], edges[g + 1])}


def _clash_counter(
    jobs: Sequence[str], conflicts: set[frozenset[str]]
) -> Callable[[int, int], int]:
    """Conflicting pairs within jobs[lo:hi]."""
    index = {name: i for i, name in enumerate(jobs)}
    pairs = [
        tuple(sorted(index[a] for a in pair))
        for pair in conflicts
        if len(pair) == 2 and all(a in index for a in pair)
    ]

    def clash(lo: int, hi: int) -> int:
        return sum(1 for a, b in pairs if lo <= a and b < hi)

    return clash


def sharing(links_of: Mapping[str, set[tuple[int, int]]]) -> set[frozenset[str]]:
    """Pairs of jobs whose paths cross a common directed link."""
    names = sorted(links_of)
    return {
        frozenset((a, b))
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if links_of[a] & links_of[b]
    }
