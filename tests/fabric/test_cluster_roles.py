"""Three Loom cores sharing a fake k=4 fat-tree as a cluster: each writes only to the
switches it masters, the switches refuse a stale master, and a member's death moves its
switches to the others without rewriting a rule that was right."""

from __future__ import annotations

import pytest

from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.model import FlowMod, GroupMod, Messages, MeterMod, PacketOut
from controller.ofp.compat import parser
from tests.cluster_sim import ClusterSim
from tests.fabric.test_restart import snapshot
from tests.fakefabric.roles import MASTER, StaleGeneration
from topologies import fat_tree

CONFIG = FabricConfig(te=TeConfig(enabled=False), settle_time=2.0, fresh_detours=True)
NAMES = ["loom-1", "loom-2", "loom-3"]
WRITES = (FlowMod, GroupMod, MeterMod, PacketOut)


def writes_to(batches: list[Messages], dpids: set[int]) -> int:
    return sum(
        1
        for batch in batches
        for dpid, msgs in batch.items()
        if dpid in dpids
        for m in msgs
        if isinstance(m, WRITES)
    )


@pytest.fixture
def cluster() -> ClusterSim:
    return ClusterSim(fat_tree(4), NAMES, CONFIG).start()


def test_switches_shared_evenly_and_the_fabric_works(cluster: ClusterSim) -> None:
    held = [sum(1 for m in cluster.masters.values() if m == n) for n in NAMES]
    assert sorted(held) == [6, 7, 7]  # 20 switches, within one of even
    for dpid, name in cluster.masters.items():
        assert cluster.switch_roles[dpid].master() == name
    assert cluster.fake.reachability().ok
    for m in cluster.live():
        assert len(m.view.hosts) == 16  # every member learned every host, slaves too
        assert len(m.view.links) == len(cluster.members["loom-1"].view.links) > 0


def test_a_slave_never_writes(cluster: ClusterSim) -> None:
    for m in cluster.live():
        others = {d for d, n in cluster.masters.items() if n != m.name}
        assert writes_to(m.sent_log, others) == 0
        assert m.roles.dropped["slave"] > 0  # it planned for them, and kept it to itself
    assert all(sum(r.refused.values()) == 0 for r in cluster.switch_roles.values())


def test_without_the_gate_the_switches_refuse_slaves(cluster: ClusterSim) -> None:
    """The check above could fail: with a member's gate open, its writes for switches
    it does not master reach them and are refused there."""
    spare = cluster.members["loom-2"]
    spare.roles.clustered = False
    cluster.fail_link("e0_0", "a0_0")  # every member re-plans; one of them unguarded
    cluster.advance(0.5)
    assert sum(r.refused["loom-2"] for r in cluster.switch_roles.values()) > 0
    assert sum(r.refused["loom-1"] for r in cluster.switch_roles.values()) == 0


def test_a_stale_generation_is_refused_by_the_switch(cluster: ClusterSim) -> None:
    dpid = min(cluster.dpids)
    owner = cluster.masters[dpid]
    old = cluster.members[owner].roles.generation[dpid]
    other = next(n for n in NAMES if n != owner)
    with pytest.raises(StaleGeneration):
        cluster.switch_roles[dpid].request(other, MASTER, old - 1)
    assert cluster.switch_roles[dpid].master() == owner
    # A newer claim wins: the old master is demoted and its writes are refused.
    cluster.generation += 1
    cluster.claim(cluster.members[other], dpid, cluster.generation)
    assert cluster.switch_roles[dpid].master() == other
    flow = parser.OFPFlowMod(None, table_id=0, priority=1, match=parser.OFPMatch(in_port=1))
    cluster.members[owner]._send_rule(dpid, flow)
    assert cluster.switch_roles[dpid].refused[owner] == 1


def test_a_members_death_moves_only_its_switches_and_rewrites_nothing(
    cluster: ClusterSim,
) -> None:
    before = snapshot(cluster.members["loom-1"])
    victim = cluster.masters[min(cluster.dpids)]
    theirs = {d for d, n in cluster.masters.items() if n == victim}
    for m in cluster.live():
        m.sent_log.clear()
    cluster.kill(victim)
    moved = cluster.elect()
    assert set(moved) == theirs  # nobody else's switches moved
    held = [sum(1 for n in cluster.masters.values() if n == m.name) for m in cluster.live()]
    assert sorted(held) == [10, 10]
    cluster.advance(3.0)
    survivors = cluster.live()
    rewrites = [
        msg
        for m in survivors
        for batch in m.sent_log
        for dpid, msgs in batch.items()
        for msg in msgs
        if isinstance(msg, FlowMod | GroupMod)
    ]
    assert rewrites == []  # read back, found right, left alone
    assert snapshot(survivors[0]) == before
    assert cluster.fake.reachability().ok
    for dpid in theirs:
        assert cluster.switch_roles[dpid].master() == cluster.masters[dpid] != victim
