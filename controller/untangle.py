"""Jobs placed together: where placing jobs one after another leaves a link carrying more
than it can, all jobs' pairs are placed again in one search.

Jobs are placed in booking order, each on the load of those before it, so a job never
moves because another arrived. But an early job may sit on the links a later one has no
way around: on a k=4 fat-tree, four 4-rank rings placed one by one leave three of them
sharing a link at half speed, while the fabric can carry all four at full speed. So when
a link is over capacity after the one-by-one pass, every job's pairs are placed again
together, each starting from where it is (``controller.placement.place`` keeps a pair
where it is unless moving it lowers the worst link). The result is taken only if no job
ends with a worse bottleneck than it had: a running job moves only when that helps the
fabric and costs it nothing. Its packets are not lost while it moves: a pin is never
needed for delivery (the default routes under the pins are shortest paths), so a packet
that meets a pin not yet in place, or one already gone, takes the default route to its
destination.

Whether a link is over capacity is judged on the rates pairs would send at. Where the
fabric cannot give every pair a link of its own, the search weighs each pair by its job's
``weight`` over the heaviest job's: a link of one pair of weight 2 balances a link of two
pairs of weight 1, and as TCP shares a link per connection, the jobs' pairs then get
shares in proportion to their weights. With equal weights, nothing changes.

On a Clos fabric the search starts from an edge colouring (``controller.clos``), which
routes the rings of many jobs (together a permutation) with one pair per link where a
search over paths finds that only on small fabrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import cast

from controller.clos import Far, from_colouring
from controller.collectives import JobState
from controller.jobspec import Pair
from controller.model import PortRef
from controller.placement import Demand, place

FULL = 1.05  # a link within 5 % of its capacity is full, not over (measured, not exact)
# Beyond this many pairs, jobs are placed one by one only. At k=32, every host in a ring
# (8,192 hops), a registration placed together costs up to 2.5 s of core time (colouring
# 0.5 s, the rules of the jobs it moved), one by one 0.5 s at half the speed; k=48's
# 27,648 would cost more than a registration should hold the core for.
JOINT_MAX_DEMANDS = 8192
SEARCH_BUDGET = 1_000_000  # paths the exact search weighs (~1.5 s of core time at most)


def bottlenecks(
    jobs: Iterable[JobState], capacity: Callable[[PortRef], float], weighed: bool = True
) -> dict[str, float]:
    """Each job's worst link utilisation under the load of every job (pairs weighed by
    their jobs' claims, or at the rates they would send at)."""
    loads = {j.spec.name: j.link_load(weighed) for j in jobs}
    total: dict[PortRef, float] = {}
    for mine in loads.values():
        for link, rate in mine.items():
            total[link] = total.get(link, 0.0) + rate
    util = {}  # each link's once (a capacity lookup is not free)
    for link, rate in total.items():
        cap = capacity(link)
        util[link] = rate / cap if cap > 0 else 0.0
    return {name: max((util[link] for link in mine), default=0.0) for name, mine in loads.items()}


def untangle(
    jobs: list[JobState],
    capacity: Callable[[PortRef], float],
    far: Far | None = None,
    leaves: Iterable[int] = (),
) -> set[str]:
    """Place every job's pairs together when a link is over capacity; the names of the
    jobs whose paths changed (their rules must be rebuilt). ``far``: each switch's ports
    and the switches at their far ends, for the edge colouring."""
    placed = [j for j in jobs if j.placed]
    if max(bottlenecks(placed, capacity, weighed=False).values(), default=0.0) <= FULL:
        return set()  # nothing over capacity: nothing to untangle (the usual case)
    before = bottlenecks(placed, capacity)
    demands = [
        Demand((j.spec.name, pair), j.rates[pair], j.candidates[pair], current=path)
        for j in placed
        for pair, path in sorted(j.paths.items())
        if pair in j.candidates
    ]
    if len(demands) > JOINT_MAX_DEMANDS:
        return set()
    if far is not None:
        demands = from_colouring(demands, far, leaves) or demands
    paths = {d.key: d.current for d in demands if d.current is not None}
    if _worst(demands, capacity) > FULL:  # the colouring (if any) leaves a link over
        links = sorted({link for d in demands for path in d.candidates for link in path})
        caps = {link: capacity(link) for link in links}
        claim = {j.spec.name: j.claim for j in placed}
        weighed = [replace(d, rate=d.rate * claim[_job(d)]) for d in demands]
        paths = place(weighed, caps, search_budget=SEARCH_BUDGET).paths
    old = {j.spec.name: dict(j.paths) for j in placed}
    by_name = {j.spec.name: j for j in placed}
    old_candidates = {j.spec.name: dict(j.candidates) for j in placed}
    known = {d.key: d.candidates for d in demands}
    for key, path in paths.items():
        name, pair = cast(tuple[str, Pair], key)
        by_name[name].paths[pair] = path
        by_name[name].candidates[pair] = known[key]
    after = bottlenecks(placed, capacity)
    if any(after[n] > before[n] + 1e-9 for n in before):  # someone would lose: keep as was
        for j in placed:
            j.paths, j.candidates = old[j.spec.name], old_candidates[j.spec.name]
        return set()
    for j in placed:
        j.max_utilization = after[j.spec.name]
    return {j.spec.name for j in placed if j.paths != old[j.spec.name]}


def _job(d: Demand) -> str:
    return cast(tuple[str, Pair], d.key)[0]


def _worst(demands: list[Demand], capacity: Callable[[PortRef], float]) -> float:
    """The busiest link's utilisation with every demand on its current path."""
    load: dict[PortRef, float] = {}
    for d in demands:
        for link in d.current or ():
            load[link] = load.get(link, 0.0) + d.rate
    return max(
        (rate / capacity(link) for link, rate in load.items() if capacity(link) > 0), default=0.0
    )
