"""Plan sources: each concern of the core plans its own rules, one interface for all.

A source turns what the core knows (``PlanInputs``: the learned topology, the routes
computed from it, the tenant policy, link capacities) into plans under owners of its
kinds. A full re-plan asks every source in turn and then drops every owner of those
kinds that no source planned any more (a switch, host, flow, job or tenant that went).
Sources never send anything: the conductor (``controller.conductor``) commits their plans
through the rule store, protected by fast failover where the owner kind follows routes.

This module holds the sources that are a few lines each; delivery to hosts
(``controller.delivery``), traffic engineering (``controller.engineer``, over its
concerns) and jobs (``controller.jobs``) are sources of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from controller.addressing import AddressBook
from controller.compiler import base_plan, route_plan, union_plans
from controller.grouping import leaf_groups, neighbours
from controller.limits import NO_LIMITS, Limits, SwitchLimits
from controller.model import PortRef, SwitchRules
from controller.nexthops import Hops, next_hops
from controller.owners import Owner, OwnerKind, Plan, Plans
from controller.protection import Protection, ProtectionPlanner, protect
from controller.qos import TrafficClass
from controller.repair import Reroute, prune, touched, update_order
from controller.routing import Routes
from controller.tenants import TenantView, admit_plan
from controller.topology import Host, Topology

Capacity = Callable[[PortRef], float]  # bits/s of a port
_V = TypeVar("_V")


@dataclass(frozen=True)
class PlanInputs:
    """What every source plans from, as it stands at one moment."""

    topo: Topology
    routes: Routes
    tenants: TenantView
    capacity: Capacity
    limits: Limits = NO_LIMITS


class PlanSource(Protocol):
    """One concern's rules. ``kinds``: the owner kinds a full re-plan sweeps for it."""

    @property
    def kinds(self) -> tuple[OwnerKind, ...]: ...

    def plan_all(self, inputs: PlanInputs) -> Plans: ...


# Base plans per call, as ports (a switch's table skeleton costs about 20 us a port):
# a fabric of thousands of switches gets its skeletons over several calls, new switches
# first (64 switches of a k=16 fat-tree a call, 21 of a k=48's: about 40 ms with the
# diff against what the switch holds).
BASE_PORTS_PER_CALL = 1024
BaseKey = tuple[tuple[int, ...], tuple[int, ...], bool]  # fabric ports, edge ports, tenants


@dataclass
class BasePipeline:
    """Per switch: the table skeleton, what is copied to the controller (metered),
    the DSCP classes, and the catch rules that let traffic engineering see new flows.
    A switch whose ports and tenant mode did not change keeps the very plan it had;
    the others are planned ``BASE_PER_CALL`` at a time (``pending``), new ones first."""

    catch_flows: bool
    qos: bool
    job_levels: tuple[TrafficClass, ...] = ()
    kinds: tuple[OwnerKind, ...] = (OwnerKind.BASE,)
    pending: dict[int, BaseKey] = field(default_factory=dict)  # dpid -> what it is planned for
    _plans: dict[int, tuple[BaseKey, Plan]] = field(default_factory=dict)
    _seen: dict[int, tuple[int, bool]] = field(default_factory=dict)  # (port stamp, tenants)
    _all: Plans | None = None  # every ready plan, while none changed

    @staticmethod
    def _key(inputs: PlanInputs, dpid: int) -> BaseKey:
        fabric, edge = inputs.topo.fabric_ports_of(dpid), inputs.topo.edge_ports(dpid)
        return (tuple(fabric), tuple(edge), inputs.tenants.enforcing)

    def plan_all(self, inputs: PlanInputs) -> Plans:
        """Only switches whose ports changed are looked at (a link event: none)."""
        self.refresh(inputs)
        self.plan_pending(inputs)
        if self._all is None:
            ready = sorted(d for d in self._plans if d not in self.pending)
            self._all = {(OwnerKind.BASE, d): self._plans[d][1] for d in ready}
        return self._all

    def refresh(self, inputs: PlanInputs) -> bool:
        """Note the switches whose skeleton is out of date (``pending``); True if any
        switch's ports were looked at again (after discovery: every switch's)."""
        switches, stamps = inputs.topo.switches, inputs.topo.port_stamps
        for gone in set(self._plans) - set(switches):
            del self._plans[gone]
            self._all = None
        for gone in (set(self.pending) | set(self._seen)) - set(switches):
            self.pending.pop(gone, None)
            self._seen.pop(gone, None)
        looked = False
        for dpid in switches:
            seen = (stamps.get(dpid, 0), inputs.tenants.enforcing)
            if self._seen.get(dpid) == seen:
                continue
            self._seen[dpid], key, cached = seen, self._key(inputs, dpid), self._plans.get(dpid)
            looked = True
            if cached is None or cached[0] != key:
                self.pending[dpid] = key
            elif self.pending.pop(dpid, None) is not None:
                self._all = None
        return looked

    def plan_pending(self, inputs: PlanInputs) -> Plans:
        """Plan the next ``BASE_PORTS_PER_CALL`` ports' worth of out-of-date switches,
        new ones first."""
        order: list[int] = []
        ports = 0
        for dpid in sorted(self.pending, key=lambda d: (d in self._plans, d)):
            if order and ports >= BASE_PORTS_PER_CALL:
                break
            order.append(dpid)
            ports += len(self.pending[dpid][0]) + len(self.pending[dpid][1])
        if order:
            self._all = None
        out: Plans = {}
        for dpid in order:
            key = self.pending.pop(dpid)
            rules = base_plan(
                dpid, key[0], self.catch_flows, self.qos, not key[2], key[1], self.job_levels
            )
            self._plans[dpid] = (key, {dpid: rules})
            out[(OwnerKind.BASE, dpid)] = self._plans[dpid][1]
        return out


# Route plans per call, as destination columns weighed: a switch's plan costs about one
# unit per destination switch, so a call plans 1,200 // destinations switches (nine of a
# k=16 fat-tree's 320, one of a k=48's 2,880: 20-40 ms) and no call plans the whole
# fabric; the rest follow in calls of their own (``Routing.pending``).
ROUTE_SLICE_WORK = 1200
ORDER_LIMIT = 512  # out-of-date switches a re-plan orders (more: a fabric-wide change)
# Detour searches per call (each a search from both ends of one link, 0.03 ms at k=48,
# and its tunnel rules): a fabric coming up, or a link whose loss broke many detours (a
# k=48 core link: 1,151), gets them over several calls; the failover groups in force
# stay until the last search is in.
DETOURS_PER_CALL = 128
# Failover rules a call puts in force once the detours are in (groups and tunnel rules:
# about 20 switches of a k=48 fat-tree, each with 144 groups).
LAND_RULES_PER_CALL = 3000


@dataclass
class Routing:
    """Per switch: its routes towards every destination switch, by Loom address (see
    ``controller.addressing``): they do not change when hosts come and go. After a
    topology change only switches whose next hops may differ are planned again: those
    whose distances or links changed, and their neighbours; the others keep the very
    plan they had, so nothing about them is compared or sent. Planning is sliced: each
    call plans a bounded number of switches, those whose own links changed first, and
    the others keep what they had until their turn (``plan_pending``)."""

    book: AddressBook
    kinds: tuple[OwnerKind, ...] = (OwnerKind.ROUTE,)
    pending: set[int] = field(default_factory=set)  # switches whose plan is out of date
    _urgent: set[int] = field(default_factory=set)  # ... of which these first
    _routes: Routes | None = None
    _indexes: list[int] = field(default_factory=list)
    # per switch: (from hosts, its profile, plan)
    _plans: dict[int, tuple[bool, SwitchLimits, Plan]] = field(default_factory=dict)
    _seen: dict[int, tuple[int, Limits]] = field(default_factory=dict)  # port stamp, limits
    _arranged: int | None = None  # the fabric's shape the indexes were laid out on
    _hops: dict[int, Hops] = field(default_factory=dict)  # what each plan was made from
    _fresh: dict[int, Hops] = field(default_factory=dict)  # ... and will be, once pending
    _order: dict[int, int] = field(default_factory=dict)  # pending switch -> its turn
    _reroute: Reroute | None = None  # which destinations each may take new hops for

    def arrange(self, topo: Topology, dests: Callable[[], list[int]]) -> bool:
        """Switch indexes laid out by the fabric's shape (``AddressBook.arrange``), again
        only when it changed (switches came or went, or were first seen linked; a link
        that fails changes nothing); True when one moved (routes planned before are out
        of date)."""
        if topo.shape == self._arranged:
            return False
        self._arranged = topo.shape
        before = dict(self.book.index_of)
        self.book.arrange(leaf_groups(dests(), neighbours(topo)))
        return any(before.get(d) != i for d, i in self.book.index_of.items())

    def plan_all(self, inputs: PlanInputs) -> Plans:
        dests: list[int] = inputs.routes.dests  # type: ignore[assignment]
        self.arrange(inputs.topo, lambda: dests)
        indexes = [self.book.switch_index(d) for d in dests]
        # a switch's plan depends on its routes and on the address index of every
        # destination (a restart may adopt other indexes): either changing re-plans it
        change = touched(self._routes, inputs.routes) if indexes == self._indexes else None
        self._routes, self._indexes = inputs.routes, indexes
        switches = inputs.topo.switches
        for gone in set(self._plans) - set(switches):
            del self._plans[gone]
            self._seen.pop(gone, None)
            self._hops.pop(gone, None)
        stale, urgent = change if change is not None else (set(switches), set())
        self.pending = {d for d in self.pending | stale if d in switches}
        self._urgent = {d for d in self._urgent | urgent if d in self.pending}
        self._ordered(inputs.routes if change is not None else None)
        stamps = inputs.topo.port_stamps
        for dpid in switches:  # (a key changes only with the switch's ports or profiles)
            seen, cached, stamp = self._seen.get(dpid), self._plans.get(dpid), stamps.get(dpid, 0)
            if cached and seen and seen[0] == stamp and seen[1] is inputs.limits:
                continue
            self._seen[dpid] = (stamp, inputs.limits)
            if cached is None or cached[:2] != self._key(inputs, dpid):
                self.pending.add(dpid)
        self.plan_pending(inputs)
        # an out-of-date switch keeps what it holds until its turn (the conductor does
        # not sweep it): its cached plan may never have been sent (a held switch)
        planned = sorted(d for d in self._plans if d not in self.pending)
        return {(OwnerKind.ROUTE, d): self._plans[d][2] for d in planned}

    def plan_pending(self, inputs: PlanInputs) -> Plans:
        """Plan the next slice of out-of-date switches (their owners and plans)."""
        routes = self._routes
        if routes is None:
            return {}
        turn = self._order
        order = sorted(
            self.pending,
            key=lambda d: (0, turn[d], d) if d in turn else (1, d not in self._urgent, d),
        )
        order = order[: self.slice_size()]
        out: Plans = {}
        again: list[int] = []  # switches with destinations left for another turn
        for dpid in order:
            from_hosts, limits = self._key(inputs, dpid)
            hops = self._fresh.get(dpid) or next_hops(dpid, routes)
            if self._reroute is not None:
                live = inputs.topo.linked_ports(dpid)
                hops, whole = self._reroute.hops(dpid, hops, live)
                again += [] if whole else [dpid]
            plan = {dpid: route_plan(dpid, routes, self._indexes, from_hosts, limits, hops)}
            self._plans[dpid], self._hops[dpid] = (from_hosts, limits, plan), hops
            out[(OwnerKind.ROUTE, dpid)] = plan
        self.pending.difference_update(order)
        self._urgent.difference_update(order)
        for dpid in order:
            if dpid not in again:
                self._fresh.pop(dpid, None)
        self.pending.update(again)
        last = max(self._order.values(), default=0)
        self._order.update((d, last + 1 + i) for i, d in enumerate(again))
        return out

    def _ordered(self, routes: Routes | None) -> None:
        """The turn of each pending switch (``controller.repair.update_order``) when the
        change is known and small enough; else none (their own links changed first)."""
        self._fresh, self._order, self._reroute = {}, {}, None
        if routes is None:
            self._hops = {}  # (columns or indexes changed: old hops mean nothing)
            return
        if not self.pending or len(self.pending) > ORDER_LIMIT:
            return
        self._fresh = {d: next_hops(d, routes) for d in sorted(self.pending)}
        order, self._reroute = update_order(routes, self._hops, self._fresh)
        self._order = {d: i for i, d in enumerate(order)}

    def interim(
        self,
        inputs: PlanInputs,
        dpids: Iterable[int],
        guarded: Mapping[int, Mapping[int, object]],
        every: bool = False,
    ) -> Plans:
        """Of ``dpids``, those still waiting for their turn (``every``: all of them): the
        plans they hold without ports that are no longer live and have no failover group
        (``guarded``) in force (``controller.repair.prune``), to be sent (again, under the
        failover groups now in force) until their turn."""
        out: Plans = {}
        for dpid in sorted(set(dpids) if every else set(dpids) & self.pending):
            cached = self._plans.get(dpid)
            if cached is not None and dpid in inputs.topo.switches:
                live = {*inputs.topo.linked_ports(dpid), *guarded.get(dpid, {})}
                out[(OwnerKind.ROUTE, dpid)] = {d: prune(r, live) for d, r in cached[2].items()}
        return out

    @property
    def urgent(self) -> set[int]:
        """Waiting switches whose own links changed."""
        return self._urgent

    def slice_size(self) -> int:
        """Switches a call plans: ``ROUTE_SLICE_WORK`` destination columns' worth."""
        dests = len(self._routes.dests) if self._routes is not None else 0
        return max(1, ROUTE_SLICE_WORK // max(1, dests))

    def planned(self) -> dict[int, Plan]:
        """The current plan of every switch that is not waiting for its turn."""
        return {d: p[2] for d, p in self._plans.items() if d not in self.pending}

    @staticmethod
    def _key(inputs: PlanInputs, dpid: int) -> tuple[bool, SwitchLimits]:
        return bool(inputs.topo.edge_ports(dpid)), inputs.limits.of(dpid)

    def select_groups(self, dpid: int) -> int:
        """How many select groups ``dpid``'s routes use (what fast failover must fit beside)."""
        cached = self._plans.get(dpid)
        return len(cached[2][dpid].groups) if cached and dpid in cached[2] else 0


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
        if not inputs.tenants.enforcing:
            return {}
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
    # what later calls still do before the plans in force are whole: switches to read,
    # detours to search, switches to rebuild, switches to change over
    waiting: int = 0
    _planner: ProtectionPlanner = field(default_factory=ProtectionPlanner)
    _version: int | None = None  # the topology graph version last planned for
    select_groups: Callable[[int], int] = lambda _dpid: 0  # per switch, beside failover's
    _planned: tuple[Plans, Protection] | None = None  # in force
    # the planner's last complete result (compared by identity)
    _found: tuple[dict[int, Plan] | None, Protection | None] = (None, None)
    _target: tuple[Plans, Protection] | None = None  # ... while switches change over to it

    def moved(self, before: Protection) -> set[int]:
        """Switches whose failover groups or tunnel ends differ from ``before``."""
        now = self.protection
        switches = {*now.first, *now.arrivals, *before.first, *before.arrivals}
        return {
            d
            for d in switches
            if (now.first.get(d), now.arrivals.get(d))
            != (before.first.get(d), before.arrivals.get(d))
        }

    def lost(self, before: Protection) -> set[int]:
        """Switches that had a failover group or a tunnel end ``before`` that is gone or
        changed now (a rule sent under it would point at nothing)."""
        now, out = self.protection, set()
        for dpid, ports in before.first.items():
            has = now.first.get(dpid, {})
            if has is not ports and any(has.get(p, -1) != f for p, f in ports.items()):
                out.add(dpid)
        for dpid, ends in before.arrivals.items():
            if not ends <= now.arrivals.get(dpid, set()):
                out.add(dpid)
        return out

    def fresh_detours(self, on: bool) -> None:
        self._planner.fresh = on

    _landing: list[int] = field(default_factory=list)  # ... these, last first
    _barring: tuple[Plans, frozenset[int], Plans, Protection] | None = None
    _guarded: dict[Owner, tuple[Plan, object, Plan]] = field(default_factory=dict)

    def plan_all(self, inputs: PlanInputs) -> Plans:
        """The failover plans, brought up to date with the switches whose links changed
        since the last call (a link event: its two switches, not the fabric)."""
        if not self.enabled:
            self.protection = Protection()
            return {}
        topo, graph = inputs.topo, inputs.routes.graph
        changed = None if self._version is None else topo.changes_since(self._version)
        if changed is None or changed or self.waiting:
            self._version = topo.version
            # (tunnel ids number every link ever read: a failure renumbers nothing)
            found = self._planner.plan(graph, changed, None, DETOURS_PER_CALL)
            new = found.plans is not self._found[0] or found.protection is not self._found[1]
            if not found.waiting and new:
                self._found = (found.plans, found.protection)
                plans: Plans = {(OwnerKind.PROTECT, d): p for d, p in found.plans.items()}
                self._aim(plans, found.protection)
            self._land()
            self.waiting = found.waiting + len(self._landing)
        return self._in_force(inputs)

    def _aim(self, plans: Plans, aim: Protection) -> None:
        """New complete plans: the switches whose plan or groups differ from those in
        force will change over (``_land``)."""
        now, prot = self._planned or ({}, Protection())
        switches = {o[1] for o in (*plans, *now)} | {*prot.first, *aim.first}
        switches |= {*prot.arrivals, *aim.arrivals}
        self._target = (plans, aim)
        self._landing = sorted(
            (
                d
                for d in switches
                if isinstance(d, int)
                and (
                    plans.get((OwnerKind.PROTECT, d)) is not now.get((OwnerKind.PROTECT, d))
                    or aim.first.get(d) is not prot.first.get(d)
                    or aim.arrivals.get(d) is not prot.arrivals.get(d)
                )
            ),
            reverse=True,
        )

    def _land(self) -> None:
        """Put the next switches' new plans in force, ``LAND_RULES_PER_CALL`` rules a
        call (2,880 switches' groups at k=48 take seconds to diff and send). Each switch's
        routes are guarded by its own groups alone, so switches change over one by one."""
        if self._target is None:
            return
        target, aim = self._target
        now, prot = self._planned or ({}, Protection())
        plans, first, arrivals = dict(now), dict(prot.first), dict(prot.arrivals)
        rules = 0
        while self._landing and rules < LAND_RULES_PER_CALL:
            dpid = self._landing.pop()
            owner = (OwnerKind.PROTECT, dpid)
            plan = target.get(owner)
            if plan is None:
                plans.pop(owner, None)
            else:
                plans[owner] = plan
                rules += sum(len(r.groups) + len(r.flows) for r in plan.values())
            _put(first, dpid, aim.first.get(dpid))
            _put(arrivals, dpid, aim.arrivals.get(dpid))
        self._planned = (plans, Protection(first, arrivals))
        if not self._landing:
            self._planned, self._target = (target, aim), None

    def _in_force(self, inputs: PlanInputs) -> Plans:
        """The last complete plans, within the switches' profiles."""
        if self._planned is None:
            return {}
        plans, self.protection = self._planned
        if any(o[1] not in inputs.topo.switches for o in plans):  # (planned before one went)
            plans = {o: p for o, p in plans.items() if o[1] in inputs.topo.switches}
        barred = self._barred(inputs.limits, plans)
        if barred:
            plans, self.protection = self._without(barred, plans, self.protection)
        return plans

    def _barred(self, limits: Limits, plans: Plans) -> frozenset[int]:
        """Switches that may not hold failover groups: their profile has none, or they
        would not fit beside the switch's select groups."""
        if limits == NO_LIMITS:
            return frozenset()
        out = set()
        for owner, plan in plans.items():
            dpid, lim = owner[1], limits.of(owner[1])  # type: ignore[arg-type]
            assert isinstance(dpid, int)
            wanted = len(plan[dpid].groups) + self.select_groups(dpid)
            if not lim.fast_failover or (lim.groups is not None and wanted > lim.groups):
                out.add(dpid)
        return frozenset(out)

    def _without(
        self, barred: frozenset[int], plans: Plans, prot: Protection
    ) -> tuple[Plans, Protection]:
        """``plans`` and ``prot`` with no failover group at ``barred`` switches (tunnels
        through them stay: they are plain flow rules). Remembered per barred set."""
        if self._barring is not None and self._barring[:2] == (plans, barred):
            return self._barring[2], self._barring[3]
        out: Plans = {}
        for owner, plan in plans.items():
            if owner[1] not in barred:
                out[owner] = plan
            elif flows := plan[owner[1]].flows:
                out[owner] = {owner[1]: SwitchRules(flows=dict(flows))}
        kept = Protection(
            {d: f for d, f in prot.first.items() if d not in barred},
            {d: a for d, a in prot.arrivals.items() if d not in barred},
        )
        self._barring = (plans, barred, out, kept)
        return out, kept

    def guard(self, owner: Owner, plan: Plan) -> Plan:
        """Wrap the outputs of route-following rules in the failover groups (the same
        plan under the same protection gives the very same result, so it is not diffed)."""
        if not (owner[0].follows_routes and self.protection):
            return plan
        if owner[0] is not OwnerKind.ROUTE:
            return protect(plan, self.protection)
        # one switch's routes: remembered, and redone only when that switch's own
        # failover groups changed (a link event touches a few switches' detours)
        prot = self.protection
        here = [(d, prot.first.get(d), prot.arrivals.get(d)) for d in sorted(plan)]
        if not any(first or arrivals for _, first, arrivals in here):
            return plan  # no failover group at this switch: nothing to wrap
        done = self._guarded.get(owner)
        if done is not None and done[0] is plan and done[1] == here:
            return done[2]
        out = protect(plan, prot)
        self._guarded[owner] = (plan, here, out)
        return out

    @staticmethod
    def before_routes(owner: Owner, plan: Plan, installed: Plan) -> Plan | None:
        """Failover groups are what routes point at: the first pass adds new groups
        while keeping the old ones (the second pass removes what went)."""
        if owner[0] is not OwnerKind.PROTECT or plan is installed:
            return None
        return union_plans(installed, plan) if installed else plan


def _put(table: dict[int, _V], key: int, value: _V | None) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value
