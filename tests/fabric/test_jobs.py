"""Jobs through the REST API on the fake fabric: placed before the first byte, marked
with their class's DSCP and queue, on the planned path; bad requests refused; a deleted
job leaves no rule behind."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from controller.api import LoomApi, Response
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.model import CookieKind, StatsKind, StatsRequest
from controller.telemetry import poll_requests
from tests.sim import LoomSim
from topologies import fat_tree
from topologies.graph import host_list

TOKEN = "s3cret"


@pytest.fixture
def sim() -> LoomSim:
    return LoomSim(
        fat_tree(4), FabricConfig(link_capacity_mbps=10.0, te=TeConfig(enabled=False))
    ).start()


def call(
    sim: LoomSim, method: str, path: str, body: object = None, token: str | None = TOKEN
) -> Response:
    api = LoomApi(sim.core, lambda: sim.now, TOKEN)
    raw = b"" if body is None else json.dumps(body).encode()
    res = api.handle(method, path, {}, raw, f"Bearer {token}" if token else "")
    sim.apply(res.messages)
    return res


def ips(sim: LoomSim, names: list[str]) -> list[str]:
    return [sim.graph.nodes[h]["ip"] for h in names]


def job_rules(sim: LoomSim) -> int:
    return sum(
        1
        for s in sim.graph.nodes
        if sim.graph.nodes[s]["kind"] == "switch"
        for e in sim.fake.flows(sim.graph.nodes[s]["dpid"])
        if e.cookie >> 40 & 0xFF == CookieKind.JOB
    )


def test_ring_job_is_placed_marked_and_pinned(sim: LoomSim) -> None:
    order = host_list(sim.graph)
    random.Random(3).shuffle(order)
    res = call(
        sim,
        "POST",
        "/loom/v1/jobs",
        {"name": "llm", "tenant": "research", "hosts": ips(sim, order)},
    )
    assert res.status == 201, res.body
    assert res.body["status"] == "active" and len(res.body["paths"]) == 16
    used: Counter[tuple[str, str]] = Counter()
    acked: Counter[tuple[str, str]] = Counter()
    for i, src in enumerate(order):
        dst = order[(i + 1) % 16]
        trace = sim.fake.trace(
            src, sim.fake.packet(src, dst, ip_dscp=46)
        )  # hosts may not self-mark
        assert trace.ok_unicast(dst), trace.render()
        (branch,) = trace.branches  # pinned: one path, not an ECMP choice
        assert all(hop.packet["ip_dscp"] == 26 for hop in branch.hops)
        assert branch.hops[0].queue_id == 1  # the collective queue, from the ingress on
        used.update(zip(branch.path, branch.path[1:], strict=False))
        # the ACK direction: control class, ahead of any data (the ring's own included)
        back = sim.fake.trace(dst, sim.fake.packet(dst, src))
        assert all(hop.packet["ip_dscp"] == 48 for br in back.branches for hop in br.hops)
        assert all(br.hops[0].queue_id == 2 for br in back.branches)
        # ... on the way back of the hop's data: one path, the data's reversed
        (way,) = back.branches
        assert way.path == branch.path[::-1], (way.path, branch.path)
        acked.update(zip(way.path, way.path[1:], strict=False))
    fabric_links = {k: v for k, v in used.items() if not k[0].startswith("h")}
    assert max(fabric_links.values()) == 1  # no link carries two hops of the ring
    assert max(v for k, v in acked.items() if not k[0].startswith("h")) == 1  # nor their ACKs
    shown = call(sim, "GET", "/loom/v1/jobs/llm").body
    switch_of = {sim.graph.nodes[h]["ip"]: sim.graph.nodes[h]["switch"] for h in order}
    for p in shown["paths"]:  # each path runs from the sender's switch to the receiver's
        assert p["switches"][0] == switch_of[p["src"]] and p["switches"][-1] == switch_of[p["dst"]]


def test_unmarked_traffic_is_bulk_even_if_a_host_marks_it(sim: LoomSim) -> None:
    trace = sim.fake.trace("h1", sim.fake.packet("h1", "h16", ip_dscp=26))
    assert all(hop.packet["ip_dscp"] == 0 for br in trace.branches for hop in br.hops)


def test_delete_leaves_no_rule_behind(sim: LoomSim) -> None:
    call(
        sim,
        "POST",
        "/loom/v1/jobs",
        {"name": "a2a", "hosts": ips(sim, ["h1", "h6", "h11", "h16"]), "pattern": "all_to_all"},
    )
    assert job_rules(sim) > 12
    assert call(sim, "DELETE", "/loom/v1/jobs/a2a").status == 200
    assert job_rules(sim) == 0
    assert call(sim, "GET", "/loom/v1/jobs/a2a").status == 404
    assert sim.fake.reachability().ok


def test_job_waits_for_unknown_hosts_and_probes_for_them() -> None:
    sim = LoomSim(fat_tree(4), FabricConfig(te=TeConfig(enabled=False)))
    sim.connect_all()
    sim.advance(1.5)  # discovery only: no host has spoken yet
    res = call(
        sim, "POST", "/loom/v1/jobs", {"name": "early", "hosts": ips(sim, ["h1", "h2", "h9"])}
    )
    assert res.status == 201 and res.body["status"].startswith("waiting for hosts")
    # the controller's probes reached the hosts, which answered: the job is now placed
    assert call(sim, "GET", "/loom/v1/jobs/early").body["status"] == "active"


@pytest.mark.parametrize(
    ("method", "path", "body", "token", "status", "words"),
    [
        (
            "POST",
            "/loom/v1/jobs",
            {"name": "x", "hosts": ["10.0.0.2", "bad"]},
            TOKEN,
            400,
            "hosts[1]",
        ),
        ("POST", "/loom/v1/jobs", {"name": "x"}, TOKEN, 400, "hosts"),
        (
            "POST",
            "/loom/v1/jobs",
            {"name": "x", "hosts": ["10.0.0.2", "10.0.0.3"]},
            None,
            401,
            "Bearer",
        ),
        (
            "POST",
            "/loom/v1/jobs",
            {"name": "x", "hosts": ["10.0.0.2", "10.0.0.3"]},
            "wrong",
            401,
            "Bearer",
        ),
        ("DELETE", "/loom/v1/jobs/nope", None, TOKEN, 404, "no job named 'nope'"),
        ("GET", "/loom/v1/jobs/nope", None, TOKEN, 404, "no job"),
        ("PUT", "/loom/v1/jobs", None, TOKEN, 405, "use GET, POST"),
        ("GET", "/loom/v1/nothing", None, TOKEN, 404, "no such resource"),
    ],
)
def test_bad_requests_get_4xx_with_a_clear_message(
    sim: LoomSim, method: str, path: str, body: object, token: str | None, status: int, words: str
) -> None:
    res = call(sim, method, path, body, token)
    assert res.status == status and words in res.body["error"], res.body
    assert res.messages == {}


def test_duplicates_and_overlapping_jobs_conflict(sim: LoomSim) -> None:
    body = {"name": "one", "hosts": ips(sim, ["h1", "h2", "h3"])}
    assert call(sim, "POST", "/loom/v1/jobs", body).status == 201
    assert call(sim, "POST", "/loom/v1/jobs", body).status == 409
    again = call(
        sim, "POST", "/loom/v1/jobs", {"name": "two", "hosts": ips(sim, ["h1", "h2", "h5"])}
    )
    assert again.status == 409 and "already belongs to job 'one'" in again.body["error"]
    bad_json = LoomApi(sim.core, lambda: 0.0).handle("POST", "/loom/v1/jobs", {}, b"{nope")
    assert bad_json.status == 400 and "not JSON" in bad_json.body["error"]
    assert [j["name"] for j in call(sim, "GET", "/loom/v1/jobs").body["jobs"]] == ["one"]


def test_counters_are_polled_where_every_job_member_sends(sim: LoomSim) -> None:
    """An all-to-all is all job pairs and no tracked flow: its senders' edge switches are
    still polled for flow counters, or its bytes would read zero."""
    members = ["h1", "h6", "h11", "h16"]
    res = call(
        sim,
        "POST",
        "/loom/v1/jobs",
        {"name": "a2a", "tenant": "research", "hosts": ips(sim, members), "pattern": "all_to_all"},
    )
    assert res.status == 201, res.body
    assert not sim.view.flows
    topo = sim.core.topo
    polled_at = sim.core.sources.polled(topo)
    polled = {
        dpid
        for dpid, msgs in poll_requests(sorted(topo.switches), topo.edge_ports, polled_at).items()
        if any(isinstance(m, StatsRequest) and m.kind is StatsKind.FLOW for m in msgs)
    }
    edges = {sim.graph.nodes[sim.graph.nodes[h]["switch"]]["dpid"] for h in members}
    assert polled == edges
