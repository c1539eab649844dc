"""Adaptive routing: track flows, find elephants, move them off congestion. The stateful
half of traffic engineering (a plan source); the placement maths is pure, in
``controller.placement``.

The ``TrafficEngineer`` owns the tracked flows and where each elephant is pinned. Every
``te_interval`` it builds the placement problem from measurements (elephant demands by
Hedera's estimator, link capacities, the load that is not elephants) and asks
``controller.placement.place`` for paths. A flow moves make-before-break: the new path's
transit pins go first, and its ingress rule switches one ``stage_delay`` later, when the
path is ready; pins are never needed for delivery, because the default routes under
them are always valid shortest paths. A moved flow is held for ``hold_down`` seconds.
On dragonflies the candidates can include Valiant paths (``path_policy``).

The ACK stream of a TCP elephant (its reverse flow, while that is no elephant itself) is
marked into the control class at its ingress (``ack_priority``): at every hop where it
meets other elephants' data it is served first, so a flow's ACK clock is not queued
behind the data of the flows it crosses.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from controller.compiler import flow_plan
from controller.flows import IP_PROTO_TCP, FlowKey, FlowTable, TrackedFlow
from controller.leastloaded import least_loaded_path
from controller.model import (
    ETH_TYPE_IPV4,
    META_FROM_FABRIC,
    Action,
    CookieKind,
    EthFrame,
    FlowRule,
    FlowStats,
    Match,
    PortRef,
    SwitchRules,
    Table,
    cookie_kind,
    make_cookie,
)
from controller.owners import Owner, OwnerKind, Plan, Plans
from controller.placement import (
    Demand,
    NextPortCache,
    Path,
    estimate_demands,
    is_minimal,
    minimal_paths,
    place,
    reverse_path,
    valiant_choice,
    valiant_paths,
)
from controller.recolour import Recolouring
from controller.routing import Routes
from controller.telemetry import Telemetry
from controller.topology import Topology
from controller.vocabulary import POLICIES

if TYPE_CHECKING:
    from controller.sources import Capacity, PlanInputs

log = logging.getLogger("loom.te")
PRIO_QUIET = 20  # above the catch rule (10), below tracked flows (100)
# What a flow placed at its first packet is assumed to add to each link of its path, as a
# share of the link, until its rate is first measured (then the port counters show it):
YOUNG_SHARE = 1.0  # any new flow may be an elephant
ACK_SHARE = 0.05  # the reverse of a tracked TCP flow: its ACK stream, about 1/20 of the data
Load = Callable[[PortRef], float]  # a link's measured load, as a share of its capacity


@dataclass(frozen=True)
class TeConfig:
    enabled: bool = True
    te_interval: float = 0.5
    elephant_share: float = 0.1
    flow_idle_timeout: float = 10.0
    hold_down: float = 2.0
    stage_delay: float = 0.2
    margin: float = 0.05
    background_floor: float = 0.1  # share of capacity: less unexplained load counts as none
    path_policy: str = "adaptive"
    ack_priority: bool = True  # elephants' ACK streams ride the control class
    max_candidates: int = 16
    place_new: bool = True  # each new flow pinned at its first packet onto the least-loaded path
    keep_placed: bool = True  # ... and kept there as an elephant unless a move lowers the peak
    max_flows: int = 20_000  # tracked flows at most (rules and memory stay bounded) ...
    flows_per_host: int = 2  # ... or this many per host, if more; ACK streams apart
    new_flows_per_port: int = 100  # per second; above it a port stops being tracked ...
    quiet_seconds: float = 10.0  # ... for this long (its traffic still flows)


@dataclass
class Staged:
    final: Plan
    due: float


def owner_of(key: FlowKey) -> Owner:
    return (OwnerKind.FLOW, key)


class TrafficEngineer:
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
        self.paths: dict[FlowKey, Path] = {}
        self.moved_at: dict[FlowKey, float] = {}
        self.staged: dict[FlowKey, Staged] = {}
        self.ack_marks = ack_marks if config.ack_priority else ()
        self.acks: set[FlowKey] = set()  # flows marked with ack_marks
        self._ack_streams: set[FlowKey] = set()  # tracked because their reverse was
        self._loads: tuple[float, dict[PortRef, float]] = (-1.0, {})  # read at an instant
        self.reroutes: Counter[str] = Counter()
        self.last_max_utilization = 0.0
        self.timer = timer  # measures planning time for metrics; never decides anything
        self.timings: list[tuple[str, float]] = []
        self._residual: dict[PortRef, float] = {}
        self._new_flows: dict[PortRef, list[float]] = {}
        self.engineered: set[FlowKey] = set()  # elephants on a path TE chose itself
        self._young: dict[FlowKey, tuple[Path, float]] = {}  # placed, rate not yet measured
        self._young_load: dict[PortRef, float] = {}  # per link: the young flows' shares
        self._young_pairs: dict[tuple[str, str], FlowKey] = {}  # host pair -> its young flow
        self.quiet: dict[PortRef, float] = {}  # port -> until when its flows go untracked
        self.events: Counter[str] = Counter()
        self._next_run = 0.0
        self.recolouring = Recolouring(config.margin, config.hold_down, self.events)
        # flows a gray-link test moves that must keep some links (``GrayLinks.keeping``)
        self.keeping: Callable[[], Mapping[Hashable, frozenset[PortRef]]] = dict

    # -- events ---------------------------------------------------------------
    def caught(
        self,
        now: float,
        topo: Topology,
        routes: Routes,
        at: PortRef,
        frame: EthFrame,
        load: Load | None = None,
    ) -> dict[Owner, Plan]:
        """The first packet of a flow from a host (at switch port ``at``): start
        accounting for it and, with ``place_new``, pin it onto the least-loaded of its
        equal-cost paths (``load``: a link's measured share of its capacity). A port that
        opens flows faster than ``new_flows_per_port`` (a scan, a flood) is no longer
        copied to the controller for ``quiet_seconds``."""
        dpid, port = at
        if (dpid, port) in self.quiet:  # the switch's backlog from before the pause: cheap
            return {}
        key = FlowKey.of_frame(frame)
        src, dst = topo.hosts.get(frame.eth_src), topo.hosts.get(frame.eth_dst)
        if key is None or src is None or dst is None or (src.dpid, src.port) != (dpid, port):
            return {}
        if key in self.flows.flows or self._full(key, len(topo.hosts)):
            return {}
        recent = [t for t in self._new_flows.get((dpid, port), []) if now - t < 1.0] + [now]
        self._new_flows[(dpid, port)] = recent
        if len(recent) > self.config.new_flows_per_port:
            return self._quiet(now, dpid, port)
        self.flows.seen(now, key, src.mac, dst.mac, dpid, port)
        if self._ack_stream(key):
            self._ack_streams.add(key)
        if self.config.place_new and load is not None:
            self._place_new(key, dpid, dst.dpid, routes, self._loads_now(now, load))
        return {owner_of(key): self._plan(self.flows.flows[key], topo, routes)}

    def _loads_now(self, now: float, load: Load) -> Load:
        """``load``, each link read once per instant: a burst of new flows (a job's
        first step: thousands at once) weighs the same links again and again, and a
        link's measured load changes only with the next counter reading."""
        if self._loads[0] != now:
            self._loads = (now, {})
        seen = self._loads[1]

        def read(link: PortRef) -> float:
            got = seen.get(link)
            if got is None:
                got = seen[link] = load(link)
            return got

        return read

    def _ack_stream(self, key: FlowKey) -> bool:
        """Whether ``key`` is the ACK stream of a tracked TCP flow (its reverse)."""
        return key.ip_proto == IP_PROTO_TCP and key.reverse() in self.flows.flows

    def _full(self, key: FlowKey, hosts: int) -> bool:
        """Whether ``key`` would go over the tracked flows' bound: ``max_flows``, or
        ``flows_per_host`` a host on a larger fabric (a host with a bulk transfer opens
        a control connection too; iperf3 does). The ACK stream of a tracked TCP flow
        (its first packet comes from the receiver) counts apart, against a bound of its
        own: counted together, the ACK streams of half the flows would keep the other
        half's data untracked."""
        limit = max(self.config.max_flows, self.config.flows_per_host * hosts)
        acks = len(self._ack_streams)
        if self._ack_stream(key):
            return acks >= limit
        return len(self.flows.flows) - acks >= limit

    def _place_new(self, key: FlowKey, src: int, dst: int, routes: Routes, load: Load) -> None:
        """The equal-cost path whose busiest link is least loaded (measured share plus the
        young flows placed on it since), then the least loaded in sum, over every such
        path (``least_loaded_path``); ties go by the flow's id, so equal paths share new
        flows evenly and repeatably. A flow between two hosts that already have a young
        flow joins it (``_pair_path``)."""
        young = self._young_load
        acks = self._ack_stream(key)
        back = self._way_back(key, routes, src, dst) if acks else None
        path = back or self._pair_path(key, routes, src, dst)
        if path is None:
            found = least_loaded_path(
                routes, src, dst, lambda link: load(link) + young.get(link, 0.0), key.ident
            )
            if found is None or not found[1]:
                return  # one way only (or none): the default route is that way
            path = found[0]
        share = ACK_SHARE if acks else YOUNG_SHARE
        self.paths[key] = path
        log.debug("placed %s on %s", key, path)
        self.events["flows_placed"] += 1
        self._young[key] = (path, share)
        for link in path:
            young[link] = young.get(link, 0.0) + share
        if not acks:
            self._young_pairs[(key.ipv4_src, key.ipv4_dst)] = key

    def _pair_path(self, key: FlowKey, routes: Routes, src: int, dst: int) -> Path | None:
        """The path of the young flow between the same two hosts, which hands its assumed
        share over to ``key``. Both hosts' own links bound such flows together, so until
        measured they are one link's demand at most, and a fabric path of the same rate
        carries them together at no cost. Counted apart, a short connection just before a
        bulk one (iperf3's control connection, an RPC before a transfer) would count as a
        second elephant and push the next host pair's bulk flow onto the first's path.
        A mate already measured as a mouse is joined as well (its share is its measured
        rate): on a busy host the bulk connection can follow its control connection by
        longer than the mate stays young."""
        mate = self._young_pairs.get((key.ipv4_src, key.ipv4_dst))
        if mate is None:
            return None
        held = self._young.get(mate)
        if held is None:
            grown = self.flows.flows.get(mate)
            path = self.paths.get(mate) if grown is not None and not grown.elephant else None
            return path if path is not None and is_minimal(routes, path, src, dst) else None
        if not is_minimal(routes, held[0], src, dst):
            return None
        path, share = held
        self._young[mate] = (path, 0.0)
        for link in path:
            self._young_load[link] -= share
        return path

    def _way_back(self, key: FlowKey, routes: Routes, src: int, dst: int) -> Path | None:
        """For a TCP flow's ACK stream (``key``): the reverse of its data's path, if that
        is one of its own equal-cost paths. Each link then carries, besides its data, the
        ACKs of the one flow whose data crosses it the other way, as a host's link does:
        no fabric link carries more than the sender's own, so no FIFO queue builds up in
        the fabric for other flows' ACKs to wait behind (on ports with no priority queue
        that would stretch their round trips by up to a full queue per hop)."""
        data = self.paths.get(key.reverse())
        back = reverse_path(routes, data) if data else None
        return back if back is not None and is_minimal(routes, back, src, dst) else None

    def _acks_follow(
        self, elephants: list[TrackedFlow], topo: Topology, routes: Routes
    ) -> dict[Owner, Plan]:
        """Keep each TCP elephant's ACK stream (while no elephant itself) on the way back
        of the elephant's path, as it moves (see ``_way_back``)."""
        plans: dict[Owner, Plan] = {}
        for e in elephants:
            back = self.flows.flows.get(e.key.reverse())
            if e.key.ip_proto != IP_PROTO_TCP or back is None or back.elephant:
                continue
            dst = topo.hosts.get(back.dst_mac)
            if dst is None:
                continue
            way = self._way_back(back.key, routes, back.ingress, dst.dpid)
            if way is not None and way != self.paths.get(back.key):
                self.paths[back.key] = way
                plans[owner_of(back.key)] = self._plan(back, topo, routes)
        return plans

    def _grown_up(self, key: FlowKey, gone: bool = False) -> None:
        """A placed flow's rate is measured (or it is ``gone``): the counters show it now.
        A measured flow stays its host pair's mate (``_pair_path``) until it is gone."""
        placed = self._young.pop(key, None)
        if gone and self._young_pairs.get((key.ipv4_src, key.ipv4_dst)) == key:
            del self._young_pairs[(key.ipv4_src, key.ipv4_dst)]
        if placed is None:
            return
        if not self._young:
            self._young_load.clear()  # (no drift from the running sums)
            return
        path, share = placed
        for link in path:
            self._young_load[link] = self._young_load.get(link, 0.0) - share

    def _quiet(self, now: float, dpid: int, port: int) -> dict[Owner, Plan]:
        if (dpid, port) in self.quiet:
            return {}
        self.quiet[(dpid, port)] = now + self.config.quiet_seconds
        self.events["ports_quieted"] += 1
        log.warning(
            "port %016x:%d opens flows too fast: not tracked for %.0f s",
            dpid,
            port,
            self.config.quiet_seconds,
        )
        match = Match.of(in_port=port, metadata=(0, META_FROM_FABRIC), eth_type=ETH_TYPE_IPV4)
        rule = FlowRule(
            Table.PIN,
            PRIO_QUIET,
            match,
            goto=Table.ROUTE,
            cookie=make_cookie(CookieKind.CATCH, dpid),
        )
        rules = SwitchRules()
        rules.add_flow(rule)
        return {(OwnerKind.QUIET, (dpid, port)): {dpid: rules}}

    def counted(self, now: float, dpid: int, stats: list[FlowStats], capacity: Capacity) -> None:
        for s in stats:
            if s.table != Table.PIN or cookie_kind(s.cookie) is not CookieKind.FLOW:
                continue
            key = FlowKey.of_match(s.match)
            flow = self.flows.flows.get(key) if key else None
            if flow is not None and flow.ingress == dpid and s.match.get("in_port") is not None:
                measured = flow.sampled_at is not None  # this reading gives it a rate
                self.flows.counted(now, flow.key, s.bytes, capacity((dpid, flow.in_port)))
                if measured:
                    self._grown_up(flow.key)

    def forget_switch(self, dpid: int) -> list[Owner]:
        gone = self.flows.forget_switch(dpid)
        for flow in gone:
            self._drop(flow.key)
        return [owner_of(f.key) for f in gone]

    # -- planning -------------------------------------------------------------
    def tick(
        self, now: float, topo: Topology, routes: Routes, telemetry: Telemetry, capacity: Capacity
    ) -> dict[Owner, Plan]:
        plans: dict[Owner, Plan] = {}
        for flow in self.flows.expire(now):
            log.debug("forgot idle flow %s after %.1f s", flow.key, now - flow.first_seen)
            self._drop(flow.key)
            plans[owner_of(flow.key)] = {}
        for ref, until in list(self.quiet.items()):
            if now >= until:
                del self.quiet[ref]
                plans[(OwnerKind.QUIET, ref)] = {}
        for key, staged in sorted(self.staged.items()):
            if now >= staged.due:
                plans[owner_of(key)] = staged.final
                del self.staged[key]
        if self.config.enabled and now >= self._next_run:
            self._next_run = now + self.config.te_interval
            started = self.timer()
            plans.update(self._engineer(now, topo, routes, telemetry, capacity))
            self.timings.append(("te", self.timer() - started))
        return plans

    def plan_all(self, inputs: PlanInputs) -> Plans:
        return self.replan_all(inputs.topo, inputs.routes)

    def replan_all(self, topo: Topology, routes: Routes) -> dict[Owner, Plan]:
        """After a topology change: keep pins whose paths survive, drop the others (the
        default routes carry those flows until the next placement)."""
        self.staged.clear()
        live_links: set[tuple[Hashable, int]] = set()  # (no pin: no pass over every link)
        if self.paths:
            live_links = {(u, p) for u, edges in routes.out.items() for p, _, _ in edges}
        for key, path in list(self.paths.items()):
            if not all(link in live_links for link in path):
                log.info("path of %s lost %s", key, [lk for lk in path if lk not in live_links])
                del self.paths[key]
                self._grown_up(key)
                if (flow := self.flows.flows.get(key)) is not None and flow.elephant:
                    self.reroutes["link_down"] += 1  # (a mouse back on its default: no news)
        self._next_run = 0.0
        return {owner_of(f.key): self._plan(f, topo, routes) for f in self.flows.flows.values()}

    def _engineer(
        self, now: float, topo: Topology, routes: Routes, telemetry: Telemetry, capacity: Capacity
    ) -> dict[Owner, Plan]:
        elephants = [f for f in self.flows.elephants() if f.dst_mac in topo.hosts]
        plans: dict[Owner, Plan] = {}
        kept = set(self.flows.flows) if self.config.place_new else set()  # stay where placed
        self.engineered &= {f.key for f in elephants}
        for key in sorted(set(self.paths) - {f.key for f in elephants} - kept):
            del self.paths[key]  # no longer an elephant: back to the default route
            self.staged.pop(key, None)
            gone = self.flows.flows.get(key)
            log.debug("unpinned %s: %.2f Mbit/s", key, gone.rate_bps / 1e6 if gone else -1)
            if key in self.flows.flows:
                plans[owner_of(key)] = self._plan(self.flows.flows[key], topo, routes)
        if not elephants:  # nothing to place: no pass over every link (k=48: 110,592)
            self.last_max_utilization = 0.0
            plans.update(self._mark_acks(elephants, topo, routes))  # unmark what was marked
            return plans
        demands = self._demands(now, elephants, topo, routes, capacity)
        links = {(u, k) for u, _, k in routes.graph.edges(keys=True)}
        cap = {link: capacity(link) for link in links}
        background = self._background(cap, telemetry, elephants, routes, topo)
        placement = place(demands, cap, background, margin=self.config.margin)
        if placement.max_utilization > 1.0 + self.config.margin:
            leaves = {h.dpid for h in topo.hosts.values()}
            far = routes.peer().of
            placement = self.recolouring.better(
                now, demands, cap, background, far, leaves, placement
            )
        self.last_max_utilization = placement.max_utilization
        for flow in elephants:
            path = placement.paths.get(flow.key)
            if path is None:
                continue
            known = flow.key in self.engineered
            self.engineered.add(flow.key)
            if path == self.paths.get(flow.key):
                continue
            reason = "congestion" if known else "new_elephant"
            self.reroutes[reason] += 1
            log.info(
                "%s %s (%.2f Mbit/s): %s -> %s",
                reason,
                flow.key,
                flow.rate_bps / 1e6,
                self.paths.get(flow.key),
                path,
            )
            old = self._plan(flow, topo, routes)
            self.paths[flow.key] = path
            self.moved_at[flow.key] = now
            plans[owner_of(flow.key)] = self._stage(
                flow.key, old, self._plan(flow, topo, routes), now
            )
        if self.config.place_new:
            plans.update(self._acks_follow(elephants, topo, routes))
        plans.update(self._mark_acks(elephants, topo, routes))
        return plans

    def _mark_acks(
        self, elephants: list[TrackedFlow], topo: Topology, routes: Routes
    ) -> dict[Owner, Plan]:
        """Re-plan the flows that became, or stopped being, an elephant's ACK stream."""
        if not self.ack_marks:
            return {}
        tracked = self.flows.flows
        wanted = {
            back
            for e in elephants
            if e.key.ip_proto == IP_PROTO_TCP
            and (back := e.key.reverse()) in tracked
            and not tracked[back].elephant
        }
        changed = sorted(wanted ^ self.acks)
        self.acks = wanted
        return {owner_of(key): self._plan(tracked[key], topo, routes) for key in changed}

    def _demands(
        self,
        now: float,
        elephants: list[TrackedFlow],
        topo: Topology,
        routes: Routes,
        capacity: Capacity,
    ) -> list[Demand]:
        shares = estimate_demands([(f.src_mac, f.dst_mac) for f in elephants])
        cache: NextPortCache = {}
        demands = []
        keeping = self.keeping()
        for flow, share in zip(elephants, shares, strict=True):
            dst = topo.hosts[flow.dst_mac].dpid
            where = self.paths.get(flow.key)  # its first packet's path: kept unless moving
            cands = self._candidates(flow, dst, routes, cache, where)
            if flow.key in keeping:
                cands = [p for p in cands if keeping[flow.key] <= set(p)] or cands
            if not cands:
                continue
            rate = share * capacity((flow.ingress, flow.in_port))
            held = now - self.moved_at.get(flow.key, -1e9) < self.config.hold_down
            kept = self.config.keep_placed or flow.key in self.engineered  # it lowers the
            current = where if kept else None  # busiest link (a move costs TCP a stall)
            demands.append(Demand(flow.key, rate, tuple(cands), current, not held, where))
        return demands

    def _candidates(
        self,
        flow: TrackedFlow,
        dst: int,
        routes: Routes,
        cache: NextPortCache,
        where: Path | None = None,
    ) -> list[Path]:
        """A sample of the equal-cost paths, and ``where`` the flow runs if that is one of
        them (placed at its first packet over all of them, it may be outside the sample;
        left out, it could not be kept there)."""
        limit = self.config.max_candidates
        minimal = minimal_paths(routes, flow.ingress, dst, limit)
        if (
            where is not None
            and where not in minimal
            and is_minimal(routes, where, flow.ingress, dst)
        ):
            minimal.append(where)
        policy = self.config.path_policy
        if policy == "minimal" or routes.groups is None:
            return minimal
        valiant = valiant_paths(routes, flow.ingress, dst, limit, cache)
        if policy == "valiant":
            return [valiant_choice(flow.key, valiant)] if valiant else minimal
        return minimal + valiant

    def _background(
        self,
        cap: dict[PortRef, float],
        telemetry: Telemetry,
        elephants: list[TrackedFlow],
        routes: Routes,
        topo: Topology,
    ) -> dict[PortRef, float]:
        """Load the elephants do not explain (mice, untracked traffic), in bits/s.

        A pinned elephant's rate is taken off its path; an unpinned one's is spread over
        its equal-cost paths, as hashing spreads it on average. What remains is filtered
        by the previous round's value (the smaller wins), so load that only lags behind
        a move for a poll or two does not read as congestion; and below
        ``background_floor`` of a link's capacity it counts as none: flow and port
        counters are read at slightly different times, and two elephants at line rate
        leave a residue that must not move one of them between equal paths and back.
        """
        load = {link: telemetry.tx_bps(link) for link in cap}
        for flow in elephants:
            pinned = self.paths.get(flow.key)
            dst = topo.hosts[flow.dst_mac].dpid
            paths = [pinned] if pinned is not None else minimal_paths(routes, flow.ingress, dst, 64)
            for path in paths:
                for link in path:
                    load[link] = load.get(link, 0.0) - flow.rate_bps / len(paths)
        residual = {link: max(0.0, v) for link, v in load.items()}
        filtered = {link: min(v, self._residual.get(link, v)) for link, v in residual.items()}
        self._residual = residual
        floor = self.config.background_floor
        return {link: v if v >= floor * cap.get(link, 0.0) else 0.0 for link, v in filtered.items()}

    def _stage(self, key: FlowKey, old: Plan, new: Plan, now: float) -> Plan:
        """Transit pins of the new path first, the old ingress rule kept until ``due``."""
        flow = self.flows.flows[key]
        interim: Plan = {dpid: rules.copy() for dpid, rules in old.items()}
        for dpid, rules in new.items():
            target = interim.setdefault(dpid, SwitchRules())
            for rule in rules.flows.values():
                if not (dpid == flow.ingress and rule.match.get("in_port") == flow.in_port):
                    target.add_flow(rule)
        self.staged[key] = Staged(new, now + self.config.stage_delay)
        return interim

    def _plan(self, flow: TrackedFlow, topo: Topology, routes: Routes) -> Plan:
        dst = topo.hosts.get(flow.dst_mac)
        dest = dst.dpid if dst else flow.ingress
        marks = self.ack_marks if flow.key in self.acks else ()
        return flow_plan(
            flow.key, flow.ingress, flow.in_port, self.paths.get(flow.key), dest, routes, marks
        )

    def _drop(self, key: FlowKey) -> None:
        self._ack_streams.discard(key)
        self._grown_up(key, gone=True)
        self.engineered.discard(key)
        self.acks.discard(key)
        self.paths.pop(key, None)
        self.staged.pop(key, None)
        self.moved_at.pop(key, None)
