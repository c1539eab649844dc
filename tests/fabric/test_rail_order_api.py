"""Rail-aware rank order and rails for schedulers through the REST API on the fake fabric.

On ``rail_optimized(servers=4, nics=4, spines=2)`` with its servers declared, ``GET order``
keeps each server's ranks together and every hop between servers on one rail (checked
against the generator's cabling) and says which ranks share each rail; on a fat-tree
whose servers do not sit on rails it answers today's order and says why. The exports carry the
rails."""

from __future__ import annotations

import json
import random

import networkx as nx
import pytest
import yaml

from controller.api import LoomApi, Response
from controller.schedulers import rank_order
from tests.fabric.test_rails_api import OPEN, rail_servers, servers_yaml, started
from tests.sim import LoomSim
from topologies import fat_tree, rail_optimized
from topologies.graph import host_list


def call(sim: LoomSim, method: str, path: str, body: object = None) -> Response:
    api = LoomApi(sim.core, lambda: sim.now)
    raw = b"" if body is None else json.dumps(body).encode()
    path, _, query = path.partition("?")
    args = dict(kv.split("=", 1) for kv in query.split("&") if kv)
    res = api.handle(method, path, args, raw)
    sim.apply(res.messages)
    return res


def tenant_yaml(g: nx.MultiGraph, *more: str) -> str:
    """A tenant ``train`` with every host (and ``more`` IPs), so jobs may run on them."""
    ips = [g.nodes[h]["ip"] for h in host_list(g)] + list(more)
    hosts = ", ".join(f"{{ip: {ip}}}" for ip in ips)
    return f"fabric: {{unassigned_hosts: deny}}\ntenants:\n  - {{name: train, hosts: [{hosts}]}}\n"


def cabled(g: nx.MultiGraph) -> dict[str, tuple[str, int]]:
    return {g.nodes[h]["ip"]: (g.nodes[h]["server"], g.nodes[h]["nic"]) for h in host_list(g)}


@pytest.fixture(scope="module")
def rails() -> tuple[nx.MultiGraph, LoomSim]:
    g = rail_optimized(servers=4, nics=4, spines=2)
    return g, started(g, tenant_yaml(g) + servers_yaml(g, rail_servers(g)))


def test_order_on_a_rail_optimized_fabric_keeps_hops_on_rails(
    rails: tuple[nx.MultiGraph, LoomSim],
) -> None:
    g, sim = rails
    where = cabled(g)
    ips = sorted(where)
    random.Random(7).shuffle(ips)
    res = call(sim, "GET", "/loom/v1/order?hosts=" + ",".join(ips))
    assert res.status == 200, res.body
    body = res.body
    assert body["rails"] == "used" and body["rail_reasons"] == [] and body["unknown"] == []
    order = body["hosts"]
    assert sorted(order) == sorted(ips)
    servers = [where[ip][0] for ip in order]
    assert servers == [s for s in ("s1", "s2", "s3", "s4") for _ in range(4)]  # together
    for i, ip in enumerate(order):  # every hop between servers, the closing one too
        nxt = order[(i + 1) % len(order)]
        if where[ip][0] != where[nxt][0]:
            assert where[ip][1] == where[nxt][1], (i, ip, nxt)
    assert body["cross_rail_hops"] == []
    assert body["rail_groups"] == {
        str(r): [k for k, ip in enumerate(order) if where[ip][1] == r] for r in range(4)
    }
    assert all(len(ranks) == 4 for ranks in body["rail_groups"].values())


def test_a_fat_tree_falls_back_to_todays_order_and_says_why() -> None:
    g = fat_tree(4)
    per_edge: dict[str, list[str]] = {}
    for h in host_list(g):
        per_edge.setdefault(g.nodes[h]["switch"], []).append(h)
    servers = {f"srv-{edge}".replace("_", "-"): hosts for edge, hosts in per_edge.items()}
    sim = started(g, OPEN + servers_yaml(g, servers))
    ips = [g.nodes[h]["ip"] for h in host_list(g)][::-1]
    body = call(sim, "GET", "/loom/v1/order?hosts=" + ",".join(ips)).body
    assert body["rails"] == "not rail-optimized"
    assert body["hosts"] == rank_order(sim.core.topo, ips)[0]
    assert body["rail_reasons"][-1] == "the asked NICs' rails 0, 1 do not hold for these servers"
    assert "rail_groups" not in body and "cross_rail_hops" not in body
    plain = call(LoomSim(g).start(), "GET", "/loom/v1/order?hosts=" + ",".join(ips)).body
    assert plain["rails"] == "not declared" and plain["hosts"] == body["hosts"]
    assert plain["rail_reasons"] == ["the policy declares no servers"]


def test_the_exports_carry_the_rails(rails: tuple[nx.MultiGraph, LoomSim]) -> None:
    g, sim = rails
    where = cabled(g)
    hosts = call(sim, "GET", "/loom/v1/topology/hosts").body["hosts"]
    assert {h["ip"]: (h["server"], h["nic"]) for h in hosts} == where
    assert all(h["rail"] == h["nic"] for h in hosts)
    doc = yaml.safe_load(call(sim, "GET", "/loom/v1/topology/slurm-yaml").body["text"])
    rail_topology = next(t for t in doc if t["topology"] == "loom-rails")
    blocks = {b["block"]: b["nodes"] for b in rail_topology["block"]["blocks"]}
    assert sorted(blocks) == ["rail0", "rail1", "rail2", "rail3"]
    assert blocks["rail2"] == ",".join(sorted(ip for ip, (_, n) in where.items() if n == 2))
