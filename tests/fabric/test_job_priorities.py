"""Job priorities on the fake fabric: with two collective queues configured, the higher
of two jobs that share a link is marked into the higher queue at its ingress and queued
there at every hop; with one queue (the default) every job keeps the collective class;
a bad queue list is refused naming the variable."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from controller.api import LoomApi
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.qos import COLLECTIVE, job_levels
from controller.settings import Settings, SettingsError
from tests.sim import LoomSim
from topologies import fat_tree

HIGH = "34:3,26:1"


def sim_with(levels: str | None) -> LoomSim:
    config = FabricConfig(link_capacity_mbps=10.0, te=TeConfig(enabled=False))
    if levels:
        config = replace(config, job_levels=job_levels(levels))
    return LoomSim(fat_tree(4), config).start()


def post(sim: LoomSim, name: str, hosts: list[str], priority: int) -> dict[str, object]:
    body = {"name": name, "priority": priority, "hosts": [sim.graph.nodes[h]["ip"] for h in hosts]}
    res = LoomApi(sim.core, lambda: sim.now).handle(
        "POST", "/loom/v1/jobs", {}, json.dumps(body).encode()
    )
    assert res.status == 201, res.body
    sim.apply(res.messages)
    return dict(res.body)


def dscp_and_queues(sim: LoomSim, src: str, dst: str) -> tuple[set[int], set[int]]:
    trace = sim.fake.trace(src, sim.fake.packet(src, dst))
    assert trace.ok_unicast(dst), trace.render()
    hops = [hop for br in trace.branches for hop in br.hops]
    return {int(str(h.packet["ip_dscp"])) for h in hops}, {int(h.queue_id or 0) for h in hops}


def test_the_higher_of_two_jobs_sharing_a_receiver_gets_the_higher_queue() -> None:
    sim = sim_with(HIGH)
    assert post(sim, "low", ["h1", "h5"], priority=1)["queue_level"] == 0  # alone: the top
    high = post(sim, "high", ["h9", "h5"], priority=7)  # both deliver to h5: they share its link
    low = LoomApi(sim.core, lambda: sim.now).handle("GET", "/loom/v1/jobs/low", {}).body
    assert high["queue_level"] == 0 and low["queue_level"] == 1  # moved down, rules rebuilt
    assert dscp_and_queues(sim, "h9", "h5") == ({34}, {3})
    assert dscp_and_queues(sim, "h1", "h5") == ({26}, {1})


def test_with_one_queue_every_job_keeps_the_collective_class() -> None:
    sim = sim_with(None)
    post(sim, "low", ["h1", "h5"], priority=1)
    post(sim, "high", ["h9", "h5"], priority=7)
    assert dscp_and_queues(sim, "h9", "h5") == ({COLLECTIVE.dscp}, {COLLECTIVE.queue})
    assert dscp_and_queues(sim, "h1", "h5") == ({COLLECTIVE.dscp}, {COLLECTIVE.queue})


def test_a_bad_priority_or_queue_list_is_refused_with_its_name() -> None:
    sim = sim_with(None)
    body = {"name": "x", "priority": -1, "hosts": ["10.0.0.2", "10.0.0.3"]}
    res = LoomApi(sim.core, lambda: sim.now).handle(
        "POST", "/loom/v1/jobs", {}, json.dumps(body).encode()
    )
    assert res.status == 400 and res.body["field"] == "priority"
    for bad in ("34", "34:x", "48:2", "34:3,34:1", "64:1"):
        with pytest.raises(SettingsError, match="LOOM_JOB_QUEUES"):
            Settings.from_env({"LOOM_JOB_QUEUES": bad})
    assert Settings.from_env({"LOOM_JOB_QUEUES": HIGH}).fabric.job_levels == job_levels(HIGH)
