"""Delivery at destination switches: each host's rules under its Loom address (a plan
source of its own, see ``controller.hooks``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.addressing import AddressBook
from controller.compiler import delivery_plan, held_hosts
from controller.hooks import PlanInputs, PlanSource
from controller.model import (
    OFPP_TABLE,
    EthFrame,
    Messages,
    Output,
    PacketIn,
    PacketOut,
    RawFrame,
    SwitchRules,
)
from controller.owners import Owner, OwnerKind, Plan, Plans
from controller.tenants import TenantView
from controller.topology import Host, Topology

DestStamp = tuple[int, int, TenantView]  # host and address stamps at a switch, tenants


@dataclass
class Destinations(PlanSource):
    """Per destination switch: delivery to its hosts under their Loom addresses.
    Remembers which switch each host MAC is delivered on, for host moves and for packets
    that beat their route (``routed_to``)."""

    book: AddressBook
    kinds: tuple[OwnerKind, ...] = (OwnerKind.DEST,)
    _routed_to: dict[str, int] = field(default_factory=dict)  # host MAC -> dest switch
    _macs_at: dict[int, set[str]] = field(default_factory=dict)
    # per destination: (what it was planned for, its hosts and addresses, plan)
    _plans: dict[int, tuple[DestStamp, object, Plan]] = field(default_factory=dict)

    def address(self, inputs: PlanInputs, host: Host) -> str:
        return self.book.address(host.mac, host.dpid, inputs.tenants.id_of(host.tenant), host.port)

    def plan(self, inputs: PlanInputs, dest: int) -> Plan:
        """Delivery at ``dest``: the very plan it had while no host there came, went or
        changed, no address there changed and the tenants are the same (a link event
        looks at none of 27,648 hosts' addresses again)."""
        cached = self._plans.get(dest)
        if cached is not None and self._same(cached[0], self._stamp(inputs, dest)):
            return cached[2]
        hosts = [(h, self.address(inputs, h)) for h in inputs.topo.hosts_at(dest)]
        key = [(h.mac, h.ip, h.port, a) for h, a in hosts]
        plan = cached[2] if cached is not None and cached[1] == key else delivery_plan(dest, hosts)
        self._plans[dest] = (self._stamp(inputs, dest), key, plan)  # (addresses taken now)
        return plan

    def _stamp(self, inputs: PlanInputs, dest: int) -> DestStamp:
        hosts, book = inputs.topo.host_stamps.get(dest, 0), self.book.stamps.get(dest, 0)
        return hosts, book, inputs.tenants

    @staticmethod
    def _same(a: DestStamp, b: DestStamp) -> bool:
        return a[:2] == b[:2] and a[2] is b[2]

    def plan_all(self, inputs: PlanInputs) -> Plans:
        dests = sorted(inputs.topo.host_switches())
        return {(OwnerKind.DEST, d): self.plan(inputs, d) for d in dests}

    def host_seen(self, inputs: PlanInputs, host: Host, moved: bool) -> Plans:
        """A host appeared or moved: its switch, and the switch it left if any."""
        plans: Plans = {(OwnerKind.DEST, host.dpid): self.plan(inputs, host.dpid)}
        left = self._routed_to.get(host.mac)
        if left is not None and left != host.dpid:
            plan = self.plan(inputs, left) if inputs.topo.hosts_at(left) else {}
            plans[(OwnerKind.DEST, left)] = plan
        return plans

    def routed_to(self, mac: str) -> int | None:
        return self._routed_to.get(mac)

    def committed(self, topo: Topology, owner: Owner, plan: Plan) -> None:
        """Note where each host MAC is delivered once its destination's plan is sent."""
        dest = owner[1]
        if not isinstance(dest, int):
            return
        for mac in self._macs_at.pop(dest, set()):
            if self._routed_to.get(mac) == dest:
                del self._routed_to[mac]
        if plan:
            macs = {h.mac for h in topo.hosts_at(dest)}
            self._macs_at[dest] = macs
            self._routed_to.update((mac, dest) for mac in macs)

    def reinject(
        self, inputs: PlanInputs, pkt: PacketIn, frame: EthFrame, held: Mapping[Owner, Plan]
    ) -> tuple[str, Messages]:
        """A packet that beat its route to a switch: re-injected once the route exists
        (``held``: what the switches hold). Between tenants there is no route on purpose:
        such packets are dropped. What happened, and the messages."""
        topo, dst_mac = inputs.topo, self.book.host_at(frame.eth_dst)
        src, dst = topo.hosts.get(frame.eth_src), topo.hosts.get(dst_mac or "")
        from_edge = not topo.is_fabric_port((pkt.dpid, pkt.in_port))
        crossing = src is None or dst is None or src.tenant != dst.tenant
        if inputs.tenants.enforcing and from_edge and crossing:
            return "isolation_dropped", {}
        dest = self.routed_to(dst_mac) if dst_mac else None
        delivery = held.get((OwnerKind.DEST, dest), {}).get(dest or 0)
        routed = dest == pkt.dpid or (OwnerKind.ROUTE, pkt.dpid) in held
        flows = delivery.flows.values() if delivery is not None else ()
        if not (
            pkt.data and routed and any(r.match.get("eth_dst") == frame.eth_dst for r in flows)
        ):
            return "route_miss_dropped", {}
        again = PacketOut(pkt.in_port, (Output(OFPP_TABLE),), RawFrame(pkt.data))
        return "route_miss_reinjected", {pkt.dpid: [again]}


def recover_hosts(
    now: float,
    inputs: PlanInputs,
    book: AddressBook,
    switch: tuple[int, SwitchRules],
    events: Counter[str],
) -> None:
    """Hosts a read-back switch (``switch``: its dpid and what it holds) still delivers
    to, learned again with the addresses they had (a host that spoke since is fresher
    than its old rule); those where their rule says are counted as recovered."""
    dpid, held = switch
    for mac, ip, port, address in held_hosts(held):
        tenant = inputs.tenants.tenant_of(mac, ip, dpid, port)
        if tenant is None:
            continue
        book.adopt(dpid, mac, address)
        known = inputs.topo.hosts.get(mac)
        if known is None:
            inputs.topo.learn_host(now, mac, ip, dpid, port, tenant)
        if known is None or (known.dpid, known.port) == (dpid, port):
            events["host_recovered"] += 1
