"""Hostile REST requests on the fake fabric: each gets a 4xx that names the field, in
well under a second, and changes nothing (no job, no rule, no message)."""

from __future__ import annotations

import json
import time

import pytest

from controller.api import MAX_BODY_BYTES, LoomApi, Response
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.jobspec import MAX_ALL_TO_ALL_RANKS, MAX_RANKS
from tests.sim import LoomSim
from topologies import fat_tree

TOKEN = "s3cret"
OK_HOSTS = '["10.0.0.2", "10.0.0.3"]'


@pytest.fixture(scope="module")
def sim() -> LoomSim:
    return LoomSim(fat_tree(4), FabricConfig(te=TeConfig(enabled=False))).start()


def rules(sim: LoomSim) -> int:
    return sum(len(sim.fake.flows(d["dpid"])) for _, d in sim.graph.nodes(data=True) if "dpid" in d)


def post(sim: LoomSim, body: bytes, auth: str = f"Bearer {TOKEN}") -> Response:
    before = (dict(sim.view.jobs), rules(sim))
    started = time.perf_counter()
    res = LoomApi(sim.core, lambda: sim.now, TOKEN).handle("POST", "/loom/v1/jobs", {}, body, auth)
    assert time.perf_counter() - started < 1.0
    assert 400 <= res.status < 500 and res.messages == {}, res.body
    assert (dict(sim.view.jobs), rules(sim)) == before
    json.dumps(res.body)  # answerable as JSON, whatever it echoes
    return res


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (b"{nope", "body", "not JSON"),
        (b'{"name": "a", "name": "b", "hosts": ' + OK_HOSTS.encode() + b"}", "name", "twice"),
        (b'{"name": "a", "hosts": [NaN, 1]}', "body", "NaN is not a JSON number"),
        (b'{"name": "a", "hosts": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "body", "nested"),
        (b'{"name": "\xff"}', "body", "not UTF-8: byte offset 10"),
        (b'{"name": "a", "hosts": [' + b"1" * 5000 + b"]}", "body", "not JSON"),
        (b'{"name": "a\\ud800", "hosts": ' + OK_HOSTS.encode() + b"}", "name", "not a job name"),
        (
            b'{"name": "x", "hosts": '
            + OK_HOSTS.encode()
            + b', "tenant": "'
            + b"t" * 10**5
            + b'"}',
            "tenant",
            "not a tenant name",
        ),
        (b'{"name": "x", "hosts": ["10.0.0.2", "10.0.0.2"]}', "hosts", "more than once"),
        (b'{"name": "x", "hosts": ["10.0.0.2", {"a": 1}]}', "hosts[1]", "not an IPv4"),
        (b'{"name": "x", "hosts": ' + OK_HOSTS.encode() + b', "\\u202e": 1}', "\u202e", "unknown"),
        (b"[]", "body", "expected a JSON object"),
        (b"", "body", "expected a JSON object"),
    ],
)
def test_malformed_bodies_name_the_field(sim: LoomSim, body: bytes, field: str, words: str) -> None:
    res = post(sim, body)
    assert res.status == 400 and res.body["field"] == field and words in res.body["error"]
    assert len(res.body["error"]) < 300


@pytest.mark.parametrize(
    ("pattern", "n", "limit"),
    [("ring", 10**6, MAX_RANKS), ("all_to_all", 300, MAX_ALL_TO_ALL_RANKS)],
)
def test_absurd_jobs_are_refused_quickly(sim: LoomSim, pattern: str, n: int, limit: int) -> None:
    hosts = [f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}" for i in range(n)]
    body = json.dumps({"name": "big", "pattern": pattern, "hosts": hosts}).encode()
    if len(body) > MAX_BODY_BYTES:
        assert post(sim, body).status == 413
        body = json.dumps({"name": "big", "pattern": pattern, "hosts": hosts[:5000]}).encode()
    res = post(sim, body)
    assert res.body["field"] == "hosts" and f"2 to {limit} host" in res.body["error"]


def test_a_body_over_the_limit_is_refused_before_it_is_read(sim: LoomSim) -> None:
    res = post(sim, b" " * (MAX_BODY_BYTES + 1))
    assert res.status == 413 and res.body["field"] == "body"


@pytest.mark.parametrize(
    "auth", ["", "Bearer wrong", "Bearer s3cr\u00e9t", "Bearer \udc80", "x" * 10**5]
)
def test_odd_credentials_are_refused_not_crashed(sim: LoomSim, auth: str) -> None:
    body = json.dumps({"name": "a", "hosts": ["10.0.0.2", "10.0.0.3"]}).encode()
    assert post(sim, body, auth).status == 401


def test_odd_paths_and_methods_get_4xx(sim: LoomSim) -> None:
    api = LoomApi(sim.core, lambda: sim.now)
    for method, path in [
        ("GET", "/loom/v1/" + "x" * 100_000),
        ("BREW", "/loom/v1/jobs"),
        ("GET", "/loom/v1/jobs/\u0000\ud800"),
        ("DELETE", "/loom/v1/jobs/" + "n" * 10_000),
        ("POST", "/loom/v1/policy/nothing"),
        ("GET", "/../../etc/passwd"),
    ]:
        res = api.handle(method, path, {"mac": "\udcff" * 1000})
        assert 400 <= res.status < 500 and len(res.body["error"]) < 300, (method, res.body)
