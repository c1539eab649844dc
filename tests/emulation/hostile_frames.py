"""Hostile frames for the hostile-peer test: every kind a host can send (short, oversized
and malformed Ethernet, ARP, IPv4 and LLDP; forged, replayed and looped LLDP), built
from the lab's frame builders with the addresses of a running stack."""

from __future__ import annotations

import json
import random
import struct
from typing import Any

from mininet_scenarios.harness.stack import LoomStack
from tests.emulation.hostile_support import (
    ETH_LLDP,
    Capture,
    arp_body,
    eth,
    intf_mtu,
    ipv4_packet,
    lldp_fields,
    lldp_frame,
    lldp_tlv,
    loom_lldp_tlvs,
    tcp_segment,
    udp_segment,
    with_chassis,
)

PREFIX = "hp"
ATTACKER, NEIGHBOUR, FAR_A, FAR_B = (f"{PREFIX}h{i}" for i in (1, 2, 3, 4))
CONTROLLER_MAC = "0e:00:4c:4f:4f:4d"  # controller/model.py
BROADCAST = "ff:ff:ff:ff:ff:ff"
ZERO_MAC = "00:00:00:00:00:00"
UNKNOWN_MAC, UNKNOWN_IP = "02:de:ad:00:00:01", "10.9.9.9"


# --------------------------------------------------------------------------- hosts


def node(stack: LoomStack, name: str) -> tuple[str, str]:
    """(MAC, IP) of a host."""
    data = stack.graph.nodes[name]
    return str(data["mac"]), str(data["ip"])


def dpid(stack: LoomStack, name: str) -> int:
    return int(stack.graph.nodes[name]["dpid"])


def frame_kinds(stack: LoomStack) -> list[tuple[str, list[bytes]]]:
    """Every hostile frame kind but the replay (which needs captured frames first)."""
    a_mac, a_ip = node(stack, ATTACKER)
    n_mac, n_ip = node(stack, NEIGHBOUR)
    s1, s2, s3 = (dpid(stack, f"{PREFIX}s{i}") for i in (1, 2, 3))
    mtu = intf_mtu(stack.net.host(ATTACKER), stack.net.intf(ATTACKER, 0))
    rng = random.Random(3)

    def arp(body: bytes, src: str = a_mac, dst: str = BROADCAST) -> bytes:
        return eth(dst, src, 0x0806, body)

    def ip(dst_mac: str, packet: bytes) -> bytes:
        return eth(dst_mac, a_mac, 0x0800, packet)

    request = arp_body(1, a_mac, a_ip, ZERO_MAC, n_ip)
    short = [b"", b"\x01", bytes(6), (mac_of(n_mac) + mac_of(a_mac))[:13]]
    header_only = [
        eth(dst, a_mac, ethertype, pad=False)
        for dst in (n_mac, BROADCAST, UNKNOWN_MAC)
        for ethertype in (0x0800, 0x0806, 0x88CC, 0x8100, 0x86DD, 0x0000, 0xFFFF)
    ]
    big_udp = ipv4_packet(a_ip, n_ip, udp_segment(40000, 9, bytes(mtu - 28)))
    giant_lldp = b"".join(  # forged, as large as the MTU allows: TLVs of up to 511 bytes
        lldp_tlv(127, LOOM_OUI_SUB + rng.randbytes(n))
        for n in [507] * ((mtu - 64) // 511) + [(mtu - 64) % 511 - 6]
    )
    oversized = [
        eth(n_mac, a_mac, 0x0800, big_udp),  # exactly the MTU: a valid packet
        eth(UNKNOWN_MAC, a_mac, 0x88B5, rng.randbytes(mtu)),
        eth(BROADCAST, a_mac, 0x0800, ipv4_packet(a_ip, UNKNOWN_IP, rng.randbytes(mtu - 20))),
        lldp_frame(a_mac, loom_lldp_tlvs(s2, 8, None)[:-2] + giant_lldp + lldp_tlv(0, b"")),
        eth(n_mac, a_mac, 0x0800, big_udp + b"x"),  # MTU + 1: the kernel refuses
        eth(UNKNOWN_MAC, a_mac, 0x88B5, bytes(9000)),
        eth(UNKNOWN_MAC, a_mac, 0x88B5, bytes(65000)),
    ]
    arp_fields = [
        arp_body(1, a_mac, a_ip, ZERO_MAC, n_ip, hlen=0),
        arp_body(1, a_mac, a_ip, ZERO_MAC, n_ip, hlen=255),
        arp_body(1, a_mac, a_ip, ZERO_MAC, n_ip, plen=0),
        arp_body(1, a_mac, a_ip, ZERO_MAC, n_ip, plen=16),
        arp_body(1, a_mac, a_ip, ZERO_MAC, n_ip, htype=7),
        arp_body(1, a_mac, a_ip, ZERO_MAC, n_ip, ptype=0x86DD),
        arp_body(0, a_mac, a_ip, ZERO_MAC, n_ip),
        arp_body(7, a_mac, a_ip, ZERO_MAC, n_ip),
        arp_body(0xFFFF, a_mac, a_ip, n_mac, n_ip),
        arp_body(2, a_mac, "0.0.0.0", BROADCAST, "255.255.255.255"),
    ]
    senders = [BROADCAST, "01:00:5e:00:00:01", "33:33:00:00:00:01", ZERO_MAC, CONTROLLER_MAC]
    arp_senders = [
        arp(arp_body(op, mac, f"10.9.0.{i + 1}", ZERO_MAC if op == 1 else a_mac, tpa), src=mac)
        for i, mac in enumerate(senders)
        for op, tpa in ((1, n_ip), (2, a_ip))
    ] + [
        arp(arp_body(1, n_mac, "10.9.0.9", ZERO_MAC, n_ip)),  # sender MAC is not the source
        arp(arp_body(1, CONTROLLER_MAC, a_ip, ZERO_MAC, n_ip)),
    ]
    arp_short = [
        eth(BROADCAST, a_mac, 0x0806, request[:k], pad=False) for k in (0, 1, 7, 8, 14, 27)
    ]
    arp_short += [arp(request[:8]), arp(request[:20])]  # padded with zeros to 60 bytes
    ip_bad = []
    for dst_mac, dst_ip in ((n_mac, n_ip), (UNKNOWN_MAC, UNKNOWN_IP)):
        udp = udp_segment(40000, 9, b"hostile")
        ip_bad += [
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, udp, version=6)),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, udp, version=0)),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, udp, ihl=0)),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, udp, ihl=4)),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, udp, ihl=15)),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, udp, total=0)),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, udp, total=19)),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, udp, total=0xFFFF)),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, udp, csum=0x1234)),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, udp, ihl=6, options=b"\x44\xff\x00\x00")),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, udp, frag=0x3FFF)),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, udp_segment(40000, 9, b"x", length=0xFFFF))),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, udp_segment(40000, 9, b"x", length=0))),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, tcp_segment(40001, 22, offset=0), proto=6)),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, tcp_segment(40001, 22, offset=15), proto=6)),
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, b"\x01\x02", proto=6)),  # 2 bytes of TCP
            ip(dst_mac, ipv4_packet(a_ip, dst_ip, b"", proto=255)),
            eth(dst_mac, a_mac, 0x0800, ipv4_packet(a_ip, dst_ip, udp)[:10], pad=False),
            eth(dst_mac, a_mac, 0x8100, struct.pack("!HH", 7, 0x0800), pad=False),  # bare tag
        ]
    loom = loom_lldp_tlvs(s2, 8, bytes(12))
    lldp_bad = [
        lldp_frame(a_mac, b""),
        lldp_frame(a_mac, lldp_tlv(1, b"\x07dpid:", length=400)),
        lldp_frame(a_mac, lldp_tlv(1, b"", 0) + lldp_tlv(0, b"")),
        lldp_frame(a_mac, lldp_tlv(1, b"\x07dpid:%016x" % s2)),  # chassis only, no End
        lldp_frame(a_mac, loom[:-2] + b"\xde\xad\xbe\xef"),  # no End, garbage after
        lldp_frame(a_mac, loom.replace(lldp_tlv(3, b"\x00\x78"), lldp_tlv(3, b"", 0))),
        lldp_frame(a_mac, loom.replace(lldp_tlv(3, b"\x00\x78"), lldp_tlv(3, b"\x00", 1))),
        lldp_frame(a_mac, loom_lldp_tlvs(s2, 8, None)[:-2] + lldp_tlv(127, b"LO") + b"\0\0"),
        lldp_frame(a_mac, lldp_tlv(1, b"\x07dpid:1a") + lldp_tlv(2, b"\x02") + loom[-24:]),
        lldp_frame(a_mac, loom.replace(b"dpid:%016x" % s2, b"dpid:zzzzzzzzzzzzzzzz")),
        lldp_frame(a_mac, loom.replace(b"dpid:%016x" % s2, b"dpid:" + b"f" * 40)),
        lldp_frame(a_mac, loom.replace(b"dpid:%016x" % s2, b"dpid:-1")),
        lldp_frame(a_mac, lldp_tlv(2, b"\x02\0\0\0\x08") + lldp_tlv(1, b"\x07dpid:1a") + loom),
        lldp_frame(a_mac, lldp_tlv(9, rng.randbytes(40)) * 3),
        lldp_frame(a_mac, lldp_tlv(127, b"", 0) * 600),
        lldp_frame(a_mac, rng.randbytes(120)),
    ]
    lldp_forged = [
        lldp_frame(src, loom_lldp_tlvs(sw, port, sig))
        for src in (a_mac, CONTROLLER_MAC)
        for sw, port, sig in (
            (s2, 8, rng.randbytes(12)),  # a link hps2:8 -> hps1:3
            (s3, 1, rng.randbytes(12)),  # hps3:1 -> hps1:3: another path to the core
            (s1, 3, rng.randbytes(12)),  # the attacker's own port
            (s1, 7, bytes(12)),
            (s2, 8, rng.randbytes(32)),  # a signature of another length
            (s2, 8, b""),
            (s3, 2, None),  # no signature at all
            (0xDEAD, 1, rng.randbytes(12)),  # a switch that does not exist
        )
    ]
    two_tags = loom_lldp_tlvs(s2, 8, rng.randbytes(12))[:-2] + lldp_tlv(
        127, LOOM_OUI_SUB + rng.randbytes(12)
    )
    lldp_forged.append(lldp_frame(a_mac, two_tags + lldp_tlv(0, b"")))
    return [
        ("ethernet: shorter than a header, and header only", short + header_only),
        (f"ethernet: oversized (MTU {mtu} and beyond)", oversized),
        ("arp: bad htype/ptype/hlen/plen, opcodes 0, 7, 0xffff", [arp(b) for b in arp_fields]),
        ("arp: sender broadcast/multicast/zero/controller MAC", arp_senders),
        ("arp: truncated", arp_short),
        ("ipv4: bad version/IHL/total length/checksum/options, bad L4", ip_bad),
        ("lldp: bad TLV lengths and contents", lldp_bad),
        ("lldp: forged signatures", lldp_forged),
    ]


LOOM_OUI_SUB = b"LOM\x01"  # the OUI and subtype of Loom's signature TLV


def mac_of(mac: str) -> bytes:
    return bytes(int(b, 16) for b in mac.split(":"))


def replay_frames(stack: LoomStack) -> tuple[list[bytes], dict[str, Any]]:
    """Genuine signed LLDP captured at three host ports (the attacker's, its neighbour's
    on the same switch, one on the core switch), and one with another chassis."""
    net = stack.net
    watched = (ATTACKER, NEIGHBOUR, FAR_B)
    captures = {h: Capture(net.host(h), net.intf(h, 0), ETH_LLDP, 2.5) for h in watched}
    got = {h: c.stop() for h, c in captures.items()}
    seen = {h: sorted({json.dumps(lldp_fields(f)) for f in frames}) for h, frames in got.items()}
    assert all(got.values()), f"no LLDP captured at some host port: {seen}"
    own, neighbour, far = (got[h][0] for h in watched)
    s2 = dpid(stack, f"{PREFIX}s2")
    frames = [own] * 5 + [neighbour] * 5 + [far] * 5 + [with_chassis(own, s2)] * 3
    return frames, {"captured": {h: [json.loads(x) for x in v] for h, v in seen.items()}}


def as_built(frames: list[bytes]) -> tuple[list[bytes], dict[str, Any]]:
    return frames, {}
