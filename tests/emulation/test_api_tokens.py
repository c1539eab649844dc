"""Tokens with rights through the controller a user starts, over real switches.

``ryu-manager controller/app.py`` with an admin token and a policy that gives two tenants
a token each: a tenant registers its own job, the other tenant's token cannot delete or
renew it (the 404 of a name no job has: it learns nothing of the job; the switches' rules
untouched) nor register one for the other tenant (403 naming the right), sees only its own
jobs, and every refusal is one audit line in the controller's log and counted in
metrics."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from mininet_scenarios.harness.client import LabClient, LoomApiError
from mininet_scenarios.harness.metrics import sample, scrape
from mininet_scenarios.harness.ovs import sh
from mininet_scenarios.harness.stack import LoomStack
from tests.emulation.conftest import tree_graph

pytestmark = pytest.mark.emulation
PREFIX = "hk"
ADMIN, BLUE, RED = "admin-secret", "blue-secret", "red-secret"
JOBS = "/loom/v1/jobs"


def digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def policy(path: Path) -> Path:
    """Blue has the hosts of the first edge switch, red the other two; a token each."""
    tenants = {"blue": (BLUE, ["10.0.0.1", "10.0.0.2"]), "red": (RED, ["10.0.0.3", "10.0.0.4"])}
    lines = ["version: 1", "fabric: {unassigned_hosts: deny}", "tenants:"]
    for name, (token, ips) in tenants.items():
        lines += [f"  - name: {name}", "    hosts:"]
        lines += [f"      - {{ip: {ip}}}" for ip in ips]
        lines += [f"    tokens: [{{name: ci, digest: '{digest(token)}'}}]"]
    path.write_text("\n".join(lines) + "\n")
    return path


def refusal(call: Any) -> LoomApiError:
    with pytest.raises(LoomApiError) as err:
        call()
    return err.value


def rules(graph: Any) -> dict[str, list[str]]:
    """Every switch's rules, without their counters."""
    out = {}
    for name, data in sorted(graph.nodes(data=True)):
        if data["kind"] == "switch":
            dump = sh(["ovs-ofctl", "-O", "OpenFlow13", "--no-stats", "dump-flows", name])
            out[name] = sorted(line.strip() for line in dump.splitlines()[1:])
    return out


def settled(graph: Any, timeout: float = 30.0) -> dict[str, list[str]]:
    """The rules once two dumps a second apart agree (discovery may still be writing)."""
    last, deadline = rules(graph), time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = rules(graph)
        if now == last:
            return now
        last = now
    raise TimeoutError("the switches' rules kept changing")


def test_a_tenant_token_cannot_delete_another_tenants_job(run_dir: Path) -> None:
    graph = tree_graph(PREFIX)
    env = {"LOOM_API_TOKEN": ADMIN, "LOOM_POLICY": str(policy(run_dir / "policy.yaml"))}
    with LoomStack(graph, run_dir, env=env, shape=False) as stack:
        base = stack.api.base_url
        blue, red = LabClient(base, BLUE), LabClient(base, RED)
        job = {"name": "blue-train", "tenant": "blue", "hosts": ["10.0.0.1", "10.0.0.2"]}
        assert blue.request("POST", JOBS, job)["name"] == "blue-train"
        before = settled(graph)
        for method, path in (("DELETE", "/blue-train"), ("POST", "/blue-train/renew")):
            err = refusal(lambda m=method, p=path: red.request(m, JOBS + p))
            assert err.status == 404 and "right" not in err.body, err.body
        err = refusal(lambda: red.request("POST", JOBS, {**job, "name": "sneaky"}))
        assert err.status == 403 and err.body["right"] == "jobs", err.body
        assert refusal(lambda: LabClient(base).get(JOBS)).status == 401
        assert settled(graph) == before
        assert [j["name"] for j in LabClient(base, ADMIN).get(JOBS)["jobs"]] == ["blue-train"]
        assert red.get(JOBS)["jobs"] == []
        metrics = scrape(stack.metrics_url)
        denied = sample(metrics, "loom_api_denied_total", role="tenant", right="jobs")
        assert denied == 3
        assert blue.request("DELETE", JOBS + "/blue-train")["deleted"] == "blue-train"
        log = stack.controller_log()
    audit = [json.loads(line[line.index("{") :]) for line in log.splitlines() if '"who"' in line]
    refused = [a for a in audit if a.get("right") == "jobs"]
    assert len(refused) == 3 and all(a["who"] == "tenant:red/ci" for a in refused), refused
    assert {(a["who"], a["status"]) for a in audit if a["method"] == "DELETE"} == {
        ("tenant:red/ci", 404),
        ("tenant:blue/ci", 200),
    }
