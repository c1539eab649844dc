"""A controller restart on the fake fabric: the switches keep forwarding on what they
hold, the new controller reads it back, recovers its hosts without any ARP, and sends
only differences — never deleting a rule that is still right."""

from __future__ import annotations

import pytest

from controller import sources
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.model import (
    OFPP_LOCAL,
    ClearSwitch,
    FlowMod,
    GroupMod,
    Messages,
    Op,
    PortDesc,
)
from controller.ofp.compat import ofp, parser
from tests.sim import LoomSim
from topologies import dragonfly, fat_tree
from topologies.graph import link_ends

CONFIG = FabricConfig(te=TeConfig(enabled=False), settle_time=2.0)


def snapshot(sim: LoomSim) -> dict[int, tuple[list[str], list[int]]]:
    out = {}
    for _, data in sim.graph.nodes(data=True):
        if data["kind"] == "switch":
            dpid = data["dpid"]
            flows = sorted(f.describe() for f in sim.fake.flows(dpid))
            out[dpid] = (flows, sorted(sim.fake.groups(dpid)))
    return out


@pytest.fixture(params=["whole", "sliced"])
def slicing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Route planning in one call, or one switch per call (as a k=48 fabric runs it):
    a switch read back is never released before its own routes are planned."""
    if request.param == "sliced":
        monkeypatch.setattr(sources, "ROUTE_SLICE_WORK", 1)
    return str(request.param)


def test_restart_keeps_every_rule_and_full_reachability_throughout(slicing: str) -> None:
    sim = LoomSim(fat_tree(4), CONFIG).start()
    before = snapshot(sim)
    sent = sim.restart_controller()
    deletes = [
        m
        for batch in sent
        for msgs in batch.values()
        for m in msgs
        if isinstance(m, FlowMod | GroupMod) and m.op is Op.DELETE
    ]
    assert deletes == []
    assert len(sim.view.hosts) == 16  # read back from the switches, no host spoke
    assert sim.view.events["host_recovered"] == 16  # each once, though it has two rules
    assert sim.fake.reachability(explore_all=False).ok
    original = sim.apply

    def recording(messages: Messages) -> None:
        sent.append(messages)
        original(messages)

    sim.apply = recording  # type: ignore[method-assign]
    for _ in range(50):  # discovery and the settle time, tick by tick: never a gap
        sim.advance(0.1)
        report = sim.fake.reachability(
            [("h1", "h16"), ("h5", "h12"), ("h14", "h3")], explore_all=False
        )
        assert report.ok, report.render()
    assert not sim.core.store.adopted  # settled: every rule read back was claimed
    assert snapshot(sim) == before  # the same rules as before the restart
    rewrites = [
        (dpid, m)
        for batch in sent
        for dpid, msgs in batch.items()
        for m in msgs
        if isinstance(m, FlowMod | GroupMod)
    ]
    assert rewrites == []  # nothing was right only after being rewritten
    assert sim.fake.reachability().ok


def test_restart_removes_what_no_longer_belongs_after_settling() -> None:
    sim = LoomSim(dragonfly(a=4, p=1, h=1, g=5), CONFIG).start()
    sim.fake.set_link("r0_0", "r0_1", False)  # changed while the controller was away
    sim.restart_controller()
    sim.advance(3.0)
    assert sim.fake.reachability(explore_all=False).ok
    assert not sim.core.store.adopted  # everything read back was claimed or removed


def test_a_switch_that_lost_its_tables_gets_everything_again() -> None:
    sim = LoomSim(fat_tree(4), CONFIG).start()
    e00 = sim.graph.nodes["e0_0"]["dpid"]
    before = snapshot(sim)[e00]
    sim.apply({e00: [ClearSwitch()]})  # the switch restarted empty ...
    assert not sim.fake.trace("h1", sim.fake.packet("h1", "h9")).delivered_hosts
    ports = [PortDesc(e.port) for e in link_ends(sim.graph, "e0_0")] + [
        PortDesc(OFPP_LOCAL, name="e0_0")
    ]
    sim.apply(sim.core.switch_up(sim.now, e00, ports))  # ... and reconnected
    sim.advance(1.0)  # switches read back are planned in a batch (they come by the hundred)
    assert snapshot(sim)[e00] == before
    assert sim.fake.reachability(explore_all=False).ok


def test_a_switch_that_rebooted_gets_its_hosts_back_before_they_speak() -> None:
    """A switch that disconnects and comes back empty (a reboot) had its hosts forgotten
    with it; Loom restores them where they were, so they are reached again without
    waiting for their next ARP."""
    sim = LoomSim(fat_tree(4), CONFIG).start()
    e00 = sim.graph.nodes["e0_0"]["dpid"]
    sim.apply(sim.core.switch_down(sim.now, e00))
    sim.apply({e00: [ClearSwitch()]})
    ports = [PortDesc(e.port) for e in link_ends(sim.graph, "e0_0")] + [
        PortDesc(OFPP_LOCAL, name="e0_0")
    ]
    sim.apply(sim.core.switch_up(sim.now, e00, ports))
    sim.advance(6.0)  # rediscovery, then the batched re-plan; no host sends anything
    assert sim.fake.reachability(explore_all=False).ok


def test_a_switch_that_rejected_a_message_is_read_back_and_repaired() -> None:
    """A switch that refused a message no longer holds what Loom believes it does. The
    core reads it back and sends what is missing, at once (it is not held), and repairs
    one switch at most once per back-off however many errors arrive."""
    sim = LoomSim(fat_tree(4), CONFIG).start()
    before = snapshot(sim)
    edge = sim.graph.nodes["e0_0"]["dpid"]
    lost = max(gid for gid in sim.fake.groups(edge) if gid < 0x4000_0000)  # a route group
    sim.fake.send(edge, parser.OFPGroupMod(None, ofp.OFPGC_DELETE, 0, lost, []))  # and its flows
    assert not sim.fake.reachability([("h1", "h16")], explore_all=False).ok
    sent: list[Messages] = []
    original = sim.apply

    def recording(messages: Messages) -> None:
        sent.append(messages)
        original(messages)

    sim.apply = recording  # type: ignore[method-assign]
    sim.apply(sim.core.rejected(sim.now, edge))
    assert sim.fake.reachability(explore_all=False).ok
    assert snapshot(sim) == before
    assert sim.view.events["switch_repaired"] == 1
    assert sim.core.rejected(sim.now + 1.0, edge) == {}  # within the back-off
    sim.advance(5.0)
    assert sim.core.rejected(sim.now, edge) != {}
    assert sim.view.events["switch_rejected"] == 3
    assert sim.view.events["switch_repaired"] == 2
