"""Adaptive routing: track flows, place them, move elephants off congestion. The stateful
half of traffic engineering (a plan source); the placement maths is pure, in
``controller.placement``.

The ``TrafficEngineer`` is the plan source (its hooks: ``controller.hooks``): it owns the
tracked flows and the path each pinned flow takes, and hands each event to the concern
it is about:

- a flow's first packet: the flood guard (``controller.floodguard``) first, then
  first-packet placement (``controller.firstpacket``), which admits it under the tracked
  flows' bound and pins it onto the least-loaded of its equal-cost paths;
- every ``te_interval``: elephant placement (``controller.elephants``), which moves the
  measured elephants make-before-break, and the ACK streams (``controller.ackstreams``),
  which follow their elephants' paths back and are marked into the control class.

Both placements weigh the links from one snapshot per round (``controller.linkloads``),
read from the meters it is given (``meters``, by ``controller.lineup``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Hashable, Mapping

from controller.ackstreams import AckStreams
from controller.compiler import flow_plan
from controller.elephants import ElephantPlacer, Round, Staged, owner_of
from controller.firstpacket import FirstPacketPlacer
from controller.floodguard import FloodGuard
from controller.flows import FlowKey, FlowTable, TrackedFlow
from controller.hooks import PlanInputs, PlanSource
from controller.linkloads import LinkLoads, Meters
from controller.model import Action, CookieKind, EthFrame, FlowStats, PortRef, Table, cookie_kind
from controller.owners import Owner, OwnerKind, Plan, Plans
from controller.placement import Path
from controller.recolour import Recolouring
from controller.routing import Routes
from controller.teconfig import TeConfig as TeConfig
from controller.topology import Topology
from controller.vocabulary import POLICIES

log = logging.getLogger("loom.te")
NO_METERS = Meters(lambda link: 0.0, lambda link: 0.0)  # until it is given its own


class TrafficEngineer(PlanSource):
    kinds: tuple[OwnerKind, ...] = (OwnerKind.FLOW,)  # quiet ports expire on their own

    def __init__(
        self,
        config: TeConfig,
        timer: Callable[[], float] = lambda: 0.0,
        ack_marks: tuple[Action, ...] = (),
    ) -> None:
        if config.path_policy not in POLICIES:
            raise ValueError(f"path_policy must be one of {POLICIES}, got {config.path_policy!r}")
        self.config = config
        self.flows = FlowTable(config.elephant_share, config.flow_idle_timeout)
        self.paths: dict[FlowKey, Path] = {}  # every pinned flow's path, shared below
        self.events: Counter[str] = Counter()
        self.meters = NO_METERS  # each link's transmit rate and capacity (set by the owner)
        self.timer = timer  # measures planning time for metrics; never decides anything
        self.timings: list[tuple[str, float]] = []
        marks = ack_marks if config.ack_priority else ()
        self.ackstreams = AckStreams(self.flows, self.paths, marks)
        bounds = (config.max_flows, config.flows_per_host)
        self.newflows = FirstPacketPlacer(
            self.flows, self.paths, self.ackstreams, bounds, self.events
        )
        self.guard = FloodGuard(config.new_flows_per_port, config.quiet_seconds, self.events)
        self.elephants = ElephantPlacer(config, self.flows, self.paths, self.events)
        self._instant: LinkLoads | None = None  # the links as first packets weigh them now
        self._next_run = 0.0

    # -- what other parts read ------------------------------------------------
    @property
    def quiet(self) -> dict[PortRef, float]:
        return self.guard.quiet

    @property
    def acks(self) -> set[FlowKey]:
        return self.ackstreams.marked

    @property
    def staged(self) -> dict[FlowKey, Staged]:
        return self.elephants.staged

    @property
    def moved_at(self) -> dict[FlowKey, float]:
        return self.elephants.moved_at

    @property
    def engineered(self) -> set[FlowKey]:
        return self.elephants.engineered

    @property
    def reroutes(self) -> Counter[str]:
        return self.elephants.reroutes

    @property
    def last_max_utilization(self) -> float:
        return self.elephants.last_max_utilization

    @property
    def recolouring(self) -> Recolouring:
        return self.elephants.recolouring

    @property
    def keeping(self) -> Callable[[], Mapping[Hashable, frozenset[PortRef]]]:
        return self.elephants.keeping

    @keeping.setter
    def keeping(self, keeping: Callable[[], Mapping[Hashable, frozenset[PortRef]]]) -> None:
        self.elephants.keeping = keeping

    # -- events ---------------------------------------------------------------
    def first_packet(self, now: float, inputs: PlanInputs, at: PortRef, frame: EthFrame) -> Plans:
        """The first packet of a flow from a host (at switch port ``at``): start
        accounting for it and, with ``place_new``, pin it onto the least-loaded of its
        equal-cost paths. A port that opens flows faster than ``new_flows_per_port`` (a
        scan, a flood) is no longer copied to the controller for ``quiet_seconds``."""
        (dpid, port), topo, routes = at, inputs.topo, inputs.routes
        if (dpid, port) in self.guard.quiet:  # the switch's backlog from before the pause
            return {}
        key = FlowKey.of_frame(frame)
        src, dst = topo.hosts.get(frame.eth_src), topo.hosts.get(frame.eth_dst)
        if key is None or src is None or dst is None or (src.dpid, src.port) != (dpid, port):
            return {}
        if key in self.flows.flows or self.newflows.full(key, len(topo.hosts)):
            return {}
        quieted = self.guard.opened(now, (dpid, port))
        if quieted is not None:
            return quieted
        self.flows.seen(now, key, src.mac, dst.mac, dpid, port)
        if self.ackstreams.is_stream(key):
            self.ackstreams.streams.add(key)
        if self.config.place_new:
            self.newflows.place(key, dpid, dst.dpid, routes, self._links_now(now))
        return {owner_of(key): self._plan(self.flows.flows[key], topo, routes)}

    def _links_now(self, now: float) -> LinkLoads:
        """The links as measured now, one snapshot for every first packet of this instant:
        a burst of new flows (a job's first step: thousands at once) weighs the same links
        again and again, and a link's measured load changes only with the next reading."""
        if self._instant is None or self._instant.at != now:
            self._instant = self.meters.at(now)
        return self._instant

    def flow_stats(self, now: float, dpid: int, stats: list[FlowStats]) -> None:
        for s in stats:
            if s.table != Table.PIN or cookie_kind(s.cookie) is not CookieKind.FLOW:
                continue
            key = FlowKey.of_match(s.match)
            flow = self.flows.flows.get(key) if key else None
            if flow is not None and flow.ingress == dpid and s.match.get("in_port") is not None:
                measured = flow.sampled_at is not None  # this reading gives it a rate
                capacity = self.meters.capacity((dpid, flow.in_port))
                self.flows.counted(now, flow.key, s.bytes, capacity)
                if measured:
                    self.newflows.grown_up(flow.key)

    def switch_down(self, dpid: int) -> None:
        for flow in self.flows.forget_switch(dpid):
            self._drop(flow.key)

    def polled(self, topo: Topology) -> set[int]:
        """The ingress switches of the tracked flows (their pins count the bytes)."""
        return {f.ingress for f in self.flows.flows.values()}

    def drain_timings(self) -> list[tuple[str, float]]:
        out, self.timings = self.timings, []
        return out

    # -- planning -------------------------------------------------------------
    def tick(self, now: float, inputs: PlanInputs) -> Plans:
        topo, routes = inputs.topo, inputs.routes
        plans: Plans = {}
        for flow in self.flows.expire(now):
            log.debug("forgot idle flow %s after %.1f s", flow.key, now - flow.first_seen)
            self._drop(flow.key)
            plans[owner_of(flow.key)] = {}
        plans.update(self.guard.expire(now))
        plans.update(self.elephants.due(now))
        if self.config.enabled and now >= self._next_run:
            self._next_run = now + self.config.te_interval
            started = self.timer()
            plans.update(self._engineer(now, topo, routes, self.meters.at(now)))
            self.timings.append(("te", self.timer() - started))
        return plans

    def plan_all(self, inputs: PlanInputs) -> Plans:
        return self.replan_all(inputs.topo, inputs.routes)

    def replan_all(self, topo: Topology, routes: Routes) -> dict[Owner, Plan]:
        """After a topology change: keep pins whose paths survive, drop the others (the
        default routes carry those flows until the next placement)."""
        self.elephants.staged.clear()
        live_links: set[tuple[Hashable, int]] = set()  # (no pin: no pass over every link)
        if self.paths:
            live_links = {(u, p) for u, edges in routes.out.items() for p, _, _ in edges}
        for key, path in list(self.paths.items()):
            if not all(link in live_links for link in path):
                log.info("path of %s lost %s", key, [lk for lk in path if lk not in live_links])
                del self.paths[key]
                self.newflows.grown_up(key)
                if (flow := self.flows.flows.get(key)) is not None and flow.elephant:
                    self.reroutes["link_down"] += 1  # (a mouse back on its default: no news)
        self._next_run = 0.0
        return {owner_of(f.key): self._plan(f, topo, routes) for f in self.flows.flows.values()}

    def _engineer(
        self, now: float, topo: Topology, routes: Routes, links: LinkLoads
    ) -> dict[Owner, Plan]:
        """One round on one snapshot of the links: elephants placed, then their ACK
        streams following them and marked."""
        elephants = [f for f in self.flows.elephants() if f.dst_mac in topo.hosts]

        def plan(flow: TrackedFlow) -> Plan:
            return self._plan(flow, topo, routes)

        plans = self.elephants.place(Round(now, elephants, topo, routes, links), plan)
        if elephants and self.config.place_new:
            for back in self.ackstreams.follow(elephants, topo, routes):
                plans[owner_of(back.key)] = plan(back)
        for key in self.ackstreams.mark(elephants):  # (with none: unmark what was marked)
            plans[owner_of(key)] = plan(self.flows.flows[key])
        return plans

    def _plan(self, flow: TrackedFlow, topo: Topology, routes: Routes) -> Plan:
        dst = topo.hosts.get(flow.dst_mac)
        dest = dst.dpid if dst else flow.ingress
        marks = self.ackstreams.marks if flow.key in self.ackstreams.marked else ()
        return flow_plan(
            flow.key, flow.ingress, flow.in_port, self.paths.get(flow.key), dest, routes, marks
        )

    def _drop(self, key: FlowKey) -> None:
        self.ackstreams.drop(key)
        self.newflows.grown_up(key, gone=True)
        self.elephants.drop(key)
        self.paths.pop(key, None)
