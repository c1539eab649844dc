"""Ryu messages -> domain events."""

from __future__ import annotations

from typing import Any

from controller.model import FlowStats, GroupStats, Match, PacketIn, PortDesc, PortStats
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
        )
        for s in body
    ]


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
