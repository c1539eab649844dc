"""Rules do not depend on how switches are numbered: real switches have MAC-derived
datapath ids, in no relation to their place in the fabric. Loom lays its switch indexes
out by the fabric's shape (``controller.addressing``), so a fabric with shuffled ids
holds as few rules as one numbered by position, and every pair is still delivered."""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx
import pytest

from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from tests.sim import LoomSim
from topologies import dragonfly, fat_tree, shuffle_ids

CONFIG = FabricConfig(te=TeConfig(enabled=False))


def fullest(sim: LoomSim) -> int:
    return max(len(sim.fake.flows(d)) for d in sim.fake.switches)


@pytest.mark.parametrize(
    "make",
    [lambda: fat_tree(8), lambda: dragonfly(a=4, p=2, h=2, g=9)],
    ids=["fat_tree(8)", "dragonfly(a=4,g=9)"],
)
def test_shuffled_ids_hold_no_more_rules_than_ids_by_position(
    make: Callable[[], nx.MultiGraph],
) -> None:
    by_position = LoomSim(make(), CONFIG).start()
    shuffled = LoomSim(shuffle_ids(make(), "test"), CONFIG).start()
    assert shuffled.fake.reachability(explore_all=False).ok
    assert fullest(shuffled) <= fullest(by_position)


def test_a_host_heard_before_its_pod_is_known_keeps_its_address_and_is_reached() -> None:
    """The first address handed out on a switch fixes its index wherever the layout then
    put it; the rest of its pod is laid out around it once learned."""
    sim = LoomSim(shuffle_ids(fat_tree(4), "early"), CONFIG)
    sim.fake.set_link("e0_1", "a0_1", False)  # e0_1 looks like a pod of its own
    sim.start()
    mac = sim.graph.nodes["h1"]["mac"]
    early = sim.view.address_of(mac)
    assert early is not None
    sim.fake.set_link("e0_1", "a0_1", True)
    sim.advance(5.0)
    assert sim.view.address_of(mac) == early
    assert sim.fake.reachability(explore_all=False).ok
