"""What each port can carry, as Loom believes it, and why.

A port reports a speed (OpenFlow ``curr_speed``) that is often not what its link carries:
a veth reports 10 Gbit/s whatever shapes it, a policed or degraded link reports its
nominal rate. Traffic engineering that believed the reported speed would never see a
flow on such a link as big, nor a link as full. So the reported speed is only a prior;
Loom lowers it on evidence that the link is full, and only then:

* **Own evidence.** A polling interval in which the port dropped packets it was asked to
  transmit (``tx_dropped`` grew by at least ``min_drops`` and ``min_drop_share`` of what
  it sent) was spent at the port's limit: the rate it sent then is what the link carries.
  The belief is the highest such rate in the last ``window`` seconds (an interval that
  was full only in part reads low; the highest is the nearest), raised at once by any
  interval that sent more (a link carries at least what it was seen to carry), and never
  above the reported speed. It needs ``min_full`` such intervals. A port that is merely
  idle or lightly used drops nothing and keeps its prior: it is never marked down to
  its load.
* **Own evidence, a ceiling.** Open vSwitch's userspace ports count no such drops (a full
  shaper queue drops before the port's counters see the packet), and TCP on a deep queue
  seldom drops at all: it keeps the link busy at exactly its rate, however the flows on
  it share it. What shows is that ceiling. A direction of a link (what a port transmits;
  for a host's port also what it receives, which its host's queue holds back) whose rate
  stays flat (within ``flat_tolerance`` over ``flat_intervals`` readings) while tracked
  TCP flows carry at least ``tcp_share`` of that rate across the fabric is held at it.
  Once ``min_ceilings`` directions of links of one reported speed sit flat at the
  highest level any of them holds (within the tolerance), that level is what their kind
  carries. Idle links (LLDP alone is flat, but tiny and not TCP), constant-rate UDP
  streams and flows still growing set none.
* **Peers.** A fabric is built of a few kinds of link. Ports that report the same speed
  as ports with their own evidence, and have none themselves (a host's port, which only
  the host's own queue holds back), take the highest capacity learned on that kind once
  ``min_peers`` ports have one, but never less than they were themselves seen to carry.
  (A single degraded link in a fabric of sound ones lowers the belief in those of its
  kind that never carried more: more flows count as elephants there, and placement is
  more careful than it needs to be; the metric's ``source`` label says so.)
* **Degraded.** A direction ``controller.graylinks`` suspects or found degraded (held
  flat well below its kind while its flows had room elsewhere) is believed at the level
  it holds (source ``suspect`` or ``degraded``), whatever else is known of its kind
  (``Readings.belief`` asks it first).
* **Configured.** ``LOOM_LINK_CAPACITY_MBPS`` (or the policy's ``link_capacity_mbps``)
  overrides everything else.

Pure: the conductor feeds it port readings with ``now``; the belief of every port and
where it came from are what the metrics and ``GET /loom/v1/topology`` show.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from controller.model import PortRef

log = logging.getLogger("loom.capacity")

Source = Literal["degraded", "suspect", "configured", "learned", "peers", "reported", "default"]
DEFAULT_CAPACITY_BPS = 1e9  # a port that reports no speed
DEPARTS = 0.8  # a learned belief below this share of the reported speed is logged


@dataclass(frozen=True)
class Belief:
    bps: float
    source: Source


@dataclass(frozen=True)
class LearningConfig:
    window: float = 30.0  # seconds of full intervals the belief is taken from
    min_drops: int = 3  # packets dropped in an interval for it to count as full ...
    min_drop_share: float = 0.001  # ... and this share of the packets sent
    min_full: int = 2  # full intervals before a port's own belief replaces its prior
    min_peers: int = 1  # ports with their own belief before their kind lends it
    flat_intervals: int = 4  # readings a ceiling must hold for
    flat_tolerance: float = 0.03  # ... within this share of their mean
    tcp_share: float = 0.8  # of a flat level that tracked TCP flows must carry in all
    min_ceilings: int = 2  # directions of links flat at the kind's highest level


@dataclass
class _Port:
    recent: deque[tuple[float, float, bool]] = field(default_factory=deque)  # at, bits/s, full
    seen_full: int = 0  # full intervals ever
    learned: float | None = None
    # The most it was seen to carry (while TCP flows are tracked) over two intervals in a
    # row: one interval alone reads high whenever a reply comes late (its bytes over a
    # shorter interval).
    peak: float = 0.0
    shown: tuple[float, float] = (0.0, 0.0)  # (at, bits/s): the most it carried lately
    last_sent: float = 0.0  # the previous interval's rate sent (once it dropped)
    rates: dict[str, deque[float]] = field(default_factory=dict)  # "tx"/"rx": the last ones
    ceiling: tuple[float, float] | None = None  # (at, bits/s): held flat there by TCP


Held = tuple[PortRef, str]  # a direction of a port's link: "tx", or "rx" at a host port
SWEEP_EVERY = 1.0  # seconds between full passes over a kind's ceilings (expiry, exact top)
FRESH = 2.0  # seconds a port's own flat level counts as current (four polls)
SHOWN_FOR = 300.0  # seconds what a port was seen to carry proves what it can


@dataclass
class _Kind:
    """The ceilings of one kind of link (one reported speed): the levels directions were
    last held flat at, and which of them agree with the highest. Kept up to date one
    level at a time (a k=48 fat-tree has 221,184 directions), swept whole once a second."""

    held: dict[Held, tuple[float, float]] = field(default_factory=dict)  # -> (at, bits/s)
    top: float = 0.0
    agreeing: set[Held] = field(default_factory=set)  # within the tolerance of ``top``
    swept: float = float("-inf")

    def add(self, key: Held, at: float, level: float, tol: float) -> None:
        self.held[key] = (at, level)
        if level > self.top * (1 + 2 * tol):
            self.top, self.agreeing = level, {key}
        elif level >= self.top * (1 - 2 * tol):
            self.agreeing.add(key)
        else:
            self.agreeing.discard(key)

    def sweep(self, now: float, window: float, tol: float) -> None:
        self.held = {k: v for k, v in self.held.items() if now - v[0] <= window}
        self.top = max((level for _, level in self.held.values()), default=0.0)
        floor = self.top * (1 - 2 * tol)
        self.agreeing = {k for k, (_, level) in self.held.items() if level >= floor}
        self.swept = now

    def ceiling(self, min_agreeing: int) -> float | None:
        return self.top if len(self.agreeing) >= min_agreeing else None


class Reading(NamedTuple):
    """One polling interval of one port: what it sent and dropped, and how long it took
    (a tuple: one is made per port per poll, 2,000 switches' worth a second at size)."""

    seconds: float
    tx_bytes: int
    tx_packets: int
    tx_dropped: int
    rx_bytes: int = 0


class Capacities:
    """Beliefs about every port's capacity (see the module docstring)."""

    def __init__(self, configured_bps: float | None = None, config: LearningConfig | None = None):
        self.configured_bps = configured_bps
        self.config = config or LearningConfig()
        self._ports: dict[PortRef, _Port] = {}
        self._kinds: dict[float, dict[PortRef, float]] = {}  # reported -> own beliefs
        self._ceilings: dict[float, _Kind] = {}  # reported -> its kind's ceilings
        self._now = 0.0  # the latest reading's time
        self._version = 0  # bumped when an own (drop-learned) belief changes
        self._dropping: set[PortRef] = set()  # ports that ever dropped enough to count
        self._dropping_switches: set[int] = set()  # ... and their switches
        self._memo: dict[tuple[float, int], float] = {}

    def observe(self, now: float, ref: PortRef, reading: Reading, reported_bps: float) -> bool:
        """Take one interval of a port; True when its own belief changed."""
        if reading.seconds <= 0:
            return False
        c = self.config
        self._now = max(self._now, now)
        port = self._ports.get(ref)
        if not reading.tx_dropped and (port is None or not port.seen_full):
            return False  # the common case: no drop, none before
        if port is None:
            port = self._ports[ref] = _Port()
        rate = 8 * reading.tx_bytes / reading.seconds
        steady = min(rate, port.last_sent)  # (see ``peak``)
        port.last_sent = rate
        before = port.learned
        enough = max(c.min_drops, c.min_drop_share * (reading.tx_packets + reading.tx_dropped))
        full = reading.tx_dropped >= enough and rate > 0
        port.seen_full += full
        if port.seen_full:
            self._dropping.add(ref)
            self._dropping_switches.add(ref[0])
        port.recent.append((now, steady, full))
        while now - port.recent[0][0] > c.window:
            port.recent.popleft()
        if port.seen_full >= c.min_full:
            if any(f for _, _, f in port.recent):  # full lately: the best rate of late
                port.learned = max(r for _, r, _ in port.recent)
            else:  # not full lately: what was learned holds, unless it carried more
                port.learned = max(port.learned or steady, steady)
            if reported_bps > 0:
                port.learned = min(port.learned, reported_bps)
            self._kinds.setdefault(reported_bps, {})[ref] = port.learned
        self._version += port.learned != before
        return port.learned != before

    def held(
        self,
        now: float,
        ref: PortRef,
        direction: str,
        bps: float,
        tcp_bps: float,
        reported_bps: float,
    ) -> None:
        """Take one interval's rate of one direction of a port's link, and what tracked
        TCP flows carry in all: a rate held flat by TCP is a ceiling (module docstring)."""
        c = self.config
        port = self._ports.get(ref)
        if port is None:
            port = self._ports[ref] = _Port()
        series = port.rates.get(direction)
        if series is None:
            series = port.rates[direction] = deque(maxlen=c.flat_intervals)
        series.append(bps)
        if len(series) >= 2:  # (see ``peak``)
            steady = min(series[-1], series[-2])
            port.peak = max(port.peak, steady)
            if steady >= port.shown[1] or now - port.shown[0] > SHOWN_FOR:
                port.shown = (now, steady)
        if len(series) < c.flat_intervals:
            return
        mean = sum(series) / c.flat_intervals
        flat = max(series) - min(series) <= 2 * c.flat_tolerance * mean
        if not (mean > 0 and flat and tcp_bps >= c.tcp_share * mean):
            return
        port.ceiling = (now, mean)
        kind = self._ceilings.setdefault(reported_bps, _Kind())
        if now - kind.swept >= SWEEP_EVERY:
            kind.sweep(now, c.window, c.flat_tolerance)
        before = kind.ceiling(c.min_ceilings)
        kind.add((ref, direction), now, mean, c.flat_tolerance)
        after = kind.ceiling(c.min_ceilings)
        if after is not None and (before is None or abs(after - before) > 0.05 * before):
            log.info(
                "links reporting %.3g Mbit/s are held at %.3g Mbit/s by TCP: learned",
                reported_bps / 1e6,
                after / 1e6,
            )

    def _ceiling(self, reported_bps: float) -> float | None:
        """The level links of this kind are held at, if ``min_ceilings`` of them agree."""
        kind = self._ceilings.get(reported_bps)
        return kind.ceiling(self.config.min_ceilings) if kind is not None else None

    def _lent(self, reported_bps: float) -> float | None:
        """The highest own (drop-learned) belief among ports of this kind, if enough."""
        peers = self._kinds.get(reported_bps, {})
        if len(peers) < self.config.min_peers:
            return None
        key = (reported_bps, self._version)
        if key not in self._memo:
            self._memo = {k: v for k, v in self._memo.items() if k[1] == self._version}
            self._memo[key] = max(peers.values())
        return self._memo[key]

    def learn(
        self,
        now: float,
        intervals: Iterable[tuple[PortRef, Reading]],
        reported: Callable[[PortRef], float],
        host_ports: Container[int],
        tcp_bps: float,
    ) -> None:
        """``observe`` each interval and look for ceilings in it (``host_ports``: the
        switch's ports where hosts can be; ``tcp_bps``: what tracked TCP flows carry in
        all); a port whose own belief moved well below what it reports is logged."""
        for ref, reading in intervals:
            if reading.seconds <= 0:
                continue
            if tcp_bps <= 0 and not reading.tx_dropped and ref not in self._dropping:
                self._now = max(self._now, now)
                continue  # (no TCP flow tracked: no ceiling; no drop: nothing to learn)
            speed = reported(ref)
            if tcp_bps > 0:
                self.held(now, ref, "tx", 8 * reading.tx_bytes / reading.seconds, tcp_bps, speed)
                if ref[1] in host_ports:
                    rx = 8 * reading.rx_bytes / reading.seconds
                    self.held(now, ref, "rx", rx, tcp_bps, speed)
            if self.observe(now, ref, reading, speed) and self.departs(ref, speed):
                log.info(
                    "port %016x:%d carries %.3g Mbit/s, reports %.3g: learned from drops",
                    ref[0],
                    ref[1],
                    self.belief(ref, speed).bps / 1e6,
                    speed / 1e6,
                )

    def flat(self, ref: PortRef) -> float | None:
        """The level TCP has held the port's link at lately (``None``: not flat)."""
        port = self._ports.get(ref)
        held = port.ceiling if port is not None else None
        return held[1] if held is not None and self._now - held[0] <= FRESH else None

    def shown(self, ref: PortRef, bps: float) -> bool:
        """Whether the port's link was seen carrying ``bps`` in the last ``SHOWN_FOR``
        seconds (for two readings in a row, in either direction of a host's link)."""
        port = self._ports.get(ref)
        return port is not None and port.shown[1] >= bps and self._now - port.shown[0] <= SHOWN_FOR

    def kind_level(self, reported_bps: float) -> float | None:
        """What links that report this speed are held at or were seen full at."""
        lent = [v for v in (self._lent(reported_bps), self._ceiling(reported_bps)) if v]
        return max(lent) if lent else None

    def belief(self, ref: PortRef, reported_bps: float) -> Belief:
        """What ``ref`` is believed to carry, in bits/s, and why."""
        if self.configured_bps:
            return Belief(self.configured_bps, "configured")
        port = self._ports.get(ref)
        if port is not None and port.learned is not None:
            return Belief(port.learned, "learned")
        lent = [v for v in (self._lent(reported_bps), self._ceiling(reported_bps)) if v]
        if lent:
            value = max(*lent, port.peak if port is not None else 0.0)
            if reported_bps <= 0 or value < reported_bps:
                return Belief(value, self._whose(port, value))
        if reported_bps > 0:
            return Belief(reported_bps, "reported")
        return Belief(DEFAULT_CAPACITY_BPS, "default")

    def _whose(self, port: _Port | None, value: float) -> Source:
        """``learned`` for a port held at the kind's ceiling itself, else ``peers``."""
        held = port.ceiling if port is not None else None
        tol = 2 * self.config.flat_tolerance
        own = held is not None and self._now - held[0] <= self.config.window
        return "learned" if own and held is not None and held[1] >= value * (1 - tol) else "peers"

    def watches(self, dpid: int) -> bool:
        """Whether a port of ``dpid`` ever dropped enough to count (its every interval
        is then wanted, not only those with drops)."""
        return dpid in self._dropping_switches

    def departs(self, ref: PortRef, reported_bps: float) -> bool:
        """Whether the port's own belief is well below what it reports (worth a log line)."""
        port = self._ports.get(ref)
        return (
            port is not None
            and port.learned is not None
            and reported_bps > 0
            and port.learned < DEPARTS * reported_bps
        )

    def forget_port(self, ref: PortRef) -> None:
        """A port went down or away: what it carried may not hold when it returns."""
        self._version += 1
        self._ports.pop(ref, None)
        self._dropping.discard(ref)
        for beliefs in self._kinds.values():
            beliefs.pop(ref, None)
        for kind in self._ceilings.values():
            for key in [k for k in kind.held if k[0] == ref]:
                del kind.held[key]
                kind.agreeing.discard(key)

    def forget_switch(self, dpid: int) -> None:
        self._dropping_switches.discard(dpid)
        for ref in [r for r in self._ports if r[0] == dpid]:
            self.forget_port(ref)
