"""LLDP lost while a fabric comes up: its first frames can meet a neighbour whose catch
rule is not in yet, or a switch that drops packet-ins while its controller connection
is full. Ports still without a link are probed again within a second, not a whole LLDP
round later (``controller.cadence.Reprobes``)."""

from __future__ import annotations

from typing import Any

import pytest

from controller import cadence
from controller.config import FabricConfig
from controller.engineer import TeConfig
from controller.model import LldpFrame
from controller.ofp import frames
from tests.sim import LoomSim
from topologies import fat_tree, shuffle_ids
from topologies.graph import switch_graph

SLOW_ROUNDS = FabricConfig(te=TeConfig(enabled=False), lldp_interval=10.0, lldp_timeout=35.0)


def bring_up_losing_early_lldp(lost_until: float) -> tuple[LoomSim, int]:
    """Connect every switch, losing every LLDP frame sent before ``lost_until``; returns
    the simulation a second later and the number of links (both ways) it must learn."""
    graph = shuffle_ids(fat_tree(4), "reprobes")
    sim = LoomSim(graph, SLOW_ROUNDS)
    run = sim._run_packet_out

    def lossy(dpid: int, ofmsg: Any) -> None:
        if sim.now < lost_until and isinstance(frames.decode(bytes(ofmsg.data)), LldpFrame):
            return
        run(dpid, ofmsg)

    sim._run_packet_out = lossy  # type: ignore[method-assign]
    sim.connect_all()
    sim.advance(lost_until + 1.0)
    return sim, 2 * switch_graph(graph).number_of_edges()


def test_links_whose_first_lldp_was_lost_are_learned_in_a_second_or_two() -> None:
    sim, want = bring_up_losing_early_lldp(lost_until=1.0)
    assert len(sim.core.topo.links) == want


def test_without_probing_again_they_wait_for_the_next_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cadence.Reprobes, "due", lambda self, now, silent: {})
    sim, want = bring_up_losing_early_lldp(lost_until=1.0)
    assert len(sim.core.topo.links) < want / 2


def test_a_port_that_stays_silent_is_probed_at_growing_gaps_then_left_to_the_rounds() -> None:
    probes = cadence.Reprobes()
    probes.start(0.0, 1)
    sent: list[float] = []
    for step in range(1, 200):
        now = step / 10
        if probes.due(now, lambda dpid: [1, 2]):
            sent.append(now)
    assert sent == [0.5, 1.5, 3.5, 7.5]
    probes.start(0.0, 1)
    assert probes.due(0.5, lambda dpid: []) == {} and probes.due(20.0, lambda d: [1]) == {}


def test_probes_again_stay_within_a_frame_budget_a_call() -> None:
    probes = cadence.Reprobes()
    for dpid in range(1, 101):
        probes.start(0.0, dpid)
    first = probes.due(0.5, lambda dpid: list(range(1, 17)))
    frames_sent = sum(len(m) for m in first.values())
    assert cadence.REPROBE_FRAMES <= frames_sent < cadence.REPROBE_FRAMES + 16
    rest = probes.due(0.6, lambda dpid: list(range(1, 17)))
    assert set(first).isdisjoint(rest) and rest
