"""Periodic per-switch work at a bounded rate: exact on small fabrics, spread on large."""

from __future__ import annotations

from collections import Counter

from controller.cadence import Cadence
from controller.model import PortRef


def run(cadence: Cadence, switches: int, seconds: float, step: float = 0.1) -> list[list[int]]:
    weights = dict.fromkeys(range(switches), 1.0)
    ticks, now = [], 0.0
    while now < seconds - 1e-9:
        now = round(now + step, 6)
        ticks.append(cadence.due(now, weights))
    return ticks


def test_a_small_fabric_is_visited_at_the_nominal_interval_all_at_once() -> None:
    ticks = run(Cadence(0.5, 2000.0), 20, 2.0)
    busy = [i for i, t in enumerate(ticks) if t]
    assert busy == [0, 5, 10, 15] and all(len(ticks[i]) == 20 for i in busy)


def test_a_large_fabric_is_spread_over_ticks_within_the_rate() -> None:
    ticks = run(Cadence(0.5, 2000.0), 2880, 10.0)
    assert max(len(t) for t in ticks[1:]) <= 200 + 1  # 2,000 a second, 0.1 s ticks
    visits = Counter(d for t in ticks for d in t)
    assert set(visits) == set(range(2880))  # every switch, none starved
    period = Cadence(0.5, 2000.0).period(2880)
    assert 1.4 < period < 1.5 and max(visits.values()) <= 10.0 / period + 2


def test_a_link_is_aged_only_after_lldp_went_out_and_had_time_to_come_back() -> None:
    """A controller too busy to send LLDP hears none: that says nothing about the link.
    It goes once LLDP was sent after it was last seen, a period ago, and none came back."""
    from controller.cadence import lldp_asked
    from controller.model import PortDesc
    from controller.topology import Topology

    lldp = Cadence(1.0, 2000.0)
    topo = Topology()
    for dpid in (1, 2):
        topo.add_switch(dpid, [PortDesc(1)])
    assert topo.link_seen(0.0, (1, 1), (2, 1))  # a frame of unknown send time

    def expired(now: float) -> list[PortRef]:
        asked = lldp_asked(lldp, topo.heard_at, now, 1.0, 3.5)
        return [link.src for link in topo.expire_links(now, 3.5, asked=asked)]

    assert expired(10.0) == []  # nothing sent: kept
    lldp.visited(10.0, 1)
    assert expired(10.5) == []  # sent, not back yet
    assert expired(11.0) == [(1, 1)]
    lldp.visited(11.0, 1)
    assert lldp.visited_between(1, 9.0, 10.0) == 10.0
    assert lldp.visited_between(1, 11.0, 12.0) is None


def test_a_controller_behind_on_its_input_keeps_links_it_has_not_read_lldp_for() -> None:
    """Frames carry their send time; a switch's connection read only up to frames sent
    long ago (the controller is behind, not the link) keeps the link; once frames sent
    after the probe are read there and the link's is not among them, it goes."""
    from controller.cadence import lldp_asked
    from controller.model import PortDesc
    from controller.topology import Topology

    lldp = Cadence(1.0, 2000.0)
    topo = Topology()
    for dpid in (1, 2, 3):
        topo.add_switch(dpid, [PortDesc(1), PortDesc(2)])
    topo.link_seen(1.0, (1, 1), (2, 1), sent=1.0)
    for t in (2.0, 3.0, 4.0, 5.0, 6.0):
        lldp.visited(t, 1)

    def expired(now: float) -> list[PortRef]:
        asked = lldp_asked(lldp, topo.heard_at, now, 1.0, 3.5)
        return [link.src for link in topo.expire_links(now, 3.5, asked=asked)]

    assert expired(8.0) == []  # switch 2's connection read up to frames sent at 1.0
    topo.link_seen(8.0, (3, 2), (2, 2), sent=4.0)  # read on: still before the probe at 5.0
    assert expired(8.1) == []
    topo.link_seen(8.2, (3, 2), (2, 2), sent=6.0)  # read past it: the link's frame is missing
    assert expired(8.3) == [(1, 1)]
    topo.link_seen(9.0, (1, 1), (2, 1), sent=1.0)
    assert expired(9.0 + 4 * 3.5 + 0.1) == [(1, 1)]  # not read for 4 timeouts: goes anyway


def test_lldp_heard_before_its_port_status_up_is_used_when_the_port_comes_up() -> None:
    """Both ends of a link that came up send PortStatus; LLDP sent out of the first end
    can reach the second before the second's PortStatus does. The link is learned when
    that PortStatus arrives, not a whole LLDP round later."""
    from controller.model import PortDesc
    from controller.topology import Topology

    topo = Topology()
    topo.add_switch(1, [PortDesc(1)])
    topo.add_switch(2, [PortDesc(1, up=False)])
    assert not topo.link_seen(1.0, (1, 1), (2, 1))  # port 2:1 still believed down
    assert topo.port_changed(2, PortDesc(1), now=1.5)
    assert (1, 1) in topo.links
    topo.port_changed(2, PortDesc(1, up=False), now=2.0)
    assert not topo.link_seen(3.0, (1, 1), (2, 1))
    assert not topo.port_changed(2, PortDesc(1), now=9.0)  # heard too long ago: not trusted
