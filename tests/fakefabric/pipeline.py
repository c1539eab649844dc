"""One switch's OpenFlow 1.3 pipeline run on one packet (spec section 5).

The result is a list of *items*, all of which happen (copies): a :class:`Leaf` is a copy
leaving through a port or ending in the switch; an :class:`Alt` holds mutually exclusive
possibilities (SELECT buckets explored with ``explore_all``), each itself a list of items.
The fabric walk turns items into branches and follows the leaves across links.

Group buckets run on a clone of the packet, so what a bucket changes is not seen by the
actions after the group action (Open vSwitch behaves the same way).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser

from .actions import SET_ORDER, Program, describe_action, port_name, set_key
from .fields import (
    OFPVID_PRESENT,
    display_packet,
    loop_key,
    packet_has_prereqs,
    to_int,
)
from .model import End
from .tables import FlowEntry, GroupEntry, SwitchTables


@dataclass
class Pkt:
    """Header fields as integers, plus VLAN tags under the outermost one (vid, pcp)."""

    fields: dict[str, int]
    inner: tuple[tuple[int, int], ...] = ()

    def copy(self) -> Pkt:
        return Pkt(dict(self.fields), self.inner)

    def display(self) -> dict[str, object]:
        out = display_packet(self.fields)
        if self.inner:
            out["inner_vlans"] = [f"vid={v & 0xFFF},pcp={p}" for v, p in self.inner]
        return out

    def key(self) -> tuple[object, ...]:
        return loop_key(self.fields, self.inner)


@dataclass
class State:
    """Pipeline state of one packet copy: the packet plus what the trace records."""

    pkt: Pkt
    in_port: int
    metadata: int = 0
    queue: int | None = None
    miss_entry: bool = False
    tables: list[int] = field(default_factory=list)
    cookies: list[int] = field(default_factory=list)
    meters: list[int] = field(default_factory=list)
    groups: list[tuple[int, int]] = field(default_factory=list)

    def clone(self) -> State:
        return State(
            self.pkt.copy(),
            self.in_port,
            self.metadata,
            self.queue,
            self.miss_entry,
            list(self.tables),
            list(self.cookies),
            list(self.meters),
            list(self.groups),
        )


@dataclass
class Leaf:
    port: int | None  # physical egress port; None when ``end`` is set
    state: State
    end: End | None = None


@dataclass
class Alt:
    children: list[list[Item]]
    where: str


Item = Leaf | Alt


class Pipeline:
    """Runs packets through one switch. ``live(port)`` says whether a port can forward."""

    def __init__(
        self,
        sw: SwitchTables,
        ports: list[int],
        live: Callable[[int], bool],
        warn: Callable[[str], None],
        note: Callable[[str], None],
        explore_all: bool,
        count_bytes: int | None,
    ):
        self.sw = sw
        self.ports = sorted(ports)
        self.live = live
        self.warn = warn
        self.note = note
        self.explore_all = explore_all
        self.count_bytes = count_bytes  # None: leave counters alone

    @property
    def where(self) -> str:
        return f"{self.sw.name}(dpid {self.sw.dpid})"

    def end(self, state: State, kind: str, reason: str | None, table: int | None = None) -> Leaf:
        end = End(kind, self.sw.dpid, self.sw.name, None, reason, table, state.pkt.display())
        return Leaf(None, state.clone(), end)

    # ---- tables --------------------------------------------------------------------------

    def run(self, pkt: Pkt, in_port: int) -> list[Item]:
        """The full pipeline from table 0 (ingress from a port, or PacketOut to TABLE)."""
        state = State(pkt.copy(), in_port)
        action_set: dict[object, Any] = {}
        items: list[Item] = []
        table_id = 0
        while True:
            entry = self._lookup(table_id, state)
            if entry is None:
                if items:
                    self.note(f"{self.where} table {table_id}: table-miss after earlier outputs")
                    return items
                return [self.end(state, "drop", "table-miss", table_id)]
            prog = self._enter(table_id, entry, state)
            if prog.apply is not None:
                stop = self._actions(prog.apply, state, items)
                if stop is not None:
                    items.append(stop)
                    return items
            _write_actions(prog, action_set)
            if prog.metadata is not None:
                value, mask = prog.metadata
                state.metadata = (state.metadata & ~mask) | (value & mask)
            if prog.goto is None:
                break
            table_id = prog.goto
        return self._run_action_set(action_set, state, items, table_id)

    def _enter(self, table_id: int, entry: FlowEntry, state: State) -> Program:
        """Record the matched entry (and its meter) in the trace; returns its instructions."""
        state.tables.append(table_id)
        state.cookies.append(entry.cookie)
        state.miss_entry = entry.is_table_miss
        prog = entry.program
        if prog.meter is not None:
            if prog.meter not in self.sw.meters:
                raise AssertionError(f"{self.where}: flow uses missing meter {prog.meter}")
            state.meters.append(prog.meter)
        return prog

    def _run_action_set(
        self, action_set: dict[object, Any], state: State, items: list[Item], table_id: int
    ) -> list[Item]:
        """End of the pipeline: the action set runs in spec order; a group drops outputs."""
        ordered = sorted(action_set.values(), key=lambda a: SET_ORDER[type(a)])
        if any(isinstance(a, parser.OFPActionGroup) for a in ordered):
            ordered = [a for a in ordered if not isinstance(a, parser.OFPActionOutput)]
        stop = self._actions(ordered, state, items)
        if stop is not None:
            items.append(stop)
        if not items:
            items.append(self.end(state, "drop", "no-output", table_id))
        return items

    def _lookup(self, table_id: int, state: State) -> FlowEntry | None:
        best = self.sw.lookup(table_id, state.pkt.fields, state.in_port, state.metadata)
        if not best:
            return None
        if len(best) > 1:
            self.warn(
                f"{self.where} table {table_id}: {len(best)} overlapping entries of priority "
                f"{best[0].priority} match (undefined in OpenFlow); used the oldest: "
                + " | ".join(e.describe() for e in best)
            )
        entry = best[0]
        if self.count_bytes is not None:
            if not entry.flags & ofp.OFPFF_NO_PKT_COUNTS:
                entry.packet_count += 1
            if not entry.flags & ofp.OFPFF_NO_BYT_COUNTS:
                entry.byte_count += self.count_bytes
        return entry

    # ---- actions -------------------------------------------------------------------------

    def run_packet_out(self, actions: list[Any], pkt: Pkt, in_port: int) -> list[Item]:
        state = State(pkt.copy(), in_port)
        items: list[Item] = []
        stop = self._actions(actions, state, items)
        if stop is not None:
            items.append(stop)
        if not items:
            items.append(self.end(state, "drop", "no-output"))
        return items

    def _actions(self, actions: list[Any], state: State, items: list[Item]) -> Leaf | None:
        """Run an action list in order, appending emitted copies; a Leaf if the packet died."""
        for a in actions:
            if isinstance(a, parser.OFPActionOutput):
                items.extend(self._output(a.port, state))
            elif isinstance(a, parser.OFPActionGroup):
                items.extend(self._group(self.sw.groups[a.group_id], state.clone()))
            elif isinstance(a, parser.OFPActionSetQueue):
                state.queue = a.queue_id
            elif isinstance(a, parser.OFPActionSetField):
                self._set_field(state, a)
            elif isinstance(a, parser.NXActionRegMove):
                self._move(state, a)
            elif isinstance(a, parser.OFPActionPushVlan):
                _push_vlan(state.pkt)
            elif isinstance(a, parser.OFPActionPopVlan):
                self._pop_vlan(state.pkt)
            elif isinstance(a, parser.OFPActionDecNwTtl | parser.OFPActionSetNwTtl):
                stop = self._ttl(a, state)
                if stop is not None:
                    return stop
            else:  # validated on install; anything else is a bug here
                raise AssertionError(f"unexpected action {a!r}")
        return None

    def _pop_vlan(self, pkt: Pkt) -> None:
        """Remove the outer tag; the next inner one, if any, becomes the outer."""
        fields = pkt.fields
        if "vlan_vid" not in fields:
            self.warn(f"{self.where}: pop_vlan on an untagged packet")
        elif pkt.inner:
            (fields["vlan_vid"], fields["vlan_pcp"]), *rest = pkt.inner
            pkt.inner = tuple(rest)
        else:
            del fields["vlan_vid"], fields["vlan_pcp"]

    def _ttl(self, a: Any, state: State) -> Leaf | None:
        """set_nw_ttl or dec_nw_ttl; a Leaf if the TTL expired and the packet died."""
        fields = state.pkt.fields
        if not packet_has_prereqs(fields, "ip_ttl"):
            self.warn(f"{self.where}: {describe_action(a)} on a non-IP packet")
            return None
        if isinstance(a, parser.OFPActionSetNwTtl):
            fields["ip_ttl"] = a.nw_ttl
            return None
        ttl = fields.get("ip_ttl", 64)
        if ttl <= 1:
            return self.end(state, "drop", "ttl-expired")
        fields["ip_ttl"] = ttl - 1
        return None

    def _set_field(self, state: State, a: Any) -> None:
        field_name, fields = a.key, state.pkt.fields
        tagged = "vlan_vid" in fields
        present = tagged if field_name in ("vlan_vid", "vlan_pcp") else True
        if not present or not packet_has_prereqs(fields, field_name):
            self.warn(f"{self.where}: {describe_action(a)} on a packet without that header")
            return
        fields[field_name] = to_int(field_name, a.value)

    def _move(self, state: State, a: Any) -> None:
        fields = state.pkt.fields
        if a.src_field not in fields or not packet_has_prereqs(fields, a.dst_field):
            self.warn(f"{self.where}: {describe_action(a)} on a packet without that header")
            return
        fields[a.dst_field] = fields[a.src_field]

    def _output(self, port: int, state: State) -> list[Item]:
        if port == ofp.OFPP_IN_PORT:
            if state.in_port not in self.ports:
                self.warn(f"{self.where}: output:IN_PORT with in_port {port_name(state.in_port)}")
                return [self.end(state, "drop", "bad-in-port")]
            return [Leaf(state.in_port, state.clone())]
        if port in (ofp.OFPP_FLOOD, ofp.OFPP_ALL):
            ports = [p for p in self.ports if p != state.in_port and self.live(p)]
            return [Leaf(p, state.clone()) for p in ports]
        if port == ofp.OFPP_CONTROLLER:
            reason = "no-match" if state.miss_entry else "action"
            return [self.end(state, "controller", reason)]
        if port == ofp.OFPP_LOCAL:
            return [self.end(state, "local", None)]
        if port == ofp.OFPP_TABLE:  # PacketOut only (checked on send)
            return self.run(state.pkt, state.in_port)
        if port == state.in_port:
            self.warn(f"{self.where}: output:{port} is the in_port; use OFPP_IN_PORT (dropped)")
            return [self.end(state, "drop", "in-port")]
        return [Leaf(port, state.clone())]

    # ---- groups --------------------------------------------------------------------------

    def _group(self, group: GroupEntry, state: State) -> list[Item]:
        gid, buckets = group.group_id, group.buckets
        if group.type == ofp.OFPGT_ALL:
            out: list[Item] = []
            for i, b in enumerate(buckets):
                out.extend(self._bucket(group, i, b, state.clone()))
            return out
        if group.type == ofp.OFPGT_INDIRECT:
            return self._bucket(group, 0, buckets[0], state)
        if group.type == ofp.OFPGT_FF:
            for i, b in enumerate(buckets):
                if self._bucket_live(b):
                    return self._bucket(group, i, b, state)
            return [self.end(state, "drop", "ff-no-live-bucket")]
        alive = [i for i, b in enumerate(buckets) if self._bucket_live(b)]
        live = [i for i in alive if buckets[i].weight > 0]
        if alive and not live:
            # OpenFlow shares traffic by weight/sum(weights), so weight 0 is never used; Open
            # vSwitch would still take its last live bucket. Ryu's OFPBucket defaults weight=0.
            self.warn(f"{self.where}: select group {gid} has live buckets, all of weight 0")
            return [self.end(state, "drop", "select-zero-weight")]
        if not live:
            return [self.end(state, "drop", "select-no-live-bucket")]
        if self.explore_all and len(live) > 1:
            children = []
            for i in live:
                st = state.clone()  # an alternative that emits nothing still is one: a drop
                emitted = self._bucket(group, i, buckets[i], st)
                children.append(emitted or [self.end(st, "drop", "no-output")])
            return [Alt(children, f"{self.sw.name} group {gid}")]
        i = self._pick(live, buckets, state.pkt.fields)
        return self._bucket(group, i, buckets[i], state)

    def _bucket(self, group: GroupEntry, index: int, bucket: Any, state: State) -> list[Item]:
        state.groups.append((group.group_id, index))
        items: list[Item] = []
        stop = self._actions(list(bucket.actions or ()), state, items)
        if stop is not None:
            items.append(stop)
        return items

    def _bucket_live(self, bucket: Any, depth: int = 0) -> bool:
        """Live iff the watched port is live and the watched group has a live bucket."""
        if bucket.watch_port != ofp.OFPP_ANY and not self.live(bucket.watch_port):
            return False
        if bucket.watch_group != ofp.OFPG_ANY:
            group = self.sw.groups.get(bucket.watch_group)
            if group is None or depth > 16:
                return False
            return any(self._bucket_live(b, depth + 1) for b in group.buckets)
        return True

    def _pick(self, live: list[int], buckets: list[Any], fields: dict[str, int]) -> int:
        """A stable, weighted choice from the 5-tuple and dpid (crc32, never ``hash()``)."""
        if "ip_proto" in fields:
            names = ["ipv4_src", "ipv6_src", "ipv4_dst", "ipv6_dst", "ip_proto"]
            names += ["tcp_src", "udp_src", "sctp_src", "tcp_dst", "udp_dst", "sctp_dst"]
        else:
            names = ["eth_src", "eth_dst", "eth_type"]
        key = f"{self.sw.dpid}|" + "|".join(f"{n}={fields[n]}" for n in names if n in fields)
        total = sum(buckets[i].weight for i in live)
        point = zlib.crc32(key.encode()) % total
        for i in live:
            point -= buckets[i].weight
            if point < 0:
                return i
        raise AssertionError("unreachable")


def _write_actions(prog: Program, action_set: dict[object, Any]) -> None:
    """clear_actions, then write_actions into the action set (one action per ``set_key``)."""
    if prog.clear:
        action_set.clear()
    for action in prog.write or ():
        action_set.pop(set_key(action), None)
        action_set[set_key(action)] = action


def _push_vlan(pkt: Pkt) -> None:
    """Push a tag: a copy of the outer one (which moves inside), else VID 0 and PCP 0."""
    fields = pkt.fields
    if "vlan_vid" in fields:
        pkt.inner = ((fields["vlan_vid"], fields["vlan_pcp"]), *pkt.inner)
    else:
        fields["vlan_vid"], fields["vlan_pcp"] = OFPVID_PRESENT, 0
