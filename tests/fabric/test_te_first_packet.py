"""Placement at the first packet on the fake fabric: a new flow is pinned, before it has
sent a second packet, onto the equal-cost path least loaded by measured counters and by
the flows placed just before it; and what that costs in rules."""

from __future__ import annotations

import itertools
from collections import Counter

from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.flows import FlowKey
from controller.model import CookieKind, PortStats, Table, make_cookie
from tests.fakefabric.model import Trace
from tests.sim import LoomSim
from topologies import fat_tree

CONFIG = FabricConfig(
    poll_interval=0.2,
    link_capacity_mbps=10.0,
    te=TeConfig(te_interval=0.2, hold_down=0.5, stage_delay=0.2),
)


def only_path(trace: Trace, dst: str) -> list[str]:
    """The one switch path a pinned packet takes (hashing would show every branch)."""
    paths = [b.path for b in trace.branches if b.end.kind != "controller"]
    assert len(paths) == 1, trace.render()
    assert trace.branches[0].end.host == dst or any(b.end.host == dst for b in trace.branches), (
        trace.render()
    )
    return paths[0]


def fabric_links(path: list[str]) -> list[tuple[str, str]]:
    return [(u, v) for u, v in itertools.pairwise(path) if not v.startswith("h")]


def key_of(sim: LoomSim, src: str, dst: str, sport: int, dport: int = 5201) -> FlowKey:
    ip = sim.graph.nodes
    return FlowKey(ip[src]["ip"], ip[dst]["ip"], 6, sport, dport)


def test_flows_from_one_switch_are_placed_apart_before_they_are_measured() -> None:
    sim = LoomSim(fat_tree(4), CONFIG).start()
    pairs = [("h1", "h5"), ("h2", "h9"), ("h1", "h13"), ("h2", "h6")]  # e0_0 to three pods
    pkts = [(sim.start_flow(s, d, 40000, mbps=4.5), s, d) for s, d in pairs]  # all at once
    first = [only_path(sim.fake.trace(s, p), d) for p, s, d in pkts]
    used = Counter(link for path in first for link in fabric_links(path))
    uplinks = [n for (u, v), n in used.items() if u == "e0_0"]
    assert uplinks == [2, 2], used  # two flows on each uplink ...
    assert max(n for (u, v), n in used.items() if u.startswith("a0")) == 1, used  # ... 1 a core
    sim.advance(2.0)
    again = [only_path(sim.fake.trace(s, p), d) for p, s, d in pkts]
    assert again == first  # all became elephants where they were: nothing moved
    assert sum(sim.view.reroutes.values()) == 0
    assert sim.view.events["te.flows_placed"] == 4


def test_bulk_flows_after_their_control_connections_are_placed_apart() -> None:
    """iperf3's pattern: a short control connection, then the bulk one, between each pair
    of hosts. Counted as two elephants, the control connections could push both bulk flows
    onto one uplink (seen in emulation); a host pair's young flows are one link's demand
    at most, so the bulk flow joins its control connection and counts once."""
    for base in range(41000, 41400, 50):  # the flows' ids decide ties: many draws
        sim = LoomSim(fat_tree(4), CONFIG).start()
        bulk, control = [], []
        for i, (src, dst) in enumerate((("h1", "h5"), ("h2", "h6"))):
            control.append(
                only_path(sim.fake.trace(src, sim.start_flow(src, dst, base + i, 0.01)), dst)
            )
            pkt = sim.start_flow(src, dst, 40000, mbps=9)  # iperf3 --cport 40000
            bulk.append(only_path(sim.fake.trace(src, pkt), dst))
            assert bulk[i] == control[i]
        assert bulk[0][2] != bulk[1][2]  # out of e0_0 by different aggregation switches
        young = sim.core.sources.te.newflows.young_load
        assert sorted(
            v for (dpid, _), v in young.items() if dpid == sim.graph.nodes["e0_0"]["dpid"]
        ) == [1.0, 1.0]


def test_a_bulk_flow_joins_its_control_connection_measured_as_a_mouse() -> None:
    """On a busy host the bulk connection can come after its control connection has been
    measured (a mouse, no longer young): it still joins it, so the pairs stay apart."""
    for base in range(41000, 41400, 50):  # the flows' ids decide ties: many draws
        sim = LoomSim(fat_tree(4), CONFIG).start()
        controls = [
            (src, dst, sim.start_flow(src, dst, base + i, 0.01))
            for i, (src, dst) in enumerate((("h1", "h5"), ("h2", "h6")))
        ]
        sim.advance(1.0)  # measured: no longer young
        assert sim.core.sources.te.newflows.young == {}
        bulk = []
        for src, dst, pkt in controls:
            control = only_path(sim.fake.trace(src, pkt), dst)
            data = only_path(sim.fake.trace(src, sim.start_flow(src, dst, 40000, mbps=9)), dst)
            assert data == control
            bulk.append(data)
        assert bulk[0][2] != bulk[1][2]  # out of e0_0 by different aggregation switches


def test_a_new_flow_avoids_the_load_the_counters_measure() -> None:
    sim = LoomSim(fat_tree(4), CONFIG).start()
    edge = sim.graph.nodes["e0_0"]["dpid"]
    busy_port, sent = 4, 0  # e0_0's uplink to a0_1 carries 9 Mbit/s Loom does not track
    for _ in range(5):  # (the fake fabric does not model port counters: they come from here)
        sim.advance(0.2)
        sent += int(9e6 / 8 * 0.2)
        sim.core.port_stats(sim.now, edge, [PortStats(3), PortStats(busy_port, tx_bytes=sent)])
    assert sim.core.readings.load((edge, busy_port)) > 0.5
    for sport in range(40010, 40018):  # mice, each measured before the next comes
        b = sim.start_flow("h2", "h10", sport, mbps=0.01)  # 4 paths, 2 over the busy uplink
        assert only_path(sim.fake.trace("h2", b), "h10")[1] == "a0_0"
        sim.advance(0.4)
    assert sim.core.sources.te.newflows.young == {}


def test_an_ack_stream_takes_the_way_back_of_its_data() -> None:
    """Each link then carries the ACKs of the one flow whose data crosses it the other way,
    as a host's own link does; two flows' ACK streams share no link."""
    sim = LoomSim(fat_tree(4), CONFIG).start()
    data = [
        only_path(sim.fake.trace(src, sim.start_flow(src, dst, port, mbps=9)), dst)
        for src, dst, port in (("h1", "h5", 40020), ("h2", "h6", 40021))
    ]
    acks = []
    for src, dst, port in (("h5", "h1", 40020), ("h6", "h2", 40021)):
        ack = sim.fake.packet(src, dst, tcp_src=5201, tcp_dst=port)
        sim.send(src, ack)
        acks.append(only_path(sim.fake.trace(src, ack), dst))
    for way, back in zip(data, acks, strict=True):
        assert [s for s in back if not s.startswith("h")] == [
            s for s in reversed(way) if not s.startswith("h")
        ]
    assert set(fabric_links(acks[0])).isdisjoint(fabric_links(acks[1]))
    young = sim.core.sources.te.newflows.young
    assert young[key_of(sim, "h5", "h1", 5201, 40020)][1] < 0.1  # an ACK stream, not data
    assert young[key_of(sim, "h1", "h5", 40020)][1] == 1.0


def test_a_placed_flow_costs_one_transit_rule_between_pods_and_none_within_one() -> None:
    sim = LoomSim(fat_tree(4), CONFIG).start()
    sim.start_flow("h1", "h5", 40030, mbps=0.01)  # another pod
    sim.start_flow("h1", "h3", 40031, mbps=0.01)  # the same pod, another edge switch
    for sport, switches in ((40030, 2), (40031, 1)):
        key = key_of(sim, "h1", "h5" if sport == 40030 else "h3", sport)
        cookie = make_cookie(CookieKind.FLOW, key.ident)
        holding = [
            name
            for name, data in sim.graph.nodes(data=True)
            if "dpid" in data
            and any(e.cookie == cookie for e in sim.fake.flows(data["dpid"], Table.PIN))
        ]
        assert len(holding) == switches, holding


def test_placement_off_leaves_new_flows_to_hashing() -> None:
    te = TeConfig(te_interval=0.2, place_new=False)
    sim = LoomSim(fat_tree(4), FabricConfig(poll_interval=0.2, link_capacity_mbps=10.0, te=te))
    pkt = sim.start().start_flow("h1", "h5", 40040, mbps=0.01)
    branches = [b for b in sim.fake.trace("h1", pkt).branches if b.end.kind != "controller"]
    assert len(branches) > 1 and sim.view.pinned == {}


def test_an_ack_stream_follows_its_elephant_when_the_elephant_moves() -> None:
    sim = LoomSim(fat_tree(4), CONFIG).start()
    pkt = sim.start_flow("h1", "h9", 40050, mbps=9)
    ack = sim.fake.packet("h9", "h1", tcp_src=5201, tcp_dst=40050)
    sim.send("h9", ack)
    sim.sources.append(("h9", ack, int(0.2e6 / 8 * 0.1)))
    sim.advance(2.0)
    before = only_path(sim.fake.trace("h1", pkt), "h9")
    sim.fail_link(before[2], before[3])  # aggregation -> core
    sim.advance(2.0)
    after = only_path(sim.fake.trace("h1", pkt), "h9")
    back = only_path(sim.fake.trace("h9", ack), "h1")
    assert after != before
    assert [s for s in back if not s.startswith("h")] == [
        s for s in reversed(after) if not s.startswith("h")
    ]
