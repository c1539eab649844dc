"""Per-job weights where jobs must share links: on a 2:1 oversubscribed leaf-spine, a
2-rank job and a 6-rank job send four pairs off each leaf over its two uplinks. With
equal weights they share evenly (two pairs per uplink, every job at half a link); with
the small job weighing 3, its pair gets an uplink alone and the other three pairs share
the other (shares 1 and 1/3: the weights' proportion), traced packet by packet."""

from __future__ import annotations

import json

import pytest

from controller.api import LoomApi
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from tests.fabric.test_many_jobs import hops_per_link
from tests.sim import LoomSim
from topologies import leaf_spine

SMALL = ["h1", "h5"]  # one host on each leaf
LARGE = ["h2", "h6", "h3", "h7", "h4", "h8"]  # alternating leaves: every hop crosses
RINGS = {"small": SMALL, "large": LARGE}


def book(sim: LoomSim, weights: dict[str, int], order: list[str]) -> None:
    api = LoomApi(sim.core, lambda: sim.now)
    for name in order:
        body = {
            "name": name,
            "tenant": name,
            "hosts": [sim.graph.nodes[h]["ip"] for h in RINGS[name]],
            "weight": weights[name],
        }
        res = api.handle("POST", "/loom/v1/jobs", {}, json.dumps(body).encode())
        assert res.status == 201, res.body
        sim.apply(res.messages)


def neighbours(sim: LoomSim) -> dict[str, int]:
    """Each job's most crowded fabric link: how many ring hops (of any job) it carries."""
    load = hops_per_link(sim, list(RINGS.values()))
    return {
        name: max(load[link] for link in hops_per_link(sim, [ring])) for name, ring in RINGS.items()
    }


def new_sim() -> LoomSim:
    config = FabricConfig(link_capacity_mbps=10.0, te=TeConfig(enabled=False))
    return LoomSim(leaf_spine(leaves=2, spines=2, hosts_per_leaf=4), config).start()


@pytest.mark.parametrize("order", [["small", "large"], ["large", "small"]])
def test_equal_weights_share_the_uplinks_evenly(order: list[str]) -> None:
    sim = new_sim()
    book(sim, {"small": 1, "large": 1}, order)
    assert neighbours(sim) == {"small": 2, "large": 2}


@pytest.mark.parametrize("order", [["small", "large"], ["large", "small"]])
def test_a_heavier_job_gets_fewer_neighbours(order: list[str]) -> None:
    sim = new_sim()
    book(sim, {"small": 3, "large": 1}, order)
    assert neighbours(sim) == {"small": 1, "large": 3}
    api = LoomApi(sim.core, lambda: sim.now)
    shown = api.handle("GET", "/loom/v1/jobs/small", {}, b"").body
    assert shown["weight"] == 3
