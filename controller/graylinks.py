"""Links that carry a fraction of their rate while reporting all of it (a bad optic, a
policed or mis-negotiated port): found from Loom's own readings, avoided, and said.

Nothing on such a link reports a fault: its port reports its nominal speed and, under
TCP, drops little or nothing. What shows is that TCP holds it flat (``Capacities.flat``)
at a level well below the one links of its kind are held at, while the elephants
crossing it have room on every other link of their way (their host's link as it sends,
each fabric link, the receiver's link: what the link leaves after everything else it
carries), and every other link of their way was seen carrying more lately (a flow's rate
is the same on every link of its way: only a link the others are known to outrun can be
blamed) or shows no queue where it shows one (LLDP frames, which wait in the same queue as
the flows, take longer to cross it). A direction that stays so for ``suspect_after``
seconds (``queued_after`` where its queue alone names it) is *suspected*: its belief
drops to the level it holds, so placement moves its elephants off it and puts no new one
on it. (TCP holds healthy links flat below their kind for a moment often enough: behind a
queue on the way back, or while flows settle; the wait keeps those out.)

The move is the test. Once no pinned elephant has crossed it for ``judge_after``
seconds, the flows that were on it are compared with their rates when it was suspected:
sped up (``gain``), the link is *degraded* (logged as a warning, counted, alerted on) and
stays avoided for ``retry_after`` seconds, after which it is believed again and found
again if it is still slow; as fast as before (``kept_up``) but no faster by
``clear_after`` seconds, they were slow by their own doing (a paced stream) and the link
is *cleared*, not suspected again for ``quiet_after`` seconds; slower, the test proved
nothing (they are ending, or met something new) and the link is believed again, as it is
where a queue stood at it alone (it held them then, whatever holds them now: their ACKs
may still cross the slow cable's other way).

Pure: ``Readings`` feeds it each switch's readings with ``now``.
"""

from __future__ import annotations

import logging
import statistics
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from controller.model import PortRef

log = logging.getLogger("loom.graylinks")

State = Literal["suspect", "degraded"]
Verdict = Literal["suspected", "degraded", "cleared", "retried", "untested"]


@dataclass(frozen=True)
class GrayConfig:
    below: float = 0.5  # held flat under this share of its kind's level ...
    room: float = 1.5  # ... while each of its flows could get this many times more elsewhere
    tcp_share: float = 0.6  # and flows Loom pinned carry this share of what it holds
    counts: float = 0.1  # a flow under this share of it holds nothing (mice, ACK streams)
    witness_within: float = 10.0  # s a flow that held a direction low counts as a witness
    queue: float = 0.05  # s more an LLDP frame takes to cross it than another of the way ...
    queue_ratio: float = 2.0  # ... and this many times as long: the queue that holds them
    transit_within: float = 3.0  # s an LLDP frame's transit counts
    suspect_after: float = 2.0  # s all of that must last
    queued_after: float = 1.0  # ... where LLDP frames wait at it alone of its flows' way
    gain: float = 1.25  # flows that sped up this much (median) once moved confirm it
    kept_up: float = 0.8  # ... kept at least this share of their rate: slow by themselves
    gain_for: float = 1.0  # s the gain must last (a flow's rate from one reading is noisy)
    judge_after: float = 2.0  # s with none of them on it before judging
    clear_after: float = 5.0  # ... and before clearing (TCP regains its rate slowly)
    judge_within: float = 10.0  # s after which those moved are judged without the rest
    quiet_after: float = 120.0  # s a cleared link is not suspected again
    retry_after: float = 600.0  # s a degraded link is avoided before it is believed again


@dataclass(frozen=True)
class Crossing:
    """A pinned elephant as the gray-link check sees it: its rate and the directions it
    crosses (each fabric link by its source port; its sender's link as the ingress port
    receives it; the receiver's link as the egress port sends it)."""

    key: Hashable
    rate_bps: float
    fabric: tuple[PortRef, ...]
    ingress: PortRef
    egress: PortRef | None


class Crossings:
    """Every pinned elephant, indexed by the fabric directions it crosses (built once for
    many reviews: a k=48 fabric's every switch replies twice a second)."""

    def __init__(self, flows: Iterable[Crossing]) -> None:
        self.rates: dict[Hashable, float] = {}
        self._on: dict[PortRef, list[Crossing]] = {}
        for x in flows:
            self.rates[x.key] = x.rate_bps
            for ref in x.fabric:
                self._on.setdefault(ref, []).append(x)

    def on(self, ref: PortRef) -> list[Crossing]:
        return self._on.get(ref, [])


@dataclass
class Marked:
    state: State
    since: float
    level: float  # bits/s the direction was held flat at
    kind_level: float  # ... where links of its kind are held
    rates: dict[Hashable, float] = field(default_factory=dict)  # its flows when suspected
    left: float | None = None  # since when none of its flows crosses it
    kept: frozenset[PortRef] = frozenset()  # links its moved flows must still cross
    gained: float | None = None  # since when its moved flows are faster
    queued: bool = False  # LLDP frames waited at it alone of its flows' way


@dataclass(frozen=True)
class Readout:
    """What the check reads of the links (from ``Telemetry`` and ``Capacities``)."""

    tx_bps: Callable[[PortRef], float]
    rx_bps: Callable[[PortRef], float]
    belief: Callable[[PortRef], float]  # what Loom believes the port carries
    flat: Callable[[PortRef], float | None]  # where TCP holds it flat lately, if it does
    shown: Callable[[PortRef, float], bool]  # seen carrying that many bits/s lately
    kind_level: Callable[[PortRef], float | None]  # where links of its kind are held
    peer: Callable[[PortRef], PortRef | None]  # a fabric link's far end (its reverse)
    # (when heard, seconds) the last LLDP frame took from packet-out to packet-in
    transit: Callable[[PortRef], tuple[float, float] | None] = lambda ref: None


class GrayLinks:
    def __init__(self, config: GrayConfig | None = None) -> None:
        self.config = config or GrayConfig()
        self.marked: dict[PortRef, Marked] = {}
        self._quiet: dict[PortRef, float] = {}  # cleared: not suspected again until
        self.pending: dict[PortRef, float] = {}  # held low with room since
        # flow -> (when it last held a low direction, the cables of its way)
        self._held: dict[Hashable, tuple[float, frozenset[frozenset[PortRef]]]] = {}
        self.verdicts: Counter[Verdict] = Counter()

    def review(
        self,
        now: float,
        ports: Iterable[PortRef],
        crossings: Crossings,
        read: Readout,
    ) -> list[tuple[PortRef, Verdict]]:
        """Look at ``ports`` (of one switch, just read: those held low, pending or marked);
        returns what changed. ``crossings``: every pinned flow that sends."""
        out: list[tuple[PortRef, Verdict]] = []
        stale = now - self.config.witness_within
        self._held = {k: v for k, v in self._held.items() if v[0] >= stale}
        for ref in sorted(set(ports)):
            marked = self.marked.get(ref)
            if marked is not None:
                verdict = self._judge(now, ref, marked, crossings)
                if verdict is not None:
                    out.append((ref, verdict))
                if verdict == "cleared":
                    out += [(o, "suspected") for o in self._hand_over(now, marked, crossings)]
            elif self._quiet.get(ref, -1.0) <= now and self._suspect(now, ref, crossings, read):
                out.append((ref, "suspected"))
        self.verdicts.update(v for _, v in out)
        return out

    def low(self, ref: PortRef, read: Readout) -> bool:
        """Whether ``ref`` is held well below its kind (worth a review)."""
        level, kind = read.flat(ref), read.kind_level(ref)
        return level is not None and kind is not None and level < self.config.below * kind

    def _suspect(self, now: float, ref: PortRef, crossings: Crossings, read: Readout) -> bool:
        c = self.config
        level, kind = read.flat(ref), read.kind_level(ref)
        found = None if level is None or kind is None else self._evidence(now, ref, crossings, read)
        if level is None or kind is None or found is None:
            self.pending.pop(ref, None)
            return False
        on, kept = found
        queued = self._queued_alone(now, ref, on, read)
        if now - self.pending.setdefault(ref, now) < (
            c.queued_after if queued else c.suspect_after
        ):
            return False
        del self.pending[ref]
        rates = {x.key: x.rate_bps for x in on}
        self.marked[ref] = Marked("suspect", now, level, kind, rates, kept=kept, queued=queued)
        log.warning(
            "link %016x:%d held at %.3g Mbit/s where its kind carries %.3g: suspected"
            " degraded, its %d flows moved off to test it",
            *ref,
            level / 1e6,
            kind / 1e6,
            len(on),
        )
        return True

    def _evidence(
        self, now: float, ref: PortRef, crossings: Crossings, read: Readout
    ) -> tuple[list[Crossing], frozenset[PortRef]] | None:
        """Held low by the flows Loom pinned, each with room on every other link, and
        every other fabric link of theirs cleared of blame: those flows, and the links
        the test must keep (below); ``None`` if not. A flow's rate
        is the same on every link of its way, so only a link the others are known to
        outrun can be the one that holds it. A link is cleared if it was seen carrying
        more lately, if it was tested and cleared lately, if LLDP frames wait at the
        suspect and not at it (``_queued_here``; where they wait at it and not at the
        suspect, it holds them, and nothing else counts), or if the same cable is crossed
        the other way by flows that do not cross it and held a direction low lately (two
        independent witnesses share only that cable). Where both witnesses cross another
        cable too, the one farther from the hosts is tested first (a flow can leave it
        and keep the nearer one, not the other way round): the links it was preferred to
        are the ones the test must keep (``keeping``). Host links need no clearing: a
        flow cannot leave them,
        so one held by its host is cleared by the move that tests it."""
        c = self.config
        on = self._holders(ref, crossings.on(ref), read)
        if not on:
            return None
        for x in on:
            self._held[x.key] = (now, frozenset(_cable(o, read) for o in x.fabric))
        more = c.room * (read.flat(ref) or 0.0)
        crossed = self._witnessed(now, ref, crossings, read)
        kept: set[PortRef] = set()
        for x in on:
            for o in x.fabric:
                if o != ref and self._queued_here(now, o, ref, read):
                    return None  # the queue, and so what holds them, is at ``o``
                if o == ref or read.shown(o, more) or self._quiet.get(o, -1.0) > now:
                    continue
                if self._queued_here(now, ref, o, read):
                    continue
                if crossed is None:
                    return None  # as likely held by another link of its way
                if _cable(o, read) not in crossed:
                    continue
                if _depth(x.fabric, o) >= _depth(x.fabric, ref):
                    return None
                kept.add(o)
        return on, frozenset(kept)

    def _queued_alone(self, now: float, ref: PortRef, on: list[Crossing], read: Readout) -> bool:
        """Whether LLDP frames wait at ``ref`` and at no other fabric link of its flows'
        way: the queue names the link at once, so the wait for the rest of the evidence is
        shorter (``queued_after``)."""
        others = {o for x in on for o in x.fabric if o != ref}
        return bool(others) and all(self._queued_here(now, ref, o, read) for o in others)

    def _queued_here(self, now: float, ref: PortRef, other: PortRef, read: Readout) -> bool:
        """Whether LLDP frames wait in a queue at ``ref`` that ``other`` does not have. A
        flow's rate is the same on every link of its way, but a queue stands only before
        the link that holds it: the links before and after pass what reaches them at once.
        Frames sent together take the controller's and the switches' delays alike, so the
        difference is the queue's (a floor of ``queue`` over that noise)."""
        c = self.config
        mine, theirs = read.transit(ref), read.transit(other)
        if mine is None or theirs is None:
            return False
        if now - mine[0] > c.transit_within or now - theirs[0] > c.transit_within:
            return False
        return mine[1] - theirs[1] >= c.queue and mine[1] >= c.queue_ratio * theirs[1]

    def _witnessed(
        self, now: float, ref: PortRef, crossings: Crossings, read: Readout
    ) -> frozenset[frozenset[PortRef]] | None:
        """The cables crossed by the witnesses of ``ref``: flows that cross its cable the
        other way and held a direction low lately, wherever on their way (the reverse of
        a slow link is seldom held flat itself: upstream of a queue elsewhere, its rate
        is the sender's, not a ceiling); ``None`` if there are none."""
        peer = read.peer(ref)
        if peer is None:
            return None
        mine = _keys(crossings.on(ref))
        seen = [
            self._held[x.key]
            for x in crossings.on(peer)
            if x.key in self._held and x.key not in mine
        ]
        fresh = [cables for at, cables in seen if now - at <= self.config.witness_within]
        return frozenset().union(*fresh) if fresh else None

    def keeping(self) -> dict[Hashable, frozenset[PortRef]]:
        """The flows under test that must keep links while they leave the suspect (a test
        that moved them off the nearer link too would prove nothing): placement's hint."""
        out: dict[Hashable, frozenset[PortRef]] = {}
        for m in self.marked.values():
            kept = m.kept - self.marked.keys()  # a kept link under test itself is left
            if m.state == "suspect" and kept:
                out.update((k, out.get(k, frozenset()) | kept) for k in m.rates)
        return out

    def _holders(self, ref: PortRef, on: list[Crossing], read: Readout) -> list[Crossing]:
        """The flows that hold ``ref`` flat well below its kind (those carrying at least
        ``counts`` of its level), if the flows Loom pinned carry what it holds, each of
        them has room on every other link of its way, and ``ref`` was not seen carrying
        more itself; else none."""
        c = self.config
        level = read.flat(ref)
        if level is None or not self.low(ref, read):
            return []
        if sum(x.rate_bps for x in on) < c.tcp_share * level:
            return []  # not held by the flows Loom placed: nothing to judge by
        if read.shown(ref, c.room * level):
            return []  # it carried more lately: something else holds it now
        held = [x for x in on if x.rate_bps >= c.counts * level]
        unproven = {o: m.kind_level for o, m in self.marked.items() if m.state == "suspect"}
        if all(_room(x, ref, read, unproven) >= c.room * x.rate_bps for x in held):
            return held
        return []

    def _judge(self, now: float, ref: PortRef, m: Marked, crossings: Crossings) -> Verdict | None:
        c = self.config
        if m.state == "degraded":
            if now - m.since < c.retry_after:
                return None
            del self.marked[ref]
            log.info("link %016x:%d believed again after %.0f s: retried", *ref, now - m.since)
            return "retried"
        staying = {x.key for x in crossings.on(ref)} & m.rates.keys()
        if staying and now - m.since < c.judge_within:
            m.left = None
            return None
        m.left = now if m.left is None else m.left
        if now - m.left < c.judge_after:
            return None
        ending = c.counts * m.level  # a flow this slow now is ending: it proves nothing
        sending = {k for k, r in crossings.rates.items() if r >= ending}
        moved = {k: r for k, r in m.rates.items() if k in sending and k not in staying}
        for o in m.kept:  # only a flow that still crosses them proves them innocent
            moved = {k: r for k, r in moved.items() if k in _keys(crossings.on(o))}
        gains = [crossings.rates[k] / r for k, r in moved.items() if r > 0]
        if not gains:
            del self.marked[ref]  # its flows ended or left by a way that proves nothing
            log.info("link %016x:%d believed again: nothing left to judge it by", *ref)
            return "untested"
        faster = statistics.median(gains) >= c.gain
        m.gained = (m.gained if m.gained is not None else now) if faster else None
        if not faster and now - m.left < c.clear_after:
            return None  # not yet faster: a moved flow may still be climbing
        if m.gained is not None and now - m.gained < c.gain_for:
            return None  # faster in one reading: it must last
        if not faster and (m.queued or statistics.median(gains) < c.kept_up):
            del self.marked[ref]  # slower elsewhere: ending, or held by something new
            log.info(  # (or a queue stood at it: it held them, whatever holds them now)
                "link %016x:%d believed again: its flows were %.2fx as fast once moved%s",
                *ref,
                statistics.median(gains),
                ", but a queue stood at it" if m.queued else "",
            )
            return "untested"
        if faster:
            m.state, m.since = "degraded", now
            log.warning(
                "link %016x:%d degraded: carries %.3g Mbit/s where its kind carries %.3g;"
                " its flows sped up %.2fx once moved; avoided for %.0f s",
                *ref,
                m.level / 1e6,
                m.kind_level / 1e6,
                statistics.median(gains),
                c.retry_after,
            )
            return "degraded"
        del self.marked[ref]
        self._quiet[ref] = now + c.quiet_after
        log.info(
            "link %016x:%d cleared: its flows were no faster elsewhere (%.2fx)",
            *ref,
            statistics.median(gains),
        )
        return "cleared"

    def _hand_over(self, now: float, m: Marked, crossings: Crossings) -> list[PortRef]:
        """A link tested first and cleared, whose flows kept the nearer link it was
        preferred to (``Marked.kept``) and are no faster: that link holds them. It is
        suspected at once, from the same evidence, and tested in turn."""
        keys = [k for k in m.rates if all(k in _keys(crossings.on(o)) for o in m.kept)]
        out = []
        for o in sorted(m.kept):
            if keys and o not in self.marked:
                rates = {k: crossings.rates[k] for k in keys}
                self.marked[o] = Marked("suspect", now, m.level, m.kind_level, rates)
                log.warning(
                    "link %016x:%d suspected degraded: its flows stayed as slow once moved"
                    " off the link beyond it; moved off this one to test it",
                    *o,
                )
                out.append(o)
        return out

    def forget_port(self, ref: PortRef) -> None:
        """A port that went down: what it was held at may not hold when it returns."""
        self.marked.pop(ref, None)
        self._quiet.pop(ref, None)
        self.pending.pop(ref, None)


def _cable(ref: PortRef, read: Readout) -> frozenset[PortRef]:
    """A fabric link's two directions as one: what both ways of a bad cable share."""
    peer = read.peer(ref)
    return frozenset((ref,) if peer is None else (ref, peer))


def _keys(flows: Iterable[Crossing]) -> set[Hashable]:
    return {x.key for x in flows}


def _depth(fabric: tuple[PortRef, ...], ref: PortRef) -> int:
    """How many links ``ref`` lies from the nearer end of a flow's way through the fabric."""
    i = fabric.index(ref)
    return min(i, len(fabric) - 1 - i)


def _room(x: Crossing, suspect: PortRef, read: Readout, unproven: dict[PortRef, float]) -> float:
    """The most ``x`` could send on its other links: on each, what the link leaves over
    what everything else on it sends now (``x`` may take back its own rate). A link
    under test (``unproven``) counts at its kind's level: a suspect beside another
    (the flows of a slow edge link cross the links beyond it, held as low) must not
    hide the other, or the one found first would be the only one tested."""
    room = read.belief(x.ingress) - read.rx_bps(x.ingress) + x.rate_bps
    for ref in (*x.fabric, *((x.egress,) if x.egress is not None else ())):
        if ref != suspect:
            belief = unproven.get(ref) or read.belief(ref)
            room = min(room, belief - read.tx_bps(ref) + x.rate_bps)
    return room
