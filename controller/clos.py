"""Flows of equal rate routed on a Clos fabric (leaf-spine or fat-tree) so that no link
carries more of them than it must, by edge colouring.

Why: a permutation (each host sending to one other, as the rings of many jobs together
do) can always be routed on a full-bisection Clos with every link carrying one flow
(such a fabric is rearrangeably non-blocking), but a search over paths finds that routing
only on small fabrics: on a k=8 fat-tree, eight 16-rank rings left links shared after a
million paths weighed. The routing follows from König's theorem, that a bipartite
multigraph whose nodes have at most ``D`` edges can be coloured with ``D`` colours:

1. the flows as edges from source leaf to destination leaf, coloured: a colour is an
   uplink group (a leaf has one uplink to each group), so a leaf's flows leave by
   different uplinks and arrive by different downlinks;
2. on a three-tier fabric, each group's flows between pods as edges from source
   aggregation switch to destination aggregation switch, coloured again: a colour is a
   core switch of that group.

With more flows on a leaf than it has uplinks, colours wrap round the groups, so each
link carries as few as the busiest leaf forces. The structure is read from the links
(a group: the aggregation switches with the same core switches; on a leaf-spine, each
spine is its own group); a fabric that is not such a Clos (a dragonfly's leaves link to
each other) gets ``None``, and the caller's search alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.placement import Link, Path

Far = Callable[[Any], Mapping[int, Any]]  # a switch's ports and the switch at each far end


@dataclass(frozen=True)
class Flow:
    key: Hashable
    src: int  # leaf switch the flow enters by
    dst: int  # leaf switch it leaves by


def colour_edges(edges: Sequence[tuple[Hashable, Hashable]], colours: int) -> list[int]:
    """A colour in ``range(colours)`` for each edge (left node, right node) of a bipartite
    multigraph, no two edges at a node alike; ``colours`` must be at least the largest
    degree. Each edge takes a colour free at both ends, after swapping the two colours
    along an alternating path if need be (the path cannot return to the edge's left end,
    the graph being bipartite)."""
    at: dict[tuple[bool, Hashable], dict[int, int]] = {}  # node -> colour -> edge
    colour = [-1] * len(edges)

    def free(node: tuple[bool, Hashable]) -> int:
        used = at.setdefault(node, {})
        return next(c for c in range(colours) if c not in used)

    def ends(i: int) -> tuple[tuple[bool, Hashable], tuple[bool, Hashable]]:
        return (False, edges[i][0]), (True, edges[i][1])

    for i in range(len(edges)):
        left, right = ends(i)
        a, b = free(left), free(right)
        if a in at[right]:  # swap a and b along the a/b path that starts at ``right``
            path, node, want = [], right, a
            while want in at.get(node, {}):
                e = at[node][want]
                path.append(e)
                u, v = ends(e)
                node = v if node == u else u
                want = b if want == a else a
            for e in path:
                for end in ends(e):
                    del at[end][colour[e]]
            for e in path:
                colour[e] = b if colour[e] == a else a
                for end in ends(e):
                    at[end][colour[e]] = e
        colour[i] = a
        at[left][a] = at[right][a] = i
    return colour


@dataclass(frozen=True)
class Clos:
    """Per leaf, its uplink switch in each group; per group, its core switches (none on
    a leaf-spine); and the port of each switch towards each neighbour."""

    up: dict[int, dict[Hashable, int]]
    cores: dict[Hashable, tuple[int, ...]]
    port: dict[tuple[int, int], int]

    @classmethod
    def read(cls, far: Far, leaves: Iterable[int]) -> Clos | None:
        """The structure around ``leaves``, or None where it is not a Clos."""
        leaves = set(leaves)
        port: dict[tuple[int, int], int] = {}

        def neighbours(u: int) -> set[int]:
            for p, v in sorted(far(u).items()):
                port.setdefault((u, v), p)
            return set(far(u).values())

        up: dict[int, dict[Hashable, int]] = {}
        cores: dict[Hashable, tuple[int, ...]] = {}
        groups = None
        for leaf in sorted(leaves):
            above = neighbours(leaf)
            if above & leaves or not above:
                return None  # leaves linked to leaves (a dragonfly), or a leaf alone
            up[leaf] = {}
            for a in sorted(above):
                beyond = tuple(sorted(v for v in neighbours(a) if v not in leaves))
                group: Hashable = beyond if beyond else a  # a spine: its own group
                if group in up[leaf]:
                    return None  # two uplinks into one group: not a fat-tree's shape
                up[leaf][group] = a
                cores[group] = beyond
            if groups is None:
                groups = set(up[leaf])
            elif set(up[leaf]) != groups:
                return None  # leaves that do not reach the same groups
        for group_cores in cores.values():
            for c in group_cores:
                neighbours(c)  # (their ports down)
        return cls(up, cores, port)

    def path(self, flow: Flow, group: Hashable, core: int | None) -> Path:
        a, b = self.up[flow.src][group], self.up[flow.dst][group]
        if a == b or core is None:
            hops = [flow.src, a, flow.dst]
        else:
            hops = [flow.src, a, core, b, flow.dst]
        return tuple(self._link(u, v) for u, v in itertools.pairwise(hops))

    def _link(self, u: int, v: int) -> Link:
        return (u, self.port[(u, v)])


def clos_paths(flows: Sequence[Flow], far: Far) -> dict[Hashable, Path] | None:
    """A path for each flow between two different leaves, as few flows on each link as
    the busiest leaf forces; None on a fabric that is not a Clos (module docstring)."""
    flows = [f for f in flows if f.src != f.dst]
    clos = Clos.read(far, {f.src for f in flows} | {f.dst for f in flows})
    if clos is None or not flows:
        return None if clos is None else {}
    groups = sorted(clos.cores, key=repr)
    degree = _max_degree([(f.src, f.dst) for f in flows])
    first = colour_edges([(f.src, f.dst) for f in flows], max(degree, len(groups)))
    paths: dict[Hashable, Path] = {}
    for g, group in enumerate(groups):
        mine = [f for f, c in zip(flows, first, strict=True) if c % len(groups) == g]
        across = [f for f in mine if clos.up[f.src][group] != clos.up[f.dst][group]]
        for f in mine:
            if f not in across:
                paths[f.key] = clos.path(f, group, None)
        if not across:
            continue
        cores = clos.cores[group]
        ends = [(clos.up[f.src][group], clos.up[f.dst][group]) for f in across]
        second = colour_edges(ends, max(_max_degree(ends), len(cores)))
        for f, c in zip(across, second, strict=True):
            paths[f.key] = clos.path(f, group, cores[c % len(cores)])
    return paths


def _max_degree(edges: Sequence[tuple[Hashable, Hashable]]) -> int:
    count: dict[tuple[bool, Hashable], int] = {}
    for u, v in edges:
        count[(False, u)] = count.get((False, u), 0) + 1
        count[(True, v)] = count.get((True, v), 0) + 1
    return max(count.values(), default=0)
