"""Periodic work whose cost grows with the fabric, kept to a bounded rate.

Statistics requests and LLDP frames are sent per switch at a nominal interval; on a
fabric of thousands of switches that would be tens of thousands of messages a second,
all in the same tick. A ``Cadence`` stretches the interval so that the work stays
under ``rate`` units a second (units: requests, or LLDP frames) and spreads it over
ticks: each tick takes the switches that are due, longest waiting first, up to what
the elapsed time allows. Small fabrics keep the nominal interval exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.model import (
    MAX_PHYSICAL_PORT,
    OFPP_CONTROLLER,
    LldpFrame,
    Message,
    Messages,
    Output,
    PacketOut,
)


@dataclass
class Cadence:
    interval: float  # nominal seconds between two visits of one switch
    rate: float  # units a second at most, over the whole fabric
    _last: dict[int, float] = field(default_factory=dict)
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
            self._last[dpid] = now
        return sorted(out)

    def visited(self, now: float, dpid: int) -> None:
        """A visit made outside the cadence (e.g. LLDP when a switch connects)."""
        self._last[dpid] = now


def lldp_on(dpid: int, ports: list[int]) -> Messages:
    """An LLDP frame out of each of a switch's physical ``ports``."""
    msgs: list[Message] = [
        PacketOut(OFPP_CONTROLLER, (Output(p),), LldpFrame(dpid, p))
        for p in ports
        if p <= MAX_PHYSICAL_PORT
    ]
    return {dpid: msgs} if msgs else {}
