"""The numbers of a collective, without a network: nccl-tests' bus bandwidth, rank orders,
and the results of the phases of several jobs at once (:mod:`.multijob`) from their ranks'
documents.

Bandwidth convention (nccl-tests, ``doc/PERFORMANCE.md``), with ``S`` the *per-rank buffer*
in bytes (the worker's ``--mib``), ``t`` the time of one iteration and ``n`` the ranks:

* ``algbw = S / t``
* all-reduce: ``busbw = algbw * 2(n-1)/n``; all-gather (``S`` = the gathered output, each
  rank contributing ``S/n``), reduce-scatter (``S`` = the input, each rank keeping ``S/n``
  of the sum) and all-to-all (``S`` = the send buffer, ``S/n`` to each rank):
  ``busbw = algbw * (n-1)/n``.

So busbw is what every rank had to put on (and take off) its own link per second, which an
ideal fabric caps at the link rate: ``busbw / link rate`` is the figure of merit, at most
:func:`tcp_ceiling` (0.956 of an HTB-shaped rate at MTU 1500). ``t`` of an iteration is the
*slowest* rank's (a barrier precedes each iteration, so the ranks start together); figures
are Mbit/s (10^6 bit/s) and a run reports the median over its timed iterations.

Ring direction: gloo's ring all-reduce (``gloo/allreduce.cc``) receives from rank+1 and
sends to rank-1, so data flows ``rank i -> i-1`` (Loom's ``ring_direction: backward``);
its ring all-gather (``gloo/allgather.cc``) sends to rank+1 (``forward``). torch's gloo
reduce-scatter (torch 2.13) is an all-reduce that keeps one chunk: all-reduce's ring
(``backward``) and all-reduce's bytes, ``2(n-1)/n`` of ``S`` per rank, twice what the
convention above counts, so its busbw / link is at most about 0.5 (:func:`wire_factor`
of a run shows it). :func:`ring_direction_seen` reads the real direction from the bytes
each rank's TCP connections sent.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import networkx as nx

from topologies.graph import host_list

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw for ``op`` on ``n`` ranks."""
    if n < 2:
        raise ValueError(f"need at least 2 ranks, got {n}")
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "all_to_all", "reduce_scatter"):
        return (n - 1) / n
    if op == "broadcast":
        return 1.0
    raise ValueError(f"unknown op {op!r}; expected one of {', '.join(OPS)}")


def algbw_mbps(nbytes: float, seconds: float) -> float:
    """Per-rank buffer bytes / seconds, in Mbit/s."""
    if seconds <= 0:
        raise ValueError(f"seconds must be positive, got {seconds}")
    return 8 * nbytes / seconds / 1e6


def busbw_mbps(op: str, n: int, nbytes: float, seconds: float) -> float:
    """nccl-tests bus bandwidth in Mbit/s: ``algbw * bus_factor(op, n)``."""
    return algbw_mbps(nbytes, seconds) * bus_factor(op, n)


def wire_bytes_per_rank(op: str, n: int, nbytes: float) -> float:
    """Payload bytes each rank must send (and receive) for one iteration."""
    return nbytes * bus_factor(op, n)


def wire_factor(sent: dict[tuple[str, str], int], nbytes: float, iterations: int) -> float | None:
    """Bytes the busiest rank sent per iteration over the per-rank buffer ``nbytes``, from
    bytes sent per ``(src, dst)`` pair over ``iterations`` iterations: what the algorithm
    really put on a rank's link (compare :func:`bus_factor`); None without bytes."""
    per_rank: dict[str, int] = {}
    for (src, _dst), n in sent.items():
        per_rank[src] = per_rank.get(src, 0) + n
    if not per_rank or nbytes <= 0 or iterations < 1:
        return None
    return max(per_rank.values()) / nbytes / iterations


def tcp_ceiling(mtu: int = 1500) -> float:
    """Goodput / shaped rate of one TCP flow through HTB: payload (MTU - 40 IP/TCP - 12
    timestamp option) over the frame HTB counts (MTU + 14 Ethernet)."""
    return (mtu - 52) / (mtu + 14)


def summarize(
    op: str, docs: Sequence[dict[str, Any]]
) -> tuple[list[float], list[float], list[float]]:
    """``(seconds, algbw, busbw)`` per timed iteration from the ranks' JSON documents: an
    iteration took as long as its slowest rank."""
    n = len(docs)
    iters = min(len(d["seconds"]) for d in docs)
    nbytes = docs[0]["bytes"]
    seconds = [max(d["seconds"][i] for d in docs) for i in range(iters)]
    alg = [algbw_mbps(nbytes, s) for s in seconds]
    bus = [a * bus_factor(op, n) for a in alg]
    return seconds, alg, bus


def random_order(hosts: Sequence[str], seed: int) -> list[str]:
    """``hosts`` shuffled by ``seed``: what a scheduler that ignores the topology hands out."""
    order = list(hosts)
    random.Random(seed).shuffle(order)
    return order


def deal(hosts: Sequence[str], jobs: int, ranks: int, seed: int) -> list[list[str]]:
    """``jobs`` rank orders of ``ranks`` hosts each, as a scheduler leaves them: ``hosts``
    shuffled by ``seed`` (:func:`random_order`) and dealt out like cards, host k of
    the shuffle to job k mod ``jobs``; disjoint, and every host used when
    ``jobs * ranks == len(hosts)``."""
    if jobs < 1 or ranks < 2 or jobs * ranks > len(hosts) or len(set(hosts)) != len(hosts):
        raise ValueError(f"cannot deal {jobs} jobs of {ranks} ranks from {len(hosts)} hosts")
    order = random_order(hosts, seed)[: jobs * ranks]
    return [order[j::jobs] for j in range(jobs)]


def topology_order(graph: nx.MultiGraph, hosts: Sequence[str] | None = None) -> list[str]:
    """``hosts`` (default: all) so that consecutive ranks are close: hosts of one edge switch
    together, edge switches of one pod (the graph's ``group``) together. Within each level
    the graph's host numbering decides, so the order is deterministic. A ring in this order
    crosses each edge uplink once per direction and each pod boundary once."""
    names = list(hosts) if hosts is not None else host_list(graph)

    def index(h: str) -> int:
        return int(graph.nodes[h]["index"])

    def group_of(h: str) -> tuple[str, Any]:
        d = graph.nodes[h]
        return ("group", d["group"]) if d.get("group") is not None else ("switch", d["switch"])

    first_of_switch: dict[str, int] = {}
    first_of_group: dict[tuple[str, Any], int] = {}
    for h in names:
        sw, grp = graph.nodes[h]["switch"], group_of(h)
        first_of_switch[sw] = min(first_of_switch.get(sw, index(h)), index(h))
        first_of_group[grp] = min(first_of_group.get(grp, index(h)), index(h))

    def rank_key(h: str) -> tuple[int, int, int]:
        return (first_of_group[group_of(h)], first_of_switch[graph.nodes[h]["switch"]], index(h))

    return sorted(names, key=rank_key)


def ring_pairs(order: Sequence[str], step: int) -> list[tuple[str, str]]:
    """``(rank i, rank i+step)`` for every rank: step -1 is gloo's all-reduce direction."""
    n = len(order)
    return [(order[i], order[(i + step) % n]) for i in range(n)]


def ring_direction_seen(order: Sequence[str], sent: dict[tuple[str, str], int]) -> str:
    """``forward``/``backward``/``both``/``none`` from bytes sent per ``(src, dst)`` pair
    (names or IPs, as in ``order``): a direction counts when it carried at least a quarter
    of the ring's bytes."""
    fwd = sum(sent.get(p, 0) for p in ring_pairs(order, 1))
    back = sum(sent.get(p, 0) for p in ring_pairs(order, -1))
    total = fwd + back
    if total <= 0:
        return "none"
    f, b = fwd >= total / 4, back >= total / 4
    return "both" if f and b else ("forward" if f else "backward")


# --------------------------------------------------------------------------- jobs' phases


@dataclass(frozen=True)
class JobPlan:
    """One job of a mix: its Loom name, tenant, hosts in rank order, op, rendezvous port."""

    name: str
    tenant: str
    hosts: tuple[str, ...]
    op: str = "all_reduce"
    port: int = 29500


def within(walls: Sequence[Sequence[float]], lo: float, hi: float) -> list[int]:
    """Indexes of the ``[start, end]`` spans that lie wholly inside ``[lo, hi]``."""
    return [i for i, (a, b) in enumerate(walls) if a >= lo and b <= hi]


def label_spans(
    walls: Sequence[Sequence[float]], marks: Sequence[tuple[str, float, float]], rest: str
) -> list[str]:
    """A label for each ``[start, end]`` span: the first mark ``(label, start, end)`` it
    overlaps, else the last mark's ``label + ":after"`` ending before it, else ``rest``
    (before every mark). How the churn's iterations are told apart."""
    out = []
    for a, b in walls:
        hit = next((lab for lab, lo, hi in marks if a < hi and b > lo), None)
        if hit is None:
            ended = [lab for lab, _lo, hi in marks if hi <= a]
            hit = f"{ended[-1]}:after" if ended else rest
        out.append(hit)
    return out


@dataclass
class PhaseResult:
    """One job's phase: per timed iteration its seconds (slowest rank), busbw (Mbit/s) and
    wall-clock span (earliest rank's start, latest rank's end)."""

    name: str
    tenant: str
    op: str
    hosts: list[str]
    world: int
    bytes: int
    link_mbps: float
    seconds: list[float]
    busbw_mbps: list[float]
    iter_wall: list[list[float]]
    warmup_wall: list[list[float]]
    check_ok: bool
    tcp_retrans_bytes: int  # the ranks' own connections, the whole phase (warm-up included)
    retrans_iter: list[int]  # per timed iteration, summed over ranks (if recorded)
    ring_direction: str | None
    wire_factor: float | None
    startup_s: float

    @property
    def busbw(self) -> float:
        return statistics.median(self.busbw_mbps)

    def busbw_within(self, lo: float, hi: float) -> list[float]:
        return [self.busbw_mbps[i] for i in within(self.iter_wall, lo, hi)]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "busbw_median_mbps": self.busbw}


def phase_result(
    plan: JobPlan, docs: Sequence[dict[str, Any]], phase: int, link: float, ips: Sequence[str]
) -> PhaseResult:
    """``phase`` of a finished job from its ranks' documents (``ips``: the hosts' addresses,
    in rank order, to tell the ranks' peers apart from other connections)."""
    phases = [d["phases"][phase] for d in docs]
    nbytes = int(docs[0]["bytes"])
    iters = min(len(p["seconds"]) for p in phases)
    warm = int(phases[0].get("warmup", 0))
    seconds = [max(p["seconds"][i] for p in phases) for i in range(iters)]
    walls = [
        [
            min(p["iter_wall"][warm + i][0] for p in phases),
            max(p["iter_wall"][warm + i][1] for p in phases),
        ]
        for i in range(iters)
    ]
    warmup = [
        [min(p["iter_wall"][i][0] for p in phases), max(p["iter_wall"][i][1] for p in phases)]
        for i in range(warm)
    ]
    retrans = (
        [sum(p["retrans_iter"][warm + i] for p in phases) for i in range(iters)]
        if all("retrans_iter" in p for p in phases)
        else []
    )
    by_ip = dict(zip(ips, plan.hosts, strict=True))
    sent: dict[tuple[str, str], int] = {}
    lost = 0
    for h, p in zip(plan.hosts, phases, strict=True):
        for peer, c in p.get("tcp_by_peer", {}).items():
            if peer in by_ip:
                lost += int(c.get("retrans", 0))
                if c.get("sent", 0) > 0:
                    sent[(h, by_ip[peer])] = int(c["sent"])
    return PhaseResult(
        name=plan.name,
        tenant=plan.tenant,
        op=plan.op,
        hosts=list(plan.hosts),
        world=len(docs),
        bytes=nbytes,
        link_mbps=link,
        seconds=seconds,
        busbw_mbps=[busbw_mbps(plan.op, len(docs), nbytes, s) for s in seconds],
        iter_wall=walls,
        warmup_wall=warmup,
        check_ok=all(p.get("check_ok", False) for p in phases),
        tcp_retrans_bytes=lost,
        retrans_iter=retrans,
        ring_direction=ring_direction_seen(list(plan.hosts), sent)
        if plan.op != "all_to_all"
        else None,
        wire_factor=wire_factor(sent, nbytes, warm + len(phases[0]["seconds"])),
        # torch imported and every rank joined (the barrier after joining, when run so)
        startup_s=max(
            d["import_seconds"] + d.get("joined_seconds", d["init_seconds"]) for d in docs
        ),
    )


def mix_window(mix: Sequence[PhaseResult]) -> list[float]:
    """From the last job's first iteration (warm-up included) to the first job's last end."""
    starts = [(r.warmup_wall or r.iter_wall)[0][0] for r in mix]
    return [max(starts), min(r.iter_wall[-1][1] for r in mix)]
