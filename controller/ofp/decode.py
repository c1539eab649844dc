"""Ryu messages -> domain events."""

from __future__ import annotations

from typing import Any

from controller.model import PacketIn, PortDesc
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
