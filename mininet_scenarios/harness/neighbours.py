"""Hosts' neighbour (ARP) entries: their timers, and what state they are in over time.

Linux keeps a neighbour entry REACHABLE for ``base_reachable_time`` (a random 0.5-1.5 x of
it), then STALE; used while STALE it goes DELAY (``delay_first_probe_time``), then PROBE:
unicast requests to the address it holds (``ucast_solicit`` tries, ``retrans_time`` apart),
then FAILED, and the host stops sending to a peer it knew. Only an answer to those probes
(or a TCP ACK confirming the path) keeps the entry alive, so whoever answers ARP decides
whether hosts keep talking while the controller cannot answer.

* :func:`set_timers`: a host's timers on its interface, Linux's ``default`` left as they
  are or ``shortened`` (:data:`SHORTENED`: an entry re-probes within seconds, so a test of
  a few tens of seconds sees what the defaults show over minutes).
* :class:`NeighbourWatch`: every host's entry for its peer, read from the kernel every
  ``interval`` seconds with an ``RTM_GETNEIGH`` netlink dump in the host's namespace (no
  process spawned per sample), as a timeline of state changes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import struct
import threading
import time
from collections.abc import Iterable
from typing import Any

TIMERS = ("base_reachable_time_ms", "gc_stale_time", "delay_first_probe_time")
SHORTENED = {"base_reachable_time_ms": 1000, "gc_stale_time": 1, "delay_first_probe_time": 1}
TIMER_MODES = ("default", "shortened")

NUD = {
    0x01: "INCOMPLETE",
    0x02: "REACHABLE",
    0x04: "STALE",
    0x08: "DELAY",
    0x10: "PROBE",
    0x20: "FAILED",
    0x40: "NOARP",
    0x80: "PERMANENT",
}
NONE = "NONE"  # no entry at all
LOST = ("FAILED", "INCOMPLETE", NONE)  # states in which a host no longer sends to its peer

CLONE_NEWNET = 0x40000000
RTM_NEWNEIGH, RTM_GETNEIGH = 28, 30
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NDA_DST = 1
NLMSG = struct.Struct("=IHHII")
NDMSG = struct.Struct("=BxxxiHBB")
RTATTR = struct.Struct("=HH")


# --------------------------------------------------------------------------- timers


def _dev(host: Any) -> str:
    return str(host.defaultIntf())


def read_timers(host: Any) -> dict[str, int]:
    """The neighbour timers of ``host``'s interface, as its kernel holds them."""
    dev = _dev(host)
    keys = " ".join(f"net.ipv4.neigh.{dev}.{t}" for t in TIMERS)
    out = host.cmd(f"sysctl -n {keys}").split()
    if len(out) != len(TIMERS):
        raise RuntimeError(f"{host.name}: sysctl {keys}: {out}")
    return {t: int(v) for t, v in zip(TIMERS, out, strict=True)}


def set_timers(host: Any, mode: str) -> dict[str, int]:
    """``mode`` ``default``: leave Linux's timers; ``shortened``: :data:`SHORTENED` on the
    host's interface (sysctl in its namespace). Returns the timers read back."""
    if mode not in TIMER_MODES:
        raise ValueError(f"timers: expected one of {TIMER_MODES}, got {mode!r}")
    if mode == "shortened":
        dev = _dev(host)
        sets = " ".join(f"net.ipv4.neigh.{dev}.{k}={v}" for k, v in SHORTENED.items())
        out = host.cmd(f"sysctl -qw {sets}")
        if out.strip():
            raise RuntimeError(f"{host.name}: sysctl -w {sets}: {out.strip()}")
    return read_timers(host)


# --------------------------------------------------------------------------- netlink


_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def netlink_in(pid: int) -> socket.socket:
    """A NETLINK_ROUTE socket in the network namespace of process ``pid``. Only the calling
    thread enters the namespace, and only while the socket is made (a socket stays in the
    namespace it was created in)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        _setns(target)
        try:
            return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        finally:
            _setns(own)
    finally:
        os.close(target)
        os.close(own)


def neighbour_states(sock: socket.socket, seq: int = 1) -> dict[str, str]:
    """IPv4 address -> NUD state name of every neighbour entry, by one RTM_GETNEIGH dump."""
    body = NDMSG.pack(socket.AF_INET, 0, 0, 0, 0)
    header = NLMSG.pack(NLMSG.size + len(body), RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP, seq, 0)
    sock.send(header + body)
    out: dict[str, str] = {}
    while True:
        data = sock.recv(65536)
        off = 0
        while off + NLMSG.size <= len(data):
            length, kind, _flags, _seq, _pid = NLMSG.unpack_from(data, off)
            if length < NLMSG.size:
                return out
            if kind == NLMSG_DONE:
                return out
            if kind == NLMSG_ERROR:
                (code,) = struct.unpack_from("=i", data, off + NLMSG.size)
                if code:
                    raise OSError(-code, f"RTM_GETNEIGH: {os.strerror(-code)}")
            elif kind == RTM_NEWNEIGH:
                _family, _ifindex, state, _fl, _type = NDMSG.unpack_from(data, off + NLMSG.size)
                at = off + NLMSG.size + NDMSG.size
                end = off + length
                while at + RTATTR.size <= end:
                    alen, atype = RTATTR.unpack_from(data, at)
                    if alen < RTATTR.size:
                        break
                    if atype == NDA_DST and alen - RTATTR.size == 4:
                        ip = socket.inet_ntoa(data[at + RTATTR.size : at + alen])
                        out[ip] = NUD.get(state, f"0x{state:02x}")
                    at += (alen + 3) & ~3
            off += (length + 3) & ~3


# --------------------------------------------------------------------------- watching


class NeighbourWatch:
    """``with NeighbourWatch(net, [("h1", "h9"), ...]) as watch:`` records, every
    ``interval`` seconds, the state of each host's entry for its peer (both directions of
    each pair). ``timeline[(host, peer)]`` holds (monotonic time, state) at every change;
    :meth:`seen` and :meth:`summary` read a window of it."""

    def __init__(self, net: Any, pairs: Iterable[tuple[str, str]], interval: float = 0.1) -> None:
        self.interval = interval
        keys: list[tuple[str, str]] = []
        for a, b in pairs:
            keys += [(a, b), (b, a)]
        self.keys = list(dict.fromkeys(keys))
        self._pids = {h: int(net.host(h).pid) for h, _ in self.keys}
        self._ips = {p: str(net.graph.nodes[p]["ip"]) for _, p in self.keys}
        self.timeline: dict[tuple[str, str], list[tuple[float, str]]] = {k: [] for k in self.keys}
        self.errors: list[str] = []
        self._socks: dict[str, socket.socket] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def start(self) -> NeighbourWatch:
        self._thread = threading.Thread(target=self._run, name="neighbour-watch", daemon=True)
        self._thread.start()
        self._ready.wait(10.0)
        if self.errors:
            self.stop()
            raise RuntimeError(f"neighbour watch: {self.errors[0]}")
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10.0)
            self._thread = None

    def __enter__(self) -> NeighbourWatch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            try:
                for host, pid in self._pids.items():
                    self._socks[host] = netlink_in(pid)
                    self._socks[host].settimeout(2.0)
            except OSError as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
                return
            finally:
                self._ready.set()
            seq = 0
            while not self._stop.is_set():
                seq += 1
                for host, sock in self._socks.items():
                    try:
                        states = neighbour_states(sock, seq)
                    except OSError as exc:
                        if len(self.errors) < 20:
                            self.errors.append(f"{host}: {exc}")
                        continue
                    now = time.monotonic()
                    for key in self.keys:
                        if key[0] == host:
                            self._note(key, now, states.get(self._ips[key[1]], NONE))
                self._stop.wait(self.interval)
        finally:
            for sock in self._socks.values():
                with contextlib.suppress(OSError):
                    sock.close()
            self._socks.clear()

    def _note(self, key: tuple[str, str], now: float, state: str) -> None:
        line = self.timeline[key]
        if not line or line[-1][1] != state:
            line.append((now, state))

    def state_at(self, key: tuple[str, str], t: float) -> str | None:
        """The state last seen at or before ``t`` (None: not yet watched)."""
        last = None
        for at, state in self.timeline[key]:
            if at > t:
                break
            last = state
        return last

    def seen(self, key: tuple[str, str], start: float, end: float) -> list[str]:
        """Every state the entry was in during [start, end], in order of first sight."""
        states: list[str] = []
        first = self.state_at(key, start)
        if first is not None:
            states.append(first)
        for at, state in self.timeline[key]:
            if start < at <= end and state not in states:
                states.append(state)
        return states

    def lost_seconds(self, key: tuple[str, str], start: float, end: float) -> float:
        """Seconds within [start, end] the host held no usable entry for its peer
        (:data:`LOST`: FAILED, INCOMPLETE or none at all)."""
        total = 0.0
        line = self.timeline[key]
        for i, (at, state) in enumerate(line):
            until = line[i + 1][0] if i + 1 < len(line) else end
            lo, hi = max(at, start), min(until, end)
            if state in LOST and hi > lo:
                total += hi - lo
        return total

    def summary(self, start: float, end: float) -> dict[str, Any]:
        """Per ``host->peer``: the states seen in the window, and seconds without an entry."""
        return {
            f"{h}->{p}": {
                "states": self.seen((h, p), start, end),
                "unusable_s": round(self.lost_seconds((h, p), start, end), 2),
            }
            for h, p in self.keys
        }
