"""What a trace returns: hops, ends, branches, the whole trace, and a reachability report.

A packet can split two ways, and tests must tell them apart: *copies* (ALL groups, flood,
several outputs) all happen, *alternatives* (a SELECT group explored with
``explore_all=True``) are mutually exclusive possibilities. Every branch carries its
``lineage`` of forks, so a trace can be cut into ``worlds``: one per combination of
alternatives, each holding the copies that would exist together. "Unicast is correct" then
means: in every world exactly one copy, delivered to the destination.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from .actions import port_name

END_KINDS = ("delivered", "drop", "controller", "loop", "hop-limit", "local")
MAX_WORLDS = 100_000


@dataclass(frozen=True)
class End:
    """How a branch finished. ``reason`` for drops (``table-miss``, ``dead-port``, ``no-link``,
    ``no-output``, ``in-port``, ``ff-no-live-bucket``, ``select-no-live-bucket``,
    ``select-zero-weight``,
    ``ttl-expired``, ``source-link-down``, ``bad-in-port``) and controller ends (``action``
    or ``no-match`` for a table-miss entry)."""

    kind: str
    dpid: int | None = None
    switch: str | None = None
    host: str | None = None
    reason: str | None = None
    table_id: int | None = None
    packet: dict[str, object] = field(default_factory=dict, compare=False)

    def __str__(self) -> str:
        where = f" at {self.switch}(dpid {self.dpid})" if self.switch is not None else ""
        table = f" table {self.table_id}" if self.table_id is not None else ""
        host = f" {self.host}" if self.host else ""
        reason = f" [{self.reason}]" if self.reason else ""
        return f"{self.kind}{host}{where}{table}{reason}"


class _Displayable(Protocol):
    def display(self) -> dict[str, object]: ...


@dataclass(frozen=True)
class Hop:
    """One switch traversal of one branch: in at ``in_port``, out at ``out_port`` (``None``
    when the branch ended inside the switch). ``packet`` is the packet as it left (or as it
    was when the branch ended); ``groups`` lists (group_id, bucket index) taken."""

    dpid: int
    switch: str
    in_port: int
    out_port: int | None
    queue_id: int | None
    meter_ids: tuple[int, ...]
    tables: tuple[int, ...]
    cookies: tuple[int, ...]
    groups: tuple[tuple[int, int], ...]
    raw: _Displayable = field(compare=False, repr=False)

    @functools.cached_property
    def packet(self) -> dict[str, object]:
        """Converted on first use: big reachability runs build many hops nobody reads."""
        return self.raw.display()

    def __str__(self) -> str:
        extra = []
        if self.tables:
            extra.append("tables " + ",".join(map(str, self.tables)))
        if self.groups:
            extra.append("groups " + ",".join(f"{g}/b{b}" for g, b in self.groups))
        if self.meter_ids:
            extra.append("meters " + ",".join(map(str, self.meter_ids)))
        if self.queue_id is not None:
            extra.append(f"queue {self.queue_id}")
        more = f" ({'; '.join(extra)})" if extra else ""
        return f"{self.switch}[{port_name(self.in_port)}->{port_name(self.out_port)}]{more}"


@dataclass(frozen=True)
class Fork:
    """A split point: fork ``id`` of ``kind`` "copy" or "alt"; this branch took ``index``
    of ``count`` ways."""

    id: int
    kind: str
    index: int
    count: int
    where: str


@dataclass
class Branch:
    hops: list[Hop]
    end: End
    lineage: tuple[Fork, ...] = ()

    @property
    def path(self) -> list[str]:
        return [h.switch for h in self.hops]

    @property
    def is_copy(self) -> bool:
        """Did this branch come from a copy fork (it has siblings that exist with it)?"""
        return any(f.kind == "copy" for f in self.lineage)

    @property
    def alternatives(self) -> tuple[Fork, ...]:
        return tuple(f for f in self.lineage if f.kind == "alt")

    def render(self) -> str:
        forks = " ".join(f"{f.kind}{f.index + 1}/{f.count}@{f.where}" for f in self.lineage)
        hops = " -> ".join(map(str, self.hops)) or "(no hop)"
        return f"{hops} => {self.end}" + (f"   <{forks}>" if forks else "")


@dataclass
class Trace:
    src: str
    packet: dict[str, object]
    branches: list[Branch] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def delivered_hosts(self) -> set[str]:
        return {b.end.host for b in self.branches if b.end.kind == "delivered" and b.end.host}

    @property
    def paths(self) -> list[list[str]]:
        return [b.path for b in self.branches]

    @property
    def ends(self) -> list[End]:
        return [b.end for b in self.branches]

    def by_kind(self, kind: str) -> list[Branch]:
        if kind not in END_KINDS:
            raise ValueError(f"unknown end kind {kind!r}")
        return [b for b in self.branches if b.end.kind == kind]

    def ok_unicast(self, dst: str) -> bool:
        """Every branch delivers to ``dst``, none is a copy (no duplicates, no stray copies
        dropped elsewhere) and no warning (e.g. an undefined priority tie) was raised."""
        return (
            bool(self.branches)
            and not self.warnings
            and all(
                b.end.kind == "delivered" and b.end.host == dst and not b.is_copy
                for b in self.branches
            )
        )

    def worlds(self) -> list[list[Branch]]:
        """The branches that exist together, one list per combination of alternatives."""
        if not self.branches:
            return []
        return _worlds(self.branches, 0)

    def ok_multicast(self, dsts: Iterable[str], allow_drops: bool = False) -> bool:
        """In every world each of ``dsts`` gets exactly one copy and no other host any; no
        loops or controller copies; drops only if ``allow_drops``; no warnings."""
        want = sorted(dsts)
        if self.warnings or not self.branches:
            return False
        for world in self.worlds():
            got = sorted(b.end.host or "" for b in world if b.end.kind == "delivered")
            others = [b for b in world if b.end.kind != "delivered"]
            if got != want or any(not (allow_drops and b.end.kind == "drop") for b in others):
                return False
        return True

    def render(self) -> str:
        lines = [f"trace from {self.src}: {_packet_text(self.packet)}"]
        for i, b in enumerate(self.branches, 1):
            lines.append(f"  #{i} {b.render()}")
            if b.end.packet and b.end.packet != self.packet:
                lines.append(f"      final packet: {_packet_text(b.end.packet)}")
        lines += [f"  WARNING: {w}" for w in self.warnings]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    __str__ = render


def _packet_text(pkt: dict[str, object]) -> str:
    return " ".join(f"{k}={v:#x}" if k == "eth_type" else f"{k}={v}" for k, v in pkt.items())


def _worlds(branches: list[Branch], depth: int) -> list[list[Branch]]:
    """Branches share lineage[:depth]; split them at the fork each has at ``depth``."""
    if len(branches) == 1 and len(branches[0].lineage) == depth:
        return [branches]
    groups: dict[int, list[Branch]] = {}
    fork = branches[0].lineage[depth]
    for b in branches:
        groups.setdefault(b.lineage[depth].index, []).append(b)
    parts = [_worlds(groups[i], depth + 1) for i in sorted(groups)]
    if fork.kind == "alt":
        return [w for part in parts for w in part]
    total = 1
    for part in parts:
        total *= len(part)
    if total > MAX_WORLDS:
        raise RuntimeError(f"more than {MAX_WORLDS} worlds at fork {fork.where}")
    return [[b for w in combo for b in w] for combo in itertools.product(*parts)]


Pair = tuple[str, str]


@dataclass
class Report:
    """Unicast reachability between host pairs. A pair is in ``delivered`` only if its trace
    is :meth:`Trace.ok_unicast`; otherwise it is listed under every problem it shows."""

    traces: dict[Pair, Trace] = field(default_factory=dict)
    delivered: list[Pair] = field(default_factory=list)
    misdelivered: list[Pair] = field(default_factory=list)
    dropped: list[Pair] = field(default_factory=list)
    looped: list[Pair] = field(default_factory=list)
    controller: list[Pair] = field(default_factory=list)
    duplicated: list[Pair] = field(default_factory=list)
    ambiguous: list[Pair] = field(default_factory=list)

    def add(self, src: str, dst: str, trace: Trace) -> None:
        pair = (src, dst)
        self.traces[pair] = trace
        if trace.ok_unicast(dst):
            self.delivered.append(pair)
            return
        kinds = {b.end.kind for b in trace.branches}
        stray = {b.end.host for b in trace.branches if b.end.kind == "delivered"} - {dst}
        if stray or "local" in kinds:
            self.misdelivered.append(pair)
        if "drop" in kinds:
            self.dropped.append(pair)
        if kinds & {"loop", "hop-limit"}:
            self.looped.append(pair)
        if "controller" in kinds:
            self.controller.append(pair)
        if any(b.is_copy for b in trace.branches):
            self.duplicated.append(pair)
        if trace.warnings:
            self.ambiguous.append(pair)

    @property
    def ok(self) -> bool:
        return len(self.delivered) == len(self.traces)

    @property
    def failures(self) -> dict[Pair, Trace]:
        good = set(self.delivered)
        return {p: t for p, t in self.traces.items() if p not in good}

    def render(self, limit: int = 10) -> str:
        lines = [f"reachability: {len(self.delivered)}/{len(self.traces)} pairs delivered"]
        for name in ("misdelivered", "dropped", "looped", "controller", "duplicated", "ambiguous"):
            pairs: list[Pair] = getattr(self, name)
            if pairs:
                shown = ", ".join(f"{a}->{b}" for a, b in pairs[:limit])
                more = f" (+{len(pairs) - limit} more)" if len(pairs) > limit else ""
                lines.append(f"  {name}: {len(pairs)}: {shown}{more}")
        for trace in itertools.islice(self.failures.values(), 3):
            lines.append(trace.render())
        return "\n".join(lines)

    __str__ = render

    def __iter__(self) -> Iterator[tuple[Pair, Trace]]:
        return iter(self.traces.items())
