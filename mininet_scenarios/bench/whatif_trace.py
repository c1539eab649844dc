"""Paths read from the rules the core installed: a packet traced through the fake wire's
switch tables (:class:`~mininet_scenarios.bench.scale_wire.SwitchTable`).

Why trace instead of asking the core for its routes: the prediction must hold for what
the switches would do, so a rule the core got wrong shows up as a wrong path (or as a
:class:`TraceError`), not as the path the core meant. Each switch runs the OpenFlow 1.3
pipeline on the rules it holds: from table 0, the highest-priority matching rule of each
table (masks honoured), its apply-actions in order (set-field rewrites the packet, VLAN
push and pop, groups), write-metadata, then goto; no goto ends the pipeline and the
packet leaves by the port it was output to. Metadata starts at zero at every switch.

Groups: fast-failover takes its first bucket whose watched port is up; select hashes
the flow, as a switch does, modelled as a BLAKE2b digest of the switch, the 5-tuple and a
per-draw ``salt`` (so a draw is one possible set of hash functions, and every draw is
reproducible) over the live buckets by weight. The hash must mix: CRC32 is affine in its
input, so with the salt at the end of equal-length keys every salt would flip the same
flows together, and two flows that collide in one draw would collide in all. A copy to
the controller with a length bound (a flow's first packets for traffic engineering) is
not forwarding and is ignored; a packet whose only way out is the controller, that no
rule forwards, that leaves by more than one port or that comes back to a port it
crossed is a :class:`TraceError`.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from controller.addressing import mac_int
from controller.model import (
    ETH_TYPE_IPV4,
    OFPP_ANY,
    OFPP_CONTROLLER,
    OFPP_IN_PORT,
    FlowRule,
    GroupAction,
    GroupRule,
    GroupType,
    MatchValue,
    Output,
    PopVlan,
    PushVlan,
    SetField,
)
from mininet_scenarios.bench.scale_wire import Wire

IP_PROTO_TCP = 6
OFPVID_PRESENT = 0x1000
MAX_HOPS = 64  # switches on a path: more is a loop the visited ports did not catch


class TraceError(Exception):
    """The rules do not deliver the packet: looped, dropped, punted or multicast."""


@dataclass(frozen=True)
class Flow5:
    """One flow as the sender puts it on the wire: hosts by graph name, TCP ports."""

    src: str
    dst: str
    sport: int
    dport: int


def field_int(name: str, value: MatchValue | str | int) -> int:
    """A match or set-field value as the integer a switch compares."""
    if isinstance(value, int):
        return value
    if isinstance(value, str) and name in ("eth_src", "eth_dst", "arp_sha", "arp_tha"):
        return mac_int(value)
    if isinstance(value, str) and name in ("ipv4_src", "ipv4_dst", "arp_spa", "arp_tpa"):
        return int(ipaddress.IPv4Address(value))
    raise TraceError(f"cannot read the value {value!r} of match field {name}")


Signature = tuple[tuple[str, int | None], ...]  # (field, mask or None for exact)


class TableIndex:
    """One flow table as a tuple-space classifier: rules grouped by priority and by which
    fields they match under which masks, each group a dict of masked values, so a lookup
    costs a few dict probes however many rules the table holds."""

    def __init__(self, rules: Iterable[FlowRule]) -> None:
        levels: dict[int, dict[Signature, dict[tuple[int, ...], FlowRule]]] = {}
        for rule in rules:
            sig: list[tuple[str, int | None]] = []
            key: list[int] = []
            for name, value in rule.match.fields:
                if isinstance(value, tuple):
                    mask = field_int(name, value[1])
                    sig.append((name, mask))
                    key.append(field_int(name, value[0]) & mask)
                else:
                    sig.append((name, None))
                    key.append(field_int(name, value))
            bucket = levels.setdefault(rule.priority, {}).setdefault(tuple(sig), {})
            if tuple(key) in bucket:
                raise TraceError(f"two rules match the same packets at one priority: {rule}")
            bucket[tuple(key)] = rule
        self.levels = [
            (prio, sorted(levels[prio].items(), key=repr)) for prio in sorted(levels, reverse=True)
        ]

    def lookup(self, pkt: dict[str, int]) -> FlowRule | None:
        for _, groups in self.levels:
            found: FlowRule | None = None
            for sig, rules in groups:
                key: list[int] = []
                for name, mask in sig:
                    value = pkt.get(name)
                    if value is None:
                        break
                    key.append(value if mask is None else value & mask)
                else:
                    rule = rules.get(tuple(key))
                    if rule is not None and found is not None and rule is not found:
                        raise TraceError(f"two rules of priority {rule.priority} match: {rule}")
                    found = rule or found
            if found is not None:
                return found
        return None


class Tracer:
    """Traces flows through what ``wire``'s switches hold now; build a new one after the
    rules change (each switch's tables are indexed on first use)."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.index: dict[tuple[int, int], TableIndex] = {}
        self.hashed = False  # whether any trace went through a select group

    def _table(self, dpid: int, table: int) -> TableIndex:
        got = self.index.get((dpid, table))
        if got is None:
            for t in {k[0] for k in self.wire.tables[dpid].flows}:
                rules = (r for r in self.wire.tables[dpid].flows.values() if r.table == t)
                self.index[(dpid, t)] = TableIndex(rules)
            got = self.index.setdefault((dpid, table), TableIndex(()))
        return got

    def packet(self, flow: Flow5) -> dict[str, int]:
        """What ``flow.src`` sends: its own MAC, the Loom address the core hands out for
        the destination (what its ARP learned), IPv4 TCP, DSCP 0, no VLAN tag."""
        g = self.wire.graph
        src, dst = g.nodes[flow.src], g.nodes[flow.dst]
        address = self.wire.view.address_of(str(dst["mac"]))
        if address is None:
            raise TraceError(f"the core gives no address for {flow.dst}: not learned")
        return {
            "eth_src": mac_int(str(src["mac"])),
            "eth_dst": mac_int(address),
            "eth_type": ETH_TYPE_IPV4,
            "vlan_vid": 0,
            "ipv4_src": field_int("ipv4_src", str(src["ip"])),
            "ipv4_dst": field_int("ipv4_dst", str(dst["ip"])),
            "ip_proto": IP_PROTO_TCP,
            "ip_dscp": 0,
            "tcp_src": flow.sport,
            "tcp_dst": flow.dport,
        }

    def trace(self, flow: Flow5, salt: int = 0) -> list[tuple[int, int]]:
        """The ports ``flow`` leaves by, in order, each as (dpid, port); raises
        :class:`TraceError` unless it reaches ``flow.dst`` with its real MAC."""
        wire = self.wire
        pkt = self.packet(flow)
        five = f"{flow.src}>{flow.dst}:{flow.sport}>{flow.dport}/{salt}"
        dpid, port = wire.where[flow.src]
        seen: set[tuple[int, int]] = set()
        out: list[tuple[int, int]] = []
        while len(out) < MAX_HOPS:
            if (dpid, port) in seen:
                raise TraceError(f"{five}: loops back to {wire.names[dpid]} port {port}")
            seen.add((dpid, port))
            pkt["in_port"], pkt["metadata"] = port, 0
            egress = (dpid, self._switch(dpid, pkt, five))
            out.append(egress)
            host = wire.host_at.get(egress)
            if host is not None:
                real = mac_int(str(wire.graph.nodes[flow.dst]["mac"]))
                if host != flow.dst or pkt["eth_dst"] != real:
                    raise TraceError(f"{five}: delivered to {host}, eth_dst {pkt['eth_dst']:x}")
                return out
            far = wire.peer.get(egress)
            if far is None or egress in wire.down:
                raise TraceError(f"{five}: {wire.names[dpid]} sends it out of dead port {port}")
            dpid, port = far
        raise TraceError(f"{five}: more than {MAX_HOPS} hops")

    def _switch(self, dpid: int, pkt: dict[str, int], five: str) -> int:
        """One switch's pipeline: the port the packet leaves by."""
        outputs: list[Output] = []
        table: int | None = 0
        while table is not None:
            rule = self._table(dpid, table).lookup(pkt)
            if rule is None:
                raise TraceError(f"{five}: no rule in table {table} of {self.wire.names[dpid]}")
            self._apply(dpid, rule.actions, pkt, outputs, five)
            if rule.write_metadata is not None:
                value, mask = rule.write_metadata
                pkt["metadata"] = (pkt["metadata"] & ~mask) | (value & mask)
            table = rule.goto
        ports = [o.port for o in outputs if o.port != OFPP_CONTROLLER]
        punted = any(o.port == OFPP_CONTROLLER and o.max_len is None for o in outputs)
        name = self.wire.names[dpid]
        if len(ports) == 1:
            return pkt["in_port"] if ports[0] == OFPP_IN_PORT else ports[0]
        if ports:
            raise TraceError(f"{five}: {name} sends it out of {len(ports)} ports")
        raise TraceError(f"{five}: {name} {'sends it to the controller' if punted else 'drops it'}")

    def _apply(
        self,
        dpid: int,
        actions: Iterable[object],
        pkt: dict[str, int],
        outputs: list[Output],
        five: str,
    ) -> None:
        for action in actions:
            if isinstance(action, Output):
                outputs.append(action)
            elif isinstance(action, SetField):
                pkt[action.field] = field_int(action.field, action.value)
            elif isinstance(action, PushVlan):
                pkt["vlan_vid"] = OFPVID_PRESENT
            elif isinstance(action, PopVlan):
                pkt["vlan_vid"] = 0
            elif isinstance(action, GroupAction):
                group = self.wire.tables[dpid].groups.get(action.group_id)
                if group is None:
                    raise TraceError(f"{five}: group {action.group_id:#x} is not installed")
                bucket = self._bucket(dpid, group, five)
                self._apply(dpid, bucket, pkt, outputs, five)
            # SetQueue: a queue, not a path

    def _bucket(self, dpid: int, group: GroupRule, five: str) -> tuple[object, ...]:
        live = [
            b
            for b in group.buckets
            if b.watch_port == OFPP_ANY or (dpid, b.watch_port) not in self.wire.down
        ]
        if not live:
            raise TraceError(f"{five}: group {group.group_id:#x} has no live bucket")
        if group.type is GroupType.FAST_FAILOVER or group.type is GroupType.INDIRECT:
            return live[0].actions
        if group.type is not GroupType.SELECT:
            raise TraceError(f"{five}: group {group.group_id:#x} copies the packet")
        self.hashed = True
        weights = [max(b.weight, 0) for b in live]
        weights = weights if sum(weights) else [1] * len(live)
        digest = hashlib.blake2b(f"{dpid}/{five}".encode(), digest_size=8).digest()
        pick = int.from_bytes(digest, "big") % sum(weights)
        for bucket, weight in zip(live, weights, strict=True):
            pick -= weight
            if pick < 0:
                return bucket.actions
        raise AssertionError("unreachable: the pick is below the sum of the weights")
