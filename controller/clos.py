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
from dataclasses import dataclass, replace
from typing import Any

from controller.model import PortRef
from controller.placement import Demand, Path

Far = Callable[[Any], Mapping[int, Any]]  # a switch's ports and the switch at each far end


@dataclass(frozen=True)
class Flow:
    key: Hashable
    src: int  # leaf switch the flow enters by
    dst: int  # leaf switch it leaves by
    current: Path | None = None  # where it runs now: kept where the colouring allows


def colour_edges(
    edges: Sequence[tuple[Hashable, Hashable]],
    colours: int,
    prefer: Sequence[int | None] | None = None,
) -> list[int]:
    """A colour in ``range(colours)`` for each edge (left node, right node) of a bipartite
    multigraph, no two edges at a node alike; ``colours`` must be at least the largest
    degree. Edges first keep their ``prefer`` colour where it is free at both ends (so a
    routing that changes by a few flows moves few others); each other edge takes a colour
    free at both ends, after swapping two colours along the shorter of two alternating
    paths if need be (neither can return to the edge's other end, the graph being
    bipartite)."""
    state = _Colouring(edges, colours)
    for i, want in enumerate(prefer or ()):
        if want is not None and 0 <= want < colours and state.free_at_both(i, want):
            state.take(i, want)
    for i in range(len(edges)):
        if state.colour[i] < 0:
            state.take(i, state.make_free(i))
    return state.colour


Node = tuple[bool, Hashable]  # (right side?, node)


class _Colouring:
    def __init__(self, edges: Sequence[tuple[Hashable, Hashable]], colours: int) -> None:
        self.edges, self.colours = edges, colours
        self.at: dict[Node, dict[int, int]] = {}  # node -> colour -> edge
        self.colour = [-1] * len(edges)

    def ends(self, i: int) -> tuple[Node, Node]:
        return (False, self.edges[i][0]), (True, self.edges[i][1])

    def used(self, node: Node) -> dict[int, int]:
        return self.at.setdefault(node, {})

    def free_at_both(self, i: int, c: int) -> bool:
        left, right = self.ends(i)
        return c not in self.used(left) and c not in self.used(right)

    def take(self, i: int, c: int) -> None:
        self.colour[i] = c
        for end in self.ends(i):
            self.used(end)[c] = i

    def make_free(self, i: int) -> int:
        """A colour free at both ends of edge ``i``, swapping two colours along an
        alternating path if need be: the shortest over every pair of colours free at one
        end each, so that as few edges as can be change colour (each is a flow moved)."""
        both = next((c for c in range(self.colours) if self.free_at_both(i, c)), None)
        if both is not None:
            return both
        left, right = self.ends(i)
        free_left = [c for c in range(self.colours) if c not in self.used(left)]
        free_right = [c for c in range(self.colours) if c not in self.used(right)]
        best: tuple[list[int], int, int] | None = None  # (path, colour it frees, other)
        for a, b in itertools.product(free_left, free_right):
            limit = len(best[0]) if best is not None else len(self.edges)
            for start, want, other in ((right, a, b), (left, b, a)):
                path = self.alternating(start, want, other, limit)
                if path is not None and (best is None or len(path) < len(best[0])):
                    best, limit = (path, want, other), len(path)
        assert best is not None  # a swap along either path always frees a colour
        path, freed, other = best
        for e in path:
            for end in self.ends(e):
                del self.at[end][self.colour[e]]
        for e in path:
            self.take(e, other if self.colour[e] == freed else freed)
        return freed

    def alternating(self, node: Node, want: int, other: int, limit: int) -> list[int] | None:
        """The edges of the path from ``node`` coloured ``want``, ``other``, ``want``...;
        None once it is longer than ``limit`` (a shorter one is known)."""
        path: list[int] = []
        while want in self.used(node):
            if len(path) >= limit:
                return None
            e = self.at[node][want]
            path.append(e)
            u, v = self.ends(e)
            node = v if node == u else u
            want, other = other, want
        return path


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

    def group_of(self, leaf: int, above: int | None) -> Hashable | None:
        """The group of ``leaf``'s uplink switch ``above`` (None: not one of them)."""
        return next((g for g, a in self.up.get(leaf, {}).items() if a == above), None)

    def path(self, flow: Flow, group: Hashable, core: int | None) -> Path:
        a, b = self.up[flow.src][group], self.up[flow.dst][group]
        if a == b or core is None:
            hops = [flow.src, a, flow.dst]
        else:
            hops = [flow.src, a, core, b, flow.dst]
        return tuple(self._link(u, v) for u, v in itertools.pairwise(hops))

    def _link(self, u: int, v: int) -> PortRef:
        return (u, self.port[(u, v)])


def clos_paths(
    flows: Sequence[Flow], far: Far, leaves: Iterable[int] = ()
) -> dict[Hashable, Path] | None:
    """A path for each flow between two different leaves, as few flows on each link as
    the busiest leaf forces; None on a fabric that is not a Clos (module docstring).
    ``leaves``: every switch with hosts, where the flows' own ends are not all of them
    (the structure is read from the leaves, and a leaf left out looks like a core)."""
    flows = [f for f in flows if f.src != f.dst]
    clos = Clos.read(far, {f.src for f in flows} | {f.dst for f in flows} | set(leaves))
    if clos is None or not flows:
        return None if clos is None else {}
    groups = sorted(clos.cores, key=repr)
    index = {group: g for g, group in enumerate(groups)}
    was = [_hops(f.current, far) for f in flows]
    degree = _max_degree([(f.src, f.dst) for f in flows])
    prefer = [
        index[group] if (group := clos.group_of(f.src, hops[1] if hops else None)) else None
        for f, hops in zip(flows, was, strict=True)
    ]
    first = colour_edges([(f.src, f.dst) for f in flows], max(degree, len(groups)), prefer)
    was_by_key = {f.key: hops for f, hops in zip(flows, was, strict=True)}
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
        core_at = {c: i for i, c in enumerate(cores)}
        stay = [_core_of(was_by_key[f.key], core_at) for f in across]
        second = colour_edges(ends, max(_max_degree(ends), len(cores)), stay)
        for f, c in zip(across, second, strict=True):
            paths[f.key] = clos.path(f, group, cores[c % len(cores)])
    return paths


def from_colouring(
    demands: list[Demand], far: Far, leaves: Iterable[int] = ()
) -> list[Demand] | None:
    """The demands, each starting from its path in the Clos edge colouring (added to its
    candidates if it was not among them); None on a fabric that is no Clos. Demands that
    may not move keep their colours first (the others are coloured round them), but
    take the colouring's path where it has none to give them (held, as it is, there)."""
    ends = [(d, _leaves(d.candidates[0], far)) for d in demands if d.candidates]
    flows = [
        Flow(d.key, src, dst, d.current if d.current is not None else d.hint)
        for d, (src, dst) in sorted(ends, key=lambda e: e[0].movable)
        if src is not None
    ]
    start = clos_paths(flows, far, leaves)
    if not start:
        return None
    out = []
    for d in demands:
        path = start.get(d.key)
        if path is None:
            out.append(d)
            continue
        more = () if path in d.candidates else (path,)
        out.append(replace(d, current=path, candidates=d.candidates + more))
    return out


def _leaves(path: Path, far: Far) -> tuple[int | None, int]:
    """The switches a path enters and leaves the fabric by (None, 0 for an empty one)."""
    if not path:
        return None, 0
    last = path[-1]
    return path[0][0], far(last[0])[last[1]]


def _hops(path: Path | None, far: Far) -> list[int]:
    """The switches a path crosses, from its first to its last."""
    if not path:
        return []
    return [path[0][0]] + [far(u)[port] for u, port in path]


def _core_of(hops: list[int], core_at: Mapping[int, int]) -> int | None:
    return core_at.get(hops[2]) if len(hops) == 5 else None


def _max_degree(edges: Sequence[tuple[Hashable, Hashable]]) -> int:
    count: dict[tuple[bool, Hashable], int] = {}
    for u, v in edges:
        count[(False, u)] = count.get((False, u), 0) + 1
        count[(True, v)] = count.get((True, v), 0) + 1
    return max(count.values(), default=0)
