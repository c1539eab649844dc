"""The incremental failover planner against a from-scratch reference: link events
applied to one graph in place, the planner told only the switches whose links changed,
must give the plans a whole recomputation gives, and keep the very objects of switches
whose rules did not change. And the detour search: shortest, around the cable, lowest
ports first, whatever order the graph was built in."""

from __future__ import annotations

import gc
import random
from collections import deque
from dataclasses import dataclass, field

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import topologies
from controller import protection
from controller.detours import Adjacency, DetourGraph, Hop, Path, adjacency, detour, read_links
from controller.model import SwitchRules
from controller.owners import Plan
from controller.protection import (
    Protection,
    ProtectionPlanner,
    ProtectionResult,
    _groups,
    _tunnel_rules,
    protection_plans,
    tunnel_ids,
)

Cable = tuple[int, int, int, int]  # (a, port at a, b, port at b)


def switch_graph(name: str) -> nx.MultiDiGraph:
    """The switch graph as the controller builds it: one directed edge per direction of
    each switch-to-switch cable, keyed by the out port."""
    topo = topologies.by_name(name)
    g = nx.MultiDiGraph()
    g.add_nodes_from(d["dpid"] for _, d in topo.nodes(data=True) if d["kind"] == "switch")
    for a, b, data in topo.edges(data=True):
        if topo.nodes[a]["kind"] == topo.nodes[b]["kind"] == "switch":
            da, db = topo.nodes[a]["dpid"], topo.nodes[b]["dpid"]
            connect(g, (da, data["ports"][a], db, data["ports"][b]))
    return g


def connect(g: nx.MultiDiGraph, cable: Cable) -> None:
    a, pa, b, pb = cable
    g.add_edge(a, b, key=pa, dst_port=pb)
    g.add_edge(b, a, key=pb, dst_port=pa)


def disconnect(g: nx.MultiDiGraph, cable: Cable) -> None:
    a, pa, b, pb = cable
    g.remove_edge(a, b, pa)
    g.remove_edge(b, a, pb)


def cables(g: nx.MultiDiGraph) -> list[Cable]:
    """Every cable once (also those known in one direction only)."""
    ends = {tuple(sorted([(u, k), (v, f)])) for u, v, k, f in g.edges(keys=True, data="dst_port")}
    return sorted((a, pa, b, pb) for (a, pa), (b, pb) in ends)


def live_links(g: nx.MultiDiGraph) -> set[Hop]:
    return {(u, k) for u, _, k in g.edges(keys=True)}


# -- the reference: everything from scratch, as protection_plans did before ---------------


def bfs_detour(adj: Adjacency, u: int, port: int) -> Path | None:
    """The original search: breadth first from u, lower ports first, the link's cable
    banned in both directions."""
    edge = next(((v, far) for k, v, far in adj.get(u, ()) if k == port), None)
    if edge is None:
        return None
    v, far = edge
    banned = {(u, port), (v, far)}
    parent: dict[int, Hop] = {}
    seen, queue = {u}, deque([u])
    while queue and v not in parent:
        node = queue.popleft()
        for key, nxt, _ in adj.get(node, ()):
            if nxt not in seen and (node, key) not in banned:
                seen.add(nxt)
                parent[nxt] = (node, key)
                queue.append(nxt)
    if v not in parent:
        return None
    hops, node = [], v
    while node != u:
        hops.append(parent[node])
        node = parent[node][0]
    return tuple(reversed(hops))


@dataclass
class Reference:
    """Plans recomputed over the whole graph on every call. A detour is kept while its
    hops live; it is searched again when one died, and (for links that had none) when
    any link came."""

    alive: set[Hop] = field(default_factory=set)
    detours: dict[Hop, Path | None] = field(default_factory=dict)

    def plan(self, g: nx.MultiDiGraph, known: set[Hop]) -> tuple[dict[int, Plan], Protection]:
        adj = adjacency(g)
        live = sorted((u, k) for u, links in adj.items() for k, _, _ in links)
        alive = set(live)
        dead, grew = self.alive - alive, bool(alive - self.alive)
        ids = tunnel_ids([*live, *known])
        detours: dict[Hop, Path | None] = {}
        plans: dict[int, Plan] = {}
        prot = Protection()
        for link in (link for link in live if link in ids):
            path = self.detours.get(link)
            fresh = link not in self.detours or (path is None and grew)
            if fresh or any(hop in dead for hop in path or ()):
                path = bfs_detour(adj, *link)
            detours[link] = path
            prot.first.setdefault(link[0], {})[link[1]] = path[0][1] if path else None
            if path and len(path) > 1:
                end, arrival = next((v, f) for k, v, f in adj[path[-1][0]] if k == path[-1][1])
                for dpid, rule in _tunnel_rules(path, ids[link], end, arrival)[0]:
                    rules(plans, dpid).add_flow(rule)
                prot.arrivals.setdefault(end, set()).add(arrival)
        for link, path in detours.items():
            if not path:
                prot.arrivals.get(link[0], set()).discard(link[1])
        for (u, port), path in detours.items():
            arrival = bool(path) and port in prot.arrivals.get(u, ())
            for group in _groups(port, path, ids[(u, port)], arrival):
                rules(plans, u).add_group(group)
        self.alive, self.detours = alive, detours
        return plans, prot


def rules(plans: dict[int, Plan], dpid: int) -> SwitchRules:
    return plans.setdefault(dpid, {dpid: SwitchRules()})[dpid]


# -- helpers --------------------------------------------------------------------------


def settle(
    planner: ProtectionPlanner,
    g: nx.MultiDiGraph,
    changed: list[int] | None,
    known: set[Hop],
    budget: int | None = 3,
    last: ProtectionResult | None = None,
) -> ProtectionResult:
    """Call until no search is left (as the controller does, with no switch changed
    after the first call), checking that meanwhile the plans stay ``last``."""
    result = planner.plan(g, changed, known, budget)
    for _ in range(10_000):
        if not result.waiting:
            return result
        if last is not None:
            assert result.plans is last.plans and result.protection is last.protection
        result = planner.plan(g, [], known, budget)
    raise AssertionError("the searches never ended")


def assert_kept(before: ProtectionResult, after: ProtectionResult) -> None:
    """Equal switches keep their objects; an unchanged result is the same object."""
    for dpid, plan in after.plans.items():
        old = before.plans.get(dpid)
        assert old is None or (old is plan) == (old == plan), dpid
    for table in ("first", "arrivals"):
        new_table = getattr(after.protection, table)
        old_table = getattr(before.protection, table)
        for dpid, entry in new_table.items():
            old = old_table.get(dpid)
            assert old is None or (old is entry) == (old == entry), (table, dpid)
    if before.protection == after.protection:
        assert before.protection is after.protection
    if before.plans == after.plans:
        assert before.plans is after.plans


def random_fabric(rng: random.Random, switches: int, count: int) -> nx.MultiDiGraph:
    """Switches 1..n joined by ``count`` random cables (parallel ones too), ports
    numbered with gaps so that port order is not the order links were made in; now and
    then only one direction of a cable is known (as while links are discovered)."""
    g = nx.MultiDiGraph()
    g.add_nodes_from(range(1, switches + 1))
    ports = dict.fromkeys(range(1, switches + 1), 0)
    for _ in range(count):
        a, b = rng.sample(range(1, switches + 1), 2)
        ports[a] += rng.randint(1, 3)
        ports[b] += rng.randint(1, 3)
        if rng.random() < 0.15:
            g.add_edge(a, b, key=ports[a], dst_port=ports[b])
        else:
            connect(g, (a, ports[a], b, ports[b]))
    return g


def fabrics() -> st.SearchStrategy[nx.MultiDiGraph]:
    named = st.sampled_from(["fat_tree:k=4", "dragonfly:a=4,p=2,h=2,g=9"]).map(switch_graph)
    made = st.builds(
        lambda seed, n, m: random_fabric(random.Random(seed), n, m),
        st.integers(0, 2**32),
        st.integers(2, 9),
        st.integers(1, 18),
    )
    return st.one_of(named, made)


@dataclass
class Events:
    """Link events applied to a graph in place; each returns the switches whose links
    changed, as the controller would name them."""

    g: nx.MultiDiGraph
    cables: list[Cable]
    only_downs: bool = True  # no link came (back) yet

    def apply(self, pick: int, kind: int) -> list[int]:
        """kind 0: a cable goes down, or comes (back) up; 1: one direction of it does;
        2: a cable on never-seen ports comes (the tunnel ids are renumbered)."""
        if kind == 2:
            return self._new_cable(pick)
        a, pa, b, pb = self.cables[pick % len(self.cables)]
        halves = [(a, pa, b, pb), (b, pb, a, pa)]
        if kind == 1:
            halves = [halves[pick % 2]]
        up = [self.g.has_edge(u, v, k) for u, k, v, _ in halves]
        for (u, k, v, far), was_up in zip(halves, up, strict=True):
            if all(up):
                self.g.remove_edge(u, v, k)
            elif not was_up:
                self.g.add_edge(u, v, key=k, dst_port=far)
                self.only_downs = False
        return sorted({u for u, _, _, _ in halves})

    def _new_cable(self, pick: int) -> list[int]:
        nodes = sorted(self.g)
        a, b = nodes[pick % len(nodes)], nodes[(pick // 7) % len(nodes)]
        cable = (a, 1000 + pick % 97, b, 2000 + pick % 89)
        if a == b or cable in self.cables:
            return []
        self.cables.append(cable)
        connect(self.g, cable)
        self.only_downs = False
        return [a, b]


# -- the planner against the reference ------------------------------------------------


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fabrics(),
    st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from([0, 0, 0, 1, 2])), max_size=12),
    st.sampled_from([protection.MAX_TUNNELS, 40, 12]),
)
def test_link_events_plan_as_a_whole_recomputation_does(
    g: nx.MultiDiGraph, events: list[tuple[int, int]], cap: int
) -> None:
    """After each event (the planner told only the switches it changed, and called
    with a small search budget until nothing waits) the plans are the reference's, and
    switches whose rules did not change keep their objects. ``cap``: fewer tunnel ids,
    so that events renumber them."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(protection, "MAX_TUNNELS", cap)
        known = live_links(g)
        planner, reference = ProtectionPlanner(), Reference()
        result = settle(planner, g, None, known)
        assert (result.plans, result.protection) == reference.plan(g, known)
        world = Events(g, cables(g))
        for pick, kind in events:
            changed = world.apply(pick, kind)
            known |= live_links(g)
            after = settle(planner, g, changed, known, last=result)
            assert (after.plans, after.protection) == reference.plan(g, known)
            assert_kept(result, after)
            if world.only_downs:  # a kept detour is what a fresh search finds
                fresh_plans, fresh_prot, _, _ = protection_plans(g, known)
                assert (after.plans, after.protection) == (fresh_plans, fresh_prot)
            result = after


def test_a_fresh_plan_is_the_from_scratch_one_on_named_fabrics() -> None:
    for name in ("fat_tree:k=4", "fat_tree:k=6", "dragonfly:a=4,p=2,h=2,g=9"):
        g = switch_graph(name)
        plans, prot, _, waiting = protection_plans(g)
        assert waiting == 0
        assert (plans, prot) == Reference().plan(g, set())
        assert plans and prot.first and prot.arrivals


def test_plans_wait_for_the_last_search_then_change() -> None:
    g = switch_graph("fat_tree:k=4")
    known = live_links(g)
    planner = ProtectionPlanner()
    first = planner.plan(g, None, known, budget=5)
    # waiting: the searches left, and the switches to rebuild once they are done
    assert first.waiting == len(known) - 5 + len(g) and first.plans == {}
    assert not first.protection
    done = settle(planner, g, [], known, budget=5)
    cable = cables(g)[0]
    disconnect(g, cable)
    waiting = planner.plan(g, [cable[0], cable[2]], known, budget=1)
    assert waiting.waiting > 0
    assert waiting.plans is done.plans and waiting.protection is done.protection
    after = settle(planner, g, [], known, budget=1)
    assert after.plans != done.plans
    again = planner.plan(g, [], known, budget=1)
    assert again.plans is after.plans and again.protection is after.protection


def test_a_link_event_reads_its_two_switches_and_searches_only_what_it_broke(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    g = switch_graph("fat_tree:k=8")
    known = live_links(g)
    planner, reference = ProtectionPlanner(), Reference()
    before = settle(planner, g, None, known, budget=None)
    reference.plan(g, known)
    searched: list[Hop] = []
    reads: list[int] = []
    search, read = DetourGraph.detour, read_links

    def counting_search(graph: DetourGraph, u: int, port: int) -> Path | None:
        searched.append((u, port))
        return search(graph, u, port)

    def counting_read(graph: nx.MultiDiGraph, switch: int) -> tuple[tuple[int, int, int], ...]:
        reads.append(switch)
        return read(graph, switch)

    monkeypatch.setattr(DetourGraph, "detour", counting_search)
    monkeypatch.setattr("controller.protection.read_links", counting_read)
    core, agg = 1, 17  # fat_tree(8): cores are 1..16, then pod 0's aggregation switches
    cable = next(c for c in cables(g) if (c[0], c[2]) == (core, agg))
    hops = {(core, cable[1]), (agg, cable[3])}
    broken = {link for link, path in reference.detours.items() if hops & set(path or ())}
    disconnect(g, cable)
    after = settle(planner, g, [agg, core], known, budget=None)
    assert sorted(reads) == [core, agg]
    assert sorted(searched) == sorted(broken) and 0 < len(broken) < len(known) // 4
    rebuilt = [d for d in after.plans if before.plans.get(d) is not after.plans[d]]
    assert 0 < len(rebuilt) < len(after.plans) // 2


@pytest.mark.parametrize("listed", ["none", "neighbours", "itself"])
def test_a_switch_that_goes_or_comes_is_planned_as_from_scratch(listed: str) -> None:
    """``changed`` may be None, name the switch's neighbours, or name the switch."""
    g = switch_graph("fat_tree:k=4")
    known = live_links(g)
    planner, reference = ProtectionPlanner(), Reference()
    last = settle(planner, g, None, known)
    reference.plan(g, known)

    def step(neighbours: list[int], itself: int) -> ProtectionResult:
        known.update(live_links(g))
        changed = {"none": None, "neighbours": neighbours, "itself": [itself]}[listed]
        result = settle(planner, g, changed, known, last=last)
        assert (result.plans, result.protection) == reference.plan(g, known)
        assert_kept(last, result)
        return result

    old, new, core = 5, 99, 4  # pod 0's first aggregation switch comes back as 99
    near = sorted(set(g.succ[old]))
    cabled = [(u, v, k, f) for u, v, k, f in g.edges(keys=True, data="dst_port") if old in (u, v)]
    g.remove_node(old)
    last = step(near, old)
    assert old not in last.plans and old not in last.protection.first
    for u, v, k, f in cabled:
        g.add_edge(new if u == old else u, new if v == old else v, key=k, dst_port=f)
    connect(g, (new, 50, core, 50))  # with one cable more
    last = step([*near, core], new)
    assert new in last.plans and 50 in last.protection.first[new]


def test_a_bridge_has_no_detour_and_a_parallel_cable_is_one() -> None:
    g = nx.MultiDiGraph()
    for cable in [(1, 1, 2, 1), (2, 2, 3, 1), (3, 2, 4, 1), (4, 2, 2, 3)]:
        connect(g, cable)
    assert detour(g, 1, 1) is None and detour(g, 2, 1) is None  # the cable 1-2 is a bridge
    assert detour(g, 2, 2) == [(2, 3), (4, 1)]  # 2 -> 3 around by 4
    connect(g, (1, 7, 2, 9))
    assert detour(g, 1, 1) == [(1, 7)] and detour(g, 2, 9) == [(2, 1)]
    assert detour(g, 1, 99) is None  # no such link


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.integers(2, 12), st.integers(1, 30))
def test_the_search_is_the_breadth_first_one_and_shortest(seed: int, n: int, m: int) -> None:
    """The two-sided search finds what the one-sided breadth-first search (lower ports
    first) finds: a shortest path around the cable, or None when only the cable joins
    its ends; and it does not depend on the order the graph was built in."""
    rng = random.Random(seed)
    g = random_fabric(rng, n, m)
    edges = list(g.edges(keys=True, data=True))
    rng.shuffle(edges)
    shuffled = nx.MultiDiGraph()
    shuffled.add_edges_from(edges)
    adj, graph = adjacency(g), DetourGraph.of(adjacency(shuffled))
    for u, v, port, data in g.edges(keys=True, data=True):
        path = graph.detour(u, port)
        assert path == bfs_detour(adj, u, port)
        around = g.copy()
        around.remove_edge(u, v, port)
        if around.has_edge(v, u, data["dst_port"]):
            around.remove_edge(v, u, data["dst_port"])
        if path is None:
            assert u == v or not nx.has_path(around, u, v)
            continue
        assert len(path) == nx.shortest_path_length(around, u, v)
        assert (u, port) not in path and (v, data["dst_port"]) not in path
        at: int | None = u
        for switch, out in path:  # hop by hop over live links, from u to v
            assert switch == at
            at = (graph.peer((switch, out)) or (None, 0))[0]
        assert at == v


def test_a_switch_known_only_by_links_into_it_goes_and_comes() -> None:
    """Links seen in one direction only (discovery is under way): a switch with no link
    of its own is found through its neighbours' links into it."""
    g = nx.MultiDiGraph()
    for cable in [(1, 1, 2, 1), (2, 2, 3, 1), (3, 2, 1, 2)]:
        connect(g, cable)
    g.add_edge(1, 4, key=3, dst_port=1)  # 4 has not been heard from yet
    known = live_links(g)
    planner, reference = ProtectionPlanner(), Reference()
    assert settle(planner, g, None, known).plans == reference.plan(g, known)[0]
    g.remove_node(4)
    after = settle(planner, g, [4], known)
    assert (after.plans, after.protection) == reference.plan(g, known)
    g.add_edge(2, 5, key=3, dst_port=1)
    g.add_edge(3, 5, key=3, dst_port=2)
    known |= live_links(g)
    after = settle(planner, g, [5], known)
    assert (after.plans, after.protection) == reference.plan(g, known)
    assert 3 in after.protection.first[2]


def test_planning_leaves_no_cyclic_garbage() -> None:
    """The controller freezes the heap after each call (controller/heap.py): garbage
    that only the cyclic collector frees would be kept for good."""
    g = switch_graph("fat_tree:k=4")
    known = live_links(g)
    gc.collect()
    gc.disable()
    try:
        planner = ProtectionPlanner()
        settle(planner, g, None, known)
        cable = cables(g)[0]
        disconnect(g, cable)
        settle(planner, g, [cable[0], cable[2]], known)
        assert detour(g, cable[0], 99) is None
        del planner
        assert gc.collect() == 0
    finally:
        gc.enable()
