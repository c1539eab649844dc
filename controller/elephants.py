"""Elephant placement: every ``te_interval``, the measured elephants placed over their
paths so that the busiest link is as little loaded as it can be.

The problem is built from one snapshot of the links (``LinkLoads``): each elephant's
demand by Hedera's estimator, every link's capacity, and the load the elephants do not
explain; ``controller.placement.place`` solves it (pure), and a placement still over
capacity asks ``controller.recolour`` for better. A flow moves make-before-break: the new
path's transit pins go first, and its ingress rule switches one ``stage_delay`` later,
when the path is ready (``staged``); pins are never needed for delivery, because the
default routes under them are always valid shortest paths. A moved flow is held for
``hold_down`` seconds. On dragonflies the candidates can include Valiant paths
(``path_policy``); a flow a gray-link test moves keeps the links it must (``keeping``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from controller.flows import FlowKey, FlowTable, TrackedFlow
from controller.linkloads import LinkLoads
from controller.model import PortRef, SwitchRules
from controller.owners import Owner, OwnerKind, Plan
from controller.placement import (
    Demand,
    NextPortCache,
    Path,
    estimate_demands,
    is_minimal,
    minimal_paths,
    place,
    valiant_choice,
    valiant_paths,
)
from controller.recolour import Recolouring
from controller.routing import Routes
from controller.teconfig import TeConfig
from controller.topology import Topology

log = logging.getLogger("loom.te")
Planner = Callable[[TrackedFlow], Plan]  # a tracked flow's rules, as its path stands


@dataclass(frozen=True)
class Round:
    """What one placement round works from: the measured elephants, the fabric, and one
    snapshot of the links that every step of the round reads."""

    now: float
    elephants: list[TrackedFlow]
    topo: Topology
    routes: Routes
    links: LinkLoads


@dataclass
class Staged:
    final: Plan
    due: float


def owner_of(key: FlowKey) -> Owner:
    return (OwnerKind.FLOW, key)


class ElephantPlacer:
    def __init__(
        self,
        config: TeConfig,
        flows: FlowTable,
        paths: dict[FlowKey, Path],
        events: Counter[str],
    ) -> None:
        self.config = config
        self.flows = flows
        self.paths = paths  # shared with first-packet placement: every pinned flow's path
        self.moved_at: dict[FlowKey, float] = {}
        self.staged: dict[FlowKey, Staged] = {}
        self.engineered: set[FlowKey] = set()  # elephants on a path TE chose itself
        self.reroutes: Counter[str] = Counter()
        self.last_max_utilization = 0.0
        self.recolouring = Recolouring(config.margin, config.hold_down, events)
        self._residual: dict[PortRef, float] = {}
        # flows a gray-link test moves that must keep some links (``GrayLinks.keeping``)
        self.keeping: Callable[[], Mapping[Hashable, frozenset[PortRef]]] = dict

    def place(self, r: Round, plan: Planner) -> dict[Owner, Plan]:
        """One round: pins that are no elephant's any more go, elephants move where the
        placement puts them (staged)."""
        now, elephants, topo, routes, links = r.now, r.elephants, r.topo, r.routes, r.links
        plans: dict[Owner, Plan] = {}
        kept = set(self.flows.flows) if self.config.place_new else set()  # stay where placed
        self.engineered &= {f.key for f in elephants}
        for key in sorted(set(self.paths) - {f.key for f in elephants} - kept):
            del self.paths[key]  # no longer an elephant: back to the default route
            self.staged.pop(key, None)
            gone = self.flows.flows.get(key)
            log.debug("unpinned %s: %.2f Mbit/s", key, gone.rate_bps / 1e6 if gone else -1)
            if key in self.flows.flows:
                plans[owner_of(key)] = plan(self.flows.flows[key])
        if not elephants:  # nothing to place: no pass over every link (k=48: 110,592)
            self.last_max_utilization = 0.0
            return plans
        demands = self._demands(r)
        every = {(u, k) for u, _, k in routes.graph.edges(keys=True)}
        cap = {link: links.capacity(link) for link in every}
        background = self.background(cap, links, elephants, routes, topo)
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
            old = plan(flow)
            self.paths[flow.key] = path
            self.moved_at[flow.key] = now
            plans[owner_of(flow.key)] = self._stage(flow, old, plan(flow), now)
        return plans

    def _demands(self, r: Round) -> list[Demand]:
        now, elephants, topo, routes, links = r.now, r.elephants, r.topo, r.routes, r.links
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
            rate = share * links.capacity((flow.ingress, flow.in_port))
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

    def background(
        self,
        cap: dict[PortRef, float],
        links: LinkLoads,
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
        load = {link: links.tx_bps(link) for link in cap}
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

    def _stage(self, flow: TrackedFlow, old: Plan, new: Plan, now: float) -> Plan:
        """Transit pins of the new path first, the old ingress rule kept until ``due``."""
        interim: Plan = {dpid: rules.copy() for dpid, rules in old.items()}
        for dpid, rules in new.items():
            target = interim.setdefault(dpid, SwitchRules())
            for rule in rules.flows.values():
                if not (dpid == flow.ingress and rule.match.get("in_port") == flow.in_port):
                    target.add_flow(rule)
        self.staged[flow.key] = Staged(new, now + self.config.stage_delay)
        return interim

    def due(self, now: float) -> dict[Owner, Plan]:
        """Staged moves whose ingress rule is due: their final plans."""
        plans: dict[Owner, Plan] = {}
        for key, staged in sorted(self.staged.items()):
            if now >= staged.due:
                plans[owner_of(key)] = staged.final
                del self.staged[key]
        return plans

    def drop(self, key: FlowKey) -> None:
        self.engineered.discard(key)
        self.staged.pop(key, None)
        self.moved_at.pop(key, None)
