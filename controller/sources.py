"""Plan sources: each concern of the core plans its own rules, one interface for all
(``controller.hooks.PlanSource``).

A source turns what the core knows (``PlanInputs``: the learned topology, the routes
computed from it, the tenant policy, link capacities) into plans under owners of its
kinds. A full re-plan asks every source in turn and then drops every owner of those
kinds that no source planned any more (a switch, host, flow, job or tenant that went).
Sources never send anything: the planner (``controller.planner``) commits their plans
through the rule store, protected by fast failover where the owner kind follows routes.

This module holds the sources that are a few lines each; delivery to hosts
(``controller.delivery``), traffic engineering (``controller.engineer``, over its
concerns), jobs (``controller.jobs``) and fast failover (``controller.failover``) are
sources of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from controller.addressing import AddressBook
from controller.compiler import base_plan, route_plan
from controller.grouping import leaf_groups, neighbours
from controller.hooks import PlanInputs, PlanSource
from controller.limits import Limits, SwitchLimits
from controller.nexthops import Hops, next_hops
from controller.owners import Owner, OwnerKind, Plan, Plans
from controller.qos import TrafficClass
from controller.repair import Reroute, prune, touched, update_order
from controller.routing import Routes
from controller.tenants import admit_plan
from controller.topology import Host, Topology


class PerSwitch(PlanSource):
    """A source whose owners are switches (of its one kind), out-of-date ones planned a
    slice a call (``pending``, ``plan_pending``): they keep what they hold meanwhile."""

    pending: Collection[int]

    def plan_pending(self, inputs: PlanInputs) -> Plans:
        raise NotImplementedError

    def has_work(self) -> bool:
        return bool(self.pending)

    def work(self, inputs: PlanInputs) -> Plans:
        return self.plan_pending(inputs)

    def queued(self) -> set[Owner]:
        return {(self.kinds[0], dpid) for dpid in self.pending}


# Base plans per call, as ports (a switch's table skeleton costs about 20 us a port):
# a fabric of thousands of switches gets its skeletons over several calls, new switches
# first (64 switches of a k=16 fat-tree a call, 21 of a k=48's: about 40 ms with the
# diff against what the switch holds).
BASE_PORTS_PER_CALL = 1024
BaseKey = tuple[tuple[int, ...], tuple[int, ...], bool]  # fabric ports, edge ports, tenants


@dataclass
class BasePipeline(PerSwitch):
    """Per switch: the table skeleton, what is copied to the controller (metered),
    the DSCP classes, and the catch rules that let traffic engineering see new flows.
    A switch whose ports and tenant mode did not change keeps the very plan it had;
    the others are planned ``BASE_PER_CALL`` at a time (``pending``), new ones first."""

    catch_flows: bool
    qos: bool
    job_levels: tuple[TrafficClass, ...] = ()
    kinds: tuple[OwnerKind, ...] = (OwnerKind.BASE,)
    eager: ClassVar[bool] = True  # (discovery through a switch waits for its catch rule)
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
        self.prepare(inputs)
        self.plan_pending(inputs)
        if self._all is None:
            ready = sorted(d for d in self._plans if d not in self.pending)
            self._all = {(OwnerKind.BASE, d): self._plans[d][1] for d in ready}
        return self._all

    def prepare(self, inputs: PlanInputs) -> bool:
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


@dataclass
class Routing(PerSwitch):
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
        # an out-of-date switch keeps what it holds until its turn (``queued``: the
        # planner does not sweep it): its cached plan may never have been sent (a held switch)
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
class TenantAdmission(PlanSource):
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

    def host_seen(self, inputs: PlanInputs, host: Host, moved: bool) -> Plans:
        before = self._admitted_in.get(host.mac)
        self._admitted_in[host.mac] = host.tenant
        return self.plan(inputs, {host.tenant} | ({before} if before else set()))
