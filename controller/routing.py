"""Pure path functions over the live switch graph.

Loom never enumerates paths (a k=48 fat-tree has 576 per pod pair): it computes, per
destination switch, the set of equal-cost next hops at every switch — one reverse
shortest-path search per destination. Any mix of next-hop choices from these sets is
loop-free, because every hop strictly lowers the remaining cost.

Costs: every link costs 1, except that when the fabric looks like a dragonfly (its
switches split into fully meshed groups of three or more) inter-group links cost more
than any intra-group detour. Shortest paths are then dragonfly *minimal* routes (one
global hop), and on fat-trees plain hop counts give exactly the up/down paths.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

import networkx as nx
import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

Node = Hashable
NextHops = dict[Node, tuple[tuple[int, Node], ...]]  # node -> ((port, neighbour), ...)
Groups = dict[Node, int] | None  # dragonfly group of every switch (None: not a dragonfly)
EdgeArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # tail, head, cost, port
Infer = Literal["infer"]
_SERIALS = itertools.count()


def infer_groups(g: nx.Graph | nx.MultiGraph | nx.MultiDiGraph) -> dict[Node, int] | None:
    """Dragonfly groups, if the switches partition into fully meshed sets of size >= 3."""
    return groups_of(g.nodes, g.edges())


def groups_of(nodes: Iterable[Node], pairs: Iterable[tuple[Node, Node]]) -> dict[Node, int] | None:
    """Dragonfly groups of switches linked in ``pairs``, if they partition into fully
    meshed sets of size >= 3.

    Maximal cliques are taken largest first (ties by sorted members, so the answer is
    deterministic); returns ``None`` for fabrics without such a structure: fat-trees
    and leaf-spines have no triangles at all, which one sparse product tells (0.05 s
    at k=48, where searching their cliques takes 0.3 s).
    """
    index = {n: i for i, n in enumerate(nodes)}
    linked = [(u, v) for u, v in pairs if u != v and u in index and v in index]
    if len(index) < 6 or not linked:
        return None
    ends = np.array([(index[u], index[v]) for u, v in linked], dtype=np.int64)
    ones = np.ones(len(ends), dtype=np.int32)
    adj = sparse.csr_matrix((ones, (ends[:, 0], ends[:, 1])), shape=(len(index), len(index)))
    adj = ((adj + adj.T) > 0).astype(np.int32)
    if not (adj @ adj).multiply(adj).count_nonzero():
        return None
    simple = nx.Graph()
    simple.add_nodes_from(index)
    simple.add_edges_from(linked)
    cliques = sorted(
        (sorted(c, key=repr) for c in nx.find_cliques(simple) if len(c) >= 3),
        key=lambda c: (-len(c), [repr(n) for n in c]),
    )
    taken: set[Node] = set()
    groups: list[list[Node]] = []
    for clique in cliques:
        if taken.isdisjoint(clique):
            groups.append(clique)
            taken.update(clique)
    if len(groups) < 2 or taken != set(simple.nodes):
        return None
    return {node: i for i, members in enumerate(groups) for node in members}


def link_costs(
    g: nx.MultiDiGraph, groups: Mapping[Node, int] | None = None
) -> dict[tuple[Node, Node, int], int]:
    """Integer cost of every directed edge ``(u, v, port)``."""
    global_cost = g.number_of_nodes() + 1
    costs: dict[tuple[Node, Node, int], int] = {}
    for u, v, port in g.edges(keys=True):
        inter = groups is not None and groups.get(u) != groups.get(v)
        costs[(u, v, port)] = global_cost if inter else 1
    return costs


def distances_to(
    g: nx.MultiDiGraph, dest: Node, costs: Mapping[tuple[Node, Node, int], int] | None = None
) -> dict[Node, int]:
    """Cost from every node that can reach ``dest`` to ``dest``."""
    if dest not in g:
        return {}
    if costs is None or all(c == 1 for c in costs.values()):
        dist = {dest: 0}
        queue = deque([dest])
        while queue:
            v = queue.popleft()
            for u in g.predecessors(v):
                if u not in dist:
                    dist[u] = dist[v] + 1
                    queue.append(u)
        return dist
    best: dict[Node, int] = {dest: 0}
    heap: list[tuple[int, str, Node]] = [(0, repr(dest), dest)]
    done: set[Node] = set()
    while heap:
        d, _, v = heapq.heappop(heap)
        if v in done:
            continue
        done.add(v)
        for u, _, port in g.in_edges(v, keys=True):
            nd = d + costs[(u, v, port)]
            if nd < best.get(u, nd + 1):
                best[u] = nd
                heapq.heappush(heap, (nd, repr(u), u))
    return best


def ecmp_next_hops(
    g: nx.MultiDiGraph, dest: Node, costs: Mapping[tuple[Node, Node, int], int] | None = None
) -> NextHops:
    """Every node's equal-cost next hops towards ``dest``, sorted by port."""
    dist = distances_to(g, dest, costs)
    hops: NextHops = {}
    for u, du in dist.items():
        if u == dest:
            continue
        chosen = [
            (port, v)
            for _, v, port in g.out_edges(u, keys=True)
            if v in dist and dist[v] + (costs[(u, v, port)] if costs else 1) == du
        ]
        hops[u] = tuple(sorted(chosen, key=lambda pv: pv[0]))
    return hops


class Peers(Mapping[tuple[Node, int], Node]):
    """The switch at the far end of each (switch, port) link, read per switch as asked: a
    job placed on a k=48 fat-tree looks at a few hundred of its 110,592 links, and a
    dict of all of them (26 ms to build) would be built in the job's own call."""

    def __init__(self, out: Mapping[Node, list[tuple[int, Node, int]]]) -> None:
        self._out = out
        self._of: dict[Node, dict[int, Node]] = {}

    def of(self, u: Node) -> dict[int, Node]:
        """``u``'s ports and the switch at the far end of each."""
        return self._ports(u)

    def _ports(self, u: Node) -> dict[int, Node]:
        found = self._of.get(u)
        if found is None:
            found = self._of[u] = {port: v for port, v, _ in self._out.get(u, ())}
        return found

    def __getitem__(self, key: tuple[Node, int]) -> Node:
        return self._ports(key[0])[key[1]]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and len(key) == 2 and key[1] in self._ports(key[0])

    def __iter__(self) -> Iterator[tuple[Node, int]]:
        return ((u, port) for u, edges in self._out.items() for port, _, _ in edges)

    def __len__(self) -> int:
        return sum(len(edges) for edges in self._out.values())


@dataclass
class Routes:
    """Distances to every destination switch on one snapshot of the graph, as arrays.

    ``dist[i, j]`` is the cost from switch ``nodes[i]`` to destination ``dests[j]``
    (``inf``: unreachable), from one array search per destination (scipy's csgraph), so
    a k=48 fat-tree's 2,880 switches and 1,152 edge switches take a fraction of a second.
    Next hops are derived from it on demand: a neighbour ``v`` of ``u`` is a next hop
    towards ``d`` when ``dist[v, d] + cost(u, v) == dist[u, d]``. Destinations added later
    are computed on the same snapshot, so costs and next hops always agree.
    """

    graph: nx.MultiDiGraph
    groups: dict[Node, int] | None
    costs: dict[tuple[Node, Node, int], int]
    nodes: list[Node] = field(default_factory=list)
    index: dict[Node, int] = field(default_factory=dict)
    dests: list[Node] = field(default_factory=list)
    column: dict[Node, int] = field(default_factory=dict)
    dist: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    out: dict[Node, list[tuple[int, Node, int]]] = field(default_factory=dict)
    _matrix: sparse.csr_matrix | None = None
    _edges: EdgeArrays | None = None  # tails, heads, costs, ports
    _hops: dict[Node, dict[Node, tuple[int, ...]]] = field(default_factory=dict)
    _peer: Peers | None = None
    serial: int = field(default_factory=lambda: next(_SERIALS))
    # switches whose out-links differ from those of the routes numbered ``base``
    relinked: set[Node] | None = None
    moved: set[Node] | None = None  # ... and the switches whose distances moved
    base: int = -1

    def peer(self) -> Peers:
        """The switch at the far end of each (switch, port) link."""
        if self._peer is None:
            self._peer = Peers(self.out)
        return self._peer

    def next_ports(self, switch: Node, dest: Node) -> tuple[int, ...]:
        """Equal-cost next-hop ports of ``switch`` towards ``dest``, sorted."""
        return self.hops_to(dest).get(switch, ())

    def hops_to(self, dest: Node) -> dict[Node, tuple[int, ...]]:
        """Every switch's next-hop ports towards ``dest`` (switches without one left out)."""
        cached = self._hops.get(dest)
        if cached is not None:
            return cached
        if dest not in self.column:
            self.add(dest)
        col = self.dist[:, self.column[dest]]
        tails, heads, costs, ports = self.edge_arrays()
        here = col[tails]
        tight = np.isfinite(here) & (col[heads] + costs == here) & (tails != self.index[dest])
        found = np.flatnonzero(tight)
        found = found[np.lexsort((ports[found], tails[found]))]  # by switch, then port
        at, out = tails[found], ports[found].tolist()
        starts = np.flatnonzero(np.r_[True, at[1:] != at[:-1]]).tolist() if len(at) else []
        ends = [*starts[1:], len(out)] if starts else []
        spans = zip(at[starts].tolist(), starts, ends, strict=True)
        hops = {self.nodes[u]: tuple(out[a:b]) for u, a, b in spans}
        self._hops[dest] = hops
        return hops

    def edge_arrays(self) -> EdgeArrays:
        """Every link as arrays (built once): tail and head index, cost, port."""
        if self._edges is None:
            self._edges = _edge_arrays(self, self.out)
        return self._edges

    def tight(self, switch: Node) -> tuple[list[int], np.ndarray]:
        """``switch``'s out ports and, per port and destination column, whether that port
        is a next hop towards it: the whole routing table of one switch in one array."""
        edges = self.out.get(switch, [])
        if not edges or not self.dests:
            return [p for p, _, _ in edges], np.zeros((len(edges), len(self.dests)), bool)
        here = self.dist[self.index[switch]]
        rows = np.stack([self.dist[self.index[v]] + c for _, v, c in edges])
        return [p for p, _, _ in edges], (rows == here[None, :]) & np.isfinite(here)[None, :]

    def add(self, dest: Node) -> None:
        """Compute one more destination on the same snapshot."""
        self.add_many([dest])

    def add_many(self, dests: Iterable[Node]) -> None:
        new = [d for d in dests if d not in self.column and d in self.index]
        if not new:
            return
        cols = _distances(self._csr(), [self.index[d] for d in new])
        for d in new:
            self.column[d] = len(self.dests)
            self.dests.append(d)
        self.dist = np.hstack([self.dist, cols]) if self.dist.size else cols

    def _csr(self) -> sparse.csr_matrix:
        if self._matrix is None:
            self._matrix = _matrix(self)
        return self._matrix


def _matrix(routes: Routes) -> sparse.csr_matrix:
    """The reversed graph's adjacency (cheapest parallel link), so a search *from* a
    destination gives every switch's distance *to* it."""
    return _reversed_adjacency(len(routes.nodes), *routes.edge_arrays()[:3])


def _edge_arrays(routes: Routes, out: Mapping[Node, list[tuple[int, Node, int]]]) -> EdgeArrays:
    """``out``'s links as arrays: tail index, head index, cost, port."""
    index = routes.index
    edges = [(index[u], index[v], c, p) for u, e in out.items() for p, v, c in e]
    if not edges:
        return np.zeros(0, int), np.zeros(0, int), np.zeros(0, int), np.zeros(0, int)
    tails, heads, costs, ports = zip(*edges, strict=True)
    return np.array(tails), np.array(heads), np.array(costs), np.array(ports)


def _reversed_adjacency(
    n: int, tails: np.ndarray, heads: np.ndarray, costs: np.ndarray
) -> sparse.csr_matrix:
    if not len(tails):
        return sparse.csr_matrix((n, n))
    order = np.lexsort((costs, tails, heads))  # per (head, tail): the cheapest first
    rows, cols, costs = heads[order], tails[order], costs[order]
    first = np.ones(len(rows), bool)
    first[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
    return sparse.csr_matrix((costs[first], (rows[first], cols[first])), shape=(n, n))


def _distances(matrix: sparse.csr_matrix, sources: list[int]) -> np.ndarray:
    """Distances to each of ``sources`` (columns) from every switch (rows)."""
    found = csgraph.dijkstra(matrix, directed=True, indices=sources)
    return np.asarray(found, dtype=float).reshape(len(sources), -1).T.copy()


def compute_routes(
    g: nx.MultiDiGraph, dests: Iterable[Node], groups: Groups | Infer = "infer"
) -> Routes:
    """Routes to each of ``dests`` over ``g``, with dragonfly ``groups`` as given or
    inferred from ``g``."""
    build = RoutesBuild(g, dests, infer_groups(g) if groups == "infer" else groups)
    while (routes := build.step(None)) is None:
        pass
    return routes


# A routes build's work per call (``RoutesBuild.step``): links read, and links visited
# by the searches (each destination visits every link once). A k=48 fat-tree's 110,592
# links take 6 calls to read and 13 to search its 1,152 destinations, ~50 ms each.
READ_LINKS_PER_CALL = 20_000
SEARCH_LINKS_PER_CALL = 10_000_000
# A distance matrix larger than this (switches x destinations) is allocated in a step of
# its own (a k=48 fat-tree's 2,880 x 1,152 takes about 45 ms to allocate and fill).
DIST_CELLS_ALONE = 1_000_000


class RoutesBuild:
    """``compute_routes`` in steps of bounded work, for a fabric that changed as a whole
    (one coming up): read every switch's out-links, then search the destinations a
    slice at a time. ``g`` must not change meanwhile (a caller that lets it records the
    graph's version and updates the result with ``update_routes``)."""

    def __init__(self, g: nx.MultiDiGraph, dests: Iterable[Node], groups: Groups) -> None:
        self.graph, self.groups = g, groups
        self.nodes = sorted(g.nodes, key=repr)
        self.asked = sorted(dests, key=repr)
        self.dests = [d for d in self.asked if d in g]  # (a destination not in g: no column)
        self._unread = self.nodes[::-1]
        self._costs: dict[tuple[Node, Node, int], int] = {}
        self._out: dict[Node, list[tuple[int, Node, int]]] = {}
        self._routes: Routes | None = None
        self._searched = 0

    def fits(self, g: nx.MultiDiGraph, dests: Iterable[Node], groups: Groups) -> bool:
        """Whether this build is for the same graph object, destinations and groups."""
        return (
            g is self.graph
            and groups is self.groups
            and sorted(dests, key=repr) == self.asked
            and sorted(g.nodes, key=repr) == self.nodes
        )

    def step(self, work: int | None = 1) -> Routes | None:
        """One bounded step (``work``: calls' worth; None: all); the routes once done."""
        links = 0
        reads = None if work is None else READ_LINKS_PER_CALL * work
        while self._unread and (reads is None or links < reads):
            u = self._unread.pop()
            self._out[u] = _links_of(self.graph, u, self.groups, len(self.nodes) + 1, self._costs)
            links += len(self._out[u])
        busy = reads is not None and links > reads // 2  # (what is left: the next step)
        if self._unread or busy:
            return None
        fresh = self._routes is None
        routes = self._start()
        if fresh:  # the link arrays and matrix: as much work as reading the links
            routes._csr()
            links += sum(len(e) for e in routes.out.values())
            if reads is not None and links > reads // 2:
                return None
        if routes.dist.shape != (len(self.nodes), len(self.dests)):
            routes.dist = np.full((len(self.nodes), len(self.dests)), np.inf)
            if reads is not None and routes.dist.size > DIST_CELLS_ALONE:
                return None  # (its pages are first touched here: 45 ms at k=48)
        edges = max(1, sum(len(e) for e in routes.out.values()))
        columns = len(self.dests) if work is None else SEARCH_LINKS_PER_CALL * work // edges
        todo = self.dests[self._searched : self._searched + max(1, columns)]
        if todo:
            found = _distances(routes._csr(), [routes.index[d] for d in todo])
            routes.dist[:, self._searched : self._searched + len(todo)] = found
            self._searched += len(todo)
        if self._searched < len(self.dests):
            return None
        routes.dests, routes.column = list(self.dests), {d: i for i, d in enumerate(self.dests)}
        return routes

    def _start(self) -> Routes:
        if self._routes is not None:
            return self._routes
        index = {n: i for i, n in enumerate(self.nodes)}
        out = {u: e for u, e in self._out.items() if e}
        routes = Routes(self.graph, self.groups, self._costs, self.nodes, index, out=out)
        self._routes = routes
        return routes


def _links_of(
    g: nx.MultiDiGraph,
    u: Node,
    groups: Groups,
    global_cost: int,
    costs: dict[tuple[Node, Node, int], int],
) -> list[tuple[int, Node, int]]:
    """``u``'s out-links in port order as (port, neighbour, cost), costs noted."""
    out = []
    for _, v, port in sorted(g.out_edges(u, keys=True), key=lambda e: e[2]):
        inter = groups is not None and groups.get(u) != groups.get(v)
        costs[(u, v, port)] = global_cost if inter else 1
        out.append((port, v, costs[(u, v, port)]))
    return out


def updatable(
    old: Routes, g: nx.MultiDiGraph, relinked: object, dests: Iterable[Node], groups: Groups
) -> bool:
    """Whether ``update_routes`` can bring ``old`` up to date (else it computes anew)."""
    return (
        relinked is not None
        and groups is old.groups
        and sorted(dests, key=repr) == old.dests
        and sorted(g.nodes, key=repr) == old.nodes
    )


def update_routes(
    old: Routes,
    g: nx.MultiDiGraph,
    relinked: Iterable[Node] | None,
    dests: Iterable[Node],
    groups: Groups,
) -> Routes:
    """Routes over ``g``, which differs from ``old``'s graph only in the out-links of the
    ``relinked`` switches (None: unknown). Only the destination columns whose distances
    can change are searched again: after a link goes, those where its switch lost its
    last equal-cost next hop; after a link comes, those it shortens. (A k=48 fat-tree's
    aggregation-core link changes 24 of 1,152 columns.) Anything else computes afresh.
    The new routes take over ``old``'s arrays and maps, updated in place (copying 26 MB
    of distances per link event would cost more than the search): ``old`` is spent."""
    if relinked is None or not updatable(old, g, relinked, dests, groups):
        return compute_routes(g, dests, groups)
    relinked, nodes = set(relinked), old.nodes
    costs, out = old.costs, dict(old.out)
    for u in relinked:
        for port, v, _ in out.pop(u, []):
            costs.pop((u, v, port), None)
        edges = _links_of(g, u, groups, len(nodes) + 1, costs)
        if edges:
            out[u] = edges
    routes = Routes(g, groups, costs, nodes, old.index, list(old.dests), dict(old.column), out=out)
    routes.relinked, routes.base = relinked, old.serial
    if old._edges is not None:  # the links of the others as they were, theirs anew
        keep = ~np.isin(old._edges[0], [old.index[u] for u in relinked])
        fresh = _edge_arrays(routes, {u: out[u] for u in relinked if u in out})
        routes._edges = tuple(  # type: ignore[assignment]
            np.concatenate([kept[keep], new]) for kept, new in zip(old._edges, fresh, strict=True)
        )
    columns = _shifted_columns(old, out, relinked)
    routes.dist, routes.moved = old.dist, set()
    if columns:
        sources = [old.index[old.dests[c]] for c in columns]
        found = _distances(routes._csr(), sources)
        moved = np.flatnonzero(np.any(found != old.dist[:, columns], axis=1))
        routes.moved = {nodes[i] for i in moved}
        routes.dist[:, columns] = found
    return routes


def _shifted_columns(
    old: Routes, out: dict[Node, list[tuple[int, Node, int]]], relinked: set[Node]
) -> list[int]:
    """Destination columns whose distances may differ once ``relinked`` switches have the
    out-links ``out``: old distances stay right unless a switch has no tight next hop
    left (an upper bound that holds) or a new link undercuts them (a lower bound that
    no longer does)."""
    dist, shifted = old.dist, np.zeros(len(old.dests), bool)
    for u in relinked:
        if u not in old.index:
            return list(range(len(old.dests)))
        here = dist[old.index[u]]
        before, after = old.out.get(u, []), out.get(u, [])
        if not after:  # no way out at all: everything it reached moves
            shifted |= np.isfinite(here) & (here > 0)
            continue
        rows = np.stack([dist[old.index[v]] + c for _, v, c in after])
        if set(before) - set(after):  # something went: is a tight hop left?
            tight_left = np.any(rows == here[None, :], axis=0)
            shifted |= np.isfinite(here) & (here > 0) & ~tight_left
        if set(after) - set(before):
            shifted |= np.any(rows < here[None, :], axis=0)
    return [int(c) for c in np.flatnonzero(shifted)]


def empty_routes() -> Routes:
    return compute_routes(nx.MultiDiGraph(), [])


def add_destination(routes: Routes, dest: Node) -> None:
    routes.add(dest)
