"""Tokens with rights through the REST API on the fake fabric: two tenants (red, blue), an
admin token, a tenant token each and a reader. A tenant changes and reads its own jobs,
hosts and flows alone; a refused request changes nothing and names the right; a reload
swaps tokens at once and a bad one keeps them; every change and refusal is one audit line,
counted in the metrics."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.api import LoomApi, Response
from controller.audit import AuditTrail
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.metrics import LoomMetrics
from controller.policy.manager import PolicyManager
from tests.fabric.test_tenants import policy_text
from tests.sim import LoomSim
from topologies import fat_tree

ADMIN, RED, BLUE, GRAFANA = "admin-token", "red-token-1", "blue-token-1", "grafana-token"
TENANTS = {"red": range(1, 7), "blue": range(7, 13)}
WALL = 1_700_000_000.0


def digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def tokens_yaml(red: str = RED, anonymous: str | None = None) -> dict[str, str]:
    """Lines appended to each tenant's entry, and the access section."""
    access = f"access:\n  readers:\n    - {{name: grafana, digest: '{digest(GRAFANA)}'}}\n"
    if anonymous is not None:
        access += f"  anonymous: {anonymous}\n"
    return {
        "red": f"    tokens: [{{name: slurm, digest: '{digest(red)}'}}]",
        "blue": f"    tokens: [{{name: slurm, digest: '{digest(BLUE)}'}}]",
        "access": access,
    }


def write_policy(sim: LoomSim, path: Path, red: str = RED, anonymous: str | None = None) -> None:
    extra = tokens_yaml(red, anonymous)
    lines = []
    for line in policy_text(sim.graph, TENANTS).splitlines():
        lines.append(line)
        if line.startswith("  - name: "):
            lines.append(extra[line.split(": ")[1]])
    path.write_text("\n".join(lines) + "\n" + extra["access"])


class World:
    def __init__(self, tmp_path: Path, te: bool = False) -> None:
        config = FabricConfig(link_capacity_mbps=10.0, te=TeConfig(enabled=te))
        self.sim = LoomSim(fat_tree(4), config)
        self.file = tmp_path / "policy.yaml"
        write_policy(self.sim, self.file)
        self.policy = PolicyManager(self.sim.core, str(self.file))
        self.sim.apply(self.policy.reload(0.0))
        assert self.policy.status.ok, self.policy.status.errors
        self.sim.start()
        self.audit = AuditTrail(lambda: WALL)
        self.api = LoomApi(
            self.sim.core, lambda: self.sim.now, ADMIN, self.policy, audit=self.audit
        )

    def call(self, method: str, path: str, token: str | None, body: Any = None, **q: str) -> Any:
        raw = b"" if body is None else json.dumps(body).encode()
        auth = f"Bearer {token}" if token else ""
        res: Response = self.api.handle(method, f"/loom/v1/{path}", q, raw, auth)
        self.sim.apply(res.messages)
        return res

    def ips(self, *hosts: int) -> list[str]:
        return [str(self.sim.graph.nodes[f"h{i}"]["ip"]) for i in hosts]

    def job(self, name: str, tenant: str, *hosts: int) -> dict[str, Any]:
        return {"name": name, "tenant": tenant, "hosts": self.ips(*hosts)}


def as_unknown(world: World, method: str, path: str, res: Any) -> bool:
    """Whether ``res`` is what a job of no tenant's gets, but for the name."""
    unknown = world.call(method, path.replace("blue-llm", "no-such"), RED)
    said = json.dumps(unknown.body).replace("no-such", "blue-llm")
    return bool(res.status == unknown.status == 404 and json.dumps(res.body) == said)


@pytest.fixture
def world(tmp_path: Path) -> World:
    w = World(tmp_path)
    assert w.call("POST", "jobs", RED, w.job("red-llm", "red", 1, 2, 3)).status == 201
    assert w.call("POST", "jobs", BLUE, w.job("blue-llm", "blue", 7, 8)).status == 201
    return w


def test_a_tenant_token_cannot_touch_another_tenants_job(world: World) -> None:
    rules = world.sim.fake.flows
    before = {d: sorted(map(repr, rules(d))) for d in world.sim.core.topo.switches}
    for method, path in (("DELETE", "jobs/blue-llm"), ("POST", "jobs/blue-llm/renew")):
        res = world.call(method, path, RED)  # as if there were no such job, word for word
        assert as_unknown(world, method, path, res)
        assert res.body == {"error": "name: no job named 'blue-llm'", "field": "name"}, res.body
        assert not any(res.messages.values())
    res = world.call("DELETE", "jobs/blue-llm", GRAFANA)  # a reader sees it: may not change
    assert res.status == 403 and res.body["right"] == "jobs", res.body
    res = world.call("POST", "jobs", RED, world.job("sneaky", "blue", 9, 10))
    assert res.status == 403 and res.body["right"] == "jobs", res.body
    assert sorted(world.api.view.jobs) == ["blue-llm", "red-llm"]
    assert {d: sorted(map(repr, rules(d))) for d in world.sim.core.topo.switches} == before
    assert world.call("DELETE", "jobs/red-llm", RED).status == 200  # its own: yes
    assert world.call("DELETE", "jobs/blue-llm", ADMIN).status == 200  # the admin: any


def test_a_tenant_reads_its_own_jobs_and_hosts_alone(world: World) -> None:
    listed = world.call("GET", "jobs", RED).body["jobs"]
    assert [j["name"] for j in listed] == ["red-llm"]
    assert world.call("GET", "jobs/red-llm", RED).status == 200
    for path in ("jobs/blue-llm", "jobs/blue-llm/order"):  # as if there were none
        assert as_unknown(world, "GET", path, world.call("GET", path, RED))
    hosts = world.call("GET", "topology/hosts", RED).body
    assert sorted(h["ip"] for h in hosts["hosts"]) == sorted(world.ips(*TENANTS["red"]))
    leaves = {leaf["name"] for b in hosts["blocks"] for leaf in b["leaves"]}
    assert leaves == {h["leaf"] for h in hosts["hosts"]}
    every = world.call("GET", "topology/hosts", GRAFANA).body
    assert len(every["hosts"]) == 12
    for path in ("topology", "topology/slurm-conf", "policy", "cluster"):
        res = world.call("GET", path, RED)
        assert res.status == 403 and res.body["right"] == "read", (path, res.body)
    assert world.call("GET", "order", RED, hosts=",".join(world.ips(1, 4))).status == 200
    res = world.call("GET", "order", RED, hosts=",".join(world.ips(1, 9)))
    assert res.status == 403 and res.body["right"] == "read" and "tenant" not in res.body
    mac = str(world.sim.graph.nodes["h9"]["mac"])
    theirs = world.call("GET", "routes", RED, mac=mac)
    assert theirs.status == 403 and world.call("GET", "routes", BLUE, mac=mac).status == 200
    unknown = world.call("GET", "routes", RED, mac="02:00:00:00:99:99")  # the same: no hint
    assert (unknown.status, unknown.body) == (403, {**theirs.body, "error": unknown.body["error"]})
    assert unknown.body["error"] == theirs.body["error"].replace(mac, "02:00:00:00:99:99")
    assert world.call("GET", "health", RED).body["jobs"] == 2


def test_a_tenant_sees_its_own_flows_alone(tmp_path: Path) -> None:
    world = World(tmp_path, te=True)
    world.sim.start_flow("h1", "h5", 40001, mbps=9)  # red
    world.sim.start_flow("h7", "h11", 40002, mbps=9)  # blue
    world.sim.advance(2.0)
    every = world.call("GET", "flows", ADMIN).body
    red = world.call("GET", "flows", RED).body
    ports = {f["flow"].split("->")[0].rsplit(":", 1)[1] for f in every["flows"]}
    assert {"40001", "40002"} <= ports, every["flows"]
    seen = {f["flow"].split("->")[0].rsplit(":", 1)[1] for f in red["flows"]}
    assert "40001" in seen and "40002" not in seen, red["flows"]
    assert red["reroutes"] == {}


def test_a_reader_reads_everything_and_changes_nothing(world: World) -> None:
    assert len(world.call("GET", "jobs", GRAFANA).body["jobs"]) == 2
    assert world.call("GET", "policy", GRAFANA).status == 200
    for method, path in (("DELETE", "jobs/red-llm"), ("POST", "policy/reload")):
        res = world.call(method, path, GRAFANA)
        assert res.status == 403 and "reader:grafana" in res.body["error"], res.body
    res = world.call("POST", "jobs", GRAFANA, world.job("x", "red", 4, 5))
    assert res.status == 403 and sorted(world.api.view.jobs) == ["blue-llm", "red-llm"]


def test_without_a_token_only_health_once_the_policy_declares_tokens(world: World) -> None:
    assert world.call("GET", "health", None).status == 200
    for path in ("jobs", "topology", "flows"):
        res = world.call("GET", path, None)
        assert res.status == 401 and res.body["right"] == "read", res.body
    res = world.call("DELETE", "jobs/red-llm", None)
    assert res.status == 401 and "Authorization: Bearer" in res.body["error"]
    res = world.call("GET", "jobs", "red-token-2")  # a token nobody declared
    assert res.status == 401 and res.body["right"] == "token", res.body
    write_policy(world.sim, world.file, anonymous="read")
    assert world.call("POST", "policy/reload", ADMIN).status == 200
    assert world.call("GET", "jobs", None).status == 200


def test_only_the_admin_reloads_and_a_reload_swaps_tokens_at_once(world: World) -> None:
    assert world.call("POST", "policy/reload", RED).status == 403
    write_policy(world.sim, world.file, red="red-token-2")
    assert world.call("POST", "policy/reload", ADMIN).status == 200
    assert world.call("GET", "jobs", RED).status == 401  # the old token: gone
    assert world.call("GET", "jobs", "red-token-2").status == 200
    world.file.write_text(world.file.read_text().replace(digest("red-token-2"), "sha256:zz"))
    res = world.call("POST", "policy/reload", ADMIN)
    assert res.status == 422 and "never the token" in " ".join(res.body["errors"]), res.body
    assert world.call("GET", "jobs", "red-token-2").status == 200  # kept
    assert world.call("GET", "jobs", BLUE).status == 200


def test_every_change_and_refusal_is_one_audit_line_and_counted(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = LoomMetrics(world.sim.core, CollectorRegistry())
    metrics.collector.audit = world.audit
    with caplog.at_level(logging.INFO, logger="loom.audit"):
        world.call("DELETE", "jobs/blue-llm", RED)
        world.call("DELETE", "jobs/red-llm", RED)
        world.call("GET", "jobs", RED)  # a read allowed: not audited
        world.call("GET", "jobs", "bad-token")
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "loom.audit"]
    assert lines == [
        {
            "time": WALL,
            "who": "tenant:red/slurm",
            "role": "tenant",
            "tenant": "red",
            "method": "DELETE",
            "path": "/loom/v1/jobs/blue-llm",
            "action": "job_delete",
            "status": 404,
            "job": "blue-llm",
            "target_tenant": "blue",
            "right": "jobs",
        },
        {
            "time": WALL,
            "who": "tenant:red/slurm",
            "role": "tenant",
            "tenant": "red",
            "method": "DELETE",
            "path": "/loom/v1/jobs/red-llm",
            "action": "job_delete",
            "status": 200,
            "job": "red-llm",
        },
        {
            "time": WALL,
            "who": "unknown",
            "role": "unknown",
            "tenant": None,
            "method": "GET",
            "path": "/loom/v1/jobs",
            "action": "read",
            "status": 401,
            "right": "token",
        },
    ]
    assert all(t not in caplog.text for t in (RED, "bad-token", ADMIN))
    sample = metrics.registry.get_sample_value
    assert sample("loom_api_changes_total", {"action": "job_create", "outcome": "ok"}) == 2
    assert sample("loom_api_changes_total", {"action": "job_delete", "outcome": "ok"}) == 1
    assert sample("loom_api_changes_total", {"action": "job_delete", "outcome": "denied"}) == 1
    assert sample("loom_api_denied_total", {"role": "tenant", "right": "jobs"}) == 1
    assert sample("loom_api_denied_total", {"role": "unknown", "right": "token"}) == 1


def test_with_no_token_anywhere_the_api_is_open_as_before(tmp_path: Path) -> None:
    sim = LoomSim(fat_tree(4), FabricConfig(te=TeConfig(enabled=False))).start()
    api = LoomApi(sim.core, lambda: sim.now)
    hosts = [str(sim.graph.nodes[h]["ip"]) for h in ("h1", "h2")]
    body = json.dumps({"name": "j", "hosts": hosts}).encode()
    assert api.handle("POST", "/loom/v1/jobs", {}, body, "Bearer whatever").status == 201
    assert api.handle("GET", "/loom/v1/topology", {}).status == 200
    assert api.handle("DELETE", "/loom/v1/jobs/j", {}).status == 200
