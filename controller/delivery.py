"""Delivery at destination switches: each host's rules under its Loom address (a plan
source of its own, see ``controller.sources``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.addressing import AddressBook
from controller.compiler import delivery_plan
from controller.owners import OwnerKind, Plan, Plans
from controller.tenants import TenantView
from controller.topology import Host, Topology

if TYPE_CHECKING:
    from controller.sources import PlanInputs


DestStamp = tuple[int, int, TenantView]  # host and address stamps at a switch, tenants


@dataclass
class Destinations:
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

    def host_moved(self, inputs: PlanInputs, host: Host) -> Plans:
        """A host appeared or moved: its switch, and the switch it left if any."""
        plans: Plans = {(OwnerKind.DEST, host.dpid): self.plan(inputs, host.dpid)}
        left = self._routed_to.get(host.mac)
        if left is not None and left != host.dpid:
            plan = self.plan(inputs, left) if inputs.topo.hosts_at(left) else {}
            plans[(OwnerKind.DEST, left)] = plan
        return plans

    def routed_to(self, mac: str) -> int | None:
        return self._routed_to.get(mac)

    def committed(self, topo: Topology, dest: int, planned: bool) -> None:
        """Note where each host MAC is delivered once its destination's plan is sent."""
        for mac in self._macs_at.pop(dest, set()):
            if self._routed_to.get(mac) == dest:
                del self._routed_to[mac]
        if planned:
            macs = {h.mac for h in topo.hosts_at(dest)}
            self._macs_at[dest] = macs
            self._routed_to.update((mac, dest) for mac in macs)
