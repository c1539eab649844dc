"""Next-hop sets against networkx's own shortest paths, and the fabric-specific
properties they must have: up/down on fat-trees, one global hop on dragonflies."""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import networkx as nx
import pytest

from controller.routing import (
    compute_routes,
    distances_to,
    ecmp_next_hops,
    infer_groups,
    link_costs,
)
from tests.graphs import switch_digraph
from topologies import dragonfly, fat_tree, leaf_spine, load_fabric
from topologies.graph import switches


def expected_next_hops(
    d: nx.MultiDiGraph, dest: int, costs: Mapping[tuple[Hashable, Hashable, int], float]
) -> dict[int, set[int]]:
    """Next-hop neighbours implied by networkx.all_shortest_paths."""
    simple = nx.DiGraph()
    for (u, v, _), c in costs.items():
        if not simple.has_edge(u, v) or simple[u][v]["w"] > c:
            simple.add_edge(u, v, w=c)
    out: dict[int, set[int]] = {}
    for src in d.nodes:
        if src == dest:
            continue
        paths = nx.all_shortest_paths(simple, src, dest, weight="w")
        out[src] = {p[1] for p in paths}
    return out


SMALL = {
    "fat_tree(4)": lambda: fat_tree(4),
    "leaf_spine(4,3)": lambda: leaf_spine(leaves=4, spines=3, uplinks_per_spine=2),
    "dragonfly(4,2,2,5)": lambda: dragonfly(a=4, p=2, h=2, g=5),
    "dragonfly(3,1,1,4)": lambda: dragonfly(a=3, p=1, h=1, g=4),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_next_hop_sets_equal_networkx_all_shortest_paths(name: str) -> None:
    d = switch_digraph(SMALL[name]())
    costs = link_costs(d, infer_groups(d))
    for dest in d.nodes:
        got = ecmp_next_hops(d, dest, costs)
        want = expected_next_hops(d, dest, costs)
        assert {u: {v for _, v in hops} for u, hops in got.items()} == want, f"dest {dest}"


def test_parallel_links_each_appear_as_a_next_hop_port() -> None:
    d = switch_digraph(leaf_spine(leaves=2, spines=1, uplinks_per_spine=2))
    leaf = next(n for n in d.nodes if d.out_degree(n) == 2)
    spine = next(n for n in d.nodes if d.out_degree(n) == 4)
    other_leaf = next(n for n in d.nodes if n not in (leaf, spine))
    hops = ecmp_next_hops(d, other_leaf)
    assert len(hops[leaf]) == 2 and {v for _, v in hops[leaf]} == {spine}


def test_fat_tree_paths_are_up_down_and_use_every_core() -> None:
    g = fat_tree(4)
    d = switch_digraph(g)
    level = {
        g.nodes[s]["dpid"]: {"edge": 0, "agg": 1, "core": 2}[g.nodes[s]["role"]]
        for s in switches(g)
    }
    edges = [n for n in d.nodes if level[n] == 0]
    cores_used: set[int] = set()
    for dest in edges:
        hops = ecmp_next_hops(d, dest)
        for src in edges:
            if src == dest:
                continue
            # walk every path: the level sequence must rise then fall, never rise again
            stack = [(src, [src])]
            while stack:
                node, path = stack.pop()
                if node == dest:
                    levels = [level[n] for n in path]
                    peak = levels.index(max(levels))
                    assert levels[: peak + 1] == sorted(levels[: peak + 1]), path
                    assert levels[peak:] == sorted(levels[peak:], reverse=True), path
                    cores_used.update(n for n in path if level[n] == 2)
                    continue
                for _, nxt in hops[node]:
                    stack.append((nxt, [*path, nxt]))
    assert len(cores_used) == 4


def test_fat_tree_edge_has_all_uplinks_as_next_hops() -> None:
    g = fat_tree(8)
    d = switch_digraph(g)
    e00, e70 = g.nodes["e0_0"]["dpid"], g.nodes["e7_0"]["dpid"]
    hops = ecmp_next_hops(d, e70)
    assert [p for p, _ in hops[e00]] == [5, 6, 7, 8]  # every aggregation uplink
    a00 = g.nodes["a0_0"]["dpid"]
    assert [p for p, _ in hops[a00]] == [5, 6, 7, 8]  # every core uplink


def test_dragonfly_groups_inferred_and_routes_minimal() -> None:
    g = dragonfly(a=4, p=2, h=2)  # canonical: 9 groups, one global link per group pair
    d = switch_digraph(g)
    groups = infer_groups(d)
    assert groups is not None
    by_dpid = {g.nodes[s]["dpid"]: g.nodes[s]["group"] for s in switches(g)}
    # same partition as the generator's (labels may differ)
    assert len({(groups[n], by_dpid[n]) for n in d.nodes}) == 9
    costs = link_costs(d, groups)
    for dest in d.nodes:
        hops = ecmp_next_hops(d, dest, costs)
        for src in d.nodes:
            node, globals_crossed = src, 0
            while node != dest:  # follow the first next hop; count global hops
                _, nxt = hops[node][0]
                globals_crossed += groups[node] != groups[nxt]
                node = nxt
            assert globals_crossed <= 1


def test_groups_not_inferred_for_trees_and_irregular_fabrics() -> None:
    assert infer_groups(switch_digraph(fat_tree(4))) is None
    assert infer_groups(switch_digraph(leaf_spine())) is None
    assert infer_groups(switch_digraph(load_fabric("topologies/examples/lab.yaml"))) is None


def test_any_mix_of_next_hops_is_loop_free() -> None:
    d = switch_digraph(dragonfly(a=4, p=1, h=2, g=5))
    routes = compute_routes(d, d.nodes)
    for dest in d.nodes:
        dist = distances_to(d, dest, routes.costs)
        for u, ports in routes.hops_to(dest).items():
            for port in ports:
                v = next(v for _, v, k in d.out_edges(u, keys=True) if k == port)
                assert dist[v] < dist[u]


def test_unreachable_switch_has_no_next_hops() -> None:
    d = switch_digraph(fat_tree(4))
    lonely = max(d.nodes) + 1
    d.add_node(lonely)
    routes = compute_routes(d, [lonely, 1])
    assert routes.hops_to(lonely) == {}
    assert routes.next_ports(lonely, 1) == ()


def test_array_next_hops_agree_with_a_plain_search() -> None:
    d = switch_digraph(dragonfly(a=4, p=1, h=2, g=5))
    routes = compute_routes(d, d.nodes)
    for dest in d.nodes:
        plain = ecmp_next_hops(d, dest, routes.costs)
        want = {u: tuple(p for p, _ in hops) for u, hops in plain.items() if hops}
        assert routes.hops_to(dest) == want
        for u in d.nodes:
            ports, tight = routes.tight(u)
            col = routes.column[dest]
            assert tuple(p for p, t in zip(ports, tight[:, col], strict=True) if t) == want.get(
                u, ()
            )


def test_routes_are_deterministic_across_runs() -> None:
    d1 = switch_digraph(dragonfly(a=4, p=2, h=2, g=5))
    d2 = switch_digraph(dragonfly(a=4, p=2, h=2, g=5))
    r1, r2 = compute_routes(d1, sorted(d1.nodes)), compute_routes(d2, sorted(d2.nodes))
    assert r1.groups == r2.groups and r1.dests == r2.dests
    assert (r1.dist == r2.dist).all()
    assert all(r1.hops_to(d) == r2.hops_to(d) for d in r1.dests)
