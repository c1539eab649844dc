"""Detours: for a directed fabric link u:port -> v, the shortest way from u to v that
avoids the link's cable (both directions), found fast and kept while it lasts.

Of the shortest paths, the detour is the one whose out ports are lowest, compared hop by
hop (what a breadth-first search trying lower ports first finds): a function of the
graph alone, so it needs no tie-break on Python's hashing or set order. A search grows
breadth-first layers from both ends, a whole layer at a time with set operations (which
run in C), until a link joins them; the lowest-port path is then read off the layers.

A detour is kept while every hop of it lives, so a link event re-searches only the
detours over a hop that died, and the links that had none when a link comes back. (A
kept detour may be longer than a fresh search would find once the link it went round
comes back: it still works, and keeping it keeps the tunnels of other links in place.)
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping

import networkx as nx

PortPeer = tuple[int, int, int]  # (port, peer, peer port)
Hop = tuple[int, int]  # (switch, out port)
Path = tuple[Hop, ...]
Adjacency = dict[int, list[PortPeer]]  # switch -> its links in port order

_NONE: frozenset[int] = frozenset()


def adjacency(g: nx.MultiDiGraph) -> Adjacency:
    """Every switch's links in port order, read once from the graph."""
    adj: Adjacency = {}
    for u, v, k, d in g.edges(keys=True, data=True):
        adj.setdefault(u, []).append((k, v, d.get("dst_port", 0)))
    for links in adj.values():
        links.sort()
    return adj


def read_links(g: nx.MultiDiGraph, switch: int) -> tuple[PortPeer, ...]:
    """One switch's links in port order (none if it is not in the graph)."""
    if switch not in g:
        return ()
    return tuple(
        sorted(
            (port, peer, data.get("dst_port", 0))
            for peer, keyed in g.succ[switch].items()
            for port, data in keyed.items()
        )
    )


class DetourGraph:
    """The switch graph as the detour search reads it: per switch its links in port
    order, and the sets of switches it links to and from (what the layers are grown
    with). Kept up to date one switch at a time, so a link event costs its two ends."""

    def __init__(self) -> None:
        self.links: dict[int, tuple[PortPeer, ...]] = {}
        self._ports: dict[int, dict[int, tuple[int, int]]] = {}  # switch -> port -> far end
        self._out: dict[int, frozenset[int]] = {}
        self._in: dict[int, frozenset[int]] = {}
        self._in_count: dict[int, dict[int, int]] = {}  # switch -> {from: links}
        self._stale: set[int] = set()  # switches whose in-set awaits a rebuild

    @classmethod
    def of(cls, adj: Mapping[int, Iterable[PortPeer]]) -> DetourGraph:
        graph = cls()
        for switch, links in adj.items():
            graph.set_links(switch, tuple(sorted(links)))
        return graph

    def set_links(self, switch: int, links: tuple[PortPeer, ...]) -> tuple[list[Hop], list[Hop]]:
        """Give ``switch`` these links (in port order); return the hops that went and
        those that came (a port now cabled elsewhere is both)."""
        old = self.links.get(switch, ())
        if old == links:
            return [], []
        before, after = set(old), set(links)
        went = [link for link in old if link not in after]
        came = [link for link in links if link not in before]
        for _, peer, _ in went:
            self._count_in(peer, switch, -1)
        for _, peer, _ in came:
            self._count_in(peer, switch, 1)
        if links:
            self.links[switch] = links
            self._ports[switch] = {port: (peer, far) for port, peer, far in links}
            self._out[switch] = frozenset(peer for _, peer, _ in links)
        else:
            self.links.pop(switch, None)
            self._ports.pop(switch, None)
            self._out.pop(switch, None)
        return [(switch, port) for port, _, _ in went], [(switch, port) for port, _, _ in came]

    def _count_in(self, switch: int, source: int, step: int) -> None:
        counts = self._in_count.setdefault(switch, {})
        count = counts.get(source, 0) + step
        if count:
            counts[source] = count
        else:
            del counts[source]
        if count in (0, step):  # ``source`` joined or left the set
            self._stale.add(switch)

    def _sync(self) -> None:
        """Rebuild the in-sets that changed (once per batch of updates: rebuilding on
        every link would cost a switch's degree squared)."""
        for switch in self._stale:
            counts = self._in_count.get(switch)
            if counts:
                self._in[switch] = frozenset(counts)
            else:
                self._in.pop(switch, None)
                self._in_count.pop(switch, None)
        self._stale.clear()

    def has(self, switch: int) -> bool:
        """Whether any link leads from or to ``switch``."""
        return switch in self.links or bool(self._in_count.get(switch))

    def neighbours(self, switch: int) -> set[int]:
        """The switches ``switch`` has links to or from."""
        return {peer for _, peer, _ in self.links.get(switch, ())} | set(
            self._in_count.get(switch, ())
        )

    def peer(self, hop: Hop) -> tuple[int, int] | None:
        """Where a hop leads: (switch, its port), or None if it is not a live link."""
        ports = self._ports.get(hop[0])
        return None if ports is None else ports.get(hop[1])

    def detour(self, u: int, port: int) -> Path | None:
        """The hops (switch, out port) from u to the far end v of u:port avoiding that
        cable: shortest, then lowest ports first. None if the cable is a bridge (or there
        is no such link)."""
        far = self.peer((u, port))
        if far is None or far[0] == u:
            return None
        v = far[0]
        self._sync()
        twins = self._in_count.get(v, {}).get(u, 0) > 1  # another cable from u to v
        out_u = self._out[u] if twins else self._out[u] - {v}
        in_v = self._in.get(v, _NONE) if twins else self._in.get(v, _NONE) - {u}

        def out_of(x: int) -> frozenset[int]:
            return out_u if x == u else self._out.get(x, _NONE)

        def in_of(x: int) -> frozenset[int]:
            return in_v if x == v else self._in.get(x, _NONE)

        layers = _layers(u, v, out_of, in_of)
        if layers is None:
            return None
        forward, backward = layers
        head, x = self._head(u, forward, backward[-1], out_of)
        for layer in reversed(backward):  # then down the backward layers to v
            hop, x = self._lowest(x, layer, (u, port))
            head.append(hop)
        return tuple(head)

    def _head(
        self,
        u: int,
        forward: list[set[int]],
        target: set[int],
        out_of: Callable[[int], frozenset[int]],
    ) -> tuple[list[Hop], int]:
        """The lowest-port way from u through the forward layers to a switch linked to
        ``target``, and that switch: depth first, a switch found to lead nowhere not
        tried again. (A loop, not a recursive closure: that would be a reference cycle,
        garbage only the cyclic collector frees, and the controller freezes the heap.)"""
        last = len(forward) - 1
        if last == 0:
            return [], u  # (the layers joined at u)
        dead: set[int] = set()
        path: list[Hop] = []
        trail = [(u, iter(self.links.get(u, ())))]  # the switches walked, and their links
        while trail:
            x, links = trail[-1]
            layer = forward[len(trail)]  # (v is in none: the banned link is never taken)
            for port, y, _ in links:
                if y not in layer or y in dead:
                    continue
                if len(trail) < last:
                    path.append((x, port))
                    trail.append((y, iter(self.links.get(y, ()))))
                    break
                if not out_of(y).isdisjoint(target):
                    return [*path, (x, port)], y
                dead.add(y)
            else:  # x leads nowhere
                dead.add(x)
                trail.pop()
                if path:
                    path.pop()
        raise AssertionError("the layers joined, so a way through them exists")

    def _lowest(self, x: int, layer: set[int], banned: Hop) -> tuple[Hop, int]:
        """The lowest-port hop from ``x`` into ``layer``, and where it leads."""
        for port, y, _ in self.links[x]:
            if y in layer and (x, port) != banned:
                return (x, port), y
        raise AssertionError("every switch of a layer links to the next one")


def _layers(
    u: int,
    v: int,
    out_of: Callable[[int], frozenset[int]],
    in_of: Callable[[int], frozenset[int]],
) -> tuple[list[set[int]], list[set[int]]] | None:
    """Breadth-first layers from u (by out-links) and towards v (by in-links), growing
    the smaller side a whole layer at a time until a link joins the two last layers (the
    detour then has one hop per layer beyond the first on each side, plus that link).
    None if a side runs dry: nothing joins them."""
    forward, backward = [{u}], [{v}]
    seen_f, seen_b = {u}, {v}
    while not _joined(forward[-1], backward[-1], out_of, in_of):
        if len(forward[-1]) <= len(backward[-1]):
            layer = set().union(*map(out_of, forward[-1])) - seen_f
            seen_f |= layer
            forward.append(layer)
        else:
            layer = set().union(*map(in_of, backward[-1])) - seen_b
            seen_b |= layer
            backward.append(layer)
        if not layer:
            return None
    return forward, backward


def _joined(
    tail: set[int],
    head: set[int],
    out_of: Callable[[int], frozenset[int]],
    in_of: Callable[[int], frozenset[int]],
) -> bool:
    """Whether a link leads from a switch in ``tail`` to one in ``head`` (looked up from
    the smaller side)."""
    if len(tail) <= len(head):
        return any(not out_of(x).isdisjoint(head) for x in tail)
    return any(not in_of(y).isdisjoint(tail) for y in head)


def detour(g: nx.MultiDiGraph, u: int, port: int, adj: Adjacency | None = None) -> list[Hop] | None:
    """Hops (switch, out port) from u to the far end of u:port, avoiding that link in
    both directions: shortest, lowest ports first. Indexes the whole graph: for many
    searches, keep a ``DetourGraph``."""
    hops = DetourGraph.of(adjacency(g) if adj is None else adj).detour(u, port)
    return None if hops is None else list(hops)


class DetourBook:
    """The detours of the links being protected: which is whose, which links still
    wait for a search, and which detours ride over each hop (so a hop's death finds
    the detours it broke without looking at the others)."""

    def __init__(self) -> None:
        self.paths: dict[Hop, Path | None] = {}  # searched: the detour, or None
        self.pending: set[Hop] = set()  # to search
        self._riders: dict[Hop, set[Hop]] = {}  # hop -> links whose detour takes it
        self._stranded: set[Hop] = set()  # searched and found none

    def __contains__(self, link: Hop) -> bool:
        return link in self.paths or link in self.pending

    def links(self) -> list[Hop]:
        return [*self.paths, *self.pending]

    def add(self, link: Hop) -> None:
        """Protect ``link``: its detour is searched by a coming ``search``."""
        if link not in self.paths:
            self.pending.add(link)

    def drop(self, link: Hop) -> None:
        """Stop protecting ``link``."""
        self.pending.discard(link)
        self._stranded.discard(link)
        self._unride(link, self.paths.pop(link, None))

    def hop_gone(self, hop: Hop) -> list[Hop]:
        """The detours over ``hop`` are lost: their links (returned) wait for a search
        again."""
        lost = sorted(self._riders.pop(hop, ()))
        for link in lost:
            self._unride(link, self.paths.pop(link))
            self.pending.add(link)
        return lost

    def link_came(self, every: bool = False) -> list[Hop]:
        """A link came (back): the links without a detour may have one now (and, with
        ``every``, any detour may be shorter: all are searched again)."""
        again = sorted(self.paths) if every else sorted(self._stranded)
        for link in again:
            self._unride(link, self.paths.pop(link))
        self.pending.update(again)
        self._stranded.clear()
        return again

    def search(self, graph: DetourGraph, budget: int | None) -> list[tuple[Hop, Path | None]]:
        """Search the waiting links' detours, lowest link first, at most ``budget``."""
        if budget is None or budget >= len(self.pending):
            todo = sorted(self.pending)
        else:
            todo = heapq.nsmallest(max(budget, 0), self.pending)
        found = []
        for link in todo:
            path = graph.detour(*link)
            self.pending.discard(link)
            self.paths[link] = path
            if path is None:
                self._stranded.add(link)
            for hop in path or ():
                self._riders.setdefault(hop, set()).add(link)
            found.append((link, path))
        return found

    def _unride(self, link: Hop, path: Path | None) -> None:
        for hop in path or ():
            riders = self._riders.get(hop)
            if riders is not None:
                riders.discard(link)
                if not riders:
                    del self._riders[hop]
