"""Traffic engineering as pure functions: paths, Hedera demands, placement, hysteresis."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Hashable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.engineer import TeConfig, TrafficEngineer
from controller.linkloads import Meters
from controller.model import PortRef, PortStats
from controller.placement import (
    Demand,
    Path,
    _Loads,
    estimate_demands,
    is_minimal,
    minimal_paths,
    path_nodes,
    place,
    valiant_choice,
    valiant_paths,
)
from controller.routing import compute_routes
from controller.telemetry import Telemetry
from controller.topology import Topology
from tests.graphs import edge_of, switch_digraph
from topologies import dragonfly, fat_tree
from topologies.graph import host_list

FAT = fat_tree(4)
FAT_D = switch_digraph(FAT)
HOSTS = host_list(FAT)
EDGES = sorted({edge_of(FAT, h) for h in HOSTS})
ROUTES = compute_routes(FAT_D, EDGES)
CAPACITY = {(u, k): 1.0 for u, _, k in FAT_D.edges(keys=True)}


def demands_for(
    pairs: list[tuple[str, str]], current: Mapping[Hashable, Path] | None = None
) -> list[Demand]:
    rates = estimate_demands(list[tuple[Hashable, Hashable]](pairs))
    out = []
    for (s, d), rate in zip(pairs, rates, strict=True):
        cands = tuple(minimal_paths(ROUTES, edge_of(FAT, s), edge_of(FAT, d)))
        out.append(Demand((s, d), rate, cands, (current or {}).get((s, d))))
    return out


def link_flows(placement_paths: Mapping[Hashable, Path]) -> Counter[PortRef]:
    return Counter(link for path in placement_paths.values() for link in path)


def permutation(seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    while True:
        dst = HOSTS[:]
        rng.shuffle(dst)
        if all(a != b for a, b in zip(HOSTS, dst, strict=True)):
            return list(zip(HOSTS, dst, strict=True))


def test_minimal_paths_on_fat_tree() -> None:
    e00, e01, e10 = EDGES[0], EDGES[1], EDGES[2]
    assert len(minimal_paths(ROUTES, e00, e10)) == 4  # 2 aggregation x 2 core switches
    assert len(minimal_paths(ROUTES, e00, e01)) == 2
    assert minimal_paths(ROUTES, e00, e00) == [()]
    for path in minimal_paths(ROUTES, e00, e10):
        assert len(path) == 4 and path_nodes(FAT_D, path, e00)[-1] == e10
        assert is_minimal(ROUTES, path, e00, e10)
        assert not is_minimal(ROUTES, path[1:], e00, e10)  # starts elsewhere
        assert not is_minimal(ROUTES, path[:-1], e00, e10)  # ends short


def test_hedera_demands() -> None:
    # two senders to one receiver: each gets half; a sender with two flows splits its link
    assert estimate_demands([("a", "x"), ("b", "x")]) == [0.5, 0.5]
    assert estimate_demands([("a", "x"), ("a", "y")]) == [0.5, 0.5]
    # a receiver-limited flow frees its sender's capacity for the sender's other flow
    d = estimate_demands([("a", "x"), ("b", "x"), ("c", "x"), ("a", "y")])
    assert d[0] == pytest.approx(1 / 3) and d[3] == pytest.approx(2 / 3)
    assert estimate_demands([]) == []


@pytest.mark.parametrize("stride", [1, 2, 4, 8])
def test_strides_get_a_plan_with_no_shared_link(stride: int) -> None:
    pairs = [(h, HOSTS[(i + stride) % 16]) for i, h in enumerate(HOSTS)]
    plan = place(demands_for(pairs), CAPACITY)
    assert plan.max_utilization <= 1.0
    assert max(link_flows(plan.paths).values()) == 1


def test_every_sampled_permutation_gets_a_plan_with_no_shared_link() -> None:
    for seed in range(300):
        plan = place(demands_for(permutation(seed)), CAPACITY)
        flows = link_flows(plan.paths)
        assert max(flows.values()) == 1, f"seed {seed}: {flows.most_common(2)}"


def test_plan_is_deterministic() -> None:
    pairs = permutation(7)
    assert place(demands_for(pairs), CAPACITY).paths == place(demands_for(pairs), CAPACITY).paths


def test_hysteresis_holds_a_plan_under_small_load_changes() -> None:
    pairs = permutation(3)
    first = place(demands_for(pairs), CAPACITY)
    rng = random.Random(1)
    for _ in range(20):
        background = {link: rng.uniform(0.0, 0.04) for link in CAPACITY}
        again = place(demands_for(pairs, first.paths), CAPACITY, background)
        assert again.paths == first.paths and again.moved == ()


def test_a_collision_is_resolved_by_moving_one_flow() -> None:
    pairs = [("h1", "h5"), ("h3", "h7")]
    both = minimal_paths(ROUTES, edge_of(FAT, "h1"), edge_of(FAT, "h5"))[0]
    # force both onto the same aggregation/core links (they share the a0_0 -> c1 uplink)
    others = minimal_paths(ROUTES, edge_of(FAT, "h3"), edge_of(FAT, "h7"))
    same = next(p for p in others if p[1] == both[1])
    plan = place(demands_for(pairs, {("h1", "h5"): both, ("h3", "h7"): same}), CAPACITY)
    assert max(link_flows(plan.paths).values()) == 1
    assert len(plan.moved) == 1


def test_flows_that_may_not_move_stay() -> None:
    pairs = [("h1", "h5"), ("h3", "h7")]
    p1 = minimal_paths(ROUTES, edge_of(FAT, "h1"), edge_of(FAT, "h5"))[0]
    others = minimal_paths(ROUTES, edge_of(FAT, "h3"), edge_of(FAT, "h7"))
    p2 = next(p for p in others if p[1] == p1[1])
    ds = demands_for(pairs, {("h1", "h5"): p1, ("h3", "h7"): p2})
    frozen = [Demand(d.key, d.rate, d.candidates, d.current, movable=False) for d in ds]
    assert place(frozen, CAPACITY).paths == {("h1", "h5"): p1, ("h3", "h7"): p2}


def test_dragonfly_valiant_paths_leave_through_every_other_group() -> None:
    g = dragonfly(a=4, p=1, h=1, g=5)
    d = switch_digraph(g)
    routes = compute_routes(d, sorted(d.nodes))
    assert routes.groups is not None
    src = next(n for n in d.nodes if routes.groups[n] == 0)
    dst = next(n for n in d.nodes if routes.groups[n] == 1)
    paths = valiant_paths(routes, src, dst)
    via = set()
    for path in paths:
        nodes = path_nodes(d, path, src)
        assert nodes[-1] == dst and len(set(nodes)) == len(nodes)
        via |= {routes.groups[n] for n in nodes} - {0, 1}
    assert via == {2, 3, 4}
    assert valiant_choice(("a", 1), paths) == valiant_choice(("a", 1), paths)


def test_adaptive_choice_beats_minimal_on_adversarial_dragonfly_traffic() -> None:
    g = dragonfly(a=4, p=1, h=1, g=5)
    d = switch_digraph(g)
    hosts = host_list(g)
    routes = compute_routes(d, sorted(d.nodes))
    cap = {(u, k): 1.0 for u, _, k in d.edges(keys=True)}
    group = {h: g.nodes[h]["group"] for h in hosts}
    pairs = [(h, hosts[(hosts.index(h) + 4) % 20]) for h in hosts]  # group i -> group i+1
    assert all(group[b] == (group[a] + 1) % 5 for a, b in pairs)

    def demands(with_valiant: bool) -> list[Demand]:
        out = []
        for s, t in pairs:
            src, dst = edge_of(g, s), edge_of(g, t)
            cands = minimal_paths(routes, src, dst)
            cands += valiant_paths(routes, src, dst) if with_valiant else []
            out.append(Demand((s, t), 1.0, tuple(cands)))
        return out

    minimal = place(demands(False), cap)
    adaptive = place(demands(True), cap)
    assert minimal.max_utilization == 4.0  # four flows share the one global link
    # 20 flows need >= 5*1 + 15*2 = 35 global hops on 20 directed global links: 2 is optimal
    assert adaptive.max_utilization == 2.0


def test_background_below_the_floor_counts_as_none() -> None:
    """Unexplained load under ``background_floor`` of capacity is counter lag or mice:
    it must not push an elephant between equal paths; above it, it is real load."""
    telemetry = Telemetry()
    for now, scale in ((0.0, 0), (1.0, 1), (2.0, 2)):  # 0.5 and 3 Mbit/s, steady
        stats = [PortStats(1, tx_bytes=scale * 62_500), PortStats(2, tx_bytes=scale * 375_000)]
        telemetry.port_stats(now, 7, stats)
    cap = {(7, 1): 10e6, (7, 2): 10e6}
    links = Meters(telemetry.tx_bps, cap.__getitem__).at(2.0)
    engineer = TrafficEngineer(TeConfig(background_floor=0.1)).elephants
    background = engineer.background(cap, links, [], ROUTES, Topology())
    assert background[(7, 1)] == 0.0
    assert background[(7, 2)] == pytest.approx(3e6, rel=0.3)
    no_floor = TrafficEngineer(TeConfig(background_floor=0.0)).elephants
    assert no_floor.background(cap, links, [], ROUTES, Topology())[(7, 1)] > 0.0


def test_placement_of_thousands_of_demands_over_capacity_returns() -> None:
    """More demands than the exact search may take (it recursed once per demand and hit
    Python's recursion limit on a 40-rank all-to-all): the greedy placement answers.
    1,500 demands fit alone on links of their own; three more cannot share two links."""
    own: list[PortRef] = [(i, 1) for i in range(1500)]
    shared: list[PortRef] = [(-1, 1), (-2, 1)]
    capacity = dict.fromkeys(own + shared, 1.0)
    demands = [Demand(i, 0.5, ((link,),)) for i, link in enumerate(own)]
    demands += [Demand(f"x{i}", 0.6, tuple((link,) for link in shared)) for i in range(3)]
    placement = place(demands, capacity)
    assert len(placement.paths) == 1503
    assert placement.max_utilization == pytest.approx(1.2)


def test_minimal_paths_sample_spreads_over_every_tier_when_there_are_more() -> None:
    """A k=16 fat-tree has 64 equal-cost paths between pods: the 16 candidates are drawn
    over all of them (the first 16 in port order all left by the same two uplinks)."""
    graph = fat_tree(16)
    digraph = switch_digraph(graph)
    src, dst = edge_of(graph, "h1"), edge_of(graph, host_list(graph)[-1])
    routes = compute_routes(digraph, [dst])
    paths = minimal_paths(routes, src, dst, 16)
    assert len(set(paths)) == 16
    assert all(len(p) == 4 and path_nodes(digraph, p, src)[-1] == dst for p in paths)
    assert len({p[0] for p in paths}) >= 6  # of the edge switch's 8 uplinks
    assert len({p[1] for p in paths}) >= 12  # aggregation uplinks: distinct cores
    assert minimal_paths(routes, src, dst, 16) == paths  # the same pair, the same sample
    assert len(minimal_paths(routes, src, dst, 64)) == 64  # all of them, in port order


def test_a_link_no_flow_can_leave_does_not_stop_the_others_being_relieved() -> None:
    """The hottest link carries a flow that may not move, over capacity whatever happens
    (so no assignment fits and the exact search gives up); a collision elsewhere, over
    capacity too, is still undone."""
    pairs = [("h1", "h5"), ("h3", "h7")]
    both = minimal_paths(ROUTES, edge_of(FAT, "h1"), edge_of(FAT, "h5"))[0]
    others = minimal_paths(ROUTES, edge_of(FAT, "h3"), edge_of(FAT, "h7"))
    same = next(p for p in others if p[1] == both[1])
    ds = demands_for(pairs, {("h1", "h5"): both, ("h3", "h7"): same})
    stuck_cands = tuple(minimal_paths(ROUTES, edge_of(FAT, "h9"), edge_of(FAT, "h13")))
    stuck = Demand(("h9", "h13"), 0.5, stuck_cands, stuck_cands[0], movable=False)
    plan = place([*ds, stuck], CAPACITY, {stuck_cands[0][0]: 2.0})
    assert max(n for link, n in link_flows(plan.paths).items()) == 1, plan.paths
    assert len(plan.moved) == 1


def test_a_flow_placed_anew_stays_where_it_runs_when_that_is_as_good() -> None:
    src, dst = edge_of(FAT, "h1"), edge_of(FAT, "h5")
    cands = tuple(minimal_paths(ROUTES, src, dst))
    for where in cands:
        plan = place([Demand("f", 0.5, cands, None, True, where)], CAPACITY)
        assert plan.paths["f"] == where and plan.moved == ()


def test_flows_on_random_paths_are_untangled_when_capacities_are_measured_a_bit_low() -> None:
    """Learned capacities sit a percent or so either side of what a host sends: a link
    that carries one flow is full, not over, and the search for a plan with no shared link
    still runs from wherever the flows are."""
    rng = random.Random(5)
    for seed in range(60):
        capacity = {link: rng.uniform(0.985, 1.0) for link in CAPACITY}
        ds = demands_for(permutation(seed))
        start = {d.key: rng.choice(d.candidates) for d in ds}
        plan = place(demands_for(permutation(seed), start), capacity)
        flows = link_flows(plan.paths)
        assert max(flows.values()) == 1, f"seed {seed}: {flows.most_common(2)}"


@settings(max_examples=300, deadline=None)
@given(
    loads=st.lists(st.floats(0.0, 30.0), min_size=1, max_size=40),
    old=st.lists(st.integers(0, 39), max_size=5, unique=True),
    new=st.lists(st.integers(0, 39), max_size=5, unique=True),
    rate=st.floats(0.01, 10.0),
)
def test_a_trial_move_scores_as_the_move_itself(
    loads: list[float], old: list[int], new: list[int], rate: float
) -> None:
    """The objective of a move weighed from a snapshot (its paths' links only) is the
    objective after making it (every link recounted)."""
    capacity = {(i, 1): 10.0 for i in range(40)}
    state = _Loads(capacity, {(i, 1): x for i, x in enumerate(loads)})
    old_path, new_path = tuple((i, 1) for i in old), tuple((i, 1) for i in new)
    state.add(old_path, rate)
    trial = state.moved(state.snapshot(), old_path, new_path, rate)
    state.add(old_path, -rate)
    state.add(new_path, rate)
    assert trial == pytest.approx(state.objective(), abs=1e-8)
