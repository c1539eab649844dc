"""What a plan source is: one concern's rules, and a hook for every event it may care about.

The conductor (``controller.conductor``) hands every event to every source in the same
order (``controller.lineup``), and the planner (``controller.planner``) commits what they
plan; neither calls a source by name for an event. ``PlanSource`` answers every hook
with nothing, so a source overrides only the hooks its concern needs, and a new source
is one class, one owner kind and one entry in the lineup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Protocol

from controller.limits import NO_LIMITS, Limits
from controller.model import EthFrame, FlowStats, GroupStats, PortRef, PortStats
from controller.owners import Owner, OwnerKind, Plan, Plans
from controller.routing import Routes
from controller.tenants import TenantView
from controller.topology import Host, Topology

Capacity = Callable[[PortRef], float]  # bits/s of a port
Ends = Mapping[int, frozenset[int]]  # per switch, its ports at the ends of some links


@dataclass(frozen=True)
class PlanInputs:
    """What every source plans from, as it stands at one moment."""

    topo: Topology
    routes: Routes
    tenants: TenantView
    capacity: Capacity
    limits: Limits = NO_LIMITS


class PlanSource:
    """One concern's rules, under owners of its ``kinds`` (those a full re-plan sweeps
    for it). Every hook does nothing here: a source overrides those it cares about."""

    kinds: tuple[OwnerKind, ...] = ()
    # whose left-over work goes on while discovery does (others would plan on routes
    # about to change): the skeletons, which let discovery's LLDP through
    eager: ClassVar[bool] = False

    # -- a full re-plan ---------------------------------------------------------
    def plan_all(self, inputs: PlanInputs) -> Plans:
        """Every plan of the source, from ``inputs`` (what it no longer plans goes)."""
        return {}

    def ahead(self, inputs: PlanInputs) -> Plans:
        """After every source's ``plan_all``: plans sent first (for owners still waiting
        for their turn, what must change before it)."""
        return {}

    def queued(self) -> set[Owner]:
        """Owners planned again in later calls: they keep what they hold (not swept)."""
        return set()

    def prepare(self, inputs: PlanInputs) -> bool:
        """Before a re-plan that waited for its routes: True if work of the source's own
        is now due first (``work``, in calls of its own)."""
        return False

    # -- left-over work, a slice a call -----------------------------------------
    def has_work(self) -> bool:
        """Whether planning is left for later calls (``work``)."""
        return False

    def work(self, inputs: PlanInputs) -> Plans:
        """The next slice of left-over planning."""
        return {}

    # -- events -----------------------------------------------------------------
    def host_seen(self, inputs: PlanInputs, host: Host, moved: bool) -> Plans:
        """A host appeared, or moved (``moved``: it was delivered elsewhere before)."""
        return {}

    def first_packet(self, now: float, inputs: PlanInputs, at: PortRef, frame: EthFrame) -> Plans:
        """The first packet of a flow, caught at switch port ``at``."""
        return {}

    def link_down(self, inputs: PlanInputs, ends: Ends) -> Plans:
        """Links went down (``ends``) while the routes are being computed anew: what
        cannot wait for them."""
        return {}

    def switch_down(self, dpid: int) -> None:
        """A switch disconnected."""

    def port_stats(self, now: float, dpid: int, stats: list[PortStats]) -> None:
        """A switch's port counters."""

    def flow_stats(self, now: float, dpid: int, stats: list[FlowStats]) -> None:
        """A switch's flow counters."""

    def group_stats(self, now: float, dpid: int, stats: list[GroupStats]) -> None:
        """A switch's group counters."""

    def tick(self, now: float, inputs: PlanInputs) -> Plans:
        """Periodic work."""
        return {}

    def lapsed(self, now: float) -> list[Owner]:
        """Owners whose time ran out (gone from the source): their rules go as they are."""
        return []

    def excuse(self, now: float, seconds: float) -> None:
        """``seconds`` in which the controller could not keep the fabric's clocks."""

    def polled(self, topo: Topology) -> set[int]:
        """Switches whose flow counters the source reads."""
        return set()

    def committed(self, topo: Topology, owner: Owner, plan: Plan) -> None:
        """``owner``'s changed ``plan`` was sent."""

    def drain_timings(self) -> list[tuple[str, float]]:
        """Planning durations since the last call, as (kind, seconds)."""
        return []


class CommitFilter(Protocol):
    """What the commit path runs every plan through (``controller.commit``): fast
    failover's guard wraps route-following outputs in its groups."""

    def guard(self, owner: Owner, plan: Plan) -> Plan:
        """The plan as it is sent."""
        ...

    def first_pass(self, owner: Owner, plan: Plan, installed: Plan) -> Plan | None:
        """What goes in before every plan of the commit (what others will point at)."""
        ...
