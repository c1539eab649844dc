"""Reroutes that neither loop nor send into a dead link while they are planned.

At size a re-plan takes many calls, a slice of switches each, so for a while some
switches route on the new graph and some on the old. Two things keep packets safe then:

* ``prune``: switches not planned afresh yet keep their old routes without dead ports
  until their turn: a packet goes on over a live equal-cost port, or to the controller
  (metered). Old routes are shortest paths, so a subset of them cannot loop.
* ``update_order`` and ``Reroute``: a switch takes its new routes towards a destination
  only once the switches they lead to have theirs (or do not change there): the
  destination side first. A packet then moves on old routes until it meets a switch
  with new ones, and from there on new routes only: it cannot come back. Switches are
  ordered so that most find every destination ready at their turn; where they wait on
  each other in a cycle (for different destinations: common among a dragonfly group's
  routers) the switch that waits for the fewest goes first, with new routes only for
  the destinations that are ready, and takes another turn for the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from controller.compiler import METER_MISS
from controller.model import (
    MAX_PHYSICAL_PORT,
    OFPP_CONTROLLER,
    FlowRule,
    GroupAction,
    GroupRule,
    Output,
    SwitchRules,
)
from controller.nexthops import TO_CONTROLLER, Hops
from controller.routing import Routes


def prune(rules: SwitchRules, live: set[int]) -> SwitchRules:
    """``rules`` without outputs to physical ports not ``live``: a select group loses those
    buckets; a rule whose only way out was such a port, or a group all of whose buckets
    lead to such ports, sends to the controller (metered).
    The very object when nothing goes."""
    out = SwitchRules(meters=dict(rules.meters))
    pruned = False
    gone = {  # groups that would drop everything: their rules go to the controller too
        gid
        for gid, g in rules.groups.items()
        if g.buckets and all(any(_dead(a, live) for a in b.actions) for b in g.buckets)
    }
    for rule in rules.flows.values():
        if any(_dead(a, live) or (isinstance(a, GroupAction) and a.group_id in gone)
               for a in rule.actions):  # fmt: skip
            miss = (Output(OFPP_CONTROLLER),)
            rule = FlowRule(rule.table, rule.priority, rule.match, miss, rule.goto,
                            rule.write_metadata, METER_MISS, rule.cookie)  # fmt: skip
            pruned = True
        out.add_flow(rule)
    for group in rules.groups.values():
        kept = tuple(b for b in group.buckets if not any(_dead(a, live) for a in b.actions))
        if kept and len(kept) < len(group.buckets):
            group, pruned = GroupRule(group.group_id, group.type, kept), True
        out.add_group(group)
    return out if pruned else rules


def _dead(action: object, live: set[int]) -> bool:
    return (
        isinstance(action, Output) and action.port <= MAX_PHYSICAL_PORT and action.port not in live
    )


def _codes(hops: Hops, code: dict[tuple[int, ...], int]) -> np.ndarray:
    """Per destination column, a number for its next-hop set (the same set, the same
    number across switches' old and new hops)."""
    sets, ids = hops
    table = np.array([code.setdefault(s, len(code)) for s in sets] + [-1])
    return np.asarray(table[np.where(ids == TO_CONTROLLER, len(sets), ids)])


MAX_PASSES = 4  # turns a switch takes in one reroute before it takes its new hops whole


@dataclass
class Reroute:
    """Per destination column, which switches of a sliced reroute route on their new
    hops yet, so that each switch takes its new hops for a destination only once the
    switches those lead to have theirs (or do not change there). A switch whose turn
    comes early, as one of a cycle of switches waiting on each other for different
    destinations must, takes its new hops for the destinations that are ready, a ready
    subset of them where only some are, and keeps its old hops (without dead ports) for
    the rest: it takes another turn later. Per destination the new routes lead towards
    it, so readiness spreads from the destination's side and every turn adds to it."""

    old: Mapping[int, Hops]
    changed: dict[int, np.ndarray]  # switch -> columns whose next hops change
    peer_of: dict[int, dict[int, int]]  # switch -> port -> neighbour switch in the reroute
    new_at: dict[int, np.ndarray] = field(default_factory=dict)  # columns on new hops
    passes: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.new_at = {d: ~c for d, c in self.changed.items()}

    def hops(self, dpid: int, new: Hops, live: set[int]) -> tuple[Hops, bool]:
        """What ``dpid`` routes on at its turn (``new``: its new hops; ``live``: its ports
        with a link), and whether that is ``new`` whole (no other turn needed)."""
        self.passes[dpid] = self.passes.get(dpid, 0) + 1
        sets, ids = new
        old = self.old.get(dpid)
        if dpid not in self.changed or old is None or self.passes[dpid] >= MAX_PASSES:
            self.new_at[dpid] = np.ones(len(ids), bool)
            return new, True
        ready = {p: self.new_at[peer] for p, peer in self.peer_of.get(dpid, {}).items()}
        index = {s: i for i, s in enumerate(sets)}
        out, held, whole = ids.copy(), np.zeros(len(ids), bool), True
        # a destination it had no route to: no switch routed there through it either
        waiting = self.changed[dpid] & (old[1] != TO_CONTROLLER)
        for sid, ports in enumerate(sets):
            cols = np.flatnonzero((ids == sid) & waiting)
            waits = [(bit, ready[p][cols]) for bit, p in enumerate(ports) if p in ready]
            if not cols.size or all(r.all() for _, r in waits):
                continue
            code = np.zeros(cols.size, np.int64)
            for bit, r in waits:
                code |= (~r).astype(np.int64) << bit
            for miss in np.unique(code[code != 0]).tolist():
                at, whole = cols[code == miss], False
                subset = tuple(p for bit, p in enumerate(ports) if not miss >> bit & 1)
                if subset:  # the ready ones of its new next hops
                    out[at] = index.setdefault(subset, len(index))
                else:  # none ready: its old next hops, without dead ports
                    held[at] = True
                    for col in at.tolist():
                        was = int(old[1][col])
                        kept = tuple(p for p in old[0][was] if p in live) if was >= 0 else ()
                        out[col] = index.setdefault(kept, len(index)) if kept else TO_CONTROLLER
        self.new_at[dpid] = ~held
        return (sorted(index, key=index.__getitem__), out), whole


def update_order(
    routes: Routes, old: Mapping[int, Hops], new: Mapping[int, Hops]
) -> tuple[list[int], Reroute]:
    """The switches of ``new`` (their next hops on ``routes``) in an order in which each
    comes after the switches it depends on (see the module's docstring), and the
    ``Reroute`` that tells each, at its turn, which destinations it may take new hops
    for; ``old``: their hops before, on the same destination columns (a switch without:
    all changed)."""
    code: dict[tuple[int, ...], int] = {}
    changed: dict[int, np.ndarray] = {}
    uses: dict[int, dict[int, np.ndarray]] = {}  # switch -> neighbour -> columns via it
    peer_of: dict[int, dict[int, int]] = {}
    for dpid, hops in new.items():
        now = _codes(hops, code)
        before = old.get(dpid)
        changed[dpid] = now != _codes(before, code) if before is not None else now == now
        sets, ids = hops
        via: dict[int, np.ndarray] = {}
        for port, node, _ in routes.out.get(dpid, []):
            peer: int = node  # type: ignore[assignment]
            if peer in new:
                peer_of.setdefault(dpid, {})[port] = peer
                holds = np.array([port in s for s in sets] + [False])
                taken = holds[np.where(ids == TO_CONTROLLER, len(sets), ids)]
                via[peer] = via.get(peer, taken) | taken
        uses[dpid] = via
    after: dict[int, set[int]] = {d: set() for d in new}  # switch -> switches first
    for dpid, via in uses.items():
        for peer, taken in via.items():
            if peer != dpid and np.any(taken & changed[dpid] & changed[peer]):
                after[dpid].add(peer)
    return _topological(after), Reroute(old, changed, peer_of)


def _topological(after: dict[int, set[int]]) -> list[int]:
    """Kahn's order, lowest dpid first among the ready; a cycle is broken at the switch
    that waits for the fewest others."""
    order: list[int] = []
    left = {d: set(deps) for d, deps in after.items()}
    while left:
        ready = sorted(d for d, deps in left.items() if not deps)
        if not ready:  # a cycle: the switch waiting for the fewest goes first
            ready = [min(left, key=lambda d: (len(left[d]), d))]
        for d in ready:
            del left[d]
            order.append(d)
        done = set(ready)
        for deps in left.values():
            deps -= done
    return order


def touched(old: Routes | None, new: Routes) -> tuple[set[int], set[int]] | None:
    """Switches whose next hops may differ between two routes, and of those the ones
    whose own links changed (``None``: all of them): a next hop depends on the switch's
    own links and distances and its neighbours'."""
    if old is new:
        return set(), set()
    if old is None or old.nodes != new.nodes or old.dests != new.dests:
        return None
    if old.dist is new.dist and new.base != old.serial:
        return None  # updated in place more than once since: what moved is not known
    if new.base == old.serial and new.relinked is not None and new.moved is not None:
        changed, relinked = set(new.moved), set(new.relinked)  # (old's arrays are new's)
    else:
        rows = np.flatnonzero(np.any(old.dist != new.dist, axis=1))
        changed = {new.nodes[i] for i in rows}
        relinked = {u for u in set(old.out) | set(new.out) if old.out.get(u) != new.out.get(u)}
    near = {u for v in changed for u in new.graph.predecessors(v)} if changed else set()
    stale = {int(u) for u in changed | relinked | near}  # type: ignore[arg-type]
    return stale, {int(u) for u in relinked}  # type: ignore[call-overload]
