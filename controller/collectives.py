"""Collective jobs: who talks to whom, on which paths, in which traffic class.

A job is a set of hosts in rank order and a collective pattern. A ring (all-reduce,
all-gather, reduce-scatter) moves in lock-step, so it runs at the speed of its most
loaded hop: Loom places every hop ``rank -> next rank`` with ``controller.placement.place``
so that no link carries two hops of the job in the same direction wherever the fabric
allows, with the hops of jobs placed earlier counted as load. An all-to-all (the MoE
pattern) sends between every pair; its pairs are spread over all paths the same way.
Job traffic is identified by host pair (IPv4 source and destination, any protocol),
marked with its class's DSCP at the ingress, and counted under a per-job cookie.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.jobspec import JobSpec, Pair
from controller.model import (
    ETH_TYPE_IPV4,
    Action,
    CookieKind,
    FlowRule,
    Match,
    MatchValue,
    Output,
    SwitchRules,
    Table,
    make_cookie,
)
from controller.owners import Plan
from controller.placement import Demand, Link, Path, minimal_paths, place, reverse_path
from controller.qos import CLASSES, COLLECTIVE, TrafficClass, ack_marks, mark
from controller.routing import Routes
from controller.topology import Host, Topology

PRIO_JOB = 200  # above tracked flows (100): a job's pairs are placed, not re-pinned by TE


# ---------------------------------------------------------------------------
# Placement and rules
# ---------------------------------------------------------------------------


@dataclass
class JobState:
    spec: JobSpec
    order: int
    paths: dict[Pair, Path] = field(default_factory=dict)
    rates: dict[Pair, float] = field(default_factory=dict)
    candidates: dict[Pair, tuple[Path, ...]] = field(default_factory=dict)
    missing: tuple[str, ...] = ()  # host IPs not learned yet
    max_utilization: float = 0.0
    bytes_by_rule: dict[tuple[int, Match], int] = field(default_factory=dict)
    counted_at: dict[tuple[int, Match], float] = field(default_factory=dict)
    sending: dict[Pair, float] = field(default_factory=dict)  # bit/s in the last interval
    source: str = "api"  # or "policy": declared in the policy file, managed by reloads
    level: int = 0  # its collective queue, by priority (controller.priorities)
    claim: float = 1.0  # its weight over the heaviest booked job's: what its pairs weigh
    lease: float | None = None  # seconds a renewal buys; None: kept until deleted
    expires: float | None = None  # core clock

    @property
    def placed(self) -> bool:
        return not self.missing and bool(self.paths)

    @property
    def bytes(self) -> int:
        return sum(self.bytes_by_rule.values())

    def link_load(self, weighed: bool = True) -> dict[Link, float]:
        """What the job's pairs put on each link: weighed by its ``claim`` (what placement
        balances) or as the rates they would send at (what a link can carry)."""
        scale = self.claim if weighed else 1.0
        load: dict[Link, float] = {}
        for pair, path in self.paths.items():
            for link in path:
                load[link] = load.get(link, 0.0) + self.rates[pair] * scale
        return load


def place_job(
    job: JobState,
    topo: Topology,
    routes: Routes,
    capacity: Callable[[Link], float],
    load: Mapping[Link, float],
    server_of: Mapping[str, str] | None = None,
) -> None:
    """Choose a path for every pair of ``job`` given the ``load`` of earlier jobs. A pair
    weighs its rate times the job's ``claim``: where pairs must share a link, those of a
    heavier job get fewer neighbours, and TCP shares a link per connection. Pairs of
    NICs of one server (``server_of``) get none: they talk inside the server."""
    hosts = {ip: topo.host_by_ip(ip) for ip in job.spec.hosts}
    job.missing = tuple(ip for ip, h in hosts.items() if h is None)
    job.paths, job.rates, job.candidates = {}, {}, {}
    if job.missing:
        return
    inside = server_of or {}
    demands = []
    for (a, b), share in job.spec.pairs():
        if a in inside and inside[a] == inside.get(b):
            continue
        src, dst = hosts[a], hosts[b]
        assert src is not None and dst is not None
        cands = tuple(minimal_paths(routes, src.dpid, dst.dpid, 16))
        if cands:
            rate = share * capacity((src.dpid, src.port))
            job.rates[(a, b)] = rate
            job.candidates[(a, b)] = cands
            demands.append(Demand((a, b), rate * job.claim, cands))
    live = routes.peer()  # (only the links a candidate crosses are weighed: not 110,592)
    links = {link for d in demands for path in d.candidates for link in path if link in live}
    around = {link: load[link] for link in links if link in load}  # elsewhere: not weighed
    placement = place(demands, {link: capacity(link) for link in sorted(links)}, around)
    job.paths = {pair: placement.paths[pair] for pair in job.rates if pair in placement.paths}
    job.max_utilization = placement.max_utilization


def job_plan(
    job: JobState,
    topo: Topology,
    routes: Routes,
    qos: bool,
    collective: TrafficClass = COLLECTIVE,
) -> Plan:
    """Rules for a placed job: mark and steer at each sender's ingress, pin in transit.
    The reverse direction of a pair that only one side sends on carries its ACKs: they go
    the way back of the pair's path and in the control class, ahead of data, or a hop's
    ACKs would wait behind the queue of another hop's data (and of bulk traffic) and
    stall the lock-step ring."""
    spec = job.spec
    cookie = make_cookie(CookieKind.JOB, spec.ident)
    tc = collective if spec.traffic_class == COLLECTIVE.name else CLASSES[spec.traffic_class]
    marks = mark(tc, qos)
    acks = ack_marks(qos)
    plan: Plan = {}

    def add(dpid: int, rule: FlowRule) -> None:
        plan.setdefault(dpid, SwitchRules()).add_flow(rule)

    senders = set(job.paths)
    for (a, b), path in sorted(job.paths.items()):
        src, dst = topo.host_by_ip(a), topo.host_by_ip(b)
        if src is None or dst is None:
            continue
        pair: dict[str, MatchValue] = {"eth_type": ETH_TYPE_IPV4, "ipv4_src": a, "ipv4_dst": b}
        first = Match.of(in_port=src.port, **pair)
        if path:
            add(
                src.dpid,
                FlowRule(Table.PIN, PRIO_JOB, first, (*marks, Output(path[0][1])), cookie=cookie),
            )
        else:
            add(
                src.dpid,
                FlowRule(Table.PIN, PRIO_JOB, first, marks, goto=Table.ROUTE, cookie=cookie),
            )
        for dpid, port in path[1:]:
            if routes.next_ports(dpid, dst.dpid) != (port,):
                add(
                    dpid,
                    FlowRule(Table.PIN, PRIO_JOB, Match.of(**pair), (Output(port),), cookie=cookie),
                )
        if (b, a) not in senders:
            for dpid, rule in _way_back(pair, path, src.dpid, dst, routes, acks, cookie):
                add(dpid, rule)
    return plan


def _way_back(
    pair: dict[str, MatchValue],
    path: Path,
    src_dpid: int,
    dst: Host,
    routes: Routes,
    acks: tuple[Action, ...],
    cookie: int,
) -> list[tuple[int, FlowRule]]:
    """The reverse direction of a pair only one side sends on (its ACKs): on the way back
    of the pair's path, so a link carries the ACKs of the one hop whose data crosses it
    the other way and no more (as a host's own link does); marked ``acks`` where there
    are queues."""
    back: dict[str, MatchValue] = {
        "eth_type": ETH_TYPE_IPV4,
        "ipv4_src": pair["ipv4_dst"],
        "ipv4_dst": pair["ipv4_src"],
    }
    at_dst = Match.of(in_port=dst.port, **back)
    way = reverse_path(routes, path) if path else None
    if not way:
        if not acks:
            return []
        return [
            (dst.dpid, FlowRule(Table.PIN, PRIO_JOB, at_dst, acks, goto=Table.ROUTE, cookie=cookie))
        ]
    rules = [
        (dst.dpid, FlowRule(Table.PIN, PRIO_JOB, at_dst, (*acks, Output(way[0][1])), cookie=cookie))
    ]
    for dpid, port in way[1:]:
        if routes.next_ports(dpid, src_dpid) != (port,):
            rules.append(
                (
                    dpid,
                    FlowRule(Table.PIN, PRIO_JOB, Match.of(**back), (Output(port),), cookie=cookie),
                )
            )
    return rules


def describe(job: JobState, topo: Topology, names: Callable[[int], str]) -> dict[str, Any]:
    """A job as the API shows it: spec, status, every pair's path (switch names), bytes."""
    peer = {(u, k): v for u, v, k in topo.snapshot().edges(keys=True)}
    paths = []
    for (a, b), path in sorted(job.paths.items()):
        src = topo.host_by_ip(a)
        hops = [names(src.dpid)] if src else []
        hops += [names(peer[link]) for link in path if link in peer]
        paths.append({"src": a, "dst": b, "switches": hops})
    status = (
        "active"
        if job.placed
        else (f"waiting for hosts {_some(job.missing)}" if job.missing else "unroutable")
    )
    return {
        **job.spec.as_dict(),
        "status": status,
        "source": job.source,
        "paths": paths,
        "bytes": job.bytes,
        "max_link_utilization": round(job.max_utilization, 3),
        "queue_level": job.level,
    }


def _some(items: tuple[str, ...], shown: int = 8) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more
