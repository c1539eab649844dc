"""GPU servers declared in the policy, and ``GET /loom/v1/topology`` on the fake fabric:
each NIC where discovery saw it, and whether the cabling is rail-optimized. A
``rail_optimized`` fabric is, NICs declared by MAC or by IP alike; a fat-tree whose edge
switches each hold one server's two NICs is not, and says why. The report is computed
when the topology is asked for, never while packets are handled, and a policy file with a
bad ``servers`` entry changes nothing on reload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from controller.api import LoomApi
from controller.policy import parse_policy
from controller.policy.manager import PolicyManager
from controller.rails import NOT_RAIL_OPTIMIZED, RAIL_OPTIMIZED, discover_rails
from controller.servers import DeclaredNic
from tests.sim import LoomSim
from topologies import fat_tree, rail_optimized
from topologies.graph import dpid_of, host_list

OPEN = "fabric: {unassigned_hosts: allow}\ntenants: []\n"  # every host admitted


def rail_servers(g: nx.MultiGraph) -> dict[str, list[str]]:
    """Each server's hosts in NIC order, from the generator's node attributes."""
    out: dict[str, list[tuple[int, str]]] = {}
    for h in host_list(g):
        out.setdefault(g.nodes[h]["server"], []).append((g.nodes[h]["nic"], h))
    return {s: [h for _, h in sorted(nics)] for s, nics in out.items()}


def servers_yaml(g: nx.MultiGraph, servers: dict[str, list[str]], by_ip: bool = False) -> str:
    """A ``servers:`` section; with ``by_ip``, odd NICs are given by IP, even by MAC."""
    lines = ["servers:"]
    for name, hosts in servers.items():
        lines += [f"  - name: {name}", "    nics:"]
        for i, h in enumerate(hosts):
            d = g.nodes[h]
            lines.append(
                f"      - {{ip: {d['ip']}}}"
                if by_ip and i % 2
                else f'      - {{mac: "{d["mac"]}"}}'
            )
        lines.append("")
    return "\n".join(lines)


def started(g: nx.MultiGraph, text: str) -> LoomSim:
    sim = LoomSim(g)
    sim.apply(sim.core.apply_policy(0.0, parse_policy(text)))
    return sim.start()


def topology(sim: LoomSim, policy: PolicyManager | None = None) -> dict[str, Any]:
    res = LoomApi(sim.core, lambda: sim.now, policy=policy).handle("GET", "/loom/v1/topology", {})
    assert res.status == 200, res.body
    body: dict[str, Any] = res.body
    return body


def edge_of(g: nx.MultiGraph, host: str) -> tuple[int, int]:
    """The (dpid, port) a host is cabled to."""
    switch = g.nodes[host]["switch"]
    ((_, _, data),) = g.edges(host, data=True)
    return dpid_of(g, switch), data["ports"][switch]


@pytest.mark.parametrize("by_ip", [False, True])
def test_a_rail_optimized_fabric_is_reported_rail_optimized(by_ip: bool) -> None:
    g = rail_optimized(servers=4, nics=4, spines=2)
    servers = rail_servers(g)
    sim = started(g, OPEN + servers_yaml(g, servers, by_ip))
    body = topology(sim)
    rails = body["rails"]
    assert rails["status"] == RAIL_OPTIMIZED, rails["reasons"]
    leaves = {str(i): [dpid_of(g, f"su1r{i}")] for i in range(4)}
    assert rails["rails"] == leaves  # 4 rails, one leaf each
    assert rails["broken"] == [] and rails["reasons"] == []
    assert rails["nic_rail"] == {g.nodes[h]["mac"]: g.nodes[h]["nic"] for h in host_list(g)}
    assert list(body["servers"]) == ["s1", "s2", "s3", "s4"]
    first = g.nodes[servers["s1"][0]]
    assert sim.view.servers["s1"][0] == DeclaredNic(first["mac"], None)  # as declared
    for name, hosts in servers.items():
        shown = body["servers"][name]["nics"]
        expected = [
            {
                "mac": g.nodes[h]["mac"],
                "ip": g.nodes[h]["ip"],
                "dpid": edge_of(g, h)[0],
                "port": edge_of(g, h)[1],
            }
            for h in hosts
        ]
        assert shown == expected


def test_a_fat_tree_with_a_server_per_edge_switch_is_not_rail_optimized() -> None:
    g = fat_tree(4)
    per_edge: dict[str, list[str]] = {}
    for h in host_list(g):
        per_edge.setdefault(g.nodes[h]["switch"], []).append(h)
    servers = {f"srv-{edge}".replace("_", "-"): hosts for edge, hosts in per_edge.items()}
    assert len(servers) == 8 and all(len(h) == 2 for h in servers.values())
    sim = started(g, OPEN + servers_yaml(g, servers, by_ip=True))
    rails = topology(sim)["rails"]
    assert rails["status"] == NOT_RAIL_OPTIMIZED
    assert rails["broken"] == [0, 1]
    assert set(rails["nic_rail"].values()) == {None}
    for name, hosts in servers.items():
        leaf = f"leaf {dpid_of(g, g.nodes[hosts[0]]['switch']):#x}"
        assert f"server {name}: NICs 0 and 1 reach the same {leaf}" in rails["reasons"]


def test_a_nic_not_learned_is_shown_unattached_and_breaks_its_rail() -> None:
    g = rail_optimized(servers=2, nics=2, spines=1)
    text = (
        OPEN
        + servers_yaml(g, rail_servers(g))
        + ('  - name: s3\n    nics: [{mac: "02:00:00:00:00:99"}, {ip: 10.101.9.9}]\n')
    )
    body = topology(started(g, text))
    assert body["servers"]["s3"]["nics"] == [
        {"mac": "02:00:00:00:00:99", "ip": None, "dpid": None, "port": None},
        {"mac": None, "ip": "10.101.9.9", "dpid": None, "port": None},
    ]
    rails = body["rails"]
    assert rails["status"] == NOT_RAIL_OPTIMIZED and rails["broken"] == [0, 1]
    assert "NIC 1 of s3 (10.101.9.9) is not attached" in rails["reasons"]
    assert rails["nic_rail"]["10.101.9.9"] is None


def test_without_servers_there_is_nothing_to_report() -> None:
    g = rail_optimized(servers=2, nics=2, spines=1)
    for sim in (LoomSim(g).start(), started(g, OPEN)):
        body = topology(sim)
        assert body["servers"] == {} and body["rails"] is None


def test_the_report_is_computed_when_asked_not_per_packet(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def counted(*args: Any) -> Any:
        calls.append(1)
        return discover_rails(*args)

    monkeypatch.setattr("controller.servers.discover_rails", counted)
    g = rail_optimized(servers=4, nics=2, spines=2)
    sim = started(g, OPEN + servers_yaml(g, rail_servers(g)))
    hosts = host_list(g)
    assert sim.fake.trace(hosts[0], sim.fake.packet(hosts[0], hosts[-1])).ok_unicast(hosts[-1])
    sim.advance(2.0)
    assert calls == []  # discovery, packets and polls never compute it
    topology(sim)
    assert calls == [1]


def test_a_bad_servers_entry_on_reload_keeps_the_old_servers(tmp_path: Path) -> None:
    g = rail_optimized(servers=2, nics=2, spines=1)
    servers = rail_servers(g)
    good = OPEN + servers_yaml(g, servers)
    path = tmp_path / "policy.yaml"
    path.write_text(good)
    sim = LoomSim(g)
    manager = PolicyManager(sim.core, str(path))
    sim.apply(manager.reload(0.0))
    sim.start()
    before = topology(sim, manager)
    assert list(before["servers"]) == ["s1", "s2"]
    # s2's NIC 1 given s1's NIC 0's MAC: rejected, named, and nothing changes
    s1n0, s2n1 = (g.nodes[h]["mac"] for h in (servers["s1"][0], servers["s2"][1]))
    path.write_text(good.replace(s2n1, s1n0))
    api = LoomApi(sim.core, lambda: sim.now, policy=manager)
    res = api.handle("POST", "/loom/v1/policy/reload", {})
    assert res.status == 422 and res.messages == {}
    assert any("servers[1].nics[1].mac" in e and "already a NIC of server 's1'" in e
               for e in res.body["errors"]), res.body["errors"]  # fmt: skip
    assert topology(sim, manager) == before
    # a valid file that drops s2 is put in force
    path.write_text(good.split("  - name: s2")[0])
    assert api.handle("POST", "/loom/v1/policy/reload", {}).status == 200
    after = topology(sim, manager)
    assert list(after["servers"]) == ["s1"] and after["rails"]["status"] == RAIL_OPTIMIZED
