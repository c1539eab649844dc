"""The core: domain events in, OpenFlow-shaped messages out.

``Fabric`` never sleeps, never reads a clock and never imports Ryu: the shim passes
``now`` and sends what each method returns. Topology changes re-plan every part;
a host appearing re-plans only its destination switch; discovery bursts are batched
into the next ``tick`` while a port going down is handled at once.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from controller.arp import ArpService
from controller.collectives import (
    JobError,
    JobSpec,
    JobState,
    brief,
    job_plan,
    parse_job,
    place_job,
)
from controller.compiler import (
    Owner,
    Plan,
    RuleStore,
    base_plan,
    destination_plan,
    held_hosts,
    union_plans,
)
from controller.engineer import TeConfig, TrafficEngineer
from controller.model import (
    COOKIE_BASE,
    COOKIE_MARK_MASK,
    MAX_PHYSICAL_PORT,
    OFPP_CONTROLLER,
    OFPP_TABLE,
    ArpFrame,
    CookieKind,
    EthFrame,
    FlowRule,
    FlowStats,
    GroupRule,
    GroupStats,
    LldpFrame,
    Message,
    Messages,
    MeterRule,
    Output,
    PacketIn,
    PacketOut,
    PortDesc,
    PortStats,
    RawFrame,
    StatsKind,
    StatsRequest,
    SwitchRules,
    Table,
    cookie_kind,
    merge,
)
from controller.protection import Protection, protect, protection_plans
from controller.qos import ack_marks
from controller.routing import add_destination, compute_routes, empty_routes, infer_groups
from controller.telemetry import Telemetry
from controller.tenants import TenantView, admit_plan
from controller.topology import Topology

if TYPE_CHECKING:
    from controller.policy.schema import Job as PolicyJob
    from controller.policy.schema import Policy

log = logging.getLogger("loom.fabric")


def _spec_of(job: PolicyJob) -> JobSpec:
    return parse_job(job.model_dump())


DEFAULT_CAPACITY_BPS = 1e9  # a port that reports no speed
REPAIR_BACKOFF = 5.0  # seconds between two repairs of one switch after rejections
PROBES_PER_JOB = 64  # ARP probes a new job sends at once for hosts not heard from yet


@dataclass(frozen=True)
class FabricConfig:
    lldp_interval: float = 1.0
    lldp_timeout: float = 3.5
    arp_probe_interval: float = 1.0
    arp_wait_timeout: float = 3.0
    poll_interval: float = 0.5
    link_capacity_mbps: float | None = None  # overrides what ports report (emulated links)
    qos: bool = True  # DSCP classes and queues (off: jobs are placed but not prioritised)
    settle_time: float = 4.0  # after a switch is read back: when to drop what no plan claims
    fast_failover: bool = True  # failover groups with detours, so switches bridge link failures
    te: TeConfig = field(default_factory=TeConfig)


class Fabric:
    """``timer`` (e.g. ``time.perf_counter``) only measures planning time for metrics."""

    def __init__(
        self, config: FabricConfig | None = None, timer: Callable[[], float] | None = None
    ) -> None:
        self.config = config or FabricConfig()
        self.timer = timer or (lambda: 0.0)
        self.timings: list[tuple[str, float]] = []
        self.topo = Topology()
        self.store = RuleStore()
        self.arp = ArpService(self.config.arp_probe_interval, self.config.arp_wait_timeout)
        self.routes = empty_routes()
        self.telemetry = Telemetry()
        self.te = TrafficEngineer(self.config.te, self.timer, ack_marks(self.config.qos))
        self.jobs: dict[str, JobState] = {}
        self.tenants = TenantView.of(None)
        self._tenants_before: dict[str, set[str]] = {}  # host MAC -> tenant it was admitted in
        self._job_order = 0
        self.events: Counter[str] = Counter()
        self._dirty = False
        self._next_lldp = 0.0
        self._syncing: dict[int, float] = {}  # dpid -> when its contents were requested
        self._adopted_at: dict[int, float] = {}  # dpid -> when what it held was adopted
        self._holding: set[int] = set()  # switches kept on what they held until relearned
        self._repaired_at: dict[int, float] = {}  # dpid -> when a rejection last re-read it
        self._last_change = 0.0  # last time the routed graph changed
        self._protected = Protection()  # where failover groups stand
        self._tunnel_links: set[tuple[int, int]] = set()  # every link seen: stable tunnel ids
        self._next_poll = 0.0
        self._planned_at: dict[str, int] = {}  # host MAC -> destination switch it is routed to
        self._routed_macs: dict[int, set[str]] = {}

    # -- switch lifecycle -----------------------------------------------------
    def switch_up(self, now: float, dpid: int, ports: list[PortDesc]) -> Messages:
        """A switch connected: read what it holds before changing anything (it may have
        kept forwarding while Loom was away), and start discovery."""
        self.events["switch_up"] += 1
        self.topo.add_switch(dpid, ports)
        self.telemetry.forget_switch(dpid)
        self._repaired_at.pop(dpid, None)
        out = self._read_back(now, dpid)
        merge(out, self._lldp_for(dpid, self.topo.switches[dpid].live_ports()))
        return out

    def _read_back(self, now: float, dpid: int) -> Messages:
        """Ask a switch for everything it holds; nothing is planned for it until the
        answer is in (``switch_state``)."""
        self.store.forget_switch(dpid)
        self._syncing[dpid] = now
        self._adopted_at.pop(dpid, None)
        self._holding.discard(dpid)
        reads: list[Message] = [
            StatsRequest(kind, sync=True)
            for kind in (StatsKind.FLOW, StatsKind.GROUP_DESC, StatsKind.METER_CONFIG)
        ]
        return {dpid: reads}

    def rejected(self, now: float, dpid: int) -> Messages:
        """A switch refused a message (OFPT_ERROR): what Loom believes it holds is now
        wrong. Read it back and send the differences, as after a reconnect, but keep
        routing it meanwhile (no holding). At most once per ``REPAIR_BACKOFF`` seconds
        per switch, so a rule the switch can never accept does not loop."""
        self.events["switch_rejected"] += 1
        if dpid not in self.topo.switches or dpid in self._syncing:
            return {}
        if now - self._repaired_at.get(dpid, -REPAIR_BACKOFF) < REPAIR_BACKOFF:
            return {}
        self._repaired_at[dpid] = now
        self.events["switch_repaired"] += 1
        log.warning("switch %016x rejected a message: reading it back to repair it", dpid)
        return self._read_back(now, dpid)

    def switch_state(
        self,
        now: float,
        dpid: int,
        flows: list[FlowRule],
        groups: list[GroupRule],
        meters: list[MeterRule],
    ) -> Messages:
        """What a (re)connected switch holds: adopt it, recover its hosts from their
        delivery rules, then send only the differences. Rules no plan claims are removed
        once the fabric has been relearned (``settle``)."""
        if dpid not in self._syncing or dpid not in self.topo.switches:
            return {}
        del self._syncing[dpid]
        held = SwitchRules()
        for rule in flows:
            if cookie_kind(rule.cookie) is not None:  # Loom's own; others are left alone
                held.add_flow(rule)
        for group in groups:
            held.add_group(group)
        for meter in meters:
            held.meters[meter.meter_id] = meter
        self.store.adopt(dpid, held)
        self._adopted_at[dpid] = now
        repairing = dpid in self._repaired_at
        if held.flows and not repairing:  # it forwards on its own: no half-relearned plan
            self._holding.add(dpid)
        self._recover_hosts(now, dpid, held)
        self.events["switch_adopted"] += 1
        return self._replan_all(now)

    def _recover_hosts(self, now: float, dpid: int, held: SwitchRules) -> None:
        for mac, ip, port in held_hosts(held):
            tenant = self.tenants.tenant_of(mac, ip, dpid, port)
            if tenant is None:
                continue
            known = self.topo.hosts.get(mac)
            if known is None:  # a host that spoke since is fresher than its old rule
                self.topo.learn_host(now, mac, ip, dpid, port, tenant)
            if known is None or (known.dpid, known.port) == (dpid, port):
                self.events["host_recovered"] += 1

    def switch_down(self, now: float, dpid: int) -> Messages:
        self.events["switch_down"] += 1
        self.topo.remove_switch(dpid)
        self._holding.discard(dpid)
        self.store.forget_switch(dpid)
        self.telemetry.forget_switch(dpid)
        self.te.forget_switch(dpid)
        return self._replan_all(now)

    def port_status(self, now: float, dpid: int, desc: PortDesc, deleted: bool = False) -> Messages:
        """PortStatus: a dead port takes its links down now, without waiting for LLDP."""
        self.events["port_status"] += 1
        log.info(
            "port %016x:%d %s",
            dpid,
            desc.port_no,
            "deleted" if deleted else ("up" if desc.up else "down"),
        )
        out: Messages = {}
        if self.topo.port_changed(dpid, desc, deleted):
            merge(out, self._replan_all(now))
        if desc.up and not deleted and desc.port_no <= MAX_PHYSICAL_PORT:
            merge(out, self._lldp_for(dpid, [desc.port_no]))
        return out

    # -- packets --------------------------------------------------------------
    def packet_in(self, now: float, pkt: PacketIn) -> Messages:
        frame, switch = pkt.frame, self.topo.switches.get(pkt.dpid)
        if switch is None:
            return {}
        if pkt.in_port not in switch.ports or pkt.in_port > MAX_PHYSICAL_PORT:
            self.events["unknown_in_port"] += 1  # no such port: nothing to learn or answer
            return {}
        if isinstance(frame, LldpFrame):
            self.events["lldp_in"] += 1
            if self.topo.link_seen(now, (frame.dpid, frame.port), (pkt.dpid, pkt.in_port)):
                self._dirty = True
            return {}
        if isinstance(frame, ArpFrame):
            self.events["arp_in"] += 1
            changed, packets = self.arp.handle(
                now, self.topo, pkt.dpid, pkt.in_port, frame, self.tenants
            )
            out = self._replan_host(now, frame.sha) if changed else {}
            return merge(out, packets)
        if isinstance(frame, EthFrame) and cookie_kind(pkt.cookie) is CookieKind.CATCH:
            self.events["flow_in"] += 1
            return self._commit(
                self.te.caught(now, self.topo, self.routes, pkt.dpid, pkt.in_port, frame)
            )
        if isinstance(frame, EthFrame):
            return self._route_miss(pkt, frame)
        self.events["undecodable_in"] += 1
        return {}

    # -- counters ---------------------------------------------------------------
    def port_stats(self, now: float, dpid: int, stats: list[PortStats]) -> Messages:
        """Counters of ports the switch has (made-up port numbers: counted, dropped)."""
        switch = self.topo.switches.get(dpid)
        known = [s for s in stats if switch is not None and s.port_no in switch.ports]
        self.events["stats_unknown_port"] += len(stats) - len(known)
        self.telemetry.port_stats(now, dpid, known)
        return {}

    def flow_stats(self, now: float, dpid: int, stats: list[FlowStats]) -> Messages:
        self.te.counted(now, dpid, stats, self.capacity)
        by_ident = {job.spec.ident: job for job in self.jobs.values()}
        for s in stats:
            if cookie_kind(s.cookie) is CookieKind.JOB and s.match.get("in_port") is not None:
                job = by_ident.get(s.cookie & 0xFFFF_FFFF)
                if job is not None:
                    job.bytes_by_rule[(dpid, s.match)] = s.bytes
        return {}

    def group_stats(self, now: float, dpid: int, stats: list[GroupStats]) -> Messages:
        self.telemetry.group_stats(now, dpid, stats)
        return {}

    def capacity(self, ref: tuple[int, int]) -> float:
        """Bits/s of a port: the configured link capacity, else what the switch reports."""
        if self.config.link_capacity_mbps:
            return self.config.link_capacity_mbps * 1e6
        switch = self.topo.switches.get(ref[0])
        desc = switch.ports.get(ref[1]) if switch else None
        return desc.speed_kbps * 1e3 if desc and desc.speed_kbps else DEFAULT_CAPACITY_BPS

    def _route_miss(self, pkt: PacketIn, frame: EthFrame) -> Messages:
        """A packet that beat its route to a switch: re-inject it once the route exists.
        Between tenants there is no route on purpose: such packets are dropped here."""
        src, dst = self.topo.hosts.get(frame.eth_src), self.topo.hosts.get(frame.eth_dst)
        from_edge = not self.topo.is_fabric_port((pkt.dpid, pkt.in_port))
        crossing = src is None or dst is None or src.tenant != dst.tenant
        if self.tenants.enforcing and from_edge and crossing:
            self.events["isolation_dropped"] += 1
            return {}
        dest = self._planned_at.get(frame.eth_dst)
        rules = self.store.parts.get(("dest", dest), {}).get(pkt.dpid) if dest is not None else None
        if (
            not pkt.data
            or rules is None
            or not any(r.match.get("eth_dst") == frame.eth_dst for r in rules.flows.values())
        ):
            self.events["route_miss_dropped"] += 1
            return {}
        self.events["route_miss_reinjected"] += 1
        return {pkt.dpid: [PacketOut(pkt.in_port, (Output(OFPP_TABLE),), RawFrame(pkt.data))]}

    # -- time -----------------------------------------------------------------
    def tick(self, now: float) -> Messages:
        """Periodic work: expire links and ARP waits, apply batched changes, send LLDP."""
        out = self._settle(now)
        receiving = self.telemetry.receiving(now, 2 * self.config.poll_interval)
        expired = self.topo.expire_links(now, self.config.lldp_timeout, receiving)
        for link in expired:
            log.warning(
                "link %016x:%d -> %016x:%d: no LLDP for %.1f s, removed",
                *link.src,
                *link.dst,
                now - link.last_seen,
            )
        if expired:
            self._dirty = True
        self.arp.expire(now)
        if self._dirty:
            merge(out, self._replan_all(now))
        merge(
            out,
            self._commit(self.te.tick(now, self.topo, self.routes, self.telemetry, self.capacity)),
        )
        if now >= self._next_poll:
            self._next_poll = now + self.config.poll_interval
            merge(out, self._poll())
        if now >= self._next_lldp:
            self._next_lldp = now + self.config.lldp_interval
            for dpid in sorted(self.topo.switches):
                merge(out, self._lldp_for(dpid, self.topo.switches[dpid].live_ports()))
        return out

    def _settle(self, now: float) -> Messages:
        """Switches read back after a (re)connect, once discovery has been quiet: those
        held on their old rules get plans for the whole relearned fabric (so a restart
        rewrites nothing that was right), then what no plan claimed is removed."""
        settle = self.config.settle_time
        settled = [
            dpid
            for dpid, adopted in sorted(self._adopted_at.items())
            if now - adopted >= settle and now - self._last_change >= settle / 2
        ]
        out: Messages = {}
        if self._holding & set(settled):
            self._holding -= set(settled)
            out = self._replan_all(now)
        for dpid in settled:
            del self._adopted_at[dpid]
            if dpid in self.store.adopted:
                merge(out, {dpid: self.store.release(dpid)})
        return out

    def _poll(self) -> Messages:
        """Counters from every switch: ports and groups always; the PIN table's Loom
        rules (tracked flows, jobs) where flows or jobs enter."""
        flows = StatsRequest(StatsKind.FLOW, Table.PIN, COOKIE_BASE, COOKIE_MARK_MASK)
        ingresses = {f.ingress for f in self.te.flows.flows.values()}
        members = {ip for job in self.jobs.values() for ip in job.spec.hosts}
        ingresses |= {h.dpid for h in self.topo.hosts.values() if h.ip in members}
        out: Messages = {}
        for dpid in sorted(self.topo.switches):
            msgs: list[Message] = [StatsRequest(StatsKind.PORT), StatsRequest(StatsKind.GROUP)]
            if dpid in ingresses:
                msgs.append(flows)
            out[dpid] = msgs
        return out

    # -- planning -------------------------------------------------------------
    def _base_plan(self, dpid: int) -> Plan:
        fabric_ports = [p for d, p in self.topo.fabric_ports if d == dpid]
        catch, admit_all = self.config.te.enabled, not self.tenants.enforcing
        edges = self.topo.edge_ports(dpid)
        rules = base_plan(dpid, fabric_ports, catch, self.config.qos, admit_all, edges)
        return {dpid: rules}

    def _replan_base(self, dpid: int) -> Messages:
        return self._commit({("base", dpid): self._base_plan(dpid)})

    def _dest_plan(self, dest: int) -> Plan:
        if dest not in self.routes.ports:
            add_destination(self.routes, dest)
        hosts = self.topo.hosts_at(dest)
        switches = sorted(self.topo.switches)
        return destination_plan(
            dest, hosts, self.routes, switches, lambda h: self.tenants.id_of(h.tenant)
        )

    def _tenant_plans(self, names: set[str]) -> dict[Owner, Plan]:
        """ADMIT rules and meters of the named tenants' learned hosts (none when open)."""
        if not self.tenants.enforcing:
            return {}
        plans: dict[Owner, Plan] = {}
        for name in sorted(names):
            members = sorted(
                (h for h in self.topo.hosts.values() if h.tenant == name), key=lambda h: h.mac
            )
            plans[("tenant", name)] = admit_plan(self.tenants, name, members)
        return plans

    def _commit(self, plans: dict[Owner, Plan]) -> Messages:
        """Apply plans computed in full beforehand: an error while planning leaves what
        was sent and what the store believes in agreement."""
        out: Messages = {}
        staged = {o: self._ready(o, p) for o, p in plans.items()}
        # Failover groups are what routes point at: add them before, remove them after.
        for owner, plan in staged.items():
            if owner[0] == "protect":
                merge(
                    out,
                    self.store.replace(owner, union_plans(self.store.parts.get(owner, {}), plan)),
                )
        for owner, plan in staged.items():
            merge(out, self.store.replace(owner, plan))
            if owner[0] == "dest" and isinstance(owner[1], int):
                self._note_routed(owner[1], bool(plan))
        return out

    def _ready(self, owner: Owner, plan: Plan) -> Plan:
        if owner[0] in ("dest", "flow", "job") and self._protected:
            plan = protect(plan, self._protected)
        if self._syncing or self._holding:  # not read yet, or kept on what it holds
            plan = {
                dpid: rules
                for dpid, rules in plan.items()
                if dpid not in self._syncing and dpid not in self._holding
            }
        return plan

    def _note_routed(self, dest: int, planned: bool) -> None:
        """Track which switch each host MAC is routed to (for moves and route misses)."""
        for mac in self._routed_macs.pop(dest, set()):
            if self._planned_at.get(mac) == dest:
                del self._planned_at[mac]
        if planned:
            macs = {h.mac for h in self.topo.hosts_at(dest)}
            self._routed_macs[dest] = macs
            self._planned_at.update((mac, dest) for mac in macs)

    def drain_timings(self) -> list[tuple[str, float]]:
        """Planning durations since the last call, as (kind, seconds)."""
        out = self.timings + self.te.timings
        self.timings, self.te.timings = [], []
        return out

    def _replan_all(self, now: float) -> Messages:
        self._dirty = False
        self._last_change = max(self._last_change, now)
        self.events["replan_all"] += 1
        started = self.timer()
        dests = sorted({h.dpid for h in self.topo.hosts.values()})
        self.routes = compute_routes(self.topo.graph(), dests)
        plans: dict[Owner, Plan] = {
            ("base", d): self._base_plan(d) for d in sorted(self.topo.switches)
        }
        plans.update((("dest", d), self._dest_plan(d)) for d in dests)
        plans.update(self.te.replan_all(self.topo, self.routes))
        plans.update(self._job_plans(list(self.jobs)))
        plans.update(self._tenant_plans({h.tenant for h in self.topo.hosts.values()}))
        self._protected = Protection()
        if self.config.fast_failover:
            self._tunnel_links.update((u, k) for u, _, k in self.routes.graph.edges(keys=True))
            detours, self._protected = protection_plans(self.routes.graph, self._tunnel_links)
            plans.update((("protect", dpid), plan) for dpid, plan in detours.items())
        self.timings.append(("routes", self.timer() - started))
        for kind in ("base", "dest", "flow", "job", "tenant", "protect"):  # "quiet" expires alone
            for owner in self.store.owners(kind):
                plans.setdefault(owner, {})  # gone: switches, hosts, flows, jobs, tenants
        return self._commit(plans)

    def _replan_host(self, now: float, mac: str) -> Messages:
        """A host appeared or moved: re-plan its switch (and any switch it left)."""
        self.events["host_changed"] += 1
        if self._dirty:  # routes are stale: plan everything on the fresh graph
            return self._replan_all(now)
        host = self.topo.hosts[mac]
        plans: dict[Owner, Plan] = {("dest", host.dpid): self._dest_plan(host.dpid)}
        plans.update(self._tenant_plans({host.tenant} | self._tenants_before.get(mac, set())))
        self._tenants_before[mac] = {host.tenant}
        left = self._planned_at.get(mac)
        if left is not None and left != host.dpid:
            plans[("dest", left)] = self._dest_plan(left) if self.topo.hosts_at(left) else {}
        waiting = [
            n
            for n, j in self.jobs.items()
            if host.ip in j.missing or (host.ip in j.spec.hosts and left)
        ]
        plans.update(self._job_plans(waiting))
        return self._commit(plans)

    # -- tenants ------------------------------------------------------------------
    def apply_policy(self, now: float, policy: Policy | None) -> Messages:
        """Put a validated policy in force, sending only what changes: tenants whose
        members and settings did not change keep every rule (a warm reload)."""
        self.tenants = TenantView.of(policy)
        for host in list(self.topo.hosts.values()):
            tenant = self.tenants.tenant_of(host.mac, host.ip, host.dpid, host.port)
            if tenant is None:
                del self.topo.hosts[host.mac]  # no longer admitted: its routes go too
            elif tenant != host.tenant:
                self.topo.hosts[host.mac] = replace(host, tenant=tenant)
        wanted = {j.name: j for j in policy.jobs} if policy else {}
        for name, job in list(self.jobs.items()):
            if job.source == "policy" and (
                name not in wanted or _spec_of(wanted[name]) != job.spec
            ):
                del self.jobs[name]
        for name, declared in wanted.items():
            if name not in self.jobs:
                self._job_order += 1
                self.jobs[name] = JobState(_spec_of(declared), self._job_order, source="policy")
        self.events["policy_applied"] += 1
        return self._replan_all(now)

    def _check_job_tenant(self, spec: JobSpec) -> None:
        if not self.tenants.enforcing:
            return
        if spec.tenant not in self.tenants.ids:
            known = ", ".join(sorted(self.tenants.ids)) or "(none)"
            raise JobError("tenant", f"unknown tenant {spec.tenant!r}; expected one of {known}")
        for i, ip in enumerate(spec.hosts):
            if self.tenants.tenant_of_ip(ip) != spec.tenant:
                raise JobError(f"hosts[{i}]", f"{ip} is not a host of tenant {spec.tenant!r}")
        if spec.traffic_class not in self.tenants.classes_of(spec.tenant):
            raise JobError(
                "traffic_class", f"tenant {spec.tenant!r} may not use {spec.traffic_class!r}"
            )

    # -- jobs -------------------------------------------------------------------
    def create_job(self, now: float, spec: JobSpec) -> Messages:
        """Register a collective job: place and install its paths before its first byte.
        Up to ``PROBES_PER_JOB`` of its hosts not heard from yet are asked for at once
        (each probe floods every edge port); the others are found when they speak."""
        self._check_job_tenant(spec)
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
        self._job_order += 1
        self.jobs[spec.name] = JobState(spec, self._job_order)
        try:
            plans = self._job_plans([spec.name])
        except Exception:  # nothing was committed: the job must not stay half registered
            del self.jobs[spec.name]
            raise
        out = self._commit(plans)
        for ip in self.jobs[spec.name].missing[:PROBES_PER_JOB]:
            merge(out, self.arp.probe(now, self.topo, ip))
        return out

    def delete_job(self, name: str) -> Messages:
        if self.jobs.pop(name, None) is None:
            raise JobError("name", f"no job named {brief(name)}")
        return self.store.remove(("job", name))

    def _job_plans(self, names: list[str]) -> dict[Owner, Plan]:
        """(Re)place the named jobs in creation order, each seeing the load of the jobs
        placed before it, and build their rules."""
        load: dict[tuple[int, int], float] = {}
        plans: dict[Owner, Plan] = {}
        for job in sorted(self.jobs.values(), key=lambda j: j.order):
            if job.spec.name in names:
                place_job(job, self.topo, self.routes, self.capacity, load)
                plans[("job", job.spec.name)] = job_plan(
                    job, self.topo, self.routes, self.config.qos
                )
            for link, rate in job.link_load().items():
                load[link] = load.get(link, 0.0) + rate
        return plans

    def _lldp_for(self, dpid: int, ports: list[int]) -> Messages:
        msgs = [
            PacketOut(OFPP_CONTROLLER, (Output(p),), LldpFrame(dpid, p))
            for p in ports
            if p <= MAX_PHYSICAL_PORT
        ]
        return {dpid: list(msgs)} if msgs else {}

    # -- views ----------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The learned fabric as plain data (for the API, logs and the demo)."""
        links = sorted((link.src, link.dst) for link in self.topo.links.values())
        groups = infer_groups(self.topo.graph())  # of the links above, not of the last plan
        return {
            "switches": sorted(self.topo.switches),
            "links": [{"src": list(s), "dst": list(d)} for s, d in links],
            "hosts": [
                {"mac": h.mac, "ip": h.ip, "dpid": h.dpid, "port": h.port}
                for h in sorted(self.topo.hosts.values(), key=lambda h: (h.dpid, h.port, h.mac))
            ],
            "groups": None if groups is None else len(set(groups.values())),
        }
