"""Collective jobs: who talks to whom, on which paths, in which traffic class.

A job is a set of hosts in rank order and a collective pattern. A ring (all-reduce,
all-gather, reduce-scatter) moves in lock-step, so it runs at the speed of its most
loaded hop: Loom places every hop ``rank -> next rank`` with ``controller.te.place``
so that no link carries two hops of the job in the same direction wherever the fabric
allows, with the hops of jobs placed earlier counted as load. An all-to-all (the MoE
pattern) sends between every pair; its pairs are spread over all paths the same way.
Job traffic is identified by host pair (IPv4 source and destination, any protocol),
marked with its class's DSCP at the ingress, and counted under a per-job cookie.
"""

from __future__ import annotations

import ipaddress
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.compiler import Plan
from controller.model import (
    ETH_TYPE_IPV4,
    CookieKind,
    FlowRule,
    Match,
    MatchValue,
    Output,
    SwitchRules,
    Table,
    make_cookie,
)
from controller.qos import CLASSES, ack_marks, mark
from controller.routing import Routes
from controller.te import Demand, Link, Path, minimal_paths, place
from controller.topology import Topology
from controller.vocabulary import DIRECTIONS, NAME_RE, PATTERNS

PRIO_JOB = 200  # above tracked flows (100): a job's pairs are placed, not re-pinned by TE
Pair = tuple[str, str]  # (source IPv4, destination IPv4)


class JobError(ValueError):
    """An invalid job request; ``field`` names the offending key, ``conflict`` marks a
    request that is valid but clashes with a job that exists."""

    def __init__(self, field_name: str, message: str, conflict: bool = False) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.conflict = conflict


@dataclass(frozen=True)
class JobSpec:
    name: str
    tenant: str
    hosts: tuple[str, ...]  # IPv4 addresses in rank order
    pattern: str = "ring"
    traffic_class: str = "collective"
    ring_direction: str = "forward"  # forward: rank i -> i+1 (NCCL); backward: i -> i-1 (gloo)

    @property
    def ident(self) -> int:
        return zlib.crc32(self.name.encode())

    def pairs(self) -> list[tuple[Pair, float]]:
        """Every (src, dst) the job sends on, with its share of a link at full speed."""
        n, h = len(self.hosts), self.hosts
        if self.pattern == "all_to_all":
            return [((a, b), 1.0 / (n - 1)) for a in h for b in h if a != b]
        steps = {"forward": (1,), "backward": (-1,), "both": (1, -1)}[self.ring_direction]
        out: dict[Pair, float] = {}
        for step in steps:
            for i in range(n):
                out[(h[i], h[(i + step) % n])] = 1.0
        return sorted(out.items())

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tenant": self.tenant,
            "hosts": list(self.hosts),
            "pattern": self.pattern,
            "traffic_class": self.traffic_class,
            "ring_direction": self.ring_direction,
        }


ALLOWED_KEYS = ("name", "tenant", "hosts", "pattern", "traffic_class", "ring_direction")
MAX_RANKS = 4096  # a ring: one pair per rank
MAX_ALL_TO_ALL_RANKS = 256  # an all-to-all: n(n-1) pairs, 65,280 at this size


def brief(value: object, limit: int = 60) -> str:
    """``repr`` of a request's value, cut short: it is echoed in an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_job(data: Any) -> JobSpec:
    """Validate a job request; errors name the key and say what was expected."""
    if not isinstance(data, Mapping):
        raise JobError("body", "expected a JSON object with name, tenant and hosts")
    unknown = sorted(str(k) for k in set(data) - set(ALLOWED_KEYS))
    if unknown:
        raise JobError(unknown[0][:64], f"unknown key; expected one of {', '.join(ALLOWED_KEYS)}")
    name = _name(data, "name", required=True)
    pattern = _string(data, "pattern", default="ring")
    if pattern not in PATTERNS:
        raise JobError(
            "pattern",
            f"{brief(pattern)} is not a pattern; expected one of {', '.join(sorted(PATTERNS))}",
        )
    hosts = _hosts(data.get("hosts"), PATTERNS[pattern])
    tclass = _string(data, "traffic_class", default="collective")
    if tclass not in CLASSES:
        raise JobError("traffic_class", f"{brief(tclass)}; expected one of {', '.join(CLASSES)}")
    direction = _string(data, "ring_direction", default="forward")
    if direction not in DIRECTIONS:
        raise JobError(
            "ring_direction", f"{brief(direction)}; expected one of {', '.join(DIRECTIONS)}"
        )
    return JobSpec(
        name, _name(data, "tenant", default="default"), hosts, PATTERNS[pattern], tclass, direction
    )


def _hosts(hosts: Any, pattern: str) -> tuple[str, ...]:
    limit = MAX_ALL_TO_ALL_RANKS if pattern == "all_to_all" else MAX_RANKS
    if not isinstance(hosts, list) or not 2 <= len(hosts) <= limit:
        raise JobError(
            "hosts",
            f"expected a list of 2 to {limit} host IPv4 addresses in rank order"
            + (f" ({pattern})" if isinstance(hosts, list) and len(hosts) > limit else ""),
        )
    for i, ip in enumerate(hosts):
        try:
            if not isinstance(ip, str) or ipaddress.ip_address(ip).version != 4:
                raise ValueError
        except ValueError:
            raise JobError(f"hosts[{i}]", f"{brief(ip)} is not an IPv4 address") from None
    seen: set[str] = set()
    for ip in hosts:
        if ip in seen:
            raise JobError("hosts", f"{ip} appears more than once; one rank per host")
        seen.add(ip)
    return tuple(hosts)


def _name(data: Mapping[str, Any], key: str, required: bool = False, default: str = "") -> str:
    value = _string(data, key, required, default)
    if not NAME_RE.fullmatch(value):
        what = "job name" if key == "name" else f"{key} name"
        raise JobError(
            key,
            f"{brief(value)} is not a {what}: 1-64 of a-z 0-9 . _ -, starting "
            "and ending with a letter or digit",
        )
    return value


def _string(data: Mapping[str, Any], key: str, required: bool = False, default: str = "") -> str:
    value = data.get(key, None if required else default)
    if not isinstance(value, str) or not value:
        raise JobError(key, "expected a non-empty string" + (" (required)" if required else ""))
    return value


# ---------------------------------------------------------------------------
# Placement and rules
# ---------------------------------------------------------------------------


@dataclass
class JobState:
    spec: JobSpec
    order: int
    paths: dict[Pair, Path] = field(default_factory=dict)
    rates: dict[Pair, float] = field(default_factory=dict)
    missing: tuple[str, ...] = ()  # host IPs not learned yet
    max_utilization: float = 0.0
    bytes_by_rule: dict[tuple[int, Match], int] = field(default_factory=dict)
    source: str = "api"  # or "policy": declared in the policy file, managed by reloads

    @property
    def placed(self) -> bool:
        return not self.missing and bool(self.paths)

    @property
    def bytes(self) -> int:
        return sum(self.bytes_by_rule.values())

    def link_load(self) -> dict[Link, float]:
        load: dict[Link, float] = {}
        for pair, path in self.paths.items():
            for link in path:
                load[link] = load.get(link, 0.0) + self.rates[pair]
        return load


def place_job(
    job: JobState,
    topo: Topology,
    routes: Routes,
    capacity: Callable[[Link], float],
    load: Mapping[Link, float],
) -> None:
    """Choose a path for every pair of ``job`` given the ``load`` of earlier jobs."""
    hosts = {ip: topo.host_by_ip(ip) for ip in job.spec.hosts}
    job.missing = tuple(ip for ip, h in hosts.items() if h is None)
    job.paths, job.rates = {}, {}
    if job.missing:
        return
    demands = []
    for (a, b), share in job.spec.pairs():
        src, dst = hosts[a], hosts[b]
        assert src is not None and dst is not None
        cands = tuple(minimal_paths(routes, src.dpid, dst.dpid, 16))
        if cands:
            rate = share * capacity((src.dpid, src.port))
            job.rates[(a, b)] = rate
            demands.append(Demand((a, b), rate, cands))
    links = {(u, k) for u, _, k in routes.graph.edges(keys=True)}
    placement = place(demands, {link: capacity(link) for link in links}, load)
    job.paths = {pair: placement.paths[pair] for pair in job.rates if pair in placement.paths}
    job.max_utilization = placement.max_utilization


def job_plan(job: JobState, topo: Topology, routes: Routes, qos: bool) -> Plan:
    """Rules for a placed job: mark and steer at each sender's ingress, pin in transit.
    The reverse direction of a pair that only one side sends on carries its ACKs: they go
    in the control class, ahead of data, or a hop's ACKs would wait behind the queue of
    another hop's data (and of bulk traffic) and stall the lock-step ring."""
    spec = job.spec
    cookie = make_cookie(CookieKind.JOB, spec.ident)
    marks = mark(CLASSES[spec.traffic_class], qos)
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
        if (b, a) not in senders and acks:
            back = Match.of(in_port=dst.port, eth_type=ETH_TYPE_IPV4, ipv4_src=b, ipv4_dst=a)
            add(
                dst.dpid,
                FlowRule(Table.PIN, PRIO_JOB, back, acks, goto=Table.ROUTE, cookie=cookie),
            )
    return plan


def describe(job: JobState, topo: Topology, names: Callable[[int], str]) -> dict[str, Any]:
    """A job as the API shows it: spec, status, every pair's path (switch names), bytes."""
    peer = {(u, k): v for u, v, k in topo.graph().edges(keys=True)}
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
    }


def _some(items: tuple[str, ...], shown: int = 8) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more
