"""Helpers for ``test_hostile_peers.py``: hostile frames from a host, a hostile switch.

* Frame builders (``struct`` only): truncated and oversized Ethernet, malformed ARP and
  IPv4, LLDP with broken TLVs or forged Loom signatures.
* :func:`send_raw` sends frames from inside a Mininet host through an AF_PACKET socket and
  reports, per frame, whether the kernel took it (a frame shorter than an Ethernet header
  is refused with EINVAL, one larger than the MTU with EMSGSIZE); :func:`capture` records
  the frames of one ethertype arriving at a host (the controller's signed LLDP, to replay).
  The child side is this module run as ``python -m tests.emulation.hostile_support``.
* :class:`FakeSwitch`: an OpenFlow 1.3 switch in a plain TCP socket. It does the handshake
  with a made-up datapath id, answers what a switch must (features, port descriptions,
  the read-back of its contents, statistics, echo, barriers) and sends whatever the test
  hands it; it records every message the controller sent (type, xid).
"""

from __future__ import annotations

import contextlib
import errno
import json
import random
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from mininet_scenarios.harness.host_procs import start_child
from mininet_scenarios.workloads.frames import checksum, ip_bytes, mac_bytes

PACKET_OUTGOING = 4
ETH_LLDP = 0x88CC
LLDP_MAC = "01:80:c2:00:00:0e"
LOOM_OUI = b"LOM"  # controller/ofp/frames.py: the OUI of the TLV carrying the signature


# --------------------------------------------------------------------------- frames


def eth(dst: str, src: str, ethertype: int, payload: bytes = b"", pad: bool = True) -> bytes:
    """An Ethernet frame; ``pad``: to the 60-byte minimum (a raw socket does not pad)."""
    frame = mac_bytes(dst) + mac_bytes(src) + struct.pack("!H", ethertype) + payload
    return frame.ljust(60, b"\0") if pad else frame


def arp_body(
    op: int, sha: str, spa: str, tha: str, tpa: str, *, htype: int = 1, ptype: int = 0x0800,
    hlen: int = 6, plen: int = 4,
) -> bytes:  # fmt: skip
    head = struct.pack("!HHBBH", htype, ptype, hlen, plen, op)
    return head + mac_bytes(sha) + ip_bytes(spa) + mac_bytes(tha) + ip_bytes(tpa)


def ipv4_packet(
    src: str, dst: str, payload: bytes, *, proto: int = 17, version: int = 4, ihl: int = 5,
    total: int | None = None, csum: int | None = None, frag: int = 0x4000, ttl: int = 64,
    options: bytes = b"",
) -> bytes:  # fmt: skip
    """An IPv4 packet whose header fields may lie (version, IHL, total length, checksum)."""
    length = 20 + len(options) + len(payload) if total is None else total
    head = struct.pack(
        "!BBHHHBBH4s4s", (version << 4) | ihl, 0, length & 0xFFFF, 7, frag, ttl, proto, 0,
        ip_bytes(src), ip_bytes(dst),
    ) + options  # fmt: skip
    value = checksum(head) if csum is None else csum
    return head[:10] + struct.pack("!H", value) + head[12:] + payload


def udp_segment(sport: int, dport: int, payload: bytes, length: int | None = None) -> bytes:
    n = 8 + len(payload) if length is None else length
    return struct.pack("!HHHH", sport, dport, n & 0xFFFF, 0) + payload


def tcp_segment(sport: int, dport: int, offset: int = 5, flags: int = 0x02) -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, offset << 4, flags, 64240, 0, 0)


def lldp_tlv(kind: int, value: bytes, length: int | None = None) -> bytes:
    """One LLDP TLV; ``length`` may lie about the value's size (9 bits)."""
    n = len(value) if length is None else length
    return struct.pack("!H", (kind << 9) | (n & 0x1FF)) + value


def loom_lldp_tlvs(dpid: int, port: int, signature: bytes | None) -> bytes:
    """The TLVs Loom sends: chassis ``dpid:%016x``, port, TTL, the signature, End."""
    tlvs = (
        lldp_tlv(1, b"\x07" + b"dpid:%016x" % dpid)
        + lldp_tlv(2, b"\x02" + struct.pack("!I", port))
        + lldp_tlv(3, struct.pack("!H", 120))
    )
    if signature is not None:
        tlvs += lldp_tlv(127, LOOM_OUI + b"\x01" + signature)
    return tlvs + lldp_tlv(0, b"")


def lldp_frame(src: str, tlvs: bytes) -> bytes:
    return eth(LLDP_MAC, src, ETH_LLDP, tlvs)


def lldp_fields(frame: bytes) -> dict[str, Any]:
    """Chassis, port id and signature of an LLDP frame Loom built (for the report)."""
    out: dict[str, Any] = {}
    at = 14
    while at + 2 <= len(frame):
        (head,) = struct.unpack("!H", frame[at : at + 2])
        kind, n = head >> 9, head & 0x1FF
        value = frame[at + 2 : at + 2 + n]
        if kind == 0:
            break
        if kind == 1:
            out["chassis"] = value[1:].decode(errors="replace")
        elif kind == 2 and len(value) == 5:
            out["port"] = struct.unpack("!I", value[1:])[0]
        elif kind == 127 and value[:3] == LOOM_OUI:
            out["signature"] = value[4:].hex()
        at += 2 + n
    return out


def with_chassis(frame: bytes, dpid: int) -> bytes:
    """``frame`` (Loom's LLDP) claiming another chassis, its signature left as it was."""
    old = b"dpid:" + frame.split(b"dpid:", 1)[1][:16]
    return frame.replace(old, b"dpid:%016x" % dpid, 1)


# --------------------------------------------------------------------------- host side


def _child(host: Any, *args: str) -> subprocess.Popen[bytes]:
    return start_child(host, "tests.emulation.hostile_support", *args, stdin=subprocess.PIPE)


def send_raw(host: Any, intf: str, frames: Sequence[bytes], interval: float = 0.002) -> list[str]:
    """Send ``frames`` from ``host``'s ``intf``; per frame "ok" or the errno's name."""
    proc = _child(host, "send", intf, str(interval))
    data = b"".join(struct.pack("!I", len(f)) + f for f in frames)
    out, err = proc.communicate(data, timeout=60)
    if proc.returncode:
        raise RuntimeError(f"send from {intf} failed: {err.decode(errors='replace')}")
    return [str(r) for r in json.loads(out)["results"]]


class Capture:
    """Frames of ``ethertype`` arriving at ``intf`` in ``host`` until :meth:`stop`."""

    def __init__(self, host: Any, intf: str, ethertype: int, seconds: float) -> None:
        self.proc = _child(host, "capture", intf, str(ethertype), str(seconds))

    def stop(self) -> list[bytes]:
        out, err = self.proc.communicate(timeout=30)
        if self.proc.returncode:
            raise RuntimeError(f"capture failed: {err.decode(errors='replace')}")
        return [bytes.fromhex(f) for f in json.loads(out)["frames"]]


def intf_mtu(host: Any, intf: str) -> int:
    return int(host.cmd(f"cat /sys/class/net/{intf}/mtu").strip())


def _send(intf: str, interval: float) -> None:
    data, frames = sys.stdin.buffer.read(), []
    while data:
        (n,) = struct.unpack("!I", data[:4])
        frames.append(data[4 : 4 + n])
        data = data[4 + n :]
    results: list[str] = []
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
        sock.bind((intf, 0))
        for frame in frames:
            for _ in range(500):
                try:
                    sock.send(frame)
                    results.append("ok")
                    break
                except OSError as exc:
                    if exc.errno == errno.ENOBUFS:
                        time.sleep(0.002)
                        continue
                    results.append(errno.errorcode.get(exc.errno or 0, str(exc)))
                    break
            time.sleep(interval)
    print(json.dumps({"results": results}), flush=True)


def _capture(intf: str, ethertype: int, seconds: float) -> None:
    frames: list[str] = []
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ethertype)) as sock:
        sock.bind((intf, 0))
        sock.settimeout(0.1)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                frame, addr = sock.recvfrom(65535)
            except TimeoutError:
                continue
            if addr[2] != PACKET_OUTGOING:
                frames.append(frame.hex())
    print(json.dumps({"frames": frames}), flush=True)


# --------------------------------------------------------------------------- OpenFlow

OFP_VERSION = 4
HELLO, ERROR, ECHO_REQUEST, ECHO_REPLY = 0, 1, 2, 3
FEATURES_REQUEST, FEATURES_REPLY = 5, 6
PACKET_IN, FLOW_REMOVED, PORT_STATUS, PACKET_OUT, FLOW_MOD, GROUP_MOD = 10, 11, 12, 13, 14, 15
MULTIPART_REQUEST, MULTIPART_REPLY, BARRIER_REQUEST, BARRIER_REPLY = 18, 19, 20, 21
METER_MOD = 29
RULE_MESSAGES = (FLOW_MOD, GROUP_MOD, METER_MOD)
MP_DESC, MP_FLOW, MP_PORT_STATS, MP_GROUP, MP_GROUP_DESC = 0, 1, 4, 6, 7
MP_METER_CONFIG, MP_PORT_DESC = 10, 13
OFPPS_LIVE = 4


def ofp_message(kind: int, xid: int, body: bytes = b"", version: int = OFP_VERSION) -> bytes:
    return struct.pack("!BBHI", version, kind, 8 + len(body), xid) + body


def multipart_reply(xid: int, mp_type: int, body: bytes = b"", flags: int = 0) -> bytes:
    return ofp_message(MULTIPART_REPLY, xid, struct.pack("!HH4x", mp_type, flags) + body)


def port_entry(port_no: int, dpid: int) -> bytes:
    """An ``ofp_port``: up, 10 Mbit/s."""
    mac = struct.pack("!HI", 0x0200 | (dpid & 0xFF), port_no)
    name = f"fake{port_no}".encode().ljust(16, b"\0")
    return struct.pack(
        "!I4x6s2x16sIIIIIIII", port_no, mac, name, 0, OFPPS_LIVE, 0x802, 0, 0, 0, 10000, 10000
    )


def port_stats_entry(port_no: int, count: int) -> bytes:
    values = [count, count, count * 1000, count * 1000] + [0] * 8  # packets, then bytes
    return struct.pack("!I4xQQQQQQQQQQQQII", port_no, *values, 1, 0)


def flow_stats_entry(cookie: int, packets: int) -> bytes:
    """One flow entry with an empty OXM match and no instructions."""
    match = struct.pack("!HH4x", 1, 4)
    head = struct.pack("!HBxIIHHHH4xQQQ", 48 + len(match), 3, 1, 0, 100, 0, 0, 0, cookie, packets,
                       packets * 1000)  # fmt: skip
    return head + match


def group_stats_entry(group_id: int, packets: int) -> bytes:
    bucket = struct.pack("!QQ", packets, packets * 1000)
    return struct.pack("!H2xII4xQQII", 40 + len(bucket), group_id, 1, packets, packets * 1000, 1,
                       0) + bucket  # fmt: skip


def error_message(xid: int, type_: int, code: int, data: bytes) -> bytes:
    return ofp_message(ERROR, xid, struct.pack("!HH", type_, code) + data)


class FakeSwitch:
    """An OpenFlow 1.3 "switch" in a TCP socket. ``connect`` returns once the controller
    has finished the handshake, read back the (empty) switch and sent it rules.

    ``port_stats_ports``: the ports its port-statistics replies list (default: its own).
    """

    def __init__(
        self,
        address: tuple[str, int],
        dpid: int,
        ports: Sequence[int] = (1, 2, 3),
    ) -> None:
        self.address = address
        self.dpid = dpid
        self.ports = tuple(ports)
        self.port_stats_ports: tuple[int, ...] | None = None
        self.sock: socket.socket | None = None
        self.received: list[tuple[int, int]] = []  # (type, xid) of every controller message
        self.requests: dict[int, int] = {}  # xid -> multipart type the controller asked for
        self.answered: dict[int, int] = {}  # multipart type -> requests answered
        self.echo_replies: dict[int, bytes] = {}  # xid -> data
        self.closed = threading.Event()
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self._polls = 0

    # -- connection -------------------------------------------------------------
    def connect(self, timeout: float = 15.0) -> float:
        """Connect and wait until the controller treats this as a switch (it polls its
        port statistics and has sent it rules); returns the seconds that took."""
        started = time.monotonic()
        self.closed.clear()
        self.received, self.answered, self.echo_replies, self.requests = [], {}, {}, {}
        self.sock = socket.create_connection(self.address, timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._reader = threading.Thread(target=self._read_loop, args=(self.sock,), daemon=True)
        self._reader.start()
        self.send(ofp_message(HELLO, 1))
        ready = self.wait(
            lambda: self.answered.get(MP_PORT_STATS, 0) >= 1 and bool(self.rule_xids()), timeout
        )
        if not ready:
            raise TimeoutError(
                f"fake switch {self.dpid:016x} not in use after {timeout} s:"
                f" answered {self.answered}, received {self.received[:20]}"
            )
        return time.monotonic() - started

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
            self.sock.close()
        if self._reader is not None:
            self._reader.join(timeout=5)
        self.sock, self._reader = None, None

    def ensure(self, timeout: float = 15.0) -> bool:
        """Reconnect if the controller closed the connection; True when it had."""
        if self.sock is not None and not self.closed.is_set():
            return False
        self.close()
        self.connect(timeout)
        return True

    @staticmethod
    def wait(cond: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def wait_closed(self, timeout: float) -> bool:
        return self.closed.wait(timeout)

    # -- what the controller sent ----------------------------------------------
    def seen_xids(self) -> set[int]:
        return {xid for _, xid in self.received}

    def rule_xids(self) -> list[int]:
        return [xid for kind, xid in self.received if kind in RULE_MESSAGES]

    def fresh_xid(self, rng: random.Random) -> int:
        """A random xid the controller has not used on this connection."""
        seen = self.seen_xids()
        while True:
            xid = rng.getrandbits(32)
            if xid not in seen:
                return xid

    def polls(self) -> int:
        return self.answered.get(MP_PORT_STATS, 0)

    # -- sending ----------------------------------------------------------------
    def send(self, data: bytes) -> bool:
        """Send raw bytes; False when the connection is gone."""
        sock = self.sock
        if sock is None or self.closed.is_set():
            return False
        try:
            with self._lock:
                sock.sendall(data)
        except OSError:
            self.closed.set()
            return False
        return True

    # -- the switch's side of the protocol ---------------------------------------
    def _read_loop(self, sock: socket.socket) -> None:
        buf = b""
        try:
            while True:
                ready, _, _ = select.select([sock], [], [], 0.2)
                if not ready:
                    continue
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= 8:
                    _, kind, length, xid = struct.unpack("!BBHI", buf[:8])
                    if len(buf) < max(length, 8):
                        break
                    msg, buf = buf[: max(length, 8)], buf[max(length, 8) :]
                    self.received.append((kind, xid))
                    self._answer(kind, xid, msg)
        except (OSError, ValueError):
            pass
        finally:
            self.closed.set()

    def _answer(self, kind: int, xid: int, msg: bytes) -> None:
        if kind == ECHO_REQUEST:
            self.send(ofp_message(ECHO_REPLY, xid, msg[8:]))
        elif kind == ECHO_REPLY:
            self.echo_replies[xid] = msg[8:]
        elif kind == FEATURES_REQUEST:
            body = struct.pack("!QIBB2xII", self.dpid, 0, 254, 0, 0x4F, 0)
            self.send(ofp_message(FEATURES_REPLY, xid, body))
        elif kind == BARRIER_REQUEST:
            self.send(ofp_message(BARRIER_REPLY, xid))
        elif kind == MULTIPART_REQUEST and len(msg) >= 12:
            (mp_type,) = struct.unpack("!H", msg[8:10])
            self.requests[xid] = mp_type
            self.send(multipart_reply(xid, mp_type, self._multipart_body(mp_type)))
            self.answered[mp_type] = self.answered.get(mp_type, 0) + 1

    def _multipart_body(self, mp_type: int) -> bytes:
        if mp_type == MP_PORT_DESC:
            return b"".join(port_entry(p, self.dpid) for p in self.ports)
        if mp_type == MP_PORT_STATS:
            self._polls += 1
            ports = self.port_stats_ports or self.ports
            return b"".join(port_stats_entry(p, self._polls) for p in ports)
        if mp_type == MP_DESC:
            return b"".join(s.ljust(n, b"\0") for s, n in ((b"loom-test", 256), (b"fake", 256),
                            (b"0", 256), (b"0", 32), (b"hostile", 256)))  # fmt: skip
        return b""  # flows, groups, meters, group/flow statistics: an empty switch


def main(argv: Sequence[str] | None = None) -> None:
    """``send INTF INTERVAL`` (frames on stdin, 4-byte length prefixes) or
    ``capture INTF ETHERTYPE SECONDS``."""
    cmd, *args = sys.argv[1:] if argv is None else argv
    if cmd == "send":
        _send(args[0], float(args[1]))
    elif cmd == "capture":
        _capture(args[0], int(args[1]), float(args[2]))
    else:
        raise SystemExit(f"unknown command {cmd!r}\n{main.__doc__}")


if __name__ == "__main__":
    main()
