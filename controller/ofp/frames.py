"""Frames as bytes: build the LLDP and ARP frames the core asks for, and decode
packet-in payloads into the core's frame types. Malformed input decodes to ``None``
(counted by the caller); it never raises and never loops."""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import math
import os
import struct

from controller.model import (
    CONTROLLER_MAC,
    ETH_TYPE_ARP,
    ETH_TYPE_IPV4,
    ETH_TYPE_LLDP,
    ETH_TYPE_VLAN,
    ArpFrame,
    EthFrame,
    Frame,
    LldpFrame,
    RawFrame,
)
from controller.ofp.compat import arp, ethernet, lldp, packet

log = logging.getLogger("loom.ofp")
IP_PROTO_TCP, IP_PROTO_UDP = 6, 17

CHASSIS_PREFIX = b"dpid:"
LLDP_TTL = 120
LOOM_OUI = b"\x4c\x4f\x4d"  # an organizationally specific TLV carries the signature
TAG_SUBTYPE, SENT_SUBTYPE = 1, 2  # ... and another the send time
_LLDP_KEY = os.urandom(16)


def lldp_bytes(frame: LldpFrame) -> bytes:
    """The frame as sent: chassis, port, TTL, the signature, the send time (a second
    Loom TLV, unsigned: it only tells how far behind the controller reads), End. All but
    the time is built once per port (LLDP goes out of every port again and again, and
    Ryu's packet library is slow to build a frame)."""
    head = _lldp_head(frame.dpid, frame.port, _LLDP_KEY)
    value = LOOM_OUI + bytes([SENT_SUBTYPE]) + struct.pack("!d", frame.sent)
    return head + struct.pack("!H", 127 << 9 | len(value)) + value + b"\x00\x00"


@functools.lru_cache(maxsize=1 << 17)
def _lldp_head(dpid: int, port: int, key: bytes) -> bytes:
    """The frame up to its End TLV."""
    frame = LldpFrame(dpid, port)
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(lldp.LLDP_MAC_NEAREST_BRIDGE, CONTROLLER_MAC, ETH_TYPE_LLDP))
    tlvs = (
        lldp.ChassisID(
            subtype=lldp.ChassisID.SUB_LOCALLY_ASSIGNED,
            chassis_id=CHASSIS_PREFIX + b"%016x" % frame.dpid,
        ),
        lldp.PortID(subtype=lldp.PortID.SUB_PORT_COMPONENT, port_id=struct.pack("!I", frame.port)),
        lldp.TTL(ttl=LLDP_TTL),
        lldp.OrganizationallySpecific(
            oui=LOOM_OUI, subtype=TAG_SUBTYPE, info=_tag(frame.dpid, frame.port)
        ),
        lldp.End(),
    )
    pkt.add_protocol(lldp.lldp(tlvs))
    pkt.serialize()
    data = bytes(pkt.data)
    end = data.rindex(b"\x00\x00")  # the End TLV (the frame is longer than any padding)
    return data[:end]


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
    """Decode a packet-in payload; ``None`` for anything malformed.

    Read with ``struct``, field by field, instead of Ryu's packet library: that parses
    every header and option it knows, and a TCP option of length 0 (one packet from
    any host) sends its option loop round forever. Here each header is checked for
    length before it is read and nothing loops over attacker-chosen counts except the
    LLDP TLVs, each of which advances at least two bytes."""
    try:
        return _decode(data)
    except Exception as exc:  # a hostile frame must never escape the handler
        log.debug("undecodable frame (%d bytes): %s", len(data), exc)
        return None


def _mac(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


def _ip(raw: bytes) -> str:
    return ".".join(str(b) for b in raw)


def _decode(data: bytes) -> Frame | None:
    if len(data) < 14:
        return None
    dst, src = _mac(data[0:6]), _mac(data[6:12])
    (ethertype,) = struct.unpack_from("!H", data, 12)
    if ethertype == ETH_TYPE_LLDP:
        return _decode_lldp(data, 14)
    vid, offset = None, 14
    if ethertype == ETH_TYPE_VLAN:
        if len(data) < 18:
            return None
        tci, ethertype = struct.unpack_from("!HH", data, 14)
        vid, offset = tci & 0x0FFF, 18
    if ethertype == ETH_TYPE_ARP and vid is None:
        return _decode_arp(data, offset, src, dst)
    if ethertype != ETH_TYPE_IPV4:
        return EthFrame(src, dst, ethertype, vid)
    if len(data) < offset + 20:
        return None
    version_ihl, flags_fragment, proto = (
        data[offset],
        data[offset + 6 : offset + 8],
        data[offset + 9],
    )
    header = (version_ihl & 0x0F) * 4
    if version_ihl >> 4 != 4 or header < 20 or len(data) < offset + header:
        return None
    ip_src, ip_dst = _ip(data[offset + 12 : offset + 16]), _ip(data[offset + 16 : offset + 20])
    l4 = offset + header
    first = struct.unpack("!H", flags_fragment)[0] & 0x1FFF == 0  # later fragments: no ports
    if proto in (IP_PROTO_TCP, IP_PROTO_UDP) and first and len(data) >= l4 + 4:
        sport, dport = struct.unpack_from("!HH", data, l4)
        return EthFrame(src, dst, ethertype, vid, ip_src, ip_dst, proto, sport, dport)
    return EthFrame(src, dst, ethertype, vid, ip_src, ip_dst, proto)


def _decode_arp(data: bytes, offset: int, src: str, dst: str) -> ArpFrame | None:
    """An Ethernet/IPv4 ARP packet; any other hardware or protocol is malformed here."""
    if len(data) < offset + 28:
        return None
    htype, ptype, hlen, plen, op = struct.unpack_from("!HHBBH", data, offset)
    if (htype, ptype, hlen, plen) != (1, ETH_TYPE_IPV4, 6, 4):
        return None
    body = data[offset + 8 : offset + 28]
    return ArpFrame(
        op, src, dst, _mac(body[0:6]), _ip(body[6:10]), _mac(body[10:16]), _ip(body[16:20])
    )


def _lldp_tlvs(data: bytes, offset: int) -> list[tuple[int, bytes]] | None:
    """(type, value) of every TLV up to End; ``None`` if one runs past the frame."""
    tlvs: list[tuple[int, bytes]] = []
    while offset + 2 <= len(data):
        (head,) = struct.unpack_from("!H", data, offset)
        kind, length = head >> 9, head & 0x01FF
        offset += 2
        if offset + length > len(data):
            return None
        if kind == 0:  # End of LLDPDU
            return tlvs
        tlvs.append((kind, data[offset : offset + length]))
        offset += length
    return None  # no End TLV


def _decode_lldp(data: bytes, offset: int) -> LldpFrame | None:
    tlvs = _lldp_tlvs(data, offset)
    if tlvs is None or len(tlvs) < 3 or [k for k, _ in tlvs[:3]] != [1, 2, 3]:
        return None
    cid, pid = tlvs[0][1][1:], tlvs[1][1][1:]  # after each TLV's subtype byte
    hexdigits = cid[len(CHASSIS_PREFIX) :]
    if not cid.startswith(CHASSIS_PREFIX) or len(hexdigits) != 16 or len(pid) != 4:
        return None
    dpid, port = int(hexdigits, 16), struct.unpack("!I", pid)[0]
    loom = [v[3:] for k, v in tlvs if k == 127 and v[:3] == LOOM_OUI and len(v) > 3]
    tags = [v[1:] for v in loom if v[0] == TAG_SUBTYPE]
    if len(tags) != 1 or not hmac.compare_digest(tags[0], _tag(dpid, port)):
        return None  # not sent by this controller: a host cannot forge a link
    sent = [struct.unpack("!d", v[1:])[0] for v in loom if v[0] == SENT_SUBTYPE and len(v) == 9]
    return LldpFrame(dpid, port, sent[0] if len(sent) == 1 and math.isfinite(sent[0]) else 0.0)


def set_lldp_key(key: bytes) -> None:
    """The secret that signs this controller's LLDP frames (random per process)."""
    global _LLDP_KEY
    _LLDP_KEY = key


def _tag(dpid: int, port: int) -> bytes:
    return hmac.new(_LLDP_KEY, struct.pack("!QI", dpid, port), hashlib.sha256).digest()[:12]
