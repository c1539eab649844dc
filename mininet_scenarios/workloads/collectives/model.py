"""The numbers of a collective, without a network: nccl-tests' bus bandwidth and rank orders.

Bandwidth convention (nccl-tests, ``doc/PERFORMANCE.md``), with ``S`` the *per-rank buffer*
in bytes (the worker's ``--mib``), ``t`` the time of one iteration and ``n`` the ranks:

* ``algbw = S / t``
* all-reduce: ``busbw = algbw * 2(n-1)/n``; all-gather (``S`` = the gathered output, each
  rank contributing ``S/n``) and all-to-all (``S`` = the send buffer, ``S/n`` to each rank):
  ``busbw = algbw * (n-1)/n``.

So busbw is what every rank had to put on (and take off) its own link per second, which an
ideal fabric caps at the link rate: ``busbw / link rate`` is the figure of merit, at most
:func:`tcp_ceiling` (0.956 of an HTB-shaped rate at MTU 1500). ``t`` of an iteration is the
*slowest* rank's (a barrier precedes each iteration, so the ranks start together); figures
are Mbit/s (10^6 bit/s) and a run reports the median over its timed iterations.

Ring direction: gloo's ring all-reduce (``gloo/allreduce.cc``) receives from rank+1 and
sends to rank-1, so data flows ``rank i -> i-1`` (Loom's ``ring_direction: backward``);
its ring all-gather (``gloo/allgather.cc``) sends to rank+1 (``forward``).
:func:`ring_direction_seen` reads the real direction from the bytes each rank's TCP
connections sent.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import networkx as nx

from topologies.graph import host_list

OPS = ("all_reduce", "all_gather", "all_to_all")


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
