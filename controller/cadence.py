"""Periodic work whose cost grows with the fabric, kept to a bounded rate.

Statistics requests and LLDP frames are sent per switch at a nominal interval; on a
fabric of thousands of switches that would be tens of thousands of messages a second,
all in the same tick. A ``Cadence`` stretches the interval so that the work stays
under ``rate`` units a second (units: requests, or LLDP frames) and spreads it over
ticks: each tick takes the switches that are due, longest waiting first, up to what
the elapsed time allows. Small fabrics keep the nominal interval exactly.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from controller.model import (
    MAX_PHYSICAL_PORT,
    OFPP_CONTROLLER,
    LldpFrame,
    Message,
    Messages,
    Output,
    PacketOut,
)
from controller.topology import Link

log = logging.getLogger("loom.fabric")


@dataclass
class Cadence:
    interval: float  # nominal seconds between two visits of one switch
    rate: float  # units a second at most, over the whole fabric
    _last: dict[int, float] = field(default_factory=dict)
    _before: dict[int, float] = field(default_factory=dict)  # the visit before the last
    _tick: float | None = None

    def period(self, total: float) -> float:
        """Seconds between two visits of a switch when the fabric weighs ``total``."""
        return max(self.interval, total / self.rate)

    def due(self, now: float, weights: Mapping[int, float]) -> list[int]:
        """The switches to visit now (``weights``: the units each visit costs)."""
        total = sum(weights.values())
        period = self.period(total)
        elapsed = self.interval if self._tick is None else max(now - self._tick, 0.0)
        self._tick = now
        budget = max(self.rate * elapsed, 1.0)
        for gone in set(self._last) - set(weights):
            del self._last[gone]
            self._before.pop(gone, None)
        waiting = sorted(
            (self._last.get(d, -math.inf), d)
            for d in weights
            if self._last.get(d, -math.inf) + period <= now + 1e-9
        )
        out: list[int] = []
        spent = 0.0
        for _, dpid in waiting:
            if out and spent + weights[dpid] > budget:
                break
            out.append(dpid)
            spent += weights[dpid]
            self.visited(now, dpid)
        return sorted(out)

    def visited(self, now: float, dpid: int) -> None:
        """A visit (also one made outside the cadence, e.g. LLDP when a switch connects)."""
        last = self._last.get(dpid)
        if last is not None and last != now:  # (``due`` and the sender both record it)
            self._before[dpid] = last
        self._last[dpid] = now

    def visited_between(self, dpid: int, after: float, until: float) -> float | None:
        """The earliest of the last two visits of ``dpid`` in ``(after, until]``, if any."""
        times = (self._before.get(dpid), self._last.get(dpid))
        return next((t for t in times if t is not None and after < t <= until), None)


LLDP_MARGIN = 0.5  # s between frames sent that arrive in order at a switch's connection
LLDP_BEHIND = 4.0  # timeouts a link is kept while its far switch's input is not read


def lldp_asked(
    lldp: Cadence, heard_at: Mapping[int, float], now: float, period: float, timeout: float
) -> Callable[[Link], bool]:
    """Whether LLDP that should have shown a link again went out a period ago or more and
    the far switch's connection was read past it (``heard_at``: per switch, the latest
    send time read from it): a controller behind on its input hears no LLDP, which says
    nothing of the link (kept ``LLDP_BEHIND`` timeouts at most)."""

    def asked(link: Link) -> bool:
        went = lldp.visited_between(link.src[0], link.sent or link.last_seen, now - period)
        read = heard_at.get(link.dst[0], 0.0) >= (went or 0.0) + LLDP_MARGIN
        late = now - link.last_seen > LLDP_BEHIND * timeout
        return went is not None and (not link.sent or read or late)

    return asked


def lldp_on(dpid: int, ports: list[int], now: float = 0.0) -> Messages:
    """An LLDP frame out of each of a switch's physical ``ports``, sent ``now``."""
    msgs: list[Message] = [
        PacketOut(OFPP_CONTROLLER, (Output(p),), LldpFrame(dpid, p, now))
        for p in ports
        if p <= MAX_PHYSICAL_PORT
    ]
    return {dpid: msgs} if msgs else {}


REPROBE_FIRST = 0.5  # s after a switch's first LLDP until its silent ports are probed again
REPROBE_TRIES = 4  # ... then after 1, 2 and 4 s more
REPROBE_FRAMES = 100  # frames a call at most (a fabric coming up brings thousands of ports)


@dataclass
class Reprobes:
    """Ports still silent after a switch's first LLDP are probed again soon, at growing
    gaps, instead of a whole LLDP round later (up to ``period`` seconds at size): its
    first frames may have met a neighbour whose catch rule was not in yet, or been
    dropped by a switch whose controller connection was full."""

    _due: dict[int, tuple[float, float, int]] = field(default_factory=dict)  # at, gap, left

    def start(self, now: float, dpid: int) -> None:
        self._due[dpid] = (now + REPROBE_FIRST, REPROBE_FIRST, REPROBE_TRIES)

    def due(self, now: float, silent: Callable[[int], list[int]]) -> Messages:
        """LLDP out of the ``silent`` ports of switches due (a switch none of whose ports
        is silent any more is done with)."""
        out: Messages = {}
        frames = 0
        for at, dpid in sorted((at, d) for d, (at, _, _) in self._due.items()):
            if at > now or frames >= REPROBE_FRAMES:
                break
            _, gap, left = self._due.pop(dpid)
            ports = silent(dpid)
            if ports and left > 1:
                self._due[dpid] = (now + 2 * gap, 2 * gap, left - 1)
            out.update(lldp_on(dpid, ports, now))
            frames += len(ports)
        return out


class Excusable(Protocol):
    def excuse(self, now: float, seconds: float) -> None: ...


# A tick this late means the controller itself was not running (stopped, starved of CPU).
AWAY_AFTER = 1.0


@dataclass
class Away:
    """Time in which the controller could not keep the fabric's clocks: it was not
    running (no tick for ``AWAY_AFTER`` s), or it was ``held`` (a cluster member that
    cannot reach its store, whose LLDP and answers the switches never get). Silence from
    the fabric in that time is the controller's, not the fabric's: links must not age
    out, nor job leases whose renewals were refused, or the fabric is rewritten on
    return though nothing in it changed."""

    last_tick: float | None = None
    held_since: float | None = None

    def excused(self, now: float, held: bool) -> float:
        """Seconds to excuse at this tick (0: none). While held, nothing ages at all; the
        whole hold is excused once it ends."""
        gap = 0.0 if self.last_tick is None else now - self.last_tick
        self.last_tick = now
        if held:
            if self.held_since is None:
                self.held_since = now - gap
            return 0.0
        if self.held_since is not None:
            gap, self.held_since = now - self.held_since, None
            return gap
        return gap if gap > AWAY_AFTER else 0.0

    def holds(self, now: float, held: bool, clocks: Iterable[Excusable]) -> bool:
        """Excuse what this tick must (to each of ``clocks``: the links, the leases, ...);
        True while nothing may age."""
        excused = self.excused(now, held)
        if excused:
            log.info("%.1f s without ticking or held: links and leases excused", excused)
            for clock in clocks:
                clock.excuse(now, excused)
        return held
