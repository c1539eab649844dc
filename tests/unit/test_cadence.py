"""Periodic per-switch work at a bounded rate: exact on small fabrics, spread on large."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from controller.cadence import Cadence


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
    from controller.model import PortDesc
    from controller.topology import Topology

    lldp = Cadence(1.0, 2000.0)
    topo = Topology()
    for dpid in (1, 2):
        topo.add_switch(dpid, [PortDesc(1)])
    assert topo.link_seen(0.0, (1, 1), (2, 1))

    def asked(now: float) -> Callable[[int, float], bool]:
        return lambda d, seen: lldp.visited_between(d, seen, now - 1.0)

    assert topo.expire_links(10.0, 3.5, asked=asked(10.0)) == []  # nothing sent: kept
    lldp.visited(10.0, 1)
    assert topo.expire_links(10.5, 3.5, asked=asked(10.5)) == []  # sent, not back yet
    assert [link.src for link in topo.expire_links(11.0, 3.5, asked=asked(11.0))] == [(1, 1)]
    lldp.visited(11.0, 1)
    assert lldp.visited_between(1, 9.0, 10.0) and not lldp.visited_between(1, 11.0, 12.0)


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
