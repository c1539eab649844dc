"""Fast failover, a plan source: per switch, fast-failover groups with detours, so
switches bridge a link failure before the controller hears of it. It protects what the
routes use (``controller.sources.Routing``), so it also keeps the routes sent meanwhile
in step with its groups, and its guard is a filter the commit path runs plans through
(``controller.commit``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from controller.compiler import union_plans
from controller.hooks import Ends, PlanInputs, PlanSource
from controller.limits import NO_LIMITS, Limits
from controller.model import SwitchRules
from controller.owners import Owner, OwnerKind, Plan, Plans
from controller.protection import Protection, ProtectionPlanner, protect
from controller.sources import Routing

_V = TypeVar("_V")

# Detour searches per call (each a search from both ends of one link, 0.03 ms at k=48,
# and its tunnel rules): a fabric coming up, or a link whose loss broke many detours (a
# k=48 core link: 1,151), gets them over several calls; the failover groups in force
# stay until the last search is in.
DETOURS_PER_CALL = 128
# Failover rules a call puts in force once the detours are in (groups and tunnel rules:
# about 20 switches of a k=48 fat-tree, each with 144 groups).
LAND_RULES_PER_CALL = 3000


@dataclass
class FastFailover(PlanSource):
    """Per switch: fast-failover groups with detours, so switches bridge a link failure
    before the controller hears of it. Tunnel ids come from every link ever seen, so a
    failure renumbers nothing. Switches waiting for their routes keep what they hold,
    but not into a dead link nor through a failover group that went (``ahead``,
    ``link_down``); routes whose groups changed are sent again, a slice a call."""

    enabled: bool
    routing: Routing  # the routes it protects
    kinds: tuple[OwnerKind, ...] = (OwnerKind.PROTECT,)
    protection: Protection = field(default_factory=Protection)
    # what later calls still do before the plans in force are whole: switches to read,
    # detours to search, switches to rebuild, switches to change over
    waiting: int = 0
    _planner: ProtectionPlanner = field(default_factory=ProtectionPlanner)
    _version: int | None = None  # the topology graph version last planned for
    _planned: tuple[Plans, Protection] | None = None  # in force
    # the planner's last complete result (compared by identity)
    _found: tuple[dict[int, Plan] | None, Protection | None] = (None, None)
    _target: tuple[Plans, Protection] | None = None  # ... while switches change over to it
    _lost: set[int] = field(default_factory=set)  # switches the last plan_all took groups from
    _reguard: set[int] = field(default_factory=set)  # switches whose routes new groups change

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
        before = self.protection
        plans = self._plan_all(inputs)
        self._lost = self.lost(before)
        return plans

    def ahead(self, inputs: PlanInputs) -> Plans:
        """Switches waiting for their routes whose own links changed, or that lost a
        failover group: what they hold, pruned (``Routing.interim``)."""
        changed = self._lost | self.routing.urgent
        return self.routing.interim(inputs, changed, self.protection.first)

    def link_down(self, inputs: PlanInputs, ends: Ends) -> Plans:
        """No routes yet: the ends keep theirs, without the dead link."""
        return self.routing.interim(inputs, ends, self.protection.first, True)

    def has_work(self) -> bool:
        return bool(self.waiting or self._reguard)

    def work(self, inputs: PlanInputs) -> Plans:
        """More detours (routes to groups that go: first); once all are in, the routes
        they change, a slice a call."""
        routing = self.routing
        if self.waiting:
            before = self.protection
            plans = self.plan_all(inputs)
            self._reguard.update(self.moved(before) & routing.planned().keys())
            return {**routing.interim(inputs, self._lost, self.protection.first), **plans}
        planned = routing.planned()
        some = sorted(self._reguard)[: routing.slice_size()]
        self._reguard.difference_update(some)
        return {(OwnerKind.ROUTE, d): planned[d] for d in some if d in planned}

    def _plan_all(self, inputs: PlanInputs) -> Plans:
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
            wanted = len(plan[dpid].groups) + self.routing.select_groups(dpid)
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
    def first_pass(owner: Owner, plan: Plan, installed: Plan) -> Plan | None:
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
