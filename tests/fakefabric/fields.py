"""OXM fields: widths, value conversion, masks, prerequisites and packet matching.

Everything is compared as integers: Ryu's ``OFPMatch`` hands back MACs and IPs as
strings (masked fields as ``(value, mask)`` tuples, with the value already ANDed with the
mask, MACs lower-cased and ``"10.0.0.0/8"`` turned into a dotted mask), and packets are
given with the same string forms. Converting both sides once keeps matching exact
(no string-case or leading-zero surprises) and makes masks plain bit arithmetic.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ryu.lib.packet import arp, ethernet, icmp, ipv4, ipv6, packet, tcp, udp, vlan

from .errors import match_error

OFPVID_PRESENT = 0x1000


@dataclass(frozen=True)
class FieldSpec:
    width: int
    kind: str  # "int", "mac", "ipv4", "ipv6"
    maskable: bool

    @property
    def full(self) -> int:
        return (1 << self.width) - 1


def _spec(width: int, kind: str = "int", maskable: bool = False) -> FieldSpec:
    return FieldSpec(width, kind, maskable)


# OpenFlow 1.3.5 table 12 (the OXM basic class), in OXM order.
FIELDS: dict[str, FieldSpec] = {
    "in_port": _spec(32),
    "in_phy_port": _spec(32),
    "metadata": _spec(64, maskable=True),
    "eth_dst": _spec(48, "mac", True),
    "eth_src": _spec(48, "mac", True),
    "eth_type": _spec(16),
    "vlan_vid": _spec(13, maskable=True),
    "vlan_pcp": _spec(3),
    "ip_dscp": _spec(6),
    "ip_ecn": _spec(2),
    "ip_proto": _spec(8),
    "ipv4_src": _spec(32, "ipv4", True),
    "ipv4_dst": _spec(32, "ipv4", True),
    "tcp_src": _spec(16),
    "tcp_dst": _spec(16),
    "udp_src": _spec(16),
    "udp_dst": _spec(16),
    "sctp_src": _spec(16),
    "sctp_dst": _spec(16),
    "icmpv4_type": _spec(8),
    "icmpv4_code": _spec(8),
    "arp_op": _spec(16),
    "arp_spa": _spec(32, "ipv4", True),
    "arp_tpa": _spec(32, "ipv4", True),
    "arp_sha": _spec(48, "mac", True),
    "arp_tha": _spec(48, "mac", True),
    "ipv6_src": _spec(128, "ipv6", True),
    "ipv6_dst": _spec(128, "ipv6", True),
    "ipv6_flabel": _spec(20, maskable=True),
    "icmpv6_type": _spec(8),
    "icmpv6_code": _spec(8),
    "ipv6_nd_target": _spec(128, "ipv6"),
    "ipv6_nd_sll": _spec(48, "mac"),
    "ipv6_nd_tll": _spec(48, "mac"),
    "mpls_label": _spec(20),
    "mpls_tc": _spec(3),
    "mpls_bos": _spec(1),
    "pbb_isid": _spec(24, maskable=True),
    "tunnel_id": _spec(64, maskable=True),
    "ipv6_exthdr": _spec(9, maskable=True),
}
ORDER = {name: i for i, name in enumerate([*FIELDS, "ip_ttl"])}

# Pipeline state, not packet header: given by the fabric, never by a packet dict.
PIPELINE_FIELDS = frozenset({"in_port", "in_phy_port", "metadata"})
# Header fields a packet may carry that OpenFlow 1.3 cannot match on (dec_nw_ttl uses it).
EXTRA_PACKET_FIELDS: dict[str, FieldSpec] = {"ip_ttl": _spec(8)}
# Fields set_field may not change: they are pipeline state, or changing them would make the
# rest of the header inconsistent (Open vSwitch refuses these too).
NOT_SETTABLE = PIPELINE_FIELDS | {"eth_type", "ip_proto", "ipv6_exthdr", "mpls_bos"}
# Left out of the loop-detection key: a TTL that counts down must not hide a loop.
LOOP_IGNORED = frozenset({"ip_ttl"})

IP_TYPES = frozenset({0x0800, 0x86DD})
# field -> (field it requires, allowed exact values); "present" = a VLAN tag is present.
PREREQS: dict[str, tuple[str, frozenset[int] | str]] = {
    "in_phy_port": ("in_port", "any"),
    "vlan_pcp": ("vlan_vid", "present"),
    "ip_dscp": ("eth_type", IP_TYPES),
    "ip_ecn": ("eth_type", IP_TYPES),
    "ip_proto": ("eth_type", IP_TYPES),
    "ipv4_src": ("eth_type", frozenset({0x0800})),
    "ipv4_dst": ("eth_type", frozenset({0x0800})),
    "tcp_src": ("ip_proto", frozenset({6})),
    "tcp_dst": ("ip_proto", frozenset({6})),
    "udp_src": ("ip_proto", frozenset({17})),
    "udp_dst": ("ip_proto", frozenset({17})),
    "sctp_src": ("ip_proto", frozenset({132})),
    "sctp_dst": ("ip_proto", frozenset({132})),
    "icmpv4_type": ("ip_proto", frozenset({1})),
    "icmpv4_code": ("ip_proto", frozenset({1})),
    "arp_op": ("eth_type", frozenset({0x0806})),
    "arp_spa": ("eth_type", frozenset({0x0806})),
    "arp_tpa": ("eth_type", frozenset({0x0806})),
    "arp_sha": ("eth_type", frozenset({0x0806})),
    "arp_tha": ("eth_type", frozenset({0x0806})),
    "ipv6_src": ("eth_type", frozenset({0x86DD})),
    "ipv6_dst": ("eth_type", frozenset({0x86DD})),
    "ipv6_flabel": ("eth_type", frozenset({0x86DD})),
    "ipv6_exthdr": ("eth_type", frozenset({0x86DD})),
    "icmpv6_type": ("ip_proto", frozenset({58})),
    "icmpv6_code": ("ip_proto", frozenset({58})),
    "ipv6_nd_target": ("icmpv6_type", frozenset({135, 136})),
    "ipv6_nd_sll": ("icmpv6_type", frozenset({135})),
    "ipv6_nd_tll": ("icmpv6_type", frozenset({136})),
    "mpls_label": ("eth_type", frozenset({0x8847, 0x8848})),
    "mpls_tc": ("eth_type", frozenset({0x8847, 0x8848})),
    "mpls_bos": ("eth_type", frozenset({0x8847, 0x8848})),
    "pbb_isid": ("eth_type", frozenset({0x88E7})),
    "ip_ttl": ("eth_type", IP_TYPES),
}

# A normalised match: field -> (value, mask); exact fields carry the full mask.
MatchDict = dict[str, tuple[int, int]]


def spec_of(field: str) -> FieldSpec:
    spec = FIELDS.get(field) or EXTRA_PACKET_FIELDS.get(field)
    if spec is None:
        raise KeyError(f"unknown OXM field {field!r}")
    return spec


def to_int(field: str, value: object) -> int:
    """A field value (MAC/IP string or int) as an integer; range-checked."""
    spec = spec_of(field)
    if isinstance(value, bool):
        raise ValueError(f"{field}: {value!r} is not a field value")
    if isinstance(value, int):
        out = value
    elif isinstance(value, str) and spec.kind == "mac":
        parts = value.split(":")
        if len(parts) != 6 or not all(len(p) in (1, 2) for p in parts):
            raise ValueError(f"{field}: {value!r} is not a MAC address")
        out = int("".join(p.zfill(2) for p in parts), 16)
    elif isinstance(value, str) and spec.kind == "ipv4":
        out = int(ipaddress.IPv4Address(value))
    elif isinstance(value, str) and spec.kind == "ipv6":
        out = int(ipaddress.IPv6Address(value))
    else:
        raise ValueError(f"{field}: cannot use {value!r} ({type(value).__name__})")
    if not 0 <= out <= spec.full:
        raise ValueError(f"{field}: {value!r} does not fit in {spec.width} bits")
    return out


@functools.lru_cache(maxsize=65536)
def to_display(field: str, value: int) -> object:
    """The inverse of :func:`to_int`, in Ryu's forms (lower-case MACs, dotted IPs)."""
    kind = spec_of(field).kind
    if kind == "mac":
        raw = f"{value:012x}"
        return ":".join(raw[i : i + 2] for i in range(0, 12, 2))
    if kind == "ipv4":
        return str(ipaddress.IPv4Address(value))
    if kind == "ipv6":
        return str(ipaddress.IPv6Address(value))
    return value


def match_from_ofp(match: Any) -> MatchDict:
    """Normalise a Ryu ``OFPMatch``: check fields, masks and prerequisites like a switch.

    Raises ``OFError`` with the OFPET_BAD_MATCH code a switch would send back.
    """
    wc = getattr(match, "_wc", None)
    if wc is not None and wc.wildcards != (1 << 64) - 1:
        raise match_error(
            "OFPBMC_BAD_FIELD", "OFPMatch built with the old set_*() API; use keyword fields"
        )
    out: MatchDict = {}
    for field, raw in match.items():
        if field not in FIELDS:
            raise match_error("OFPBMC_BAD_FIELD", f"{field} is not an OpenFlow 1.3 OXM field")
        if field in out:
            raise match_error("OFPBMC_DUP_FIELD", f"{field} appears twice")
        spec = FIELDS[field]
        try:
            if isinstance(raw, tuple):
                value, mask = to_int(field, raw[0]), to_int(field, raw[1])
            else:
                value, mask = to_int(field, raw), spec.full
        except ValueError as exc:
            raise match_error("OFPBMC_BAD_VALUE", str(exc)) from None
        if mask != spec.full and not spec.maskable:
            raise match_error("OFPBMC_BAD_MASK", f"{field} cannot be masked")
        if value & ~mask:
            raise match_error("OFPBMC_BAD_WILDCARDS", f"{field} value has bits outside its mask")
        if field == "vlan_vid" and value & 0xFFF and not value & OFPVID_PRESENT:
            raise match_error(
                "OFPBMC_BAD_VALUE", f"vlan_vid {value:#x} lacks OFPVID_PRESENT (0x1000)"
            )
        out[field] = (value, mask)
    for field in out:
        if not prereq_met(out, field):
            need, allowed = PREREQS[field]
            raise match_error(
                "OFPBMC_BAD_PREREQ", f"{field} needs {need} {_allowed_text(allowed)} in the match"
            )
    return out


def _allowed_text(allowed: frozenset[int] | str) -> str:
    if isinstance(allowed, str):
        return "set" if allowed == "any" else "with OFPVID_PRESENT"
    return "=" + "/".join(f"{v:#x}" if v > 255 else str(v) for v in sorted(allowed))


def prereq_met(match: MatchDict, field: str) -> bool:
    """Does ``match`` pin down what ``field`` requires (exactly, as the spec demands)?"""
    if field not in PREREQS:
        return True
    need, allowed = PREREQS[field]
    if need not in match:
        return False
    value, mask = match[need]
    if allowed == "any":
        return True
    if allowed == "present":
        return bool(mask & OFPVID_PRESENT and value & OFPVID_PRESENT)
    assert not isinstance(allowed, str)
    return mask == FIELDS[need].full and value in allowed


def match_display(match: MatchDict) -> dict[str, object]:
    """A normalised match in Ryu's user form: value, or (value, mask) when masked."""
    out: dict[str, object] = {}
    for field, (value, mask) in match.items():
        if mask == FIELDS[field].full:
            out[field] = to_display(field, value)
        else:
            out[field] = (to_display(field, value), to_display(field, mask))
    return out


def packet_matches(match: MatchDict, pkt: Mapping[str, int], in_port: int, metadata: int) -> bool:
    """OpenFlow matching: every match field present and equal under its mask.

    A field the packet lacks never matches (this is how prerequisites act on packets),
    except ``vlan_vid``: an untagged packet has vlan_vid OFPVID_NONE (0) in OpenFlow 1.3.
    """
    for field, (value, mask) in match.items():
        if field in ("in_port", "in_phy_port"):
            have = in_port
        elif field == "metadata":
            have = metadata
        elif field == "vlan_vid":
            have = pkt.get("vlan_vid", 0)
        elif field in pkt:
            have = pkt[field]
        else:
            return False
        if have & mask != value:
            return False
    return True


def overlaps(a: MatchDict, b: MatchDict) -> bool:
    """Could one packet match both? True unless some shared field disagrees under both masks."""
    for field in a.keys() & b.keys():
        (va, ma), (vb, mb) = a[field], b[field]
        if va & mb != vb & ma:
            return False
    return True


def covers(general: MatchDict, specific: MatchDict) -> bool:
    """Is ``specific`` at least as specific as ``general`` (non-strict modify/delete)?"""
    for field, (vg, mg) in general.items():
        if field not in specific:
            return False
        vs, ms = specific[field]
        if ms & mg != mg or vs & mg != vg:
            return False
    return True


def normalize_packet(fields: Mapping[str, object]) -> dict[str, int]:
    """A packet dict as integers; rejects pipeline state, unknown and inconsistent fields."""
    out: dict[str, int] = {}
    for field, raw in fields.items():
        if field in PIPELINE_FIELDS:
            raise ValueError(f"{field} is pipeline state, not a packet field")
        if field not in FIELDS and field not in EXTRA_PACKET_FIELDS:
            raise ValueError(f"unknown packet field {field!r}")
        out[field] = to_int(field, raw)
    if "vlan_vid" in out and not out["vlan_vid"] & OFPVID_PRESENT:
        raise ValueError("a tagged packet's vlan_vid carries OFPVID_PRESENT (0x1000 | vid)")
    for field in out:
        if not packet_has_prereqs(out, field):
            need, allowed = PREREQS[field]
            raise ValueError(f"packet has {field} but not {need} {_allowed_text(allowed)}")
    return out


def packet_has_prereqs(pkt: Mapping[str, int], field: str) -> bool:
    """Does the packet carry the headers ``field`` lives in (recursively)?"""
    while field in PREREQS:
        need, allowed = PREREQS[field]
        if need not in pkt:
            return False
        if not isinstance(allowed, str) and pkt[need] not in allowed:
            return False
        field = need
    return True


def display_packet(pkt: Mapping[str, int]) -> dict[str, object]:
    return {f: to_display(f, pkt[f]) for f in sorted(pkt, key=ORDER.__getitem__)}


def loop_key(pkt: Mapping[str, int], inner: Iterable[tuple[int, int]] = ()) -> tuple[object, ...]:
    items = tuple(sorted((f, v) for f, v in pkt.items() if f not in LOOP_IGNORED))
    return (items, tuple(inner))


def packet_from_bytes(data: bytes) -> dict[str, object]:
    """Parse raw frame bytes (a PacketOut's data) into a packet dict with ``ryu.lib.packet``.

    Understands Ethernet, one 802.1Q tag, ARP, IPv4/IPv6, TCP, UDP and ICMP; anything
    deeper is left out, as a switch that cannot parse it would not match on it either.
    """
    frame = packet.Packet(bytes(data))
    out: dict[str, object] = {}
    for proto in frame.protocols:
        if isinstance(proto, ethernet.ethernet):
            out.update(eth_dst=proto.dst.lower(), eth_src=proto.src.lower())
            out["eth_type"] = proto.ethertype
        elif isinstance(proto, vlan.vlan):
            if "vlan_vid" in out:
                raise ValueError("packet_from_bytes: stacked VLAN tags are not supported")
            out.update(vlan_vid=OFPVID_PRESENT | proto.vid, vlan_pcp=proto.pcp)
            out["eth_type"] = proto.ethertype
        elif isinstance(proto, arp.arp):
            out.update(arp_op=proto.opcode, arp_spa=proto.src_ip, arp_tpa=proto.dst_ip)
            out.update(arp_sha=proto.src_mac.lower(), arp_tha=proto.dst_mac.lower())
        elif isinstance(proto, ipv4.ipv4):
            out.update(ipv4_src=proto.src, ipv4_dst=proto.dst, ip_proto=proto.proto)
            out.update(ip_dscp=proto.tos >> 2, ip_ecn=proto.tos & 3, ip_ttl=proto.ttl)
        elif isinstance(proto, ipv6.ipv6):
            out.update(ipv6_src=proto.src, ipv6_dst=proto.dst, ip_proto=proto.nxt)
            out.update(ip_dscp=proto.traffic_class >> 2, ip_ecn=proto.traffic_class & 3)
            out.update(ipv6_flabel=proto.flow_label, ip_ttl=proto.hop_limit)
        elif isinstance(proto, tcp.tcp):
            out.update(tcp_src=proto.src_port, tcp_dst=proto.dst_port)
        elif isinstance(proto, udp.udp):
            out.update(udp_src=proto.src_port, udp_dst=proto.dst_port)
        elif isinstance(proto, icmp.icmp):
            out.update(icmpv4_type=proto.type, icmpv4_code=proto.code)
    return out
