"""ARP without flooding loops: the controller answers from its host table.

ARP frames reach the controller (CLASSIFY sends them there) and none is ever flooded
through the fabric; only a host's unicast re-probe for a peer it already knows is
answered by the switches instead (``controller.responder``). A request for a known
address gets a proxy reply on the requester's port. For an unknown address the
controller sends its *own* probe (RFC 5227 style: sender IP 0.0.0.0, sender MAC = the
controller's) out of edge ports only; the owner answers the controller, which then
answers the waiting requesters. Because probes carry no host's MAC, a probe that leaks
onto an undiscovered fabric link teaches nothing wrong, and hosts' ARP caches are never
polluted.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass

from controller.model import (
    CONTROLLER_MAC,
    OFPP_CONTROLLER,
    ArpFrame,
    Messages,
    Output,
    PacketOut,
)
from controller.tenants import TenantView
from controller.topology import Host, Topology

ARP_REQUEST = 1
ARP_REPLY = 2
BROADCAST = "ff:ff:ff:ff:ff:ff"
ZERO_MAC = "00:00:00:00:00:00"
ZERO_IP = "0.0.0.0"
PROBE_RATE = 20_000  # ARP probe frames a second at most, over every edge port
BROADCAST_IP = ipaddress.IPv4Address("255.255.255.255")


def _unicast(mac: str, ip: str | None) -> bool:
    """A host's own addresses: a unicast, non-zero MAC and, if any, a unicast IPv4
    address (a host claiming the broadcast MAC would receive every broadcast)."""
    try:
        group = int(mac[:2], 16) & 1
        addr = ipaddress.IPv4Address(ip) if ip is not None else None
    except ValueError:
        return False
    if group or mac == ZERO_MAC:
        return False
    return addr is None or not (addr.is_multicast or addr.is_loopback or addr == BROADCAST_IP)


@dataclass(frozen=True)
class Waiting:
    mac: str
    ip: str
    dpid: int
    port: int
    until: float
    tenant: str = ""


Addresses = Callable[[Host], str]  # the MAC Loom hands out for a host


def reply_to(requester: Waiting | Host, target: Host, address: str) -> tuple[int, PacketOut]:
    """A proxy reply, as if ``target`` answered with ``address``, sent out of the
    requester's port."""
    assert target.ip is not None and requester.ip is not None
    frame = ArpFrame(
        ARP_REPLY, address, requester.mac, address, target.ip, requester.mac, requester.ip
    )
    return requester.dpid, PacketOut(OFPP_CONTROLLER, (Output(requester.port),), frame)


def announce(
    topo: Topology, moved: list[Host], address_of: Callable[[Host], str], limit: int = PROBE_RATE
) -> Messages:
    """Tell every peer of a host moved to another tenant its new Loom address (the address
    carries the tenant): peers would otherwise keep the old one until their ARP entry runs
    out, tens of seconds in which nothing reaches the host. Each frame goes to one peer and
    updates an entry it holds (it creates none). It is a gratuitous reply, the moved host's
    IP and new address as both sender and target (Linux counts a reply as gratuitous only
    if the target hardware address is the sender's too): an ordinary reply is ignored
    within ``locktime`` (1 s) of the entry's last update, so a peer that had just spoken
    with the host kept the old address. At most ``limit`` frames, moved hosts in order."""
    out: Messages = {}
    sent = 0
    for host in moved:
        if host.ip is None:
            continue
        address = address_of(host)
        for peer in topo.hosts.values():
            if sent >= limit:
                return out
            if peer.mac != host.mac and peer.ip and peer.tenant == host.tenant:
                frame = ArpFrame(ARP_REPLY, address, peer.mac, address, host.ip, address, host.ip)
                msg = PacketOut(OFPP_CONTROLLER, (Output(peer.port),), frame)
                out.setdefault(peer.dpid, []).append(msg)
                sent += 1
    return out


class ArpService:
    """Proxy ARP with Loom's addresses (``addresses``, see ``controller.addressing``).

    An unknown address is first asked for on edge ports where no host is known (a host
    that spoke already has its address on record), then, if that goes unanswered, on
    every edge port: a fabric of 27,648 hosts coming up does not cost hosts² frames."""

    def __init__(
        self,
        probe_interval: float = 1.0,
        wait_timeout: float = 3.0,
        addresses: Addresses = lambda host: host.mac,
    ) -> None:
        self.addresses = addresses
        self.probe_interval = probe_interval
        self.wait_timeout = wait_timeout
        self.waiting: dict[str, list[Waiting]] = {}
        self.last_probe: dict[str, float] = {}
        self.probes: dict[str, int] = {}  # probes sent per address not found yet
        self.deferred = 0  # probes put off to keep within PROBE_RATE
        self._window, self._spent = -1e9, 0
        self.ignored = 0
        self.rejected = 0  # frames that lied about their sender, or senders not admitted

    def handle(
        self,
        now: float,
        topo: Topology,
        dpid: int,
        port: int,
        arp: ArpFrame,
        tenants: TenantView | None = None,
    ) -> tuple[bool, Messages]:
        """Process one ARP frame; returns (host table changed, packets to send)."""
        if CONTROLLER_MAC in (arp.eth_src, arp.sha) or topo.is_fabric_port((dpid, port)):
            self.ignored += 1
            return False, {}
        ip = arp.spa if arp.spa != ZERO_IP else None
        tenant = self._admit(topo, dpid, port, arp, ip, tenants or TenantView())
        if tenant is None:
            self.rejected += 1
            return False, {}
        changed = topo.learn_host(now, arp.sha, ip, dpid, port, tenant)
        out: Messages = {}
        if ip is not None:
            self._answer_waiting(now, topo, ip, out)
        if arp.op == ARP_REQUEST and arp.tpa != arp.spa:
            self._request(now, topo, dpid, port, arp, tenant, tenants or TenantView(), out)
        elif arp.op == ARP_REPLY and arp.eth_dst not in (CONTROLLER_MAC, BROADCAST):
            self._forward_reply(topo, arp, tenant, out)
        return changed, out

    @staticmethod
    def _admit(
        topo: Topology, dpid: int, port: int, arp: ArpFrame, ip: str | None, tenants: TenantView
    ) -> str | None:
        """The sender's tenant, or ``None`` for a frame that lies: a sender MAC that is not
        the frame's source, a host or address that still lives on another live port, or a
        sender the policy does not admit there."""
        if arp.sha != arp.eth_src or not _unicast(arp.sha, ip):
            return None
        known = topo.hosts.get(arp.sha)
        moved = known is not None and (known.dpid, known.port) != (dpid, port)
        if moved and known is not None and topo.port_up((known.dpid, known.port)):
            return None  # a host moves only once its old port went down
        owner = topo.host_by_ip(ip) if ip else None
        if owner is not None and owner.mac != arp.sha and topo.port_up((owner.dpid, owner.port)):
            return None  # the address belongs to another host that is still there
        return tenants.tenant_of(arp.sha, ip, dpid, port)

    def expire(self, now: float) -> None:
        stale = self.probe_interval * 10 + self.wait_timeout
        for ip in [ip for ip, t in self.last_probe.items() if now - t > stale]:
            del self.last_probe[ip]
            self.probes.pop(ip, None)
        for ip in list(self.waiting):
            alive = [w for w in self.waiting[ip] if w.until >= now]
            if alive:
                self.waiting[ip] = alive
            else:
                del self.waiting[ip]

    def _request(
        self,
        now: float,
        topo: Topology,
        dpid: int,
        port: int,
        arp: ArpFrame,
        tenant: str,
        tenants: TenantView,
        out: Messages,
    ) -> None:
        target = topo.host_by_ip(arp.tpa)
        requester = Waiting(arp.sha, arp.spa, dpid, port, now + self.wait_timeout, tenant)
        if target is not None:
            if target.mac != arp.sha and arp.spa != ZERO_IP and target.tenant == tenant:
                sw, pkt = reply_to(requester, target, self.addresses(target))
                out.setdefault(sw, []).append(pkt)
            return
        declared = tenants.tenant_of_ip(arp.tpa) if tenants.enforcing else None
        if declared is not None and declared != tenant:
            return  # another tenant's address: not even a probe
        if arp.spa != ZERO_IP:
            queue = self.waiting.setdefault(arp.tpa, [])
            queue[:] = [w for w in queue if w.mac != arp.sha] + [requester]
        if now - self.last_probe.get(arp.tpa, -1e9) >= self.probe_interval:
            self._probe(now, topo, arp.tpa, exclude=(dpid, port), out=out)

    def probe(self, now: float, topo: Topology, ip: str) -> Messages:
        """Ask every edge port who has ``ip`` (a job named a host not heard from yet)."""
        out: Messages = {}
        if now - self.last_probe.get(ip, -1e9) >= self.probe_interval:
            self._probe(now, topo, ip, exclude=(-1, -1), out=out)
        return out

    def _probe(
        self, now: float, topo: Topology, ip: str, exclude: tuple[int, int], out: Messages
    ) -> None:
        """Ask edge ports for ``ip``, within ``PROBE_RATE`` frames a second overall: a
        probe that does not fit waits for the requester's next ARP (hosts retry)."""
        frame = ArpFrame(
            ARP_REQUEST, CONTROLLER_MAC, BROADCAST, CONTROLLER_MAC, ZERO_IP, ZERO_MAC, ip
        )
        if now - self._window >= 1.0:
            self._window, self._spent = now, 0
        if self._spent >= PROBE_RATE:  # this second's budget is spent: nothing to build
            self.deferred += 1
            return
        tries = self.probes.get(ip, 0)
        first = tries == 0  # first ask only where nobody spoke yet
        where = topo.silent_ports() if first else {d: topo.edge_ports(d) for d in topo.switches}
        frames = sum(len(ports) for ports in where.values())
        frames -= exclude[1] in where.get(exclude[0], ())
        if self._spent and self._spent + frames > PROBE_RATE:  # counted before built
            self.deferred += 1
            return
        sends: list[tuple[int, PacketOut]] = []
        for dpid in sorted(where):
            ports = [p for p in sorted(where[dpid]) if (dpid, p) != exclude]
            if ports:
                actions = tuple(Output(p) for p in ports)
                sends.append((dpid, PacketOut(OFPP_CONTROLLER, actions, frame)))
        self._spent += frames
        self.last_probe[ip] = now
        self.probes[ip] = tries + 1
        for dpid, pkt in sends:
            out.setdefault(dpid, []).append(pkt)

    def _answer_waiting(self, now: float, topo: Topology, ip: str, out: Messages) -> None:
        target = topo.host_by_ip(ip)
        if target is None:
            return
        self.probes.pop(ip, None)
        for waiting in self.waiting.pop(ip, []):
            if (
                waiting.until >= now
                and waiting.mac != target.mac
                and waiting.tenant == target.tenant
            ):
                sw, pkt = reply_to(waiting, target, self.addresses(target))
                out.setdefault(sw, []).append(pkt)

    def _forward_reply(self, topo: Topology, arp: ArpFrame, tenant: str, out: Messages) -> None:
        """A host's own reply to another host: delivered, with the sender's Loom address."""
        dst, src = topo.hosts.get(arp.eth_dst), topo.hosts.get(arp.sha)
        if dst is not None and src is not None and dst.tenant == tenant:
            address = self.addresses(src)
            frame = ArpFrame(arp.op, address, arp.eth_dst, address, arp.spa, arp.tha, arp.tpa)
            out.setdefault(dst.dpid, []).append(
                PacketOut(OFPP_CONTROLLER, (Output(dst.port),), frame)
            )
