"""Traffic engineering undoes a tangle no single move can: a random permutation of
elephants on a k=8 fat-tree, each placed at its first packet, ends with one flow a link
(the Clos edge colouring, ``controller.clos``), as a non-blocking fabric would carry it."""

from __future__ import annotations

import itertools
import random
from collections import Counter

from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from tests.sim import LoomSim
from topologies import fat_tree
from topologies.graph import host_list

CONFIG = FabricConfig(
    poll_interval=0.2,
    link_capacity_mbps=10.0,
    te=TeConfig(te_interval=0.2, hold_down=0.5, stage_delay=0.2),
)


def busiest_link(sim: LoomSim, flows: list[tuple[str, str, dict[str, object]]]) -> int:
    """The most flows any fabric link carries, traced through the switches' rules."""
    used: Counter[tuple[str, str]] = Counter()
    for src, dst, pkt in flows:
        branches = [b for b in sim.fake.trace(src, pkt).branches if b.end.kind != "controller"]
        assert len(branches) == 1 and branches[0].end.host == dst  # pinned: one path
        path = branches[0].path
        used.update((u, v) for u, v in itertools.pairwise(path) if not v.startswith("h"))
    return max(used.values())


def test_a_random_permutation_of_elephants_ends_with_one_flow_a_link() -> None:
    graph = fat_tree(8)
    hosts = host_list(graph)
    rng = random.Random(3)
    while True:
        dsts = rng.sample(hosts, len(hosts))
        if all(a != b for a, b in zip(hosts, dsts, strict=True)):
            break
    sim = LoomSim(graph, CONFIG).start()
    flows = [(s, d, sim.start_flow(s, d, 40000, mbps=9)) for s, d in zip(hosts, dsts, strict=True)]
    first = busiest_link(sim, flows)
    sim.advance(4.0)
    assert first > 1  # placed one by one as they came: some met
    assert busiest_link(sim, flows) == 1
    assert sim.view.events["te.recoloured"] >= 1
