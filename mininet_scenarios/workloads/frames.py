"""Hand-made frames for attack tests: craft, inject from a host, count what arrives.

* Builders (``struct`` only, no scapy): Ethernet with an optional 802.1Q tag, ARP, IPv4
  (header checksum), UDP and TCP (checksums over the pseudo-header), with any source MAC/IP.
* :func:`send_frames` injects frames from inside a Mininet host through an AF_PACKET socket;
  :class:`Counter` counts, in a host's namespace, the frames carrying a marker ``token`` (and
  ARP frames that lie about an address), so LLDP/ARP chatter is never miscounted.
* :class:`UdpProbe`: a constant-rate UDP stream with sequence numbers; the receiver reports
  loss and the largest gap between arrivals (monotonic clock, shared by all namespaces).
* :class:`Arrivals`: when each TCP segment with data for one port arrived at a host (e.g.
  an iperf3 flow), so a TCP flow's gaps are known to the millisecond.

The child side is this module run as ``python -m mininet_scenarios.workloads.frames <command>``.
"""

from __future__ import annotations

import errno
import itertools
import json
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from mininet_scenarios.harness.host_procs import StopFlag, run_child, start_child, stop_child

MODULE = "mininet_scenarios.workloads.frames"
ETH_P_ALL, ETH_IPV4, ETH_ARP, ETH_VLAN = 0x0003, 0x0800, 0x0806, 0x8100
PACKET_OUTGOING = 4
BROADCAST = "ff:ff:ff:ff:ff:ff"
TCP_SYN = 0x02
ARP_TYPE, VLAN_TYPE = struct.pack("!H", ETH_ARP), struct.pack("!H", ETH_VLAN)


def mac_bytes(mac: str) -> bytes:
    return bytes(int(b, 16) for b in mac.split(":"))


def ip_bytes(ip: str) -> bytes:
    return socket.inet_aton(ip)


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071)."""
    if len(data) % 2:
        data += b"\0"
    total = sum(int(w) for w in struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ethernet(
    dst: str, src: str, ethertype: int, payload: bytes, vlan: int | None = None, pcp: int = 0
) -> bytes:
    """An Ethernet frame (802.1Q-tagged when ``vlan`` is given; 0 = priority tag only),
    padded to the 60-byte minimum."""
    tag = struct.pack("!HH", ETH_VLAN, (pcp << 13) | vlan) if vlan is not None else b""
    frame = mac_bytes(dst) + mac_bytes(src) + tag + struct.pack("!H", ethertype) + payload
    return frame.ljust(60, b"\0")


def ipv4(src: str, dst: str, proto: int, payload: bytes, ttl: int = 64, ident: int = 0) -> bytes:
    """An IPv4 packet (no options, DF set) with a correct header checksum."""
    head = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, 0x4000, ttl, proto, 0,
        ip_bytes(src), ip_bytes(dst),
    )  # fmt: skip
    return head[:10] + struct.pack("!H", checksum(head)) + head[12:] + payload


def _pseudo(src: str, dst: str, proto: int, length: int) -> bytes:
    return ip_bytes(src) + ip_bytes(dst) + struct.pack("!BBH", 0, proto, length)


def udp(src: str, dst: str, sport: int, dport: int, payload: bytes) -> bytes:
    """A UDP datagram with its checksum over the IPv4 pseudo-header (``src``/``dst``)."""
    head = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0)
    csum = checksum(_pseudo(src, dst, 17, 8 + len(payload)) + head + payload) or 0xFFFF
    return head[:6] + struct.pack("!H", csum) + payload


def tcp(
    src: str, dst: str, sport: int, dport: int, payload: bytes = b"", flags: int = TCP_SYN,
    seq: int = 1,
) -> bytes:  # fmt: skip
    """A TCP segment (no options) with its checksum over the IPv4 pseudo-header."""
    head = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, flags, 64240, 0, 0)
    csum = checksum(_pseudo(src, dst, 6, len(head) + len(payload)) + head + payload)
    return head[:16] + struct.pack("!H", csum) + head[18:] + payload


def udp_frame(
    eth_src: str, eth_dst: str, ip_src: str, ip_dst: str, payload: bytes,
    vlan: int | None = None, pcp: int = 0, sport: int = 40000, dport: int = 9,
) -> bytes:  # fmt: skip
    packet = ipv4(ip_src, ip_dst, 17, udp(ip_src, ip_dst, sport, dport, payload))
    return ethernet(eth_dst, eth_src, ETH_IPV4, packet, vlan, pcp)


def tcp_frame(
    eth_src: str, eth_dst: str, ip_src: str, ip_dst: str, payload: bytes, dport: int = 22
) -> bytes:
    packet = ipv4(ip_src, ip_dst, 6, tcp(ip_src, ip_dst, 40001, dport, payload))
    return ethernet(eth_dst, eth_src, ETH_IPV4, packet)


def arp_frame(
    eth_src: str, eth_dst: str, op: int, sha: str, spa: str, tha: str, tpa: str,
    marker: bytes = b"", vlan: int | None = None,
) -> bytes:  # fmt: skip
    """An Ethernet/IPv4 ARP frame (op 1 request, 2 reply); ``marker`` goes into the trailer
    (the padding), which ARP ignores."""
    body = struct.pack("!HHBBH", 1, ETH_IPV4, 6, 4, op) + mac_bytes(sha) + ip_bytes(spa)
    return ethernet(eth_dst, eth_src, ETH_ARP, body + mac_bytes(tha) + ip_bytes(tpa) + marker, vlan)


# --------------------------------------------------------------------------- parent side


def _child(host: Any, *args: str) -> subprocess.Popen[bytes]:
    return start_child(host, MODULE, *args, stdin=subprocess.PIPE)


def send_frames(
    host: Any, intf: str, frames: Sequence[bytes], count: int = 1, interval: float = 0.0
) -> int:
    """Send every frame ``count`` times from ``host``'s ``intf``, ``interval`` seconds between
    rounds; returns how many frames went out."""
    data = b"".join(struct.pack("!H", len(f)) + f for f in frames)
    args = ("send", intf, str(count), str(interval))
    done = run_child(host, MODULE, *args, timeout=60 + count * interval, input=data)
    if done.returncode:
        raise RuntimeError(f"send from {intf} failed: {done.stderr.decode(errors='replace')}")
    return int(json.loads(done.stdout)["sent"])


def _readline(stream: IO[bytes] | None) -> dict[str, Any]:
    assert stream is not None
    line = stream.readline()
    if not line:
        raise RuntimeError("frame counter exited early")
    return dict(json.loads(line))


class Counter:
    """Counts, on ``intf`` inside ``host``, received frames that carry one of ``tokens``,
    ARP frames whose sender MAC is in ``arp_sha``, and ARP frames that lie: the sender IP is
    in ``truth`` with a sender MAC that is not one of its own. ``truth`` maps an IP to the
    MAC (or MACs) a true ARP frame may give for it: under Loom, the host's real MAC (its own
    frames) and its Loom address (Loom's replies). ``snapshot()`` returns the counts so far
    and starts again from zero."""

    def __init__(
        self, host: Any, intf: str, tokens: Sequence[bytes], arp_sha: Sequence[str] = (),
        truth: Mapping[str, str | Sequence[str]] | None = None,
    ) -> None:  # fmt: skip
        macs = {ip: [m] if isinstance(m, str) else list(m) for ip, m in (truth or {}).items()}
        spec = {"tokens": [t.hex() for t in tokens], "arp_sha": list(arp_sha), "truth": macs}
        self.proc = _child(host, "count", intf, json.dumps(spec))
        _readline(self.proc.stdout)  # {"ready": ...} once the socket is bound

    def snapshot(self) -> dict[str, Any]:
        self.proc.send_signal(signal.SIGUSR1)
        return _readline(self.proc.stdout)

    def close(self) -> None:
        stop_child(self.proc, timeout=5)


class UdpProbe:
    """``rate`` datagrams/s from ``src`` (``None``: no sender, e.g. for crafted datagrams) to
    ``dst_ip``:``port`` until :meth:`stop`, which returns the receiver's report
    (``received``, ``lost``, ``reordered``, ``max_gap_ms``, ``times`` of arrival)."""

    def __init__(
        self, src: Any, dst: Any, dst_ip: str, port: int = 9100, rate: float = 500.0
    ) -> None:
        self.receiver = _child(dst, "udp-recv", str(port))
        _readline(self.receiver.stdout)
        self.sender = (
            _child(src, "udp-send", dst_ip, str(port), str(rate)) if src is not None else None
        )

    def stop(self) -> dict[str, Any]:
        if self.sender is not None:
            stop_child(self.sender, timeout=5)
        time.sleep(0.3)  # the last datagrams in flight
        self.receiver.send_signal(signal.SIGUSR1)
        report = _readline(self.receiver.stdout)
        stop_child(self.receiver, timeout=5)
        return report


class Arrivals:
    """Arrival times (monotonic clock) of TCP segments carrying data to ``port``, seen on
    ``intf`` inside ``host``, from construction until :meth:`stop`."""

    def __init__(self, host: Any, intf: str, port: int) -> None:
        self.proc = _child(host, "arrivals", intf, str(port))
        _readline(self.proc.stdout)

    def stop(self) -> list[float]:
        self.proc.send_signal(signal.SIGUSR1)
        times = _readline(self.proc.stdout)["times"]
        self.proc.wait(timeout=5)
        return [float(t) for t in times]


def max_gap_ms(times: Sequence[float], start: float = 0.0, end: float = float("inf")) -> float:
    """The longest silence (ms) between arrivals ``times`` that overlaps [start, end]."""
    gaps = [b - a for a, b in itertools.pairwise(times) if b >= start and a <= end]
    return max(gaps, default=0.0) * 1e3


# --------------------------------------------------------------------------- child side


def _send(intf: str, count: int, interval: float) -> None:
    data, frames = sys.stdin.buffer.read(), []
    while data:
        (n,) = struct.unpack("!H", data[:2])
        frames.append(data[2 : 2 + n])
        data = data[2 + n :]
    sent = 0
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
        sock.bind((intf, 0))
        for i in range(count):
            for frame in frames:
                for _ in range(1000):  # ENOBUFS: the host's egress queue is full, let it drain
                    try:
                        sent += sock.send(frame) > 0
                        break
                    except OSError as exc:
                        if exc.errno != errno.ENOBUFS:
                            raise
                        time.sleep(0.002)
            if interval and i < count - 1:
                time.sleep(interval)
    print(json.dumps({"sent": sent}), flush=True)


def _count(
    intf: str, tokens: list[bytes], arp_sha: set[bytes], truth: dict[bytes, set[bytes]]
) -> None:
    dump, stop = StopFlag(signal.SIGUSR1), StopFlag(signal.SIGTERM, signal.SIGINT)
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        sock.bind((intf, 0))
        sock.settimeout(0.05)
        print(json.dumps({"ready": intf}), flush=True)
        counts = dict.fromkeys(("frames", "arp", "arp_from", "arp_lies"), 0)
        hits: dict[bytes, int] = {}
        while not stop.raised:
            if dump.raised:
                dump.raised = False
                tally = {t.hex(): hits.get(t, 0) for t in tokens}
                print(json.dumps({**counts, "tokens": tally}), flush=True)
                counts, hits = dict.fromkeys(counts, 0), {}
            try:
                frame, addr = sock.recvfrom(65535)
            except TimeoutError:
                continue
            if addr[2] == PACKET_OUTGOING:
                continue
            counts["frames"] += 1
            for token in tokens:
                if token in frame:
                    hits[token] = hits.get(token, 0) + 1
            at = 16 if frame[12:14] == VLAN_TYPE else 12  # a tag the kernel did not strip
            if frame[at : at + 2] == ARP_TYPE:
                counts["arp"] += 1
                sha, spa = frame[at + 10 : at + 16], frame[at + 16 : at + 20]
                counts["arp_from"] += sha in arp_sha
                counts["arp_lies"] += spa in truth and sha not in truth[spa]


def _arrivals(intf: str, port: int) -> None:
    dump = StopFlag(signal.SIGUSR1)
    times: list[float] = []
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_IPV4)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        sock.bind((intf, 0))
        sock.settimeout(0.05)
        print(json.dumps({"ready": intf}), flush=True)
        while not dump.raised:
            try:
                frame, addr = sock.recvfrom(128)
            except TimeoutError:
                continue
            ip = frame[14:]
            if addr[2] == PACKET_OUTGOING or len(ip) < 40 or ip[9] != 6:
                continue
            ihl = (ip[0] & 0x0F) * 4
            (total,) = struct.unpack("!H", ip[2:4])
            (dport,) = struct.unpack("!H", ip[ihl + 2 : ihl + 4])
            if dport == port and total > ihl + (ip[ihl + 12] >> 4) * 4:
                times.append(time.monotonic())
    print(json.dumps({"times": [round(t, 5) for t in times]}), flush=True)


def _udp_send(dst: str, port: int, rate: float) -> None:
    stop = StopFlag(signal.SIGTERM, signal.SIGINT)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        start, seq = time.monotonic(), 0
        while not stop.raised:
            sock.sendto(struct.pack("!Qd", seq, time.monotonic()).ljust(64, b"p"), (dst, port))
            seq += 1
            time.sleep(max(0.0, start + seq / rate - time.monotonic()))


def _udp_recv(port: int) -> None:
    dump = StopFlag(signal.SIGUSR1)
    arrivals: list[tuple[int, float]] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind(("0.0.0.0", port))
        sock.settimeout(0.05)
        print(json.dumps({"ready": port}), flush=True)
        while not dump.raised:
            try:
                data = sock.recv(2048)
            except TimeoutError:
                continue
            arrivals.append((struct.unpack("!Q", data[:8])[0], time.monotonic()))
    seqs = {s for s, _ in arrivals}
    times = [t for _, t in arrivals]
    report = {
        "received": len(arrivals),
        "lost": (max(seqs) + 1 - len(seqs)) if seqs else 0,
        "reordered": sum(1 for a, b in itertools.pairwise(arrivals) if b[0] < a[0]),
        "max_gap_ms": max_gap_ms(times),
        "times": [round(t, 5) for t in times],
    }
    print(json.dumps(report), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    """``send INTF COUNT INTERVAL`` (length-prefixed frames on stdin), ``count INTF SPEC``
    (JSON: tokens, arp_sha, truth as ip -> list of MACs; SIGUSR1 reports, SIGTERM stops),
    ``udp-send DST PORT RATE``, ``udp-recv PORT`` and ``arrivals INTF PORT`` (SIGUSR1
    reports and stops)."""
    cmd, *args = sys.argv[1:] if argv is None else argv
    if cmd == "send":
        _send(args[0], int(args[1]), float(args[2]))
    elif cmd == "count":
        spec = json.loads(args[1])
        tokens = [bytes.fromhex(t) for t in spec["tokens"]]
        truth = {ip_bytes(ip): {mac_bytes(m) for m in macs} for ip, macs in spec["truth"].items()}
        _count(args[0], tokens, {mac_bytes(m) for m in spec["arp_sha"]}, truth)
    elif cmd == "arrivals":
        _arrivals(args[0], int(args[1]))
    elif cmd == "udp-send":
        _udp_send(args[0], int(args[1]), float(args[2]))
    elif cmd == "udp-recv":
        _udp_recv(int(args[0]))
    else:
        raise SystemExit(f"unknown command {cmd!r}\n{main.__doc__}")


if __name__ == "__main__":
    main()
