"""Traffic gaps measured to the millisecond: a constant-rate UDP stream between two
Mininet hosts, and the longest interruption it saw around an event (a cut link, a
controller restart).

Datagrams carry a sequence number and their send time (``CLOCK_MONOTONIC``, which network
namespaces share with us). The receiver takes the *kernel's* arrival timestamp
(``SO_TIMESTAMPNS``), so a receiver scheduled late on a busy 2-core machine does not invent
a gap, and converts it to the monotonic clock, so the gap can be placed against the moment
we cut a link. A gap is reported at the receiver (longest silence between arrivals) and
from the sender's side (longest send-time span across lost datagrams): the first is what an
application sees, the second is immune to jitter at either end. :func:`stream_path` reads
which fabric links a stream crosses from port counters (a select group hashes; the graph
alone cannot tell).

The child side runs in the hosts as ``python -m mininet_scenarios.workloads.streams
udp-send|udp-recv`` (:data:`MODULE`).
"""

from __future__ import annotations

import array
import contextlib
import itertools
import json
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mininet_scenarios.harness.host_procs import StopFlag, read_report, start_child, stop_child

PAYLOAD = 64  # bytes of UDP payload: seq (8) + send time (8) + padding
HEADER = struct.Struct("!Qd")
# Python's socket module does not export it; asm-generic/socket.h: SO_TIMESTAMPNS_OLD, which
# is the 64-bit timespec on 64-bit Linux (the control message type, SCM_TIMESTAMPNS, is equal).
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
MODULE = "mininet_scenarios.workloads.streams"


# --------------------------------------------------------------------------- child side


def _udp_send(dst: str, port: int, rate: float, sport: int) -> None:
    """Send ``rate`` datagrams/s until SIGTERM. A fixed source port keeps the flow (and so
    its hash through select groups) identical from run to run. Late by more than 20 ms (the
    process was not scheduled), the schedule restarts instead of bursting: the send times in
    the datagrams then show the pause for what it is."""
    stop = StopFlag()
    interval = 1.0 / rate
    pad = b"p" * (PAYLOAD - HEADER.size)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("0.0.0.0", sport))
        seq, due = 0, time.monotonic()
        print(json.dumps({"ready": sport}), flush=True)
        while not stop.raised:
            now = time.monotonic()
            if now < due:
                time.sleep(due - now)
                now = time.monotonic()
            elif now - due > 0.02:
                due = now
            with contextlib.suppress(OSError):  # ENOBUFS, unreachable: the gap shows it
                sock.sendto(HEADER.pack(seq, now) + pad, (dst, port))
            seq += 1
            due += interval
    print(json.dumps({"sent": seq}), flush=True)


def _udp_recv(port: int, out: str) -> None:
    """Record (seq, send time, kernel arrival time) of every datagram until SIGTERM, then
    write them to ``out`` (three native arrays) and print a one-line summary."""
    stop = StopFlag()
    seqs, sent, recv = array.array("Q"), array.array("d"), array.array("d")
    offsets = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.bind(("0.0.0.0", port))
        sock.settimeout(0.05)
        # Kernel timestamps are CLOCK_REALTIME; the events we compare with are monotonic.
        offsets.append(time.time() - time.monotonic())
        print(json.dumps({"ready": port}), flush=True)
        while not stop.raised:
            try:
                data, anc, _flags, _addr = sock.recvmsg(2048, 64)
            except (TimeoutError, InterruptedError):
                continue
            if len(data) < HEADER.size:
                continue
            arrival = None
            for level, kind, cdata in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", cdata[:16])
                    arrival = sec + nsec * 1e-9 - offsets[0]
            if arrival is None:
                arrival = time.monotonic()
            seq, at = HEADER.unpack_from(data)
            seqs.append(seq)
            sent.append(at)
            recv.append(arrival)
    offsets.append(time.time() - time.monotonic())
    with open(out, "wb") as f:
        f.write(struct.pack("!Q", len(seqs)))
        seqs.tofile(f)
        sent.tofile(f)
        recv.tofile(f)
    drift = (offsets[-1] - offsets[0]) * 1e3
    print(json.dumps({"received": len(seqs), "clock_drift_ms": round(drift, 3)}), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    """``udp-send DST PORT RATE SPORT`` or ``udp-recv PORT OUTFILE`` (SIGTERM stops and
    writes)."""
    cmd, *args = sys.argv[1:] if argv is None else argv
    if cmd == "udp-send":
        _udp_send(args[0], int(args[1]), float(args[2]), int(args[3]))
    elif cmd == "udp-recv":
        _udp_recv(int(args[0]), args[1])
    else:
        raise SystemExit(f"unknown command {cmd!r}\n{main.__doc__}")


# --------------------------------------------------------------------------- parent side


@dataclass
class Trace:
    """What a receiver recorded: per datagram its sequence number, its send time and its
    arrival time (both monotonic seconds), in arrival order."""

    seq: list[int]
    sent: list[float]
    recv: list[float]
    sent_count: int = 0
    rate: float = 1000.0

    @property
    def lost(self) -> int:
        return self.sent_count - len(set(self.seq)) if self.sent_count else 0


@dataclass(frozen=True)
class Gap:
    """The longest interruption of a stream overlapping a window.

    ``gap_ms``: longest silence between two arrivals at the receiver; ``outage_ms``: the
    send-time span from the last datagram delivered before a run of losses to the first one
    after it (one send interval when nothing was lost); ``lost``: datagrams sent in the window
    and never received; ``start_ms``: when the receiver's silence began, relative to the
    window's start (the event)."""

    gap_ms: float
    outage_ms: float
    lost: int
    start_ms: float

    def as_dict(self) -> dict[str, float]:
        return {
            "gap_ms": round(self.gap_ms, 2),
            "outage_ms": round(self.outage_ms, 2),
            "lost": self.lost,
            "start_ms": round(self.start_ms, 2),
        }


def gap_in(trace: Trace, start: float, end: float) -> Gap:
    """The :class:`Gap` of ``trace`` within [start, end] (monotonic seconds)."""
    arrivals = sorted(trace.recv)
    best, at = 0.0, 0.0
    for a, b in itertools.pairwise(arrivals):
        if b >= start and a <= end and b - a > best:
            best, at = b - a, a - start
    by_seq = sorted(zip(trace.seq, trace.sent, strict=True))
    outage, lost = 1.0 / trace.rate, 0
    for (s1, t1), (s2, t2) in itertools.pairwise(by_seq):
        if t2 >= start and t1 <= end and s2 > s1:
            lost += s2 - s1 - 1
            outage = max(outage, t2 - t1)
    return Gap(best * 1e3, outage * 1e3, lost, at * 1e3)


def arrival_series(trace: Trace, start: float, end: float) -> list[list[float]]:
    """(arrival - start, time since the previous arrival) in ms: a cut as a plot shows it."""
    arrivals = sorted(t for t in trace.recv if start - 0.1 <= t <= end)
    return [
        [round((b - start) * 1e3, 2), round((b - a) * 1e3, 2)]
        for a, b in itertools.pairwise(arrivals)
        if b >= start
    ]


class Stream:
    """``with Stream(net, "h1", "h16", out_dir) as s: ...; trace = s.trace``: ``rate``
    datagrams/s from one host to another for the duration of the block."""

    def __init__(
        self,
        net: Any,
        src: str,
        dst: str,
        out_dir: Path,
        rate: float = 1000.0,
        port: int = 9300,
        sport: int = 41000,
    ) -> None:
        self.net, self.src, self.dst = net, src, dst
        self.rate, self.port, self.sport = rate, port, sport
        out_dir.mkdir(parents=True, exist_ok=True)
        self.path = out_dir / f"stream-{src}-{dst}-{sport}-{time.monotonic_ns()}.bin"
        self.receiver: subprocess.Popen[bytes] | None = None
        self.sender: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.trace: Trace | None = None

    def start(self) -> Stream:
        dst_ip = self.net.graph.nodes[self.dst]["ip"]
        self.receiver = start_child(
            self.net.host(self.dst), MODULE, "udp-recv", str(self.port), str(self.path)
        )
        read_report(self.receiver)
        self.sender = start_child(
            self.net.host(self.src),
            MODULE,
            "udp-send",
            dst_ip,
            str(self.port),
            f"{self.rate:g}",
            str(self.sport),
        )
        read_report(self.sender)
        self.started = time.monotonic()
        return self

    def stop(self) -> Trace:
        sent = 0
        if self.sender is not None:
            stop_child(self.sender)
            with contextlib.suppress(RuntimeError, ValueError):
                sent = int(read_report(self.sender, 5).get("sent", 0))
            self.sender = None
        time.sleep(0.3)  # what is still in flight
        if self.receiver is not None:
            stop_child(self.receiver)
            self.receiver = None
        self.trace = read_trace(self.path, sent, self.rate)
        with contextlib.suppress(OSError):
            self.path.unlink()
        return self.trace

    def __enter__(self) -> Stream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.sender is not None or self.receiver is not None:
            with contextlib.suppress(Exception):
                self.stop()


def read_trace(path: Path, sent: int, rate: float) -> Trace:
    data = path.read_bytes()
    (n,) = struct.unpack_from("!Q", data)
    seqs, sent_t, recv_t = array.array("Q"), array.array("d"), array.array("d")
    off = 8
    for arr in (seqs, sent_t, recv_t):
        size = n * arr.itemsize
        arr.frombytes(data[off : off + size])
        off += size
    return Trace(list(seqs), list(sent_t), list(recv_t), sent, rate)


# --------------------------------------------------------------------------- paths


StreamHop = tuple[str, int, str, int]  # (switch, port, peer switch, peer port), one direction


def counters(net: Any, switches: Iterable[str]) -> dict[tuple[str, int], int]:
    """tx packets of every port of ``switches``."""
    out = {}
    for sw in switches:
        for port, c in net.port_counters(sw).items():
            out[(sw, port)] = c.tx_packets
    return out


def stream_path(net: Any, src: str, dst: str, rate: float, seconds: float = 1.0) -> list[StreamHop]:
    """The switch-to-switch links (in the stream's direction, from ``src``'s edge switch)
    whose tx counters grew by at least half of what a ``rate`` packets/s stream sends."""
    g = net.graph
    switches = [n for n, d in g.nodes(data=True) if d["kind"] == "switch"]
    before, t0 = counters(net, switches), time.monotonic()
    time.sleep(seconds)
    after, t1 = counters(net, switches), time.monotonic()
    need = 0.5 * rate * (t1 - t0)
    busy = {k for k, v in after.items() if v - before.get(k, v) >= need}
    hops: dict[str, list[StreamHop]] = {}
    for a, b, d in g.edges(data=True):
        if g.nodes[a]["kind"] != "switch" or g.nodes[b]["kind"] != "switch":
            continue
        for u, v in ((a, b), (b, a)):
            if (u, d["ports"][u]) in busy:
                hops.setdefault(u, []).append((u, d["ports"][u], v, d["ports"][v]))
    # Other streams may be busy on the same switches: the shortest busy path between the
    # two edge switches is this stream's (breadth first over busy links).
    first, last = next(iter(g.neighbors(src))), next(iter(g.neighbors(dst)))
    came: dict[str, StreamHop | None] = {first: None}
    frontier = [first]
    while frontier and last not in came:
        reached = []
        for node in frontier:
            for hop in sorted(hops.get(node, [])):
                if hop[2] not in came:
                    came[hop[2]] = hop
                    reached.append(hop[2])
        frontier = reached
    if last not in came:
        raise RuntimeError(f"stream {src}->{dst}: no complete path in counters: {hops}")
    path: list[StreamHop] = []
    back = came[last]
    while back is not None:
        path.append(back)
        back = came[back[0]]
    return path[::-1]


if __name__ == "__main__":
    main()
