"""Traffic between hosts that already know each other, while no controller can answer ARP.

Loom answers every ARP itself; a host whose neighbour entry for a peer goes stale re-probes
it with unicast requests, and if nobody answers, the entry fails and the host stops sending
to a peer it knew. :class:`Traffic` runs what shows it, between pairs of hosts that talked
before (they ping each other first, so each holds the other's Loom address):

* a UDP stream per ``udp`` pair (:class:`~mininet_scenarios.workloads.streams.Stream`, 1,000
  datagrams/s with sequence numbers): datagrams lost, the largest gap. A UDP sender never
  confirms its neighbour entry, so only ARP answers keep it;
* a paced TCP connection per ``tcp`` pair (:class:`~mininet_scenarios.workloads.tcp_stall.
  TcpFlow`): the longest time the receiver got no byte. TCP's ACKs confirm the sender's entry,
  not the receiver's, whose ACKs then stop: the pairs are kept apart so neither kind hides
  the other;
* each host's entry for its peer, sampled every 100 ms (:class:`~mininet_scenarios.harness.
  neighbours.NeighbourWatch`), and the busiest ovs-vswitchd thread's CPU.

Each pair's hosts get the pair's neighbour timers (:func:`set_pair_timers`), so Linux's
defaults and shortened ones run side by side on one fabric, through the same outage.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mininet_scenarios.harness.cpu import busiest_thread, ovs_vswitchd_pid, thread_cpu_seconds
from mininet_scenarios.harness.neighbours import NeighbourWatch, set_timers
from mininet_scenarios.workloads.streams import Stream, gap_in
from mininet_scenarios.workloads.tcp_stall import CHUNK, TcpFlow, stall_in

TARGETS = {"lost": 0, "tcp_stall_s": 1.0}
STREAM_RATE = 1000.0  # datagrams/s
TCP_RATE = 100_000.0  # bytes/s: 100 segments/s, so a silence of 0.1 s is a stall


@dataclass(frozen=True)
class Pair:
    """``src`` sends to ``dst``: a UDP stream or a TCP connection; both hosts get
    ``timers`` (``default`` or ``shortened``, see :mod:`~mininet_scenarios.harness.neighbours`)."""

    src: str
    dst: str
    kind: str  # udp | tcp
    timers: str = "shortened"

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}"


def set_pair_timers(net: Any, pairs: Sequence[Pair]) -> dict[str, dict[str, int]]:
    """Each pair's timers on both of its hosts; host -> the timers read back."""
    out: dict[str, dict[str, int]] = {}
    for p in pairs:
        for h in (p.src, p.dst):
            if h in out:
                raise ValueError(f"{h} is in two pairs: each host needs timers of its own")
            out[h] = set_timers(net.host(h), p.timers)
    return out


def introduce(net: Any, pairs: Sequence[Pair]) -> None:
    """Each pair pings both ways: the hosts talked before, each knows the other's address."""
    for p in pairs:
        for a, b in ((p.src, p.dst), (p.dst, p.src)):
            ip = net.graph.nodes[b]["ip"]
            out = net.host(a).cmd(f"ping -n -q -c3 -i0.2 -W1 {ip}")
            if " 100% packet loss" in out or "packet loss" not in out:
                raise RuntimeError(f"{a} cannot ping {b} ({ip}): {out.strip()[-200:]}")


def rx_packets(host: Any) -> int:
    """Packets received on ``host``'s interface (``ip -s -j link`` in its namespace)."""
    out = host.cmd(f"ip -s -j link show dev {host.defaultIntf()}")
    return int(json.loads(out)[0]["stats64"]["rx"]["packets"])


class Traffic:
    """``with Traffic(net, pairs, out_dir) as traffic:`` streams and connections for the
    block; afterwards :meth:`results` of any window. ``port_base`` keeps successive runs'
    ports (and their TIME_WAIT sockets) apart."""

    def __init__(
        self,
        net: Any,
        pairs: Sequence[Pair],
        out_dir: Path,
        *,
        port_base: int = 9600,
        stream_rate: float = STREAM_RATE,
        tcp_rate: float = TCP_RATE,
    ) -> None:
        self.net, self.pairs, self.out_dir = net, list(pairs), out_dir
        self.stream_rate, self.tcp_rate = stream_rate, tcp_rate
        self.streams: dict[str, Stream] = {}
        self.flows: dict[str, TcpFlow] = {}
        for i, p in enumerate(self.pairs):
            port, sport = port_base + i, 41000 + port_base % 1000 + i
            if p.kind == "udp":
                self.streams[p.name] = Stream(
                    net, p.src, p.dst, out_dir, stream_rate, port=port, sport=sport
                )
            elif p.kind == "tcp":
                self.flows[p.name] = TcpFlow(net, p.src, p.dst, tcp_rate, port=port, sport=sport)
            else:
                raise ValueError(f"pair {p.name}: kind {p.kind!r}, expected udp or tcp")
        self.watch = NeighbourWatch(net, [(p.src, p.dst) for p in self.pairs])
        self._stack = contextlib.ExitStack()
        self._ovs_pid = ovs_vswitchd_pid()
        self._ovs0: dict[int, tuple[str, float]] = {}
        self.ovs_busiest: dict[str, object] | None = None
        self.started = self.stopped = 0.0

    def __enter__(self) -> Traffic:
        try:
            introduce(self.net, self.pairs)
            self._stack.enter_context(self.watch)
            for s in self.streams.values():
                self._stack.enter_context(s)
            for f in self.flows.values():
                self._stack.enter_context(f)
            self.started = time.monotonic()
            if self._ovs_pid:
                self._ovs0 = thread_cpu_seconds(self._ovs_pid)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = time.monotonic()
        if self._ovs_pid:
            seconds = self.stopped - self.started
            self.ovs_busiest = busiest_thread(
                self._ovs0, thread_cpu_seconds(self._ovs_pid), seconds
            )
        for f in self.flows.values():
            with contextlib.suppress(Exception):
                f.stop()
        for s in self.streams.values():
            with contextlib.suppress(Exception):
                s.stop()
        self._stack.close()

    def flowing(self, seconds: float = 0.5) -> list[str]:
        """Pairs whose receiver did not get half the packets its sender sends in
        ``seconds`` (empty: every pair carries traffic)."""
        hosts = {p.dst: self.net.host(p.dst) for p in self.pairs}
        before = {h: rx_packets(host) for h, host in hosts.items()}
        t0 = time.monotonic()
        time.sleep(seconds)
        after = {h: rx_packets(host) for h, host in hosts.items()}
        dt = time.monotonic() - t0
        slow = []
        for p in self.pairs:
            rate = self.stream_rate if p.kind == "udp" else self.tcp_rate / CHUNK  # segments
            if after[p.dst] - before[p.dst] < 0.5 * rate * dt:
                slow.append(p.name)
        return slow

    def wait_flowing(self, timeout: float) -> float | None:
        """Seconds until every pair carries traffic again (None: not within ``timeout``)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if not self.flowing():
                return time.monotonic() - t0
        return None

    def results(self, start: float, end: float) -> dict[str, Any]:
        """Per pair, what it lost in [start, end] and what its hosts' entries went through;
        then, per timers mode, the totals against :data:`TARGETS`. Call after the block."""
        pairs: list[dict[str, Any]] = []
        for p in self.pairs:
            row: dict[str, Any] = {"pair": p.name, "kind": p.kind, "timers": p.timers}
            row["neighbours"] = {
                k: v
                for k, v in self.watch.summary(start, end).items()
                if k in (f"{p.src}->{p.dst}", f"{p.dst}->{p.src}")
            }
            if p.kind == "udp":
                trace = self.streams[p.name].trace
                if trace is None:
                    row["error"] = "no trace"
                else:
                    gap = gap_in(trace, start, end)
                    row.update(
                        sent=trace.sent_count,
                        received=len(set(trace.seq)),
                        lost=trace.lost,
                        lost_in_window=gap.lost,
                        largest_gap_ms=round(gap.gap_ms, 1),
                        outage_ms=round(gap.outage_ms, 1),
                    )
            else:
                tcp = self.flows[p.name].trace
                if tcp is None:
                    row["error"] = "no trace"
                else:
                    row.update(
                        bytes_sent=tcp.sent,
                        bytes_received=tcp.received,
                        longest_stall_s=round(stall_in(tcp, start, end), 3),
                        longest_stall_whole_run_s=round(tcp.longest_stall_s, 3),
                        still_stalled_at_end=bool(tcp.stalls)
                        and tcp.stalls[-1][1] >= tcp.stopped - 1e-3,
                        errors=tcp.errors,
                    )
            row["timeline"] = [
                [round(t - start, 2), state]
                for t, state in self.watch.timeline[(p.src, p.dst)]
                if t <= end
            ]
            pairs.append(row)
        return {
            "pairs": pairs,
            "by_timers": summarize(pairs),
            "ovs_busiest_thread": self.ovs_busiest,
            "watch_errors": self.watch.errors[:5],
        }


def summarize(pairs: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per timers mode: datagrams lost, the largest gap, the longest TCP stall, every
    neighbour state seen, and whether :data:`TARGETS` were met."""
    out: dict[str, dict[str, Any]] = {}
    for mode in dict.fromkeys(r["timers"] for r in pairs):
        rows = [r for r in pairs if r["timers"] == mode]
        udp = [r for r in rows if r["kind"] == "udp" and "lost" in r]
        tcp = [r for r in rows if r["kind"] == "tcp" and "longest_stall_s" in r]
        states = sorted({s for r in rows for n in r["neighbours"].values() for s in n["states"]})
        lost = sum(r["lost"] for r in udp)
        sent = sum(r["sent"] for r in udp)
        in_window = sum(r["lost_in_window"] for r in udp)
        stall = max((r["longest_stall_s"] for r in tcp), default=None)
        broken = sum(1 for r in rows if "error" in r or r.get("errors"))
        out[mode] = {
            "datagrams_lost": lost,
            "datagrams_sent": sent,
            "datagrams_lost_in_window": in_window,
            "largest_gap_ms": max((r["largest_gap_ms"] for r in udp), default=None),
            "longest_tcp_stall_s": stall,
            "neighbour_states": states,
            "unusable_entry_s": max(
                (n["unusable_s"] for r in rows for n in r["neighbours"].values()), default=0.0
            ),
            "met": lost == TARGETS["lost"]
            and stall is not None
            and stall <= TARGETS["tcp_stall_s"]
            and not broken,
        }
    return out


def describe(res: dict[str, Any]) -> str:
    """One line per timers mode, for progress output and assertion messages."""
    lines = []
    for mode, s in res["by_timers"].items():
        lines.append(
            f"{mode:>9} timers: {s['datagrams_lost']} of {s['datagrams_sent']} datagrams lost,"
            f" largest gap {s['largest_gap_ms']} ms, longest TCP stall"
            f" {s['longest_tcp_stall_s']} s, entries unusable up to {s['unusable_entry_s']} s,"
            f" states {'/'.join(s['neighbour_states'])}: {'met' if s['met'] else 'MISSED'}"
        )
    return "\n".join(lines)
