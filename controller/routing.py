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
from collections import deque
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass

import networkx as nx

Node = Hashable
NextHops = dict[Node, tuple[tuple[int, Node], ...]]  # node -> ((port, neighbour), ...)


def infer_groups(g: nx.Graph | nx.MultiGraph | nx.MultiDiGraph) -> dict[Node, int] | None:
    """Dragonfly groups, if the switches partition into fully meshed sets of size >= 3.

    Maximal cliques are taken largest first (ties by sorted members, so the answer is
    deterministic); returns ``None`` for fabrics without such a structure (fat-trees
    and leaf-spines have no triangles at all).
    """
    simple = nx.Graph()
    simple.add_nodes_from(g.nodes)
    simple.add_edges_from((u, v) for u, v in g.edges() if u != v)
    if simple.number_of_nodes() < 6:
        return None
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


@dataclass
class Routes:
    """Next-hop ports per destination switch, computed on one snapshot of the graph.

    Destinations added later are computed on the same snapshot, so costs and next hops
    always agree even while discovery keeps changing the live graph.
    """

    graph: nx.MultiDiGraph
    groups: dict[Node, int] | None
    costs: dict[tuple[Node, Node, int], int]
    ports: dict[Node, dict[Node, tuple[int, ...]]]  # dest -> switch -> ports

    def next_ports(self, switch: Node, dest: Node) -> tuple[int, ...]:
        return self.ports.get(dest, {}).get(switch, ())


def compute_routes(g: nx.MultiDiGraph, dests: Iterable[Node]) -> Routes:
    """Routes to each of ``dests`` over ``g``, with dragonfly groups inferred."""
    groups = infer_groups(g)
    routes = Routes(g, groups, link_costs(g, groups), {})
    for dest in dests:
        add_destination(routes, dest)
    return routes


def empty_routes() -> Routes:
    return Routes(nx.MultiDiGraph(), None, {}, {})


def add_destination(routes: Routes, dest: Node) -> None:
    hops = ecmp_next_hops(routes.graph, dest, routes.costs)
    routes.ports[dest] = {u: tuple(p for p, _ in nh) for u, nh in hops.items() if nh}


def transit_port(ports: tuple[int, ...], rank: int) -> int:
    """The next hop a transit switch uses for the destination host of ``rank``.

    Ingress switches hash flows over all next hops (select groups); transit switches
    spread destinations instead, so the two tiers never make the same choice for the
    same flow (identical hashing at every tier left half of a fat-tree's core idle).
    """
    return ports[rank % len(ports)]
