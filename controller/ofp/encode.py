"""Domain messages -> Ryu OpenFlow 1.3 parser messages (the only rule encoder)."""

from __future__ import annotations

import functools
from typing import Any

from controller.model import (
    OFPP_CONTROLLER,
    Action,
    Bucket,
    ClearSwitch,
    CopyField,
    FlowMod,
    FlowRule,
    GroupAction,
    GroupMod,
    GroupType,
    Match,
    Message,
    MeterMod,
    Op,
    Output,
    PacketOut,
    PopVlan,
    PushVlan,
    SetField,
    SetQueue,
    StatsKind,
    StatsRequest,
)
from controller.ofp.compat import ofp, parser
from controller.ofp.frames import frame_bytes

GROUP_TYPES = {
    GroupType.ALL: ofp.OFPGT_ALL,
    GroupType.SELECT: ofp.OFPGT_SELECT,
    GroupType.INDIRECT: ofp.OFPGT_INDIRECT,
    GroupType.FAST_FAILOVER: ofp.OFPGT_FF,
}
FLOW_COMMANDS = {
    Op.ADD: ofp.OFPFC_ADD,
    Op.MODIFY: ofp.OFPFC_MODIFY_STRICT,
    Op.DELETE: ofp.OFPFC_DELETE_STRICT,
}
GROUP_COMMANDS = {Op.ADD: ofp.OFPGC_ADD, Op.MODIFY: ofp.OFPGC_MODIFY, Op.DELETE: ofp.OFPGC_DELETE}
# Widths of the fields Loom copies whole (Open vSwitch's move takes a bit count).
COPY_BITS = {
    "eth_src": 48,
    "eth_dst": 48,
    "arp_sha": 48,
    "arp_tha": 48,
    "arp_spa": 32,
    "arp_tpa": 32,
}
METER_COMMANDS = {Op.ADD: ofp.OFPMC_ADD, Op.MODIFY: ofp.OFPMC_MODIFY, Op.DELETE: ofp.OFPMC_DELETE}


def action(act: Action) -> Any:
    if isinstance(act, Output):
        if act.port != OFPP_CONTROLLER:
            return parser.OFPActionOutput(act.port, 0)
        max_len = ofp.OFPCML_NO_BUFFER if act.max_len is None else act.max_len
        return parser.OFPActionOutput(act.port, max_len)
    if isinstance(act, GroupAction):
        return parser.OFPActionGroup(act.group_id)
    if isinstance(act, SetField):
        return parser.OFPActionSetField(**{act.field: act.value})
    if isinstance(act, CopyField):
        bits = COPY_BITS[act.src]
        return parser.NXActionRegMove(src_field=act.src, dst_field=act.dst, n_bits=bits)
    if isinstance(act, SetQueue):
        return parser.OFPActionSetQueue(act.queue_id)
    if isinstance(act, PushVlan):
        return parser.OFPActionPushVlan(act.ethertype)
    if isinstance(act, PopVlan):
        return parser.OFPActionPopVlan()
    raise TypeError(f"no OpenFlow encoding for action {act!r}")


# Building Ryu's match and instruction objects costs several times what serializing them
# does (every field is normalized through its text form), and the same matches and
# actions recur on every switch of a fabric: each is built once. Ryu only reads them
# when it serializes a message, so one object serves every message that carries it.
ENCODED_CACHE = 1 << 15


@functools.lru_cache(maxsize=ENCODED_CACHE)
def match(m: Match) -> Any:
    return parser.OFPMatch(**m.as_dict())


@functools.lru_cache(maxsize=ENCODED_CACHE)
def _instructions(
    meter: int | None,
    actions: tuple[Action, ...],
    write_metadata: tuple[int, int] | None,
    goto: int | None,
) -> tuple[Any, ...]:
    out: list[Any] = []
    if meter is not None:
        out.append(parser.OFPInstructionMeter(meter, ofp.OFPIT_METER))
    if actions:
        out.append(
            parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [action(a) for a in actions])
        )
    if write_metadata is not None:
        out.append(parser.OFPInstructionWriteMetadata(*write_metadata))
    if goto is not None:
        out.append(parser.OFPInstructionGotoTable(int(goto)))
    return tuple(out)


def instructions(rule: FlowRule) -> list[Any]:
    goto = None if rule.goto is None else int(rule.goto)
    return list(_instructions(rule.meter, rule.actions, rule.write_metadata, goto))


def flow_mod(dp: Any, msg: FlowMod) -> Any:
    rule = msg.rule
    return parser.OFPFlowMod(
        dp,
        cookie=rule.cookie,
        table_id=int(rule.table),
        command=FLOW_COMMANDS[msg.op],
        idle_timeout=rule.idle_timeout,
        hard_timeout=rule.hard_timeout,
        priority=rule.priority,
        buffer_id=ofp.OFP_NO_BUFFER,
        out_port=ofp.OFPP_ANY,
        out_group=ofp.OFPG_ANY,
        match=match(rule.match),
        instructions=[] if msg.op is Op.DELETE else instructions(rule),
    )


def bucket(b: Bucket, group_type: GroupType) -> Any:
    """Weights exist only for select groups: OVS rejects them on any other type."""
    weight = b.weight if group_type is GroupType.SELECT else 0
    return parser.OFPBucket(weight, b.watch_port, b.watch_group, [action(a) for a in b.actions])


def group_mod(dp: Any, msg: GroupMod) -> Any:
    g = msg.group
    buckets = [] if msg.op is Op.DELETE else [bucket(b, g.type) for b in g.buckets]
    return parser.OFPGroupMod(dp, GROUP_COMMANDS[msg.op], GROUP_TYPES[g.type], g.group_id, buckets)


def meter_mod(dp: Any, msg: MeterMod) -> Any:
    m = msg.meter
    unit = ofp.OFPMF_PKTPS if m.per_packet else ofp.OFPMF_KBPS
    flags = unit | (ofp.OFPMF_BURST if m.burst else 0)
    bands = (
        [] if msg.op is Op.DELETE else [parser.OFPMeterBandDrop(rate=m.rate, burst_size=m.burst)]
    )
    return parser.OFPMeterMod(dp, METER_COMMANDS[msg.op], flags, m.meter_id, bands)


def packet_out(dp: Any, msg: PacketOut) -> Any:
    return parser.OFPPacketOut(
        dp,
        buffer_id=ofp.OFP_NO_BUFFER,
        in_port=msg.in_port,
        actions=[action(a) for a in msg.actions],
        data=frame_bytes(msg.frame),
    )


def clear_switch(dp: Any) -> list[Any]:
    """Delete every flow, group and meter, then fence with a barrier."""
    return [
        parser.OFPFlowMod(
            dp,
            table_id=ofp.OFPTT_ALL,
            command=ofp.OFPFC_DELETE,
            out_port=ofp.OFPP_ANY,
            out_group=ofp.OFPG_ANY,
            match=parser.OFPMatch(),
        ),
        parser.OFPGroupMod(dp, ofp.OFPGC_DELETE, 0, ofp.OFPG_ALL, []),
        parser.OFPMeterMod(dp, ofp.OFPMC_DELETE, 0, ofp.OFPM_ALL, []),
        parser.OFPBarrierRequest(dp),
    ]


def barrier(dp: Any) -> Any:
    """A barrier request: its reply means the switch has processed everything sent before."""
    return parser.OFPBarrierRequest(dp)


def stats_request(dp: Any, msg: StatsRequest) -> Any:
    if msg.kind is StatsKind.PORT:
        return parser.OFPPortStatsRequest(dp, 0, ofp.OFPP_ANY)
    if msg.kind is StatsKind.GROUP:
        return parser.OFPGroupStatsRequest(dp, 0, ofp.OFPG_ALL)
    if msg.kind is StatsKind.GROUP_DESC:
        return parser.OFPGroupDescStatsRequest(dp, 0)
    if msg.kind is StatsKind.METER_CONFIG:
        return parser.OFPMeterConfigStatsRequest(dp, 0, ofp.OFPM_ALL)
    table = ofp.OFPTT_ALL if msg.table is None else int(msg.table)
    return parser.OFPFlowStatsRequest(
        dp, 0, table, ofp.OFPP_ANY, ofp.OFPG_ANY, msg.cookie, msg.cookie_mask, parser.OFPMatch()
    )


def encode(dp: Any, msg: Message) -> list[Any]:
    """One domain message as the Ryu messages that carry it (``dp`` may be None in tests)."""
    if isinstance(msg, FlowMod):
        return [flow_mod(dp, msg)]
    if isinstance(msg, GroupMod):
        return [group_mod(dp, msg)]
    if isinstance(msg, MeterMod):
        return [meter_mod(dp, msg)]
    if isinstance(msg, PacketOut):
        return [packet_out(dp, msg)]
    if isinstance(msg, ClearSwitch):
        return clear_switch(dp)
    if isinstance(msg, StatsRequest):
        return [stats_request(dp, msg)]
    raise TypeError(f"no OpenFlow encoding for {msg!r}")


def role_request(dp: Any, master: bool, generation: int) -> Any:
    """Ask to be ``dp``'s master (or a slave) with a generation id: the switch refuses
    one older than the newest it has seen (OFPRRFC_STALE), so a stale master cannot
    take a switch back."""
    role = ofp.OFPCR_ROLE_MASTER if master else ofp.OFPCR_ROLE_SLAVE
    return parser.OFPRoleRequest(dp, role, generation & 0xFFFFFFFFFFFFFFFF)


def async_config(dp: Any) -> Any:
    """Packet-ins and port status also while a slave, so every instance of a cluster
    learns the whole fabric (discovery frames, hosts, first packets) and can take over
    any switch without relearning it; flow removals only as master."""
    packet_in = 1 << ofp.OFPR_NO_MATCH | 1 << ofp.OFPR_ACTION | 1 << ofp.OFPR_INVALID_TTL
    port_status = 1 << ofp.OFPPR_ADD | 1 << ofp.OFPPR_DELETE | 1 << ofp.OFPPR_MODIFY
    flow_removed = (
        1 << ofp.OFPRR_IDLE_TIMEOUT
        | 1 << ofp.OFPRR_HARD_TIMEOUT
        | 1 << ofp.OFPRR_DELETE
        | 1 << ofp.OFPRR_GROUP_DELETE
    )
    return parser.OFPSetAsync(
        dp, [packet_in, packet_in], [port_status, port_status], [flow_removed, 0]
    )
