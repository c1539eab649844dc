"""Frames as bytes: build the LLDP and ARP frames the core asks for, and decode
packet-in payloads into the core's frame types. Malformed input decodes to ``None``
(counted by the caller); it never raises."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import struct

from controller.model import (
    CONTROLLER_MAC,
    ETH_TYPE_ARP,
    ETH_TYPE_IPV4,
    ETH_TYPE_LLDP,
    ArpFrame,
    EthFrame,
    Frame,
    LldpFrame,
    RawFrame,
)
from controller.ofp.compat import arp, ethernet, ipv4, lldp, packet, tcp, udp, vlan

log = logging.getLogger("loom.ofp")

CHASSIS_PREFIX = b"dpid:"
LLDP_TTL = 120
LOOM_OUI = b"\x4c\x4f\x4d"  # an organizationally specific TLV carries the signature
_LLDP_KEY = os.urandom(16)


def lldp_bytes(frame: LldpFrame) -> bytes:
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(lldp.LLDP_MAC_NEAREST_BRIDGE, CONTROLLER_MAC, ETH_TYPE_LLDP))
    tlvs = (
        lldp.ChassisID(
            subtype=lldp.ChassisID.SUB_LOCALLY_ASSIGNED,
            chassis_id=CHASSIS_PREFIX + b"%016x" % frame.dpid,
        ),
        lldp.PortID(subtype=lldp.PortID.SUB_PORT_COMPONENT, port_id=struct.pack("!I", frame.port)),
        lldp.TTL(ttl=LLDP_TTL),
        lldp.OrganizationallySpecific(oui=LOOM_OUI, subtype=1, info=_tag(frame.dpid, frame.port)),
        lldp.End(),
    )
    pkt.add_protocol(lldp.lldp(tlvs))
    pkt.serialize()
    return bytes(pkt.data)


def arp_bytes(frame: ArpFrame) -> bytes:
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(frame.eth_dst, frame.eth_src, ETH_TYPE_ARP))
    pkt.add_protocol(
        arp.arp(
            opcode=frame.op,
            src_mac=frame.sha,
            src_ip=frame.spa,
            dst_mac=frame.tha,
            dst_ip=frame.tpa,
        )
    )
    pkt.serialize()
    return bytes(pkt.data)


def frame_bytes(frame: LldpFrame | ArpFrame | RawFrame) -> bytes:
    if isinstance(frame, LldpFrame):
        return lldp_bytes(frame)
    if isinstance(frame, ArpFrame):
        return arp_bytes(frame)
    return frame.data


def decode(data: bytes) -> Frame | None:
    """Decode a packet-in payload; ``None`` for anything malformed."""
    try:
        return _decode(data)
    except Exception as exc:  # a hostile frame must never escape the handler
        log.debug("undecodable frame (%d bytes): %s", len(data), exc)
        return None


def _decode(data: bytes) -> Frame | None:
    pkt = packet.Packet(data)
    eth = pkt.get_protocol(ethernet.ethernet)
    if eth is None:
        return None
    if eth.ethertype == ETH_TYPE_LLDP:
        return _decode_lldp(pkt)
    vid = None
    tag = pkt.get_protocol(vlan.vlan)
    if tag is not None:
        vid = tag.vid
    req = pkt.get_protocol(arp.arp)
    if req is not None and vid is None:
        return ArpFrame(
            req.opcode, eth.src, eth.dst, req.src_mac, req.src_ip, req.dst_mac, req.dst_ip
        )
    ip = pkt.get_protocol(ipv4.ipv4)
    ethertype = tag.ethertype if tag is not None else eth.ethertype
    if ip is None or ethertype != ETH_TYPE_IPV4:
        return EthFrame(eth.src, eth.dst, ethertype, vid)
    l4 = pkt.get_protocol(tcp.tcp) or pkt.get_protocol(udp.udp)
    return EthFrame(
        eth.src,
        eth.dst,
        ethertype,
        vid,
        ip.src,
        ip.dst,
        ip.proto,
        l4.src_port if l4 else None,
        l4.dst_port if l4 else None,
    )


def _decode_lldp(pkt: packet.Packet) -> LldpFrame | None:
    msg = pkt.get_protocol(lldp.lldp)
    if msg is None or len(msg.tlvs) < 3:
        return None
    chassis, port = msg.tlvs[0], msg.tlvs[1]
    if not isinstance(chassis, lldp.ChassisID) or not isinstance(port, lldp.PortID):
        return None
    cid = bytes(chassis.chassis_id)
    if not cid.startswith(CHASSIS_PREFIX) or len(port.port_id) != 4:
        return None
    frame = LldpFrame(
        int(cid[len(CHASSIS_PREFIX) :], 16), struct.unpack("!I", bytes(port.port_id))[0]
    )
    tags = [
        t for t in msg.tlvs if isinstance(t, lldp.OrganizationallySpecific) and t.oui == LOOM_OUI
    ]
    if len(tags) != 1 or not hmac.compare_digest(bytes(tags[0].info), _tag(frame.dpid, frame.port)):
        return None  # not sent by this controller: a host cannot forge a link
    return frame


def set_lldp_key(key: bytes) -> None:
    """The secret that signs this controller's LLDP frames (random per process)."""
    global _LLDP_KEY
    _LLDP_KEY = key


def _tag(dpid: int, port: int) -> bytes:
    return hmac.new(_LLDP_KEY, struct.pack("!QI", dpid, port), hashlib.sha256).digest()[:12]
