"""The YAML fabric loader: every error names file, line and key; dump/load round trips."""

from __future__ import annotations

import textwrap
from pathlib import Path

import networkx as nx
import pytest

from topologies import (
    FabricFileError,
    TopologyError,
    dragonfly,
    dump_fabric,
    fat_tree,
    leaf_spine,
    load_fabric,
)
from topologies.graph import host_list, link_ends, switch_graph, switches, validate

EXAMPLE = Path(__file__).resolve().parents[2] / "topologies" / "examples" / "lab.yaml"

GOOD = """\
name: lab
switches:
  - {name: s1, dpid: 1}
  - {name: s2, dpid: 2}
hosts:
  - {name: h1, switch: s1, ip: 10.0.0.1}
  - {name: h2, switch: s2, ip: 10.0.0.2}
links:
  - {a: s1, b: s2}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def load_error(tmp_path: Path, text: str) -> FabricFileError:
    path = write(tmp_path, text)
    with pytest.raises(FabricFileError) as info:
        load_fabric(path)
    err = info.value
    assert err.path == str(path)
    assert str(err).startswith(f"{path}:")
    return err


def edge_set(g: nx.MultiGraph) -> list[tuple[object, ...]]:
    return sorted(
        (tuple(sorted((n, d["ports"][n]) for n in (a, b))), d["rate_mbps"], d["scope"])
        for a, b, d in g.edges(data=True)
    )


def test_good_file(tmp_path: Path) -> None:
    g = load_fabric(write(tmp_path, GOOD))
    validate(g)
    assert g.graph["name"] == "lab" and g.graph["kind"] == "custom"
    assert [g.nodes[s]["role"] for s in switches(g)] == ["switch", "switch"]
    assert [e.port for e in link_ends(g, "s1")] == [1, 2]  # host first, then the link
    assert g.nodes["h2"]["mac"] == "02:00:00:00:00:02"
    assert {d["rate_mbps"] for _, _, d in g.edges(data=True)} == {10.0}


def test_example_loads() -> None:
    g = load_fabric(EXAMPLE)
    validate(g)
    sg = switch_graph(g)
    assert len(list(switches(g))) == 4 and len(host_list(g)) == 5
    assert g.number_of_edges("s1", "s2") == 2  # the doubled link
    assert any(len(c) == 3 for c in nx.cycle_basis(nx.Graph(sg)))  # the triangle
    assert g.nodes["s4"]["dpid"] == 4
    assert [e.port for e in link_ends(g, "s4")] == [1, 2, 3]
    assert {e.peer: e.port for e in link_ends(g, "s3")}["s4"] == 4
    assert {e.peer: e.rate_mbps for e in link_ends(g, "h5")} == {"s4": 5.0}
    assert g.nodes["h4"]["mac"] == "02:00:00:00:04:02"


def test_defaults_avoid_explicit_values(tmp_path: Path) -> None:
    g = load_fabric(
        write(
            tmp_path,
            """\
        defaults: {rate_mbps: 2.5}
        switches:
          - {name: s1}
          - {name: s2, dpid: 1, role: spine, group: 7}
        hosts:
          - {name: h1, switch: s2, ip: 10.0.0.1}
          - {name: h2, switch: s2, ip: 10.0.0.2, mac: "02:00:00:00:00:01", port: 1}
          - {name: h3, switch: s1, ip: 10.0.0.3, mac: 12:34:56:00:00:01, group: 3}
        links:
          - {a: s1, b: s2, scope: global, rate_mbps: 40}
        """,
        )
    )
    assert g.graph["name"] == "lab"  # the file's stem
    assert g.nodes["s1"]["dpid"] == 2 and g.nodes["s2"]["dpid"] == 1
    assert g.nodes["s2"]["role"] == "spine"
    assert g.nodes["h1"]["mac"] == "02:00:00:00:00:02"  # 01 is taken by h2
    assert g.nodes["h3"]["mac"] == "12:34:56:00:00:01"  # not the base-60 integer
    assert (g.nodes["h1"]["group"], g.nodes["h3"]["group"]) == (7, 3)
    assert {e.peer: e.port for e in link_ends(g, "s2")} == {"h2": 1, "h1": 2, "s1": 3}
    assert {e.peer: (e.rate_mbps, e.scope) for e in link_ends(g, "s1")} == {
        "h3": (2.5, "host"),
        "s2": (40.0, "global"),
    }


LINES = GOOD.splitlines()


def variant(line_no: int, replacement: str) -> str:
    """GOOD with 1-based line ``line_no`` replaced (the error's line stays predictable)."""
    lines = list(LINES)
    lines[line_no - 1] = replacement
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "line", "key", "fragment"),
    [
        # unknown keys, listing the allowed ones
        (
            variant(1, "nmae: lab"),
            1,
            "nmae",
            "unknown key 'nmae' (allowed: name, defaults, switches, hosts, links)",
        ),
        (
            variant(3, "  - {name: s1, dipd: 1}"),
            3,
            "switches[0].dipd",
            "unknown key 'dipd' (allowed: name, dpid, role, group)",
        ),
        (
            variant(9, "  - {a: s1, b: s2, speed: 5}"),
            9,
            "links[0].speed",
            "allowed: a, b, rate_mbps, a_port, b_port, scope",
        ),
        (variant(1, "defaults: {rate: 5}"), 1, "defaults.rate", "allowed: rate_mbps"),
        # wrong types
        (
            variant(3, "  - {name: s1, dpid: one}"),
            3,
            "switches[0].dpid",
            "expected an integer, got a string",
        ),
        (
            variant(3, "  - {name: s1, dpid: [1]}"),
            3,
            "switches[0].dpid",
            "expected an integer, got a list",
        ),
        (
            variant(3, "  - {name: 12, dpid: 1}"),
            3,
            "switches[0].name",
            "expected a string (quote it), got an integer",
        ),
        (variant(3, "  - s1"), 3, "switches[0]", "expected a mapping with keys name, dpid"),
        ("switches: {name: s1}\n", 1, "switches", "expected a list, got a mapping"),
        (
            variant(9, "  - {a: s1, b: s2, rate_mbps: fast}"),
            9,
            "links[0].rate_mbps",
            "expected a positive number of Mbit/s, got a string",
        ),
        (
            variant(9, "  - {a: s1, b: s2, rate_mbps: 0}"),
            9,
            "links[0].rate_mbps",
            "expected a positive number",
        ),
        (
            variant(9, "  - {a: s1, b: s2, a_port: yes}"),
            9,
            "links[0].a_port",
            "expected an integer, got a boolean",
        ),
        (
            variant(3, "  - {name: s1, dpid: 0}"),
            3,
            "switches[0].dpid",
            "expected an integer from 1 to 281474976710655, got 0",
        ),
        (variant(3, "  - {name: s-1, dpid: 1}"), 3, "switches[0].name", "bad name 's-1'"),
        (
            "switches:\n  - {name: s1}\n  - {name: switch_number_2}\n"
            "links: [{a: s1, b: switch_number_2}]\n",
            3,
            "switches[1].name",
            "interface switch_number_2-eth1 exceeds 15 characters",
        ),
        # duplicates, naming the first use
        (
            variant(4, "  - {name: s1, dpid: 2}"),
            4,
            "switches[1].name",
            "duplicate name 's1' (already used by switches[0].name on line 3)",
        ),
        (
            variant(7, "  - {name: s2, switch: s2, ip: 10.0.0.2}"),
            7,
            "hosts[1].name",
            "duplicate name 's2'",
        ),
        (
            variant(4, "  - {name: s2, dpid: 1}"),
            4,
            "switches[1].dpid",
            "duplicate dpid 1 (already used by switches[0].dpid on line 3)",
        ),
        (
            variant(7, "  - {name: h2, switch: s2, ip: 10.0.0.1}"),
            7,
            "hosts[1].ip",
            "duplicate IP 10.0.0.1 (already used by hosts[0].ip on line 6)",
        ),
        (
            variant(
                6, '  - {name: h1, switch: s1, ip: 10.0.0.1, mac: "02:00:00:00:00:0A"}'
            ).replace("ip: 10.0.0.2}", 'ip: 10.0.0.2, mac: "02:00:00:00:00:0a"}'),
            7,
            "hosts[1].mac",
            "duplicate MAC 02:00:00:00:00:0a",
        ),
        (
            variant(6, "  - {name: h1, switch: s1, ip: 10.0.0.1, port: 1}").replace(
                "- {a: s1, b: s2}", "- {a: s1, b: s2, a_port: 1}"
            ),
            9,
            "links[0].a_port",
            "duplicate port 1 on switch 's1' (already used by hosts[0].port)",
        ),
        (
            variant(3, "  - {name: s1, dpid: 1, dpid: 3}"),
            3,
            "switches[0].dpid",
            "duplicate key 'dpid'",
        ),
        # addresses
        (
            variant(6, "  - {name: h1, switch: s1, ip: 10.0.0.300}"),
            6,
            "hosts[0].ip",
            "bad IP address '10.0.0.300'",
        ),
        (
            variant(6, "  - {name: h1, switch: s1, ip: 192.168.0.1}"),
            6,
            "hosts[0].ip",
            "outside the hosts' subnet (expected a host address in 10.0.0.0/8)",
        ),
        (
            variant(6, "  - {name: h1, switch: s1, ip: 10}"),
            6,
            "hosts[0].ip",
            "expected a string (quote it), got an integer",
        ),
        (
            variant(6, "  - {name: h1, switch: s1, ip: 10.0.0.1, mac: 02:00:00:00:01}"),
            6,
            "hosts[0].mac",
            "bad MAC address '02:00:00:00:01'",
        ),
        (
            variant(6, "  - {name: h1, switch: s1, ip: 10.0.0.1, mac: 'zz:00:00:00:00:01'}"),
            6,
            "hosts[0].mac",
            "expected six hex pairs",
        ),
        (
            variant(6, "  - {name: h1, switch: s1, ip: 10.0.0.1, mac: '01:00:5e:00:00:01'}"),
            6,
            "hosts[0].mac",
            "not a unicast host address",
        ),
        # references
        (
            variant(9, "  - {a: s1, b: s9}"),
            9,
            "links[0].b",
            "unknown switch 's9' (expected one of the switch names)",
        ),
        (
            variant(9, "  - {a: h1, b: s2}"),
            9,
            "links[0].a",
            "is a host; hosts attach through their 'switch' key 'h1'",
        ),
        (variant(9, "  - {a: s1, b: s1}"), 9, "links[0].b", "link from 's1' to itself"),
        (
            variant(9, "  - {a: s1, b: s2, scope: host}"),
            9,
            "links[0].scope",
            "unknown scope 'host' (expected one of fabric, global)",
        ),
        (
            variant(6, "  - {name: h1, ip: 10.0.0.1}"),
            6,
            "hosts[0].switch",
            "missing key 'switch' (required: name, switch, ip)",
        ),
        (
            variant(6, "  - {name: h1, switch: s7, ip: 10.0.0.1}"),
            6,
            "hosts[0].switch",
            "unknown switch 's7'",
        ),
        (variant(9, "  - {b: s2}"), 9, "links[0].a", "missing key 'a'"),
        ("name: lab\nswitches: []\n", 2, "switches", "at least one switch"),
        ("name: lab\nswitches:\n", 2, "switches", "at least one switch"),
        ("name: lab\n", 1, "switches", "missing key 'switches'"),
    ],
)
def test_errors_name_file_line_and_key(
    tmp_path: Path, text: str, line: int, key: str, fragment: str
) -> None:
    err = load_error(tmp_path, text)
    assert (err.line, err.key) == (line, key), str(err)
    assert f"lab.yaml:{line}: {key}: " in str(err)
    assert fragment in str(err)
    assert isinstance(err, TopologyError)


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("switches:\n  - {name: s1\n  - {name: s2}\n", 3, "not valid YAML"),
        ("switches: [\n", 2, "not valid YAML"),
        ("", 1, "empty file"),
        ("- s1\n", 1, "expected a mapping"),
    ],
)
def test_file_level_errors(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    err = load_error(tmp_path, text)
    assert err.line == line and fragment in str(err)
    assert f"lab.yaml:{line}: " in str(err)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FabricFileError, match="cannot read") as info:
        load_fabric(tmp_path / "absent.yaml")
    assert info.value.line is None and "absent.yaml" in str(info.value)


def test_rate_override(tmp_path: Path) -> None:
    g = load_fabric(EXAMPLE, rate_mbps=3)
    assert {d["rate_mbps"] for _, _, d in g.edges(data=True)} == {3.0}
    with pytest.raises(TopologyError, match="positive"):
        load_fabric(EXAMPLE, rate_mbps=0)


@pytest.mark.parametrize(
    "build",
    [
        lambda: fat_tree(4),
        lambda: fat_tree(6, rate_mbps=100, host_rate_mbps=25),
        lambda: dragonfly(4, 2, 2),
        lambda: dragonfly(4, 1, 2, g=4, global_rate_mbps=20, arrangement="absolute"),
        lambda: leaf_spine(3, 2, 2, uplinks_per_spine=2),
        lambda: load_fabric(EXAMPLE),
    ],
)
def test_round_trip(tmp_path: Path, build: object) -> None:
    g = build()  # type: ignore[operator]
    text = dump_fabric(g)
    path = tmp_path / "dumped.yaml"
    path.write_text(text)
    back = load_fabric(path)
    validate(back)
    assert dict(back.nodes(data=True)) == dict(g.nodes(data=True))  # dpids, IPs, MACs, roles
    assert edge_set(back) == edge_set(g)  # ports, rates, scopes, parallel links
    assert back.graph["name"] == g.graph["name"]
    assert host_list(back) == host_list(g)

    def same(x: dict[str, object], y: dict[str, object]) -> bool:
        return x == y

    assert nx.is_isomorphic(back, g, node_match=same)
    assert dump_fabric(back) == text  # and the dump is stable
