"""Gray links: suspected from flat readings below their kind, confirmed or cleared by
what their flows do once moved off, believed again after a hold."""

from __future__ import annotations

import dataclasses

import pytest

from controller.capacity import Belief, Capacities, Reading
from controller.flows import FlowKey, FlowTable
from controller.graylinks import Crossing, Crossings, GrayConfig, GrayLinks, Marked, Readout
from controller.model import PortRef
from controller.readings import Readings
from controller.topology import Topology

MBPS = 1e6
SLOW: PortRef = (2, 3)  # an aggregation switch's uplink, shaped to a quarter
HEALTHY: PortRef = (2, 4)
INGRESS, EGRESS = (1, 1), (5, 1)  # the sender's and the receiver's host ports
SUSPECT = (1 * MBPS, "suspect")
PEERS: dict[PortRef, PortRef] = {SLOW: (3, 2), (3, 2): SLOW, (1, 3): (2, 1), (2, 1): (1, 3)}


def believed(gray: GrayLinks) -> dict[PortRef, tuple[float, str]]:
    """Directions believed at their own level: ``(bits/s, state)``."""
    return {ref: (m.level, m.state) for ref, m in gray.marked.items()}


def readout(
    flat: dict[PortRef, float],
    load: dict[PortRef, float] | None = None,
    rx: dict[PortRef, float] | None = None,
    unproven: frozenset[PortRef] = frozenset({SLOW}),
) -> Readout:
    """Every link but ``unproven`` was seen carrying its kind's 4 Mbit/s lately."""
    load, rx = load or {}, rx or {}
    return Readout(
        tx_bps=lambda ref: load.get(ref, 0.0),
        rx_bps=lambda ref: rx.get(ref, 0.0),
        belief=lambda ref: 4 * MBPS,
        flat=lambda ref: flat.get(ref),
        shown=lambda ref, bps: ref not in unproven and bps <= 4 * MBPS,
        kind_level=lambda ref: 4 * MBPS,
        peer=PEERS.get,
    )


def crossing(link: PortRef, mbps: float, key: str = "f1") -> Crossing:
    return Crossing(key, mbps * MBPS, ((1, 3), link), INGRESS, EGRESS)


def held_slow() -> Readout:
    """The slow uplink flat at 1 Mbit/s, its one flow's other links carrying only it."""
    load = {SLOW: 1 * MBPS, (1, 3): 1 * MBPS, EGRESS: 1 * MBPS}
    return readout({SLOW: 1 * MBPS}, load, {INGRESS: 1 * MBPS})


def suspect(gray: GrayLinks, at: float = 0.0) -> float:
    """Held slow for ``suspect_after``: suspected; returns when."""
    assert gray.review(at, [SLOW], Crossings([crossing(SLOW, 1.0)]), held_slow()) == []
    when = at + gray.config.suspect_after
    assert gray.review(when, [SLOW], Crossings([crossing(SLOW, 1.0)]), held_slow()) == [
        (SLOW, "suspected")
    ]
    return when


def test_a_link_held_well_below_its_kind_while_its_flow_has_room_is_suspected() -> None:
    gray = GrayLinks()
    suspect(gray)
    assert believed(gray) == {SLOW: (1 * MBPS, "suspect")}


def test_a_moment_held_low_is_not_enough() -> None:
    gray, wait = GrayLinks(), GrayConfig().suspect_after
    assert gray.review(0.0, [SLOW], Crossings([crossing(SLOW, 1.0)]), held_slow()) == []
    assert (
        gray.review(wait / 2, [SLOW], Crossings([crossing(SLOW, 1.0)]), readout({})) == []
    )  # recovered
    assert gray.review(wait, [SLOW], Crossings([crossing(SLOW, 1.0)]), held_slow()) == []
    assert gray.pending == {SLOW: wait} and believed(gray) == {}


@pytest.mark.parametrize(
    "case",
    [
        "sender's link full",
        "fabric link full",
        "near its kind",
        "unplaced traffic",
        "no flat",
        "another link of its way never seen faster",
        "it was seen faster itself",
    ],
)
def test_what_does_not_make_a_suspect(case: str) -> None:
    read, flows = held_slow(), [crossing(SLOW, 1.0)]
    if case == "sender's link full":  # the host sends 3 more elsewhere: its own link holds it
        read = readout({SLOW: 1 * MBPS}, {SLOW: 1 * MBPS}, {INGRESS: 4 * MBPS})
    elif case == "fabric link full":
        read = readout({SLOW: 1 * MBPS}, {SLOW: 1 * MBPS, (1, 3): 3.8 * MBPS}, {})
    elif case == "near its kind":
        read = readout({SLOW: 2.1 * MBPS}, {SLOW: 2.1 * MBPS}, {})
        flows = [crossing(SLOW, 2.6)]  # (a half-rate link is not gray enough to act on)
    elif case == "unplaced traffic":  # what holds it flat is not Loom's pinned elephants
        flows = [crossing(SLOW, 0.5)]
    elif case == "another link of its way never seen faster":  # (1, 3) may be the slow one
        load = {SLOW: 1 * MBPS, (1, 3): 1 * MBPS, EGRESS: 1 * MBPS}
        read = readout({SLOW: 1 * MBPS}, load, {INGRESS: 1 * MBPS}, frozenset({SLOW, (1, 3)}))
    elif case == "it was seen faster itself":
        load = {SLOW: 1 * MBPS, (1, 3): 1 * MBPS, EGRESS: 1 * MBPS}
        read = readout({SLOW: 1 * MBPS}, load, {INGRESS: 1 * MBPS}, frozenset())
    else:
        read = readout({}, {SLOW: 1 * MBPS})
    gray = GrayLinks()
    assert gray.review(0.0, [SLOW], Crossings(flows), read) == []
    assert gray.review(5.0, [SLOW], Crossings(flows), read) == [] and believed(gray) == {}


def test_host_links_need_no_proof_a_flow_cannot_leave_them() -> None:
    load = {SLOW: 1 * MBPS, (1, 3): 1 * MBPS, EGRESS: 1 * MBPS}
    read = readout({SLOW: 1 * MBPS}, load, {INGRESS: 1 * MBPS}, frozenset({SLOW, INGRESS, EGRESS}))
    gray, flows = GrayLinks(), Crossings([crossing(SLOW, 1.0)])
    assert gray.review(0.0, [SLOW], flows, read) == []
    assert gray.review(2.0, [SLOW], flows, read) == [(SLOW, "suspected")]


def one_witness(other: PortRef, flat: tuple[PortRef, ...]) -> tuple[Readout, Crossings]:
    """The slow flow, and a witness coming back over the slow cable and on over ``other``;
    ``flat``: the directions held flat at 1 Mbit/s besides the slow one."""
    peer = PEERS[SLOW]
    load = {SLOW: 1 * MBPS, (1, 3): 1 * MBPS, peer: 1 * MBPS, other: 1 * MBPS, EGRESS: 1 * MBPS}
    unproven = frozenset({SLOW, peer, (1, 3), (2, 1), (6, 2), INGRESS, EGRESS})
    held = {ref: 1 * MBPS for ref in (SLOW, *flat)}
    read = readout(held, load, {INGRESS: 1 * MBPS, (7, 1): 1 * MBPS}, unproven)
    witness = Crossing("f2", 1 * MBPS, (peer, other), (7, 1), (8, 1))
    return read, Crossings([crossing(SLOW, 1.0), witness])


@pytest.mark.parametrize("blamed", [True, False])
def test_the_reverse_held_low_by_other_flows_clears_the_rest_of_the_way(blamed: bool) -> None:
    """Nothing of the slow flow's way was seen faster, but the same cable is held low the
    other way by a flow that shares nothing else with it: the cable is the common cause.
    A witness that comes down the slow flow's own edge link (``(2, 1)``) proves nothing."""
    peer = PEERS[SLOW]
    read, flows = one_witness((6, 2) if blamed else (2, 1), (peer,))
    gray = GrayLinks()
    for t in (0.0, 2.0, 4.0):  # each way is read as its switch replies
        gray.review(t, [SLOW, peer], flows, read)
    assert believed(gray) == ({SLOW: SUSPECT, peer: SUSPECT} if blamed else {})
    lone, alone = Crossings([crossing(SLOW, 1.0)]), GrayLinks()  # (1, 3) may be the slow one
    assert alone.review(0.0, [SLOW], lone, read) == alone.review(2.0, [SLOW], lone, read) == []


@pytest.mark.parametrize("blamed", [True, False])
def test_a_witness_held_low_anywhere_on_its_way_counts(blamed: bool) -> None:
    """The reverse of a slow cable is seldom flat itself when a queue upstream paces it:
    the witness coming back over it holds another direction of its way low, and that is
    enough. As before, a witness that shares the slow flow's edge cable proves nothing."""
    other = (6, 2) if blamed else (2, 1)
    read, flows = one_witness(other, (other,))  # the reverse itself is not flat
    gray = GrayLinks()
    for t in (0.0, 2.0, 4.0):
        gray.review(t, [SLOW, other], flows, read)
    assert believed(gray) == ({SLOW: SUSPECT} if blamed else {})
    stale = GrayLinks()  # a witness held low longer ago than ``witness_within`` is none
    stale.review(0.0, [other], flows, read)
    late = stale.config.witness_within + 1.0
    for t in (late, late + 2.0):
        stale.review(t, [SLOW], flows, read)
    assert believed(stale) == {}


def test_flows_that_speed_up_once_moved_confirm_it_and_it_is_tried_again_later() -> None:
    c = GrayConfig()
    gray = GrayLinks(c)
    t = suspect(gray)
    still = gray.review(t + 1.0, [SLOW], Crossings([crossing(SLOW, 1.2)]), held_slow())
    assert still == [] and gray.marked[SLOW].left is None  # still on it: nothing to judge
    moved = [crossing(HEALTHY, 3.6)]
    assert gray.review(t + 1.5, [SLOW], Crossings(moved), held_slow()) == []  # left
    judged = t + 1.5 + c.judge_after
    assert gray.review(judged, [SLOW], Crossings(moved), held_slow()) == []  # one reading
    assert gray.review(judged + c.gain_for, [SLOW], Crossings(moved), held_slow()) == [
        (SLOW, "degraded")
    ]
    assert believed(gray) == {SLOW: (1 * MBPS, "degraded")}
    later = judged + c.gain_for + c.retry_after
    assert gray.review(later - 1, [SLOW], Crossings(moved), held_slow()) == []
    assert gray.review(later, [SLOW], Crossings(moved), held_slow()) == [(SLOW, "retried")]
    assert believed(gray) == {}
    assert gray.verdicts == {"suspected": 1, "degraded": 1, "retried": 1}


def test_flows_no_faster_elsewhere_clear_it_and_it_is_left_alone_for_a_while() -> None:
    c = GrayConfig()
    gray = GrayLinks(c)
    t = suspect(gray)
    paced = [crossing(HEALTHY, 1.0)]  # a paced stream: as slow on a healthy link
    gray.review(t + 1.0, [SLOW], Crossings(paced), held_slow())
    # not faster yet: a moved flow may still be climbing, so the test waits
    assert gray.review(t + 1.0 + c.judge_after, [SLOW], Crossings(paced), held_slow()) == []
    assert gray.review(t + 1.0 + c.clear_after, [SLOW], Crossings(paced), held_slow()) == [
        (SLOW, "cleared")
    ]
    assert believed(gray) == {}
    again = t + 1.0 + c.clear_after + 1
    assert gray.review(again, [SLOW], Crossings([crossing(SLOW, 1.0)]), held_slow()) == []
    suspect(gray, t + 1.0 + c.clear_after + c.quiet_after)


def test_flows_that_are_ending_once_moved_leave_it_untested_not_cleared() -> None:
    """A transfer that ends as it is moved sends next to nothing on its new way: that says
    nothing of the link, which must not be left alone for ``quiet_after``."""
    c = GrayConfig()
    gray = GrayLinks(c)
    t = suspect(gray)
    ending = [crossing(HEALTHY, 0.5 * c.counts)]  # under a tenth of the 1 Mbit/s level
    gray.review(t + 1.0, [SLOW], Crossings(ending), held_slow())
    verdict = gray.review(t + 1.0 + c.judge_after, [SLOW], Crossings(ending), held_slow())
    assert verdict == [(SLOW, "untested")]
    suspect(gray, t + 1.0 + c.judge_after + 1.0)  # and may be suspected again at once


def test_flows_slower_once_moved_leave_it_untested_not_cleared() -> None:
    """A transfer winding down as it is moved (the end of a job's phase) runs slower on its
    new way: the link it left is believed again, not left alone for ``quiet_after``."""
    c = GrayConfig()
    gray = GrayLinks(c)
    t = suspect(gray)
    winding = [crossing(HEALTHY, 0.3)]  # above the tenth that counts as ended
    gray.review(t + 1.0, [SLOW], Crossings(winding), held_slow())
    assert gray.review(t + 1.0 + c.judge_after, [SLOW], Crossings(winding), held_slow()) == []
    verdict = gray.review(t + 1.0 + c.clear_after, [SLOW], Crossings(winding), held_slow())
    assert verdict == [(SLOW, "untested")] and believed(gray) == {}
    suspect(gray, t + 2.0 + c.clear_after)  # and may be suspected again at once


def test_a_marked_belief_wins_over_what_its_kind_lends_and_flat_levels_go_stale() -> None:
    caps = Capacities()
    flat = Reading(0.5, 62_500, 50, 0)  # 1 Mbit/s over half a second
    for k in range(6):
        caps.held(k * 0.5, SLOW, "tx", 1 * MBPS, 3 * MBPS, 10_000 * MBPS)
        caps.observe(k * 0.5, SLOW, flat, 10_000 * MBPS)
    assert caps.flat(SLOW) == pytest.approx(1 * MBPS)
    assert caps.shown(SLOW, 1 * MBPS) and not caps.shown(SLOW, 1.5 * MBPS)
    assert not caps.shown(HEALTHY, 0.1 * MBPS)
    assert caps.kind_level(10_000 * MBPS) is None  # one direction alone is no kind's level
    readings = Readings(Topology(), FlowTable(), None)
    readings.capacities = caps
    readings.gray.marked[SLOW] = Marked("degraded", 0.0, 1 * MBPS, 4 * MBPS)
    assert readings.belief(SLOW) == Belief(1 * MBPS, "degraded")
    assert readings.belief(HEALTHY) == caps.belief(HEALTHY, 0.0)
    caps.observe(10.0, HEALTHY, flat, 10_000 * MBPS)  # time goes on: the level is old
    assert caps.flat(SLOW) is None
    caps.observe(400.0, HEALTHY, flat, 10_000 * MBPS)
    assert not caps.shown(SLOW, 1 * MBPS)  # what it carried long ago proves nothing now


def test_an_ack_stream_is_no_evidence_against_the_links_it_crosses() -> None:
    """A data flow's ACK stream runs at a small share of the data's rate, whatever its own
    links could carry: on a link that carries it alone it would look like TCP held flat
    far below its kind."""
    table = FlowTable()
    data = FlowKey("10.0.0.1", "10.0.0.2", 6, 40000, 5201)
    for key, mac, mbps in ((data, "a", 8.0), (data.reverse(), "b", 0.3)):
        table.seen(0.0, key, mac, "x", 1, 1)
        table.flows[key].rate_bps = mbps * MBPS
    readings = Readings(Topology(), table, None, {data: (UP,), data.reverse(): (SLOW,)})
    assert [x.key for x in readings._crossings(1.0).on(UP)] == [data]
    assert readings._crossings(1.0).on(SLOW) == []


def test_the_docs_and_the_alert_state_the_defaults() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs/graylinks.md").read_text()
    alert = (root / "grafana/rules/loom-alerts.yml").read_text()
    c = GrayConfig()
    words = {1: "one", 2: "two", 10: "10", 0.5: "half"}
    assert f"under {words[c.below]} the level" in doc
    assert f"at least {c.tcp_share:.0%}".replace("%", " %") in doc
    assert f"at least {c.room:g} times" in doc
    assert {0.1: "a tenth of it"}[c.counts] in doc
    assert f"low in the last {c.witness_within:g} seconds" in doc
    assert f"at least {c.queue:g} seconds longer" in doc
    assert {2.0: "twice as long"}[c.queue_ratio] in doc
    assert f"in the last {c.transit_within:g} seconds" in doc
    assert f"still on it after {c.judge_within:g} seconds" in doc
    assert f"For {words[int(c.suspect_after)]} seconds" in doc
    assert f"{words[int(c.queued_after)]} second where LLDP frames wait" in doc
    assert f"judged from {words[int(c.judge_after)]} seconds after" in doc
    assert f"within {c.clear_after:g} seconds of leaving" in doc
    assert f"median gain {c.gain:g}" in doc
    assert f"at least {c.kept_up:.0%}".replace("%", " %") + " of their rate" in doc
    assert f"for {c.retry_after / 60:g} minutes" in doc
    assert f"again for {c.quiet_after / 60:g} minutes" in doc
    assert f"believed again after {c.retry_after / 60:g} min" in alert


# Both ways of the aggregation-core cable SLOW-(3, 2) slow; the flows that witness it both
# also cross the edge cable (1, 3)-(2, 1), so either cable could hold them.
UP, DOWN = (1, 3), (2, 1)  # the edge cable, up and down
X_WAY = (UP, SLOW, (3, 4), (4, 1))  # a flow leaving the edge switch through both
Y_WAY = ((7, 3), (8, 3), (3, 2), DOWN)  # one coming back down the same cables
CABLES = {**PEERS, UP: DOWN, DOWN: UP}


def two_cables() -> Readout:
    low = {SLOW, (3, 2), UP, DOWN}
    read = readout(
        {ref: 1 * MBPS for ref in low},
        {ref: 1 * MBPS for ref in (*X_WAY, *Y_WAY)},
        {INGRESS: 1 * MBPS, (7, 1): 1 * MBPS},
        frozenset({*X_WAY, *Y_WAY, INGRESS, EGRESS, (7, 1), (8, 1)}),
    )
    return dataclasses.replace(read, peer=CABLES.get)


def x_on(way: tuple[PortRef, ...], mbps: float = 1.0) -> Crossing:
    return Crossing("x", mbps * MBPS, way, INGRESS, EGRESS)


def witnessed(gray: GrayLinks, read: Readout) -> float:
    """Both ways held low by X and Y for ``suspect_after``; returns when both are marked."""
    flows = Crossings([x_on(X_WAY), Crossing("y", 1 * MBPS, Y_WAY, (7, 1), (8, 1))])
    for t in (0.0, 2.0, 4.0):
        gray.review(t, [SLOW, (3, 2), UP, DOWN], flows, read)
    return 4.0


def test_where_the_witnesses_share_two_cables_the_one_farther_from_the_hosts_goes_first() -> None:
    gray = GrayLinks()
    witnessed(gray, two_cables())
    assert believed(gray) == {SLOW: SUSPECT, (3, 2): SUSPECT}  # not the edge cable
    assert gray.marked[SLOW].kept == {UP} and gray.marked[(3, 2)].kept == {DOWN}
    assert gray.keeping() == {"x": {UP}, "y": {DOWN}}  # placement's hint for the test


@pytest.mark.parametrize(
    ("moved_to", "mbps", "verdicts"),
    [
        ((UP, HEALTHY, (9, 4), (4, 1)), 3.6, [(SLOW, "degraded")]),  # kept UP, sped up
        (((1, 4), (5, 3), (9, 4), (4, 1)), 3.6, [(SLOW, "untested")]),  # left both cables
        ((UP, HEALTHY, (9, 4), (4, 1)), 1.0, [(SLOW, "cleared"), (UP, "suspected")]),
    ],
)
def test_the_test_counts_only_flows_that_kept_the_nearer_cable(
    moved_to: tuple[PortRef, ...], mbps: float, verdicts: list[tuple[PortRef, str]]
) -> None:
    """Sped up while still crossing the edge cable: the farther one held them. Moved off
    both: the gain says nothing of which. Kept the edge cable and no faster: the edge
    cable holds them, and is suspected at once."""
    c, read = GrayConfig(), two_cables()
    gray = GrayLinks(c)
    t = witnessed(gray, read)
    moved = Crossings([x_on(moved_to, mbps)])
    gray.review(t + 1.0, [SLOW], moved, read)
    after = c.clear_after if verdicts[0][1] == "cleared" else c.judge_after
    if verdicts[0][1] == "degraded":  # faster: once, then for ``gain_for``
        assert gray.review(t + 1.0 + after, [SLOW], moved, read) == []
        after += c.gain_for
    assert gray.review(t + 1.0 + after, [SLOW], moved, read) == verdicts
    if verdicts[-1] == (UP, "suspected"):
        assert believed(gray)[UP] == SUSPECT


def test_a_mouse_on_the_link_does_not_decide_it() -> None:
    """A flow under a tenth of the level holds nothing: its other links need no proof."""
    mouse = Crossing("m", 0.05 * MBPS, ((9, 9), SLOW), (9, 1), EGRESS)
    flows = Crossings([crossing(SLOW, 1.0), mouse])
    load = {SLOW: 1 * MBPS, (1, 3): 1 * MBPS, EGRESS: 1 * MBPS}
    gray, read = GrayLinks(), readout({SLOW: 1 * MBPS}, load, {}, frozenset({SLOW, (9, 9)}))
    gray.review(0.0, [SLOW], flows, read)
    assert gray.review(2.0, [SLOW], flows, read) == [(SLOW, "suspected")]
    assert gray.marked[SLOW].rates == {"f1": 1 * MBPS}


def test_a_gain_in_one_reading_alone_confirms_nothing() -> None:
    """Flow rates come from counters a switch updates in steps: one fast reading of a
    flow that kept the link that holds it must not condemn the link it left."""
    c = GrayConfig()
    gray = GrayLinks(c)
    t = suspect(gray)
    gray.review(t + 0.5, [SLOW], Crossings([crossing(HEALTHY, 1.0)]), held_slow())  # left
    judged = t + 0.5 + c.judge_after
    assert gray.review(judged, [SLOW], Crossings([crossing(HEALTHY, 1.5)]), held_slow()) == []
    slow_again = Crossings([crossing(HEALTHY, 1.0)])
    assert gray.review(judged + c.gain_for, [SLOW], slow_again, held_slow()) == []
    assert gray.marked[SLOW].gained is None
    assert gray.review(t + 0.5 + c.clear_after, [SLOW], slow_again, held_slow()) == [
        (SLOW, "cleared")
    ]


def test_a_suspect_does_not_hide_the_link_beside_it_that_holds_the_same_flow() -> None:
    """The flows of a slow edge cable cross the links beyond it, held as low. Whichever
    is suspected first, believed at its level, must not leave the other without room:
    both are tested, and a kept link under test is no longer kept."""
    gray = GrayLinks()
    read = two_cables()
    marked_belief = dataclasses.replace(
        read, belief=lambda ref: gray.marked[ref].level if ref in gray.marked else 4 * MBPS
    )
    flows = Crossings([x_on(X_WAY), Crossing("y", 1 * MBPS, Y_WAY, (7, 1), (8, 1))])
    for t in (0.0, 2.0, 4.0):
        gray.review(t, [SLOW, (3, 2)], flows, marked_belief)
    assert gray.marked[SLOW].kept == {UP}
    gray.marked[UP] = Marked("suspect", 4.0, 1 * MBPS, 4 * MBPS, {"x": 1 * MBPS})
    assert gray.keeping() == {"y": {DOWN}}  # UP is under test itself: x may leave it
    assert gray._holders(UP, [x_on(X_WAY)], marked_belief)  # room despite SLOW's belief


def queued(transits: dict[PortRef, tuple[float, float]]) -> Readout:
    """The slow flow's other link (1, 3) never seen faster (it may be the slow one), and
    LLDP frames' transits ``(when heard, seconds)`` over the links of its way."""
    load = {SLOW: 1 * MBPS, (1, 3): 1 * MBPS, EGRESS: 1 * MBPS}
    read = readout({SLOW: 1 * MBPS}, load, {INGRESS: 1 * MBPS}, frozenset({SLOW, (1, 3)}))
    return dataclasses.replace(read, transit=transits.get)


@pytest.mark.parametrize(
    ("case", "slow", "other", "blamed"),
    [
        ("a queue stands at it alone", (9.5, 0.2), (9.6, 0.02), True),
        ("the queue is at the other link", (9.5, 0.02), (9.6, 0.2), False),
        ("within the control path's noise", (9.5, 0.06), (9.6, 0.02), False),
        ("both queue alike", (9.5, 0.3), (9.6, 0.2), False),
        ("frames heard too long ago", (5.0, 0.2), (9.6, 0.02), False),
        ("no frame over the other link", (9.5, 0.2), None, False),
    ],
)
def test_lldp_frames_waiting_at_the_suspect_alone_clear_the_rest_of_the_way(
    case: str,
    slow: tuple[float, float],
    other: tuple[float, float] | None,
    blamed: bool,
) -> None:
    """No witness and nothing of the way seen faster, but a queue stands before the slow
    link only: the link that holds a flow is the one it queues at."""
    read = queued({SLOW: slow, **({(1, 3): other} if other is not None else {})})
    gray, flows = GrayLinks(), Crossings([crossing(SLOW, 1.0)])
    assert gray.review(8.0, [SLOW], flows, read) == []
    # the queue names the link at once: a shorter wait than for the other evidence
    got = gray.review(8.0 + gray.config.queued_after, [SLOW], flows, read)
    assert (got == [(SLOW, "suspected")]) is blamed, case
    assert gray.review(10.0, [SLOW], flows, read) == []  # not (again) for the 2 s wait


def test_a_queue_that_does_not_name_the_link_alone_waits_as_long_as_the_rest() -> None:
    """Cleared by its queue over (1, 3), but the way's other link (3, 9) was cleared by
    being seen faster, with no LLDP frame timed over it: the usual wait."""
    read = queued({SLOW: (9.5, 0.2), (1, 3): (9.6, 0.02)})
    read = dataclasses.replace(read, shown=lambda ref, bps: ref == (3, 9))
    way = Crossing("f1", 1 * MBPS, ((1, 3), SLOW, (3, 9)), INGRESS, EGRESS)
    gray, flows = GrayLinks(), Crossings([way])
    c = gray.config
    assert gray.review(8.0, [SLOW], flows, read) == []
    assert gray.review(8.0 + c.queued_after, [SLOW], flows, read) == []
    assert gray.review(8.0 + c.suspect_after, [SLOW], flows, read) == [(SLOW, "suspected")]


def test_an_lldp_frames_transit_is_read_from_the_link_it_showed() -> None:
    from controller.model import PortDesc

    topo = Topology()
    for dpid in (2, 3):
        topo.add_switch(dpid, [PortDesc(2), PortDesc(3)])
    readings = Readings(topo, FlowTable(), None)
    topo.link_seen(10.3, SLOW, (3, 2), sent=10.0)
    topo.link_seen(11.0, (3, 2), SLOW)  # a frame of unknown send time
    heard = readings._read.transit(SLOW)
    assert heard is not None and heard[0] == 10.3 and heard[1] == pytest.approx(0.3)
    assert readings._read.transit((3, 2)) is None and readings._read.transit(HEALTHY) is None
    topo.link_seen(12.0, (3, 2), SLOW, sent=900.0)  # timed by another instance's clock
    topo.link_seen(12.0, SLOW, (3, 2), sent=2.0)
    assert readings._read.transit((3, 2)) is None and readings._read.transit(SLOW) is None


def test_a_queue_at_another_link_of_the_way_clears_the_suspect_whatever_else_says() -> None:
    """Every other link of the way cleared (seen faster), but LLDP frames wait at (1, 3)
    and not at SLOW: (1, 3) is what holds the flow now, and SLOW is not suspected."""
    load = {SLOW: 1 * MBPS, (1, 3): 1 * MBPS, EGRESS: 1 * MBPS}
    read = readout({SLOW: 1 * MBPS}, load, {INGRESS: 1 * MBPS})  # (1, 3) seen faster
    read = dataclasses.replace(read, transit={SLOW: (9.5, 0.02), (1, 3): (9.6, 0.3)}.get)
    gray, flows = GrayLinks(), Crossings([crossing(SLOW, 1.0)])
    assert gray.review(8.0, [SLOW], flows, read) == gray.review(10.0, [SLOW], flows, read) == []
    assert believed(gray) == {}


def test_flows_no_faster_off_a_link_their_queue_named_leave_it_untested_not_cleared() -> None:
    """A queue stood at the link alone when it was suspected: it held its flows then. No
    faster once moved (their acknowledgements may still queue the other way over the same
    cable), the link is believed again, not left alone for ``quiet_after``."""
    read = queued({SLOW: (9.5, 0.2), (1, 3): (9.6, 0.02)})
    gray, c = GrayLinks(), GrayConfig()
    gray.review(8.0, [SLOW], Crossings([crossing(SLOW, 1.0)]), read)
    t = 8.0 + c.queued_after
    assert gray.review(t, [SLOW], Crossings([crossing(SLOW, 1.0)]), read) == [(SLOW, "suspected")]
    assert gray.marked[SLOW].queued
    same = Crossings([crossing(HEALTHY, 1.0)])  # moved, and as fast as before
    gray.review(t + 1.0, [SLOW], same, read)
    assert gray.review(t + 1.0 + c.clear_after, [SLOW], same, read) == [(SLOW, "untested")]
    assert believed(gray) == {} and gray._quiet == {}
