"""Planning over the plan sources, for the conductor (``controller.conductor``): full
re-plans, left-over work a slice a call, and what one event's hook asks of every source,
all committed through the commit path (``controller.commit``).

A full re-plan asks every source (in ``controller.lineup`` order) for its plans on fresh
routes, then sweeps the owners no source claims any more. Routes that take more than a
call (the fabric changed as a whole) leave the re-plan due (``replan_due``): ``work``
goes on with them, and plans once they are whole. No source is named here but to lay
out the addresses and to tell whether a host moved.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from controller.commit import Committer
from controller.discovery import Discovery
from controller.hooks import Capacity, PlanInputs, PlanSource
from controller.limits import NO_LIMITS
from controller.lineup import Lineup
from controller.model import Messages, merge
from controller.owners import OwnerKind, Plans
from controller.routekeeper import RouteKeeper
from controller.rulestore import RuleStore
from controller.sync import SwitchSync
from controller.tenants import TenantView
from controller.topology import Topology

if TYPE_CHECKING:
    from controller.policy.schema import Policy

Hook = Callable[[PlanSource, PlanInputs], Plans]  # one hook of every source


class Planner:
    """The sources' plans, from what the core knows (``inputs``), sent as differences.
    ``timer`` only measures planning time."""

    def __init__(
        self,
        sources: Lineup,
        topo: Topology,
        capacity: Capacity,
        store: RuleStore,
        sync: SwitchSync,
        discovery: Discovery,
        events: Counter[str],
        timer: Callable[[], float],
    ) -> None:
        self.sources, self.store, self.discovery, self.events = sources, store, discovery, events
        self.timer, self.timings = timer, list[tuple[str, float]]()
        self.keeper = RouteKeeper()
        routes, tenants = self.keeper.routes, TenantView.of(None)
        self.inputs = PlanInputs(topo, routes, tenants, capacity)
        filters = sources.filters
        self.committer = Committer(store, sync, sources, filters, topo, events)
        self.replan_due = False  # a re-plan waits for its routes (computed over calls)

    def arrange(self) -> None:
        """Switch indexes laid out on the fabric as learned so far (``Routing.arrange``);
        routes planned on the indexes before are out of date."""
        topo = self.inputs.topo
        if self.sources.routing.arrange(topo, topo.dest_switches):
            self.replan_due = True

    def in_force(self, policy: Policy | None) -> None:
        """A policy's tenants and switch profiles, planned from at the next re-plan."""
        limits = policy.hardware.limits() if policy else NO_LIMITS
        self.inputs = replace(self.inputs, tenants=TenantView.of(policy), limits=limits)

    # -- one event ----------------------------------------------------------------
    def each(self, hook: Hook) -> Messages:
        """Commit what every source plans for one hook, in lineup order."""
        inputs = self.inputs
        return self.commit(self.sources.gather(lambda source: hook(source, inputs)))

    def host_changed(self, now: float, mac: str) -> Messages:
        """A host appeared or moved: every source re-plans what concerns it."""
        self.events["host_changed"] += 1
        if self.discovery.dirty:  # routes are stale: plan everything on the fresh graph
            return self.replan_all(now)
        host, moved = self.inputs.topo.hosts[mac], bool(self.sources.dests.routed_to(mac))
        return self.each(lambda source, inputs: source.host_seen(inputs, host, moved))

    def commit(self, plans: Plans) -> Messages:
        return self.committer.commit(plans, self.inputs.limits)

    def release(self, settled: list[int]) -> Messages:
        """Read-back switches released once their routes are in (``Committer.release``)."""
        return self.committer.release(settled, self.sources.queued())

    # -- a full re-plan -----------------------------------------------------------
    def replan_all(self, now: float) -> Messages:
        """Every source plans from fresh routes; owners no source claims any more go."""
        self.discovery.replanned(now)
        started, topo = self.timer(), self.inputs.topo
        self.replan_due = not self.keeper.advance(topo, topo.dest_switches())
        if self.replan_due:  # (``work`` goes on with it)
            self.timings.append(("routes", self.timer() - started))
            return {}
        self.inputs = inputs = replace(self.inputs, routes=self.keeper.routes)
        self.events["replan_all"] += 1
        plans = self.sources.gather(lambda source: source.plan_all(inputs))
        self.timings.append(("routes", self.timer() - started))
        plans = {**self.sources.gather(lambda source: source.ahead(inputs)), **plans}
        waiting, swept = self.sources.queued(), self.sources.swept()
        for owner in self.store.parts:  # (every owner once, not once per kind)
            if owner[0] in swept and owner not in waiting:
                plans.setdefault(owner, {})
        return self._commit_based(now, plans)

    def _commit_based(self, now: float, plans: Plans) -> Messages:
        """Commit ``plans``; switches whose first skeleton went in start discovery
        (``Discovery.skeletons_in``: their LLDP catch rule is in)."""
        parts, base = self.store.parts, OwnerKind.BASE
        new = [d for k, d in plans if k is base and isinstance(d, int) and (k, d) not in parts]
        out = self.commit(plans)
        fresh = [d for d in new if (base, d) in self.store.parts]
        wave_done = self.sources.with_work(eager=True) is None
        return merge(out, self.discovery.skeletons_in(now, fresh, wave_done))

    # -- left-over work -----------------------------------------------------------
    @property
    def busy(self) -> bool:
        """Whether planning is left to do (``work``): a source's left-over slices, a
        re-plan waiting for its routes. Eager sources' slices (skeletons, and the LLDP
        they let through) always: discovery through a switch waits for its LLDP catch
        rule; the rest not while discovery goes on (planned on routes about to change,
        they would be planned again)."""
        if self.sources.with_work(eager=True) is not None or self.discovery.resending:
            return True
        if self.discovery.dirty:
            return False
        return self.replan_due or self.sources.with_work() is not None

    def work(self, now: float) -> Messages:
        """The next slice of left-over planning: eager sources' slices (skeletons), LLDP
        resent after a wave, a re-plan waiting for its routes, then the first source
        with work left, in lineup order (routes, then detours)."""
        if not self.busy:
            return {}
        eager, inputs = self.sources.with_work(eager=True), self.inputs
        if eager is not None:
            return self._commit_based(now, eager.work(inputs))
        if self.discovery.resending:
            return self.discovery.resend(now)
        if self.replan_due:  # skeletons need no routes: those due first, in calls of their own
            return {} if any([s.prepare(inputs) for s in self.sources]) else self.replan_all(now)
        source = self.sources.with_work()
        assert source is not None  # (busy)
        out = self.commit(source.work(inputs))
        if OwnerKind.ROUTE in source.kinds:  # read-back switches waited for their routes
            merge(out, self.release([]))
        return out

    def drain_timings(self) -> list[tuple[str, float]]:
        """Planning durations since the last call, as (kind, seconds)."""
        out, self.timings = self.timings, []
        return out + [timing for source in self.sources for timing in source.drain_timings()]
