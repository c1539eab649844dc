"""Traffic engineering on the fake fabric: elephants found from real flow counters,
pinned to disjoint paths, and delivered with no loop before, during and after a move.

Placement at the first packet is off here (``place_new``): these are the moves of flows
that hashing put somewhere, which is also what happens to a flow whose placement went
stale. ``test_te_first_packet`` has placement at the first packet."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.graylinks import Marked
from tests.fakefabric.model import Trace
from tests.sim import LoomSim
from topologies import dragonfly, fat_tree

CONFIG = FabricConfig(
    poll_interval=0.2,
    link_capacity_mbps=10.0,
    te=TeConfig(enabled=True, te_interval=0.2, hold_down=0.5, stage_delay=0.2, place_new=False),
)


def delivered_only_to(trace: Trace, dst: str) -> list[list[str]]:
    """Every non-controller branch delivered to ``dst``; no drop, loop or other host.
    Returns the switch paths the packet may take."""
    paths = []
    for branch in trace.branches:
        if branch.end.kind == "controller":
            continue  # the catch rule's copy of an untracked flow
        assert branch.end.kind == "delivered" and branch.end.host == dst, trace.render()
        paths.append(branch.path)
    assert paths, trace.render()
    return paths


def links_of(path: list[str]) -> list[tuple[str, str]]:
    return list(itertools.pairwise(path))


def test_two_elephants_are_pinned_to_paths_that_share_no_link() -> None:
    sim = LoomSim(fat_tree(4), CONFIG).start()
    a = sim.start_flow("h1", "h5", 40001, mbps=9)
    b = sim.start_flow("h3", "h7", 40002, mbps=9)
    sim.advance(2.0)
    assert len(sim.view.pinned) == 2, sim.view.flows
    used: Counter[tuple[str, str]] = Counter()
    for pkt, src, dst in ((a, "h1", "h5"), (b, "h3", "h7")):
        (path,) = delivered_only_to(sim.fake.trace(src, pkt), dst)  # pinned: one path, not ECMP
        used.update(links_of(path))
    assert max(used.values()) == 1, used
    assert sim.view.reroutes["new_elephant"] == 2


def test_mice_stay_on_ecmp_and_are_not_pinned() -> None:
    sim = LoomSim(fat_tree(4), CONFIG).start()
    pkt = sim.start_flow("h1", "h16", 40003, mbps=0.2)  # 2 % of the link: a mouse
    sim.advance(2.0)
    assert sim.view.pinned == {} and len(sim.view.flows) == 1
    # still hashed at the ingress over both aggregation switches, not pinned to one path
    assert len(delivered_only_to(sim.fake.trace("h1", pkt), "h16")) == 2


def test_delivery_during_and_after_a_move_forced_by_a_link_failure() -> None:
    sim = LoomSim(fat_tree(4), CONFIG).start()
    pkt = sim.start_flow("h1", "h9", 40004, mbps=9)
    sim.advance(2.0)
    (before,) = delivered_only_to(sim.fake.trace("h1", pkt), "h9")
    up, core = before[1], before[2]  # edge -> aggregation -> core
    sim.fail_link(up, core)
    paths = delivered_only_to(sim.fake.trace("h1", pkt), "h9")  # pins dropped: default routes
    assert all(core not in p or up not in p for p in paths)
    interim_seen = False
    for _ in range(10):  # step through the re-pin tick by tick: always delivered
        sim.advance(0.1)
        paths = delivered_only_to(sim.fake.trace("h1", pkt), "h9")
        interim_seen |= bool(sim.core.sources.te.staged)
    (after,) = paths
    assert (up, core) not in links_of(after)
    assert interim_seen, "the move should have gone through a staged (make-before-break) step"
    assert sim.view.reroutes["link_down"] == 1


def test_idle_flows_are_forgotten_and_their_rules_removed() -> None:
    te = TeConfig(flow_idle_timeout=1.0, place_new=False)
    config = FabricConfig(poll_interval=0.2, link_capacity_mbps=10.0, te=te)
    sim = LoomSim(fat_tree(4), config).start()
    sim.start_flow("h2", "h14", 40005, mbps=5)
    sim.advance(1.0)
    ingress = sim.graph.nodes["e0_0"]["dpid"]
    assert any(e.cookie >> 40 & 0xFF == 3 for e in sim.fake.flows(ingress, 3))
    sim.sources.clear()
    sim.advance(2.0)
    assert sim.view.flows == {}
    assert not any(e.cookie >> 40 & 0xFF == 3 for e in sim.fake.flows(ingress, 3))


def test_dragonfly_adversarial_elephants_leave_the_direct_global_link() -> None:
    graph = dragonfly(a=4, p=1, h=1, g=5)
    sim = LoomSim(graph, CONFIG).start()
    pairs = [(f"h{i}", f"h{i + 4}") for i in (1, 2, 3, 4)]  # group 0 -> group 1
    pkts = [(sim.start_flow(s, d, 41000 + i, mbps=9), s, d) for i, (s, d) in enumerate(pairs)]
    sim.advance(2.5)
    globals_used: Counter[tuple[str, str]] = Counter()
    for pkt, src, dst in pkts:
        (path,) = delivered_only_to(sim.fake.trace(src, pkt), dst)
        globals_used.update(
            (u, v) for u, v in links_of(path) if graph.nodes[u]["group"] != graph.nodes[v]["group"]
        )
    assert max(globals_used.values()) == 1, globals_used  # minimal routing would put all 4 on one


def test_flows_api_lists_elephants_with_their_pinned_paths() -> None:
    from controller.api import LoomApi

    sim = LoomSim(fat_tree(4), CONFIG).start()
    sim.start_flow("h1", "h9", 40001, mbps=9)
    sim.start_flow("h2", "h10", 40002, mbps=0.1)
    sim.advance(2.0)
    body = LoomApi(sim.core, lambda: sim.now).handle("GET", "/loom/v1/flows", {}).body
    big = next(f for f in body["flows"] if ":40001" in f["flow"])
    small = next(f for f in body["flows"] if ":40002" in f["flow"])
    assert (
        big["elephant"] and big["pinned"] and big["path"][0] == "e0_0" and big["path"][-1] == "e2_0"
    )
    assert not small["elephant"] and small["path"] is None
    assert body["reroutes"]["new_elephant"] >= 1
    assert 0 < big["last_moved_s"] <= big["age_s"] <= 2.0
    assert small["last_moved_s"] is None


def _dscps(trace: Trace) -> set[object]:
    return {hop.packet["ip_dscp"] for branch in trace.branches for hop in branch.hops}


def test_an_elephants_ack_stream_rides_the_control_class_while_the_elephant_lasts() -> None:
    sim = LoomSim(fat_tree(4), CONFIG).start()
    data = sim.start_flow("h1", "h5", 40005, mbps=9)
    ack = sim.fake.packet("h5", "h1", tcp_src=5201, tcp_dst=40005)
    sim.send("h5", ack)
    sim.sources.append(("h5", ack, int(0.2e6 / 8 * 0.1)))  # 2 % of the link: ACKs
    sim.advance(2.0)
    assert [str(k) for k in sim.view.ack_flows] == ["tcp:10.1.0.2:5201->10.0.0.2:40005"]
    assert _dscps(sim.fake.trace("h5", ack)) == {48}  # CS6 at every hop: served first
    assert _dscps(sim.fake.trace("h1", data)) == {0}  # the data itself stays bulk
    other = sim.fake.packet("h5", "h1", tcp_src=5202, tcp_dst=40005)
    assert _dscps(sim.fake.trace("h5", other)) == {0}  # not the elephant's reverse
    sim.sources = [s for s in sim.sources if s[1] is not data]  # the transfer ends
    sim.advance(3.0)
    assert sim.view.ack_flows == set()
    assert _dscps(sim.fake.trace("h5", ack)) == {0}


def test_ack_priority_off_leaves_ack_streams_unmarked() -> None:
    te = TeConfig(te_interval=0.2, hold_down=0.5, ack_priority=False, place_new=False)
    sim = LoomSim(fat_tree(4), FabricConfig(poll_interval=0.2, link_capacity_mbps=10.0, te=te))
    sim.start()
    sim.start_flow("h1", "h5", 40006, mbps=9)
    ack = sim.fake.packet("h5", "h1", tcp_src=5201, tcp_dst=40006)
    sim.send("h5", ack)
    sim.sources.append(("h5", ack, int(0.2e6 / 8 * 0.1)))
    sim.advance(2.0)
    assert sim.view.ack_flows == set() and len(sim.view.pinned) == 1
    assert _dscps(sim.fake.trace("h5", ack)) == {0}


@pytest.mark.parametrize("kept", [True, False])
def test_a_gray_link_test_moves_its_flow_off_the_suspect_but_keeps_the_nearer_link(
    kept: bool,
) -> None:
    """A suspected aggregation uplink, tested first of two cables (``GrayLinks.keeping``):
    its elephant must leave it by a way that keeps its edge uplink, else the test says
    nothing of which cable held it. Left to itself, placement takes the emptier other
    half of the pod and leaves both."""
    sim = LoomSim(fat_tree(4), CONFIG).start()
    sim.start_flow("h1", "h5", 40001, mbps=6)
    sim.start_flow("h3", "h7", 40002, mbps=6)
    sim.advance(2.0)
    key = min(k for k in sim.core.sources.te.paths if k.l4_src == 40001)
    edge, far = sim.core.sources.te.paths[key][:2]
    keep = frozenset({edge}) if kept else frozenset()
    sim.core.readings.gray.marked[far] = Marked("suspect", 2.0, 1e6, 4e6, {key: 6e6}, kept=keep)
    sim.advance(2.0)
    after = sim.core.sources.te.paths[key]
    assert far not in after
    assert (edge in after) == kept, after
