"""What a running job gets besides its paths, through the REST API on the fake fabric: a
lease (a job posted with ``lease_seconds`` lives while renewed and takes its rules with it
when not: a launcher that died), its health (busbw from its counters, the link that limits
it, who shares that link), rank-order advice and the fabric exported for schedulers."""

from __future__ import annotations

import json

import pytest

from controller.api import LoomApi, Response
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.model import CookieKind, PortStats
from tests.sim import LoomSim
from topologies import fat_tree
from topologies.graph import host_list

TOKEN = "s3cret"


@pytest.fixture
def sim() -> LoomSim:
    return LoomSim(
        fat_tree(4), FabricConfig(link_capacity_mbps=10.0, te=TeConfig(enabled=False))
    ).start()


def call(sim: LoomSim, method: str, path: str, body: object = None) -> Response:
    api = LoomApi(sim.core, lambda: sim.now, TOKEN)
    raw = b"" if body is None else json.dumps(body).encode()
    path, _, query = path.partition("?")
    args = dict(kv.split("=", 1) for kv in query.split("&") if kv)
    res = api.handle(method, path, args, raw, f"Bearer {TOKEN}")
    sim.apply(res.messages)
    return res


def job_rules(sim: LoomSim) -> int:
    return sum(
        1
        for n, d in sim.graph.nodes(data=True)
        if d["kind"] == "switch"
        for e in sim.fake.flows(d["dpid"])
        if e.cookie >> 40 & 0xFF == CookieKind.JOB
    )


def ring(sim: LoomSim, lease: object) -> dict[str, object]:
    hosts = [sim.graph.nodes[h]["ip"] for h in host_list(sim.graph)[:4]]
    return {"name": "leased", "tenant": "t", "hosts": hosts, "lease_seconds": lease}


def test_a_leased_job_lives_while_renewed_and_expires_with_its_rules(sim: LoomSim) -> None:
    res = call(sim, "POST", "/loom/v1/jobs", ring(sim, 5))
    assert res.status == 201, res.body
    assert res.body["status"] == "active"
    assert res.body["lease_seconds"] == 5.0 and res.body["expires_in"] == 5.0
    assert job_rules(sim) > 0
    for _ in range(4):  # 12 s in all, renewed every 3 s: kept
        sim.advance(3.0)
        renewed = call(sim, "POST", "/loom/v1/jobs/leased/renew")
        assert renewed.status == 200 and renewed.body["expires_in"] == 5.0, renewed.body
    assert call(sim, "GET", "/loom/v1/jobs/leased").status == 200
    sim.advance(4.0)
    assert call(sim, "GET", "/loom/v1/jobs/leased").body["expires_in"] == pytest.approx(
        1.0, abs=0.2
    )
    sim.advance(2.0)  # not renewed: gone, and so are its rules
    assert call(sim, "GET", "/loom/v1/jobs/leased").status == 404
    assert job_rules(sim) == 0
    assert call(sim, "POST", "/loom/v1/jobs/leased/renew").status == 404


def test_a_job_without_a_lease_stays_and_cannot_be_renewed(sim: LoomSim) -> None:
    body = ring(sim, None)
    assert call(sim, "POST", "/loom/v1/jobs", body).status == 201
    sim.advance(30.0)
    shown = call(sim, "GET", "/loom/v1/jobs/leased")
    assert shown.status == 200 and "expires_in" not in shown.body
    refused = call(sim, "POST", "/loom/v1/jobs/leased/renew")
    assert refused.status == 409 and "no lease" in refused.body["error"]


@pytest.mark.parametrize(
    ("lease", "words"),
    [
        (0, "expected 1 to 86400"),
        (1e9, "expected 1 to 86400"),
        ("30", "not a number"),
        (True, "not a number"),
    ],
)
def test_bad_leases_are_refused_naming_the_key(sim: LoomSim, lease: object, words: str) -> None:
    res = call(sim, "POST", "/loom/v1/jobs", ring(sim, lease))
    assert res.status == 400 and res.body["field"] == "lease_seconds", res.body
    assert words in res.body["error"]
    assert call(sim, "GET", "/loom/v1/jobs/leased").status == 404
    assert job_rules(sim) == 0


def test_sub_resources_answer_405_and_404_as_the_others(sim: LoomSim) -> None:
    assert call(sim, "POST", "/loom/v1/jobs", ring(sim, 60)).status == 201
    assert call(sim, "GET", "/loom/v1/jobs/leased/renew").status == 405
    assert call(sim, "POST", "/loom/v1/jobs/leased/nothing").status == 404
    assert call(sim, "GET", "/loom/v1/jobs/leased/order/extra").status == 404


def test_a_jobs_health_estimates_busbw_and_names_its_limit_and_sharers(sim: LoomSim) -> None:
    """Ring A sends 6 Mbit/s on each hop; job B also sends into A's receiver h2 (B's
    pair h5 -> h2 at 3 Mbit/s), so h2's own link is the busiest A crosses (9 of 10)."""
    names = host_list(sim.graph)
    ip = {h: sim.graph.nodes[h]["ip"] for h in names}
    a, b = names[:4], [names[4], names[1], names[6]]
    assert (
        call(sim, "POST", "/loom/v1/jobs", {"name": "a", "hosts": [ip[h] for h in a]}).status == 201
    )
    body = {"name": "b", "hosts": [ip[h] for h in b], "pattern": "all_to_all"}
    assert call(sim, "POST", "/loom/v1/jobs", body).status == 201
    for i, h in enumerate(a):
        sim.start_flow(h, a[(i + 1) % 4], 40000 + i, 6.0)
    sim.start_flow(b[0], b[1], 41000, 3.0)
    host = sim.core.topo.host_by_ip(ip[a[1]])
    assert host is not None
    sent = 0  # (the fake fabric does not model port counters: h2's link load comes from here)
    for _ in range(30):
        sim.advance(0.2)
        sent += int(9e6 / 8 * 0.2)
        sim.core.port_stats(sim.now, host.dpid, [PortStats(host.port, tx_bytes=sent)])
    health = call(sim, "GET", "/loom/v1/jobs/a").body["health"]
    assert health["busbw_mbps"] == pytest.approx(6.0, rel=0.05)
    assert health["limiting_link"]["to"] == ip[a[1]]
    assert health["limiting_link_utilization"] == pytest.approx(0.9, abs=0.05)
    assert health["sharing_jobs"] == ["b"]
    idle = call(sim, "GET", "/loom/v1/jobs/b").body["health"]
    assert idle["busbw_mbps"] == 0.0  # the median rank of b sends nothing


def test_order_advice_groups_a_shuffled_job_by_leaf_and_pod(sim: LoomSim) -> None:
    names = host_list(sim.graph)
    ip = {h: sim.graph.nodes[h]["ip"] for h in names}
    shuffled = [ip[h] for h in ("h9", "h2", "h14", "h1", "h10", "h13")]
    res = call(sim, "GET", "/loom/v1/order?hosts=" + ",".join([*shuffled, "10.9.9.9"]))
    assert res.status == 200, res.body
    assert res.body["hosts"][:6] == [ip[h] for h in ("h1", "h2", "h9", "h10", "h13", "h14")]
    assert res.body["unknown"] == ["10.9.9.9"] and res.body["hosts"][-1] == "10.9.9.9"
    body = {"name": "j", "hosts": shuffled}
    assert call(sim, "POST", "/loom/v1/jobs", body).status == 201
    advice = call(sim, "GET", "/loom/v1/jobs/j/order").body
    assert advice["name"] == "j" and advice["hosts"] == res.body["hosts"][:6]
    assert call(sim, "GET", "/loom/v1/jobs/none/order").status == 404
    bad = call(sim, "GET", "/loom/v1/order?hosts=10.0.0.2,h1")
    assert bad.status == 400 and bad.body["field"] == "hosts"


def test_exports_describe_the_learned_fabric_for_schedulers(sim: LoomSim) -> None:
    hosts = call(sim, "GET", "/loom/v1/topology/hosts")
    assert hosts.status == 200 and len(hosts.body["hosts"]) == 16
    conf = call(sim, "GET", "/loom/v1/topology/slurm-conf").body["text"]
    leaves = [ln for ln in conf.splitlines() if ln.startswith("SwitchName=e")]
    assert len(leaves) == 8 and all("Nodes=" in ln for ln in leaves)
    assert "SwitchName=fabric" in conf
    yaml_text = call(sim, "GET", "/loom/v1/topology/slurm-yaml").body["text"]
    assert "block" in yaml_text
    missing = call(sim, "GET", "/loom/v1/topology/nothing")
    assert missing.status == 404 and "slurm-conf" in missing.body["error"]
