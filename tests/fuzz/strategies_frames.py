"""Hostile frames: raw bytes, and Ethernet/VLAN/ARP/IPv4/TCP/UDP/LLDP built field by
field with ``struct`` (so lengths, versions and opcodes can lie) or signed by this
controller and then mutated, replayed at host ports or looped back to their switch."""

from __future__ import annotations

import struct

from hypothesis import strategies as st

from controller.model import CONTROLLER_MAC, make_cookie
from controller.model import CookieKind as Ck
from controller.ofp.frames import CHASSIS_PREFIX, LOOM_OUI
from tests.fuzz.checks_frames import WHERE, Edit, FrameCase

HOST_MACS = tuple(f"02:00:00:00:00:{i:02x}" for i in range(1, 17))
ODD_MACS = (
    "ff:ff:ff:ff:ff:ff",
    "00:00:00:00:00:00",
    "01:80:c2:00:00:0e",
    "01:00:5e:00:00:01",
    "33:33:00:00:00:01",
    CONTROLLER_MAC,
    "03:00:00:00:00:01",
    "02:00:00:00:00:99",
)
ETHERTYPES = (0x0800, 0x0806, 0x88CC, 0x8100, 0x88A8, 0x86DD, 0x0000, 0x05DC, 0xFFFF, 0x8847)
HOST_IPS = tuple(f"10.{p}.{e}.{h}" for p in range(4) for e in range(2) for h in (2, 3))
ODD_IPS = ("0.0.0.0", "255.255.255.255", "224.0.0.1", "127.0.0.1", "10.0.0.1", "169.254.1.1")
COOKIES = (0, make_cookie(Ck.CATCH), make_cookie(Ck.CATCH, 7), make_cookie(Ck.ROUTE, 3), 2**64 - 1)


def mac_bytes(mac: str) -> bytes:
    return bytes(int(x, 16) for x in mac.split(":"))


def ip_bytes(ip: str) -> bytes:
    return bytes(int(x) for x in ip.split("."))


macs = st.one_of(
    st.sampled_from(HOST_MACS + ODD_MACS).map(mac_bytes), st.binary(min_size=6, max_size=6)
)
ips = st.one_of(
    st.sampled_from(HOST_IPS + ODD_IPS).map(ip_bytes), st.binary(min_size=4, max_size=4)
)
u8, u16, u32 = st.integers(0, 255), st.integers(0, 0xFFFF), st.integers(0, 2**32 - 1)


@st.composite
def eth_header(draw: st.DrawFn, ethertype: int | None = None) -> tuple[bytes, str]:
    """dst, src, 0-3 VLAN tags (802.1Q or QinQ), ethertype; and a shape note."""
    head = draw(macs) + draw(macs)
    tags = draw(st.integers(0, 3)) if draw(st.integers(0, 3)) == 0 else 0
    for _ in range(tags):
        tpid = draw(st.sampled_from((0x8100, 0x88A8, 0x9100)))
        head += struct.pack("!HH", tpid, draw(u16))
    etype = ethertype if ethertype is not None else draw(st.sampled_from(ETHERTYPES) | u16)
    return head + struct.pack("!H", etype), f"vlan{tags}" if tags else "untagged"


@st.composite
def arp_frames(draw: st.DrawFn) -> tuple[str, bytes]:
    head, note = draw(eth_header(0x0806))
    hlen = draw(st.sampled_from((6, 6, 6, 0, 1, 8, 255)))
    plen = draw(st.sampled_from((4, 4, 4, 0, 6, 16, 255)))
    op = draw(st.sampled_from((1, 2, 1, 2, 0, 3, 4, 0xFFFF)))
    htype = draw(st.sampled_from((1, 1, 6, 0, 0xFFFF)))
    ptype = draw(st.sampled_from((0x0800, 0x0800, 0x86DD, 0)))
    body = struct.pack("!HHBBH", htype, ptype, hlen, plen, op)
    body += draw(macs) + draw(ips) + draw(macs) + draw(ips)
    body += draw(st.binary(max_size=24))
    return f"arp:{note}:op{op}:h{hlen}p{plen}", head + body


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return int(~total & 0xFFFF)


@st.composite
def ipv4_frames(draw: st.DrawFn) -> tuple[str, bytes]:
    head, note = draw(eth_header(0x0800))
    proto = draw(st.sampled_from((6, 17, 1, 6, 17, 0, 255, 47)))
    if proto == 6:
        off = draw(st.sampled_from((5, 5, 0, 4, 15)))
        flags = draw(u8)
        l4 = struct.pack(
            "!HHIIBBHHH",
            draw(u16),
            draw(u16),
            draw(u32),
            draw(u32),
            off << 4,
            flags,
            draw(u16),
            draw(u16),
            draw(u16),
        )
    elif proto == 17:
        l4 = struct.pack(
            "!HHHH", draw(u16), draw(u16), draw(st.sampled_from((8, 0, 7, 65535))), draw(u16)
        )
    else:
        l4 = b""
    l4 = (draw(st.sampled_from(("whole", "cut"))) == "cut" and l4[: draw(st.integers(0, 7))]) or l4
    payload = l4 + draw(st.binary(max_size=64))
    ihl = draw(st.sampled_from((5, 5, 5, 0, 4, 6, 15)))
    version = draw(st.sampled_from((4, 4, 4, 6, 0, 15)))
    options = draw(st.binary(max_size=40)) if ihl > 5 else b""
    length = draw(st.sampled_from(("true", "short", "long", "zero", "max")))
    true_len = 20 + len(options) + len(payload)
    total = {
        "true": true_len,
        "short": max(0, true_len - 9),
        "long": true_len + 100,
        "zero": 0,
        "max": 0xFFFF,
    }[length]
    frag = draw(st.sampled_from((0, 0, 0x4000, 0x2000, 0x2001, 0x1FFF, 0xFFFF)))
    hdr = struct.pack(
        "!BBHHHBBH4s4s",
        version << 4 | ihl,
        draw(u8),
        total,
        draw(u16),
        frag,
        draw(u8),
        proto,
        0,
        draw(ips),
        draw(ips),
    )
    if draw(st.booleans()):
        hdr = hdr[:10] + struct.pack("!H", _checksum(hdr + options)) + hdr[12:]
    shape = f"ipv4:{note}:v{version}:ihl{ihl}:len-{length}:frag{frag:#x}:proto{proto}"
    return shape, head + hdr + options + payload


def tlv(kind: int, value: bytes, length: int | None = None) -> bytes:
    n = len(value) if length is None else length
    return struct.pack("!H", (kind & 0x7F) << 9 | (n & 0x1FF)) + value


@st.composite
def lldp_frames(draw: st.DrawFn) -> tuple[str, bytes]:
    """An LLDP frame built TLV by TLV, claiming a Loom chassis with a forged signature,
    or with lying lengths, missing TLVs, wrong subtypes."""
    head, note = draw(eth_header(0x88CC))
    dpid = draw(st.sampled_from((1, 5, 7, 20, 0, 2**64 - 1)) | st.integers(0, 2**64 - 1))
    chassis_ids = (CHASSIS_PREFIX + b"%016x" % dpid, CHASSIS_PREFIX + b"zz", CHASSIS_PREFIX, b"")
    chassis_id = draw(st.sampled_from((*chassis_ids, CHASSIS_PREFIX + b"1" * 300)) | st.binary())
    port_id = draw(
        st.sampled_from((struct.pack("!I", 1), struct.pack("!I", 3), b"", b"\0" * 3, b"\0" * 5))
        | st.binary(max_size=8)
    )
    c_sub = draw(st.sampled_from((7, 7, 1, 4, 0, 255)))
    p_sub = draw(st.sampled_from((2, 2, 1, 3, 7, 0, 255)))
    sig = draw(st.sampled_from(("random", "zero", "short", "none", "two")))
    info = {
        "random": draw(st.binary(min_size=12, max_size=12)),
        "zero": b"\0" * 12,
        "short": b"\1" * 5,
        "none": b"",
        "two": b"\2" * 12,
    }[sig]
    tlvs = [
        tlv(1, bytes([c_sub]) + chassis_id),
        tlv(2, bytes([p_sub]) + port_id),
        tlv(3, struct.pack("!H", draw(u16))),
    ]
    if sig != "none":
        tlvs.append(tlv(127, LOOM_OUI + b"\x01" + info))
    if sig == "two":
        tlvs.append(tlv(127, LOOM_OUI + b"\x01" + info[::-1]))
    if draw(st.booleans()):  # lie about one TLV's length
        i = draw(st.integers(0, len(tlvs) - 1))
        tlvs[i] = (
            struct.pack("!H", (tlvs[i][0] << 8 & 0xFE00) | draw(st.integers(0, 511))) + tlvs[i][2:]
        )
    order = draw(st.permutations(range(len(tlvs)))) if draw(st.integers(0, 3)) == 0 else None
    if order is not None:
        tlvs = [tlvs[i] for i in order]
    drop = draw(st.sets(st.integers(0, len(tlvs) - 1), max_size=2))
    tlvs = [t for i, t in enumerate(tlvs) if i not in drop]
    end = draw(st.sampled_from((b"\0\0", b"\0\0", b"", b"\0\x05junk")))
    shape = f"lldp:{note}:c{c_sub}:p{p_sub}:sig-{sig}:drop{len(drop)}"
    return shape, head + b"".join(tlvs) + end + draw(st.binary(max_size=16))


raw_frames = st.one_of(
    st.binary(max_size=64).map(lambda b: ("raw:short", b)),
    st.binary(min_size=60, max_size=1600).map(lambda b: ("raw:mtu", b)),
    st.integers(1601, 9216).map(lambda n: ("raw:jumbo", bytes(range(256)) * (n // 256))),
    st.integers(60000, 70000).map(lambda n: ("raw:oversized", b"\xaa" * n)),
)
built = st.one_of(arp_frames(), ipv4_frames(), lldp_frames(), raw_frames)

edit = st.tuples(
    st.sampled_from(("flip", "insert", "delete", "cut", "put")),
    st.integers(0, 2000),
    st.binary(min_size=0, max_size=8),
)
edits = st.lists(edit, max_size=3).map(tuple)


@st.composite
def frame_cases(draw: st.DrawFn) -> FrameCase:
    cookie = draw(st.sampled_from(COOKIES))
    table_id = draw(st.sampled_from((0, 0, 1, 2, 255)))
    pick = draw(st.integers(0, 10_000))
    if draw(st.integers(0, 4)) == 0:  # a frame this controller signed: mutated or replayed
        at = draw(st.sampled_from(("same-port", "same-switch", "host", "odd-port")))
        changes: tuple[Edit, ...] = draw(edits) if draw(st.booleans()) else ()
        shape = f"lldp-genuine:{at}:{'replayed' if not changes else 'mutated'}"
        return FrameCase(
            shape, b"", at, pick, True, draw(st.integers(0, 10_000)), changes, cookie, table_id
        )
    shape, data = draw(built)
    at = draw(st.sampled_from(WHERE))
    changes = draw(edits) if draw(st.integers(0, 3)) == 0 else ()
    return FrameCase(f"{shape}@{at}", data, at, pick, False, 0, changes, cookie, table_id)


frame_batches = st.lists(frame_cases(), min_size=1, max_size=8)
