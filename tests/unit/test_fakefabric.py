"""The fake fabric itself: hand-built Ryu OpenFlow 1.3 messages on small graphs, checked
against what the OpenFlow 1.3.5 spec says a switch does with them."""

from __future__ import annotations

import random
from typing import Any

import networkx as nx
import pytest
from ryu.lib.packet import ethernet, ipv4, packet, tcp
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as P

from tests.fakefabric import FakeFabric, OFError, TraceLimitError, UnsupportedError
from tests.fakefabric.fields import normalize_packet, packet_matches
from topologies.fat_tree import fat_tree
from topologies.graph import add_host, add_link, add_switch, new_graph

# ---- message helpers ---------------------------------------------------------------------


def out(port: int) -> Any:
    return P.OFPActionOutput(port)


def apply(*actions: Any) -> Any:
    return P.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, list(actions))


def write(*actions: Any) -> Any:
    return P.OFPInstructionActions(ofp.OFPIT_WRITE_ACTIONS, list(actions))


def clear() -> Any:
    return P.OFPInstructionActions(ofp.OFPIT_CLEAR_ACTIONS, [])


def setf(**kw: Any) -> Any:
    return P.OFPActionSetField(**kw)


def flow(match: dict[str, Any] | None = None, *inst: Any, **kw: Any) -> Any:
    kw.setdefault("priority", 10)
    kw.setdefault("table_id", 0)
    return P.OFPFlowMod(None, match=P.OFPMatch(**(match or {})), instructions=list(inst), **kw)


def delete(match: dict[str, Any] | None = None, strict: bool = False, **kw: Any) -> Any:
    kw.setdefault("out_port", ofp.OFPP_ANY)
    kw.setdefault("out_group", ofp.OFPG_ANY)
    kw["command"] = ofp.OFPFC_DELETE_STRICT if strict else ofp.OFPFC_DELETE
    return flow(match, **kw)


def modify(match: dict[str, Any] | None, *inst: Any, strict: bool = False, **kw: Any) -> Any:
    kw["command"] = ofp.OFPFC_MODIFY_STRICT if strict else ofp.OFPFC_MODIFY
    return flow(match, *inst, **kw)


def group(gid: int, gtype: int, *buckets: Any, command: int = ofp.OFPGC_ADD) -> Any:
    return P.OFPGroupMod(None, command, gtype, gid, list(buckets))


def bucket(*actions: Any, weight: int = 0, watch_port: int = ofp.OFPP_ANY) -> Any:
    return P.OFPBucket(weight=weight, watch_port=watch_port, actions=list(actions))


def meter(mid: int, command: int = ofp.OFPMC_ADD) -> Any:
    return P.OFPMeterMod(None, command, ofp.OFPMF_KBPS, mid, [P.OFPMeterBandDrop(1000, 10)])


IPV4 = {"eth_type": 0x0800}
MODIFY = ofp.OFPGC_MODIFY

# ---- graphs ------------------------------------------------------------------------------


def line() -> nx.MultiGraph:
    """h1 -1- s1 -2/2- s2 -3/2- s3 -1- h3, and h2 on s2 port 1."""
    g = new_graph("line", "custom")
    for i in (1, 2, 3):
        add_switch(g, f"s{i}", i, "edge")
    add_host(g, "h1", "s1", "10.0.0.1", 10, switch_port=1)
    add_host(g, "h2", "s2", "10.0.0.2", 10, switch_port=1)
    add_host(g, "h3", "s3", "10.0.0.3", 10, switch_port=1)
    add_link(g, "s1", "s2", 10, port_a=2, port_b=2)
    add_link(g, "s2", "s3", 10, port_a=3, port_b=2)
    return g


def diamond() -> nx.MultiGraph:
    """h1 on s1; s1 port 2 -> s2, port 3 -> s3; s2 and s3 port 2 -> s4; h4 on s4."""
    g = new_graph("diamond", "custom")
    for i in (1, 2, 3, 4):
        add_switch(g, f"s{i}", i, "edge")
    add_host(g, "h1", "s1", "10.0.0.1", 10, switch_port=1)
    add_host(g, "h4", "s4", "10.0.0.4", 10, switch_port=1)
    add_link(g, "s1", "s2", 10, port_a=2, port_b=1)
    add_link(g, "s1", "s3", 10, port_a=3, port_b=1)
    add_link(g, "s2", "s4", 10, port_a=2, port_b=2)
    add_link(g, "s3", "s4", 10, port_a=2, port_b=3)
    return g


@pytest.fixture
def fab() -> FakeFabric:
    return FakeFabric(line())


def mac(f: FakeFabric, host: str) -> str:
    return str(f.graph.nodes[host]["mac"])


def route_line(f: FakeFabric) -> None:
    """Plain eth_dst forwarding on the line for h1, h2, h3."""
    ports = {1: {"h1": 1, "h2": 2, "h3": 2}, 2: {"h1": 2, "h2": 1, "h3": 3}}
    ports[3] = {"h1": 2, "h2": 2, "h3": 1}
    for dpid, table in ports.items():
        for host, port in table.items():
            f.send(dpid, flow({"eth_dst": mac(f, host)}, apply(out(port))))


# ---- Ryu parser and basics ---------------------------------------------------------------


def test_ryu_messages_build_without_datapath_and_normalise_matches() -> None:
    m = P.OFPMatch(eth_dst=("02:00:00:00:00:FF", "ff:ff:ff:00:00:00"), ipv4_dst="10.1.2.3/16")
    assert m["eth_dst"] == ("02:00:00:00:00:00", "ff:ff:ff:00:00:00")  # value pre-masked
    assert m["ipv4_dst"] == ("10.1.0.0", "255.255.0.0")  # prefix turned into a dotted mask
    fm = flow({"eth_dst": "02:00:00:00:00:0A"}, apply(out(1)))
    assert fm.match["eth_dst"] == "02:00:00:00:00:0a" and fm.out_port == 0 and fm.out_group == 0


def test_table_miss_drops_and_names_switch_and_table(fab: FakeFabric) -> None:
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert [b.end.kind for b in t.branches] == ["drop"]
    end = t.branches[0].end
    assert (end.reason, end.dpid, end.switch, end.table_id) == ("table-miss", 1, "s1", 0)
    assert not t.ok_unicast("h3") and "table-miss" in t.render()


def test_line_forwarding_delivers_and_records_hops(fab: FakeFabric) -> None:
    route_line(fab)
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert t.ok_unicast("h3"), t
    assert t.paths == [["s1", "s2", "s3"]]
    hops = t.branches[0].hops
    assert [(h.dpid, h.in_port, h.out_port) for h in hops] == [(1, 1, 2), (2, 2, 3), (3, 2, 1)]
    assert t.delivered_hosts == {"h3"}
    assert not t.ok_unicast("h2")


def test_unknown_message_and_unknown_dpid_raise(fab: FakeFabric) -> None:
    with pytest.raises(TypeError):
        fab.send(1, P.OFPSetConfig(None, 0, 128))
    with pytest.raises(KeyError):
        fab.send(99, flow())
    fab.send(1, P.OFPBarrierRequest(None))
    assert len(fab.messages(1)) == 1


# ---- matching ----------------------------------------------------------------------------


def test_highest_priority_wins(fab: FakeFabric) -> None:
    fab.send(1, flow({}, apply(out(2)), priority=5))
    fab.send(1, flow({"eth_src": mac(fab, "h1")}, apply(out(ofp.OFPP_CONTROLLER)), priority=7))
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert t.branches[0].end.kind == "controller"
    fab.send(1, flow({}, apply(out(ofp.OFPP_LOCAL)), priority=9))
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert t.branches[0].end.kind == "local" and t.branches[0].hops[0].cookies == (0,)


def test_masks_on_mac_ipv4_and_metadata(fab: FakeFabric) -> None:
    fab.send(1, flow({**IPV4, "ipv4_dst": ("10.0.0.0", "255.255.255.252")}, apply(out(2))))
    fab.send(1, flow({"eth_dst": ("02:00:00:00:00:00", "ff:ff:ff:00:00:00")}, apply(out(3))))
    assert fab.trace("h1", fab.packet("h1", "h3")).branches[0].hops[0].out_port == 2
    far = fab.packet("h1", "h3", ipv4_dst="10.0.0.9")  # outside the /30: falls to the MAC rule
    assert fab.trace("h1", far).branches[0].hops[0].out_port == 3
    other = fab.packet("h1", "h3", ipv4_dst="10.0.0.9", eth_dst="04:00:00:00:00:01")
    assert fab.trace("h1", other).branches[0].end.reason == "table-miss"
    # metadata: written with a mask, matched with a mask
    fab.send(2, flow({}, P.OFPInstructionWriteMetadata(0xAB05, 0xFF), P.OFPInstructionGotoTable(1)))
    fab.send(2, flow({"metadata": (0x5, 0xFFFF)}, apply(out(3)), table_id=1))  # 0xAB gone
    fab.send(3, flow({}, apply(out(1))))
    t = fab.trace_from(2, 1, fab.packet("h2", "h3"))
    assert t.ok_unicast("h3") and t.branches[0].hops[0].tables == (0, 1), t


def test_match_prerequisites_rejected_on_install_and_enforced_on_packets(fab: FakeFabric) -> None:
    with pytest.raises(OFError) as err:
        fab.send(1, flow({"ipv4_dst": "10.0.0.3"}, apply(out(2))))
    assert err.value.code_name == "OFPBMC_BAD_PREREQ" and err.value.dpid == 1
    with pytest.raises(OFError, match="OFPBMC_BAD_PREREQ"):
        fab.send(1, flow({**IPV4, "tcp_dst": 80}, apply(out(2))))
    with pytest.raises(OFError, match="OFPBMC_BAD_MASK"):
        fab.send(1, flow({"eth_type": (0x800, 0xFF00)}, apply(out(2))))
    assert fab.flows(1) == [] and len(fab.errors) == 3
    fab.send(1, flow({**IPV4, "ipv4_dst": "10.0.0.3"}, apply(out(2)), priority=20))
    fab.send(1, flow({}, apply(out(ofp.OFPP_CONTROLLER)), priority=0))
    arp = fab.packet("h1", "h3", kind="arp")  # arp_tpa is 10.0.0.3, but it is not IPv4
    assert fab.trace("h1", arp).branches[0].end.kind == "controller"
    assert fab.trace("h1", fab.packet("h1", "h3")).branches[0].hops[0].out_port == 2
    with pytest.raises(ValueError, match="ip_proto"):
        fab.trace("h1", {"eth_src": mac(fab, "h1"), "eth_type": 0x800, "tcp_dst": 1})


def test_vlan_vid_none_and_present_matching(fab: FakeFabric) -> None:
    fab.send(1, flow({"vlan_vid": ofp.OFPVID_NONE}, apply(out(2))))
    fab.send(1, flow({"vlan_vid": (0x1000, 0x1000)}, apply(out(3))))
    with pytest.raises(OFError, match="OFPBMC_BAD_VALUE"):
        fab.send(1, flow({"vlan_vid": 5}, apply(out(2))))
    assert fab.trace("h1", fab.packet("h1", "h3")).branches[0].hops[0].out_port == 2
    tagged = fab.packet("h1", "h3", vlan_vid=0x1000 | 7, vlan_pcp=0)
    assert fab.trace("h1", tagged).branches[0].hops[0].out_port == 3
    with pytest.raises(ValueError, match="OFPVID_PRESENT"):
        fab.packet("h1", "h3", vlan_vid=7, vlan_pcp=0)


def test_old_style_match_api_is_rejected(fab: FakeFabric) -> None:
    m = P.OFPMatch()
    m.set_in_port(1)  # Ryu's pre-OXM API leaves OFPMatch.items() empty: refuse, not match-all
    with pytest.raises(OFError, match="OFPBMC_BAD_FIELD"):
        fab.send(1, P.OFPFlowMod(None, match=m, instructions=[apply(out(2))]))


def test_indexed_lookup_agrees_with_plain_matching() -> None:
    rng = random.Random(7)
    f = FakeFabric(line())
    for _ in range(300):
        match: dict[str, Any] = {}
        if rng.random() < 0.6:
            match.update(IPV4)
            if rng.random() < 0.7:
                net = f"10.{rng.randrange(2)}.{rng.randrange(2)}.{rng.randrange(4)}"
                match["ipv4_dst"] = f"{net}/{rng.choice([8, 16, 24, 30, 32])}"
        if rng.random() < 0.3:
            match["in_port"] = rng.randrange(1, 4)
        if rng.random() < 0.3:
            mask = rng.choice(["ff:ff:ff:ff:ff:ff", "ff:ff:ff:ff:ff:fc"])
            match["eth_dst"] = (f"02:00:00:00:00:{rng.randrange(4):02x}", mask)
        if rng.random() < 0.2:
            match["vlan_vid"] = rng.choice([0, (0x1000, 0x1000), 0x1001])
        if rng.random() < 0.2:
            match["metadata"] = (rng.randrange(4), 3)
        f.send(1, flow(match, apply(out(2)), priority=rng.randrange(4)))
    sw, entries = f.switches[1], f.flows(1, 0)
    assert len(entries) > 100
    ties = 0
    for _ in range(400):
        pkt: dict[str, object] = {"eth_dst": f"02:00:00:00:00:{rng.randrange(4):02x}"}
        pkt["eth_type"] = rng.choice([0x800, 0x806])
        if pkt["eth_type"] == 0x800:
            pkt["ipv4_dst"] = f"10.{rng.randrange(2)}.{rng.randrange(2)}.{rng.randrange(4)}"
        if rng.random() < 0.5:
            pkt.update(vlan_vid=0x1000 | rng.randrange(3), vlan_pcp=0)
        fields, in_port, md = normalize_packet(pkt), rng.randrange(1, 4), rng.randrange(8)
        hits = [e for e in entries if packet_matches(e.key, fields, in_port, md)]
        top = max((e.priority for e in hits), default=None)
        want = sorted((e for e in hits if e.priority == top), key=lambda e: e.seq)
        assert sw.lookup(0, fields, in_port, md) == want
        ties += len(want) > 1
    assert ties  # the comparison covered undefined ties too


def test_equal_priority_overlap_is_flagged_not_silently_resolved(fab: FakeFabric) -> None:
    fab.send(1, flow({"eth_src": mac(fab, "h1")}, apply(out(2))))
    fab.send(1, flow({"eth_dst": mac(fab, "h3")}, apply(out(3))))
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert len(t.warnings) == 1 and "undefined" in t.warnings[0]
    assert t.branches[0].hops[0].out_port == 2  # the oldest, but flagged
    assert not t.ok_unicast("h3")


# ---- pipeline: goto, metadata, apply/write/clear ----------------------------------------------


def test_goto_must_go_forward_and_within_tables() -> None:
    f = FakeFabric(line(), n_tables=4)
    with pytest.raises(OFError, match="OFPBIC_BAD_TABLE_ID"):
        f.send(1, flow({}, P.OFPInstructionGotoTable(1), table_id=2))
    with pytest.raises(OFError, match="OFPBIC_BAD_TABLE_ID"):
        f.send(1, flow({}, P.OFPInstructionGotoTable(4)))
    with pytest.raises(OFError, match="OFPFMFC_BAD_TABLE_ID"):
        f.send(1, flow({}, apply(out(2)), table_id=4))
    f.send(1, flow({}, P.OFPInstructionGotoTable(3)))
    t = f.trace("h1", f.packet("h1", "h3"))
    assert (t.branches[0].end.reason, t.branches[0].end.table_id) == ("table-miss", 3)


def test_apply_outputs_a_copy_then_action_set_runs_in_spec_order(fab: FakeFabric) -> None:
    h2, h3 = mac(fab, "h2"), mac(fab, "h3")
    fab.send(
        2,
        flow(
            {},
            apply(setf(eth_dst=h2), out(1), setf(eth_dst="02:00:00:00:00:99")),
            # written output first, set_field second: the set still runs before the output
            write(out(3), setf(eth_dst=h3), P.OFPActionSetQueue(4)),
        ),
    )
    fab.send(3, flow({}, apply(out(1))))
    t = fab.trace_from(2, 2, fab.packet("h1", "h3", eth_dst="02:00:00:00:00:77"))
    assert sorted(b.end.host or "" for b in t.branches) == ["h2", "h3"]
    by_host = {b.end.host: b for b in t.branches}
    assert by_host["h2"].end.packet["eth_dst"] == h2  # copy taken at output time
    assert by_host["h2"].hops[0].queue_id is None
    assert by_host["h3"].end.packet["eth_dst"] == h3
    assert by_host["h3"].hops[0].queue_id == 4
    assert all(b.is_copy for b in t.branches) and not t.ok_unicast("h3")
    assert t.ok_multicast(["h2", "h3"])


def test_clear_actions_empties_the_action_set(fab: FakeFabric) -> None:
    fab.send(1, flow({}, write(out(2)), P.OFPInstructionGotoTable(1)))
    fab.send(1, flow({}, clear(), table_id=1))
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert [(b.end.kind, b.end.reason) for b in t.branches] == [("drop", "no-output")]
    fab.send(1, flow({}, apply(), table_id=1))  # ADD over the identical entry: no clear now
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert t.branches[0].hops[0].out_port == 2 and t.branches[0].hops[0].tables == (0, 1)


def test_group_in_action_set_overrides_output(fab: FakeFabric) -> None:
    fab.send(1, group(1, ofp.OFPGT_INDIRECT, bucket(out(ofp.OFPP_CONTROLLER))))
    fab.send(1, flow({}, write(out(2), P.OFPActionGroup(1))))
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert [b.end.kind for b in t.branches] == ["controller"]
    assert t.branches[0].hops[0].groups == ((1, 0),)
    with pytest.raises(OFError, match="OFPBAC_TOO_MANY"):
        fab.send(1, flow({}, write(out(2), out(3)), priority=1))


def test_set_field_is_seen_by_the_next_switch(fab: FakeFabric) -> None:
    fab.send(
        1, flow({**IPV4}, apply(setf(ipv4_dst="10.0.0.2"), setf(eth_dst=mac(fab, "h2")), out(2)))
    )
    fab.send(2, flow({**IPV4, "ipv4_dst": "10.0.0.2"}, apply(out(1))))
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert t.ok_unicast("h2"), t
    assert t.branches[0].end.packet["ipv4_dst"] == "10.0.0.2"
    assert t.branches[0].hops[0].packet["eth_dst"] == mac(fab, "h2")


def test_set_field_needs_a_consistent_match(fab: FakeFabric) -> None:
    with pytest.raises(OFError, match="OFPBAC_MATCH_INCONSISTENT"):
        fab.send(1, flow({}, apply(setf(ipv4_dst="10.0.0.2"), out(2))))
    with pytest.raises(OFError, match="OFPBAC_MATCH_INCONSISTENT"):
        fab.send(1, flow({}, apply(setf(vlan_vid=0x1005), out(2))))
    with pytest.raises(OFError, match="OFPBAC_BAD_SET_ARGUMENT"):
        fab.send(1, flow({}, apply(P.OFPActionPushVlan(), setf(vlan_vid=5), out(2))))
    with pytest.raises(OFError, match="OFPBAC_BAD_SET_TYPE"):
        fab.send(1, flow({}, apply(setf(eth_type=0x806), out(2))))


def test_push_and_pop_vlan(fab: FakeFabric) -> None:
    fab.send(1, flow({}, apply(P.OFPActionPushVlan(), setf(vlan_vid=0x1000 | 10), out(2))))
    fab.send(2, flow({"vlan_vid": 0x1000 | 10}, apply(P.OFPActionPopVlan(), out(1))))
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert t.branches[0].hops[0].packet["vlan_vid"] == 0x100A
    assert t.branches[0].hops[0].packet["vlan_pcp"] == 0
    assert t.ok_unicast("h2") and "vlan_vid" not in t.branches[0].end.packet


def test_queue_and_meter_recorded_on_the_hop(fab: FakeFabric) -> None:
    with pytest.raises(OFError, match="OFPMMFC_UNKNOWN_METER"):
        fab.send(1, flow({}, P.OFPInstructionMeter(7), apply(out(2))))
    fab.send(1, meter(7))
    with pytest.raises(OFError, match="OFPMMFC_METER_EXISTS"):
        fab.send(1, meter(7))
    fab.send(1, flow({}, P.OFPInstructionMeter(7), apply(P.OFPActionSetQueue(3), out(2))))
    fab.send(2, flow({}, apply(out(1))))
    t = fab.trace("h1", fab.packet("h1", "h3"))
    assert t.ok_unicast("h2")
    assert (t.branches[0].hops[0].meter_ids, t.branches[0].hops[0].queue_id) == ((7,), 3)
    assert (t.branches[0].hops[1].meter_ids, t.branches[0].hops[1].queue_id) == ((), None)
    fab.send(1, meter(7, ofp.OFPMC_MODIFY))
    assert set(fab.meters(1)) == {7}
    fab.send(1, meter(7, ofp.OFPMC_DELETE))  # takes the flow using it along
    assert fab.meters(1) == {} and fab.flows(1) == []
    with pytest.raises(OFError, match="OFPMMFC_UNKNOWN_METER"):
        fab.send(1, meter(7, ofp.OFPMC_MODIFY))


def test_dec_nw_ttl_expires(fab: FakeFabric) -> None:
    fab.send(1, flow(IPV4, apply(P.OFPActionDecNwTtl(), out(2))))
    fab.send(2, flow({}, apply(out(1))))
    t = fab.trace("h1", fab.packet("h1", "h2", ip_ttl=5))
    assert t.ok_unicast("h2") and t.branches[0].end.packet["ip_ttl"] == 4
    t = fab.trace("h1", fab.packet("h1", "h2", ip_ttl=1))
    assert t.branches[0].end.reason == "ttl-expired"


# ---- FlowMod commands --------------------------------------------------------------------


def test_add_replaces_identical_entry_and_keeps_counters_unless_reset(fab: FakeFabric) -> None:
    route_line(fab)
    pkt = fab.packet("h1", "h3")
    fab.trace("h1", pkt, explore_all=False)
    fab.trace("h1", pkt, explore_all=False, frame_len=100)
    entry = next(e for e in fab.flows(1) if e.match == {"eth_dst": mac(fab, "h3")})
    assert (entry.packet_count, entry.byte_count) == (2, 164)
    fab.trace("h1", pkt)  # explore_all traces do not count
    assert entry.packet_count == 2
    fab.send(1, flow({"eth_dst": mac(fab, "h3")}, apply(out(3)), cookie=5))
    new = [e for e in fab.flows(1) if e.match == {"eth_dst": mac(fab, "h3")}]
    assert len(new) == 1 and new[0].cookie == 5 and new[0].packet_count == 2
    flags = ofp.OFPFF_RESET_COUNTS
    fab.send(1, flow({"eth_dst": mac(fab, "h3")}, apply(out(2)), flags=flags))
    new = [e for e in fab.flows(1) if e.match == {"eth_dst": mac(fab, "h3")}]
    assert len(new) == 1 and new[0].packet_count == 0 and new[0].cookie == 0


def test_check_overlap(fab: FakeFabric) -> None:
    check = ofp.OFPFF_CHECK_OVERLAP
    fab.send(1, flow({**IPV4, "ipv4_dst": "10.0.0.0/24"}, apply(out(2))))
    with pytest.raises(OFError, match="OFPFMFC_OVERLAP"):
        fab.send(1, flow({"eth_src": mac(fab, "h1")}, apply(out(3)), flags=check))
    with pytest.raises(OFError, match="OFPFMFC_OVERLAP"):  # identical counts as overlapping
        fab.send(1, flow({**IPV4, "ipv4_dst": "10.0.0.0/24"}, apply(out(3)), flags=check))
    fab.send(1, flow({**IPV4, "ipv4_dst": "10.0.1.0/24"}, apply(out(3)), flags=check))
    fab.send(1, flow({"eth_type": 0x806}, apply(out(3)), flags=check))
    fab.send(1, flow({"eth_src": mac(fab, "h1")}, apply(out(3)), flags=check, priority=11))
    assert len(fab.flows(1)) == 4


def test_modify_and_modify_strict(fab: FakeFabric) -> None:
    fab.send(1, flow({**IPV4, "ipv4_dst": "10.0.0.3"}, apply(out(2)), cookie=0x11, priority=30))
    fab.send(1, flow({**IPV4, "ipv4_dst": "10.0.0.2"}, apply(out(2)), cookie=0x21, priority=20))
    fab.send(1, flow({"eth_dst": mac(fab, "h3")}, apply(out(2)), cookie=0x12))
    fab.trace("h1", fab.packet("h1", "h3"), explore_all=False)
    # non-strict, cookie-filtered: entries at least as specific as {eth_type=IPv4}, cookie 0x1?
    fab.send(1, modify(IPV4, apply(out(3)), cookie=0x10, cookie_mask=0xF0))
    ports = {e.cookie: e.program.out_ports() for e in fab.flows(1)}
    assert ports == {0x11: {3}, 0x21: {2}, 0x12: {2}}
    top = fab.flows(1)[0]
    assert (top.cookie, top.packet_count) == (0x11, 1)  # cookie and counters kept
    # strict: priority and match must both be identical
    fab.send(1, modify({**IPV4, "ipv4_dst": "10.0.0.2"}, apply(out(3)), strict=True, priority=99))
    assert {e.cookie: e.program.out_ports() for e in fab.flows(1)}[0x21] == {2}
    fab.send(1, modify({**IPV4, "ipv4_dst": "10.0.0.2"}, apply(out(3)), strict=True, priority=20))
    assert {e.cookie: e.program.out_ports() for e in fab.flows(1)}[0x21] == {3}
    fab.send(1, modify(IPV4, apply(out(2)), cookie=0x10, cookie_mask=0xF0))
    assert fab.flows(1)[0].packet_count == 1
    reset = ofp.OFPFF_RESET_COUNTS
    fab.send(1, modify(IPV4, apply(out(2)), cookie=0x10, cookie_mask=0xF0, flags=reset))
    assert fab.flows(1)[0].packet_count == 0 and fab.flows(1)[0].flags == 0  # flags kept
    # MODIFY never inserts (OpenFlow 1.2+)
    fab.send(1, modify({"eth_src": mac(fab, "h2")}, apply(out(3))))
    assert len(fab.flows(1)) == 3


def test_delete_non_strict_is_subset_semantics(fab: FakeFabric) -> None:
    fab.send(1, flow({**IPV4, "ipv4_dst": "10.0.0.3"}, apply(out(2))))
    fab.send(1, flow({**IPV4, "ipv4_dst": ("10.0.0.0", "255.255.255.0")}, apply(out(2))))
    fab.send(1, flow({"eth_dst": mac(fab, "h3")}, apply(out(2))))
    fab.send(1, flow({**IPV4, "ipv4_dst": "10.0.0.0/16"}, apply(out(2)), priority=1))
    fab.send(1, delete({**IPV4, "ipv4_dst": "10.0.0.0/24"}))  # /24 and /32 go, /16 stays
    assert [e.match for e in fab.flows(1)] == [
        {"eth_dst": mac(fab, "h3")},
        {"eth_type": 0x800, "ipv4_dst": ("10.0.0.0", "255.255.0.0")},
    ]
    fab.send(1, delete(IPV4))
    assert [e.match for e in fab.flows(1)] == [{"eth_dst": mac(fab, "h3")}]
    fab.send(1, delete({}))
    assert fab.flows(1) == []


def test_delete_strict_cookie_mask_and_all_tables(fab: FakeFabric) -> None:
    h3 = {"eth_dst": mac(fab, "h3")}
    for table, cookie, prio in ((0, 0xA1, 10), (0, 0xB1, 11), (1, 0xA2, 10), (0, 0xA3, 5)):
        fab.send(1, flow(h3, apply(out(2)), table_id=table, cookie=cookie, priority=prio))
    fab.send(1, delete({"eth_dst": mac(fab, "h3")}, strict=True, priority=5))
    assert sorted(e.cookie for e in fab.flows(1)) == [0xA1, 0xA2, 0xB1]
    fab.send(1, delete({}, table_id=ofp.OFPTT_ALL, cookie=0xA0, cookie_mask=0xF0))
    assert [(e.table_id, e.cookie) for e in fab.flows(1)] == [(0, 0xB1)]
    with pytest.raises(OFError, match="OFPFMFC_BAD_TABLE_ID"):
        fab.send(1, modify({}, apply(out(2)), table_id=ofp.OFPTT_ALL))


def test_delete_out_port_and_out_group_filters(fab: FakeFabric) -> None:
    fab.send(1, group(5, ofp.OFPGT_INDIRECT, bucket(out(3))))
    fab.send(1, flow({"eth_dst": mac(fab, "h2")}, apply(out(2))))
    fab.send(1, flow({"eth_dst": mac(fab, "h3")}, write(out(3))))
    fab.send(1, flow({"eth_src": mac(fab, "h1")}, apply(P.OFPActionGroup(5))))
    # Ryu's defaults are out_port=0, out_group=0: a filter that matches nothing
    fab.send(1, P.OFPFlowMod(None, command=ofp.OFPFC_DELETE, match=P.OFPMatch()))
    assert len(fab.flows(1)) == 3
    fab.send(1, delete({}, out_port=3))  # write-actions outputs count too
    assert [e.match for e in fab.flows(1)] == [
        {"eth_dst": mac(fab, "h2")},
        {"eth_src": mac(fab, "h1")},
    ]
    fab.send(1, delete({}, out_group=5))
    assert [e.match for e in fab.flows(1)] == [{"eth_dst": mac(fab, "h2")}]


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
