"""What the fabric is doing: port counters turned into rates and link utilisation.

Switches report cumulative counters; the rate of a port is the difference between two
reports over the time between them, by the switch's clock where it gives one (the
port's uptime; else ``now`` as the shim saw the replies), smoothed with an EWMA so one
odd interval does not read as a spike. A directed link's load is what its
source port transmits; its utilisation is that over the link's capacity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from controller.capacity import Reading
from controller.model import (
    COOKIE_BASE,
    COOKIE_MARK_MASK,
    GroupStats,
    Message,
    Messages,
    PortRef,
    PortStats,
    StatsKind,
    StatsRequest,
    Table,
)

Interval = tuple[PortRef, Reading]  # what a port did between two readings


@dataclass
class PortSample:
    stats: PortStats
    at: float
    tx_bps: float = 0.0
    rx_bps: float = 0.0
    tx_drop_pps: float = 0.0
    rx_new_packets: int = 0  # received since the previous reading (not smoothed)


@dataclass
class BucketSample:
    stats: GroupStats
    at: float
    bucket_bps: tuple[float, ...] = ()


@dataclass
class Telemetry:
    """Latest counters and smoothed rates per port and per select group."""

    smoothing: float = 0.5  # weight of the newest interval in the EWMA
    ports: dict[PortRef, PortSample] = field(default_factory=dict)
    groups: dict[tuple[int, int], BucketSample] = field(default_factory=dict)

    def port_stats(
        self, now: float, dpid: int, stats: list[PortStats], every: bool = True
    ) -> list[Interval]:
        """Take a switch's port counters; returns what each port did since its last
        reading, for capacity learning (``every``: all ports, else those that dropped).
        This runs for every port of every switch polled, 2,000 switches a second at size."""
        intervals: list[Interval] = []
        a = self.smoothing
        for s in stats:
            ref = (dpid, s.port_no)
            old = self.ports.get(ref)
            sample = PortSample(s, now)
            if old is not None and now > old.at and s.tx_bytes >= old.stats.tx_bytes:
                dt, was = _interval(now - old.at, s.uptime, old.stats.uptime), old.stats
                sent = s.tx_bytes - was.tx_bytes
                drops = max(0, s.tx_dropped - was.tx_dropped)
                if every or drops:
                    packets = max(0, s.tx_packets - was.tx_packets)
                    received = max(0, s.rx_bytes - was.rx_bytes)
                    intervals.append((ref, Reading(dt, sent, packets, drops, received)))
                sample.tx_bps = a * 8 * sent / dt + (1 - a) * old.tx_bps
                sample.rx_bps = a * 8 * (s.rx_bytes - was.rx_bytes) / dt + (1 - a) * old.rx_bps
                sample.rx_new_packets = max(0, s.rx_packets - was.rx_packets)
                sample.tx_drop_pps = a * drops / dt + (1 - a) * old.tx_drop_pps
            self.ports[ref] = sample
        return intervals

    def group_stats(self, now: float, dpid: int, stats: list[GroupStats]) -> None:
        for s in stats:
            key = (dpid, s.group_id)
            old = self.groups.get(key)
            rates: tuple[float, ...] = ()
            if (
                old is not None
                and now > old.at
                and len(old.stats.bucket_bytes) == len(s.bucket_bytes)
            ):
                dt = now - old.at
                rates = tuple(
                    max(0.0, 8 * (b - ob) / dt)
                    for b, ob in zip(s.bucket_bytes, old.stats.bucket_bytes, strict=True)
                )
            self.groups[key] = BucketSample(s, now, rates)

    def receiving(self, now: float, within: float) -> set[PortRef]:
        """Ports whose last reading, at most ``within`` seconds old, counted packets
        arriving since the reading before."""
        return {r for r, s in self.ports.items() if now - s.at <= within and s.rx_new_packets > 0}

    def tx_bps(self, ref: PortRef) -> float:
        sample = self.ports.get(ref)
        return sample.tx_bps if sample else 0.0

    def rx_bps(self, ref: PortRef) -> float:
        sample = self.ports.get(ref)
        return sample.rx_bps if sample else 0.0

    def forget_switch(self, dpid: int) -> None:
        for ref in [r for r in self.ports if r[0] == dpid]:
            del self.ports[ref]
        for key in [k for k in self.groups if k[0] == dpid]:
            del self.groups[key]


def imbalance(rates: tuple[float, ...]) -> float:
    """How unevenly a select group spreads traffic: max bucket rate over the mean, minus 1
    (0 = perfectly even; 1 = the busiest bucket carries twice its share)."""
    if not rates or sum(rates) <= 0:
        return 0.0
    mean = sum(rates) / len(rates)
    return max(rates) / mean - 1.0


def poll_requests(
    due: list[int], edge_ports: Callable[[int], list[int]], ingresses: set[int]
) -> Messages:
    """Counters asked of the switches ``due``: ports always; groups where hosts can send
    (the select groups are there); the PIN table's Loom rules where flows or jobs enter
    (``ingresses``)."""
    flows = StatsRequest(StatsKind.FLOW, Table.PIN, COOKIE_BASE, COOKIE_MARK_MASK)
    out: Messages = {}
    for dpid in due:
        msgs: list[Message] = [StatsRequest(StatsKind.PORT)]
        if edge_ports(dpid):
            msgs.append(StatsRequest(StatsKind.GROUP))
        if dpid in ingresses:
            msgs.append(flows)
        out[dpid] = msgs
    return out


def _interval(seen: float, uptime: float | None, before: float | None) -> float:
    """Seconds between two readings: by the switch's clock where it gives one (a port
    that went down and up again, or a switch that rounds it away, leaves the
    controller's), else as the controller saw the replies arrive."""
    if uptime is None or before is None or not 0 < uptime - before < 2 * seen + 1:
        return seen
    return uptime - before
