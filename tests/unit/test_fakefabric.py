"""The fake fabric itself: hand-built Ryu OpenFlow 1.3 messages on small graphs, checked
against what the OpenFlow 1.3.5 spec says a switch does with them."""

from __future__ import annotations

import random
from typing import Any

import pytest
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as P

from tests.fakefabric import FakeFabric, OFError
from tests.fakefabric.builders import (
    IPV4,
    apply,
    bucket,
    clear,
    delete,
    flow,
    group,
    line,
    mac,
    meter,
    modify,
    out,
    route_line,
    setf,
    write,
)
from tests.fakefabric.fields import normalize_packet, packet_matches


@pytest.fixture
def fab() -> FakeFabric:
    return FakeFabric(line())


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
