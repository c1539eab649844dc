"""OpenFlow 1.3 message sizes for the scale benchmark's wire, estimated from the spec's
structs (no Ryu on the wire to encode them), and a short kind name per message."""

from __future__ import annotations

from controller.model import (
    Action,
    ArpFrame,
    ClearSwitch,
    FlowMod,
    FlowRule,
    GroupMod,
    GroupRule,
    LldpFrame,
    Match,
    Message,
    MeterMod,
    Op,
    Output,
    PacketOut,
    SetField,
    StatsKind,
)

OXM_PAYLOAD = {"eth_type": 2, "ip_proto": 1, "ip_dscp": 1, "vlan_vid": 2, "eth_dst": 6,
               "eth_src": 6, "metadata": 8, "tcp_src": 2, "tcp_dst": 2, "udp_src": 2,
               "udp_dst": 2}  # fmt: skip
LLDP_FRAME, ARP_FRAME = 80, 60  # Loom's LLDP (chassis, port, TTL, HMAC tag); ARP, padded
MULTIPART, REPLY_LIMIT, PORT_STATUS, PACKET_IN = 16, 65535, 80, 42


def _pad8(n: int) -> int:
    return (n + 7) // 8 * 8


def match_bytes(match: Match) -> int:
    oxms = 0
    for name, value in match.fields:
        payload = OXM_PAYLOAD.get(name, 4)
        oxms += 4 + (2 * payload if isinstance(value, tuple) else payload)
    return _pad8(4 + oxms)


def action_bytes(action: Action) -> int:
    if isinstance(action, Output):
        return 16
    if isinstance(action, SetField):
        return _pad8(8 + OXM_PAYLOAD.get(action.field, 4))
    return 8


def flow_bytes(rule: FlowRule, delete: bool = False) -> int:
    size = 48 + match_bytes(rule.match)
    if delete:
        return size
    if rule.actions:
        size += 8 + sum(action_bytes(a) for a in rule.actions)
    size += (8 if rule.goto is not None else 0) + (24 if rule.write_metadata else 0)
    return size + (8 if rule.meter is not None else 0)


def group_bytes(group: GroupRule, delete: bool = False) -> int:
    if delete:
        return 16
    return 16 + sum(16 + sum(action_bytes(a) for a in b.actions) for b in group.buckets)


def message_bytes(msg: Message) -> int:
    """Estimated OpenFlow 1.3 size of a message the core sends, from the spec's structs
    (no Ryu here to encode it): header 8; FLOW_MOD 48 + match (4 + OXMs of 4 + payload,
    padded to 8) + instructions (apply-actions 8 + actions, goto 8, write-metadata 24,
    meter 8), a delete carrying the match only; actions: output 16, set-field 4 + OXM
    padded to 8, others 8; GROUP_MOD 16 + buckets of 16 + actions; METER_MOD 16 + one
    drop band 16; PACKET_OUT 24 + actions + frame (LLDP 80, ARP 60); multipart request
    16 + body (flow 40 + match, group-desc 0, others 8). Replies, estimated where they
    arrive: multipart 16 + 112 per port, 40 + 16 per bucket per group, 48 + match +
    instructions per flow, split every 64 KiB; PACKET_IN 42 + frame; PORT_STATUS 80."""
    if isinstance(msg, FlowMod):
        return flow_bytes(msg.rule, msg.op is Op.DELETE)
    if isinstance(msg, GroupMod):
        return group_bytes(msg.group, msg.op is Op.DELETE)
    if isinstance(msg, MeterMod):
        return 16 if msg.op is Op.DELETE else 32
    if isinstance(msg, PacketOut):
        frame = msg.frame
        data = len(frame.data) if not isinstance(frame, LldpFrame | ArpFrame) else ARP_FRAME
        data = LLDP_FRAME if isinstance(frame, LldpFrame) else data
        return 24 + sum(action_bytes(a) for a in msg.actions) + data
    if isinstance(msg, ClearSwitch):
        return 56 + 16 + 16
    return MULTIPART + {StatsKind.FLOW: 48, StatsKind.GROUP_DESC: 0}.get(msg.kind, 8)


def message_kind(msg: Message) -> str:
    if isinstance(msg, FlowMod | GroupMod | MeterMod):
        return f"{type(msg).__name__.lower()}.{msg.op.value}"
    if isinstance(msg, PacketOut):
        frame = msg.frame
        name = "lldp" if isinstance(frame, LldpFrame) else "raw"
        return "packet_out." + ("arp" if isinstance(frame, ArpFrame) else name)
    if isinstance(msg, ClearSwitch):
        return "clear_switch"
    return "read_back" if msg.sync else f"stats_request.{msg.kind.value}"
