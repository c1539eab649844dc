"""ARP at size: probes go where nobody spoke yet, within a frame budget a second."""

from __future__ import annotations

import pytest

from controller import arp as arp_module
from controller.arp import ARP_REQUEST, BROADCAST, ArpService
from controller.model import ArpFrame, Messages, Output, PacketOut, PortDesc
from controller.topology import Topology


def request(mac: str, ip: str, target: str) -> ArpFrame:
    return ArpFrame(ARP_REQUEST, mac, BROADCAST, mac, ip, "00:00:00:00:00:00", target)


def probed_ports(out: Messages) -> set[tuple[int, int]]:
    return {
        (dpid, a.port)
        for dpid, msgs in out.items()
        for m in msgs
        if isinstance(m, PacketOut)
        for a in m.actions
        if isinstance(a, Output)
    }


def fabric_of(switches: int, ports: int) -> Topology:
    topo = Topology()
    for dpid in range(1, switches + 1):
        topo.add_switch(dpid, [PortDesc(p) for p in range(1, ports + 1)])
    return topo


def test_the_first_probe_skips_ports_whose_host_spoke_the_second_asks_everyone() -> None:
    topo, service = fabric_of(2, 4), ArpService()
    for port in (1, 2, 3):
        mac = f"02:00:00:00:00:0{port}"
        service.handle(0.0, topo, 1, port, request(mac, f"10.0.0.{port}", "10.0.0.1"))
    _, out = service.handle(1.0, topo, 1, 1, request("02:00:00:00:00:01", "10.0.0.1", "10.9.9.9"))
    assert probed_ports(out) == {(1, 4), (2, 1), (2, 2), (2, 3), (2, 4)}
    _, out = service.handle(2.0, topo, 1, 1, request("02:00:00:00:00:01", "10.0.0.1", "10.9.9.9"))
    assert probed_ports(out) == {(1, 2), (1, 3), (1, 4), (2, 1), (2, 2), (2, 3), (2, 4)}


def test_probes_beyond_the_budget_wait_for_the_next_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(arp_module, "PROBE_RATE", 40)
    topo, service = fabric_of(4, 8), ArpService()  # 32 edge ports: one probe fits
    mac = "02:00:00:00:00:01"
    _, first = service.handle(0.0, topo, 1, 1, request(mac, "10.0.0.1", "10.0.0.2"))
    _, second = service.handle(0.1, topo, 1, 1, request(mac, "10.0.0.1", "10.0.0.3"))
    assert probed_ports(first) and not probed_ports(second) and service.deferred == 1
    _, later = service.handle(1.2, topo, 1, 1, request(mac, "10.0.0.1", "10.0.0.3"))
    assert len(probed_ports(later)) == 31  # all but the requester's port
