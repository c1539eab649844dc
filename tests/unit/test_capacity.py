"""Capacity learning: a port's reported speed is a prior that evidence of a full link
lowers (drops at its egress), never mere idleness; ports of the same kind lend their
evidence; a configured capacity overrides everything."""

from __future__ import annotations

from controller.capacity import Belief, Capacities, LearningConfig, Reading

TEN_G = 10e9
POLL = 0.5


def interval(mbps: float, dropped: int = 0, seconds: float = POLL) -> Reading:
    sent = int(mbps * 1e6 / 8 * seconds)
    return Reading(seconds, sent, sent // 1500, dropped)


def feed(caps: Capacities, ref: tuple[int, int], readings: list[Reading], t0: float = 0.0) -> float:
    now = t0
    for r in readings:
        now += r.seconds
        caps.observe(now, ref, r, TEN_G)
    return now


def test_a_link_shaped_below_its_reported_speed_is_learned_within_a_few_polls() -> None:
    caps = Capacities()
    assert caps.belief((1, 1), TEN_G).source == "reported"
    # TCP fills a 4 Mbit/s link: the shaper's queue overflows now and then
    feed(caps, (1, 1), [interval(3.2), interval(3.96, dropped=5), interval(3.9, dropped=4)])
    belief = caps.belief((1, 1), TEN_G)
    assert belief.source == "learned"
    assert 3.8e6 <= belief.bps <= 4.0e6
    assert caps.departs((1, 1), TEN_G)


def test_a_link_that_is_merely_idle_or_lightly_used_keeps_its_reported_speed() -> None:
    caps = Capacities()
    feed(caps, (1, 1), [interval(0.0)] * 10 + [interval(0.3)] * 50 + [interval(2.0)] * 50)
    assert caps.belief((1, 1), TEN_G).bps == TEN_G
    assert caps.belief((1, 1), TEN_G).source == "reported"
    assert not caps.departs((1, 1), TEN_G)


def test_a_stray_drop_or_a_single_full_interval_is_not_enough() -> None:
    caps = Capacities()
    feed(caps, (1, 1), [interval(1.0, dropped=1)] * 20)  # below min_drops each time
    feed(caps, (1, 2), [interval(1.0), interval(1.0, dropped=50), interval(1.0)])  # once
    assert caps.belief((1, 1), TEN_G).source == "reported"
    assert caps.belief((1, 2), TEN_G).source == "reported"


def test_a_learned_belief_rises_with_what_the_link_carries_and_never_exceeds_the_report() -> None:
    caps = Capacities()
    now = feed(caps, (1, 1), [interval(4.0, dropped=9)] * 3)
    now = feed(caps, (1, 1), [interval(6.0)] * 2, now)  # the shaper was raised
    assert caps.belief((1, 1), TEN_G).bps == 6e6
    small = Capacities()
    for i in range(3):
        small.observe(i * POLL, (1, 1), interval(120.0, dropped=90), 100e6)
    assert small.belief((1, 1), 100e6).bps == 100e6  # measurement noise above the report


def test_a_link_degraded_later_is_learned_again_once_old_evidence_leaves_the_window() -> None:
    caps = Capacities(config=LearningConfig(window=10.0))
    now = feed(caps, (1, 1), [interval(8.0, dropped=9)] * 3)
    now = feed(caps, (1, 1), [interval(2.0, dropped=9)] * 40, now)  # policed to 2 Mbit/s
    assert abs(caps.belief((1, 1), TEN_G).bps - 2e6) < 1e3


def test_ports_of_the_same_kind_lend_their_belief_but_not_below_what_a_port_carried() -> None:
    caps = Capacities()
    feed(caps, (1, 1), [interval(4.0, dropped=9)] * 3)
    host_port = (5, 3)  # a host's port: its host's own queue holds it back, unseen
    belief = caps.belief(host_port, TEN_G)
    assert belief.source == "peers" and belief.bps == 4e6
    assert caps.belief((7, 1), 100e9).source == "reported"  # another kind of port
    busy = (6, 2)  # carried 7 Mbit/s without a drop: it is not a 4 Mbit/s link
    hold(caps, busy, [7.0, 7.2, 6.6], tcp=0.5)
    assert caps.belief(busy, TEN_G) == Belief(7e6, "peers")  # (its steadiest two polls)
    caps.forget_switch(1)
    assert caps.belief(host_port, TEN_G).source == "reported"


def test_a_kind_lends_only_once_enough_of_its_ports_have_their_own_belief() -> None:
    caps = Capacities(config=LearningConfig(min_peers=2))
    feed(caps, (1, 1), [interval(4.0, dropped=9)] * 3)
    assert caps.belief((5, 3), TEN_G).source == "reported"
    feed(caps, (2, 4), [interval(3.9, dropped=9)] * 3)
    assert caps.belief((5, 3), TEN_G).bps == 4e6


def test_a_configured_capacity_overrides_everything() -> None:
    caps = Capacities(configured_bps=5e6)
    feed(caps, (1, 1), [interval(4.0, dropped=9)] * 3)
    assert caps.belief((1, 1), TEN_G).bps == 5e6
    assert caps.belief((1, 1), TEN_G).source == "configured"


def test_a_port_that_reports_no_speed_gets_the_default_until_learned() -> None:
    caps = Capacities()
    assert caps.belief((1, 1), 0.0).source == "default"
    for i in range(3):
        caps.observe((i + 1) * POLL, (1, 1), interval(4.0, dropped=9), 0.0)
    assert caps.belief((1, 1), 0.0).source == "learned"


def hold(
    caps: Capacities, ref: tuple[int, int], rates: list[float], tcp: float, way: str = "tx"
) -> None:
    for i, mbps in enumerate(rates):
        caps.held((i + 1) * POLL, ref, way, mbps * 1e6, tcp * 1e6, TEN_G)


def test_links_held_flat_by_tcp_at_one_level_teach_their_kind() -> None:
    """Open vSwitch counts no shaper drops: a shared uplink held flat at 10 Mbit/s while
    two TCP flows share it (unevenly, from poll to poll) is the evidence, once a second
    direction of a link (here the next hop of the same path) agrees."""
    caps = Capacities()
    hold(caps, (1, 3), [9.95, 10.02, 9.98, 10.01], tcp=10.0)
    assert caps.belief((1, 3), TEN_G).source == "reported"  # one link is not enough
    hold(caps, (4, 1), [9.97, 10.0, 10.03, 9.99], tcp=10.0)
    held = caps.belief((1, 3), TEN_G)
    assert held.source == "learned" and 9.9e6 <= held.bps <= 10.1e6
    host_port = caps.belief((9, 1), TEN_G)
    assert host_port.source == "peers" and host_port.bps == held.bps


def test_a_hosts_own_queue_shows_as_what_its_port_receives() -> None:
    caps = Capacities()
    hold(caps, (1, 1), [3.95, 3.9, 3.96, 3.93], tcp=7.8, way="rx")
    hold(caps, (2, 1), [3.9, 3.94, 3.92, 3.95], tcp=7.8, way="rx")
    assert caps.belief((1, 1), TEN_G).source == "learned"


def test_idle_links_flat_udp_streams_and_growing_tcp_are_no_ceiling() -> None:
    caps = Capacities()
    for port in range(1, 6):  # LLDP only: flat and tiny, and no TCP anywhere
        hold(caps, (1, port), [0.0008] * 6, tcp=0.0)
    for port in range(1, 6):  # constant-rate UDP streams: flat, but no TCP carries them
        hold(caps, (2, port), [1.0] * 6, tcp=0.2)
    for port in range(1, 6):  # TCP still growing: not flat
        hold(caps, (3, port), [0.5, 1.5, 2.5, 3.5], tcp=12.0)
    assert caps.belief((4, 1), TEN_G).source == "reported"


def test_a_ceiling_is_the_highest_level_not_a_lower_one_shared_by_collided_flows() -> None:
    """Two host ports held at 2 Mbit/s by a collision elsewhere and one link at 4: the
    kind is not believed to carry 2 (one of it was seen carrying 4)."""
    caps = Capacities()
    hold(caps, (1, 1), [2.0, 1.98, 2.01, 2.0], tcp=8.0, way="rx")
    hold(caps, (2, 1), [1.99, 2.0, 2.02, 2.0], tcp=8.0, way="rx")
    hold(caps, (3, 1), [3.9, 3.95, 3.93, 3.92], tcp=8.0)
    assert caps.belief((9, 9), TEN_G).source == "reported"  # the top level stands alone
    hold(caps, (4, 1), [3.92, 3.94, 3.9, 3.93], tcp=8.0)
    assert 3.9e6 <= caps.belief((9, 9), TEN_G).bps <= 4.0e6


def test_one_interval_read_high_by_a_late_reply_does_not_raise_what_a_port_carries() -> None:
    caps = Capacities()
    feed(caps, (1, 1), [interval(4.0, dropped=9)] * 3)
    jittery = (2, 1)  # 4 Mbit/s, but one reply 0.25 s late: its bytes read over 0.25 s
    hold(caps, jittery, [4.0, 8.0, 4.0, 4.0], tcp=1.0)
    assert caps.belief(jittery, TEN_G).bps == 4e6
    hold(caps, jittery, [6.0, 6.0], tcp=1.0)  # carried 6 for a second
    assert caps.belief(jittery, TEN_G).bps == 6e6
