"""How a running job fares, from what the switches count: its bus bandwidth, the link that
limits it and who it shares that link with.

A collective moves in lock-step, so every rank puts the same bytes on its link in an
iteration and the job runs at the pace of its slowest rank. Per the nccl-tests convention
a ring's or an all-to-all's bus bandwidth is the rate each rank sends at, so the estimate
is the median over ranks of what the job's ingress rules counted from that rank in the
last poll interval (0 between iterations). The limiting link is the busiest link the job's
paths cross (its receivers' own links included); its sharers are the other jobs placed on
it and the tracked flows pinned to it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from controller.collectives import JobState
from controller.placement import Link, Path


@dataclass(frozen=True)
class JobHealth:
    busbw_bps: float
    limiting_link: Link | None  # the source port of the busiest link the job crosses
    utilization: float  # that link's measured load / capacity
    sharing_jobs: tuple[str, ...]
    sharing_flows: int


def rank_rates(job: JobState) -> dict[str, float]:
    """Bits per second each rank sent in the last poll interval, by its IP."""
    out = dict.fromkeys(job.spec.hosts, 0.0)
    for (src, _dst), bps in job.sending.items():
        if src in out:
            out[src] += bps
    return out


def job_links(job: JobState, access: Callable[[str], Link | None]) -> set[Link]:
    """Every directed link the job's pairs cross, with each receiver's own link."""
    links = {hop for path in job.paths.values() for hop in path}
    for _src, dst in job.paths:
        port = access(dst)
        if port is not None:
            links.add(port)
    return links


def health(
    job: JobState,
    others: Iterable[JobState],
    access: Callable[[str], Link | None],
    utilization: Callable[[Link], float],
    pinned: Iterable[Path],
) -> JobHealth:
    rates = list(rank_rates(job).values())
    busbw = statistics.median(rates) if rates else 0.0
    links = job_links(job, access)
    if not links:
        return JobHealth(busbw, None, 0.0, (), 0)
    worst = max(sorted(links), key=utilization)
    sharing = tuple(
        sorted(
            o.spec.name
            for o in others
            if o.spec.name != job.spec.name and worst in job_links(o, access)
        )
    )
    flows = sum(1 for path in pinned if worst in path)
    return JobHealth(busbw, worst, utilization(worst), sharing, flows)
