"""What the polling replies say about links: the load each carries (``Telemetry``) and the
capacity Loom believes it has (``Capacities``), asked in one place, so that traffic
engineering and the metrics divide the same two numbers."""

from __future__ import annotations

from collections.abc import Mapping

from controller.capacity import Belief, Capacities
from controller.flows import FlowKey, FlowTable
from controller.graylinks import Crossing, Crossings, GrayLinks, Readout
from controller.model import PortRef, PortStats
from controller.placement import Path
from controller.telemetry import Telemetry
from controller.topology import Topology

CROSSINGS_EVERY = 0.25  # seconds: one poll round's replies share one index of the flows
ACK_AT_MOST = 0.1  # a flow under this share of its reverse's rate is that flow's ACK stream
TRANSIT_AT_MOST = 5.0  # s: an LLDP frame timed longer was sent by another instance's clock


class Readings:
    def __init__(
        self,
        topo: Topology,
        flows: FlowTable,
        configured_bps: float | None,
        paths: Mapping[FlowKey, Path] | None = None,
    ) -> None:
        self.topo = topo
        self.flows = flows  # what tracked TCP sends in all: evidence for learned capacity
        self.paths = paths if paths is not None else {}  # pinned flows' paths (TE's own)
        self.telemetry = Telemetry()
        self.capacities = Capacities(configured_bps)
        self.gray = GrayLinks()
        self._crossed: tuple[float, Crossings] | None = None
        self._read = Readout(
            self.telemetry.tx_bps,
            self.telemetry.rx_bps,
            self.capacity,
            self.capacities.flat,
            self.capacities.shown,
            lambda ref: self.capacities.kind_level(self.topo.reported_bps(ref)),
            self._peer,
            self.transit,
        )

    def forget_switch(self, dpid: int) -> None:
        self.telemetry.forget_switch(dpid)
        self.capacities.forget_switch(dpid)

    def port_stats(self, now: float, dpid: int, stats: list[PortStats]) -> int:
        """Take a switch's port counters; returns how many name ports it does not have
        (made-up port numbers: counted by the caller, otherwise ignored)."""
        switch = self.topo.switches.get(dpid)
        known = [s for s in stats if switch is not None and s.port_no in switch.ports]
        tcp, caps = self.flows.tcp_bps, self.capacities
        intervals = self.telemetry.port_stats(now, dpid, known, tcp > 0 or caps.watches(dpid))
        edge = self.topo.edge_ports(dpid)
        caps.learn(now, intervals, self.topo.reported_bps, edge, tcp)
        if tcp > 0 or self.gray.marked or self.gray.pending:
            self._review(now, [ref for ref, _ in intervals if ref[1] not in edge])
        return len(stats) - len(known)

    def _review(self, now: float, ports: list[PortRef]) -> None:
        """Gray links (``controller.graylinks``) among one switch's fabric ports."""
        gray = self.gray
        gone = [r for r in gray.marked if r not in self.topo.links]  # went down: a new start
        for ref in gone:
            gray.forget_port(ref)
        watched = gray.marked.keys() | gray.pending.keys()
        ports = [r for r in ports if r in watched or gray.low(r, self._read)]
        if ports:
            gray.review(now, ports, self._crossings(now), self._read)

    def _peer(self, ref: PortRef) -> PortRef | None:
        link = self.topo.links.get(ref)
        return link.dst if link is not None else None

    def transit(self, ref: PortRef) -> tuple[float, float] | None:
        """When the last LLDP frame out of ``ref`` arrived, and how long it took."""
        link = self.topo.links.get(ref)
        if link is None or link.sent <= 0.0:
            return None
        seconds = link.last_seen - link.sent
        return (link.last_seen, seconds) if 0.0 <= seconds <= TRANSIT_AT_MOST else None

    def _crossings(self, now: float) -> Crossings:
        """The pinned flows that send, rebuilt at most every ``CROSSINGS_EVERY`` seconds
        (every one: on a link at a quarter of its rate, flows share too little to count
        as elephants), but for ACK streams: paced by their data's rate, not by any link of
        their own way, they would make a link that carries only them look held low."""
        if self._crossed is not None and now - self._crossed[0] < CROSSINGS_EVERY:
            return self._crossed[1]
        out = []
        for key, path in self.paths.items():
            flow = self.flows.flows.get(key)
            if flow is None or flow.rate_bps <= 0:
                continue
            data = self.flows.flows.get(key.reverse())
            if data is not None and flow.rate_bps < ACK_AT_MOST * data.rate_bps:
                continue
            dst = self.topo.hosts.get(flow.dst_mac)
            egress = (dst.dpid, dst.port) if dst is not None else None
            out.append(Crossing(key, flow.rate_bps, path, (flow.ingress, flow.in_port), egress))
        self._crossed = (now, Crossings(out))
        return self._crossed[1]

    def belief(self, ref: PortRef) -> Belief:
        """What a port carries, as Loom believes it, and why: a gray link's own level
        (``controller.graylinks``), else what ``controller.capacity`` learned."""
        marked = self.gray.marked.get(ref)
        if marked is not None:
            return Belief(marked.level, marked.state)
        return self.capacities.belief(ref, self.topo.reported_bps(ref))

    def capacity(self, ref: PortRef) -> float:
        """Bits/s a port carries, as Loom believes it."""
        return self.belief(ref).bps

    def load(self, link: PortRef) -> float:
        """What a link carries, as a share of what Loom believes it can."""
        return self.telemetry.tx_bps(link) / max(self.capacity(link), 1.0)
