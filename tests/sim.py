"""Loom's core driving the fake fabric: the whole controller minus Ryu's sockets.

``LoomSim`` connects every switch of a topology graph to a ``Conductor`` core, encodes what
the core returns with ``controller.ofp.encode`` into real Ryu messages, applies them to
a ``FakeFabric`` and carries packets both ways: PacketOuts are traced across the fake
switches, and whatever a switch sends to the controller comes back as a packet-in.
Hosts answer the controller's ARP probes like Linux does. Nothing here decides routes:
tests assert on what the fake fabric's traces show.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import networkx as nx

from controller.conductor import Conductor, FabricConfig
from controller.engineer import TeConfig
from controller.model import (
    OFPP_LOCAL,
    ArpFrame,
    EthFrame,
    FlowStats,
    LldpFrame,
    Match,
    Messages,
    PacketIn,
    PortDesc,
    StatsKind,
    StatsRequest,
)
from controller.ofp import decode, encode, frames
from controller.ofp.compat import ofp, parser
from controller.view import FabricView
from tests.fakefabric import FakeFabric
from tests.fakefabric.fields import normalize_packet, packet_from_bytes
from tests.fakefabric.model import Trace
from topologies.graph import host_list, link_ends, switches


class StubDatapath:
    ofproto = ofp
    ofproto_parser = parser


def arp_fields(frame: ArpFrame) -> dict[str, object]:
    return {
        "eth_src": frame.eth_src,
        "eth_dst": frame.eth_dst,
        "eth_type": 0x0806,
        "arp_op": frame.op,
        "arp_sha": frame.sha,
        "arp_spa": frame.spa,
        "arp_tha": frame.tha,
        "arp_tpa": frame.tpa,
    }


def fields_to_arp(pkt: dict[str, Any]) -> ArpFrame:
    return ArpFrame(
        int(pkt["arp_op"]),
        str(pkt["eth_src"]),
        str(pkt["eth_dst"]),
        str(pkt["arp_sha"]),
        str(pkt["arp_spa"]),
        str(pkt["arp_tha"]),
        str(pkt["arp_tpa"]),
    )


class LoomSim:
    @property
    def view(self) -> FabricView:
        """What black-box tests read of the core (of the current one, after a restart)."""
        return FabricView(self.core)

    def __init__(self, graph: nx.MultiGraph, config: FabricConfig | None = None) -> None:
        self.graph = graph
        self.fake = FakeFabric(graph)
        self.fake.addresses = lambda mac: self.view.address_of(mac)
        # Traffic engineering copies each new flow's packets to the controller: off unless
        # a test asks for it, so routing tests see plain unicast delivery.
        self.core = Conductor(config or FabricConfig(te=TeConfig(enabled=False)))
        self.now = 0.0
        self.dp = StubDatapath()
        self.sent = 0
        self.packet_ins = 0
        self.untraceable = 0  # packet-outs whose bytes the fake fabric cannot parse
        self.sources: list[
            tuple[str, dict[str, object], int]
        ] = []  # (host, packet, bytes per tick)

    # -- driving the core ---------------------------------------------------------
    def apply(self, messages: Messages) -> None:
        """Send rules to the fake switches first, then run packet-outs (as the shim does)."""
        outs: list[tuple[int, Any]] = []
        stats: list[tuple[int, StatsRequest]] = []
        for dpid, msgs in messages.items():
            for msg in msgs:
                if isinstance(msg, StatsRequest):
                    stats.append((dpid, msg))
                    continue
                for ofmsg in encode.encode(self.dp, msg):
                    self.sent += 1
                    if isinstance(ofmsg, parser.OFPPacketOut):
                        outs.append((dpid, ofmsg))
                    elif not isinstance(ofmsg, parser.OFPBarrierRequest):
                        self._send_rule(dpid, ofmsg)
        for dpid, ofmsg in outs:
            self._run_packet_out(dpid, ofmsg)
        for dpid, req in stats:
            self._answer_stats(dpid, req)

    def read_switch(self, dpid: int) -> tuple[list, list, list]:  # type: ignore[type-arg]
        """What the fake switch holds, decoded the way the shim decodes a real dump."""
        flows = [
            decode.flow_rule(
                SimpleNamespace(
                    table_id=e.table_id,
                    priority=e.priority,
                    match=parser.OFPMatch(**e.match),
                    instructions=e.instructions,
                    cookie=e.cookie,
                    idle_timeout=e.idle_timeout,
                    hard_timeout=e.hard_timeout,
                )
            )
            for e in self.fake.flows(dpid)
        ]
        groups = [decode.group_rule(g) for g in self.fake.groups(dpid).values()]
        meters = [decode.meter_rule(m) for m in self.fake.meters(dpid).values()]
        return ([f for f in flows if f], [g for g in groups if g], [m for m in meters if m])

    def _answer_stats(self, dpid: int, req: StatsRequest) -> None:
        """Flow statistics from the fake tables' counters (ports and groups: not modelled);
        a switch's whole contents for the reads after it (re)connects."""
        if req.sync:
            if req.kind is StatsKind.FLOW:  # one answer for the three reads
                self.apply(self.core.switch_state(self.now, dpid, *self.read_switch(dpid)))
            return
        if req.kind is not StatsKind.FLOW:
            return
        entries = [
            FlowStats(
                e.table_id,
                e.priority,
                Match.of(**e.match),  # type: ignore[arg-type]
                e.cookie,
                e.packet_count,
                e.byte_count,
            )
            for e in self.fake.flows(dpid, req.table)
            if e.cookie & req.cookie_mask == req.cookie & req.cookie_mask
        ]
        self.apply(self.core.flow_stats(self.now, dpid, entries))

    def _send_rule(self, dpid: int, ofmsg: Any) -> None:
        if isinstance(ofmsg, parser.OFPGroupMod) and ofmsg.group_id == ofp.OFPG_ALL:
            while self.fake.groups(dpid):  # as a switch does: referencing groups go first
                groups = self.fake.groups(dpid)
                used = {g for entry in groups.values() for g in entry.referenced_groups()}
                for gid in [g for g in groups if g not in used]:
                    self.fake.send(dpid, parser.OFPGroupMod(None, ofp.OFPGC_DELETE, 0, gid, []))
        elif isinstance(ofmsg, parser.OFPMeterMod) and ofmsg.meter_id == ofp.OFPM_ALL:
            for mid in list(self.fake.meters(dpid)):
                self.fake.send(dpid, parser.OFPMeterMod(None, ofp.OFPMC_DELETE, 0, mid, []))
        else:
            self.fake.send(dpid, ofmsg)

    def _run_packet_out(self, dpid: int, ofmsg: Any) -> None:
        original = frames.decode(bytes(ofmsg.data))
        try:
            normalize_packet(packet_from_bytes(bytes(ofmsg.data)))
        except ValueError:  # headers the fake cannot model (stacked tags...): not traced
            self.untraceable += 1
            return
        trace = self.fake.trace_packet_out(dpid, ofmsg)
        self._handle_trace(trace, original)

    def _handle_trace(self, trace: Trace, original: Any) -> None:
        for branch in trace.branches:
            end = branch.end
            if end.kind == "controller" and branch.hops:
                hop = branch.hops[-1]
                frame = original if isinstance(original, LldpFrame) else self._frame_of(end.packet)
                self.packet_ins += 1
                cookie = hop.cookies[-1] if hop.cookies else 0
                pkt_in = PacketIn(hop.dpid, hop.in_port, frame, b"", end.table_id or 0, cookie)
                self.apply(self.core.packet_in(self.now, pkt_in))
            elif end.kind == "delivered" and end.host is not None:
                self._host_receives(end.host, end.packet)

    def _frame_of(self, pkt: dict[str, Any]) -> Any:
        if pkt.get("eth_type") == 0x0806:
            return fields_to_arp(pkt)
        proto = pkt.get("ip_proto")
        l4 = "tcp" if proto == 6 else "udp"
        return EthFrame(
            str(pkt["eth_src"]),
            str(pkt["eth_dst"]),
            int(pkt["eth_type"]),
            None,
            pkt.get("ipv4_src"),
            pkt.get("ipv4_dst"),
            proto,
            pkt.get(f"{l4}_src"),
            pkt.get(f"{l4}_dst"),
        )

    def _host_receives(self, host: str, pkt: dict[str, Any]) -> None:
        """Linux answers an ARP probe for its own address (RFC 5227) to the prober."""
        attrs = self.graph.nodes[host]
        if (
            pkt.get("eth_type") == 0x0806
            and pkt.get("arp_op") == 1
            and pkt.get("arp_tpa") == attrs["ip"]
        ):
            sender = str(pkt["arp_sha"])
            reply = ArpFrame(
                2, attrs["mac"], sender, attrs["mac"], attrs["ip"], sender, str(pkt["arp_spa"])
            )
            self.host_sends(host, reply)

    # -- world events ------------------------------------------------------------
    def connect_all(self) -> None:
        for sw in switches(self.graph):
            dpid = self.graph.nodes[sw]["dpid"]
            ports = [PortDesc(e.port, name=f"{sw}-eth{e.port}") for e in link_ends(self.graph, sw)]
            ports.append(PortDesc(OFPP_LOCAL, name=sw))  # as Open vSwitch reports its bridge
            self.apply(self.core.switch_up(self.now, dpid, ports))

    def advance(self, seconds: float, step: float = 0.1) -> None:
        end = self.now + seconds
        while self.now < end - 1e-9:
            self.now = round(self.now + step, 6)
            for host, pkt, size in self.sources:  # traffic first: counters move, then polls
                self.fake.trace(host, pkt, explore_all=False, frame_len=size)
            self.apply(self.core.tick(self.now))

    def start_flow(
        self, src: str, dst: str, sport: int, mbps: float, step: float = 0.1
    ) -> dict[str, object]:
        """A long TCP flow: its first packet (caught, copied to the controller), then
        ``mbps`` worth of bytes counted on the path at every tick of ``advance``."""
        pkt = self.fake.packet(src, dst, tcp_src=sport)
        self._handle_trace(self.fake.trace(src, pkt), None)
        self.sources.append((src, pkt, int(mbps * 1e6 / 8 * step)))
        return pkt

    def send(self, host: str, pkt: dict[str, object]) -> Trace:
        """A host sends a packet: traced, and whatever reaches the controller handled."""
        trace = self.fake.trace(host, pkt)
        self._handle_trace(trace, None)
        return trace

    def host_sends(self, host: str, frame: ArpFrame) -> Trace:
        trace = self.fake.trace(host, arp_fields(frame))
        self._handle_trace(trace, frame)
        return trace

    def announce_hosts(self, only: list[str] | None = None) -> None:
        """Every host (or those ``only``) ARPs for the next one (what pingall's first
        packets do)."""
        hosts = host_list(self.graph)
        for i, h in enumerate(hosts):
            if only is not None and h not in only:
                continue
            a, b = self.graph.nodes[h], self.graph.nodes[hosts[(i + 1) % len(hosts)]]
            self.host_sends(
                h,
                ArpFrame(
                    1,
                    a["mac"],
                    "ff:ff:ff:ff:ff:ff",
                    a["mac"],
                    a["ip"],
                    "00:00:00:00:00:00",
                    b["ip"],
                ),
            )

    def start(self) -> LoomSim:
        """Connect, discover, learn hosts: the state after `make demo`'s first seconds."""
        self.connect_all()
        self.advance(1.5)
        self.announce_hosts()
        self.advance(0.2)
        for _ in range(600):  # planning sliced over ticks (large fabrics): until done
            if not self.core.busy:
                break
            self.advance(0.1)
        return self

    def restart_controller(self, config: FabricConfig | None = None) -> list[Messages]:
        """A new controller process: the switches keep their tables and reconnect.
        Returns every batch of messages the new controller sent, for inspection."""
        self.core = Conductor(config or self.core.config)
        sent: list[Messages] = []
        original = self.apply

        def recording(messages: Messages) -> None:
            sent.append(messages)
            original(messages)

        self.apply = recording  # type: ignore[method-assign]
        try:
            self.connect_all()
        finally:
            self.apply = original  # type: ignore[method-assign]
        return sent

    def fail_link(self, a: str, b: str) -> None:
        """Take a link down as a switch would report it: PortStatus from both ends."""
        self.set_link(a, b, False)

    def restore_link(self, a: str, b: str) -> None:
        self.set_link(a, b, True)

    def set_link(self, a: str, b: str, up: bool) -> None:
        self.fake.set_link(a, b, up)
        for node, peer in ((a, b), (b, a)):
            if self.graph.nodes[node]["kind"] != "switch":
                continue
            dpid = self.graph.nodes[node]["dpid"]
            for end in link_ends(self.graph, node):
                if end.peer == peer:
                    self.apply(self.core.port_status(self.now, dpid, PortDesc(end.port, up=up)))
