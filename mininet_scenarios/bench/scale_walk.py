"""Packets walked through what the scale wire's switches hold, after every call of a reroute.

At size the core re-plans a failed link in slices (``Conductor.work``): for a while some
switches hold new routes and others old ones, and no packet may loop or be lost. The fake
fabric checks that on small fabrics (``tests/fabric/test_reroute_slices.py``) but is far
too slow at k=32, so this walks the wire's ``SwitchTable`` rules in the controller's own
terms with the fake's semantics: per table the highest-priority match (masks; ``vlan_vid``
0 untagged; a field the packet lacks never matches; a tie takes the oldest rule), actions
in order, write-metadata, goto; groups act on a copy: all = every bucket, fast-failover =
the first live one, select = every live one as an alternative. Tables are indexed per
priority and mask, and a pair's walk is kept while no switch it crossed changed.
"""

from __future__ import annotations

import functools
import ipaddress
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from controller import heap, model
from controller.model import OFPP_CONTROLLER, OFPP_IN_PORT, OFPP_LOCAL, FlowRule, GroupType
from mininet_scenarios.bench.scale_wire import Wire

PortRef = tuple[int, int]
Pair = tuple[str, str]
Fields = tuple[tuple[str, int], ...]  # a packet's header fields, sorted by name
Tags = tuple[tuple[int, int], ...]  # VLAN tags under the outer one: (vid, pcp)
World = tuple[bool, bool, int, bool]  # looped, lost, copies delivered (at most 2), controller
Worlds = frozenset[World]  # what may become of a copy, one world per choice of buckets
Hop = tuple[int, int, int | None, tuple[str, ...]]  # switch, in, out, rules and groups taken
Hops = tuple[Hop, ...]
Seen = frozenset[Any]  # (switch, in-port, header) met so far on a branch
OFPP_FLOOD, OFPP_ALL, OFPVID_PRESENT, MAX_HOPS = 0xFFFFFFFB, 0xFFFFFFFC, 0x1000, 64
OUTCOMES = ("delivered", "looped", "lost", "controller", "duplicated")
UNDELIVERED = ("looped", "lost", "controller")
PAIRS, CROSSING, CANDIDATES, SHOWN = 200, 150, 6000, 5
MACS = frozenset({"eth_src", "eth_dst", "arp_sha", "arp_tha"})
ARP, IPV4 = frozenset({model.ETH_TYPE_ARP}), frozenset({model.ETH_TYPE_IPV4})
NEEDS: dict[str, tuple[str, frozenset[int]]] = {  # set-field: the header a field lives in
    **dict.fromkeys(("arp_op", "arp_spa", "arp_tpa", "arp_sha", "arp_tha"), ("eth_type", ARP)),
    **dict.fromkeys(("ip_dscp", "ip_ecn", "ip_proto"), ("eth_type", IPV4 | {0x86DD})),
    **dict.fromkeys(("ipv4_src", "ipv4_dst"), ("eth_type", IPV4)),
    **dict.fromkeys(("tcp_src", "tcp_dst"), ("ip_proto", frozenset({6}))),
    **dict.fromkeys(("udp_src", "udp_dst"), ("ip_proto", frozenset({17}))),
}
TCP = dict(eth_type=0x0800, ip_proto=6, ip_dscp=0, ip_ecn=0, tcp_src=49152, tcp_dst=5201)
NOTHING: Worlds = frozenset({(False, False, 0, False)})
DELIVERED: Worlds = frozenset({(False, False, 1, False)})
CONTROLLER: Worlds = frozenset({(False, False, 0, True)})


@functools.lru_cache(maxsize=1 << 16)
def as_int(name: str, value: int | str) -> int:
    """A match or set-field value as the integer a switch compares (MACs, dotted IPv4)."""
    if isinstance(value, int):
        return value
    if name in MACS:
        return int(value.replace(":", ""), 16)
    return int(ipaddress.IPv4Network(value, strict=False).network_address)


def has_header(fields: dict[str, int], name: str) -> bool:
    """Whether the packet carries the header ``name`` lives in (a tag for VLAN fields)."""
    if name in ("vlan_vid", "vlan_pcp"):
        return "vlan_vid" in fields
    while name in NEEDS:
        name, allowed = NEEDS[name]
        if fields.get(name) not in allowed:
            return False
    return True


class TableIndex:
    """One table as (priority, fields and masks) -> masked values -> (age, rule)."""

    def __init__(self, rules: Iterable[FlowRule]) -> None:
        spaces: dict[tuple[int, tuple[tuple[str, int | None], ...]], dict[Any, Any]] = {}
        for age, rule in enumerate(rules):
            sig, key = [], []
            for name, value in rule.match.fields:
                mask = as_int(name, value[1]) if isinstance(value, tuple) else None
                exact = as_int(name, value[0] if isinstance(value, tuple) else value)
                sig.append((name, mask))
                key.append(exact if mask is None else exact & mask)
            spaces.setdefault((rule.priority, tuple(sig)), {})[tuple(key)] = (age, rule)
        self.spaces = sorted(spaces.items(), key=lambda s: -s[0][0])  # stable: first seen first

    def lookup(self, fields: dict[str, int]) -> FlowRule | None:
        """``fields`` hold the pipeline's ``in_port`` and ``metadata`` too."""
        best: tuple[int, FlowRule] | None = None
        for (priority, sig), rules in self.spaces:
            if best is not None and priority < best[1].priority:
                break
            key = []
            for name, mask in sig:
                have = fields.get(name, 0 if name == "vlan_vid" else None)
                if have is None:
                    break
                key.append(have if mask is None else have & mask)
            else:
                found = rules.get(tuple(key))
                if found is not None and (best is None or found[0] < best[0]):
                    best = found
        return None if best is None else best[1]


class Out(NamedTuple):
    """A copy leaving by a physical port, its header then and the rules it took."""

    port: int
    fields: Fields
    tags: Tags
    trail: tuple[str, ...]


class Stop(NamedTuple):
    """A copy ending in the switch: ``kind`` controller, local or drop."""

    kind: str
    reason: str
    trail: tuple[str, ...]


class Alt(NamedTuple):
    """Mutually exclusive possibilities (a select group's live buckets)."""

    choices: tuple[tuple[Out | Stop | Alt, ...], ...]


Item = Out | Stop | Alt


@dataclass
class _Packet:
    """One copy inside a switch's pipeline; ``fields`` hold ``in_port`` and ``metadata``."""

    fields: dict[str, int]
    tags: Tags
    trail: list[str] = field(default_factory=list)

    def copy(self) -> _Packet:
        return _Packet(dict(self.fields), self.tags, list(self.trail))

    def out(self, port: int) -> Out:
        header = tuple(
            sorted(i for i in self.fields.items() if i[0] not in ("in_port", "metadata"))
        )
        return Out(port, header, self.tags, tuple(self.trail))

    def stop(self, kind: str, reason: str) -> Stop:
        return Stop(kind, reason, tuple(self.trail))


@dataclass
class PairWalk:
    """One pair's walk: its outcome, its first bad branch, and what it depended on."""

    outcome: str  # one of OUTCOMES, or unaddressed
    failure: str  # the first branch that looped, was lost or ended at the controller
    reason: str
    visited: dict[int, int]  # switch -> its table version when walked
    egress: frozenset[PortRef]  # every port any branch left by
    stamp: int


class Walker:
    """Walks packets through ``wire``'s switches as they are now (``refresh`` after calls)."""

    def __init__(self, wire: Wire, max_hops: int = MAX_HOPS) -> None:
        self.wire, self.max_hops = wire, max_hops
        self.dead: frozenset[PortRef] = frozenset()
        self.stamp = 0  # bumped whenever a port's liveness changed: every walk is stale
        # per switch: its table version, its tables indexed, its passes (in-port, header)
        self._held: dict[int, tuple[int, dict[int, TableIndex], dict[Any, tuple[Item, ...]]]] = {}
        self.refresh()

    def refresh(self) -> bool:
        """Read which ports are dead (unplugged, or reported down); whether that changed."""
        wire, ports = self.wire, self.wire.ports
        downs = (r for r in (*wire.peer, *wire.host_at) if not ports[r[0]][r[1]].up)
        dead = frozenset(wire.down).union(downs)
        if dead == self.dead:
            return False
        self.dead, self.stamp = dead, self.stamp + 1
        self._held = {d: (v, tables, {}) for d, (v, tables, _) in self._held.items()}
        return True

    def live(self, dpid: int, port: int) -> bool:
        ref = (dpid, port)
        return ref not in self.dead and (ref in self.wire.peer or ref in self.wire.host_at)

    def current(self, walk: PairWalk) -> bool:
        """Whether a walk still holds: no port changed and no switch it crossed."""
        same = all(self.wire.tables[d].version == v for d, v in walk.visited.items())
        return walk.stamp == self.stamp and same

    # -- one switch --------------------------------------------------------------------
    def switch_pass(self, dpid: int, in_port: int, fields: Fields, tags: Tags) -> tuple[Item, ...]:
        """What switch ``dpid`` does with a packet arriving on ``in_port`` (memoised)."""
        version, held = self.wire.tables[dpid].version, self._held.get(dpid)
        if held is None or held[0] != version:
            by_table: dict[int, list[FlowRule]] = {}
            for rule in self.wire.tables[dpid].flows.values():
                by_table.setdefault(rule.table, []).append(rule)
            held = (version, {t: TableIndex(rules) for t, rules in by_table.items()}, {})
            self._held[dpid] = held
        items = held[2].get((in_port, fields, tags))
        if items is None:
            pkt = _Packet({**dict(fields), "in_port": in_port, "metadata": 0}, tags)
            items = held[2][(in_port, fields, tags)] = tuple(self._pipeline(dpid, held[1], pkt))
        return items

    def _pipeline(self, dpid: int, tables: dict[int, TableIndex], pkt: _Packet) -> list[Item]:
        items: list[Item] = []
        table = 0
        while True:
            rule = tables[table].lookup(pkt.fields) if table in tables else None
            if rule is None:
                return items or [pkt.stop("drop", f"table-miss in table {table}")]
            kind = model.cookie_kind(rule.cookie)
            pkt.trail.append(f"t{table} p{rule.priority}{' ' + kind.name if kind else ''}")
            if self._actions(dpid, rule.actions, pkt, items):
                return items
            if rule.write_metadata is not None:
                value, mask = rule.write_metadata
                pkt.fields["metadata"] = (pkt.fields["metadata"] & ~mask) | (value & mask)
            if rule.goto is None or rule.goto <= table:
                bad = f"goto {rule.goto} in table {table}" if rule.goto is not None else ""
                return items or [pkt.stop("drop", bad or "no-output")]
            table = rule.goto

    def _actions(
        self, dpid: int, actions: Iterable[model.Action], pkt: _Packet, out: list[Item]
    ) -> bool:
        """Run actions in order, appending what leaves; whether the packet ended."""
        fields = pkt.fields
        for action in actions:
            if isinstance(action, model.Output):
                out.extend(self._output(dpid, action, pkt))
            elif isinstance(action, model.GroupAction):
                group = self.wire.tables[dpid].groups.get(action.group_id)
                if group is None:
                    out.append(pkt.stop("drop", f"group {action.group_id:#x} missing"))
                    return True
                out.extend(self._group(dpid, group, pkt.copy()))
            elif isinstance(action, model.SetField) and has_header(fields, action.field):
                fields[action.field] = as_int(action.field, action.value)
            elif isinstance(action, model.CopyField) and action.src in fields:
                if has_header(fields, action.dst):
                    fields[action.dst] = fields[action.src]
            elif isinstance(action, model.PushVlan):  # a copy of the outer tag, else VID 0
                if "vlan_vid" in fields:
                    pkt.tags = ((fields["vlan_vid"], fields["vlan_pcp"]), *pkt.tags)
                fields["vlan_vid"] = fields.get("vlan_vid", OFPVID_PRESENT)
                fields["vlan_pcp"] = fields.get("vlan_pcp", 0)
            elif isinstance(action, model.PopVlan) and "vlan_vid" in fields:
                if pkt.tags:
                    (fields["vlan_vid"], fields["vlan_pcp"]), *rest = pkt.tags
                    pkt.tags = tuple(rest)
                else:
                    del fields["vlan_vid"], fields["vlan_pcp"]
        return False

    def _output(self, dpid: int, action: model.Output, pkt: _Packet) -> list[Item]:
        port, in_port = action.port, pkt.fields["in_port"]
        if port == OFPP_IN_PORT:
            return [pkt.out(in_port)]
        if port == OFPP_CONTROLLER:  # a copy of its first bytes, or the packet itself
            return [pkt.stop("controller", "a copy" if action.max_len else "the packet")]
        if port == OFPP_LOCAL:
            return [pkt.stop("local", "output:LOCAL")]
        if port in (OFPP_FLOOD, OFPP_ALL):
            ports = sorted(p for p in self.wire.ports[dpid] if p != in_port)
            return [pkt.out(p) for p in ports if self.live(dpid, p)]
        if port == in_port:
            return [pkt.stop("drop", f"in-port (output:{port} is where it came in)")]
        return [pkt.out(port)]

    def _group(self, dpid: int, group: model.GroupRule, pkt: _Packet) -> list[Item]:
        gid, buckets = group.group_id, group.buckets

        def run(i: int, copy: _Packet) -> list[Item]:
            copy.trail.append(f"g{gid:#x}/b{i}")
            items: list[Item] = []
            self._actions(dpid, buckets[i].actions, copy, items)
            return items

        if group.type is GroupType.ALL:
            return [item for i in range(len(buckets)) for item in run(i, pkt.copy())]
        if group.type is GroupType.INDIRECT:
            return run(0, pkt)
        alive = [i for i, b in enumerate(buckets) if self._live(dpid, b.watch_port, b.watch_group)]
        if group.type is not GroupType.FAST_FAILOVER:  # select: weight 0 is never chosen
            alive = [i for i in alive if buckets[i].weight > 0]
        if not alive:
            return [pkt.stop("drop", f"group {gid:#x}: no live bucket")]
        if group.type is GroupType.FAST_FAILOVER or len(alive) == 1:
            return run(alive[0], pkt)
        copies = [pkt.copy() for _ in alive]  # an alternative that emits nothing: a drop
        runs = [
            run(i, c) or [c.stop("drop", "no-output")] for i, c in zip(alive, copies, strict=True)
        ]
        return [Alt(tuple(tuple(r) for r in runs))]

    def _live(self, dpid: int, port: int, group_id: int, depth: int = 0) -> bool:
        """Its watched port is live and its watched group has a live bucket."""
        if port != model.OFPP_ANY and not self.live(dpid, port):
            return False
        group = self.wire.tables[dpid].groups.get(group_id)
        if group_id == model.OFPG_ANY or group is None or depth > 16:
            return group_id == model.OFPG_ANY
        return any(self._live(dpid, b.watch_port, b.watch_group, depth + 1) for b in group.buckets)

    # -- across the fabric -------------------------------------------------------------
    def packet(self, src: str, dst: str) -> Fields | None:
        """What ``src`` sends ``dst`` once ARP taught it the address the core hands out for
        ``dst`` (IPv4 TCP, untagged); ``None`` if none was handed out yet (asking the core
        for one would change what it plans)."""
        fabric, nodes = self.wire.fabric, self.wire.graph.nodes
        mac = str(nodes[dst]["mac"])
        host, held = fabric.topo.hosts.get(mac), fabric.book.slot_of.get(mac)
        if host is None or held is None or held[0] != host.dpid or not fabric.book.fixed(host.dpid):
            return None
        address = self.wire.view.address_of(mac)
        if address is None:
            return None
        sent = {"eth_dst": address, "eth_src": nodes[src]["mac"], "ipv4_src": nodes[src]["ip"]}
        sent["ipv4_dst"] = nodes[dst]["ip"]
        return tuple(sorted(({k: as_int(k, str(v)) for k, v in sent.items()} | TCP).items()))

    def walk(self, src: str, dst: str) -> PairWalk:
        """Every branch of ``src``'s packet to ``dst``, from its switch port on."""
        fields = self.packet(src, dst)
        if fields is None:
            return PairWalk("unaddressed", "", "", {}, frozenset(), self.stamp)
        run = _Run(self, dst)
        dpid, port = self.wire.where[src]
        if self.live(dpid, port):
            worlds = run.arrive(dpid, port, fields, (), (), frozenset())
        else:
            worlds = run.bad("lost", (), "its own port is down")
        result = outcome(worlds)
        text = run.parked if result == "controller" else run.failure
        reason = "the packet to the controller" if result == "controller" else run.reason
        return PairWalk(result, text, reason, run.visited, frozenset(run.egress), self.stamp)


def outcome(worlds: Worlds) -> str:
    """The worst of the possible worlds (one per combination of select buckets)."""
    if any(w[0] for w in worlds):
        return "looped"
    if any(w[1] for w in worlds):
        return "lost"
    if any(w[2] == 0 for w in worlds):
        return "controller"
    return "duplicated" if any(w[2] > 1 for w in worlds) else "delivered"


def render(wire: Wire, hops: Hops) -> str:
    """Hop by hop: switch[in->out] (the rules and groups it took)."""
    names = {OFPP_IN_PORT: "IN_PORT", OFPP_CONTROLLER: "CONTROLLER", OFPP_LOCAL: "LOCAL"}
    text = " -> ".join(
        f"{wire.names[d]}[{i}->{'-' if o is None else names.get(o, o)}] ({'; '.join(trail)})"
        for d, i, o, trail in hops
    )
    return text or "(no hop)"


class _Run:
    """One pair's walk in progress, depth first: copies combine, alternatives add worlds."""

    def __init__(self, walker: Walker, dst: str) -> None:
        self.walker, self.wire, self.dst = walker, walker.wire, dst
        self.mac = as_int("eth_dst", self.wire.graph.nodes[dst]["mac"])
        self.visited: dict[int, int] = {}
        self.egress: set[PortRef] = set()
        self.failure = self.reason = self.parked = ""

    def bad(self, kind: str, hops: Hops, reason: str) -> Worlds:
        """A branch that looped, was lost or (kind controller) left the packet itself with
        the controller; the first one of each is kept as text."""
        if kind == "controller":
            self.parked = self.parked or f"{render(self.wire, hops)} => controller: {reason}"
            return CONTROLLER
        if not self.failure:
            self.failure = f"{render(self.wire, hops)} => {kind}: {reason}"
            self.reason = reason
        return frozenset({(kind == "looped", kind == "lost", 0, False)})

    def arrive(
        self, dpid: int, port: int, fields: Fields, tags: Tags, hops: Hops, seen: Seen
    ) -> Worlds:
        key = (dpid, port, fields, tags)
        if key in seen:
            return self.bad("looped", hops, f"back at {self.wire.names[dpid]}:{port}, same header")
        if len(hops) >= self.walker.max_hops:
            return self.bad("looped", hops, f"more than {self.walker.max_hops} hops")
        self.visited[dpid] = self.wire.tables[dpid].version
        items = self.walker.switch_pass(dpid, port, fields, tags)
        return self.items(dpid, port, items, hops, seen | {key})

    def items(self, dpid: int, port: int, items: Iterable[Item], hops: Hops, seen: Seen) -> Worlds:
        """Copies: every combination of their worlds."""
        worlds = NOTHING
        for item in items:
            got = self.item(dpid, port, item, hops, seen)
            worlds = frozenset(
                (a[0] or b[0], a[1] or b[1], min(2, a[2] + b[2]), a[3] or b[3])
                for a in worlds
                for b in got
            )
        return worlds

    def item(self, dpid: int, port: int, item: Item, hops: Hops, seen: Seen) -> Worlds:
        """One copy (or its alternatives' worlds, all of them) followed to its end."""
        if isinstance(item, Alt):
            return frozenset().union(*(self.items(dpid, port, c, hops, seen) for c in item.choices))
        path = (*hops, (dpid, port, item.port if isinstance(item, Out) else None, item.trail))
        if isinstance(item, Stop):
            if item.kind == "controller":
                return (
                    CONTROLLER
                    if item.reason == "a copy"
                    else self.bad("controller", path, item.reason)
                )
            return self.bad("lost", path, f"{item.kind}: {item.reason}")
        ref = (dpid, item.port)
        self.egress.add(ref)
        host, far = self.wire.host_at.get(ref), self.wire.peer.get(ref)
        if ref in self.walker.dead:
            return self.bad("lost", path, f"dead port {item.port}")
        if host is not None and host != self.dst:
            return self.bad("lost", path, f"delivered to {host}, not {self.dst}")
        if host is not None:
            fields = dict(item.fields)
            if fields.get("eth_dst") != self.mac or "vlan_vid" in fields:
                return self.bad("lost", path, "delivered with a header the host drops")
            return DELIVERED
        if far is None:
            return self.bad("lost", path, f"port {item.port} leads nowhere")
        return self.arrive(far[0], far[1], item.fields, item.tags, path, seen)


# -- the reroute check -----------------------------------------------------------------
def nearest_hosts(wire: Wire, dpid: int, rng: random.Random, limit: int) -> list[str]:
    """The ``limit`` hosts fewest switch hops from ``dpid`` (ties in a seeded order)."""
    links: dict[int, list[int]] = {}
    for (a, _), (b, _) in sorted(wire.peer.items()):
        links.setdefault(a, []).append(b)
    hops, frontier = {dpid: 0}, [dpid]
    while frontier:
        step = list(dict.fromkeys(b for a in frontier for b in links.get(a, ()) if b not in hops))
        hops.update((b, hops[frontier[0]] + 1) for b in step)
        frontier = step
    order = {h: (hops.get(wire.where[h][0], len(hops)), rng.random()) for h in wire.hosts}
    return sorted(wire.hosts, key=order.__getitem__)[:limit]


def choose_pairs(walker: Walker, ref: PortRef) -> tuple[dict[Pair, PairWalk], int]:
    """Up to ``CROSSING`` pairs whose walk now leaves by either end of the link at ``ref``
    (senders and receivers drawn near its ends), then random pairs up to ``PAIRS``; seeded
    by the link's switches. Their walks, and how many pairs were tried."""
    wire = walker.wire
    ends = {ref, wire.peer[ref]}
    rng = random.Random("scale_walk " + " ".join(sorted(wire.names[d] for d, _ in ends)))
    near = [nearest_hosts(wire, d, rng, max(16, len(wire.hosts) // 32)) for d, _ in sorted(ends)]
    anyone = wire.hosts
    ways = [(near[0], near[1]), (near[1], near[0]), (near[0], anyone), (anyone, near[0])]
    ways += [(near[1], anyone), (anyone, near[1])]
    chosen: dict[Pair, PairWalk] = {}
    tried: set[Pair] = set()
    for n in range(CANDIDATES + 20 * PAIRS):
        if len(chosen) >= PAIRS:
            break
        crossing = n < CANDIDATES and len(chosen) < CROSSING
        senders, receivers = ways[n % len(ways)] if crossing else (anyone, anyone)
        pair = (rng.choice(senders), rng.choice(receivers))
        if pair[0] != pair[1] and pair not in tried:
            tried.add(pair)
            walk = walker.walk(*pair)
            if walk.outcome != "unaddressed" and (walk.egress & ends or not crossing):
                chosen[pair] = walk
    return chosen, len(tried)


@dataclass
class RerouteWalk:
    """Sampled host pairs walked after every core call that changed a switch or a port,
    from ``start`` to ``stop`` (the wire's ``after_call``): a link's failure and reroute,
    moment by moment. Walk time is the bench's own: told to ``spent`` (kept off the wall
    budget) and frozen away from the collector (so no core call pays a pass for it)."""

    wire: Wire
    ref: PortRef
    spent: Callable[[float], None] | None = None
    moments: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # first branches looped or lost
    parked: list[str] = field(default_factory=list)  # ... that left packets at the controller
    reasons: Counter[str] = field(default_factory=Counter)
    calls: int = 0
    walk_s: float = 0.0

    def __post_init__(self) -> None:
        started = time.perf_counter()
        self.walker = Walker(self.wire)
        self.walks, self.tried = choose_pairs(self.walker, self.ref)
        self.crossing = sum(1 for w in self.walks.values() if w.egress & self._ends())
        self.before = self._count("before the cut")
        self._versions = self._version_sum()
        self._took(started)

    def _ends(self) -> set[PortRef]:
        return {self.ref, self.wire.peer[self.ref]}

    def _version_sum(self) -> int:
        return sum(t.version for t in self.wire.tables.values())

    def _took(self, started: float) -> None:
        heap.after()
        elapsed = time.perf_counter() - started
        self.walk_s += elapsed
        if self.spent is not None:
            self.spent(elapsed)

    def start(self) -> None:
        self.wire.after_call = self._after_call

    def _after_call(self, kind: str) -> None:
        started = time.perf_counter()
        self.calls += 1
        versions, changed = self._version_sum(), self.walker.refresh()
        if changed or versions != self._versions:
            self._versions = versions
            self.moment(f"call {self.calls}: {kind}", started)
        self._took(started)

    def moment(self, label: str, started: float) -> None:
        counts = self._count(label)
        seconds = time.perf_counter() - started
        self.moments.append({"at": label, "sim_s": self.wire.now, **counts, "s": seconds})

    def _count(self, label: str) -> dict[str, int]:
        """Walk every pair again whose walk no longer holds; outcomes counted, and the first
        branch of each way of going wrong kept (what went wrong, not how often)."""
        counts: Counter[str] = Counter()
        for pair, walk in self.walks.items():
            if not self.walker.current(walk):
                walk = self.walks[pair] = self.walker.walk(*pair)
                counts["rewalked"] += 1
            counts[walk.outcome] += 1
            if walk.outcome in UNDELIVERED:
                shown = self.parked if walk.outcome == "controller" else self.failures
                if len(shown) < SHOWN and walk.reason not in self.reasons:
                    shown.append(f"{label}: {pair[0]} -> {pair[1]}: {walk.failure}")
                self.reasons[walk.reason] += 1
        return {k: counts[k] for k in (*OUTCOMES, "rewalked")}

    def stop(self, label: str = "at the end") -> dict[str, Any]:
        """Detach, walk once more, and the figures: per moment and summed over moments
        (pair-moments); the worst moment has the most pairs not delivered."""
        if self.wire.after_call == self._after_call:
            self.wire.after_call = None
        started = time.perf_counter()
        self.walker.refresh()
        self.moment(label, started)
        self._took(started)
        moments, names = self.moments, self.wire.names
        worst = max(moments, key=lambda m: sum(m[k] for k in UNDELIVERED))
        return {
            "link": [f"{names[d]}:{p}" for d, p in (self.ref, self.wire.peer[self.ref])],
            "pairs": len(self.walks),
            "crossing": self.crossing,
            "tried": self.tried,
            "before": self.before,
            "calls": self.calls,
            "moments_walked": len(moments),
            **{k: sum(m[k] for m in moments) for k in UNDELIVERED},
            "worst": {k: worst[k] for k in ("at", *UNDELIVERED)},
            "final": moments[-1],
            "reasons": dict(self.reasons.most_common(10)),
            "failures": self.failures,
            "to_controller": self.parked,
            "walk_s": self.walk_s,
            "moments": moments,
        }
