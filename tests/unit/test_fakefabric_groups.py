"""The fake fabric itself, continued: error handling, groups, floods, loops, black holes,
packet-outs and whole-fabric reachability, checked against the OpenFlow 1.3.5 spec."""

from __future__ import annotations

import networkx as nx
import pytest
from ryu.lib.packet import ethernet, ipv4, packet, tcp
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as P

from tests.fakefabric import FakeFabric, OFError, TraceLimitError, UnsupportedError
from tests.fakefabric.builders import (
    IPV4,
    MODIFY,
    apply,
    bucket,
    diamond,
    flow,
    group,
    line,
    mac,
    out,
    route_line,
    setf,
    write,
)
from topologies.fat_tree import fat_tree


@pytest.fixture
def fab() -> FakeFabric:
    return FakeFabric(line())


def test_strict_false_records_errors_and_changes_nothing() -> None:
    f = FakeFabric(line(), strict=False)
    f.send(1, flow({"ipv4_dst": "10.0.0.3"}, apply(out(2))))
    f.send(1, flow({}, apply(P.OFPActionGroup(9))))
    assert [e.code_name for e in f.errors] == ["OFPBMC_BAD_PREREQ", "OFPBAC_BAD_OUT_GROUP"]
    assert f.flows(1) == [] and f.messages(1) == []


# ---- groups ------------------------------------------------------------------------------


def test_group_all_copies_to_every_bucket(fab: FakeFabric) -> None:
    route_line(fab)
    fab.send(2, group(1, ofp.OFPGT_ALL, bucket(out(1)), bucket(out(3))))
    fab.send(2, flow({"eth_dst": "ff:ff:ff:ff:ff:ff"}, apply(P.OFPActionGroup(1))))
    fab.send(1, flow({"eth_dst": "ff:ff:ff:ff:ff:ff"}, apply(out(2))))
    fab.send(3, flow({"eth_dst": "ff:ff:ff:ff:ff:ff"}, apply(out(1))))
    t = fab.trace("h1", fab.packet("h1", "h3", kind="arp"))
    assert t.delivered_hosts == {"h2", "h3"} and len(t.worlds()) == 1
    assert t.ok_multicast(["h2", "h3"]) and not t.ok_multicast(["h3"])
    assert sorted(b.hops[1].groups for b in t.branches) == [((1, 0),), ((1, 1),)]


def test_select_group_branches_into_live_alternatives() -> None:
    f = FakeFabric(diamond())
    buckets = [bucket(out(2), weight=1, watch_port=2), bucket(out(3), weight=1, watch_port=3)]
    f.send(1, group(1, ofp.OFPGT_SELECT, *buckets))
    f.send(1, flow({}, apply(P.OFPActionGroup(1))))
    for dpid in (2, 3):
        f.send(dpid, flow({}, apply(out(2))))
    f.send(4, flow({}, apply(out(1))))
    t = f.trace("h1", f.packet("h1", "h4"))
    assert sorted(t.paths) == [["s1", "s2", "s4"], ["s1", "s3", "s4"]]
    assert all(not b.is_copy and len(b.alternatives) == 1 for b in t.branches)
    assert t.ok_unicast("h4") and len(t.worlds()) == 2
    # without explore_all exactly one, the same every time, chosen by the 5-tuple
    picks = {tuple(f.trace("h1", f.packet("h1", "h4"), explore_all=False).paths[0])}
    picks.add(tuple(f.trace("h1", f.packet("h1", "h4"), explore_all=False).paths[0]))
    assert len(picks) == 1
    spread = {
        f.trace("h1", f.packet("h1", "h4", tcp_src=p), explore_all=False).paths[0][1]
        for p in range(40000, 40032)
    }
    assert spread == {"s2", "s3"}
    # a dead watched port removes its bucket; weight 0 never gets picked
    f.set_link("s1", "s2", False)
    assert f.trace("h1", f.packet("h1", "h4")).paths == [["s1", "s3", "s4"]]
    f.send(1, group(1, ofp.OFPGT_SELECT, bucket(out(3), weight=0), command=ofp.OFPGC_MODIFY))
    t = f.trace("h1", f.packet("h1", "h4"))
    assert [b.end.reason for b in t.branches] == ["select-zero-weight"] and t.warnings
    f.send(1, group(1, ofp.OFPGT_SELECT, bucket(out(2), weight=1, watch_port=2), command=MODIFY))
    t = f.trace("h1", f.packet("h1", "h4"))
    assert [b.end.reason for b in t.branches] == ["select-no-live-bucket"]
    f.send(1, group(1, ofp.OFPGT_SELECT, P.OFPBucket(weight=1), command=MODIFY))  # actions=None
    assert [b.end.reason for b in f.trace("h1", f.packet("h1", "h4")).branches] == ["no-output"]


def test_fast_failover_uses_first_live_bucket() -> None:
    f = FakeFabric(diamond())
    f.send(1, group(2, ofp.OFPGT_FF, bucket(out(2), watch_port=2), bucket(out(3), watch_port=3)))
    f.send(1, flow({}, apply(P.OFPActionGroup(2))))
    for dpid in (2, 3):
        f.send(dpid, flow({}, apply(out(2))))
    f.send(4, flow({}, apply(out(1))))
    assert f.trace("h1", f.packet("h1", "h4")).paths == [["s1", "s2", "s4"]]
    f.set_port(2, 1, False)  # the far end's port going down kills the link too
    t = f.trace("h1", f.packet("h1", "h4"))
    assert t.paths == [["s1", "s3", "s4"]] and t.branches[0].hops[0].groups == ((2, 1),)
    f.set_link("s1", "s3", False)
    t = f.trace("h1", f.packet("h1", "h4"))
    assert (t.branches[0].end.kind, t.branches[0].end.reason) == ("drop", "ff-no-live-bucket")
    f.set_port(2, 1, True)
    assert f.trace("h1", f.packet("h1", "h4")).ok_unicast("h4")
    with pytest.raises(OFError, match="OFPGMFC_BAD_WATCH"):
        f.send(1, group(3, ofp.OFPGT_FF, bucket(out(2))))


def test_group_mod_errors(fab: FakeFabric) -> None:
    fab.send(1, group(1, ofp.OFPGT_INDIRECT, bucket(out(2))))
    with pytest.raises(OFError, match="OFPGMFC_GROUP_EXISTS"):
        fab.send(1, group(1, ofp.OFPGT_INDIRECT, bucket(out(2))))
    with pytest.raises(OFError, match="OFPGMFC_UNKNOWN_GROUP"):
        fab.send(1, group(2, ofp.OFPGT_ALL, command=ofp.OFPGC_MODIFY))
    with pytest.raises(OFError, match="OFPGMFC_INVALID_GROUP"):
        fab.send(1, group(2, ofp.OFPGT_INDIRECT, bucket(out(2)), bucket(out(3))))
    with pytest.raises(OFError, match="OFPBAC_BAD_OUT_GROUP"):
        fab.send(1, flow({}, apply(P.OFPActionGroup(2))))
    with pytest.raises(OFError, match="OFPBAC_UNSUPPORTED_ORDER"):
        fab.send(1, group(2, ofp.OFPGT_ALL, bucket(out(2), setf(eth_dst="02:00:00:00:00:09"))))
    fab.send(1, group(2, ofp.OFPGT_ALL, bucket(P.OFPActionGroup(1))))
    with pytest.raises(OFError, match="OFPGMFC_LOOP"):
        fab.send(1, group(1, ofp.OFPGT_INDIRECT, bucket(P.OFPActionGroup(2)), command=MODIFY))
    with pytest.raises(OFError, match="OFPGMFC_CHAINED_GROUP"):
        fab.send(1, group(1, ofp.OFPGT_ALL, command=ofp.OFPGC_DELETE))
    fab.send(1, group(77, ofp.OFPGT_ALL, command=ofp.OFPGC_DELETE))  # missing: no error
    assert set(fab.groups(1)) == {1, 2}


def test_group_delete_removes_flows_forwarding_to_it(fab: FakeFabric) -> None:
    fab.send(1, group(1, ofp.OFPGT_INDIRECT, bucket(out(2))))
    fab.send(1, group(2, ofp.OFPGT_INDIRECT, bucket(out(2))))
    fab.send(1, flow({"eth_dst": mac(fab, "h2")}, apply(P.OFPActionGroup(1))))
    fab.send(1, flow({"eth_dst": mac(fab, "h3")}, write(P.OFPActionGroup(1))))
    fab.send(1, flow({"eth_src": mac(fab, "h1")}, apply(P.OFPActionGroup(2))))
    fab.send(1, flow({}, apply(out(2)), priority=1))
    fab.send(1, group(1, ofp.OFPGT_ALL, command=ofp.OFPGC_DELETE))
    assert set(fab.groups(1)) == {2}
    assert [e.match for e in fab.flows(1)] == [{"eth_src": mac(fab, "h1")}, {}]
    fab.send(1, group(ofp.OFPG_ALL, ofp.OFPGT_ALL, command=ofp.OFPGC_DELETE))
    assert fab.groups(1) == {} and [e.match for e in fab.flows(1)] == [{}]


# ---- special ports, controller, loops, dead links ---------------------------------------------


def test_flood_goes_to_live_ports_except_in_port(fab: FakeFabric) -> None:
    fab.send(2, flow({}, apply(out(ofp.OFPP_FLOOD))))
    fab.send(1, flow({}, apply(out(1))))
    fab.send(3, flow({}, apply(out(1))))
    t = fab.trace("h2", fab.packet("h2", "h1", kind="arp"))
    assert t.delivered_hosts == {"h1", "h3"} and t.ok_multicast(["h1", "h3"])
    assert all(b.is_copy for b in t.branches)
    fab.set_link("s2", "s3", False)  # a dead port is not flooded to: no drop, one copy
    t = fab.trace("h2", fab.packet("h2", "h1", kind="arp"))
    assert t.ok_unicast("h1")


def test_controller_output_and_table_miss_entry_reason(fab: FakeFabric) -> None:
    fab.send(1, flow({}, apply(out(ofp.OFPP_CONTROLLER)), priority=0))
    fab.send(1, flow({"eth_type": 0x806}, apply(out(ofp.OFPP_CONTROLLER), out(2))))
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert [(b.end.kind, b.end.reason, b.end.dpid) for b in t.branches] == [
        ("controller", "no-match", 1)
    ]
    assert t.branches[0].hops[0].out_port == ofp.OFPP_CONTROLLER
    t = fab.trace("h1", fab.packet("h1", "h3", kind="arp"))
    assert [b.end.kind for b in t.branches] == ["controller", "drop"]  # s2 has no entries
    assert t.branches[0].end.reason == "action"


def test_in_port_needs_ofpp_in_port(fab: FakeFabric) -> None:
    fab.send(1, flow({"in_port": 1}, apply(out(1))))
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert t.branches[0].end.reason == "in-port" and t.warnings
    fab.send(1, flow({"in_port": 1}, apply(out(ofp.OFPP_IN_PORT))))
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert t.ok_unicast("h1")


def test_loop_between_two_switches(fab: FakeFabric) -> None:
    fab.send(1, flow({"in_port": 1}, apply(out(2))))
    fab.send(1, flow({"in_port": 2}, apply(out(ofp.OFPP_IN_PORT))))
    fab.send(2, flow({}, apply(out(ofp.OFPP_IN_PORT))))
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert [b.end.kind for b in t.branches] == ["loop"]
    assert t.paths == [["s1", "s2", "s1"]] and t.branches[0].end.switch == "s2"
    t = fab.trace("h1", fab.packet("h1", "h3"), max_hops=1)
    assert [b.end.kind for b in t.branches] == ["hop-limit"]
    report = fab.reachability([("h1", "h3")])
    assert report.looped == [("h1", "h3")] and not report.ok


def test_broadcast_storm_hits_branch_limit() -> None:
    f = FakeFabric(fat_tree(4))
    for dpid in f.switches:
        f.send(dpid, flow({}, apply(out(ofp.OFPP_FLOOD))))
    with pytest.raises(TraceLimitError):
        f.trace("h1", f.packet("h1", "h2", kind="arp"), max_branches=500)


def test_black_holes_dead_link_and_no_link(fab: FakeFabric) -> None:
    route_line(fab)
    fab.set_link("s2", "s3", False)
    t = fab.trace("h1", fab.packet("h1", "h3"))
    end = t.branches[0].end
    assert (end.kind, end.reason, end.switch) == ("drop", "dead-port", "s2")
    assert t.branches[0].hops[-1].out_port == 3
    fab.set_link("s2", "s3", True)
    assert fab.trace("h1", fab.packet("h1", "h3")).ok_unicast("h3")
    fab.send(1, flow({"eth_dst": mac(fab, "h3")}, apply(out(9)), priority=20))
    assert fab.trace("h1", fab.packet("h1", "h3")).branches[0].end.reason == "no-link"
    fab.set_link("h1", "s1", False)
    assert fab.trace("h1", fab.packet("h1", "h3")).branches[0].end.reason == "source-link-down"
    with pytest.raises(KeyError):
        fab.set_link("s1", "s3", False)
    with pytest.raises(KeyError):
        fab.set_port(1, 9, False)


def test_unsupported_features_raise(fab: FakeFabric) -> None:
    with pytest.raises(UnsupportedError):
        fab.send(1, flow({}, apply(out(ofp.OFPP_NORMAL))))
    with pytest.raises(UnsupportedError):
        fab.send(1, flow({}, apply(P.OFPActionPushMpls())))
    with pytest.raises(OFError, match="OFPBAC_BAD_OUT_PORT"):
        fab.send(1, flow({}, apply(out(ofp.OFPP_TABLE))))


# ---- PacketOut ---------------------------------------------------------------------------


def frame(src: str, dst: str, ip_src: str, ip_dst: str) -> bytes:
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(dst=dst, src=src, ethertype=0x0800))
    pkt.add_protocol(ipv4.ipv4(src=ip_src, dst=ip_dst, proto=6))
    pkt.add_protocol(tcp.tcp(src_port=1234, dst_port=80))
    pkt.serialize()
    return bytes(pkt.data)


def test_packet_out_is_recorded_and_table_output_runs_the_pipeline(fab: FakeFabric) -> None:
    route_line(fab)
    data = frame(mac(fab, "h1"), mac(fab, "h3"), "10.0.0.1", "10.0.0.3")
    msg = P.OFPPacketOut(None, ofp.OFP_NO_BUFFER, ofp.OFPP_CONTROLLER, [out(ofp.OFPP_TABLE)], data)
    fab.send(1, msg)
    assert fab.packet_outs(1) == [msg]
    t = fab.trace_packet_out(1, msg)
    assert t.ok_unicast("h3"), t
    assert t.branches[0].hops[0].in_port == ofp.OFPP_CONTROLLER
    assert t.branches[0].hops[0].tables == (0,)
    assert t.packet["tcp_dst"] == 80 and t.packet["ipv4_dst"] == "10.0.0.3"
    # in_port from the message is what table 0 sees
    fab.send(1, flow({"in_port": 2}, apply(out(ofp.OFPP_CONTROLLER)), priority=50))
    msg2 = P.OFPPacketOut(None, ofp.OFP_NO_BUFFER, 2, [out(ofp.OFPP_TABLE)], data)
    assert fab.trace_packet_out(1, msg2).branches[0].end.kind == "controller"
    direct = P.OFPPacketOut(None, ofp.OFP_NO_BUFFER, ofp.OFPP_CONTROLLER, [out(1)], data)
    assert fab.trace_packet_out(1, direct).ok_unicast("h1")
    with pytest.raises(OFError, match="OFPBRC_BUFFER_UNKNOWN"):
        fab.send(1, P.OFPPacketOut(None, 5, ofp.OFPP_CONTROLLER, [out(1)], data))


# ---- reachability on a fat-tree ---------------------------------------------------------------


def shortest_path_rules(f: FakeFabric, ecmp: bool) -> None:
    """Per switch and host: an IPv4 rule to the next hop of the shortest path(s); with ``ecmp``
    a SELECT group over every next hop on some shortest path, buckets watching their port."""
    g = f.graph
    for dpid, sw in f.switches.items():
        name = sw.name
        for index, host in enumerate(f.hosts(), start=1):
            if ecmp:
                paths = list(nx.all_shortest_paths(g, name, host))
            else:
                paths = [nx.shortest_path(g, name, host)]
            hops = sorted({p[1] for p in paths})
            ports = [next(iter(g.get_edge_data(name, n).values()))["ports"][name] for n in hops]
            match = {**IPV4, "ipv4_dst": g.nodes[host]["ip"]}
            if len(ports) == 1:
                f.send(dpid, flow(match, apply(out(ports[0]))))
                continue
            buckets = [bucket(out(p), weight=1, watch_port=p) for p in ports]
            f.send(dpid, group(index, ofp.OFPGT_SELECT, *buckets))
            f.send(dpid, flow(match, apply(P.OFPActionGroup(index))))


def test_reachability_fat_tree_shortest_paths() -> None:
    f = FakeFabric(fat_tree(4))
    shortest_path_rules(f, ecmp=False)
    report = f.reachability()
    assert report.ok and len(report.delivered) == 16 * 15, report
    f.set_link("e0_0", "a0_0", False)
    report = f.reachability()
    assert not report.ok and report.dropped and not report.looped
    assert set(report.failures) == set(report.dropped)
    assert "dropped" in report.render()
    # a wrong rule shows up as misdelivery
    f.set_link("e0_0", "a0_0", True)
    e = f.dpid_of("e0_0")
    f.send(e, flow({**IPV4, "ipv4_dst": f.graph.nodes["h2"]["ip"]}, apply(out(1)), priority=20))
    report = f.reachability([("h3", "h2"), ("h1", "h4")])
    assert report.misdelivered == [("h3", "h2")] and report.delivered == [("h1", "h4")]


def test_reachability_fat_tree_ecmp_alternatives_and_failover() -> None:
    f = FakeFabric(fat_tree(4))
    shortest_path_rules(f, ecmp=True)
    t = f.trace("h1", f.packet("h1", "h16"))
    assert len(t.branches) == 4 and t.ok_unicast("h16")  # 2 aggs x 2 cores
    assert len({tuple(p) for p in t.paths}) == 4
    assert f.reachability().ok
    f.set_link("a0_0", "c1", False)  # watched buckets route around a dead core link
    t = f.trace("h1", f.packet("h1", "h16"))
    assert len(t.branches) == 3 and all("c1" not in p for p in t.paths)
    assert t.ok_unicast("h16")
    # ... but c1 itself still forwards pod-0 traffic into the dead link: remote black holes
    report = f.reachability()
    pod0 = {"h1", "h2", "h3", "h4"}
    assert report.dropped and not report.misdelivered and not report.looped
    assert {(s in pod0, d in pod0) for s, d in report.dropped} == {(False, True)}
    assert len(report.dropped) == 12 * 4 == len(report.failures)
    bad = report.traces[("h5", "h1")]
    assert [b.end.reason for b in bad.by_kind("drop")] == ["dead-port"]
    assert bad.by_kind("drop")[0].path[-1] == "c1"
