"""A controller that was not there keeps its view: time in which it did not run (stopped,
starved of CPU) or was held (a cluster member without its store, whose LLDP never goes
out) is not silence from the fabric. Links and leased jobs survive it, and on return the
core has nothing to change; silence while it runs still ages links out (kept longer when
nothing at all is read back: the controller may be behind on its input)."""

from __future__ import annotations

from controller.cadence import LLDP_BEHIND
from controller.jobspec import parse_job
from controller.model import FlowMod, GroupMod, Messages
from tests.sim import LoomSim
from topologies import fat_tree
from topologies.graph import host_list

LINKS = 64  # directed links of a k=4 fat-tree


def changes(batches: list[Messages]) -> list[object]:
    return [
        m
        for batch in batches
        for msgs in batch.values()
        for m in msgs
        if isinstance(m, FlowMod | GroupMod)
    ]


def ticks(sim: LoomSim, seconds: float, held: bool = False) -> list[Messages]:
    """The shim's ticks, every 0.1 s, with LLDP lost (the controller's frames never go
    out when it is held, nor come back)."""
    out = []
    end = sim.now + seconds
    while sim.now < end - 1e-9:
        sim.now = round(sim.now + 0.1, 6)
        out.append(sim.core.tick(sim.now, held=held))
    return out


def started() -> LoomSim:
    sim = LoomSim(fat_tree(4)).start()
    ips = [sim.graph.nodes[h]["ip"] for h in host_list(sim.graph)[:4]]
    sim.apply(sim.core.create_job(sim.now, parse_job({"name": "j", "hosts": ips}), lease=5.0))
    sim.advance(0.5)
    assert len(sim.core.topo.links) == LINKS
    return sim


def test_a_member_held_for_a_minute_keeps_links_and_jobs_and_changes_nothing() -> None:
    sim = started()
    held = ticks(sim, 60.0, held=True)
    assert len(sim.core.topo.links) == LINKS
    assert "j" in sim.core.sources.jobs.jobs
    back = ticks(sim, 2.0)  # the store answers again; still no LLDP for 2 s
    assert changes(held + back) == []
    assert len(sim.core.topo.links) == LINKS
    assert "j" in sim.core.sources.jobs.jobs  # its launcher may renew again: the lease runs on


def test_a_stopped_controller_does_not_count_its_own_absence_as_silence() -> None:
    sim = started()
    sim.now += 30.0  # SIGSTOP, or no CPU: no tick for 30 s
    sim.apply(sim.core.tick(sim.now))
    assert len(sim.core.topo.links) == LINKS and "j" in sim.core.sources.jobs.jobs
    sim.advance(1.0)  # it runs again, and LLDP with it
    assert len(sim.core.topo.links) == LINKS


def test_silence_while_running_still_ages_links_and_leases_out() -> None:
    sim = started()
    ticks(sim, 6.0)  # running, but no LLDP comes back: every link is past its timeout ...
    assert "j" not in sim.core.sources.jobs.jobs  # 5 s lease, not renewed
    assert len(sim.core.topo.links) == LINKS  # ... but nothing at all is read: a backlog?
    ticks(sim, LLDP_BEHIND * 3.5)  # not for that long
    assert sim.core.topo.links == {}
