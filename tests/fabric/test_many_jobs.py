"""Many jobs at once on the fake fabric: four 4-rank rings scattered across pods, booked
one after another, end on paths where no fabric link carries two hops (placed one by one
they share links at half speed); each packet of every hop follows its job's path; and a
running job is never moved to a worse bottleneck."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from controller import jobs as jobs_module
from controller import untangle as untangle_module
from controller.api import LoomApi
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from tests.sim import LoomSim
from topologies import fat_tree
from topologies.graph import host_list

SEEDS = (1, 2, 3, 4, 5)


def book(sim: LoomSim, seed: int, size: int = 4) -> list[list[str]]:
    """Deal the 16 hosts out at random to 16 / ``size`` ring jobs and register them."""
    hosts = host_list(sim.graph)
    random.Random(seed).shuffle(hosts)
    rings = [hosts[i : i + size] for i in range(0, len(hosts), size)]
    api = LoomApi(sim.core, lambda: sim.now)
    for n, ring in enumerate(rings):
        body = {
            "name": f"j{n}",
            "tenant": f"t{n}",
            "hosts": [sim.graph.nodes[h]["ip"] for h in ring],
        }
        res = api.handle("POST", "/loom/v1/jobs", {}, json.dumps(body).encode())
        assert res.status == 201, res.body
        sim.apply(res.messages)
    return rings


def hops_per_link(sim: LoomSim, rings: list[list[str]]) -> Counter[tuple[str, str]]:
    used: Counter[tuple[str, str]] = Counter()
    for ring in rings:
        for i, src in enumerate(ring):
            dst = ring[(i + 1) % len(ring)]
            trace = sim.fake.trace(src, sim.fake.packet(src, dst))
            assert trace.ok_unicast(dst), trace.render()
            (branch,) = trace.branches
            used.update(
                (a, b)
                for a, b in zip(branch.path, branch.path[1:], strict=False)
                if not a.startswith("h") and not b.startswith("h")
            )
    return used


def new_sim(k: int = 4) -> LoomSim:
    config = FabricConfig(link_capacity_mbps=10.0, te=TeConfig(enabled=False))
    return LoomSim(fat_tree(k), config).start()


@pytest.mark.parametrize("seed", SEEDS)
def test_four_scattered_rings_share_no_link(seed: int) -> None:
    sim = new_sim()
    rings = book(sim, seed)
    assert max(hops_per_link(sim, rings).values()) == 1
    assert all(j.max_utilization <= 1.0 + 1e-9 for j in sim.core.sources.jobs.jobs.values())


def test_booked_one_by_one_alone_they_would_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same bookings without placing jobs together: some seed leaves a shared link
    (what this test guards against coming back)."""
    monkeypatch.setattr(jobs_module, "untangle", lambda jobs, capacity, far, leaves: set())
    worst = [
        max(hops_per_link(sim, book(sim, seed)).values()) for seed in SEEDS for sim in [new_sim()]
    ]
    assert max(worst) == 2


def test_eight_16_rank_rings_on_a_k8_fat_tree_share_no_link() -> None:
    """Every host of a k=8 fat-tree in one of eight random-order rings: the edge
    colouring routes them all at full speed, traced packet by packet."""
    sim = new_sim(k=8)
    assert max(hops_per_link(sim, book(sim, seed=3, size=16)).values()) == 1


def test_without_the_colouring_the_search_leaves_k8_rings_sharing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same bookings with the search alone (so the test above can fail)."""
    monkeypatch.setattr(
        jobs_module,
        "untangle",
        lambda jobs, capacity, far, leaves: untangle_module.untangle(jobs, capacity),
    )
    sim = new_sim(k=8)
    assert max(hops_per_link(sim, book(sim, seed=3, size=16)).values()) == 2


def test_a_running_job_only_moves_to_a_bottleneck_no_worse() -> None:
    sim = new_sim()
    hosts = host_list(sim.graph)
    random.Random(7).shuffle(hosts)
    api = LoomApi(sim.core, lambda: sim.now)
    seen: dict[str, float] = {}
    for n in range(4):
        ring = hosts[4 * n : 4 * n + 4]
        body = {"name": f"j{n}", "hosts": [sim.graph.nodes[h]["ip"] for h in ring]}
        res = api.handle("POST", "/loom/v1/jobs", {}, json.dumps(body).encode())
        sim.apply(res.messages)
        for name, job in sim.core.sources.jobs.jobs.items():
            if name in seen:
                assert job.max_utilization <= seen[name] + 1e-9, (name, seen[name])
            seen[name] = job.max_utilization
