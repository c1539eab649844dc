"""Plan sources: each concern of the core plans its own rules, one interface for all.

A source turns what the core knows (``PlanInputs``: the learned topology, the routes
computed from it, the tenant policy, link capacities) into plans under owners of its
kinds. A full re-plan asks every source in turn and then drops every owner of those
kinds that no source planned any more (a switch, host, flow, job or tenant that went).
Sources never send anything: the conductor (``controller.fabric``) commits their plans
through the rule store, protected by fast failover where the owner kind follows routes.

This module holds the sources that are a few lines each; traffic engineering
(``controller.engineer``) and jobs (``controller.jobs``) are sources of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from controller.addressing import AddressBook
from controller.compiler import base_plan, delivery_plan, route_plan, union_plans
from controller.model import PortRef
from controller.owners import Owner, OwnerKind, Plan, Plans
from controller.protection import Detours, Protection, protect, protection_plans
from controller.routing import Routes
from controller.tenants import TenantView, admit_plan
from controller.topology import Host, Topology

Capacity = Callable[[PortRef], float]  # bits/s of a port


@dataclass(frozen=True)
class PlanInputs:
    """What every source plans from, as it stands at one moment."""

    topo: Topology
    routes: Routes
    tenants: TenantView
    capacity: Capacity


class PlanSource(Protocol):
    """One concern's rules. ``kinds``: the owner kinds a full re-plan sweeps for it."""

    @property
    def kinds(self) -> tuple[OwnerKind, ...]: ...

    def plan_all(self, inputs: PlanInputs) -> Plans: ...


@dataclass
class BasePipeline:
    """Per switch: the table skeleton, what is copied to the controller (metered),
    the DSCP classes, and the catch rules that let traffic engineering see new flows."""

    catch_flows: bool
    qos: bool
    kinds: tuple[OwnerKind, ...] = (OwnerKind.BASE,)

    def plan(self, inputs: PlanInputs, dpid: int) -> Plan:
        topo = inputs.topo
        fabric_ports = [p for d, p in topo.fabric_ports if d == dpid]
        admit_all = not inputs.tenants.enforcing
        rules = base_plan(
            dpid, fabric_ports, self.catch_flows, self.qos, admit_all, topo.edge_ports(dpid)
        )
        return {dpid: rules}

    def plan_all(self, inputs: PlanInputs) -> Plans:
        return {(OwnerKind.BASE, d): self.plan(inputs, d) for d in sorted(inputs.topo.switches)}


@dataclass
class Routing:
    """Per switch: its routes towards every destination switch, by Loom address (see
    ``controller.addressing``): they do not change when hosts come and go."""

    book: AddressBook
    kinds: tuple[OwnerKind, ...] = (OwnerKind.ROUTE,)

    def plan(self, inputs: PlanInputs, dpid: int) -> Plan:
        from_hosts = bool(inputs.topo.edge_ports(dpid))
        return {dpid: route_plan(dpid, inputs.routes, self.book.switch_index, from_hosts)}

    def plan_all(self, inputs: PlanInputs) -> Plans:
        return self.plan_some(inputs, inputs.topo.switches)

    def plan_some(self, inputs: PlanInputs, switches: Iterable[int]) -> Plans:
        return {(OwnerKind.ROUTE, d): self.plan(inputs, d) for d in sorted(switches)}


@dataclass
class Destinations:
    """Per destination switch: delivery to its hosts under their Loom addresses.
    Remembers which switch each host MAC is delivered on, for host moves and for packets
    that beat their route (``routed_to``)."""

    book: AddressBook
    kinds: tuple[OwnerKind, ...] = (OwnerKind.DEST,)
    _routed_to: dict[str, int] = field(default_factory=dict)  # host MAC -> dest switch
    _macs_at: dict[int, set[str]] = field(default_factory=dict)

    def address(self, inputs: PlanInputs, host: Host) -> str:
        return self.book.address(host.mac, host.dpid, inputs.tenants.id_of(host.tenant))

    def plan(self, inputs: PlanInputs, dest: int) -> Plan:
        hosts = inputs.topo.hosts_at(dest)
        return delivery_plan(dest, [(h, self.address(inputs, h)) for h in hosts])

    def plan_all(self, inputs: PlanInputs) -> Plans:
        dests = sorted({h.dpid for h in inputs.topo.hosts.values()})
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


@dataclass
class TenantAdmission:
    """Per tenant: ADMIT rules and bandwidth meters for its learned hosts (none on an
    open fabric). Remembers the tenant each host was admitted in, so a host that
    changes tenant leaves the old tenant's rules."""

    kinds: tuple[OwnerKind, ...] = (OwnerKind.TENANT,)
    _admitted_in: dict[str, str] = field(default_factory=dict)  # host MAC -> tenant

    def plan(self, inputs: PlanInputs, names: Iterable[str]) -> Plans:
        if not inputs.tenants.enforcing:
            return {}
        hosts = sorted(inputs.topo.hosts.values(), key=lambda h: h.mac)
        return {
            (OwnerKind.TENANT, name): admit_plan(
                inputs.tenants, name, [h for h in hosts if h.tenant == name]
            )
            for name in sorted(set(names))
        }

    def plan_all(self, inputs: PlanInputs) -> Plans:
        return self.plan(inputs, {h.tenant for h in inputs.topo.hosts.values()})

    def host_moved(self, inputs: PlanInputs, host: Host) -> Plans:
        before = self._admitted_in.get(host.mac)
        self._admitted_in[host.mac] = host.tenant
        return self.plan(inputs, {host.tenant} | ({before} if before else set()))


@dataclass
class FastFailover:
    """Per switch: fast-failover groups with detours, so switches bridge a link failure
    before the controller hears of it. Tunnel ids come from every link ever seen, so a
    failure renumbers nothing."""

    enabled: bool
    kinds: tuple[OwnerKind, ...] = (OwnerKind.PROTECT,)
    protection: Protection = field(default_factory=Protection)
    _links_seen: set[PortRef] = field(default_factory=set)
    _detours: Detours = field(default_factory=dict)

    def plan_all(self, inputs: PlanInputs) -> Plans:
        self.protection = Protection()
        if not self.enabled:
            return {}
        graph = inputs.routes.graph
        self._links_seen.update((u, k) for u, _, k in graph.edges(keys=True))
        detours, self.protection, self._detours = protection_plans(
            graph, self._links_seen, self._detours
        )
        return {(OwnerKind.PROTECT, dpid): plan for dpid, plan in detours.items()}

    def guard(self, owner: Owner, plan: Plan) -> Plan:
        """Wrap the outputs of route-following rules in the failover groups."""
        if owner[0].follows_routes and self.protection:
            return protect(plan, self.protection)
        return plan

    @staticmethod
    def before_routes(owner: Owner, plan: Plan, installed: Plan) -> Plan | None:
        """Failover groups are what routes point at: the first pass adds new groups
        while keeping the old ones (the second pass removes what went)."""
        return union_plans(installed, plan) if owner[0] is OwnerKind.PROTECT else None
