"""What the polling replies say about links: the load each carries (``Telemetry``) and the
capacity Loom believes it has (``Capacities``), asked in one place, so that traffic
engineering and the metrics divide the same two numbers."""

from __future__ import annotations

from controller.capacity import Capacities
from controller.flows import FlowTable
from controller.model import PortRef, PortStats
from controller.telemetry import Telemetry
from controller.topology import Topology


class Readings:
    def __init__(self, topo: Topology, flows: FlowTable, configured_bps: float | None) -> None:
        self.topo = topo
        self.flows = flows  # what tracked TCP sends in all: evidence for learned capacity
        self.telemetry = Telemetry()
        self.capacities = Capacities(configured_bps)

    def port_stats(self, now: float, dpid: int, stats: list[PortStats]) -> int:
        """Take a switch's port counters; returns how many name ports it does not have
        (made-up port numbers: counted by the caller, otherwise ignored)."""
        switch = self.topo.switches.get(dpid)
        known = [s for s in stats if switch is not None and s.port_no in switch.ports]
        tcp, caps = self.flows.tcp_bps, self.capacities
        intervals = self.telemetry.port_stats(now, dpid, known, tcp > 0 or caps.watches(dpid))
        caps.learn(now, intervals, self.topo.reported_bps, self.topo.edge_ports(dpid), tcp)
        return len(stats) - len(known)

    def capacity(self, ref: PortRef) -> float:
        """Bits/s a port carries, as Loom believes it (``controller.capacity``)."""
        return self.capacities.belief(ref, self.topo.reported_bps(ref)).bps

    def load(self, link: PortRef) -> float:
        """What a link carries, as a share of what Loom believes it can."""
        return self.telemetry.tx_bps(link) / max(self.capacity(link), 1.0)
