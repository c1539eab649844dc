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
from controller.model import PortRef
from controller.placement import Path


@dataclass(frozen=True)
class JobHealth:
    busbw_bps: float
    limiting_link: PortRef | None  # the source port of the busiest link the job crosses
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


def job_links(job: JobState, access: Callable[[str], PortRef | None]) -> set[PortRef]:
    """Every directed link the job's pairs cross, with each receiver's own link."""
    links = {hop for path in job.paths.values() for hop in path}
    for _src, dst in job.paths:
        port = access(dst)
        if port is not None:
            links.add(port)
    return links


def health(
    jobs: Iterable[JobState],
    access: Callable[[str], PortRef | None],
    utilization: Callable[[PortRef], float],
    pinned: Iterable[Path],
) -> dict[str, JobHealth]:
    """Every job's health at once: each job's links are gathered once and the pinned
    flows scanned once, so a scrape costs the jobs' pairs plus the flows, not their
    product (one job's health beside every other's, per job, grew as jobs squared)."""
    jobs = list(jobs)
    links = {j.spec.name: job_links(j, access) for j in jobs}
    on_link: dict[PortRef, list[str]] = {}
    for name, mine in links.items():
        for link in mine:
            on_link.setdefault(link, []).append(name)
    worst = {n: max(sorted(mine), key=utilization) for n, mine in links.items() if mine}
    flows = dict.fromkeys(worst.values(), 0)
    for path in pinned:
        for link in set(path) & flows.keys():
            flows[link] += 1
    out = {}
    for j in jobs:
        name = j.spec.name
        rates = list(rank_rates(j).values())
        busbw = statistics.median(rates) if rates else 0.0
        limit = worst.get(name)
        if limit is None:
            out[name] = JobHealth(busbw, None, 0.0, (), 0)
            continue
        sharing = tuple(sorted(n for n in on_link[limit] if n != name))
        out[name] = JobHealth(busbw, limit, utilization(limit), sharing, flows[limit])
    return out
