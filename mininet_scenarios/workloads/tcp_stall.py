"""A TCP connection's longest stall: a paced sender and a receiver that notes every silence.

A TCP connection survives a missing neighbour entry in a way a datagram does not: the sender
retransmits with a backoff that doubles (200 ms, 400 ms, ... up to 120 s), so an ARP answer
that comes back after a few seconds can leave the connection silent for much longer. What
an application sees is the time with no byte arriving, so that is what is measured: the
sender writes ``rate`` bytes/s in small chunks (``TCP_NODELAY``), the receiver records
every interval of more than :data:`RECORDED_S` between two reads that returned bytes, and
the silence still running when it is stopped.

The child side runs in the hosts as ``python -m mininet_scenarios.workloads.tcp_stall
tcp-send|tcp-recv`` (:data:`MODULE`).
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mininet_scenarios.harness.host_procs import StopFlag, read_report, start_child, stop_child

MODULE = "mininet_scenarios.workloads.tcp_stall"
CHUNK = 1000  # bytes per write: one segment, several per 10 ms at the default rate
RECORDED_S = 0.1  # silences shorter than this are the pacing itself, not stalls


# --------------------------------------------------------------------------- child side


def _tcp_recv(port: int) -> None:
    """Accept one connection and read until SIGTERM; print the silences (monotonic times)."""
    stop = StopFlag()
    stalls: list[list[float]] = []
    received, first, last = 0, 0.0, 0.0
    error = None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("0.0.0.0", port))
        srv.listen(1)
        srv.settimeout(0.1)
        print(json.dumps({"ready": port}), flush=True)
        conn = None
        while conn is None and not stop.raised:
            with contextlib.suppress(TimeoutError):
                conn, _addr = srv.accept()
        if conn is not None:
            with conn:
                conn.settimeout(0.05)
                while not stop.raised:
                    try:
                        data = conn.recv(65536)
                    except (TimeoutError, InterruptedError):
                        continue
                    except OSError as exc:
                        error = f"{type(exc).__name__}: {exc}"
                        break
                    if not data:  # the sender stopped (its close arrived)
                        break
                    now = time.monotonic()
                    if received == 0:
                        first = now
                    elif now - last > RECORDED_S:
                        stalls.append([last, now])
                    received += len(data)
                    last = now
    stopped = time.monotonic()
    if received and stopped - last > RECORDED_S:
        stalls.append([last, stopped])  # still silent when stopped
    report = {"received": received, "first": first, "last": last, "stopped": stopped}
    print(json.dumps({**report, "stalls": stalls, "error": error}), flush=True)


def _tcp_send(dst: str, port: int, rate: float, sport: int) -> None:
    """Connect from ``sport`` and write ``rate`` bytes/s in :data:`CHUNK` writes until
    SIGTERM. A write the socket cannot take now waits (``select``), so a stalled connection
    is not made up for with a burst larger than its buffer."""
    stop = StopFlag()
    interval = CHUNK / rate
    chunk = b"x" * CHUNK
    sent, error = 0, None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("0.0.0.0", sport))
        sock.settimeout(5.0)
        sock.connect((dst, port))
        sock.setblocking(False)
        print(json.dumps({"ready": sport}), flush=True)
        due, pending = time.monotonic(), b""
        while not stop.raised:
            now = time.monotonic()
            if not pending and now >= due:
                pending = chunk
                due = max(due + interval, now - 0.5)  # catch up at most half a second
            if pending:
                _r, writable, _x = select.select([], [sock], [], 0.05)
                if writable:
                    try:
                        n = sock.send(pending)
                    except BlockingIOError:
                        continue
                    except OSError as exc:
                        error = f"{type(exc).__name__}: {exc}"
                        break
                    sent += n
                    pending = pending[n:]
            else:
                time.sleep(min(0.05, max(0.0, due - now)))
    print(json.dumps({"sent": sent, "error": error}), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    """``tcp-send DST PORT RATE SPORT`` or ``tcp-recv PORT`` (SIGTERM stops and reports)."""
    cmd, *args = sys.argv[1:] if argv is None else argv
    if cmd == "tcp-send":
        _tcp_send(args[0], int(args[1]), float(args[2]), int(args[3]))
    elif cmd == "tcp-recv":
        _tcp_recv(int(args[0]))
    else:
        raise SystemExit(f"unknown command {cmd!r}\n{main.__doc__}")


# --------------------------------------------------------------------------- parent side


@dataclass
class TcpTrace:
    """What both ends reported: bytes, and the receiver's silences longer than
    :data:`RECORDED_S` as (start, end) monotonic seconds (the last one may still have been
    running when the receiver was stopped)."""

    sent: int
    received: int
    stalls: list[tuple[float, float]] = field(default_factory=list)
    first: float = 0.0
    last: float = 0.0
    stopped: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def longest_stall_s(self) -> float:
        return max((b - a for a, b in self.stalls), default=0.0)


def stall_in(trace: TcpTrace, start: float, end: float) -> float:
    """Seconds of the longest silence overlapping [start, end], whole (0 if none)."""
    return max((b - a for a, b in trace.stalls if b >= start and a <= end), default=0.0)


class TcpFlow:
    """``with TcpFlow(net, "h2", "h10") as flow: ...; flow.trace``: one TCP connection
    carrying ``rate`` bytes/s from one host to another for the duration of the block."""

    def __init__(
        self,
        net: Any,
        src: str,
        dst: str,
        rate: float = 100_000.0,
        port: int = 9500,
        sport: int = 42500,
    ) -> None:
        self.net, self.src, self.dst = net, src, dst
        self.rate, self.port, self.sport = rate, port, sport
        self.receiver: subprocess.Popen[bytes] | None = None
        self.sender: subprocess.Popen[bytes] | None = None
        self.trace: TcpTrace | None = None

    def start(self) -> TcpFlow:
        dst_ip = self.net.graph.nodes[self.dst]["ip"]
        self.receiver = start_child(self.net.host(self.dst), MODULE, "tcp-recv", str(self.port))
        read_report(self.receiver)
        self.sender = start_child(
            self.net.host(self.src),
            MODULE,
            "tcp-send",
            dst_ip,
            str(self.port),
            f"{self.rate:g}",
            str(self.sport),
        )
        read_report(self.sender)
        return self

    def stop(self) -> TcpTrace:
        sent: dict[str, Any] = {}
        got: dict[str, Any] = {}
        if self.sender is not None:
            stop_child(self.sender)
            with contextlib.suppress(RuntimeError, ValueError):
                sent = read_report(self.sender, 5)
            self.sender = None
        if self.receiver is not None:
            stop_child(self.receiver)
            with contextlib.suppress(RuntimeError, ValueError):
                got = read_report(self.receiver, 5)
            self.receiver = None
        errors = [
            f"{end}: {r.get('error') or 'no report'}"
            for end, r in (("sender", sent), ("receiver", got))
            if r.get("error") or not r
        ]
        self.trace = TcpTrace(
            sent=int(sent.get("sent", 0)),
            received=int(got.get("received", 0)),
            stalls=[(float(a), float(b)) for a, b in got.get("stalls", [])],
            first=float(got.get("first", 0.0)),
            last=float(got.get("last", 0.0)),
            stopped=float(got.get("stopped", 0.0)),
            errors=errors,
        )
        return self.trace

    def __enter__(self) -> TcpFlow:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.sender is not None or self.receiver is not None:
            with contextlib.suppress(Exception):
                self.stop()


if __name__ == "__main__":
    main()
