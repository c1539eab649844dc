"""Generators, ``validate``, ``by_name`` and the ``loom-topology`` command."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest

from topologies import (
    TopologyError,
    by_name,
    dragonfly,
    dump_fabric,
    fat_tree,
    leaf_spine,
    parse_fabric,
)
from topologies.cli import main
from topologies.dragonfly import group_targets
from topologies.graph import (
    add_host,
    add_link,
    add_switch,
    host_list,
    link_ends,
    new_graph,
    switch_graph,
    switches,
    validate,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "topologies" / "examples" / "lab.yaml"


def scopes(g: nx.MultiGraph) -> Counter[str]:
    return Counter(d["scope"] for _, _, d in g.edges(data=True))


def roles(g: nx.MultiGraph) -> Counter[str]:
    return Counter(g.nodes[s]["role"] for s in switches(g))


def global_links(g: nx.MultiGraph) -> list[tuple[str, str]]:
    return [(a, b) for a, b, d in g.edges(data=True) if d["scope"] == "global"]


# --- fat-tree -------------------------------------------------------------------------


@pytest.mark.parametrize("k", [4, 6, 8])
def test_fat_tree_counts(k: int) -> None:
    g = fat_tree(k)
    validate(g)
    half = k // 2
    assert len(list(switches(g))) == 5 * k * k // 4
    assert roles(g) == {"core": half * half, "agg": k * half, "edge": k * half}
    assert len(host_list(g)) == k**3 // 4
    assert scopes(g) == {"host": k**3 // 4, "fabric": k**3 // 2}
    assert all(g.degree(s) == k for s in switches(g))  # every switch port in use


def test_fat_tree_port_plan() -> None:
    k, half = 4, 2
    g = fat_tree(k)
    for pod in range(k):
        for e in range(half):
            ends = {end.port: end.peer for end in link_ends(g, f"e{pod}_{e}")}
            assert [ends[p] for p in range(1, half + 1)] == [
                f"h{pod * half * half + e * half + h + 1}" for h in range(half)
            ]
            assert [ends[half + 1 + j] for j in range(half)] == [f"a{pod}_{j}" for j in range(half)]
        for j in range(half):
            ends = {end.port: end.peer for end in link_ends(g, f"a{pod}_{j}")}
            assert [ends[i + 1] for i in range(half)] == [f"e{pod}_{i}" for i in range(half)]
            assert [ends[half + 1 + i] for i in range(half)] == [
                f"c{j * half + i + 1}" for i in range(half)
            ]
    for c in range(half * half):
        core = link_ends(g, f"c{c + 1}")
        assert [(e.port, g.nodes[e.peer]["group"]) for e in core] == [(p + 1, p) for p in range(k)]
    assert g.nodes["h1"]["ip"] == "10.0.0.2" and g.nodes["h16"]["ip"] == "10.3.1.3"
    assert [g.nodes[s]["dpid"] for s in switches(g)] == list(range(1, 21))


@pytest.mark.parametrize("k", [4, 6])
def test_fat_tree_paths(k: int) -> None:
    g = fat_tree(k)
    sg = nx.Graph(switch_graph(g))
    assert nx.diameter(sg) == 4
    half = k // 2
    same_pod = nx.shortest_path_length(sg, "e0_0", "e0_1")
    cross_pod = list(nx.all_shortest_paths(sg, "e0_0", f"e{k - 1}_0"))
    assert same_pod == 2
    assert {len(p) - 1 for p in cross_pod} == {4}
    assert len(cross_pod) == half * half  # one path per core switch
    assert nx.shortest_path_length(g, "h1", host_list(g)[-1]) == 6
    # Full bisection: as many edge-disjoint paths between two edge switches as uplinks.
    assert nx.edge_connectivity(sg, "e0_0", f"e{k - 1}_0") == half


@pytest.mark.parametrize("k", [3, 5, 2, 0, -4, 66, 128])
def test_fat_tree_bad_k(k: int) -> None:
    with pytest.raises(TopologyError, match="even integer from 4 to 64"):
        fat_tree(k)


@pytest.mark.parametrize("k", [4.0, "4", True, None])
def test_fat_tree_k_not_int(k: object) -> None:
    with pytest.raises(TopologyError, match="must be an integer"):
        fat_tree(k)  # type: ignore[arg-type]


def test_fat_tree_16_and_deterministic() -> None:
    g = fat_tree(16)
    validate(g)
    assert len(host_list(g)) == 1024
    assert dump_fabric(g) == dump_fabric(fat_tree(16))


@pytest.mark.slow
def test_fat_tree_64_builds() -> None:
    g = fat_tree(64)
    assert len(host_list(g)) == 65536 and g.number_of_edges() == 3 * 64**3 // 4
    validate(g)


# --- dragonfly ------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "p", "h"), [(4, 2, 2), (2, 1, 1), (3, 2, 1), (2, 2, 2), (1, 1, 3)])
@pytest.mark.parametrize("arrangement", ["consecutive", "absolute"])
def test_dragonfly_canonical(a: int, p: int, h: int, arrangement: str) -> None:
    g = dragonfly(a, p, h, arrangement=arrangement)
    validate(g)
    groups = a * h + 1
    assert g.graph["params"]["g"] == groups
    assert roles(g) == {"router": a * groups}
    assert Counter(g.nodes[x]["group"] for x in host_list(g)) == {i: a * p for i in range(groups)}
    expected = {
        "host": a * p * groups,
        "fabric": groups * a * (a - 1) // 2,
        "global": groups * (groups - 1) // 2,
    }
    assert scopes(g) == Counter(expected)  # Counter == Counter: a missing scope counts as 0
    pairs = Counter(
        frozenset((g.nodes[x]["group"], g.nodes[y]["group"])) for x, y in global_links(g)
    )
    assert all(len(pair) == 2 for pair in pairs)  # never inside a group
    assert set(pairs) == {frozenset(c) for c in itertools.combinations(range(groups), 2)}
    assert set(pairs.values()) == {1}
    per_router = Counter(itertools.chain.from_iterable(global_links(g)))
    assert set(per_router.values()) == {h} and len(per_router) == a * groups
    assert nx.diameter(nx.Graph(switch_graph(g))) <= 3  # local, global, local


def test_dragonfly_port_plan_and_names() -> None:
    a, p, h = 4, 2, 2
    g = dragonfly(a, p, h)
    routers = list(switches(g))
    assert routers[:5] == ["r0_0", "r0_1", "r0_2", "r0_3", "r1_0"]
    assert [g.nodes[r]["dpid"] for r in routers] == list(range(1, len(routers) + 1))
    assert g.nodes["h1"]["switch"] == "r0_0" and g.nodes["h9"]["switch"] == "r1_0"
    assert g.nodes["h4"]["ip"] == "10.0.1.3" and g.nodes["h72"]["ip"] == "10.8.3.3"
    groups = a * h + 1
    for r in routers:
        grp, i = (int(x) for x in r[1:].split("_"))
        ends = {e.port: e for e in link_ends(g, r)}
        assert sorted(ends) == list(range(1, p + a + h))
        assert all(ends[k].scope == "host" for k in range(1, p + 1))
        local = [ends[k].peer for k in range(p + 1, p + a)]
        assert local == [f"r{grp}_{j}" for j in range(a) if j != i]
        for k in range(h):
            end = ends[p + a + k]
            # consecutive: group port t = i*h + k reaches group grp + 1 + t.
            assert end.scope == "global"
            assert g.nodes[end.peer]["group"] == (grp + 1 + i * h + k) % groups
            assert end.peer_port >= p + a


def test_dragonfly_absolute_arrangement() -> None:
    assert group_targets(2, 2, 5, "absolute")[2] == [0, 1, 3, 4]
    assert group_targets(2, 2, 5, "consecutive")[2] == [3, 4, 0, 1]


@pytest.mark.parametrize(
    ("groups", "per_pair"), [(5, {2}), (4, {2, 3}), (3, {4}), (2, {8}), (7, {1, 2})]
)
def test_dragonfly_fewer_groups(groups: int, per_pair: set[int]) -> None:
    a, p, h = 4, 2, 2
    g = dragonfly(a, p, h, g=groups)
    validate(g)
    pairs = Counter(
        frozenset((g.nodes[x]["group"], g.nodes[y]["group"])) for x, y in global_links(g)
    )
    assert len(pairs) == groups * (groups - 1) // 2  # every pair connected
    assert all(len(pair) == 2 for pair in pairs)
    assert set(pairs.values()) == per_pair
    per_group: Counter[int] = Counter()
    for pair, n in pairs.items():
        for grp in pair:
            per_group[grp] += n
    assert set(per_group.values()) == {a * h}
    per_router = Counter(itertools.chain.from_iterable(global_links(g)))
    assert set(per_router.values()) == {h} and len(per_router) == a * groups
    assert len(host_list(g)) == a * p * groups


def test_dragonfly_rates() -> None:
    g = dragonfly(2, 1, 1, rate_mbps=5, global_rate_mbps=40)
    rates = {d["scope"]: d["rate_mbps"] for _, _, d in g.edges(data=True)}
    assert rates == {"host": 5.0, "fabric": 5.0, "global": 40.0}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"a": 4, "h": 2, "g": 10}, r"g=10 groups is impossible.*a\*h=8 global ports"),
        ({"a": 3, "p": 1, "h": 1, "g": 3}, r"cannot be wired.*must be even"),
        ({"a": 0}, r"a \(routers per group\) must be from 1"),
        ({"p": 0}, r"p \(hosts per router\) must be from 1"),
        ({"h": 0}, r"h \(global links per router\) must be from 1"),
        ({"g": 1}, r"g \(groups\) must be from 2"),
        ({"a": 2.5}, r"a \(routers per group\) must be an integer"),
        ({"g": "5"}, r"g \(groups\) must be an integer"),
        ({"h": True}, r"must be an integer"),
        ({"a": 16, "h": 16}, r"canonical group count a\*h\+1 = 257"),
        ({"arrangement": "random"}, r"unknown arrangement 'random'"),
        ({"rate_mbps": 0}, r"rate_mbps must be a positive number"),
        ({"global_rate_mbps": -1}, r"global_rate_mbps must be a positive number"),
    ],
)
def test_dragonfly_bad_params(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        dragonfly(**kwargs)  # type: ignore[arg-type]


# --- leaf-spine -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("leaves", "spines", "hpl", "up"), [(4, 2, 2, 1), (3, 4, 1, 2), (1, 1, 5, 3)]
)
def test_leaf_spine(leaves: int, spines: int, hpl: int, up: int) -> None:
    g = leaf_spine(leaves, spines, hpl, uplinks_per_spine=up)
    validate(g)
    assert roles(g) == {"leaf": leaves, "spine": spines}
    assert len(host_list(g)) == leaves * hpl
    assert scopes(g) == {"host": leaves * hpl, "fabric": leaves * spines * up}
    for i, j in itertools.product(range(1, leaves + 1), range(1, spines + 1)):
        assert g.number_of_edges(f"leaf{i}", f"spine{j}") == up  # parallel MultiGraph edges
    ends = link_ends(g, "leaf1")
    assert [e.peer for e in ends] == [f"h{n}" for n in range(1, hpl + 1)] + [
        f"spine{j}" for j in range(1, spines + 1) for _ in range(up)
    ]
    assert [e.port for e in link_ends(g, "spine1")] == list(range(1, leaves * up + 1))
    if leaves > 1:
        assert nx.shortest_path_length(g, "leaf1", f"leaf{leaves}") == 2
        caps = nx.DiGraph()
        for a, b in switch_graph(g).edges():
            for u, v in ((a, b), (b, a)):
                old = caps.get_edge_data(u, v, {"capacity": 0})["capacity"]
                caps.add_edge(u, v, capacity=old + 1)
        assert nx.maximum_flow_value(caps, "leaf1", f"leaf{leaves}") == spines * up


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"leaves": 0}, "leaves must be from 1"),
        ({"spines": 0}, "spines must be from 1"),
        ({"hosts_per_leaf": 0}, "hosts_per_leaf must be from 1"),
        ({"uplinks_per_spine": 0}, "uplinks_per_spine must be from 1"),
        ({"leaves": 256}, "leaves must be from 1 to 255"),
        ({"leaves": "4"}, "leaves must be an integer"),
        ({"rate_mbps": -1}, "rate_mbps must be a positive number"),
    ],
)
def test_leaf_spine_bad_params(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        leaf_spine(**kwargs)  # type: ignore[arg-type]


# --- validate -------------------------------------------------------------------------


def small() -> nx.MultiGraph:
    g = new_graph("t", "custom")
    add_switch(g, "s1", 1, "leaf")
    add_switch(g, "s2", 2, "leaf")
    add_host(g, "h1", "s1", "10.0.0.1", 10)
    add_host(g, "h2", "s2", "10.0.0.2", 10)
    add_link(g, "s1", "s2", 10)
    return g


def test_validate_accepts_small() -> None:
    validate(small())


def test_validate_catches_bad_graphs() -> None:
    g = small()
    g.nodes["s2"]["dpid"] = 1
    with pytest.raises(TopologyError, match="share dpid 1"):
        validate(g)
    g = small()
    add_link(g, "h1", "s2", 10)
    with pytest.raises(TopologyError, match="host h1: needs exactly one link"):
        validate(g)
    g = small()
    add_link(g, "s1", "s2", 10, port_a=1)
    with pytest.raises(TopologyError, match="port numbers repeat"):
        validate(g)
    g = small()
    g.nodes["h2"]["ip"] = "10.0.0.1"
    with pytest.raises(TopologyError, match="unique"):
        validate(g)
    g = small()
    add_switch(g, "a_very_long_sw", 3, "leaf")
    add_link(g, "s1", "a_very_long_sw", 10)
    with pytest.raises(TopologyError, match="too long"):
        validate(g)
    g = small()
    g.add_node("x", kind="router")
    with pytest.raises(TopologyError, match="kind must be"):
        validate(g)
    with pytest.raises(TopologyError, match="itself"):
        add_link(small(), "s1", "s1", 10)


# --- by_name --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("fat_tree:k=4", "fat_tree(4)"),
        ("fat-tree:4", "fat_tree(4)"),
        ("fat_tree", "fat_tree(4)"),
        (" Fat-Tree:6 ", "fat_tree(6)"),
        ("dragonfly:a=4,p=2,h=2,g=5", "dragonfly(4,2,2,5)"),
        ("dragonfly:2,1,1", "dragonfly(2,1,1,3)"),
        ("dragonfly:a=4,p=1,h=2,g=none,arrangement=absolute", "dragonfly(4,1,2,9)"),
        ("leaf_spine:leaves=4,spines=2", "leaf_spine(4,2)"),
        ("leaf-spine:3,2,uplinks_per_spine=2", "leaf_spine(3,2)"),
    ],
)
def test_by_name(spec: str, name: str) -> None:
    g = by_name(spec)
    assert g.graph["name"] == name
    validate(g)


def test_by_name_rate_override() -> None:
    for spec in (
        "fat_tree:k=4,rate_mbps=5",
        "dragonfly:rate_mbps=5",
        "leaf_spine:rate_mbps=5",
        f"{EXAMPLE}:rate_mbps=5",
    ):
        assert {d["rate_mbps"] for _, _, d in by_name(spec).edges(data=True)} == {5.0}, spec
    assert by_name(str(EXAMPLE)).graph["name"] == "lab"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("torus:4", "unknown topology 'torus'.*fat_tree, dragonfly, leaf_spine"),
        ("fat_tree:q=1", r"fat_tree: unknown parameter 'q' \(allowed: k, rate_mbps"),
        ("fat_tree:4,5,6,7", "too many values"),
        ("fat_tree:k=4,8", "positional value '8' after key=value"),
        ("fat_tree:k=4,k=6", "given twice"),
        ("fat_tree:k=5", "even integer"),
        ("dragonfly:g=20", "impossible"),
        ("missing.yaml", "missing.yaml: cannot read"),
        (f"{EXAMPLE}:k=4", "unknown parameter 'k'"),
        (f"{EXAMPLE}:rate_mbps=fast", "rate_mbps must be a number"),
    ],
)
def test_by_name_errors(spec: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        by_name(spec)


# --- loom-topology --------------------------------------------------------------------


def test_cli_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fat_tree:k=4"]) == 0
    out = capsys.readouterr().out
    assert "switches: 20 (core 4, agg 8, edge 8)" in out
    assert "hosts: 16 in 4 groups" in out
    assert "links: 48 (fabric 32, host 16)" in out
    assert "bisection hint: 80 Mbit/s" in out and "100%" in out


def test_cli_dragonfly_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dragonfly:a=4,p=2,h=2", "--summary"]) == 0
    out = capsys.readouterr().out
    assert "switches: 36 (router 36)" in out and "global 36" in out


def test_cli_yaml_round_trips(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["leaf_spine:uplinks_per_spine=2", "--yaml"]) == 0
    out = capsys.readouterr().out
    assert "bisection" not in out
    assert dump_fabric(parse_fabric(out)) == out
    assert main(["leaf_spine", "--yaml", "--summary"]) == 0
    both = capsys.readouterr().out
    assert "# bisection hint" in both
    assert parse_fabric(both).number_of_nodes() == 14  # the summary is YAML comments


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nonsense"], "unknown topology 'nonsense'"),
        (["fat_tree:k=7"], "even integer"),
        (["dragonfly:a=3,p=1,h=1,g=3"], "must be even"),
        (["nowhere.yaml"], "cannot read"),
    ],
)
def test_cli_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err and "Traceback" not in captured.err


def test_cli_bad_yaml_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("switches:\n  - {name: s1}\n  - {name: s1}\n")
    assert main([str(path)]) == 1
    assert f"{path}:3: switches[1].name: duplicate name 's1'" in capsys.readouterr().err


def test_cli_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "fat-tree:4" in capsys.readouterr().out
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_prefixed_renames_nodes_and_keeps_ports() -> None:
    from topologies.graph import prefixed

    g = fat_tree(4)
    p = prefixed(g, "x")
    assert sorted(p.nodes) == sorted(f"x{n}" for n in g.nodes)
    for u, v, d in g.edges(data=True):
        assert any(e["ports"] == {f"x{u}": d["ports"][u], f"x{v}": d["ports"][v]}
                   for e in p.get_edge_data(f"x{u}", f"x{v}").values())  # fmt: skip
    assert p.graph["name"] == f"x-{g.graph['name']}"
    assert p.nodes["xh1"]["switch"] == f"x{g.nodes['h1']['switch']}"


def test_prefixed_prefixes_servers_too() -> None:
    from topologies import rail_optimized
    from topologies.graph import prefixed

    p = prefixed(rail_optimized(servers=2, nics=2, spines=1), "x")
    assert {(n, d["server"], d["nic"]) for n, d in p.nodes(data=True) if d["kind"] == "host"} == {
        (f"xs{s}n{i}", f"xs{s}", i) for s in (1, 2) for i in (0, 1)
    }
    assert "server" not in prefixed(fat_tree(4), "x").nodes["xh1"]
