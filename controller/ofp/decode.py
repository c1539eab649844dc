"""Ryu messages -> domain events."""

from __future__ import annotations

from typing import Any

from controller.model import (
    Action,
    Bucket,
    CopyField,
    FlowRule,
    FlowStats,
    GroupAction,
    GroupRule,
    GroupStats,
    GroupType,
    Match,
    MeterRule,
    Output,
    PacketIn,
    PopVlan,
    PortDesc,
    PortStats,
    PushVlan,
    SetField,
    SetQueue,
    StatsKind,
)
from controller.ofp.compat import ofp
from controller.ofp.frames import decode


def port_desc(p: Any) -> PortDesc:
    """An ``OFPPort`` as a ``PortDesc``: up means link up and not administratively down."""
    up = not (p.state & ofp.OFPPS_LINK_DOWN) and not (p.config & ofp.OFPPC_PORT_DOWN)
    name = p.name.decode(errors="replace") if isinstance(p.name, bytes) else str(p.name)
    return PortDesc(p.port_no, str(p.hw_addr), name, up, int(getattr(p, "curr_speed", 0)))


def port_status_deleted(msg: Any) -> bool:
    return bool(msg.reason == ofp.OFPPR_DELETE)


def packet_in(dpid: int, msg: Any) -> PacketIn:
    data = bytes(msg.data)
    return PacketIn(
        dpid, int(msg.match.get("in_port", 0)), decode(data), data, msg.table_id, msg.cookie
    )


def port_stats(body: list[Any]) -> list[PortStats]:
    return [
        PortStats(
            s.port_no,
            s.rx_bytes,
            s.tx_bytes,
            s.rx_packets,
            s.tx_packets,
            s.rx_dropped,
            s.tx_dropped,
            s.rx_errors,
            s.tx_errors,
            _uptime(s),
        )
        for s in body
    ]


UNKNOWN_DURATION = 0xFFFFFFFF  # OpenFlow 1.3: a switch that does not keep port durations


def _uptime(s: Any) -> float | None:
    sec = getattr(s, "duration_sec", UNKNOWN_DURATION)
    nsec = getattr(s, "duration_nsec", UNKNOWN_DURATION)
    if sec == UNKNOWN_DURATION or nsec == UNKNOWN_DURATION:
        return None
    return float(sec) + nsec / 1e9


def flow_stats(body: list[Any]) -> list[FlowStats]:
    return [
        FlowStats(
            s.table_id,
            s.priority,
            Match.of(**dict(s.match.items())),
            s.cookie,
            s.packet_count,
            s.byte_count,
        )
        for s in body
    ]


def group_stats(body: list[Any]) -> list[GroupStats]:
    return [
        GroupStats(
            s.group_id,
            tuple(b.packet_count for b in s.bucket_stats),
            tuple(b.byte_count for b in s.bucket_stats),
        )
        for s in body
    ]


# -- a switch's whole state, read back after it (re)connects -------------------------

GROUP_TYPES = {
    ofp.OFPGT_ALL: GroupType.ALL,
    ofp.OFPGT_SELECT: GroupType.SELECT,
    ofp.OFPGT_INDIRECT: GroupType.INDIRECT,
    ofp.OFPGT_FF: GroupType.FAST_FAILOVER,
}


def action(a: Any) -> Action | None:
    """A Ryu action as a domain action; ``None`` for one Loom never writes."""
    name = type(a).__name__
    if name == "OFPActionOutput":
        max_len = (
            None
            if a.max_len == ofp.OFPCML_NO_BUFFER or a.port != ofp.OFPP_CONTROLLER
            else a.max_len
        )
        return Output(a.port, max_len)
    if name == "OFPActionGroup":
        return GroupAction(a.group_id)
    if name == "OFPActionSetField":
        return SetField(a.key, a.value)
    if name == "NXActionRegMove" and a.src_ofs == a.dst_ofs == 0:
        return CopyField(a.src_field, a.dst_field)
    if name == "OFPActionSetQueue":
        return SetQueue(a.queue_id)
    if name == "OFPActionPushVlan":
        return PushVlan(a.ethertype)
    if name == "OFPActionPopVlan":
        return PopVlan()
    return None


def _actions(acts: list[Any]) -> tuple[Action, ...] | None:
    out = [action(a) for a in acts]
    return None if any(a is None for a in out) else tuple(a for a in out if a is not None)


def flow_rule(s: Any) -> FlowRule | None:
    """An installed flow entry as a ``FlowRule`` (``None``: not something Loom writes)."""
    actions: tuple[Action, ...] = ()
    goto = meta = meter = None
    for inst in s.instructions:
        name = type(inst).__name__
        if name == "OFPInstructionActions" and inst.type == ofp.OFPIT_APPLY_ACTIONS:
            acts = _actions(inst.actions)
            if acts is None:
                return None
            actions = acts
        elif name == "OFPInstructionGotoTable":
            goto = inst.table_id
        elif name == "OFPInstructionWriteMetadata":
            meta = (inst.metadata, inst.metadata_mask)
        elif name == "OFPInstructionMeter":
            meter = inst.meter_id
        else:
            return None
    match = Match.of(**dict(s.match.items()))
    return FlowRule(
        s.table_id,
        s.priority,
        match,
        actions,
        goto,
        meta,
        meter,
        s.cookie,
        s.idle_timeout,
        s.hard_timeout,
    )


def group_rule(s: Any) -> GroupRule | None:
    kind = GROUP_TYPES.get(s.type)
    buckets = []
    for b in s.buckets:
        acts = _actions(b.actions)
        if kind is None or acts is None:
            return None
        buckets.append(Bucket(acts, b.weight, b.watch_port, b.watch_group))
    return GroupRule(s.group_id, kind, tuple(buckets)) if kind else None


def meter_rule(s: Any) -> MeterRule | None:
    bands = [b for b in s.bands if type(b).__name__ == "OFPMeterBandDrop"]
    per_packet = bool(s.flags & ofp.OFPMF_PKTPS)
    if len(bands) != 1 or not (per_packet or s.flags & ofp.OFPMF_KBPS):
        return None
    return MeterRule(s.meter_id, bands[0].rate, bands[0].burst_size, per_packet)


class StateReads:
    """Collects the multipart replies to the requests that read a switch's contents
    (flows, groups, meters), so the core gets them complete and at once."""

    KINDS = {
        StatsKind.FLOW: "flows",
        StatsKind.GROUP_DESC: "groups",
        StatsKind.METER_CONFIG: "meters",
    }

    def __init__(self) -> None:
        self.pending: dict[int, dict[int, str]] = {}  # dpid -> xid -> part
        self.parts: dict[int, dict[str, list[Any]]] = {}
        self.done: dict[int, set[str]] = {}

    def expect(self, dpid: int, xid: int, kind: StatsKind) -> None:
        if not self.pending.get(dpid):
            self.parts[dpid], self.done[dpid] = {"flows": [], "groups": [], "meters": []}, set()
        self.pending.setdefault(dpid, {})[xid] = self.KINDS[kind]

    def take(self, msg: Any, part: str) -> bool:
        """Keep a reply if it answers one of our reads; True when it did."""
        dpid = msg.datapath.id
        if self.pending.get(dpid, {}).get(msg.xid) != part:
            return False
        self.parts[dpid][part].extend(msg.body)
        if not msg.flags & ofp.OFPMPF_REPLY_MORE:
            self.done[dpid].add(part)
            del self.pending[dpid][msg.xid]
        return True

    def complete(self, dpid: int) -> tuple[list[FlowRule], list[GroupRule], list[MeterRule]] | None:
        if self.done.get(dpid) != {"flows", "groups", "meters"}:
            return None
        parts = self.parts.pop(dpid)
        self.done.pop(dpid)
        flows = [r for r in map(flow_rule, parts["flows"]) if r is not None]
        groups = [g for g in map(group_rule, parts["groups"]) if g is not None]
        meters = [m for m in map(meter_rule, parts["meters"]) if m is not None]
        return flows, groups, meters
