"""Routes kept up to date with the learned graph, in calls of bounded work.

A link event changes a few switches' out-links: the routes are updated in place within
the call (``update_routes``). A fabric that changed as a whole (one coming up: 2,880
switches and 110,592 links at k=48) would take seconds in one call, during which the
controller handles nothing else; instead its graph is built afresh and its routes
computed a slice a call (``Topology.graph_ready``, ``RoutesBuild``), while the routes in
use stay as they were, on the graph they were computed on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.routing import (
    READ_LINKS_PER_CALL,
    Groups,
    Routes,
    RoutesBuild,
    empty_routes,
    groups_of,
    updatable,
    update_routes,
)
from controller.topology import Topology

# Switches a call adds to a graph being built afresh (about 0.3 ms each at k=48).
GRAPH_SWITCHES_PER_CALL = 32


@dataclass
class RouteKeeper:
    """The routes, the graph version and destinations they are for, and the dragonfly
    groups (inferred again only when the fabric's shape changed)."""

    routes: Routes = field(default_factory=empty_routes)
    _to: list[int] = field(default_factory=list)
    _version: int = -1
    _groups: tuple[int, Groups] = (-1, None)
    _build: tuple[int, RoutesBuild] | None = None  # graph version at its start, the build

    def advance(self, topo: Topology, dests: list[int]) -> bool:
        """Bring ``routes`` up to date with ``topo``: at once when little changed, else a
        bounded step; True once they are."""
        if not topo.graph_ready(GRAPH_SWITCHES_PER_CALL):
            return False
        graph = topo.graph()
        if topo.version == self._version and dests == self._to:
            self._build = None
            return True
        if self._groups[0] != topo.shape:
            self._groups = (topo.shape, groups_of(graph.nodes, topo.neighbour_pairs()))
            if len(topo.links) > READ_LINKS_PER_CALL // 10:  # (0.1 s at 1,024 routers)
                return False  # (what follows is a step of its own)
        groups, relinked = self._groups[1], topo.changes_since(self._version)
        if updatable(self.routes, graph, relinked, dests, groups) or self.routes.graph is graph:
            # a link event; or switches came or went on the graph the routes are on, which
            # changed under them: they cannot wait (one call: seconds at k=48)
            self._done(update_routes(self.routes, graph, relinked, dests, groups), topo, dests)
            return True
        if self._build is None or not self._build[1].fits(graph, dests, groups):
            self._build = (topo.version, RoutesBuild(graph, dests, groups))
        built = self._build[1].step()
        if built is None:
            return False
        since = topo.changes_since(self._build[0])
        self._build = None
        if since is None:  # the graph was built afresh again meanwhile: start over
            return False
        if since:  # links that changed while it was computed
            built = update_routes(built, graph, since, dests, groups)
        self._done(built, topo, dests)
        return True

    def _done(self, routes: Routes, topo: Topology, dests: list[int]) -> None:
        self.routes, self._version, self._to = routes, topo.version, dests
