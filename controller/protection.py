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
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

import networkx as nx

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


Adjacency = dict[int, list[tuple[int, int, int]]]  # switch -> [(port, peer, peer port)]


def adjacency(g: nx.MultiDiGraph) -> Adjacency:
    """Every switch's links in port order, read once from the graph."""
    adj: Adjacency = {}
    for u, v, k, d in g.edges(keys=True, data=True):
        adj.setdefault(u, []).append((k, v, d.get("dst_port", 0)))
    for links in adj.values():
        links.sort()
    return adj


def detour(
    g: nx.MultiDiGraph, u: int, port: int, adj: Adjacency | None = None
) -> list[tuple[int, int]] | None:
    """Hops (switch, out port) from u to the far end of u:port, avoiding that link in
    both directions; breadth first, lowest port first, so the answer is deterministic."""
    adj = adjacency(g) if adj is None else adj
    edge = next(((v, d) for k, v, d in adj.get(u, ()) if k == port), None)
    if edge is None:
        return None
    v, far = edge
    banned = {(u, port), (v, far)}
    parent: dict[int, tuple[int, int]] = {}
    seen, queue = {u}, deque([u])
    while queue and v not in parent:
        node = queue.popleft()
        for key, nxt, _ in adj.get(node, ()):
            if nxt not in seen and (node, key) not in banned:
                seen.add(nxt)
                parent[nxt] = (node, key)
                queue.append(nxt)
    if v not in parent:
        return None
    hops, node = [], v
    while node != u:
        prev, key = parent[node]
        hops.append((prev, key))
        node = prev
    return hops[::-1]


Detours = dict[tuple[int, int], list[tuple[int, int]] | None]


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
    ordered = sorted(set(links))[:MAX_TUNNELS]
    return {link: tunnel for tunnel, link in enumerate(ordered, start=1)}


Hop = tuple[int, int]
TunnelParts = tuple[list[tuple[int, FlowRule]], int, int]  # rules per switch, end, arrival


@dataclass
class ProtectionMemo:
    """What the last plan found, so a link event redoes only what it touched: detours
    still carried hop for hop are kept, and the rules of an unchanged detour are the
    very objects built before (so unchanged switches compare equal at once)."""

    alive: set[Hop] = field(default_factory=set)
    detours: Detours = field(default_factory=dict)
    uses: dict[Hop, set[Hop]] = field(default_factory=dict)  # hop -> links detoured over it
    tunnels: dict[tuple[int, tuple[Hop, ...]], TunnelParts] = field(default_factory=dict)
    groups: dict[tuple[object, ...], list[GroupRule]] = field(default_factory=dict)


def protection_plans(
    g: nx.MultiDiGraph,
    known: Iterable[tuple[int, int]] = (),
    memo: ProtectionMemo | None = None,
    budget: int | None = None,
) -> tuple[dict[int, Plan], Protection, ProtectionMemo, int]:
    """Per switch: its fast-failover groups and tunnel rules; where they stand; what to
    remember for the next call; and how many links still wait for a detour search.
    ``known``: links seen before (now down or gone), which keep their tunnel ids.
    ``memo``: the last call's, whose detours are kept while the graph still carries them
    (a link event re-searches only the detours it broke). ``budget``: at most this many
    searches; if links are left, no plan is made (the memo keeps what was found, and a
    later call goes on from there)."""
    memo = memo or ProtectionMemo()
    plans: dict[int, Plan] = {}
    prot = Protection()
    adj = adjacency(g)
    live = sorted((u, k) for u, links in adj.items() for k, _, _ in links)
    alive = set(live)
    broken = {link for hop in memo.alive - alive for link in memo.uses.get(hop, ())}
    ids = tunnel_ids([*live, *known])
    links = [(ids[link], link) for link in live if link in ids]
    new = ProtectionMemo(alive)
    searched = waiting = 0
    grew = bool(alive - memo.alive)  # a link without a detour may have one now
    for tunnel, (u, port) in links:
        before = memo.detours.get((u, port))
        fresh = before is None and ((u, port) not in memo.detours or grew)
        fresh = fresh or (u, port) in broken
        if fresh and budget is not None and searched >= budget:
            waiting += 1  # not in the memo: searched by a later call
            prot.first.setdefault(u, {})[port] = None
            continue
        searched += fresh
        hops = detour(g, u, port, adj) if fresh else before
        new.detours[(u, port)] = hops
        for hop in hops or ():
            new.uses.setdefault(hop, set()).add((u, port))
        prot.first.setdefault(u, {})[port] = hops[0][1] if hops else None
        if hops and len(hops) > 1:
            key = (tunnel, tuple(hops))
            parts = memo.tunnels.get(key) or _tunnel_rules(adj, hops, tunnel)
            new.tunnels[key] = parts
            for dpid, rule in parts[0]:
                _rules(plans, dpid).add_flow(rule)
            prot.arrivals.setdefault(parts[1], set()).add(parts[2])
    if waiting:  # searched what the budget allowed; plans once every detour is known
        new.groups = memo.groups  # (the links left wait outside the memo: searched next)
        return {}, Protection(), new, waiting
    for tunnel, (u, port) in links:
        hops, rules = new.detours.get((u, port)), _rules(plans, u)
        if not hops:  # no detour (yet): no turn-back groups either, so nothing may use them
            prot.arrivals.get(u, set()).discard(port)
        arrival = bool(hops) and port in prot.arrivals.get(u, ())
        gkey = (u, port, tunnel, tuple(hops or ()), arrival)
        groups = memo.groups.get(gkey) or _groups(port, hops, tunnel, arrival)
        new.groups[gkey] = groups
        for group in groups:
            rules.add_group(group)
    return plans, prot, new, waiting


def _groups(port: int, hops: list[Hop] | None, tunnel: int, arrival: bool) -> list[GroupRule]:
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


def _rules(plans: dict[int, Plan], dpid: int) -> SwitchRules:
    plan = plans.get(dpid)
    if plan is None:
        plan = plans[dpid] = {dpid: SwitchRules()}
    return plan[dpid]


def _detour_bucket(hops: list[tuple[int, int]], tunnel: int, uturn: bool = False) -> Bucket:
    first = hops[0][1]
    out = Output(OFPP_IN_PORT if uturn else first)
    if len(hops) == 1:  # a parallel link: no tunnel needed
        return Bucket((out,), 0, watch_port=first)
    tag: tuple[Action, ...] = (PushVlan(), SetField("vlan_vid", OFPVID_PRESENT | tunnel))
    return Bucket((*tag, out), 0, watch_port=first)


def _tunnel_rules(adj: Adjacency, hops: list[Hop], tunnel: int) -> TunnelParts:
    """Rules that carry tunnel ``tunnel`` along ``hops``, and where it ends (switch,
    arrival port)."""
    match = Match.of(vlan_vid=OFPVID_PRESENT | tunnel)
    rules: list[tuple[int, FlowRule]] = []
    for dpid, port in hops[1:]:
        cookie = make_cookie(CookieKind.PROTECT, dpid)
        rules.append(
            (dpid, FlowRule(Table.CLASSIFY, PRIO_TUNNEL, match, (Output(port),), cookie=cookie))
        )
    last_switch, last_port = hops[-1]
    end, arrival = next((v, far) for k, v, far in adj[last_switch] if k == last_port)
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
