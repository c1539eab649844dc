"""Fast failover: every fabric link has a precomputed detour the switch uses on its own.

For each directed link u->v, the detour is the shortest path from u to v that avoids
the physical link. u outputs to v through a fast-failover group: the link while its port
is live, else the detour. A detour of one hop is a parallel link; a longer one is a
tunnel: u tags the packet with the link's VLAN id, the switches along the detour forward
that tag only (CLASSIFY, above everything else), and v pops it and routes the packet as
if it had arrived over the link. That is loop-free for any single link failure: v is
strictly closer to the packet's destination than u, so v's routes never lead back over
the failed link. The controller still recomputes after PortStatus and moves traffic off
the detour; the switch only bridges the gap. VLAN ids limit tunnels to 4094 links.

The detours themselves (found fast, and kept while every hop of them lives) are in
``controller.detours``. ``ProtectionPlanner`` keeps the plans up to date one link event
at a time: its cost is that of the switches and detours the event touched.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence, Sized
from dataclasses import dataclass, field
from typing import TypeVar

import networkx as nx

from controller.detours import DetourBook, DetourGraph, Path, read_links
from controller.detours import Hop as Hop  # (re-exported: callers import them from here)
from controller.detours import adjacency as adjacency
from controller.detours import detour as detour
from controller.model import (
    META_FROM_FABRIC,
    OFPP_IN_PORT,
    Action,
    Bucket,
    CookieKind,
    FlowRule,
    GroupAction,
    GroupRule,
    GroupType,
    Match,
    Output,
    PopVlan,
    PushVlan,
    SetField,
    SwitchRules,
    Table,
    make_cookie,
)
from controller.owners import Plan

PROTECT_BASE = 0x4000_0000
UTURN_BASE = 0x5000_0000
BACK_BASE = 0x6000_0000
PRIO_TUNNEL = 800
OFPVID_PRESENT = 0x1000
MAX_TUNNELS = 4094
# A budgeted call (``ProtectionPlanner.plan``) reads this many links, or rebuilds this
# many ports' groups, per detour search it may make (128 searches: 4,096 links read).
READ_LINKS_PER_DETOUR = 32
PUBLISH_PER_DETOUR = 16


def protect_gid(port: int) -> int:
    """The fast-failover group that stands for "output to ``port``" on a switch."""
    return PROTECT_BASE | port


def uturn_gid(port: int) -> int:
    """The same for packets that arrived on the detour's first port: a switch may only
    send a packet back where it came from with OFPP_IN_PORT."""
    return UTURN_BASE | port


def back_gid(port: int) -> int:
    """And for packets that leave a detour tunnel on ``port``'s own switch and must go
    back out where they came in."""
    return BACK_BASE | port


@dataclass
class Protection:
    """Where failover groups stand: per switch, each protected port and the first port
    of its detour; and the ports on which detour tunnels end (a packet leaving a tunnel
    may have to go back out of the port it came in on)."""

    first: dict[int, dict[int, int | None]] = field(default_factory=dict)
    arrivals: dict[int, set[int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.first)


def tunnel_ids(links: Iterable[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """A VLAN id per directed link (switch, port), in sorted order. Given every link ever
    seen, not only the live ones, a failure renumbers nothing: the reroute it causes
    changes the failed link's own rules, not every tunnel numbered after it."""
    ordered = heapq.nsmallest(MAX_TUNNELS, set(links))  # (110,592 links at k=48: no full sort)
    return {link: tunnel for tunnel, link in enumerate(ordered, start=1)}


TunnelParts = tuple[list[tuple[int, FlowRule]], int, int]  # rules per switch, end, arrival
GroupKey = tuple[int | None, bool, int, bool]  # first port, tunnel?, tunnel id, arrival
FlowKey = tuple[int, int, Match]
_T = TypeVar("_T")


@dataclass(frozen=True)
class ProtectionResult:
    """The last complete plans (per switch, its failover groups and tunnel rules) and
    where their groups stand; ``waiting``: links whose detour is still to be searched
    (until none is, the plans stay the last complete ones)."""

    plans: dict[int, Plan]
    protection: Protection
    waiting: int


@dataclass
class _Staged:
    """Copies of the planner's tables while dirty switches are rebuilt into them."""

    plans: dict[int, Plan]
    first: dict[int, dict[int, int | None]]
    arrivals: dict[int, set[int]]
    plans_changed: bool = False
    stands_changed: bool = False


class ProtectionPlanner:
    """Failover plans kept up to date one link event at a time. Each call re-reads
    only the switches it is told changed, re-searches only the detours a dead hop broke
    (and, when a link comes, those of links without one), and rebuilds only the
    switches those touch: a switch whose rules did not change keeps its very plan (and
    its entries in ``Protection``), so callers skip it by identity."""

    def __init__(self) -> None:
        self._graph = DetourGraph()
        self._book = DetourBook()
        self.fresh = False  # re-search every detour when a link comes (see FabricConfig)
        self._live: set[Hop] = set()
        self._known: set[Hop] = set()
        self._known_size = -1
        self._numbered: set[Hop] = set()  # known or live: what tunnel ids are given to
        self._ids: dict[Hop, int] = {}
        self._tunnels: dict[Hop, TunnelParts] = {}  # link -> its tunnel (detours > 1 hop)
        self._flows: dict[int, dict[FlowKey, FlowRule]] = {}  # switch -> tunnel rules
        self._ends: dict[int, dict[Hop, int]] = {}  # switch -> {link: arrival port}
        self._groups: dict[Hop, tuple[GroupKey, list[GroupRule]]] = {}
        self._dirty: set[int] = set()  # switches to rebuild once no search is left
        self._plans: dict[int, Plan] = {}
        self._protection = Protection()
        self._read_once = False
        self._unread: set[int] = set()  # switches still to read (a budgeted call reads some)
        self._went: list[Hop] = []  # ... and what the ones read so far lost and gained
        self._came: list[Hop] = []
        self._staged: _Staged | None = None  # the tables being rebuilt, a slice a call

    def plan(
        self,
        g: nx.MultiDiGraph,
        changed: Iterable[int] | None,
        known: Iterable[Hop] | None = (),
        budget: int | None = None,
    ) -> ProtectionResult:
        """Bring the plans up to date with ``g``. ``changed``: the switches whose links
        may have changed since the last call (None: any may have; the whole graph is
        read). ``known``: every link ever seen (it only grows; tunnel ids number it and
        the live links; None: every link this planner ever read). ``budget``: at most
        this many detour searches in this call, and links read and ports rebuilt in
        proportion (None: everything at once)."""
        if changed is None or not self._read_once:
            self._unread = set(g) | set(self._graph.links)
            self._dirty.update(self._unread, self._plans)  # every switch rebuilt and compared
        else:
            self._unread |= self._touched(g, changed)
        self._read_once = True
        batch = sorted(self._unread)
        if budget is not None:  # (reading a link costs about 1/30 of a detour search)
            links, cut = 0, 0
            while cut < len(batch) and links < READ_LINKS_PER_DETOUR * budget:
                links += len(g.succ[batch[cut]]) + 1 if batch[cut] in g else 1
                cut += 1
            batch = batch[:cut]
        self._unread.difference_update(batch)
        went, came = self._read(g, batch)
        self._went += went
        self._came += came
        if not self._unread:
            self._apply(known)
            for link, path in self._book.search(self._graph, budget):
                self._add_tunnel(link, path)
                self._dirty.add(link[0])
            if not self._book.pending:
                self._publish(None if budget is None else PUBLISH_PER_DETOUR * budget)
        waiting = len(self._unread) + len(self._book.pending) + len(self._dirty)
        return ProtectionResult(self._plans, self._protection, waiting)

    def _apply(self, known: Iterable[Hop] | None) -> None:
        """What the switches read since the last time lost and gained, once all are read
        (a hop read as come and then as gone is not come: the live set has the last word)."""
        went, came = self._went, [h for h in self._came if h in self._live]
        self._went, self._came = [], []
        self._lose(went)
        if self._renumber(known, went, came):
            self._retrack()
        else:
            self._track(came)
        if came:  # a link without a detour may have one now
            again = self._book.link_came(every=self.fresh)
            for link in again:
                self._drop_tunnel(link)  # (searched again: laid anew)
                self._dirty.add(link[0])

    def _touched(self, g: nx.MultiDiGraph, changed: Iterable[int]) -> set[int]:
        """The switches to re-read: those named, and their peers where a switch came or
        went (it brings or takes the links on both sides)."""
        out = set(changed)
        for switch in list(out):
            peers = self._graph.neighbours(switch)
            if switch in g:
                peers.update(g.succ[switch], g.pred[switch])
            came_or_went = (switch in g) != self._graph.has(switch)
            for peer in peers:
                if came_or_went or (peer in g) != self._graph.has(peer):
                    out.add(peer)
        return out

    def _read(self, g: nx.MultiDiGraph, switches: list[int]) -> tuple[list[Hop], list[Hop]]:
        """Re-read ``switches``' links; returns the hops that went and those that came."""
        went: list[Hop] = []
        came: list[Hop] = []
        for switch in switches:
            gone, new = self._graph.set_links(switch, read_links(g, switch))
            if gone or new:
                self._dirty.add(switch)
                went += gone
                came += new
        self._live.difference_update(went)
        self._live.update(came)
        return went, came

    def _lose(self, went: list[Hop]) -> None:
        """Hops that died: the detours over them wait for a new search, and the links
        they were stop being protected."""
        for hop in went:
            for link in self._book.hop_gone(hop):  # (searched again: see ``plan``)
                self._drop_tunnel(link)
            if hop in self._book:
                self._book.drop(hop)
                self._drop_tunnel(hop)
                self._groups.pop(hop, None)

    def _renumber(self, known: Iterable[Hop] | None, went: list[Hop], came: list[Hop]) -> bool:
        """Keep the numbered links (known or live) up to date; True if tunnel ids change.
        Cheap unless a never-seen link came (or an unknown one went)."""
        learned, forgotten = self._learn(known) if known is not None else (set(), set())
        if known is None:  # every link read is known from now on
            self._known.update(came)
        added = [h for h in (*learned, *came) if h not in self._numbered]
        gone = (*went, *forgotten)
        removed = [h for h in gone if h not in self._live and h not in self._known]
        if not added and not removed:
            return False
        self._numbered.update(added)
        self._numbered.difference_update(removed)
        if len(self._ids) == MAX_TUNNELS:  # links after the last numbered one change none
            last = max(self._ids)
            if all(h > last for h in (*added, *removed)):
                return False
        ids = tunnel_ids(self._numbered)
        if ids == self._ids:
            return False
        self._ids = ids
        return True

    def _learn(self, known: Iterable[Hop]) -> tuple[set[Hop], set[Hop]]:
        """What ``known`` gained (and lost, which it should not) since the last call:
        only read when its size changed, as it only grows."""
        seen = known if isinstance(known, Sized) else list(known)
        if len(seen) == self._known_size:
            return set(), set()
        self._known_size = len(seen)
        now = set(seen)
        learned, forgotten = now - self._known, self._known - now
        self._known = now
        return learned, forgotten

    def _track(self, came: list[Hop]) -> None:
        """Protect the links that came, if they have a tunnel id."""
        for link in came:
            if link in self._ids and link not in self._book:
                self._book.add(link)
                self._dirty.add(link[0])

    def _retrack(self) -> None:
        """Tunnel ids changed: protect the live links that have one (keeping their
        detours) and rebuild every tunnel's rules, which carry the id."""
        for link in self._book.links():
            if link not in self._ids:
                self._book.drop(link)
                self._groups.pop(link, None)
        for link in sorted(self._ids.keys() & self._live):
            self._book.add(link)
        self._dirty.update(self._graph.links, self._plans, self._flows)
        self._tunnels.clear()
        self._flows.clear()
        self._ends.clear()
        for link, path in self._book.paths.items():
            self._add_tunnel(link, path)

    def _add_tunnel(self, link: Hop, path: Path | None) -> None:
        """Lay the tunnel of ``link``'s detour (one of a single hop needs none)."""
        if path is None or len(path) < 2:
            return
        end = self._graph.peer(path[-1])
        assert end is not None, "a detour just found or kept runs over live hops"
        parts = _tunnel_rules(path, self._ids[link], *end)
        self._tunnels[link] = parts
        for dpid, rule in parts[0]:
            self._flows.setdefault(dpid, {})[rule.key] = rule
            self._dirty.add(dpid)
        self._ends.setdefault(parts[1], {})[link] = parts[2]

    def _drop_tunnel(self, link: Hop) -> None:
        parts = self._tunnels.pop(link, None)
        if parts is None:
            return
        for dpid, rule in parts[0]:
            flows = self._flows[dpid]
            del flows[rule.key]
            if not flows:
                del self._flows[dpid]
            self._dirty.add(dpid)
        ends = self._ends[parts[1]]
        del ends[link]
        if not ends:
            del self._ends[parts[1]]

    def _publish(self, limit: int | None) -> None:
        """Rebuild the dirty switches (``limit``: at most that many ports a call, the
        tables in use kept until the last is done); a switch (or entry) equal to before
        keeps its object, and the outer tables are copied only if one changed."""
        if not self._dirty:
            return
        if self._staged is None:
            prot = self._protection
            self._staged = _Staged(dict(self._plans), dict(prot.first), dict(prot.arrivals))
        staged, ports = self._staged, 0
        for switch in sorted(self._dirty):
            if limit is not None and ports >= limit:
                break
            self._dirty.discard(switch)
            ports += len(self._graph.links.get(switch, ())) + 1
            here, ends, plan = self._switch(switch)
            staged.plans_changed |= _settle(staged.plans, switch, plan)
            staged.stands_changed |= _settle(staged.first, switch, here)
            staged.stands_changed |= _settle(staged.arrivals, switch, ends)
        if self._dirty:
            return
        self._staged = None
        if staged.plans_changed:
            self._plans = staged.plans
        if staged.stands_changed:
            self._protection = Protection(staged.first, staged.arrivals)

    def _switch(
        self, switch: int
    ) -> tuple[dict[int, int | None] | None, set[int] | None, Plan | None]:
        """One switch's protected ports (and their detours' first ports), the ports
        tunnels end on, and its plan."""
        paths = self._book.paths
        links = self._graph.links.get(switch, ())
        protected = [(p, paths[(switch, p)]) for p, _, _ in links if (switch, p) in self._ids]
        ends = self._ends.get(switch)
        arrivals = None
        if ends:  # (a port without a detour has no turn-back group to come back by)
            arrivals = set(ends.values()).difference(p for p, path in protected if not path)
        groups: dict[int, GroupRule] = {}
        for port, path in protected:
            arrival = bool(path) and port in (arrivals or ())
            for group in self._link_groups((switch, port), path, arrival):
                groups[group.group_id] = group
        flows = self._flows.get(switch)
        plan = {switch: SwitchRules(dict(flows or {}), groups)} if protected or flows else None
        ports = {p: path[0][1] if path else None for p, path in protected}
        return ports or None, arrivals, plan

    def _link_groups(self, link: Hop, path: Path | None, arrival: bool) -> list[GroupRule]:
        """The link's groups, the same objects while what they show of the detour (its
        first port, and whether it is a tunnel) stays."""
        tunnel = self._ids[link]
        key = (path[0][1] if path else None, path is not None and len(path) > 1, tunnel, arrival)
        cached = self._groups.get(link)
        if cached is not None and cached[0] == key:
            return cached[1]
        groups = _groups(link[1], path, tunnel, arrival)
        self._groups[link] = (key, groups)
        return groups


def _settle(table: dict[int, _T], key: int, value: _T | None) -> bool:
    """Put ``value`` under ``key`` (None: remove it), keeping the object already there
    if it is equal; True if the table changed."""
    if value is None:
        return table.pop(key, None) is not None
    old = table.get(key)
    if old is not None and old == value:
        return False
    table[key] = value
    return True


@dataclass
class ProtectionMemo:
    """What ``protection_plans`` keeps between calls: its planner."""

    planner: ProtectionPlanner = field(default_factory=ProtectionPlanner)


def protection_plans(
    g: nx.MultiDiGraph,
    known: Iterable[tuple[int, int]] = (),
    memo: ProtectionMemo | None = None,
    budget: int | None = None,
) -> tuple[dict[int, Plan], Protection, ProtectionMemo, int]:
    """Per switch: its fast-failover groups and tunnel rules; where they stand; what to
    pass to the next call; and how many links still wait for a detour search (then the
    plans are empty: a later call goes on). Reads the whole graph: a caller that knows
    which switches changed calls ``ProtectionPlanner.plan`` with them."""
    memo = memo or ProtectionMemo()
    result = memo.planner.plan(g, None, known, budget)
    if result.waiting:
        return {}, Protection(), memo, result.waiting
    return result.plans, result.protection, memo, 0


def _groups(port: int, hops: Sequence[Hop] | None, tunnel: int, arrival: bool) -> list[GroupRule]:
    """The failover groups standing for "output to ``port``" (and its turn-back kin)."""
    link = Bucket((Output(port),), 0, watch_port=port)
    if not hops:
        return [GroupRule(protect_gid(port), GroupType.FAST_FAILOVER, (link,))]
    around = _detour_bucket(hops, tunnel)
    back = _detour_bucket(hops, tunnel, uturn=True)
    out = [
        GroupRule(protect_gid(port), GroupType.FAST_FAILOVER, (link, around)),
        GroupRule(uturn_gid(port), GroupType.FAST_FAILOVER, (link, back)),
    ]
    if arrival:
        home = Bucket((Output(OFPP_IN_PORT),), 0, watch_port=port)
        out.append(GroupRule(back_gid(port), GroupType.FAST_FAILOVER, (home, around)))
    return out


def _detour_bucket(hops: Sequence[Hop], tunnel: int, uturn: bool = False) -> Bucket:
    first = hops[0][1]
    out = Output(OFPP_IN_PORT if uturn else first)
    if len(hops) == 1:  # a parallel link: no tunnel needed
        return Bucket((out,), 0, watch_port=first)
    tag: tuple[Action, ...] = (PushVlan(), SetField("vlan_vid", OFPVID_PRESENT | tunnel))
    return Bucket((*tag, out), 0, watch_port=first)


def _tunnel_rules(hops: Sequence[Hop], tunnel: int, end: int, arrival: int) -> TunnelParts:
    """Rules that carry tunnel ``tunnel`` along ``hops`` to ``end``, where it arrives
    on port ``arrival``."""
    match = Match.of(vlan_vid=OFPVID_PRESENT | tunnel)
    rules: list[tuple[int, FlowRule]] = []
    for dpid, port in hops[1:]:
        cookie = make_cookie(CookieKind.PROTECT, dpid)
        rules.append(
            (dpid, FlowRule(Table.CLASSIFY, PRIO_TUNNEL, match, (Output(port),), cookie=cookie))
        )
    meta = (META_FROM_FABRIC, META_FROM_FABRIC)
    cookie = make_cookie(CookieKind.PROTECT, end)
    pop = FlowRule(
        Table.CLASSIFY,
        PRIO_TUNNEL,
        match,
        (PopVlan(),),
        goto=Table.QOS,
        write_metadata=meta,
        cookie=cookie,
    )
    rules.append((end, pop))
    return rules, end, arrival


def protect(plan: Plan, prot: Protection) -> Plan:
    """``plan`` with every output to a protected port sent through its failover group.
    Where a packet may arrive on the port it must leave by (the first port of a detour,
    or the end of a tunnel), the rule gets a sibling for those packets, one priority
    higher, whose group leaves by OFPP_IN_PORT. A select bucket keeps watching its port
    (so hashing skips a dead link for a live equal-cost one) unless it is the only
    bucket, which then lives as long as its detour does."""
    out: Plan = {}
    for dpid, rules in plan.items():
        ports = prot.first.get(dpid, {})
        if not ports:
            out[dpid] = rules
            continue
        arrivals = prot.arrivals.get(dpid, set())
        new = SwitchRules(meters=dict(rules.meters))
        for rule in rules.flows.values():
            for variant in _variants(rule, ports, arrivals):
                new.add_flow(variant)
        for group in rules.groups.values():
            new.add_group(_protected_group(group, set(ports)))
        out[dpid] = new
    return out


def _variants(rule: FlowRule, ports: dict[int, int | None], arrivals: set[int]) -> list[FlowRule]:
    outs = [a.port for a in rule.actions if isinstance(a, Output) and a.port in ports]
    if not outs:
        return [rule]
    port, first = outs[0], ports[outs[0]]
    in_port = rule.match.get("in_port")
    meta = rule.match.get("metadata")
    from_host = (
        isinstance(meta, tuple) and isinstance(meta[0], int) and not meta[0] & META_FROM_FABRIC
    )
    special: dict[int, int] = {}
    if not from_host:
        if first is not None:
            special[first] = uturn_gid(port)  # turned back into the detour
        if port in arrivals:
            special[port] = back_gid(port)  # out of a tunnel, back where it came in
    if in_port is not None:  # a rule for one in-port: it is either special or normal
        gid = special.get(in_port) if isinstance(in_port, int) else None
        return [_with_actions(rule, _swap(rule.actions, set(ports), gid))]
    variants = [_with_actions(rule, _swap(rule.actions, set(ports)))]
    for q, gid in sorted(special.items()):
        sibling = Match.of(**rule.match.as_dict(), in_port=q)
        acts = _swap(rule.actions, set(ports), gid)
        variants.append(
            FlowRule(
                rule.table,
                rule.priority + 1,
                sibling,
                acts,
                rule.goto,
                rule.write_metadata,
                rule.meter,
                rule.cookie,
            )
        )
    return variants


def _swap(
    actions: tuple[Action, ...], ports: set[int], gid: int | None = None
) -> tuple[Action, ...]:
    return tuple(
        GroupAction(protect_gid(a.port) if gid is None else gid)
        if isinstance(a, Output) and a.port in ports
        else a
        for a in actions
    )


def _with_actions(rule: FlowRule, actions: tuple[Action, ...]) -> FlowRule:
    if actions == rule.actions:
        return rule
    return FlowRule(
        rule.table,
        rule.priority,
        rule.match,
        actions,
        rule.goto,
        rule.write_metadata,
        rule.meter,
        rule.cookie,
        rule.idle_timeout,
        rule.hard_timeout,
    )


def _protected_group(group: GroupRule, ports: set[int]) -> GroupRule:
    if group.type is not GroupType.SELECT:
        return group
    alone = len(group.buckets) == 1
    buckets = []
    for b in group.buckets:
        acts = _swap(b.actions, ports)
        if acts == b.actions:
            buckets.append(b)
        elif alone:
            gid = next(a.group_id for a in acts if isinstance(a, GroupAction))
            buckets.append(Bucket(acts, b.weight, watch_group=gid))
        else:
            buckets.append(Bucket(acts, b.weight, b.watch_port, b.watch_group))
    return GroupRule(group.group_id, group.type, tuple(buckets))
