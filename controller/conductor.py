"""The core: domain events in, OpenFlow-shaped messages out.

``Conductor`` never sleeps, never reads a clock and never imports Ryu: the shim passes
``now`` and sends what each method returns. It updates what was learned and hands each
event to every plan source (``controller.hooks``) through the planner, which commits
what they plan (``controller.planner``); discovery is paced on its own
(``controller.discovery``). A port going down is handled at once, discovery bursts are
batched into the next ``tick``."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from controller.addressing import AddressBook
from controller.arp import ArpService, announce
from controller.cadence import lldp_on
from controller.config import FabricConfig as FabricConfig  # (re-exported)
from controller.delivery import recover_hosts
from controller.discovery import Discovery
from controller.hooks import PlanInputs
from controller.jobspec import JobSpec
from controller.lineup import assemble
from controller.model import (
    MAX_PHYSICAL_PORT,
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
    PacketIn,
    PortDesc,
    PortStats,
    cookie_kind,
    merge,
)
from controller.planner import Planner
from controller.rulestore import RuleStore
from controller.sync import SwitchSync
from controller.tenants import readmit
from controller.topology import Host, Topology

if TYPE_CHECKING:
    from controller.policy.schema import Policy

log = logging.getLogger("loom.fabric")


PROBES_PER_JOB = 64  # ARP probes a new job sends at once for hosts not heard from yet


class Conductor:
    """The conductor: turns each event into work for the plan sources, which the planner
    commits. ``timer`` (e.g. ``time.perf_counter``) only measures planning time."""

    def __init__(
        self, config: FabricConfig | None = None, timer: Callable[[], float] | None = None
    ) -> None:
        self.config = config or FabricConfig()
        self.topo, self.book, self.events = Topology(), AddressBook(), Counter[str]()
        self.store, self.sync = RuleStore(), SwitchSync(self.config.settle_time)
        timer = timer or (lambda: 0.0)
        self.sources, self.readings = assemble(self.config, self.topo, self.book, timer)
        self.discovery = Discovery(self.config, self.topo)
        self.planner = Planner(
            self.sources, self.topo, self.readings.capacity, self.store, self.sync,
            self.discovery, self.events, timer,
        )  # fmt: skip
        interval, wait = self.config.arp_probe_interval, self.config.arp_wait_timeout
        self.arp = ArpService(interval, wait, self.address_of)

    @property
    def inputs(self) -> PlanInputs:
        return self.planner.inputs

    def address_of(self, host: Host) -> str:
        """The MAC Loom hands out for ``host`` (see ``controller.addressing``); the first
        on a switch fixes its index, laid out on the fabric as learned so far."""
        if not self.book.fixed(host.dpid):
            self.planner.arrange()
        tenant = self.inputs.tenants.id_of(host.tenant)
        return self.book.address(host.mac, host.dpid, tenant, host.port)

    # -- switch lifecycle -----------------------------------------------------
    def switch_up(self, now: float, dpid: int, ports: list[PortDesc]) -> Messages:
        """A switch connected: read what it holds before changing anything (it may have
        kept forwarding while Loom was away), and start discovery."""
        self.events["switch_up"] += 1
        if dpid not in self.inputs.routes.index:  # a switch new to the routes: plan in a batch
            self.discovery.changed(now)
        self.topo.add_switch(dpid, ports)
        self.readings.telemetry.forget_switch(dpid)
        self.sync.connected(dpid)
        return merge(self._read_back(now, dpid), self.discovery.lldp_out(now, [dpid]))

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
        recover_hosts(now, self.inputs, self.book, (dpid, held), self.events)
        self.events["switch_adopted"] += 1
        if dpid in self.sync.repaired_at and not self.discovery.dirty:  # a repair: at once
            return self.planner.replan_all(now)
        self.discovery.changed(now)  # connected: planned in a batch (they come by the hundred)
        return {}

    def switch_down(self, now: float, dpid: int) -> Messages:
        self.events["switch_down"] += 1
        self.topo.remove_switch(dpid)
        self.sync.disconnected(dpid)
        self.store.forget_switch(dpid)
        self.readings.forget_switch(dpid)
        for source in self.sources:
            source.switch_down(dpid)
        return self.planner.replan_all(now)

    def port_status(self, now: float, dpid: int, desc: PortDesc, deleted: bool = False) -> Messages:
        """PortStatus: a dead port takes its links down now, without waiting for LLDP."""
        self.events["port_status"] += 1
        state = "deleted" if deleted else ("up" if desc.up else "down")
        log.info("port %016x:%d %s", dpid, desc.port_no, state)
        out: Messages = {}
        ends = self.topo.ends_at((dpid, desc.port_no)) if deleted or not desc.up else {}
        if self.topo.port_changed(dpid, desc, deleted, now):
            merge(out, self.planner.replan_all(now))
        if self.planner.replan_due:  # no routes yet: what cannot wait for them
            merge(out, self.planner.each(lambda source, inputs: source.link_down(inputs, ends)))
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
            self.discovery.heard(now, frame, (pkt.dpid, pkt.in_port))
            return {}
        if isinstance(frame, ArpFrame):
            self.events["arp_in"] += 1
            changed, packets = self.arp.handle(
                now, self.topo, pkt.dpid, pkt.in_port, frame, self.inputs.tenants
            )
            out = self.planner.host_changed(now, frame.sha) if changed else {}
            return merge(out, packets)
        if isinstance(frame, EthFrame) and cookie_kind(pkt.cookie) is CookieKind.CATCH:
            self.events["flow_in"] += 1
            first = replace(frame, eth_dst=self.book.host_at(frame.eth_dst) or frame.eth_dst)
            at = (pkt.dpid, pkt.in_port)
            return self.planner.each(lambda s, inputs: s.first_packet(now, inputs, at, first))
        if isinstance(frame, EthFrame):
            parts = self.store.parts
            event, out = self.sources.dests.reinject(self.inputs, pkt, frame, parts)
            self.events[event] += 1
            return out
        self.events["undecodable_in"] += 1
        return {}

    # -- counters ---------------------------------------------------------------
    def port_stats(self, now: float, dpid: int, stats: list[PortStats]) -> Messages:
        self.events["stats_unknown_port"] += self.readings.port_stats(now, dpid, stats)
        for source in self.sources:
            source.port_stats(now, dpid, stats)
        return {}

    def flow_stats(self, now: float, dpid: int, stats: list[FlowStats]) -> Messages:
        for source in self.sources:
            source.flow_stats(now, dpid, stats)
        return {}

    def group_stats(self, now: float, dpid: int, stats: list[GroupStats]) -> Messages:
        self.readings.telemetry.group_stats(now, dpid, stats)
        for source in self.sources:
            source.group_stats(now, dpid, stats)
        return {}

    # -- time -----------------------------------------------------------------
    def tick(self, now: float, held: bool = False) -> Messages:
        """Periodic work: expire links and ARP waits, apply batched changes, send LLDP.
        ``held``: a cluster member without its store keeps the fabric as it is."""
        out = self._settle(now)
        if not self.discovery.holds(now, held, self.sources):
            merge(out, self._age(now))
        self.arp.expire(now)
        if self.discovery.replan_due(now):
            merge(out, self.planner.replan_all(now))
        merge(out, self.planner.each(lambda source, inputs: source.tick(now, inputs)))
        merge(out, self.work(now))
        merge(out, self.discovery.poll(now, self.sources.polled(self.topo)))
        return merge(out, self.discovery.probes_due(now))

    def _age(self, now: float) -> Messages:
        """Links whose LLDP stopped and owners whose time ran out (job leases) go."""
        self.discovery.expire_links(now, self.readings.telemetry.receiving)
        out: Messages = {}
        for owner in [o for source in self.sources for o in source.lapsed(now)]:
            merge(out, self.store.remove(owner))
        return out

    def _settle(self, now: float) -> Messages:
        """Switches read back after a (re)connect, once discovery has been quiet: those
        held on their old rules get plans for the whole relearned fabric (so a restart
        rewrites nothing that was right), then what no plan claimed is removed."""
        settled, unheld = self.sync.settled(now, self.discovery.last_change)
        out = self.planner.replan_all(now) if unheld else {}
        return merge(out, self.planner.release(settled))

    @property
    def busy(self) -> bool:
        """Whether planning is left to do (``work``, see ``Planner.busy``)."""
        return self.planner.busy

    @property
    def settled(self) -> bool:
        """Nothing learned or planned is pending (a cluster member takes switches only then)."""
        s = self.sync
        return not (self.discovery.dirty or self.busy or s.reading or s.adopted_at or s.holding)

    def work(self, now: float) -> Messages:
        """The next slice of planning left over from a re-plan (the shim calls this until
        ``busy`` is false, yielding to other events in between; ``tick`` does one too)."""
        return self.planner.work(now)

    def drain_timings(self) -> list[tuple[str, float]]:
        """Planning durations since the last call, as (kind, seconds)."""
        return self.planner.drain_timings()

    def recompute(self, now: float) -> Messages:
        """Recompute every route and plan from scratch (what a topology change costs at
        most); only differences are sent."""
        return self.planner.replan_all(now)

    # -- tenants and jobs ---------------------------------------------------------
    def apply_policy(self, now: float, policy: Policy | None) -> Messages:
        """Put a validated policy in force, sending only what changes: tenants whose
        members and settings did not change keep every rule (a warm reload)."""
        self.planner.in_force(policy)
        moved = readmit(self.topo, self.inputs.tenants)
        self.sources.jobs.declare({j.name: j.spec() for j in policy.jobs} if policy else {})
        self.events["policy_applied"] += 1
        return merge(self.planner.replan_all(now), announce(self.topo, moved, self.address_of))

    def create_job(self, now: float, spec: JobSpec, lease: float | None = None) -> Messages:
        """Register a collective job: place and install its paths before its first byte.
        Up to ``PROBES_PER_JOB`` of its hosts not heard from yet are asked for at once
        (each probe floods every edge port); the others are found when they speak."""
        plans, missing = self.sources.jobs.create(self.inputs, spec, lease, now)
        out = self.planner.commit(plans)
        for ip in missing[:PROBES_PER_JOB]:
            merge(out, self.arp.probe(now, self.topo, ip))
        return out

    def delete_job(self, name: str) -> Messages:
        return self.store.remove(self.sources.jobs.remove(name))
