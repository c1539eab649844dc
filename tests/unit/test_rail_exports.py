"""Rails in what schedulers are told (controller/schedulers.py, loom-export): the host map
carries each declared NIC's server, index and rail; Kubernetes nodes get
``loom.network/server`` and ``loom.network/rail``; ``topology.yaml`` gains a
``loom-rails`` block topology. Without servers nothing changes (the tests in
test_schedulers.py pin today's output)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller import export_cli
from controller.railorder import nic_places
from controller.schedulers import HostMap, host_map, kubernetes_labels, slurm_topology_yaml
from controller.servers import DeclaredNic
from tests.graphs import learned_topology
from tests.unit.test_railorder import by_ip, servers_of
from tests.unit.test_schedulers import HM8, expand
from topologies import rail_optimized
from topologies.graph import switches

G = rail_optimized(servers=6, nics=4, spines=2, servers_per_su=3)
TOPO = learned_topology(G)
NAMES = {int(G.nodes[s]["dpid"]): str(s) for s in switches(G)}
CABLED = by_ip(G)  # IP -> (server, NIC)


def rail_map(servers: dict[str, tuple[DeclaredNic, ...]] | None = None) -> HostMap:
    declared = servers_of(G) if servers is None else servers
    return host_map(TOPO, NAMES.__getitem__, nic_places(declared, TOPO))


def test_the_host_map_carries_each_nics_server_and_rail_and_round_trips() -> None:
    hm = rail_map()
    assert {h.ip: (h.server, h.nic) for h in hm.hosts} == CABLED
    assert all(h.rail == h.nic for h in hm.hosts)
    assert [h.ip for h in hm.hosts] == [h.ip for h in host_map(TOPO, NAMES.__getitem__).hosts]
    data = json.loads(json.dumps(hm.as_dict()))
    assert {"server", "nic", "rail"} <= set(data["hosts"][0])
    assert HostMap.from_dict(data) == hm
    assert sorted(hm.rails()) == [0, 1, 2, 3] and all(len(v) == 6 for v in hm.rails().values())
    assert "server" not in HM8.as_dict()["hosts"][0]  # without servers: as before


def test_a_broken_rail_leaves_its_nics_without_a_rail() -> None:
    servers = servers_of(G)
    servers["s7"] = (DeclaredNic("02:00:00:00:07:00", None),)  # not attached: rail 0 broken
    hm = rail_map(servers)
    assert {h.rail for h in hm.hosts if h.nic == 0} == {None}
    assert sorted(hm.rails()) == [1, 2, 3]
    assert HostMap.from_dict(json.loads(json.dumps(hm.as_dict()))) == hm


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda h: h.pop("rail"), r"hosts\[0\]\.rail: expected with server, nic"),
        (lambda h: h.update(rail=h["nic"] + 1), r"hosts\[0\]\.rail: expected null or the NIC"),
        (lambda h: h.update(rail=True), r"hosts\[0\]\.rail"),
        (lambda h: h.update(nic=-1), r"hosts\[0\]\.nic"),
        (lambda h: h.update(server=3), r"hosts\[0\]\.server"),
    ],
)
def test_bad_server_keys_in_a_host_map_are_refused(change: Any, key: str) -> None:
    data = json.loads(json.dumps(rail_map().as_dict()))
    change(data["hosts"][0])
    with pytest.raises(ValueError, match=key):
        HostMap.from_dict(data)


def test_kubernetes_labels_name_each_nics_server_and_rail() -> None:
    labels = kubernetes_labels(rail_map())
    assert sorted(labels) == sorted(CABLED)
    for ip, (server, nic) in CABLED.items():
        assert labels[ip]["loom.network/server"] == server
        assert labels[ip]["loom.network/rail"] == str(nic)
        assert labels[ip]["loom.network/leaf"] == G.nodes[f"s{server[1:]}n{nic}"]["switch"]
    plain = kubernetes_labels(host_map(TOPO, NAMES.__getitem__))
    assert all(set(v) == set(plain[next(iter(plain))]) for v in plain.values())
    assert {k.removeprefix("loom.network/") for k in plain[next(iter(plain))]} == {
        "leaf",
        "block",
        "leaf-dpid",
    }


def test_a_node_named_per_server_is_labelled_with_its_server_but_no_rail() -> None:
    labels = kubernetes_labels(rail_map(), lambda ip: CABLED[ip][0])
    assert sorted(labels) == [f"s{i}" for i in range(1, 7)]
    for server, node in labels.items():
        assert node["loom.network/server"] == server and "loom.network/rail" not in node


def test_slurm_yaml_adds_a_rail_block_topology() -> None:
    node = {ip: f"{s}-nic{n}" for ip, (s, n) in CABLED.items()}
    text = slurm_topology_yaml(rail_map(), node.__getitem__)
    assert text.splitlines()[0].endswith("24 hosts, 8 leaves, 1 blocks, 4 rails.")
    doc = yaml.safe_load(text)
    assert [t["topology"] for t in doc] == ["loom-block", "loom-tree", "loom-rails"]
    rails = doc[2]
    assert rails["cluster_default"] is False and set(rails["block"]) == {"block_sizes", "blocks"}
    assert rails["block"]["block_sizes"] == [6]
    blocks = {b["block"]: sorted(expand(b["nodes"])) for b in rails["block"]["blocks"]}
    assert blocks == {f"rail{i}": sorted(f"s{s}-nic{i}" for s in range(1, 7)) for i in range(4)}
    plain = yaml.safe_load(slurm_topology_yaml(host_map(TOPO, NAMES.__getitem__), node.__getitem__))
    assert doc[:2] == plain  # the cluster default and the tree are what they were


def test_slurm_yaml_leaves_out_nodes_on_several_rails() -> None:
    """A Slurm node per server has NICs on every rail: no rail block can hold it."""
    text = slurm_topology_yaml(rail_map(), lambda ip: CABLED[ip][0])
    assert "# loom-rails leaves out 6 node(s) with NICs on several rails." in text
    assert [t["topology"] for t in yaml.safe_load(text)] == ["loom-block", "loom-tree"]
    some = {ip: s for ip, (s, n) in CABLED.items() if s == "s1"}  # s1 named per server
    doc = yaml.safe_load(slurm_topology_yaml(rail_map(), lambda ip: some.get(ip, ip)))
    blocks = {b["block"]: expand(b["nodes"]) for b in doc[2]["block"]["blocks"]}
    assert all("s1" not in nodes and len(nodes) == 5 for nodes in blocks.values())


def test_loom_export_renders_rails_from_a_saved_host_map(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "hosts.json"
    saved.write_text(json.dumps(rail_map().as_dict()))
    assert export_cli.main(["--from-file", str(saved), "k8s-labels"]) == 0
    lines = capsys.readouterr().out.splitlines()
    first = next(ip for ip, (s, n) in CABLED.items() if (s, n) == ("s1", 0))
    assert lines[1].startswith(f"kubectl label node --overwrite {first} loom.network/leaf=su1r0")
    assert lines[1].endswith("loom.network/server=s1 loom.network/rail=0")
    assert export_cli.main(["--from-file", str(saved), "slurm-yaml"]) == 0
    assert "topology: loom-rails" in capsys.readouterr().out
