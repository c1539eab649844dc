"""Rail-aware rank order and rails for schedulers through the REST API on the fake fabric.

On ``rail_optimized(servers=4, nics=4, spines=2)`` with its servers declared, ``GET order``
keeps each server's ranks together and every hop between servers on one rail (checked
against the generator's cabling) and says which ranks share each rail; on a fat-tree
whose servers do not sit on rails it answers today's order and says why. A job may name
its hosts ``server:NIC``, resolved to IPs when it is registered. The exports carry the
rails."""

from __future__ import annotations

import json
import random
from collections import Counter

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


def test_a_job_may_name_its_hosts_server_nic(rails: tuple[nx.MultiGraph, LoomSim]) -> None:
    g, sim = rails
    where = cabled(g)
    ip_of = {v: k for k, v in where.items()}
    hosts = ["s2:1", "s1:0", ip_of[("s3", 2)], "s4:3"]
    res = call(sim, "POST", "/loom/v1/jobs", {"name": "r", "tenant": "train", "hosts": hosts})
    assert res.status == 201, res.body
    resolved = [ip_of[("s2", 1)], ip_of[("s1", 0)], ip_of[("s3", 2)], ip_of[("s4", 3)]]
    assert res.body["hosts"] == resolved
    advice = call(sim, "GET", "/loom/v1/jobs/r/order").body
    assert advice["name"] == "r" and advice["rails"] == "used"
    assert [where[ip][0] for ip in advice["hosts"]] == ["s1", "s2", "s3", "s4"]
    assert advice["cross_rail_hops"] == [0, 1, 2, 3]  # one NIC each, all on different rails
    assert call(sim, "DELETE", "/loom/v1/jobs/r").status == 200


class Store:
    """Stands in for a cluster's shared store: keeps what the API publishes."""

    token_digest = None

    def __init__(self) -> None:
        self.published: dict[str, bytes] = {}
        self.leases: dict[str, float] = {}

    def publish_job(self, name: str, body: bytes, lease: float | None = None) -> int:
        self.published[name] = body
        return 1

    def withdraw_job(self, name: str) -> None:
        self.published.pop(name, None)


def test_a_cluster_stores_the_job_with_the_nics_resolved(
    rails: tuple[nx.MultiGraph, LoomSim],
) -> None:
    """Other instances apply the stored body: it holds IPs, as this instance resolved them."""
    g, sim = rails
    ip_of = {v: k for k, v in cabled(g).items()}
    store = Store()
    api = LoomApi(sim.core, lambda: sim.now, shared=store)  # type: ignore[arg-type]
    job = {"name": "c", "tenant": "train", "hosts": ["s1:2", "s2:2"], "lease_seconds": 30}
    res = api.handle("POST", "/loom/v1/jobs", {}, json.dumps(job).encode())
    assert res.status == 201, res.body
    sim.apply(res.messages)
    stored = json.loads(store.published["c"])
    assert stored == {**job, "hosts": [ip_of[("s1", 2)], ip_of[("s2", 2)]]}
    assert call(sim, "DELETE", "/loom/v1/jobs/c").status == 200


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("s9:0", "'s9:0': no server named 's9'; servers include s1, s2, s3, s4"),
        ("s1:4", "'s1:4': server s1 has NICs 0 to 3, not 4"),
        ("s1:x", "'s1:x': expected server:NIC with NIC a number (e.g. gpu3:5)"),
        ("s1:", "'s1:': expected server:NIC with NIC a number (e.g. gpu3:5)"),
    ],
)
def test_a_bad_server_nic_is_refused_naming_the_entry(
    rails: tuple[nx.MultiGraph, LoomSim], entry: str, message: str
) -> None:
    _, sim = rails
    body = {"name": "bad", "tenant": "train", "hosts": ["s1:1", entry]}
    res = call(sim, "POST", "/loom/v1/jobs", body)
    assert res.status == 400 and res.body["field"] == "hosts[1]", res.body
    assert res.body["error"] == f"hosts[1]: {message}"
    assert "bad" not in sim.view.jobs


def test_a_nic_not_learned_yet_or_no_servers_is_refused() -> None:
    g = rail_optimized(servers=2, nics=2, spines=1)
    text = (
        tenant_yaml(g, "10.101.9.9")
        + servers_yaml(g, rail_servers(g))
        + ('  - name: s3\n    nics: [{mac: "02:00:00:00:00:99"}, {ip: 10.101.9.9}]\n')
    )
    sim = started(g, text)
    res = call(
        sim, "POST", "/loom/v1/jobs", {"name": "j", "tenant": "train", "hosts": ["s1:0", "s3:0"]}
    )
    assert res.status == 400 and res.body["field"] == "hosts[1]"
    assert "NIC 0 of server s3 (02:00:00:00:00:99) is not learned yet" in res.body["error"]
    job = {"name": "j", "tenant": "train", "hosts": ["s1:0", "s3:1"]}
    declared = call(sim, "POST", "/loom/v1/jobs", job)
    assert declared.status == 201 and declared.body["hosts"][1] == "10.101.9.9"  # as declared
    bare = LoomSim(g).start()
    res = call(bare, "POST", "/loom/v1/jobs", {"name": "j", "hosts": ["10.100.1.2", "s1:1"]})
    assert res.status == 400 and res.body["field"] == "hosts[1]"
    assert "the policy declares no servers" in res.body["error"]


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


def test_jobs_keep_same_rail_hops_on_their_leaf_and_spread_the_rest_over_the_spines(
    rails: tuple[nx.MultiGraph, LoomSim],
) -> None:
    """In Loom's order, every hop between servers stays on its rail's leaf, and hops
    between NICs of one server get no path (they talk inside the server); in the plain
    order, the hops that must cross rails leave each leaf evenly over its spine uplinks."""
    g, sim = rails
    where = cabled(g)
    plain = sorted(where, key=lambda ip: where[ip])  # s1 NIC 0..3, s2 NIC 0..3, ...
    aware = call(sim, "GET", "/loom/v1/order?hosts=" + ",".join(plain)).body["hosts"]
    for name, hosts in (("aware", aware), ("plain", plain)):
        res = call(sim, "POST", "/loom/v1/jobs", {"name": name, "tenant": "train", "hosts": hosts})
        assert res.status == 201 and res.body["status"] == "active", res.body
        paths = res.body["paths"]
        between = [
            (a, b)
            for a, b in zip(hosts, hosts[1:] + hosts[:1], strict=True)
            if where[a][0] != where[b][0]
        ]
        assert sorted((p["src"], p["dst"]) for p in paths) == sorted(between)
        if name == "aware":
            assert all(len(p["switches"]) == 1 for p in paths), paths  # on the rail's leaf
        else:
            uplinks = Counter((p["switches"][0], p["switches"][1]) for p in paths)
            per_leaf = Counter(leaf for leaf, _ in uplinks.elements())
            for (leaf, _), n in uplinks.items():
                assert n <= -(-per_leaf[leaf] // 2), uplinks  # two spines: half each at most
        assert call(sim, "DELETE", f"/loom/v1/jobs/{name}").status in (200, 204)
