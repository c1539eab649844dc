"""Groups of leaf switches read from the fabric's shape: a fat-tree's pods, a dragonfly's
groups, a leaf-spine's leaves. Rank order and scheduler exports name them as blocks; the
address book lays each group out in one aligned range of switch indexes, so transit
switches match a whole group with one masked rule whatever the switches' datapath ids.

Pure: the pairs of switches ever seen linked in, sorted tuples of dpids out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controller.topology import Topology

Adjacency = Mapping[int, set[int]]


def neighbours(topo: Topology) -> dict[int, set[int]]:
    """Each known switch's neighbours, from the pairs ever seen linked (a failed link
    stays: the fabric's shape does not change when a link fails)."""
    adj: dict[int, set[int]] = {d: set() for d in topo.switches}
    for a, b in topo.neighbour_pairs():
        if a in adj and b in adj and a != b:
            adj[a].add(b)
            adj[b].add(a)
    return adj


def leaf_groups(leaves: Iterable[int], adj: Adjacency) -> list[tuple[int, ...]]:
    """``leaves`` grouped, each group ascending, the groups by their lowest dpid.

    Rule: leaf-leaf links that lie in a triangle of leaf-leaf links join their leaves
    into one group (connected components): a dragonfly's groups are cliques, its global
    links close no triangle. Every other leaf is grouped with the leaves that have the
    same set of non-leaf neighbours: a fat-tree's pods (edges sharing their aggregation
    switches), a leaf-spine's single group (a leaf pair's peer link is ignored).

    Limits: a dragonfly with two routers per group has no triangles, so each router is
    its own group; a leaf with no non-leaf neighbour and no triangle stays alone; a leaf
    cabled to a different subset of the spines forms a group of its own.
    """
    ordered = sorted(d for d in set(leaves) if d in adj)
    leaf_set = set(ordered)
    peers = {d: adj[d] & leaf_set for d in ordered}
    parent = {d: d for d in ordered}

    def root(d: int) -> int:
        while parent[d] != d:
            parent[d] = parent[parent[d]]
            d = parent[d]
        return d

    meshed: set[int] = set()
    for u in ordered:
        for v in peers[u]:
            if u < v and peers[u] & peers[v]:
                parent[max(root(u), root(v))] = min(root(u), root(v))
                meshed.update((u, v))
    groups: dict[tuple[str, object], list[int]] = {}
    for d in ordered:  # ascending: each group's list is sorted
        up = frozenset(adj[d] - leaf_set)
        key: tuple[str, object] = (
            ("mesh", root(d)) if d in meshed else ("tier", up) if up else ("alone", d)
        )
        groups.setdefault(key, []).append(d)
    return sorted((tuple(m) for m in groups.values()), key=lambda m: m[0])
