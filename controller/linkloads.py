"""One snapshot of the links per round: what each carries and what it can, in bits/s.

Traffic engineering's concerns (first-packet placement, elephant placement) all weigh
links; each used to read the counters its own way, so within one round two of them
could see one link differently. A ``LinkLoads`` is made once per round (an instant, for
first packets: a job's first step opens thousands of flows at once, and a link's
measured load changes only with the next counter reading) and handed to each; a link is
read once, when first asked, so a round that weighs a few links reads only those.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from controller.model import PortRef

Reading = Callable[[PortRef], float]  # a port's figure in bits/s


@dataclass(frozen=True)
class Meters:
    """Where the figures come from: a port's transmit rate and its capacity."""

    tx_bps: Reading
    capacity: Reading

    def at(self, now: float) -> LinkLoads:
        return LinkLoads(now, self)


@dataclass(frozen=True)
class LinkLoads:
    """The links as measured at ``at``: each figure read once, then kept."""

    at: float
    meters: Meters
    _tx: dict[PortRef, float] = field(default_factory=dict, repr=False, compare=False)
    _cap: dict[PortRef, float] = field(default_factory=dict, repr=False, compare=False)

    def tx_bps(self, link: PortRef) -> float:
        got = self._tx.get(link)
        if got is None:
            got = self._tx[link] = self.meters.tx_bps(link)
        return got

    def capacity(self, link: PortRef) -> float:
        got = self._cap.get(link)
        if got is None:
            got = self._cap[link] = self.meters.capacity(link)
        return got

    def share(self, link: PortRef) -> float:
        """What ``link`` carries, as a share of what it can."""
        return self.tx_bps(link) / max(self.capacity(link), 1.0)
