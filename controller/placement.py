"""Traffic engineering's placement as pure functions (no state, no clock): candidate paths,
demands, placement. The stateful halves (``controller.elephants``,
``controller.firstpacket``, ``controller.ackstreams``) call it.

``place`` puts elephant flows on paths so that the most utilised link is as low as it
can be, then spreads what is left (sum of squared utilisations). It starts from where
flows already are and moves one only when that lowers the objective by more than a
margin: small load changes never move anything (hysteresis). New flows are placed
greedily, largest demand first; a bounded exact search runs when greedy plus local
improvement still leaves a link over capacity. Every tie is broken by sorted keys, so
the same inputs always give the same plan.
"""

from __future__ import annotations

import heapq
import random
import zlib
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import cast

import networkx as nx

from controller.model import PortRef
from controller.routing import Routes, ecmp_next_hops

Path = tuple[PortRef, ...]  # fabric hops (each named by its source port), ingress to egress switch


# ---------------------------------------------------------------------------
# Candidate paths
# ---------------------------------------------------------------------------


def minimal_paths(routes: Routes, src: int, dst: int, limit: int = 16) -> list[Path]:
    """Up to ``limit`` equal-cost paths along the next-hop sets: all of them, in port
    order, when there are no more than ``limit``; else a sample spread uniformly over
    all of them (seeded by the pair, so the same pair always gets the same sample). The
    first ``limit`` in port order would leave a k=32 edge switch by one uplink only."""
    if src == dst:
        return [()]
    if dst not in routes.index:
        return []
    hops = routes.hops_to(dst)
    peer = cast(Mapping[PortRef, int], routes.peer())
    far = cast(Callable[[int], Mapping[int, int]], routes.peer().of)
    ahead = _paths_ahead(hops, far, src, dst)
    if ahead.get(src, 0) <= limit:
        return _walk(peer, lambda node: hops.get(node, ()), src, dst, limit)
    return _sample(hops, peer, ahead, src, dst, limit)


def _paths_ahead(
    hops: Mapping[Hashable, tuple[int, ...]],
    far: Callable[[int], Mapping[int, int]],
    src: int,
    dst: int,
) -> dict[int, int]:
    """How many next-hop paths lead from each switch reachable from ``src`` to ``dst``
    (``far``: a switch's ports and the switch at the far end of each)."""
    ahead = {dst: 1}
    stack = [src]
    while stack:
        node = stack[-1]
        ends = far(node)
        nexts = [ends[p] for p in hops.get(node, ()) if p in ends]
        todo = [v for v in nexts if v not in ahead]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        ahead[node] = sum(ahead[v] for v in nexts)
    return ahead


def _sample(
    hops: Mapping[Hashable, tuple[int, ...]],
    peer: Mapping[PortRef, int],
    ahead: Mapping[int, int],
    src: int,
    dst: int,
    limit: int,
) -> list[Path]:
    """Distinct paths drawn uniformly (each hop weighted by the paths behind it)."""
    rng = random.Random(zlib.crc32(f"{src}-{dst}".encode()))
    found: dict[Path, None] = {}
    for _ in range(limit * 8):
        node, path = src, []
        while node != dst:
            ports = [p for p in hops.get(node, ()) if (node, p) in peer]
            weights = [ahead.get(peer[(node, p)], 0) for p in ports]
            port = rng.choices(ports, weights)[0]
            path.append((node, port))
            node = peer[(node, port)]
        found.setdefault(tuple(path))
        if len(found) == limit:
            break
    return list(found)


def _walk(
    peer: Mapping[PortRef, int],
    next_ports: Callable[[int], tuple[int, ...]],
    src: int,
    dst: int,
    limit: int,
) -> list[Path]:
    """Depth-first walk along ``next_ports`` from ``src`` to ``dst``: simple paths only."""
    out: list[Path] = []
    stack: list[tuple[int, Path]] = [(src, ())]
    while stack and len(out) < limit:
        node, path = stack.pop()
        if node == dst:
            out.append(path)
            continue
        for port in reversed(next_ports(node)):
            nxt = peer.get((node, port))
            if nxt is not None and all(nxt != h[0] for h in path) and nxt != src:
                stack.append((nxt, (*path, (node, port))))
    return out


def _lookup(table: dict[int, tuple[int, ...]]) -> Callable[[int], tuple[int, ...]]:
    return lambda node: table.get(node, ())


def is_minimal(routes: Routes, path: Path, src: int, dst: int) -> bool:
    """Whether ``path`` leads from ``src`` to ``dst`` along next hops only."""
    node, peer = src, cast(Mapping[PortRef, int], routes.peer())
    for u, port in path:
        if u != node or port not in routes.next_ports(u, dst):
            return False
        node = peer[(u, port)]
    return node == dst


def reverse_path(routes: Routes, path: Path) -> Path | None:
    """The links of ``path`` crossed the other way, last first: where a TCP flow's ACK
    stream meets, on each link, only the data of the flow whose path runs the other way
    there (``None`` if a link has no live way back)."""
    back = []
    peer = routes.peer()
    for u, port in reversed(path):
        v = peer.get((u, port))
        link = routes.graph.get_edge_data(u, v, port) if v is not None else None
        if link is None or not routes.graph.has_edge(v, u, link["dst_port"]):
            return None
        back.append((cast(int, v), int(link["dst_port"])))
    return tuple(back)


def path_nodes(g: nx.MultiDiGraph, path: Path, src: int) -> list[int]:
    peer = {(u, k): v for u, v, k in g.edges(keys=True)}
    nodes = [src]
    for hop in path:
        nodes.append(peer[hop])
    return nodes


NextPortCache = dict[int, dict[int, tuple[int, ...]]]


def valiant_paths(
    routes: Routes, src: int, dst: int, limit: int = 24, cache: NextPortCache | None = None
) -> list[Path]:
    """Non-minimal dragonfly paths: minimally to a router of another group, then
    minimally to the destination. One router per intermediate group in turn, so the
    candidates spread over every intermediate group before repeating one."""
    groups = routes.groups
    if groups is None or groups.get(src) == groups.get(dst):
        return []
    cache = {} if cache is None else cache
    by_group: dict[int, list[int]] = {}
    for node, grp in sorted(groups.items(), key=lambda kv: (kv[1], repr(kv[0]))):
        if grp not in (groups[src], groups[dst]):
            by_group.setdefault(grp, []).append(node)  # type: ignore[arg-type]
    order: list[int] = []
    for depth in range(max(map(len, by_group.values()), default=0)):
        order += [by_group[g][depth] for g in sorted(by_group) if depth < len(by_group[g])]
    out: list[Path] = []
    for mid in order:
        if len(out) >= limit:
            break
        if mid not in cache:
            hops = ecmp_next_hops(routes.graph, mid, routes.costs)
            cache[mid] = {cast(int, u): tuple(p for p, _ in nh) for u, nh in hops.items()}
        first = _walk(cast(Mapping[PortRef, int], routes.peer()), _lookup(cache[mid]), src, mid, 1)
        second = minimal_paths(routes, mid, dst, 1)
        if not first or not second:
            continue
        path = first[0] + second[0]
        nodes = path_nodes(routes.graph, path, src)
        if len(set(nodes)) == len(nodes) and path not in out:
            out.append(path)
    return out


# ---------------------------------------------------------------------------
# Demand estimation (Hedera, NSDI 2010): the rate each flow would reach if only the
# sending and receiving host links limited it.
# ---------------------------------------------------------------------------


def estimate_demands(pairs: list[tuple[Hashable, Hashable]], iterations: int = 100) -> list[float]:
    """Natural demand of each (sender, receiver) flow as a share of a host link (0..1)."""
    n = len(pairs)
    demand = [0.0] * n
    converged = [False] * n
    by_src: dict[Hashable, list[int]] = {}
    by_dst: dict[Hashable, list[int]] = {}
    for i, (s, d) in enumerate(pairs):
        by_src.setdefault(s, []).append(i)
        by_dst.setdefault(d, []).append(i)
    for _ in range(iterations):
        before = list(demand), list(converged)
        for flows in by_src.values():
            fixed = sum(demand[i] for i in flows if converged[i])
            free = [i for i in flows if not converged[i]]
            for i in free:
                demand[i] = max(0.0, 1.0 - fixed) / len(free)
        for flows in by_dst.values():
            if sum(demand[i] for i in flows) <= 1.0 + 1e-12:
                continue
            limited = set(flows)
            share = 1.0 / len(flows)
            while True:
                small = {i for i in limited if demand[i] < share}
                if not small:
                    break
                limited -= small
                share = (1.0 - sum(demand[i] for i in flows if i not in limited)) / len(limited)
            for i in limited:
                demand[i] = share
                converged[i] = True
        if (demand, converged) == before:
            break
    return demand


# ---------------------------------------------------------------------------
# Placement
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Demand:
    key: Hashable
    rate: float  # bits/s the flow should get
    candidates: tuple[Path, ...]
    current: Path | None = None
    movable: bool = True
    hint: Path | None = None  # where the flow already runs, though not placed here: on a tie


@dataclass(frozen=True)
class Placement:
    paths: dict[Hashable, Path]
    max_utilization: float
    moved: tuple[Hashable, ...]


class _Loads:
    def __init__(
        self, capacity: Mapping[PortRef, float], background: Mapping[PortRef, float]
    ) -> None:
        self.capacity = capacity
        self.load: dict[PortRef, float] = dict(background)

    def util(self, link: PortRef, extra: float = 0.0) -> float:
        cap = self.capacity.get(link, 0.0)
        used = self.load.get(link, 0.0) + extra
        return used / cap if cap > 0 else (float("inf") if used > 0 else 0.0)

    def add(self, path: Path, rate: float) -> None:
        for link in path:
            self.load[link] = self.load.get(link, 0.0) + rate

    def bottleneck(self, path: Path, rate: float) -> float:
        return max((self.util(link, rate) for link in path), default=0.0)

    def objective(self) -> tuple[float, float]:
        return self.snapshot().objective

    def snapshot(self) -> _Snapshot:
        utils = {link: self.util(link) for link in self.load}
        top = heapq.nlargest(_TOP_LINKS, ((u, link) for link, u in utils.items()))
        return _Snapshot(utils, sum(u * u for u in utils.values()), top)

    def moved(self, snap: _Snapshot, old: Path, new: Path, rate: float) -> tuple[float, float]:
        """The objective were a flow of ``rate`` moved from ``old`` to ``new``, from the
        ``snap`` of the loads as they are: only the links either path crosses change, so
        a trial move costs its paths' length, not the fabric's links."""
        delta: dict[PortRef, float] = {}
        for link in old:
            delta[link] = delta.get(link, 0.0) - rate
        for link in new:
            delta[link] = delta.get(link, 0.0) + rate
        sumsq, peak = snap.sumsq, 0.0
        for link, change in delta.items():
            before, after = snap.utils.get(link, 0.0), self.util(link, change)
            sumsq += after * after - before * before
            peak = max(peak, after)
        rest = next((u for u, link in snap.top if link not in delta), None)
        if rest is None and len(snap.top) == _TOP_LINKS:  # every top link moved: look further
            rest = max((u for link, u in snap.utils.items() if link not in delta), default=0.0)
        return (round(max(peak, rest or 0.0), 9), round(sumsq, 9))


# More than a move's two paths can cross, so the busiest unmoved link is among them; and
# at least the HOT_LINKS a round of local moves tries to relieve.
_TOP_LINKS = 32


@dataclass(frozen=True)
class _Snapshot:
    """Every loaded link's utilisation, their sum of squares and the busiest few."""

    utils: dict[PortRef, float]
    sumsq: float
    top: list[tuple[float, PortRef]]

    @property
    def objective(self) -> tuple[float, float]:
        return (round(self.top[0][0] if self.top else 0.0, 9), round(self.sumsq, 9))


# The exact search recurses once per demand and scans every remaining demand at each
# step: beyond a few hundred demands (a 40-rank all-to-all has 1,560) it can neither
# finish within its budget nor stay within Python's recursion limit; the greedy
# placement and its improvement rounds stand alone there.
SEARCH_MAX_DEMANDS = 256


def _key_order(key: Hashable) -> str:
    return repr(key)


def place(
    demands: Iterable[Demand],
    capacity: Mapping[PortRef, float],
    background: Mapping[PortRef, float] | None = None,
    *,
    margin: float = 0.05,
    max_rounds: int = 200,
    search_budget: int = 200_000,
) -> Placement:
    """Assign each demand one of its candidate paths (see the module docstring)."""
    items = sorted((d for d in demands if d.candidates), key=lambda d: (-d.rate, _key_order(d.key)))
    loads = _Loads(capacity, background or {})
    chosen: dict[Hashable, Path] = {}
    for d in items:  # keep valid current paths; place the rest largest first
        if d.current is not None and d.current in d.candidates:
            chosen[d.key] = d.current
            loads.add(d.current, d.rate)
    for d in items:
        if d.key not in chosen:
            best = min(
                d.candidates, key=lambda p: (loads.bottleneck(p, d.rate), p != d.hint, len(p), p)
            )
            chosen[d.key] = best
            loads.add(best, d.rate)
    _improve(items, chosen, loads, margin, max_rounds)
    full = 1.0 + margin  # a link within ``margin`` of its capacity is full, not over it
    if loads.objective()[0] > full and len(items) <= SEARCH_MAX_DEMANDS:
        exact = _search(items, capacity, background or {}, search_budget, full)
        if exact is not None:
            chosen = exact
            loads = _Loads(capacity, background or {})
            for d in items:
                loads.add(chosen[d.key], d.rate)
    moved = tuple(
        sorted(
            (d.key for d in items if d.current is not None and chosen[d.key] != d.current),
            key=_key_order,
        )
    )
    return Placement(chosen, loads.objective()[0], moved)


def _improve(
    items: list[Demand], chosen: dict[Hashable, Path], loads: _Loads, margin: float, rounds: int
) -> None:
    """Move single flows while that lowers (max, sum of squares) by more than ``margin``:
    off the hottest link, or else off the next hottest ones over capacity (a link no flow
    can leave, such as a host's, must not stop the others from being relieved)."""
    by_key = {d.key: d for d in items}
    on_link: dict[PortRef, set[Hashable]] = {}  # the flows each link carries
    for d in items:
        for link in chosen[d.key]:
            on_link.setdefault(link, set()).add(d.key)
    for _ in range(rounds):
        snap = loads.snapshot()
        hottest = snap.top[:HOT_LINKS]  # (utilisation, link), busiest first
        over = [hot for i, (util, hot) in enumerate(hottest) if i == 0 or util > 1.0]
        for hot in over:
            there = [by_key[k] for k in on_link.get(hot, ())]
            found = _best_move(there, chosen, loads, snap, margin)
            if found is not None:
                break
        else:
            return
        key, path = found
        d = by_key[key]
        loads.add(chosen[key], -d.rate)
        loads.add(path, d.rate)
        for link in chosen[key]:
            on_link[link].discard(key)
        for link in path:
            on_link.setdefault(link, set()).add(key)
        chosen[key] = path


HOT_LINKS = 8  # links over capacity, hottest first, whose flows a round tries to move


def _best_move(
    there: list[Demand],
    chosen: dict[Hashable, Path],
    loads: _Loads,
    snap: _Snapshot,
    margin: float,
) -> tuple[Hashable, Path] | None:
    """The single move of one of the flows ``there`` (on a hot link) that lowers the
    objective most (by more than ``margin``), ties broken by key and path, so the
    flows' order does not matter."""
    base = snap.objective
    best: tuple[tuple[float, float], Hashable, Path] | None = None
    for d in there:
        if not d.movable:
            continue
        for path in d.candidates:
            if path == chosen[d.key]:
                continue
            obj = loads.moved(snap, chosen[d.key], path, d.rate)
            if _better(obj, base, margin) and (
                best is None
                or (obj, _key_order(d.key), path) < (best[0], _key_order(best[1]), best[2])
            ):
                best = (obj, d.key, path)
    return None if best is None else (best[1], best[2])


def _better(obj: tuple[float, float], base: tuple[float, float], margin: float) -> bool:
    if obj[0] < base[0] - margin:
        return True
    return obj[0] <= base[0] + 1e-9 and obj[1] < base[1] - margin


def _search(
    items: list[Demand],
    capacity: Mapping[PortRef, float],
    background: Mapping[PortRef, float],
    budget: int,
    full: float = 1.0 + 1e-9,
) -> dict[Hashable, Path] | None:
    """Depth-first search for an assignment with every link within capacity (at most
    ``full`` of it: measured capacities and demands are only so exact), most
    constrained flow first; ``None`` when there is none or the budget runs out. The
    budget counts candidate paths weighed (each step weighs every remaining demand's),
    so a large job gives up after a bounded time rather than a bounded depth."""
    loads = _Loads(capacity, background)
    chosen: dict[Hashable, Path] = {}
    nodes = 0

    def fits(path: Path, rate: float) -> bool:
        return loads.bottleneck(path, rate) <= full

    def recurse(remaining: list[Demand]) -> bool:
        nonlocal nodes
        if not remaining:
            return True
        options = [(sum(fits(p, d.rate) for p in _allowed(d)), i) for i, d in enumerate(remaining)]
        nodes += sum(len(_allowed(d)) for d in remaining)  # the paths this step weighed
        if nodes > budget:
            return False
        count, idx = min(options)
        if count == 0:
            return False
        d = remaining[idx]
        rest = remaining[:idx] + remaining[idx + 1 :]
        for path in sorted(
            _allowed(d),
            key=lambda p: (p != d.current, p != d.hint, loads.bottleneck(p, d.rate), len(p), p),
        ):
            if fits(path, d.rate):
                loads.add(path, d.rate)
                chosen[d.key] = path
                if recurse(rest):
                    return True
                loads.add(path, -d.rate)
                del chosen[d.key]
        return False

    return dict(chosen) if recurse(list(items)) else None


def _allowed(d: Demand) -> tuple[Path, ...]:
    if not d.movable and d.current is not None and d.current in d.candidates:
        return (d.current,)
    return d.candidates


def valiant_choice(key: Hashable, candidates: list[Path]) -> Path:
    """Oblivious Valiant routing: a stable pseudo-random candidate per flow (CRC32 of
    the flow key; never Python's per-process ``hash()``)."""
    return candidates[zlib.crc32(repr(key).encode()) % len(candidates)]
