"""The plan sources, in one lineup: the order of a full re-plan and of every event.

Adding a source takes its class (``controller.hooks.PlanSource``), its owner kind
(``controller.owners.OwnerKind``) and its entry here: the conductor hands it every event
and sweeps its owners without naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from controller.addressing import AddressBook
from controller.config import FabricConfig
from controller.delivery import Destinations
from controller.engineer import TrafficEngineer
from controller.failover import FastFailover
from controller.hooks import CommitFilter, PlanSource
from controller.jobs import JobBook
from controller.linkloads import Meters
from controller.owners import Owner, OwnerKind, Plans
from controller.qos import ack_marks
from controller.readings import Readings
from controller.sources import BasePipeline, Routing, TenantAdmission
from controller.topology import Topology


class Lineup(NamedTuple):
    """Every plan source, in the order a full re-plan asks them."""

    base: BasePipeline
    routing: Routing
    dests: Destinations
    te: TrafficEngineer
    jobs: JobBook
    admission: TenantAdmission
    failover: FastFailover  # last: it protects what the others planned

    @property
    def filters(self) -> tuple[CommitFilter, ...]:
        """What the commit path runs every plan through."""
        return (self.failover,)

    def gather(self, hook: Callable[[PlanSource], Plans]) -> Plans:
        """What every source plans for one hook, in lineup order."""
        plans: Plans = {}
        for source in self:
            plans.update(hook(source))
        return plans

    def swept(self) -> set[OwnerKind]:
        """The owner kinds a full re-plan sweeps."""
        return {kind for source in self for kind in source.kinds}

    def queued(self) -> set[Owner]:
        """Owners planned again in later calls (``PlanSource.queued``)."""
        return {owner for source in self for owner in source.queued()}

    def polled(self, topo: Topology) -> set[int]:
        """Switches whose flow counters some source reads."""
        return set[int]().union(*(source.polled(topo) for source in self))

    def with_work(self, eager: bool = False) -> PlanSource | None:
        """The first source with left-over work (``eager``: of the eager ones)."""
        return next((s for s in self if s.has_work() and (s.eager or not eager)), None)


def assemble(
    config: FabricConfig, topo: Topology, book: AddressBook, timer: Callable[[], float]
) -> tuple[Lineup, Readings]:
    """The sources for ``config``, and the readings traffic engineering weighs links by."""
    te = TrafficEngineer(config.te, timer, ack_marks(config.qos))
    mbps = config.link_capacity_mbps
    readings = Readings(topo, te.flows, mbps and mbps * 1e6, te.paths)
    te.keeping = readings.gray.keeping
    te.meters = Meters(readings.telemetry.tx_bps, readings.capacity)
    routing = Routing(book)
    failover = FastFailover(config.fast_failover, routing)
    failover.fresh_detours(config.fresh_detours)
    base = BasePipeline(config.te.enabled, config.qos, config.job_levels)
    jobs = JobBook(config.qos, config.job_levels)
    lineup = Lineup(base, routing, Destinations(book), te, jobs, TenantAdmission(), failover)
    return lineup, readings
