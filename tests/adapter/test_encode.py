"""Every rule type encodes to an OpenFlow 1.3 message that Ryu serializes and that Open
vSwitch's own parser (``ovs-ofctl ofp-parse``) reads back as intended."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from controller import responder
from controller.addressing import pmac
from controller.compiler import base_plan, delivery_plan, route_plan
from controller.model import (
    OFPP_CONTROLLER,
    OFPP_IN_PORT,
    OFPP_TABLE,
    ArpFrame,
    Bucket,
    ClearSwitch,
    CookieKind,
    FlowMod,
    FlowRule,
    GroupAction,
    GroupMod,
    GroupRule,
    GroupType,
    LldpFrame,
    Match,
    Message,
    MeterMod,
    MeterRule,
    Op,
    Output,
    PacketOut,
    PopVlan,
    PushVlan,
    RawFrame,
    SetField,
    SetQueue,
    StatsKind,
    StatsRequest,
    SwitchRules,
    make_cookie,
)
from controller.ofp import encode, frames
from controller.ofp.compat import ofp, parser
from controller.routing import compute_routes
from controller.rulestore import diff
from controller.topology import Host

OVS_OFCTL = shutil.which("ovs-ofctl")
pytestmark = pytest.mark.skipif(OVS_OFCTL is None, reason="ovs-ofctl missing: run `make setup`")


class StubDatapath:
    """Just enough of a Ryu Datapath for ``msg.serialize()``."""

    ofproto = ofp
    ofproto_parser = parser
    id = 1


def wire(msg: Message) -> bytes:
    out = b""
    for m in encode.encode(StubDatapath(), msg):
        m.xid = 7
        m.serialize()
        out += bytes(m.buf)
    return out


def ovs_parse(data: bytes, tmp_path: Path) -> str:
    path = tmp_path / "msgs.bin"
    path.write_bytes(data)
    res = subprocess.run(
        [str(OVS_OFCTL), "ofp-parse", str(path)], capture_output=True, text=True, check=True
    )
    assert "error" not in res.stdout.lower() and not res.stderr, res.stdout + res.stderr
    return res.stdout


COOKIE = make_cookie(CookieKind.ROUTE, 3)
# what a flow-stats entry carries of a rule
ENTRY_FIELDS = (
    "table_id",
    "priority",
    "match",
    "instructions",
    "cookie",
    "idle_timeout",
    "hard_timeout",
)
RULE = FlowRule(
    4,
    100,
    Match.of(eth_dst="02:00:00:00:00:01", eth_type=0x0800, metadata=(1, 1)),
    (SetField("ip_dscp", 26), SetQueue(2), GroupAction(5), Output(3)),
    meter=9,
    cookie=COOKIE,
)
GOTO = FlowRule(0, 500, Match.of(in_port=3), goto=3, write_metadata=(1, 1), cookie=COOKIE)
CASES: list[tuple[Message, list[str]]] = [
    (
        FlowMod(Op.ADD, RULE),
        [
            "ADD table:4 priority=100",
            "metadata=0x1/0x1",
            "dl_dst=02:00:00:00:00:01",
            "cookie:0x4c4f020000000003",
            "meter:9",
            "set_field:26->ip_dscp",
            "set_queue:2",
            "group:5",
            "output:3",
        ],
    ),
    (FlowMod(Op.MODIFY, RULE), ["MOD_STRICT table:4 priority=100"]),
    (FlowMod(Op.DELETE, RULE), ["DEL_STRICT table:4 priority=100", "dl_dst=02:00:00:00:00:01"]),
    (FlowMod(Op.ADD, GOTO), ["in_port=3", "write_metadata:0x1/0x1", "goto_table:3"]),
    (
        FlowMod(Op.ADD, FlowRule(0, 1000, Match.of(eth_type=0x88CC), (Output(OFPP_CONTROLLER),))),
        ["dl_type=0x88cc", "CONTROLLER:65535"],
    ),
    (
        FlowMod(
            Op.ADD,
            FlowRule(
                4, 10, Match.of(ipv4_dst=("10.1.0.0", "255.255.0.0"), eth_type=0x800), (Output(1),)
            ),
        ),
        ["nw_dst=10.1.0.0/16"],
    ),
    (
        GroupMod(
            Op.ADD,
            GroupRule(
                5, GroupType.SELECT, (Bucket((Output(3),), 2, 3), Bucket((Output(4),), 1, 4))
            ),
        ),
        [
            "ADD group_id=5,type=select",
            "weight:2,watch_port:3,actions=output:3",
            "watch_port:4,actions=output:4",
        ],
    ),
    (
        GroupMod(Op.MODIFY, GroupRule(6, GroupType.FAST_FAILOVER, (Bucket((Output(1),), 0, 1),))),
        ["MOD group_id=6,type=ff", "watch_port:1"],
    ),
    (
        GroupMod(Op.ADD, GroupRule(7, GroupType.ALL, (Bucket((Output(1),)), Bucket((Output(2),))))),
        ["group_id=7,type=all"],
    ),
    (
        GroupMod(Op.ADD, GroupRule(8, GroupType.INDIRECT, (Bucket((Output(1),)),))),
        ["group_id=8,type=indirect"],
    ),
    (GroupMod(Op.DELETE, GroupRule(5, GroupType.SELECT, ())), ["DEL group_id=5"]),
    (
        MeterMod(Op.ADD, MeterRule(9, 5000, 500)),
        ["ADD meter=9 kbps burst", "type=drop rate=5000 burst_size=500"],
    ),
    (MeterMod(Op.MODIFY, MeterRule(9, 6000)), ["MOD meter=9 kbps", "rate=6000"]),
    (MeterMod(Op.DELETE, MeterRule(9, 6000)), ["DEL meter=9"]),
    (
        PacketOut(OFPP_CONTROLLER, (Output(2),), LldpFrame(1, 2)),
        ["in_port=CONTROLLER actions=output:2", "dl_type=0x88cc"],
    ),
    (
        PacketOut(
            OFPP_CONTROLLER,
            (Output(1), Output(2)),
            ArpFrame(
                1,
                "0e:00:4c:4f:4f:4d",
                "ff:ff:ff:ff:ff:ff",
                "0e:00:4c:4f:4f:4d",
                "0.0.0.0",
                "00:00:00:00:00:00",
                "10.0.0.2",
            ),
        ),
        ["actions=output:1,output:2", "arp", "arp_tpa=10.0.0.2"],
    ),
    (
        PacketOut(3, (Output(OFPP_TABLE),), RawFrame(frames.lldp_bytes(LldpFrame(5, 6)))),
        ["in_port=3 actions=TABLE"],
    ),
    (
        ClearSwitch(),
        ["DEL table:255", "DEL group_id=4294967292", "DEL meter=all", "OFPT_BARRIER_REQUEST"],
    ),
    (
        GroupMod(
            Op.ADD,
            GroupRule(
                0x40000003,
                GroupType.FAST_FAILOVER,
                (
                    Bucket((Output(3),), 0, 3),
                    Bucket(
                        (PushVlan(), SetField("vlan_vid", 0x1000 | 7), Output(OFPP_IN_PORT)), 0, 4
                    ),
                ),
            ),
        ),
        [
            "type=ff",
            "watch_port:3,actions=output:3",
            "watch_port:4,actions=push_vlan:0x8100,set_field:4103->vlan_vid,IN_PORT",
        ],
    ),
    (
        GroupMod(
            Op.ADD,
            GroupRule(
                9,
                GroupType.SELECT,
                (Bucket((GroupAction(0x40000003),), 1, watch_group=0x40000003),),
            ),
        ),
        ["type=select", "watch_group:1073741827,actions=group:1073741827"],
    ),
    (
        FlowMod(
            Op.ADD,
            FlowRule(
                0, 800, Match.of(vlan_vid=0x1000 | 7), (PopVlan(),), goto=2, write_metadata=(1, 1)
            ),
        ),
        ["dl_vlan=7", "pop_vlan", "goto_table:2"],
    ),
    (StatsRequest(StatsKind.FLOW, sync=True), ["OFPST_FLOW request"]),
    (StatsRequest(StatsKind.GROUP_DESC, sync=True), ["OFPST_GROUP_DESC request"]),
    (StatsRequest(StatsKind.METER_CONFIG, sync=True), ["OFPST_METER_CONFIG request"]),
    (StatsRequest(StatsKind.PORT), ["OFPST_PORT request"]),
    (StatsRequest(StatsKind.GROUP), ["OFPST_GROUP request"]),
]


@pytest.mark.parametrize(
    ("msg", "expected"), CASES, ids=[f"{type(m).__name__}-{i}" for i, (m, _) in enumerate(CASES)]
)
def test_message_encodes_and_ovs_reads_it_back(
    msg: Message, expected: list[str], tmp_path: Path
) -> None:
    text = ovs_parse(wire(msg), tmp_path)
    for piece in expected:
        assert piece in text, f"{piece!r} not in:\n{text}"


def test_flow_mod_round_trips_through_ryus_parser() -> None:
    (m,) = encode.encode(StubDatapath(), FlowMod(Op.ADD, RULE))
    m.xid = 1
    m.serialize()
    back: Any = parser.OFPFlowMod.parser(
        StubDatapath(), m.version, m.msg_type, m.msg_len, m.xid, bytes(m.buf)
    )
    assert back.priority == 100 and back.table_id == 4 and back.cookie == COOKIE
    assert back.match["eth_dst"] == "02:00:00:00:00:01" and back.match["metadata"] == (1, 1)
    kinds = [type(i).__name__ for i in back.instructions]
    assert kinds == ["OFPInstructionMeter", "OFPInstructionActions"]


def test_compiled_rules_of_a_whole_switch_parse(tmp_path: Path) -> None:
    hosts = [Host(f"02:00:00:00:00:0{i}", f"10.0.0.{i}", 1, i, 0.0) for i in (1, 2)]
    g = nx.MultiDiGraph()
    for port, peer in ((3, 5), (4, 6)):
        g.add_edge(1, peer, key=port, dst_port=1)
        g.add_edge(peer, 1, key=1, dst_port=port)
        g.add_edge(peer, 2, key=2, dst_port=port)
        g.add_edge(2, peer, key=port, dst_port=2)
    routes = compute_routes(g, [1, 2])
    delivery = delivery_plan(1, [(h, pmac(0, 1, i)) for i, h in enumerate(hosts)])[1]
    want = SwitchRules()
    for plan in (base_plan(1, [3, 4]), route_plan(1, routes, [1, 2], True), delivery):
        want.flows.update(plan.flows)
        want.groups.update(plan.groups)
    msgs = diff(SwitchRules(), want)
    text = ovs_parse(b"".join(wire(m) for m in msgs), tmp_path)
    assert text.count("OFPT_FLOW_MOD") == len(want.flows) and text.count("OFPT_GROUP_MOD") == 1


def test_frames_decode_what_they_encode_and_reject_garbage() -> None:
    arp = ArpFrame(
        2,
        "02:00:00:00:00:01",
        "02:00:00:00:00:02",
        "02:00:00:00:00:01",
        "10.0.0.1",
        "02:00:00:00:00:02",
        "10.0.0.2",
    )
    assert frames.decode(frames.arp_bytes(arp)) == arp
    assert frames.decode(frames.lldp_bytes(LldpFrame(0xABCDEF, 48))) == LldpFrame(0xABCDEF, 48)
    for junk in (b"", b"\x00" * 5, frames.lldp_bytes(LldpFrame(1, 1))[:20], b"\xff" * 64):
        assert frames.decode(junk) is None or not isinstance(frames.decode(junk), LldpFrame)


def test_what_a_switch_reports_back_decodes_to_the_rules_that_were_sent() -> None:
    """The read-back after a reconnect: FlowMod bytes parsed by Ryu the way a flow-stats
    entry is, decoded into the same FlowRule (so adoption finds them equal)."""
    from types import SimpleNamespace

    from controller.ofp import decode

    tunnel_end = FlowRule(0, 800, Match.of(vlan_vid=0x1007), (PopVlan(),), goto=2)
    for rule in (RULE, GOTO, tunnel_end):
        (m,) = encode.encode(StubDatapath(), FlowMod(Op.ADD, rule))
        m.xid = 1
        m.serialize()
        back: Any = parser.OFPFlowMod.parser(
            StubDatapath(), m.version, m.msg_type, m.msg_len, m.xid, bytes(m.buf)
        )
        entry = SimpleNamespace(
            table_id=back.table_id,
            priority=back.priority,
            match=back.match,
            instructions=back.instructions,
            cookie=back.cookie,
            idle_timeout=back.idle_timeout,
            hard_timeout=back.hard_timeout,
        )
        assert decode.flow_rule(entry) == rule


def test_lldp_from_anyone_but_this_controller_is_refused() -> None:
    """A host can send LLDP too: frames without this controller's signature (another
    key, or none) decode to nothing, so no one can make Loom believe in a link."""
    genuine = frames.lldp_bytes(LldpFrame(7, 2))
    assert frames.decode(genuine) == LldpFrame(7, 2)
    saved = frames._LLDP_KEY
    try:
        frames.set_lldp_key(b"someone else")
        forged = frames.lldp_bytes(LldpFrame(7, 2))
    finally:
        frames.set_lldp_key(saved)
    assert frames.decode(forged) is None
    tampered = genuine.replace(b"%016x" % 7, b"%016x" % 8)  # claims another switch
    assert frames.decode(tampered) is None


@pytest.mark.parametrize(("master", "role"), [(True, "role=primary"), (False, "role=secondary")])
def test_a_role_request_encodes_and_ovs_reads_it_back(
    master: bool, role: str, tmp_path: Path
) -> None:
    """A cluster's role requests carry the election's generation id as an unsigned 64-bit
    number (one past 2**63 here; all ones would mean "none" to Open vSwitch)."""
    msg = encode.role_request(StubDatapath(), master, 2**63 + 5)
    msg.xid = 3
    msg.serialize()
    text = ovs_parse(bytes(msg.buf), tmp_path)
    assert "ROLE_REQUEST" in text and role in text, text
    assert "generation_id=9223372036854775813" in text, text


def test_the_async_config_asks_for_packet_ins_and_port_status_as_a_slave(
    tmp_path: Path,
) -> None:
    msg = encode.async_config(StubDatapath())
    msg.xid = 4
    msg.serialize()
    text = ovs_parse(bytes(msg.buf), tmp_path)
    assert "SET_ASYNC" in text, text
    secondary = text[text.index("secondary:") :]
    assert "PACKET_IN: no_match action invalid_ttl" in secondary, text
    assert "PORT_STATUS: add delete modify" in secondary, text
    assert "FLOW_REMOVED: (off)" in secondary, text


def responder_rules() -> list[FlowRule]:
    host = responder.host_rules("02:00:00:00:00:01", "10.0.0.1", 3, pmac(7, 1, 3))
    return [*host, *responder.transit_rules(COOKIE)]


def test_the_switches_arp_answer_encodes_and_ovs_reads_every_step(tmp_path: Path) -> None:
    """OVS reads the responder as written: the moves that turn a request around, and the
    IN_PORT output; and each rule reads back as it was sent (a restart adopts them)."""
    rules = responder_rules()
    text = ovs_parse(b"".join(wire(FlowMod(Op.ADD, r)) for r in rules), tmp_path)
    for piece in (
        "move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[]",
        "move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[]",
        "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]",
        "move:NXM_NX_ARP_SHA[]->NXM_OF_ETH_DST[]",
        "set_field:2->arp_op",
        "set_field:0a:00:07:00:04:03->arp_sha",
        "set_field:10.0.0.1->arp_spa",
        "IN_PORT",
        "arp_op=1",
        "dl_dst=0a:00:07:00:00:00/ff:ff:ff:00:00:00",
    ):
        assert piece in text, f"{piece!r} not in:\n{text}"
    assert text.count("OFPT_FLOW_MOD") == 5
    from types import SimpleNamespace

    from controller.ofp import decode

    for rule in rules:
        (m,) = encode.encode(StubDatapath(), FlowMod(Op.ADD, rule))
        m.xid = 1
        m.serialize()
        back: Any = parser.OFPFlowMod.parser(
            StubDatapath(), m.version, m.msg_type, m.msg_len, m.xid, bytes(m.buf)
        )
        entry = SimpleNamespace(**{k: getattr(back, k) for k in ENTRY_FIELDS})
        assert decode.flow_rule(entry) == rule


def test_a_match_and_actions_built_once_serialize_alike_in_every_message() -> None:
    """Ryu's match and instruction objects are built once per distinct match and action
    list and shared by every message carrying them: each message still serializes to
    the bytes a freshly built one would, however often and in whatever order."""
    other = FlowRule(
        4, 90, Match.of(eth_dst=("0a:00:00:01:00:00", "ff:00:00:ff:00:00")),
        (Output(7),), cookie=COOKIE,
    )  # fmt: skip
    fresh = {r: wire(FlowMod(Op.ADD, r)) for r in (RULE, other)}
    first = encode.encode(StubDatapath(), FlowMod(Op.ADD, RULE))[0]
    again = encode.encode(StubDatapath(), FlowMod(Op.MODIFY, RULE))[0]
    assert first.match is again.match and first.instructions == again.instructions
    for rule in (other, RULE, other, RULE):
        assert wire(FlowMod(Op.ADD, rule)) == fresh[rule]
    encode.match.cache_clear()
    assert wire(FlowMod(Op.ADD, RULE)) == fresh[RULE]


def test_port_counters_decode_with_the_switch_clock() -> None:
    """A port-stats reply as Ryu parses it off the wire: the port's duration becomes its
    uptime (rates are taken over it); a switch that does not keep it gives none."""
    import struct

    from ryu.ofproto import ofproto_v1_3 as ofp13

    from controller.ofp import decode

    def reply(sec: int, nsec: int) -> Any:
        fields = (3, 5, 6, 700, 800, 0, 1, 0, 0, 0, 0, 0, 0, sec, nsec)
        wire = struct.pack(ofp13.OFP_PORT_STATS_PACK_STR, *fields)
        return parser.OFPPortStats.parser(wire, 0)

    (kept,) = decode.port_stats([reply(12, 250_000_000)])
    assert (kept.port_no, kept.tx_bytes, kept.tx_dropped, kept.uptime) == (3, 800, 1, 12.25)
    (unknown,) = decode.port_stats([reply(0xFFFFFFFF, 0xFFFFFFFF)])
    assert unknown.uptime is None
