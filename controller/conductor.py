"""The core: domain events in, OpenFlow-shaped messages out.

``Conductor`` never sleeps, never reads a clock and never imports Ryu: the shim passes
``now`` and sends what each method returns. Topology changes re-plan every part;
a host appearing re-plans only its destination switch; discovery bursts are batched
into the next ``tick`` while a port going down is handled at once.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from controller.addressing import AddressBook
from controller.arp import ArpService, announce
from controller.cadence import Away, Cadence, Reprobes, lldp_asked, lldp_on
from controller.compiler import held_hosts
from controller.config import FabricConfig as FabricConfig  # (re-exported)
from controller.delivery import Destinations
from controller.engineer import TrafficEngineer
from controller.jobs import JobBook
from controller.jobspec import JobSpec
from controller.limits import NO_LIMITS
from controller.linkloads import Meters
from controller.model import (
    MAX_PHYSICAL_PORT,
    OFPP_TABLE,
    ArpFrame,
    CookieKind,
    EthFrame,
    FlowRule,
    FlowStats,
    GroupRule,
    GroupStats,
    LldpFrame,
    Messages,
    MeterRule,
    Output,
    PacketIn,
    PacketOut,
    PortDesc,
    PortRef,
    PortStats,
    RawFrame,
    SwitchRules,
    cookie_kind,
    merge,
)
from controller.owners import OwnerKind, Plans
from controller.qos import ack_marks
from controller.readings import Readings
from controller.routekeeper import RouteKeeper
from controller.rulestore import RuleStore
from controller.sources import (
    BasePipeline,
    FastFailover,
    PlanInputs,
    PlanSource,
    Routing,
    TenantAdmission,
)
from controller.sync import SwitchSync
from controller.telemetry import poll_requests
from controller.tenants import TenantView, readmit
from controller.topology import Host, Topology

if TYPE_CHECKING:
    from controller.policy.schema import Policy

log = logging.getLogger("loom.fabric")


PROBES_PER_JOB = 64  # ARP probes a new job sends at once for hosts not heard from yet
DISCOVERY_QUIET = 0.25  # seconds without a new link before a batched re-plan
DISCOVERY_BATCH = 1.0  # ... or at most this long after the first change
RESEND_PER_CALL = 64  # switches whose LLDP a call sends again after a wave (3,072 frames at k=48)
# What the fabric may cost the event loop at rest: Ryu decodes and encodes each message
# in Python, so polls and LLDP are budgeted by what the shim can carry beside everything
# else (real switches at k=16: 4,096 LLDP frames and 640 polls a second kept a core busy).
POLL_RATE = 400.0  # switches polled a second at most (k=16: each every 0.8 s; k=48: 7.2 s)
LLDP_RATE = 1000.0  # LLDP frames a second at most (k=16: each port every 4.1 s)
# Rules a switch may go without (forwarding falls back to its routes): where a switch's
# profile caps flow entries, these are refused rather than overflow its tables.
OPTIONAL = (OwnerKind.FLOW, OwnerKind.JOB, OwnerKind.QUIET)


class Conductor:
    """The conductor: turns each event into work for the plan sources and commits their
    plans. ``timer`` (e.g. ``time.perf_counter``) only measures planning time."""

    def __init__(
        self, config: FabricConfig | None = None, timer: Callable[[], float] | None = None
    ) -> None:
        self.config = config or FabricConfig()
        self.timer = timer or (lambda: 0.0)
        self.timings: list[tuple[str, float]] = []
        self.topo = Topology()
        self.store = RuleStore()
        self.sync = SwitchSync(self.config.settle_time)
        self.book = AddressBook()
        self.arp = ArpService(
            self.config.arp_probe_interval, self.config.arp_wait_timeout, self.address_of
        )
        self.keeper = RouteKeeper()
        self.routes = self.keeper.routes
        self._replan_due = False  # a re-plan waits for its routes (computed over calls)
        self._releasing: set[int] = set()  # read-back switches to release once routed
        self._reguard: set[int] = set()  # switches whose routes new failover groups change
        self._wave: set[int] = set()  # switches given their first skeleton in this pass
        self._resend: set[int] = set()  # ... whose LLDP goes again once the wave is in
        self.tenants = TenantView.of(None)
        self.base = BasePipeline(self.config.te.enabled, self.config.qos, self.config.job_levels)
        self.routing = Routing(self.book)
        self.dests = Destinations(self.book)
        self.te = TrafficEngineer(self.config.te, self.timer, ack_marks(self.config.qos))
        mbps = self.config.link_capacity_mbps
        self.readings = Readings(self.topo, self.te.flows, mbps and mbps * 1e6, self.te.paths)
        self.telemetry, self.capacities = self.readings.telemetry, self.readings.capacities
        self.te.keeping = self.readings.gray.keeping
        self.te.meters = Meters(self.telemetry.tx_bps, self.capacity)
        self.jobs = JobBook(self.config.qos, self.config.job_levels)
        self.admission = TenantAdmission()
        self.limits = NO_LIMITS  # switch profiles (the policy's hardware section)
        self.failover = FastFailover(
            self.config.fast_failover, select_groups=self.routing.select_groups
        )
        self.failover.fresh_detours(self.config.fresh_detours)
        # The order of a full re-plan; failover last, as it protects what routes use.
        self.sources: tuple[PlanSource, ...] = (
            self.base,
            self.routing,
            self.dests,
            self.te,
            self.jobs,
            self.admission,
            self.failover,
        )
        self.events: Counter[str] = Counter()
        self._dirty = False
        self._dirty_since = 0.0  # when the learned graph first changed since the last plan
        self._changed_at = 0.0  # when it last changed
        self.polls = Cadence(self.config.poll_interval, POLL_RATE)
        self.lldp = Cadence(self.config.lldp_interval, LLDP_RATE)
        self.reprobes = Reprobes()
        self.away = Away()
        self._ports = 0  # live ports, for how far LLDP's interval is stretched
        self._last_change = 0.0  # last time the routed graph changed

    def address_of(self, host: Host) -> str:
        """The MAC Loom hands out for ``host`` (see ``controller.addressing``); the first
        on a switch fixes its index, laid out on the fabric as learned so far."""
        if not self.book.fixed(host.dpid) and self.routing.arrange(self.topo, self._dests):
            self._replan_due = True  # routes planned on the indexes before
        return self.book.address(host.mac, host.dpid, self.tenants.id_of(host.tenant), host.port)

    def inputs(self) -> PlanInputs:
        return PlanInputs(self.topo, self.routes, self.tenants, self.capacity, self.limits)

    # -- switch lifecycle -----------------------------------------------------
    def switch_up(self, now: float, dpid: int, ports: list[PortDesc]) -> Messages:
        """A switch connected: read what it holds before changing anything (it may have
        kept forwarding while Loom was away), and start discovery."""
        self.events["switch_up"] += 1
        if dpid not in self.routes.index:  # a switch new to the routes: plan in a batch
            self._mark_dirty(now)
        self.topo.add_switch(dpid, ports)
        self.telemetry.forget_switch(dpid)
        self.sync.connected(dpid)
        out = self._read_back(now, dpid)
        merge(out, self._send_lldp(now, [dpid]))
        return out

    def _read_back(self, now: float, dpid: int) -> Messages:
        self.store.forget_switch(dpid)
        return {dpid: self.sync.read_back(now, dpid)}

    def rejected(self, now: float, dpid: int) -> Messages:
        """A switch refused a message (OFPT_ERROR): what Loom believes it holds is now
        wrong. Read it back and send the differences, as after a reconnect, but keep
        routing it meanwhile (see ``controller.sync``)."""
        self.events["switch_rejected"] += 1
        if dpid not in self.topo.switches or not self.sync.may_repair(now, dpid):
            return {}
        self.events["switch_repaired"] += 1
        log.warning("switch %016x rejected a message: reading it back to repair it", dpid)
        return self._read_back(now, dpid)

    def take_over(self, now: float, dpid: int) -> Messages:
        """Now ``dpid``'s master (a cluster failover): read it back and send only what
        differs, routing it meanwhile (a repair, not held as after a restart)."""
        if dpid not in self.topo.switches:
            return {}
        self.sync.repaired_at[dpid] = now
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
        delivery rules, then send only the differences."""
        if not self.sync.awaited(dpid) or dpid not in self.topo.switches:
            return {}
        held = self.sync.adopt(now, dpid, flows, groups, meters)
        self.store.adopt(dpid, held)
        self._recover_hosts(now, dpid, held)
        self.events["switch_adopted"] += 1
        if dpid in self.sync.repaired_at and not self._dirty:  # a repair: at once
            return self._replan_all(now)
        self._mark_dirty(now)  # connected: planned in a batch (they come by the hundred)
        return {}

    def _recover_hosts(self, now: float, dpid: int, held: SwitchRules) -> None:
        for mac, ip, port, address in held_hosts(held):
            tenant = self.tenants.tenant_of(mac, ip, dpid, port)
            if tenant is None:
                continue
            self.book.adopt(dpid, mac, address)
            known = self.topo.hosts.get(mac)
            if known is None:  # a host that spoke since is fresher than its old rule
                self.topo.learn_host(now, mac, ip, dpid, port, tenant)
            if known is None or (known.dpid, known.port) == (dpid, port):
                self.events["host_recovered"] += 1

    def switch_down(self, now: float, dpid: int) -> Messages:
        self.events["switch_down"] += 1
        self.topo.remove_switch(dpid)
        self.sync.disconnected(dpid)
        self.store.forget_switch(dpid)
        self.telemetry.forget_switch(dpid)
        self.capacities.forget_switch(dpid)
        self.te.forget_switch(dpid)
        return self._replan_all(now)

    def port_status(self, now: float, dpid: int, desc: PortDesc, deleted: bool = False) -> Messages:
        """PortStatus: a dead port takes its links down now, without waiting for LLDP."""
        self.events["port_status"] += 1
        state = "deleted" if deleted else ("up" if desc.up else "down")
        log.info("port %016x:%d %s", dpid, desc.port_no, state)
        out: Messages = {}
        ends = self.topo.ends_at((dpid, desc.port_no)) if deleted or not desc.up else {}
        if self.topo.port_changed(dpid, desc, deleted, now):
            merge(out, self._replan_all(now))
        if self._replan_due:  # no routes yet: the ends keep theirs, without the dead link
            guarded = self.failover.protection.first
            merge(out, self._commit(self.routing.interim(self.inputs(), ends, guarded, True)))
        if desc.up and not deleted and desc.port_no <= MAX_PHYSICAL_PORT:
            merge(out, lldp_on(dpid, [desc.port_no], now))
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
            if self.topo.link_seen(
                now, (frame.dpid, frame.port), (pkt.dpid, pkt.in_port), frame.sent
            ):
                self._mark_dirty(now)
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
            frame = replace(frame, eth_dst=self.book.host_at(frame.eth_dst) or frame.eth_dst)
            at = (pkt.dpid, pkt.in_port)
            return self._commit(self.te.caught(now, self.topo, self.routes, at, frame))
        if isinstance(frame, EthFrame):
            return self._route_miss(pkt, frame)
        self.events["undecodable_in"] += 1
        return {}

    def _route_miss(self, pkt: PacketIn, frame: EthFrame) -> Messages:
        """A packet that beat its route to a switch: re-inject it once the route exists.
        Between tenants there is no route on purpose: such packets are dropped here."""
        dst_mac = self.book.host_at(frame.eth_dst)
        src, dst = self.topo.hosts.get(frame.eth_src), self.topo.hosts.get(dst_mac or "")
        from_edge = not self.topo.is_fabric_port((pkt.dpid, pkt.in_port))
        crossing = src is None or dst is None or src.tenant != dst.tenant
        if self.tenants.enforcing and from_edge and crossing:
            self.events["isolation_dropped"] += 1
            return {}
        dest = self.dests.routed_to(dst_mac) if dst_mac else None
        delivery = self.store.parts.get((OwnerKind.DEST, dest), {}).get(dest or 0)
        routed = dest == pkt.dpid or (OwnerKind.ROUTE, pkt.dpid) in self.store.parts
        flows = delivery.flows.values() if delivery is not None else ()
        if not (
            pkt.data and routed and any(r.match.get("eth_dst") == frame.eth_dst for r in flows)
        ):
            self.events["route_miss_dropped"] += 1
            return {}
        self.events["route_miss_reinjected"] += 1
        return {pkt.dpid: [PacketOut(pkt.in_port, (Output(OFPP_TABLE),), RawFrame(pkt.data))]}

    # -- counters ---------------------------------------------------------------
    def port_stats(self, now: float, dpid: int, stats: list[PortStats]) -> Messages:
        self.events["stats_unknown_port"] += self.readings.port_stats(now, dpid, stats)
        return {}

    def flow_stats(self, now: float, dpid: int, stats: list[FlowStats]) -> Messages:
        self.te.counted(now, dpid, stats)
        self.jobs.counted(now, dpid, stats)
        return {}

    def group_stats(self, now: float, dpid: int, stats: list[GroupStats]) -> Messages:
        self.telemetry.group_stats(now, dpid, stats)
        return {}

    def load(self, link: PortRef) -> float:
        return self.readings.load(link)

    def capacity(self, ref: PortRef) -> float:
        return self.readings.capacity(ref)

    # -- time -----------------------------------------------------------------
    def tick(self, now: float, held: bool = False) -> Messages:
        """Periodic work: expire links and ARP waits, apply batched changes, send LLDP.
        ``held``: a cluster member without its store keeps the fabric as it is."""
        out = self._settle(now)
        if not self.away.holds(now, held, self.topo, self.jobs):
            merge(out, self._age(now))
        self.arp.expire(now)
        quiet = now - self._changed_at >= DISCOVERY_QUIET
        if self._dirty and (quiet or now - self._dirty_since >= DISCOVERY_BATCH):
            merge(out, self._replan_all(now))
        merge(out, self._commit(self.te.tick(now, self.topo, self.routes)))
        merge(out, self.work(now))
        merge(out, self._poll(self.polls.due(now, dict.fromkeys(self.topo.switches, 1.0))))
        weights = {d: float(len(s.ports)) for d, s in self.topo.switches.items()}
        self._ports = int(sum(weights.values()))
        merge(out, self._send_lldp(now, self.lldp.due(now, weights)))
        merge(out, self.reprobes.due(now, self.topo.unlinked_ports))
        return out

    def _age(self, now: float) -> Messages:
        """Links whose LLDP stopped and jobs whose lease ran out go."""
        out: Messages = {}
        window = 2 * self.polls.period(len(self.topo.switches))
        receiving = lambda: self.telemetry.receiving(now, window)  # noqa: E731
        period = self.lldp.period(self._ports)
        timeout = self.config.lldp_timeout * period / self.config.lldp_interval
        asked = lldp_asked(self.lldp, self.topo.heard_at, now, period, timeout)
        expired = self.topo.expire_links(now, timeout, receiving, asked)
        for link in expired:
            log.warning("link %016x:%d -> %016x:%d: no LLDP for %.1f s, removed", *link.src,
                        *link.dst, now - link.last_seen)  # fmt: skip
        if expired:
            self._mark_dirty(now)
        for name in self.jobs.expired(now):
            log.warning("job %s: lease expired, removed", name)
            merge(out, self.delete_job(name))
        return out

    def _mark_dirty(self, now: float) -> None:
        """The learned graph changed: re-plan once discovery pauses (a fabric coming up
        finds thousands of links within a second; each re-plan costs the whole fabric)."""
        if not self._dirty:
            self._dirty, self._dirty_since = True, now
        self._changed_at = now

    def _settle(self, now: float) -> Messages:
        """Switches read back after a (re)connect, once discovery has been quiet: those
        held on their old rules get plans for the whole relearned fabric (so a restart
        rewrites nothing that was right), then what no plan claimed is removed."""
        settled, unheld = self.sync.settled(now, self._last_change)
        out = self._replan_all(now) if unheld else {}
        self._releasing.update(d for d in settled if d in self.store.adopted)
        merge(out, self._release_routed())
        return out

    def _release_routed(self) -> Messages:
        """Drop what no plan claimed on settled switches, once their routes are planned."""
        out: Messages = {}
        for dpid in sorted(self._releasing - self.routing.pending):
            self._releasing.discard(dpid)
            if dpid in self.store.adopted:
                out[dpid] = self.store.release(dpid)
        return out

    @property
    def busy(self) -> bool:
        """Whether planning is left to do (``work``): switches whose skeletons, routes or
        detours are out of date, a re-plan waiting for its routes. Skeletons (and the LLDP
        they let through) always: discovery through a switch waits for its LLDP catch
        rule; the rest not while discovery goes on (planned on routes about to change,
        they would be planned again)."""
        if self.base.pending or self._resend:
            return True
        if self._dirty:
            return False
        return bool(
            self._replan_due or self.routing.pending or self.failover.waiting or self._reguard
        )

    @property
    def settled(self) -> bool:
        """Nothing learned or planned is pending (a cluster member takes switches only then)."""
        s = self.sync
        return not (self._dirty or self.busy or s.reading or s.adopted_at or s.holding)

    def work(self, now: float) -> Messages:
        """The next slice of planning left over from a re-plan (the shim calls this until
        ``busy`` is false, yielding to other events in between; ``tick`` does one too):
        switch skeletons, then routes, then detours."""
        if not self.busy:
            return {}
        if self.base.pending:
            return self._commit_based(now, self.base.plan_pending(self.inputs()))
        if self._resend:
            some = sorted(self._resend)[:RESEND_PER_CALL]
            self._resend.difference_update(some)
            return self._send_lldp(now, some)
        if self._replan_due:  # skeletons need no routes: those due first, in calls of their own
            return {} if self.base.refresh(self.inputs()) else self._replan_all(now)
        if self.routing.pending:
            out = self._commit(self.routing.plan_pending(self.inputs()))
            merge(out, self._release_routed())
            return out
        if self.failover.waiting:  # more detours; once all are in, the routes they change
            before = self.failover.protection
            plans = self.failover.plan_all(self.inputs())  # (routes to groups that go: first)
            lost, first = self.failover.lost(before), self.failover.protection.first
            self._reguard.update(self.failover.moved(before) & self.routing.planned().keys())
            return self._commit({**self.routing.interim(self.inputs(), lost, first), **plans})
        planned = self.routing.planned()  # routes guarded by new failover groups, a slice
        some = sorted(self._reguard)[: self.routing.slice_size()]
        self._reguard.difference_update(some)
        return self._commit({(OwnerKind.ROUTE, d): planned[d] for d in some if d in planned})

    def _poll(self, due: list[int]) -> Messages:
        """Counters from the switches ``due`` (``telemetry.poll_requests``)."""
        ingresses = {f.ingress for f in self.te.flows.flows.values()}
        members = self.jobs.members()
        if members:
            ingresses |= {h.dpid for h in self.topo.hosts.values() if h.ip in members}
        return poll_requests(due, self.topo.edge_ports, ingresses)

    # -- planning -------------------------------------------------------------
    def _commit(self, plans: Plans) -> Messages:
        """Apply plans computed in full beforehand: an error while planning leaves what
        was sent and what the store believes in agreement."""
        out: Messages = {}
        if not (self.sync.reading or self.sync.holding):  # what is sent as is and was: done
            held = self.store.parts
            plans = {o: p for o, p in plans.items() if o[0].follows_routes or held.get(o) is not p}
        staged = {o: self.sync.writable(self.failover.guard(o, p)) for o, p in plans.items()}
        for owner in [o for o in staged if o[0] in OPTIONAL]:
            if not self.store.fits(owner, staged[owner], self._flow_cap):
                del staged[owner]  # what it had stays (a pinned flow keeps its old path)
                self.events[f"limit_refused.{owner[0]}"] += 1
        for owner, plan in staged.items():  # failover groups first: routes point at them
            first = self.failover.before_routes(owner, plan, self.store.parts.get(owner, {}))
            if first is not None:
                merge(out, self.store.replace(owner, first))
        for owner, plan in staged.items():
            same = self.store.parts.get(owner) is plan
            merge(out, self.store.replace(owner, plan))
            if owner[0] is OwnerKind.DEST and isinstance(owner[1], int) and not same:
                self.dests.committed(self.topo, owner[1], bool(plan))
        return self.store.ordered(out)

    def _flow_cap(self, dpid: int) -> int | None:
        return self.limits.of(dpid).flows

    def drain_timings(self) -> list[tuple[str, float]]:
        """Planning durations since the last call, as (kind, seconds)."""
        out = self.timings + self.te.timings
        self.timings, self.te.timings = [], []
        return out

    def recompute(self, now: float) -> Messages:
        """Recompute every route and plan from scratch (what a topology change costs at
        most); only differences are sent."""
        return self._replan_all(now)

    def _replan_all(self, now: float) -> Messages:
        """Every source plans from fresh routes; owners no source claims any more go.
        Routes that take more than a call (the fabric changed as a whole) leave the
        re-plan due: ``work`` goes on with them, and plans once they are whole."""
        self._dirty = False
        self._last_change = max(self._last_change, now)
        started = self.timer()
        self._replan_due = not self.keeper.advance(self.topo, self._dests())
        if self._replan_due:  # (``work`` goes on with it)
            self.timings.append(("routes", self.timer() - started))
            return {}
        self.routes = self.keeper.routes
        self.events["replan_all"] += 1
        inputs, plans, before = self.inputs(), {}, self.failover.protection
        for source in self.sources:
            plans.update(source.plan_all(inputs))
        self.timings.append(("routes", self.timer() - started))
        # switches waiting for their turn keep what they hold, but not into a dead link nor
        # through a failover group that just went (``controller.repair``)
        changed = self.failover.lost(before) | self.routing.urgent
        plans = {**self.routing.interim(inputs, changed, self.failover.protection.first), **plans}
        waiting = {(OwnerKind.ROUTE, d) for d in self.routing.pending} - plans.keys()
        waiting.update((OwnerKind.BASE, d) for d in self.base.pending)
        swept = {kind for source in self.sources for kind in source.kinds}
        for owner in self.store.parts:  # (every owner once, not once per kind)
            if owner[0] in swept and owner not in waiting:
                plans.setdefault(owner, {})
        return self._commit_based(now, plans)

    def _commit_based(self, now: float, plans: Plans) -> Messages:
        """Commit ``plans``; a switch whose first base plan goes out sends LLDP at once
        (its catch rule is in: discovery through it starts now), and again once the
        skeletons of the whole wave are in: a neighbour whose catch rule came in a later
        slice missed the first frames, which the next round would resend only after
        seconds (LLDP is paced by ``LLDP_RATE``)."""
        bases = [o for o in plans if o[0] is OwnerKind.BASE and o not in self.store.parts]
        fresh = [d for _, d in bases if isinstance(d, int)]
        out = self._commit(plans)
        fresh = [d for d in fresh if (OwnerKind.BASE, d) in self.store.parts]
        self._wave.update(fresh)
        if not self.base.pending:  # (the rest of the wave: a slice a call, in ``work``)
            self._resend.update(self._wave.difference(fresh))
            self._wave = set()
        for dpid in fresh:
            self.reprobes.start(now, dpid)
        merge(out, self._send_lldp(now, fresh))
        return out

    def _send_lldp(self, now: float, dpids: list[int]) -> Messages:
        """LLDP out of every live port of ``dpids`` (visited now, for the pacing)."""
        out: Messages = {}
        for dpid in dpids:
            if dpid in self.topo.switches:
                merge(out, lldp_on(dpid, self.topo.switches[dpid].live_ports(), now))
                self.lldp.visited(now, dpid)
        return out

    def _dests(self) -> list[int]:
        """Switches hosts can be on: those with edge ports (or hosts)."""
        dests = set(self.topo.host_switches())
        dests.update(d for d in self.topo.switches if self.topo.edge_ports(d))
        return sorted(dests)

    def _replan_host(self, now: float, mac: str) -> Messages:
        """A host appeared or moved: re-plan its switch (and any switch it left)."""
        self.events["host_changed"] += 1
        if self._dirty:  # routes are stale: plan everything on the fresh graph
            return self._replan_all(now)
        host, inputs = self.topo.hosts[mac], self.inputs()
        moved = bool(self.dests.routed_to(mac))
        plans = self.dests.host_moved(inputs, host)
        plans.update(self.admission.host_moved(inputs, host))
        waiting = self.jobs.waiting_for(host.ip, moved) if host.ip else []
        plans.update(self.jobs.plan(inputs, waiting))
        return self._commit(plans)

    # -- tenants ------------------------------------------------------------------
    def apply_policy(self, now: float, policy: Policy | None) -> Messages:
        """Put a validated policy in force, sending only what changes: tenants whose
        members and settings did not change keep every rule (a warm reload)."""
        self.tenants = TenantView.of(policy)
        self.limits = policy.hardware.limits() if policy else NO_LIMITS
        moved = readmit(self.topo, self.tenants)
        self.jobs.declare({j.name: j.spec() for j in policy.jobs} if policy else {})
        self.events["policy_applied"] += 1
        return merge(self._replan_all(now), announce(self.topo, moved, self.address_of))

    # -- jobs -------------------------------------------------------------------
    def create_job(self, now: float, spec: JobSpec, lease: float | None = None) -> Messages:
        """Register a collective job: place and install its paths before its first byte.
        Up to ``PROBES_PER_JOB`` of its hosts not heard from yet are asked for at once
        (each probe floods every edge port); the others are found when they speak."""
        self.jobs.check(spec, self.tenants)
        job = self.jobs.add(spec, lease=lease, now=now)
        try:
            plans = self.jobs.plan(self.inputs(), [spec.name])
        except Exception:  # nothing was committed: the job must not stay half registered
            self.jobs.remove(spec.name)
            raise
        out = self._commit(plans)
        for ip in job.missing[:PROBES_PER_JOB]:
            merge(out, self.arp.probe(now, self.topo, ip))
        return out

    def delete_job(self, name: str) -> Messages:
        self.jobs.remove(name)
        return self.store.remove(self.jobs.owner(name))
