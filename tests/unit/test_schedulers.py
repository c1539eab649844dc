"""Rank order, blocks and the scheduler exports (controller/schedulers.py, loom-export)."""

from __future__ import annotations

import itertools
import json
import random
import re
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
import yaml

from controller import export_cli
from controller.model import PortDesc
from controller.schedulers import (
    HostMap,
    blocks,
    host_map,
    hostlist,
    kubernetes_labels,
    label_value,
    order_body,
    rank_order,
    slurm_topology_conf,
    slurm_topology_yaml,
)
from controller.topology import Topology
from tests.graphs import learned_topology
from tests.sim import LoomSim
from topologies import dragonfly, fat_tree, leaf_spine
from topologies.graph import add_host, add_link, add_switch, host_list, link_ends, new_graph
from topologies.graph import switches as switch_nodes

LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def learned(g: nx.MultiGraph) -> tuple[Topology, Callable[[int], str]]:
    """A Topology as discovery leaves it, and dpid -> the graph's switch name."""
    names = {int(g.nodes[s]["dpid"]): str(s) for s in switch_nodes(g)}
    return learned_topology(g), names.__getitem__


def ips_of(g: nx.MultiGraph) -> list[str]:
    return [str(g.nodes[h]["ip"]) for h in host_list(g)]


def where(g: nx.MultiGraph) -> dict[str, tuple[str, int]]:
    """IP -> (switch name, switch port) as the graph wires it."""
    out = {}
    for h in host_list(g):
        sw = g.nodes[h]["switch"]
        port = next(e.port for e in link_ends(g, sw) if e.peer == h)
        out[str(g.nodes[h]["ip"])] = (str(sw), port)
    return out


def runs(labels: list[str]) -> int:
    """Maximal runs of equal neighbours, the ring closed (a label in one run: 1)."""
    n = len(labels)
    changes = sum(labels[i] != labels[(i + 1) % n] for i in range(n))
    return max(changes, 1)


def block_of(hm: HostMap) -> dict[str, str]:
    return {h.ip: h.block for h in hm.hosts}


def leaf_of(hm: HostMap) -> dict[str, str]:
    return {h.ip: h.leaf for h in hm.hosts}


FAT8 = fat_tree(8)
TOPO8, NAMES8 = learned(FAT8)
HM8 = host_map(TOPO8, NAMES8)


# -- blocks ------------------------------------------------------------------------------
def test_the_core_learns_a_k4_fat_tree_as_four_pods_of_two_leaves() -> None:
    g = fat_tree(4)
    sim = LoomSim(g).start()
    hm = host_map(sim.core.topo, sim.view.switch_name)
    assert [(b.name, [leaf.name for leaf in b.leaves]) for b in hm.blocks] == [
        (f"block{p + 1}", [f"e{p}_0", f"e{p}_1"]) for p in range(4)
    ]
    assert len(hm.hosts) == 16
    wired = where(g)
    for h in hm.hosts:
        assert (h.leaf, h.port) == wired[h.ip], h
        assert h.dpid == g.nodes[h.leaf]["dpid"]
        assert h.block == f"block{int(h.leaf[1]) + 1}"
        assert h.mac == g.nodes[next(n for n in host_list(g) if g.nodes[n]["ip"] == h.ip)]["mac"]


@pytest.mark.parametrize("uplinks", [1, 2])
def test_a_leaf_spine_is_one_block(uplinks: int) -> None:
    g = leaf_spine(leaves=6, spines=3, uplinks_per_spine=uplinks)
    topo, names = learned(g)
    assert [[names(d) for d in b.leaves] for b in blocks(topo)] == [
        [f"leaf{i}" for i in range(1, 7)]
    ]


@pytest.mark.parametrize(
    "g", [dragonfly(), dragonfly(a=4, p=1, h=1, g=5), dragonfly(a=3, p=2, h=1, g=4)]
)
def test_a_dragonflys_blocks_are_its_groups(g: nx.MultiGraph) -> None:
    topo, names = learned(g)
    found = [sorted(names(d) for d in b.leaves) for b in blocks(topo)]
    groups: dict[int, list[str]] = {}
    for s in switch_nodes(g):
        groups.setdefault(g.nodes[s]["group"], []).append(str(s))
    assert found == [sorted(groups[grp]) for grp in sorted(groups)]


def test_a_failed_link_moves_no_leaf_to_another_block() -> None:
    g = fat_tree(4)
    topo, _ = learned(g)
    before = blocks(topo)
    edge = g.nodes["e0_0"]["dpid"]
    uplink = next(e.port for e in link_ends(g, "e0_0") if e.peer.startswith("a"))
    assert topo.port_changed(edge, PortDesc(uplink, up=False))
    assert blocks(topo) == before


def mesh() -> nx.MultiGraph:
    """Five switches in a line (no tiers, no triangles), dpids out of line order."""
    g = new_graph("line", "custom")
    line = [3, 1, 5, 2, 4]
    for d in line:
        add_switch(g, f"s{d}", d, "leaf")
        for k in range(2):
            add_host(g, f"h{d}_{k}", f"s{d}", f"10.0.{d}.{k + 2}", 10.0)
    for a, b in itertools.pairwise(line):
        add_link(g, f"s{a}", f"s{b}", 10.0)
    return g


def test_without_blocks_leaves_follow_a_nearest_neighbour_tour_from_the_lowest_dpid() -> None:
    g = mesh()
    topo, _ = learned(g)
    assert [len(b.leaves) for b in blocks(topo)] == [1] * 5
    order, unknown = rank_order(topo, sorted(ips_of(g), reverse=True))
    # from s1: s3 and s5 are one hop away (lower dpid first), then the nearest left each time
    leaves = [f"s{ip.split('.')[2]}" for ip in order[::2]]
    assert leaves == ["s1", "s3", "s5", "s2", "s4"] and not unknown
    assert order[:2] == ["10.0.1.2", "10.0.1.3"]


# -- rank order ---------------------------------------------------------------------------
def shuffled(ips: list[str], seed: int) -> list[str]:
    out = ips[:]
    random.Random(seed).shuffle(out)
    return out


def test_rank_order_groups_hosts_by_leaf_and_leaves_by_block_whatever_the_input_order() -> None:
    ips = ips_of(FAT8)
    first, _ = rank_order(TOPO8, shuffled(ips, 1))
    assert sorted(first) == sorted(ips)
    assert rank_order(TOPO8, shuffled(ips, 2))[0] == first  # deterministic
    leaf, block, wired = leaf_of(HM8), block_of(HM8), where(FAT8)
    assert runs([leaf[ip] for ip in first]) == 32  # each leaf's hosts adjacent
    assert runs([block[ip] for ip in first]) == 8  # each pod's leaves adjacent
    for a, b in itertools.pairwise(first):  # within a leaf, by port
        if leaf[a] == leaf[b]:
            assert wired[a][1] < wired[b][1]


@pytest.mark.parametrize("seed", range(5))
def test_a_ring_in_rank_order_crosses_the_fewest_block_and_leaf_boundaries(seed: int) -> None:
    ips = shuffled(ips_of(FAT8), seed)[:40]  # a job on part of the fabric
    order, _ = rank_order(TOPO8, ips)
    leaf, block = leaf_of(HM8), block_of(HM8)
    for of in (block, leaf):
        given = runs([of[ip] for ip in ips])
        best = len({of[ip] for ip in ips})  # each block or leaf entered once: the minimum
        assert runs([of[ip] for ip in order]) == best < given


def test_unknown_ips_come_back_apart_in_the_order_given() -> None:
    ips = ips_of(FAT8)[:6]
    asked = ["10.99.0.1", ips[3], "10.99.0.0", ips[0], ips[3], *ips[1:3], "10.99.0.1"]
    order, unknown = rank_order(TOPO8, asked)
    assert unknown == ["10.99.0.1", "10.99.0.0"]
    assert order == [ips[0], ips[1], ips[2], ips[3]]


def test_order_body_says_where_each_host_hangs_and_what_the_ring_crosses() -> None:
    ips = [ip for ip in ips_of(FAT8) if ip.startswith(("10.0.", "10.1."))]
    body = order_body(TOPO8, [*shuffled(ips, 3), "10.99.0.1"], NAMES8)
    assert body["order"][-1] == "10.99.0.1" and body["unknown"] == ["10.99.0.1"]
    assert body["hosts"][0] == {"ip": "10.0.0.2", "leaf": "e0_0", "block": "block1"}
    assert body["ring_crossings"]["ordered"] == {"leaf": 8, "block": 2}
    assert body["ring_crossings"]["given"]["leaf"] > 8


# -- the host map ------------------------------------------------------------------------
def test_host_map_round_trips_through_json() -> None:
    data = json.loads(json.dumps(HM8.as_dict()))
    assert HostMap.from_dict(data) == HM8
    assert HostMap.from_dict(HM8.as_dict()) == HM8
    assert [h.ip for h in HM8.hosts] == rank_order(TOPO8, ips_of(FAT8))[0]


def broken(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(HM8.as_dict()))
    change(data)
    return data


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda d: d.pop("hosts"), "^hosts: expected list"),
        (lambda d: d["hosts"][2].pop("dpid"), r"hosts\[2\]\.dpid"),
        (lambda d: d["hosts"][0].update(port=True), r"hosts\[0\]\.port"),
        (lambda d: d["hosts"][1].update(ip="10.0.0.999"), r"hosts\[1\]\.ip"),
        (lambda d: d["hosts"][1].update(ip=d["hosts"][0]["ip"]), r"hosts\[1\]\.ip"),
        (lambda d: d["hosts"][5].update(block="block9"), r"hosts\[5\]\.leaf"),
        (lambda d: d["blocks"][1].update(leaves="e1_0"), r"blocks\[1\]\.leaves"),
        (lambda d: d["blocks"][0]["leaves"][1].update(name=7), r"blocks\[0\]\.leaves\[1\]\.name"),
        (lambda d: d["blocks"].append(d["blocks"][0]), r"blocks\[8\]\.name"),
        (lambda d: d.update(blocks=[None]), r"blocks\[0\]"),
    ],
)
def test_a_bad_host_map_is_refused_naming_the_key(
    change: Callable[[dict[str, Any]], object], key: str
) -> None:
    with pytest.raises(ValueError, match=key):
        HostMap.from_dict(broken(change))


# -- renderers ---------------------------------------------------------------------------
def expand(expr: str) -> list[str]:
    """A Slurm hostlist expression's names (``a[01-03,7],b``); widths as Slurm reads them."""
    out: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", expr):
        m = re.fullmatch(r"(.*)\[(.*)\]", part)
        if m is None:
            out.append(part)
            continue
        for span in m[2].split(","):
            lo, _, hi = span.partition("-")
            out += [f"{m[1]}{n:0{len(lo)}d}" for n in range(int(lo), int(hi or lo) + 1)]
    return out


def parse_conf(text: str) -> dict[str, tuple[str, list[str]]]:
    """topology.conf -> switch: ("Nodes" or "Switches", members)."""
    tree = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            fields = dict(word.split("=", 1) for word in line.split())
            kind = "Nodes" if "Nodes" in fields else "Switches"
            assert fields["SwitchName"] not in tree
            tree[fields["SwitchName"]] = (kind, expand(fields[kind]))
    return tree


def gpu_names(g: nx.MultiGraph) -> dict[str, str]:
    """IP -> gpu01.. in host index order (zero padded: a hostlist must keep it)."""
    return {ip: f"gpu{i:03d}" for i, ip in enumerate(ips_of(g), start=1)}


def test_hostlist_compresses_keeping_zero_padding() -> None:
    names = ["n08", "n09", "n10", "n12", "n1", "n2", "n3", "n9", "n10", "x", "10.0.0.2", "r1_2"]
    assert hostlist(names) == "10.0.0.2,n[08-10,12],n[1-3,9],r1_2,x"
    assert sorted(expand(hostlist(names))) == sorted(set(names))
    assert expand(hostlist(["gpu099", "gpu100", "gpu101"])) == ["gpu099", "gpu100", "gpu101"]


def test_slurm_conf_parses_back_to_the_leaves_and_blocks() -> None:
    node = gpu_names(FAT8)
    text = slurm_topology_conf(HM8, node.__getitem__)
    assert text.splitlines()[0].startswith("# Generated by Loom from the learned fabric")
    assert "Nodes=gpu[001-004]" in text
    tree = parse_conf(text)
    wired = where(FAT8)
    for ip, (leaf, _) in wired.items():
        assert tree[leaf][0] == "Nodes" and node[ip] in tree[leaf][1]
    assert sum(len(m) for kind, m in tree.values() if kind == "Nodes") == 128
    for b in HM8.blocks:
        assert tree[b.name] == ("Switches", sorted(leaf.name for leaf in b.leaves))
    assert tree["fabric"] == ("Switches", [f"block{i}" for i in range(1, 9)])


def test_one_block_has_no_root_switch() -> None:
    topo, names = learned(leaf_spine(leaves=3))
    tree = parse_conf(slurm_topology_conf(host_map(topo, names)))
    assert "fabric" not in tree and tree["block1"] == ("Switches", ["leaf1", "leaf2", "leaf3"])
    assert tree["leaf2"] == ("Nodes", ["10.0.2.2", "10.0.2.3"])


def test_slurm_yaml_has_the_documented_keys() -> None:
    node = gpu_names(FAT8)
    text = slurm_topology_yaml(HM8, node.__getitem__)
    assert text.startswith("# Generated by Loom from the learned fabric")
    doc = yaml.safe_load(text)
    assert [t["topology"] for t in doc] == ["loom-block", "loom-tree"]
    assert [next(iter(t)) for t in doc] == ["topology", "topology"]  # must come first
    block, tree = doc[0], doc[1]
    assert block["cluster_default"] is True and tree["cluster_default"] is False
    assert set(block["block"]) == {"block_sizes", "blocks"}
    assert block["block"]["block_sizes"] == [16]
    by_block = {b["block"]: expand(b["nodes"]) for b in block["block"]["blocks"]}
    assert by_block == {
        b.name: sorted(node[h.ip] for h in HM8.hosts if h.block == b.name) for b in HM8.blocks
    }
    switches = {s["switch"]: s for s in tree["tree"]["switches"]}
    assert set(switches["e0_0"]) == {"switch", "nodes"}
    assert expand(switches["fabric"]["children"]) == [f"block{i}" for i in range(1, 9)]
    empty = yaml.safe_load(slurm_topology_yaml(HostMap((), ())))
    assert empty == [{"topology": "loom-flat", "cluster_default": True, "flat": True}]


def test_kubernetes_label_values_are_valid_whatever_the_switch_names() -> None:
    g = fat_tree(4)
    topo, _ = learned(g)
    odd = {d: f"Leaf #{d}/rack:A" if d % 2 else "-" + "x" * 80 + f"{d}_" for d in topo.switches}
    labels = kubernetes_labels(host_map(topo, odd.__getitem__))
    assert sorted(labels) == sorted(ips_of(g))
    seen = set()
    for node_labels in labels.values():
        assert set(node_labels) == {
            "loom.network/leaf",
            "loom.network/block",
            "loom.network/leaf-dpid",
        }
        for value in node_labels.values():
            assert len(value) <= 63 and LABEL_VALUE.fullmatch(value), value
        seen.add(node_labels["loom.network/leaf"])
    assert len(seen) == 8  # shortened names stay apart
    assert label_value("e0_0") == "e0_0"


def test_a_node_on_two_leaves_is_placed_once_at_its_first_address() -> None:
    ips = ips_of(FAT8)
    two = {ips[0]: "node1", ips[1]: "node1", ips[4]: "node1"}  # two on e0_0, one on e0_1
    tree = parse_conf(slurm_topology_conf(HM8, lambda ip: two.get(ip, ip)))
    placed = [leaf for leaf, (_, nodes) in tree.items() for n in nodes if n == "node1"]
    assert placed == ["e0_0"]
    with pytest.raises(ValueError, match="node name"):
        slurm_topology_conf(HM8, lambda ip: "bad,name")


# -- loom-export -------------------------------------------------------------------------
@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, Path]:
    """A saved k=8 host map and a hosts file naming every host but the last."""
    hm_file = tmp_path / "hosts.json"
    hm_file.write_text(json.dumps(HM8.as_dict()))
    lines = ["# cluster", "127.0.0.1 localhost"]
    lines += [f"{ip}\t{name} {name}.cluster  # node" for ip, name in gpu_names(FAT8).items()]
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text("\n".join(lines[:-1]) + "\n")
    return hm_file, hosts_file


def test_the_cli_renders_a_saved_host_map_with_a_hosts_file(
    saved: tuple[Path, Path], tmp_path: Path
) -> None:
    hm_file, hosts_file = saved
    out = tmp_path / "topology.conf"
    args = ["--from-file", str(hm_file), "--hosts-file", str(hosts_file), "--out", str(out)]
    assert export_cli.main([*args, "slurm-conf"]) == 0
    tree = parse_conf(out.read_text())
    last = ips_of(FAT8)[-1]  # not in the hosts file: keeps its IP
    assert sorted(tree["e7_3"][1]) == sorted(["gpu125", "gpu126", "gpu127", last])
    assert out.stat().st_mode & 0o777 == 0o644
    assert export_cli.main([*args, "slurm-yaml"]) == 0
    assert yaml.safe_load(out.read_text())[0]["block"]["blocks"][0]["nodes"] == "gpu[001-016]"
    assert export_cli.main([*args, "hosts"]) == 0
    assert HostMap.from_dict(json.loads(out.read_text())) == HM8


def test_the_cli_writes_kubectl_label_commands_to_stdout(
    saved: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    hm_file, hosts_file = saved
    args = ["--from-file", str(hm_file), "--hosts-file", str(hosts_file), "k8s-labels"]
    assert export_cli.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# Generated by Loom") and len(lines) == 129
    assert lines[1] == (
        "kubectl label node --overwrite gpu001 loom.network/leaf=e0_0 "
        "loom.network/block=block1 loom.network/leaf-dpid=0000000000000015"
    )


def test_the_cli_refuses_a_bad_saved_map_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hosts": [], "blocks": [{"name": "block1"}]}))
    assert export_cli.main(["--from-file", str(bad), "hosts"]) == 4
    assert "blocks[0].leaves" in capsys.readouterr().err
    assert export_cli.main(["--from-file", str(tmp_path / "missing.json"), "hosts"]) == 4


@pytest.fixture
def api() -> Iterator[tuple[str, list[str]]]:
    """A stand-in Loom on loopback: /loom/v1/topology/hosts answers the k=8 map."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            ok = self.path == "/loom/v1/topology/hosts"
            body = json.dumps(HM8.as_dict() if ok else {"error": "no such resource"}).encode()
            self.send_response(200 if ok else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def test_the_cli_fetches_the_host_map_from_loom(
    api: tuple[str, list[str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, asked = api
    monkeypatch.setenv("LOOM_API", url)
    assert export_cli.main(["hosts"]) == 0
    assert HostMap.from_dict(json.loads(capsys.readouterr().out)) == HM8
    assert asked == ["/loom/v1/topology/hosts"]
    assert export_cli.main(["--api", url + "/elsewhere", "slurm-conf"]) == 3
    err = capsys.readouterr().err
    assert f"{url}/elsewhere/loom/v1/topology/hosts" in err and "HTTP 404" in err


def test_the_cli_names_the_url_when_loom_is_unreachable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    assert export_cli.main(["--api", url, "--timeout", "2", "slurm-conf"]) == 3
    assert f"{url}/loom/v1/topology/hosts" in capsys.readouterr().err
