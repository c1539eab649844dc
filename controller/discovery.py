"""Discovery's pacing: when the fabric is probed and polled, and when what it found is
planned.

LLDP goes out of every switch at a bounded rate (``controller.cadence``), at once out of
a switch whose skeleton just went in, again once the skeletons of its whole wave are in,
and soon again out of ports still silent (``Reprobes``); counters are polled at a bounded
rate too. A burst of learned links is batched into one re-plan once discovery pauses
(a fabric coming up finds thousands of links within a second; each re-plan costs the
whole fabric). Links whose LLDP stopped age out, unless the controller itself was away.
The conductor asks what to send and when to re-plan; nothing here plans rules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from controller.cadence import Away, Cadence, Excusable, Reprobes, lldp_asked, lldp_on
from controller.config import FabricConfig
from controller.model import LldpFrame, Messages, PortRef, merge
from controller.telemetry import poll_requests
from controller.topology import Topology

log = logging.getLogger("loom.fabric")

DISCOVERY_QUIET = 0.25  # seconds without a new link before a batched re-plan
DISCOVERY_BATCH = 1.0  # ... or at most this long after the first change
RESEND_PER_CALL = 64  # switches whose LLDP a call sends again after a wave (3,072 frames at k=48)
# What the fabric may cost the event loop at rest: Ryu decodes and encodes each message
# in Python, so polls and LLDP are budgeted by what the shim can carry beside everything
# else (real switches at k=16: 4,096 LLDP frames and 640 polls a second kept a core busy).
POLL_RATE = 400.0  # switches polled a second at most (k=16: each every 0.8 s; k=48: 7.2 s)
LLDP_RATE = 1000.0  # LLDP frames a second at most (k=16: each port every 4.1 s)

Receiving = Callable[[float, float], set[PortRef]]  # (now, within) -> ports receiving


class Discovery:
    """LLDP, polls and re-plan batching for one fabric (``topo``)."""

    def __init__(self, config: FabricConfig, topo: Topology) -> None:
        self.config, self.topo = config, topo
        self.polls = Cadence(config.poll_interval, POLL_RATE)
        self.lldp = Cadence(config.lldp_interval, LLDP_RATE)
        self.reprobes = Reprobes()
        self.away = Away()
        self.dirty = False  # the learned graph changed since the last full re-plan
        self.last_change = 0.0  # last time the routed graph changed
        self._dirty_since = 0.0  # when it first changed since the last plan
        self._changed_at = 0.0  # when it last changed
        self._ports = 0  # live ports, for how far LLDP's interval is stretched
        self._wave: set[int] = set()  # switches given their first skeleton in this pass
        self._resend: set[int] = set()  # ... whose LLDP goes again once the wave is in

    # -- batching ---------------------------------------------------------------
    def changed(self, now: float) -> None:
        """The learned graph changed: re-plan once discovery pauses (``replan_due``)."""
        if not self.dirty:
            self.dirty, self._dirty_since = True, now
        self._changed_at = now

    def replan_due(self, now: float) -> bool:
        quiet = now - self._changed_at >= DISCOVERY_QUIET
        return self.dirty and (quiet or now - self._dirty_since >= DISCOVERY_BATCH)

    def replanned(self, now: float) -> None:
        self.dirty = False
        self.last_change = max(self.last_change, now)

    # -- LLDP -------------------------------------------------------------------
    def heard(self, now: float, frame: LldpFrame, at: PortRef) -> None:
        """LLDP sent from ``frame``'s port arrived at ``at``: a link seen (new: batched)."""
        if self.topo.link_seen(now, (frame.dpid, frame.port), at, frame.sent):
            self.changed(now)

    def lldp_out(self, now: float, dpids: Iterable[int]) -> Messages:
        """LLDP out of every live port of ``dpids`` (visited now, for the pacing)."""
        out: Messages = {}
        for dpid in dpids:
            if dpid in self.topo.switches:
                merge(out, lldp_on(dpid, self.topo.switches[dpid].live_ports(), now))
                self.lldp.visited(now, dpid)
        return out

    def skeletons_in(self, now: float, fresh: list[int], wave_done: bool) -> Messages:
        """Switches whose first skeleton went in send LLDP at once (their catch rule is
        in: discovery through them starts now), and again once the skeletons of the
        whole wave are in (``wave_done``): a neighbour whose catch rule came in a later
        slice missed the first frames, which the next round would resend only after
        seconds (LLDP is paced by ``LLDP_RATE``)."""
        self._wave.update(fresh)
        if wave_done:  # (the rest of the wave: a slice a call, ``resend``)
            self._resend.update(self._wave.difference(fresh))
            self._wave = set()
        for dpid in fresh:
            self.reprobes.start(now, dpid)
        return self.lldp_out(now, fresh)

    @property
    def resending(self) -> bool:
        return bool(self._resend)

    def resend(self, now: float) -> Messages:
        some = sorted(self._resend)[:RESEND_PER_CALL]
        self._resend.difference_update(some)
        return self.lldp_out(now, some)

    # -- a tick -----------------------------------------------------------------
    def poll(self, now: float, ingresses: set[int]) -> Messages:
        """Counters of the switches due (``telemetry.poll_requests``; ``ingresses``:
        switches whose flow counters are read too)."""
        due = self.polls.due(now, dict.fromkeys(self.topo.switches, 1.0))
        return poll_requests(due, self.topo.edge_ports, ingresses)

    def probes_due(self, now: float) -> Messages:
        """LLDP of the switches due, and of silent ports probed again."""
        weights = {d: float(len(s.ports)) for d, s in self.topo.switches.items()}
        self._ports = int(sum(weights.values()))
        out = self.lldp_out(now, self.lldp.due(now, weights))
        return merge(out, self.reprobes.due(now, self.topo.unlinked_ports))

    def holds(self, now: float, held: bool, clocks: Iterable[Excusable]) -> bool:
        """Excuse what this tick must (``controller.cadence.Away``); True while nothing
        may age."""
        return self.away.holds(now, held, [self.topo, *clocks])

    def expire_links(self, now: float, receiving: Receiving) -> None:
        """Links whose LLDP stopped go (a re-plan is due)."""
        window = 2 * self.polls.period(len(self.topo.switches))
        period = self.lldp.period(self._ports)
        timeout = self.config.lldp_timeout * period / self.config.lldp_interval
        asked = lldp_asked(self.lldp, self.topo.heard_at, now, period, timeout)
        expired = self.topo.expire_links(now, timeout, lambda: receiving(now, window), asked)
        for link in expired:
            log.warning("link %016x:%d -> %016x:%d: no LLDP for %.1f s, removed", *link.src,
                        *link.dst, now - link.last_seen)  # fmt: skip
        if expired:
            self.changed(now)
