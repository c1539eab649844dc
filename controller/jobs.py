"""The job book: every registered collective job, from the REST API or the policy file,
in one place and one order. A plan source: jobs are placed in registration order, each
seeing the load of the jobs placed before it."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from controller.collectives import JobState, job_plan, place_job
from controller.hooks import PlanInputs, PlanSource
from controller.jobspec import JobError, JobSpec, brief
from controller.model import CookieKind, FlowStats, PortRef, cookie_kind
from controller.owners import Owner, OwnerKind, Plans
from controller.priorities import compress, sharing
from controller.qos import COLLECTIVE, TrafficClass
from controller.servers import server_of_ip
from controller.tenants import TenantView
from controller.topology import Host, Topology
from controller.untangle import untangle

log = logging.getLogger("loom.fabric")


class JobBook(PlanSource):
    kinds: tuple[OwnerKind, ...] = (OwnerKind.JOB,)

    def __init__(self, qos: bool, levels: tuple[TrafficClass, ...] = (COLLECTIVE,)) -> None:
        self.qos = qos
        self.levels = levels
        self.jobs: dict[str, JobState] = {}
        self._order = 0

    @staticmethod
    def owner(name: str) -> Owner:
        return (OwnerKind.JOB, name)

    # -- the book -------------------------------------------------------------
    def check(self, spec: JobSpec, tenants: TenantView) -> None:
        """Refuse a job that its tenant may not run, or that clashes with one booked."""
        _check_tenant(spec, tenants)
        if spec.name in self.jobs:
            raise JobError("name", f"a job named {spec.name!r} exists; delete it first", True)
        mine = {pair for pair, _ in spec.pairs()}
        for other in self.jobs.values():
            shared = sorted(mine & {pair for pair, _ in other.spec.pairs()})
            if shared:
                raise JobError(
                    "hosts",
                    f"{shared[0][0]} -> {shared[0][1]} already belongs to job {other.spec.name!r}",
                    True,
                )

    def add(
        self, spec: JobSpec, source: str = "api", lease: float | None = None, now: float = 0.0
    ) -> JobState:
        """Book a job; with a ``lease`` (seconds) it expires unless renewed, so the job of
        a launcher that died takes its rules with it."""
        self._order += 1
        job = self.jobs[spec.name] = JobState(spec, self._order, source=source)
        if lease is not None:
            job.lease, job.expires = lease, now + lease
        return job

    def renew(self, name: str, now: float) -> JobState:
        job = self.jobs.get(name)
        if job is None:
            raise JobError("name", f"no job named {brief(name)}")
        if job.lease is None:
            raise JobError("name", f"job {name!r} has no lease to renew", True)
        job.expires = now + job.lease
        return job

    def excuse(self, now: float, seconds: float) -> None:
        """Leases run on by ``seconds`` that their launchers could not renew (refused
        while the controller was held or away)."""
        for job in self.jobs.values():
            if job.expires is not None:
                job.expires += seconds

    def lapsed(self, now: float) -> list[Owner]:
        """Jobs whose lease ran out (their launcher stopped renewing), unbooked."""
        expired = sorted(
            n for n, j in self.jobs.items() if j.expires is not None and now >= j.expires
        )
        for name in expired:
            log.warning("job %s: lease expired, removed", name)
        return [self.remove(name) for name in expired]

    def remove(self, name: str) -> Owner:
        """Unbook a job; its owner, whose rules go."""
        if self.jobs.pop(name, None) is None:
            raise JobError("name", f"no job named {brief(name)}")
        return self.owner(name)

    def create(
        self, inputs: PlanInputs, spec: JobSpec, lease: float | None, now: float
    ) -> tuple[Plans, tuple[str, ...]]:
        """Book a job and place it: its plans, and its hosts not heard from yet. A job
        that fails to place is not left half booked."""
        self.check(spec, inputs.tenants)
        job = self.add(spec, lease=lease, now=now)
        try:
            return self.plan(inputs, [spec.name]), job.missing
        except Exception:  # nothing was committed: the job must not stay half registered
            self.remove(spec.name)
            raise

    def declare(self, wanted: dict[str, JobSpec]) -> None:
        """The policy file's jobs: those it no longer declares (or declares otherwise)
        go, new ones are booked after every job already booked."""
        for name, job in list(self.jobs.items()):
            if job.source == "policy" and wanted.get(name) != job.spec:
                del self.jobs[name]
        for name, spec in wanted.items():
            if name not in self.jobs:
                self.add(spec, source="policy")

    def host_seen(self, inputs: PlanInputs, host: Host, moved: bool) -> Plans:
        """Re-place the jobs waiting for the host, or holding it when it ``moved``."""
        ip = host.ip
        if not ip:
            return self.plan(inputs, [])
        waiting = [
            n for n, j in self.jobs.items() if ip in j.missing or (moved and ip in j.spec.hosts)
        ]
        return self.plan(inputs, waiting)

    def polled(self, topo: Topology) -> set[int]:
        """The switches of the jobs' hosts (their ingress rules count the bytes)."""
        members = {ip for job in self.jobs.values() for ip in job.spec.hosts}
        return {h.dpid for h in topo.hosts.values() if h.ip in members} if members else set()

    def flow_stats(self, now: float, dpid: int, stats: list[FlowStats]) -> None:
        """Byte counters of the jobs' ingress rules, and each pair's rate since the last."""
        by_ident = {job.spec.ident: job for job in self.jobs.values()}
        for s in stats:
            if cookie_kind(s.cookie) is CookieKind.JOB and s.match.get("in_port") is not None:
                job = by_ident.get(s.cookie & 0xFFFF_FFFF)
                if job is None:
                    continue
                key = (dpid, s.match)
                before, then = job.bytes_by_rule.get(key), job.counted_at.get(key)
                pair = (str(s.match.get("ipv4_src")), str(s.match.get("ipv4_dst")))
                if pair in job.paths and before is not None and then is not None and now > then:
                    job.sending[pair] = max(0, s.bytes - before) * 8 / (now - then)
                job.bytes_by_rule[key], job.counted_at[key] = s.bytes, now

    # -- planning -------------------------------------------------------------
    def plan(self, inputs: PlanInputs, names: Iterable[str]) -> Plans:
        """(Re)place the named jobs in booking order, each seeing the load of the jobs
        booked before it, and build their rules."""
        wanted = set(names)
        load: dict[PortRef, float] = {}
        booked = sorted(self.jobs.values(), key=lambda j: (-j.spec.priority, j.order))
        heaviest = max((j.spec.weight for j in booked), default=1)
        for job in booked:
            job.claim = job.spec.weight / heaviest
        topo = inputs.topo
        inside = server_of_ip(inputs.tenants.servers, topo.hosts, topo.host_by_ip)
        for job in booked:
            if job.spec.name in wanted:
                place_job(job, topo, inputs.routes, inputs.capacity, load, inside)
            for link, rate in job.link_load().items():
                load[link] = load.get(link, 0.0) + rate
        leaves = {h.dpid for h in inputs.topo.hosts.values()}
        wanted |= untangle(booked, inputs.capacity, inputs.routes.peer().of, leaves)
        wanted |= self._level(booked)
        return {
            self.owner(j.spec.name): job_plan(
                j, inputs.topo, inputs.routes, self.qos, self.levels[j.level]
            )
            for j in booked
            if j.spec.name in wanted
        }

    def _level(self, booked: list[JobState]) -> set[str]:
        """Each job's collective queue by priority, compressed onto the queues there are
        (:mod:`controller.priorities`); the jobs whose queue changed."""
        ranked = [(j.spec.name, j.spec.priority) for j in booked]
        conflicts: set[frozenset[str]] = set()
        if len({p for _, p in ranked}) > len(self.levels):  # only a compression weighs them
            conflicts = sharing({j.spec.name: set(j.link_load()) for j in booked})
        levels = compress(ranked, conflicts, len(self.levels))
        changed = {j.spec.name for j in booked if j.level != levels[j.spec.name]}
        for j in booked:
            j.level = levels[j.spec.name]
        return changed

    def plan_all(self, inputs: PlanInputs) -> Plans:
        return self.plan(inputs, list(self.jobs))


def _check_tenant(spec: JobSpec, tenants: TenantView) -> None:
    if not tenants.enforcing:
        return
    if spec.tenant not in tenants.ids:
        known = ", ".join(sorted(tenants.ids)) or "(none)"
        raise JobError("tenant", f"unknown tenant {spec.tenant!r}; expected one of {known}")
    for i, ip in enumerate(spec.hosts):
        if tenants.tenant_of_ip(ip) != spec.tenant:
            raise JobError(f"hosts[{i}]", f"{ip} is not a host of tenant {spec.tenant!r}")
    if spec.traffic_class not in tenants.classes_of(spec.tenant):
        raise JobError(
            "traffic_class", f"tenant {spec.tenant!r} may not use {spec.traffic_class!r}"
        )
