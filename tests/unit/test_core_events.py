"""The core's event handling without any switch: discovery, hosts, ARP, port down."""

from __future__ import annotations

from controller.arp import ARP_REPLY, ARP_REQUEST, BROADCAST, ZERO_IP
from controller.conductor import Conductor, FabricConfig
from controller.model import (
    CONTROLLER_MAC,
    META_FROM_FABRIC,
    OFPP_TABLE,
    Action,
    ArpFrame,
    EthFrame,
    FlowMod,
    FlowRule,
    GroupAction,
    LldpFrame,
    Messages,
    Op,
    Output,
    PacketIn,
    PacketOut,
    PortDesc,
    RawFrame,
    StatsKind,
    StatsRequest,
    SwitchRules,
    Table,
    merge,
)
from controller.responder import LOOM_ADDRESS
from controller.topology import Topology
from controller.view import FabricView
from topologies import dragonfly
from topologies.graph import link_ends, switches

A = "02:00:00:00:00:01"
B = "02:00:00:00:00:02"


def ports(*nums: int) -> list[PortDesc]:
    return [PortDesc(n) for n in nums]


def up(f: Conductor, dpid: int, port_list: list[PortDesc], now: float = 0.0) -> None:
    """A new switch connects and reports that it holds nothing."""
    f.switch_up(now, dpid, port_list)
    f.switch_state(now, dpid, [], [], [])


def line_fabric() -> Conductor:
    """Two switches 1 and 2 linked 1:3 <-> 2:3; hosts will sit on port 1 of each."""
    f = Conductor(FabricConfig(lldp_interval=1.0, lldp_timeout=3.5))
    up(f, 1, ports(1, 2, 3))
    up(f, 2, ports(1, 2, 3))
    f.packet_in(0.1, PacketIn(2, 3, LldpFrame(1, 3)))
    f.packet_in(0.1, PacketIn(1, 3, LldpFrame(2, 3)))
    f.tick(0.4)  # discovery quiet for 0.25 s: planned
    return f


def arp(
    op: int, sha: str, spa: str, tpa: str, eth_dst: str = BROADCAST, tha: str = "00:00:00:00:00:00"
) -> ArpFrame:
    return ArpFrame(op, sha, eth_dst, sha, spa, tha, tpa)


def packet_outs(msgs: Messages, dpid: int) -> list[PacketOut]:
    return [m for m in msgs.get(dpid, []) if isinstance(m, PacketOut)]


def test_switch_up_reads_the_switch_first_then_installs_the_base_pipeline() -> None:
    f = Conductor()
    out = f.switch_up(5.0, 7, ports(1, 2))
    reads = [m for m in out[7] if isinstance(m, StatsRequest)]
    assert {r.kind for r in reads} == {StatsKind.FLOW, StatsKind.GROUP_DESC, StatsKind.METER_CONFIG}
    assert all(r.sync for r in reads) and not any(isinstance(m, FlowMod) for m in out[7])
    lldp = [m.frame for m in packet_outs(out, 7)]
    assert lldp == [LldpFrame(7, 1), LldpFrame(7, 2)]
    # a switch new to the fabric is planned in a batch, once discovery pauses
    assert f.switch_state(5.1, 7, [], [], []) == {}
    assert not any(isinstance(m, FlowMod) for m in f.tick(5.2).get(7, []))
    installed = f.tick(5.4)
    assert any(isinstance(m, FlowMod) and m.op is Op.ADD for m in installed[7])


def test_lldp_discovers_links_and_batches_the_replan_into_tick() -> None:
    f = Conductor()
    up(f, 1, ports(1, 3))
    up(f, 2, ports(1, 3))
    assert f.packet_in(0.1, PacketIn(2, 3, LldpFrame(1, 3))) == {}
    assert f.topo.is_fabric_port((1, 3)) and f.topo.is_fabric_port((2, 3))
    assert not any(isinstance(m, FlowMod) for ms in f.tick(0.2).values() for m in ms)
    out = f.tick(0.4)  # discovery quiet for 0.25 s: one re-plan
    on_port_3 = [
        m for m in out.get(1, []) if isinstance(m, FlowMod) and m.rule.match.get("in_port") == 3
    ]
    assert [m.op for m in on_port_3 if m.rule.goto is not None] == [Op.ADD]  # now a fabric port
    # ARP from it is dropped in PIN, but unicast ARP to a Loom address (the switches'
    # own answers), which is routed
    transit = (META_FROM_FABRIC, META_FROM_FABRIC)
    pin = [m.rule for m in out.get(1, []) if isinstance(m, FlowMod) and m.rule.table == Table.PIN]
    arp = [
        r for r in pin if r.match.get("eth_type") == 0x0806 and r.match.get("metadata") == transit
    ]
    assert [(r.match.get("eth_dst"), r.goto, r.actions) for r in arp] == [
        (LOOM_ADDRESS, Table.ROUTE, ()),
        (None, None, ()),
    ]


def ticks(f: Conductor, start: float, end: float) -> Messages:
    """Tick every 0.1 s as the shim does: a controller that ticks is there to hear LLDP
    (time in which it did not tick is excused, see the tests below)."""
    out: Messages = {}
    t = start
    while t <= end + 1e-9:
        merge(out, f.tick(round(t, 6)))
        t += 0.1
    return out


def test_links_expire_without_lldp_and_go_down_at_once_on_port_status() -> None:
    f = line_fabric()
    assert len(f.topo.links) == 2
    ticks(f, 0.5, 3.0)
    assert len(f.topo.links) == 2
    ticks(f, 3.1, 4.0)  # 3.9 s since the last frame > 3.5 s timeout
    assert f.topo.links == {}
    f = line_fabric()
    f.port_status(0.5, 1, PortDesc(3, up=False))
    assert f.topo.links == {}


def test_arp_for_unknown_host_probes_edge_ports_only_then_answers() -> None:
    f = line_fabric()
    out = f.packet_in(1.0, PacketIn(1, 1, arp(ARP_REQUEST, A, "10.0.0.1", "10.0.0.2")))
    assert A in f.topo.hosts
    probes = {dpid: packet_outs(out, dpid) for dpid in (1, 2)}
    assert [p.actions for p in probes[1]] == [
        (Output(2),)
    ]  # not port 1 (requester), not 3 (fabric)
    assert [p.actions for p in probes[2]] == [(Output(1), Output(2))]
    probe = probes[2][0].frame
    assert isinstance(probe, ArpFrame) and probe.sha == CONTROLLER_MAC and probe.spa == ZERO_IP
    # the owner answers the controller's probe; the controller answers the requester
    reply = ArpFrame(ARP_REPLY, B, CONTROLLER_MAC, B, "10.0.0.2", CONTROLLER_MAC, ZERO_IP)
    out = f.packet_in(1.1, PacketIn(2, 1, reply))
    answer = packet_outs(out, 1)
    assert len(answer) == 1 and answer[0].actions == (Output(1),)
    frame = answer[0].frame
    address = f.address_of(f.topo.hosts[B])  # the address Loom hands out for B
    assert isinstance(frame, ArpFrame) and (frame.op, frame.sha, frame.spa, frame.tha) == (
        ARP_REPLY,
        address,
        "10.0.0.2",
        A,
    )
    assert address != B and frame.eth_src == address
    # and B's delivery was planned in the same step, before the answer
    assert any(isinstance(m, FlowMod) and m.rule.match.get("eth_dst") == address for m in out[2])


def test_arp_for_known_host_is_answered_directly_without_probe() -> None:
    f = line_fabric()
    f.packet_in(1.0, PacketIn(2, 1, arp(ARP_REQUEST, B, "10.0.0.2", "10.0.0.9")))
    out = f.packet_in(1.5, PacketIn(1, 1, arp(ARP_REQUEST, A, "10.0.0.1", "10.0.0.2")))
    assert set(out) >= {1} and len(packet_outs(out, 1)) == 1 and packet_outs(out, 2) == []


def test_probes_are_rate_limited_per_target() -> None:
    f = line_fabric()
    first = f.packet_in(1.0, PacketIn(1, 1, arp(ARP_REQUEST, A, "10.0.0.1", "10.0.0.7")))
    again = f.packet_in(1.2, PacketIn(1, 1, arp(ARP_REQUEST, A, "10.0.0.1", "10.0.0.7")))
    later = f.packet_in(2.1, PacketIn(1, 1, arp(ARP_REQUEST, A, "10.0.0.1", "10.0.0.7")))
    assert packet_outs(first, 2) and not packet_outs(again, 2) and packet_outs(later, 2)


def test_nothing_is_learned_from_fabric_ports_or_the_controller_mac() -> None:
    f = line_fabric()
    f.packet_in(1.0, PacketIn(1, 3, arp(ARP_REQUEST, A, "10.0.0.1", "10.0.0.2")))
    probe = ArpFrame(
        ARP_REQUEST,
        CONTROLLER_MAC,
        BROADCAST,
        CONTROLLER_MAC,
        ZERO_IP,
        "00:00:00:00:00:00",
        "10.0.0.1",
    )
    f.packet_in(1.0, PacketIn(1, 2, probe))
    assert f.topo.hosts == {}


def test_no_link_is_believed_on_a_host_port_nor_from_a_port_to_itself() -> None:
    """Hosts only ever receive LLDP sent out of their own port: replaying it (or
    relaying a colluder's) is the only way a link could be claimed there."""
    t = Topology()
    t.add_switch(1, ports(1, 2))
    t.add_switch(2, ports(1, 2))
    assert t.learn_host(0.0, A, "10.0.0.1", 1, 2)
    assert not t.link_seen(0.1, (2, 1), (1, 2))
    assert not t.link_seen(0.1, (2, 2), (2, 2))
    assert A in t.hosts and t.links == {}
    assert t.link_seen(0.2, (2, 1), (1, 1))  # between switch ports: believed


def test_host_move_only_after_its_old_port_went_down_and_replans_both_switches() -> None:
    f = line_fabric()
    f.packet_in(1.0, PacketIn(1, 1, arp(ARP_REQUEST, A, "10.0.0.1", "10.0.0.1")))  # gratuitous
    hijack = f.packet_in(1.5, PacketIn(2, 2, arp(ARP_REQUEST, A, "10.0.0.1", "10.0.0.1")))
    assert hijack == {} and f.topo.hosts[A].dpid == 1  # the old port is up: refused
    f.port_status(1.8, 1, PortDesc(1, up=False))
    out = f.packet_in(2.0, PacketIn(2, 2, arp(ARP_REQUEST, A, "10.0.0.1", "10.0.0.1")))
    deletes = [
        m for msgs in out.values() for m in msgs if isinstance(m, FlowMod) and m.op is Op.DELETE
    ]
    adds = [
        m for msgs in out.values() for m in msgs if isinstance(m, FlowMod) and m.op is not Op.DELETE
    ]
    assert deletes and adds and f.topo.hosts[A].dpid == 2


def _out_ports(rules: SwitchRules, actions: tuple[Action, ...]) -> set[int]:
    """Ports a rule's actions send to, through its groups' buckets."""
    ports: set[int] = set()
    for action in actions:
        if isinstance(action, Output):
            ports.add(action.port)
        elif isinstance(action, GroupAction):
            for bucket in rules.groups[action.group_id].buckets:
                ports |= _out_ports(rules, bucket.actions)
    return ports


def _hits(rules: SwitchRules, address: str) -> list[FlowRule]:
    """The ROUTE rules a packet to ``address`` hits: from a host and in transit."""
    value = int(address.replace(":", ""), 16)
    found = []
    for meta in (0, META_FROM_FABRIC):
        matching = []
        for r in rules.flows.values():
            eth, md = r.match.get("eth_dst"), r.match.get("metadata")
            if r.table is not Table.ROUTE or eth is None or "in_port" in r.match.as_dict():
                continue
            want, mask = eth if isinstance(eth, tuple) else (eth, "ff:ff:ff:ff:ff:ff")
            bits = int(str(mask).replace(":", ""), 16)
            if value & bits != int(str(want).replace(":", ""), 16):
                continue
            if isinstance(md, tuple) and isinstance(md[1], int) and meta & md[1] != md[0]:
                continue
            matching.append(r)
        if matching:
            found.append(max(matching, key=lambda r: r.priority))
    return found


def test_port_down_sends_only_the_difference() -> None:
    f = Conductor(FabricConfig(fast_failover=False))  # plain routes: no failover groups
    for dpid in (1, 2, 3):
        up(f, dpid, ports(1, 2, 3))
    # triangle: 1:2-2:2, 2:3-3:3, 1:3-3:2
    for a, b in [((1, 2), (2, 2)), ((2, 3), (3, 3)), ((1, 3), (3, 2))]:
        f.packet_in(0.1, PacketIn(b[0], b[1], LldpFrame(*a)))
        f.packet_in(0.1, PacketIn(a[0], a[1], LldpFrame(*b)))
    f.tick(0.2)
    f.packet_in(0.3, PacketIn(3, 1, arp(ARP_REQUEST, B, "10.0.0.2", "10.0.0.2")))
    address = f.address_of(f.topo.hosts[B])
    before = f.store.switch_rules(1)
    to_b = _hits(before, address)
    assert len(to_b) == 2 and all(_out_ports(before, r.actions) == {3} for r in to_b)  # direct
    out = f.port_status(0.4, 1, PortDesc(3, up=False))
    msgs = out.get(1, [])
    assert msgs and all(not isinstance(m, PacketOut) for m in msgs)
    # only routes change (a new next-hop set may merge blocks): nothing else is resent
    assert all(m.rule.table is Table.ROUTE for m in msgs if isinstance(m, FlowMod))
    assert len(msgs) < len(before.flows) // 2
    after = f.store.switch_rules(1)
    to_b = _hits(after, address)
    assert len(to_b) == 2 and all(_out_ports(after, r.actions) == {2} for r in to_b), (
        "switch 1 must move its routes to switch 3 onto port 2"
    )
    assert set(out) <= {1, 2, 3}  # only the triangle's switches hear of it
    assert f.port_status(0.5, 1, PortDesc(3, up=False)) == {}  # nothing changed: nothing sent


def test_route_miss_is_reinjected_only_for_routed_hosts() -> None:
    f = line_fabric()
    f.packet_in(1.0, PacketIn(2, 1, arp(ARP_REQUEST, B, "10.0.0.2", "10.0.0.2")))
    address = f.address_of(f.topo.hosts[B])
    frame = EthFrame(A, address, 0x0800, None, "10.0.0.1", "10.0.0.2", 6, 1000, 80)
    out = f.packet_in(1.1, PacketIn(1, 1, frame, b"raw", table_id=4))
    assert out == {1: [PacketOut(1, (Output(OFPP_TABLE),), RawFrame(b"raw"))]}
    for unknown in ("02:00:00:00:00:99", B, address[:-2] + "07"):  # none Loom handed out
        frame = EthFrame(A, unknown, 0x0800)
        assert f.packet_in(1.2, PacketIn(1, 1, frame, b"raw", table_id=4)) == {}


def test_switch_down_removes_its_links_and_hosts() -> None:
    f = line_fabric()
    f.packet_in(1.0, PacketIn(2, 1, arp(ARP_REQUEST, B, "10.0.0.2", "10.0.0.2")))
    f.switch_down(2.0, 2)
    assert f.topo.links == {} and f.topo.hosts == {} and list(f.topo.switches) == [1]
    assert all(dpid == 1 for owner in f.store.parts.values() for dpid in owner)


def test_host_learned_while_discovery_is_pending_plans_on_the_fresh_graph() -> None:
    f = Conductor()
    for dpid in (1, 2, 3):
        up(f, dpid, ports(1, 2, 3))
    f.packet_in(0.1, PacketIn(2, 2, LldpFrame(1, 2)))
    f.packet_in(0.1, PacketIn(1, 2, LldpFrame(2, 2)))
    f.tick(0.2)
    f.packet_in(0.3, PacketIn(3, 3, LldpFrame(2, 3)))  # a new link, not yet planned
    f.packet_in(0.3, PacketIn(2, 3, LldpFrame(3, 3)))
    out = f.packet_in(0.31, PacketIn(3, 1, arp(ARP_REQUEST, B, "10.0.0.2", "10.0.0.2")))
    address = f.address_of(f.topo.hosts[B])
    delivered = {
        d
        for d, msgs in out.items()
        for m in msgs
        if isinstance(m, FlowMod) and m.rule.match.get("eth_dst") == address
    }
    assert delivered == {3}
    # switch 2 routes towards B over the link found a moment ago, in the same step
    assert {d for d, msgs in out.items() if any(isinstance(m, FlowMod) for m in msgs)} >= {2, 3}
    (_, transit) = _hits(f.store.switch_rules(2), address)
    assert _out_ports(f.store.switch_rules(2), transit.actions) == {3}


def test_a_link_still_carrying_traffic_outlives_late_lldp() -> None:
    from controller.model import PortStats

    f = line_fabric()
    for i in range(7):
        t, packets = 1.0 + 0.5 * i, 100 * (i + 1)
        f.port_stats(t, 2, [PortStats(3, rx_packets=packets)])  # switch 2 keeps receiving on 3
        f.port_stats(t, 1, [PortStats(3, rx_packets=packets)])
        f.tick(t)
    assert len(f.topo.links) == 2  # no LLDP since 0.1 s, but traffic proves both directions
    f.port_stats(4.5, 2, [PortStats(3, rx_packets=700)])  # traffic stops: LLDP timeout applies
    f.port_stats(4.5, 1, [PortStats(3, rx_packets=700)])
    ticks(f, 4.1, 8.5)
    assert f.topo.links == {}


def test_described_dragonfly_groups_follow_the_links_not_the_last_plan() -> None:
    """The topology view names the groups of the links it lists, even in the tick between
    the last link arriving and the re-plan it triggers."""
    g = dragonfly(a=4, p=1, h=1, g=5)
    f = Conductor()
    dpid = {sw: g.nodes[sw]["dpid"] for sw in switches(g)}
    for sw in switches(g):
        up(f, dpid[sw], [PortDesc(e.port) for e in link_ends(g, sw)])
    for sw in switches(g):
        for e in link_ends(g, sw):
            if e.peer in dpid:
                lldp = LldpFrame(dpid[sw], e.port)
                f.packet_in(0.1, PacketIn(dpid[e.peer], e.peer_port, lldp, b"", 0, 0))
    assert f.inputs.routes.groups is None  # not re-planned yet: that waits for the next tick
    assert len(FabricView(f).describe()["links"]) == 80
    assert FabricView(f).describe()["groups"] == 5
