"""A max-min fair flow model of a fabric: what every flow, job and link gets in steady state.

Input: flows, each a path (a sequence of directed links) and an optional group (a job);
link capacities. Output: each flow's rate, each group's rate, every link's load and
utilisation, and the link that bottlenecks each group and flow.

Why coupled groups: a ring collective runs in lock-step (each step waits for every hop),
so all flows of a ring job move at the speed of its slowest hop; the model gives them one
rate. An all-to-all job is treated the same way: its iteration ends when its last pair
does, and for one job alone the coupled rate ``c / m`` (``m`` pairs of the job on its
most loaded link) gives exactly that link's bytes ÷ its capacity, the makespan of a
work-conserving link; the bytes other pairs could send faster elsewhere do not shorten
the iteration. Free flows (``group=None``, bulk traffic) each get a rate of their own.

Progressive filling, per flow (TCP shares a link per flow, not per job): every unfrozen
group and free flow rises at the same per-flow rate; a link saturates when the flows
crossing it fill it; every group and flow crossing a saturated link is frozen at that
rate. The result is max-min fair: no link is over capacity, and every group and flow
crosses a saturated link on which no one gets a higher per-flow rate.

Bus bandwidth (nccl-tests, see ``mininet_scenarios.workloads.collectives.model``), with
``r`` the per-flow rate: a ring all-reduce sends ``S·2(n-1)/n`` on every hop at ``r``,
so ``busbw = r``; an all-to-all sends ``S/n`` on each of its ``n(n-1)`` pairs at ``r``,
so ``t = S/(n·r)`` and ``busbw = S/t·(n-1)/n = r·(n-1)``: the rate each rank puts on its
own link. Both divided by the link rate give the benchmark's figure busbw ÷ link.

Ignored: TCP dynamics (slow start, losses, incast), queueing delay, the protocol ceiling
(scale by ``tcp_ceiling`` to compare with the emulation), and flows finishing at
different times within a step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import sparse

Floats = npt.NDArray[np.float64]
LinkId = str  # a directed link's id
REL_TOL = 1e-9  # a link whose fill level is within this of the lowest saturates with it


@dataclass(frozen=True)
class Flow:
    """One flow: the directed links it crosses, in order, and its job (``None``: free)."""

    path: tuple[LinkId, ...]
    group: str | None = None


@dataclass
class Solution:
    """Rates per flow and per group (per-flow rate of the group's flows), link loads and
    utilisation, and per group / free flow (index) the link that froze it."""

    flow_rate: list[float]
    group_rate: dict[str, float]
    load: dict[LinkId, float]
    utilisation: dict[LinkId, float]
    group_bottleneck: dict[str, LinkId]
    flow_bottleneck: dict[int, LinkId]  # free flows only, by index

    def saturated(self, tol: float = 1e-6) -> set[LinkId]:
        return {link for link, u in self.utilisation.items() if u >= 1.0 - tol}


def busbw(pattern: str, ranks: int, rate: float) -> float:
    """A job's bus bandwidth from its per-flow rate (see the module docstring)."""
    if pattern == "all_to_all":
        return rate * (ranks - 1)
    if pattern == "ring":
        return rate
    raise ValueError(f"unknown pattern {pattern!r}; expected ring or all_to_all")


def max_min(flows: Sequence[Flow], capacity: Mapping[LinkId, float]) -> Solution:
    """Coupled max-min fair rates of ``flows`` over links of ``capacity``."""
    links = sorted({link for f in flows for link in f.path})
    missing = [link for link in links if link not in capacity]
    if missing:
        raise ValueError(f"no capacity for link {missing[0]!r}")
    col = {link: i for i, link in enumerate(links)}
    cap = np.array([float(capacity[link]) for link in links])
    if (cap <= 0).any():
        raise ValueError("every capacity must be positive")
    # Entities: one per group (in first-seen order), one per free flow.
    entity_of: list[int] = []
    names: list[str | int] = []
    seen: dict[str, int] = {}
    for i, f in enumerate(flows):
        if not f.path:
            raise ValueError(f"flow {i} crosses no link: its rate would be unbounded")
        if f.group is None:
            entity_of.append(len(names))
            names.append(i)
        else:
            if f.group not in seen:
                seen[f.group] = len(names)
                names.append(f.group)
            entity_of.append(seen[f.group])
    rows = [entity_of[i] for i, f in enumerate(flows) for _ in f.path]
    cols = [col[link] for f in flows for link in f.path]
    # flows of an entity on a link (duplicates add up)
    count = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(names), len(links)))
    rate, neck = _fill(count, cap)
    per_flow = [float(rate[e]) for e in entity_of]
    load_arr = count.T @ rate
    load = {link: float(load_arr[col[link]]) for link in links}
    util = {link: load[link] / float(capacity[link]) for link in links}
    bottleneck = [links[i] for i in neck]
    groups = {n: float(rate[e]) for e, n in enumerate(names) if isinstance(n, str)}
    return Solution(
        per_flow,
        groups,
        load,
        util,
        {n: bottleneck[e] for e, n in enumerate(names) if isinstance(n, str)},
        {n: bottleneck[e] for e, n in enumerate(names) if isinstance(n, int)},
    )


def _fill(count: Any, cap: Floats) -> tuple[Floats, list[int]]:
    """Progressive filling: per-entity rate, ``count[e, l]`` flows of entity e on link l;
    and per entity the link that froze it (of the links that saturated then, the one
    carrying most of its flows; ties: the first in link order)."""
    by_link = count.T.tocsr()
    rate = np.zeros(count.shape[0])
    neck = [-1] * count.shape[0]
    frozen = np.zeros(count.shape[0], dtype=bool)
    fixed_load = np.zeros(cap.shape)
    while not frozen.all():
        weight = by_link @ (~frozen).astype(float)
        live = weight > 0
        level = np.full(cap.shape, np.inf)
        level[live] = (cap[live] - fixed_load[live]) / weight[live]
        lowest = max(float(level.min()), 0.0)
        full = level <= lowest * (1 + REL_TOL) + 1e-15
        hit = (~frozen) & ((count @ full.astype(float)) > 0)
        rate[hit] = lowest
        frozen |= hit
        fixed_load += by_link @ np.where(hit, rate, 0.0)
        for e in np.flatnonzero(hit):
            row = count.getrow(int(e))
            order = np.argsort(row.indices, kind="stable")
            idx, n = row.indices[order], row.data[order]
            on = full[idx]
            neck[int(e)] = int(idx[on][int(np.argmax(n[on]))])
    return rate, neck
