"""``docs/openapi.yaml`` against the live API. The document is valid OpenAPI 3.1 and names
every call ``LoomApi`` routes and no other; then the API is served as a user meets it
(Ryu's WSGI server on loopback) over a learned rail-optimized fabric with a policy, and
one request per documented operation and status (errors included) is sent over HTTP: each
answer's status must be documented for its operation and its body valid against that
status's schema. A change the document would not describe fails here, not in a client."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
import yaml
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from controller.access import digest_of
from controller.api import MAX_BODY_BYTES, LoomApi
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.metrics import ShimCounts
from controller.policy.manager import PolicyManager
from tests.fabric.test_rails_api import rail_servers, servers_yaml
from tests.restserver import ShimApp, serving
from tests.sim import LoomSim
from tests.unit.test_docs import the_apis_calls
from topologies import rail_optimized
from topologies.graph import host_list

pytest.importorskip("ryu.app.wsgi")

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"
DOC: dict[str, Any] = yaml.safe_load(DOC_PATH.read_text())
URI = "urn:loom:openapi"
REGISTRY: Registry[Any] = Registry().with_resource(URI, DRAFT202012.create_resource(DOC))
BASE = "/loom/v1"
TOKEN = "s3cret"
OTHER = "ops-token"  # a token of tenant ``ops``, which has none of the fabric's hosts
READER = "dash-token"  # a reader's token: every GET, no change
METHODS = ("get", "post", "put", "delete")
UNEXERCISED = {503: "needs a cluster whose etcd lost quorum: tests/cluster and the emulation"}


@dataclass(frozen=True)
class Case:
    """One request: the documented operation (method, path) it is an instance of, the
    status it must get, and what it sends; ``api`` picks the server, ``before`` runs first."""

    method: str
    doc_path: str
    status: int
    path: str | None = None  # the documented path, filled in; None: ``doc_path`` as is
    query: dict[str, str] = field(default_factory=dict)
    body: Any = None  # JSON-able, or raw bytes
    token: bool | str = True  # True: the admin's; a string: that token
    api: str = "main"
    before: Callable[[World], None] | None = None
    label: str = ""  # tells apart cases of one operation and status

    @property
    def ident(self) -> str:
        ident = f"{self.method.upper()} {self.path or self.doc_path} {self.status}"
        return f"{ident} ({self.label})" if self.label else ident


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    body: Any


class World:
    """Two GPU servers of two NICs on a one-spine rail-optimized fabric, learned, with a
    policy (one tenant, the servers) on disk; one elephant-sized flow tracked."""

    def __init__(self, directory: Path) -> None:
        g = rail_optimized(servers=2, nics=2, spines=1)
        self.ips = [str(g.nodes[h]["ip"]) for h in host_list(g)]
        self.mac = str(g.nodes[host_list(g)[0]]["mac"])
        members = ", ".join(f"{{ip: {ip}}}" for ip in self.ips)
        ops = f"{{name: ci, digest: 'sha256:{digest_of(OTHER)}'}}"
        self.policy_text = (
            "fabric: {unassigned_hosts: allow}\ntenants:\n  - name: research\n"
            f"    hosts: [{members}]\n"
            f"  - name: ops\n    hosts: [{{ip: 10.8.8.8}}]\n    tokens: [{ops}]\n"
            + servers_yaml(g, rail_servers(g))
            + f"access:\n  readers: [{{name: dash, digest: 'sha256:{digest_of(READER)}'}}]\n"
        )
        self.policy = directory / "policy.yaml"
        self.policy.write_text(self.policy_text)
        self.sim = LoomSim(g, FabricConfig(te=TeConfig(enabled=True)))
        self.manager = PolicyManager(self.sim.core, str(self.policy))
        self.sim.apply(self.manager.reload(0.0))
        self.sim.start()
        hosts = host_list(g)
        self.sim.start_flow(hosts[0], hosts[-1], 5001, 50)
        self.sim.advance(2.0)

    def api(self, policy: bool) -> LoomApi:
        clock = lambda: self.sim.now  # noqa: E731
        return LoomApi(self.sim.core, clock, TOKEN, self.manager if policy else None)


def break_policy(world: World) -> None:
    world.policy.write_text(world.policy_text.replace("research", "Research!"))


def cases(ips: list[str], mac: str) -> list[Case]:
    """In order: a session that registers jobs, reads them, renews and deletes them."""
    job = {"name": "train", "tenant": "research", "hosts": ["s1:0", "s1:1", "s2:0", "s2:1"]}
    leased = {**job, "lease_seconds": 60}
    plain = {
        "name": "eval",
        "tenant": "research",
        "hosts": ips[::2],
        "priority": 5,
    }  # not train's pairs
    big = b'{"name": "x", "hosts": ["' + b"1" * MAX_BODY_BYTES + b'"]}'
    return [
        Case("get", "/health", 200),
        Case("get", "/topology", 200),
        Case("get", "/routes", 200, query={"mac": mac}),
        Case("get", "/routes", 404, query={"mac": "02:00:00:00:99:99"}),
        Case("get", "/flows", 200),
        Case("get", "/jobs", 200, label="none"),
        Case("post", "/jobs", 401, body=leased, token=False),
        Case("post", "/jobs", 400, body=b"{nope", label="not JSON"),
        Case("post", "/jobs", 400, body={**job, "pattern": "tree"}, label="bad key"),
        Case("post", "/jobs", 413, body=big),
        Case("post", "/jobs", 201, body=leased, label="leased, server:NIC hosts"),
        Case("post", "/jobs", 409, body=leased),
        Case("post", "/jobs", 201, body=plain, label="no lease"),
        Case("get", "/jobs", 200, label="two"),
        *refusals(ips, mac, leased),
        Case("get", "/jobs/{name}", 200, "/jobs/train"),
        Case("get", "/jobs/{name}", 404, "/jobs/nope"),
        Case("post", "/jobs/{name}/renew", 401, "/jobs/train/renew", token=False),
        Case("post", "/jobs/{name}/renew", 200, "/jobs/train/renew"),
        Case("post", "/jobs/{name}/renew", 409, "/jobs/eval/renew"),
        Case("post", "/jobs/{name}/renew", 404, "/jobs/nope/renew"),
        Case("get", "/jobs/{name}/order", 200, "/jobs/train/order"),
        Case("get", "/jobs/{name}/order", 404, "/jobs/nope/order"),
        Case("get", "/order", 200, query={"hosts": ",".join(ips)}, label="rails used"),
        Case("get", "/order", 200, query={"hosts": f"{ips[0]},10.9.9.9"}, label="one unknown"),
        Case("get", "/order", 400, query={"hosts": "10.0.0.2,gpu1"}, label="not an IP"),
        Case("get", "/order", 400, label="no hosts"),
        Case("get", "/topology/hosts", 200),
        Case("get", "/topology/slurm-conf", 200),
        Case("get", "/topology/slurm-yaml", 200),
        Case("get", "/policy", 200, label="with a policy"),
        Case("get", "/policy", 200, api="bare", label="none"),
        Case("post", "/policy/reload", 401, token=False),
        Case("post", "/policy/reload", 200),
        Case("post", "/policy/reload", 422, before=break_policy),
        Case("post", "/policy/reload", 409, api="bare"),
        Case("get", "/cluster", 200),
        Case("delete", "/jobs/{name}", 401, "/jobs/eval", token=False),
        Case("delete", "/jobs/{name}", 200, "/jobs/eval"),
        Case("delete", "/jobs/{name}", 404, "/jobs/eval"),
    ]


def refusals(ips: list[str], mac: str, job: dict[str, Any]) -> list[Case]:
    """Once the policy declares tokens: every read but health without one (401), and
    tenant ``ops`` at research's hosts, or at what only the admin may (403); at research's
    jobs, as at jobs that do not exist (404); a reader changing a job (403)."""
    reads = ["/topology", "/flows", "/jobs", "/topology/hosts", "/topology/slurm-conf"]
    reads += ["/topology/slurm-yaml", "/policy", "/cluster"]
    out = [Case("get", p, 401, token=False) for p in reads]
    out += [
        Case("get", "/routes", 401, query={"mac": mac}, token=False),
        Case("get", "/jobs/{name}", 401, "/jobs/train", token=False),
        Case("get", "/jobs/{name}/order", 401, "/jobs/train/order", token=False),
        Case("get", "/order", 401, query={"hosts": ",".join(ips)}, token=False),
    ]
    out += [Case("get", p, 403, token=OTHER) for p in reads if p not in FILTERED]
    return [
        *out,
        Case("get", "/routes", 403, query={"mac": mac}, token=OTHER),
        Case("get", "/jobs/{name}", 404, "/jobs/train", token=OTHER, label="another's"),
        Case("get", "/jobs/{name}/order", 404, "/jobs/train/order", token=OTHER, label="another's"),
        Case("get", "/order", 403, query={"hosts": ",".join(ips)}, token=OTHER),
        Case("post", "/jobs", 403, body={**job, "name": "mine"}, token=OTHER),
        Case(
            "post", "/jobs/{name}/renew", 404, "/jobs/train/renew", token=OTHER, label="another's"
        ),
        Case("delete", "/jobs/{name}", 404, "/jobs/eval", token=OTHER, label="another's"),
        Case("post", "/jobs/{name}/renew", 403, "/jobs/train/renew", token=READER),
        Case("delete", "/jobs/{name}", 403, "/jobs/eval", token=READER),
        Case("post", "/policy/reload", 403, token=OTHER),
    ]


FILTERED = {"/flows", "/jobs", "/topology/hosts"}  # a tenant reads its own share of these


CASES = cases(
    [f"10.0.0.{i}" for i in range(2, 6)], ""
)  # the shapes, for test ids and coverage; values at run time


def request(
    port: int, method: str, path: str, body: Any = None, token: bool | str = True
) -> Answer:
    raw = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if raw else {}
    if token:
        headers["Authorization"] = f"Bearer {TOKEN if token is True else token}"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method.upper(), path, body=raw or None, headers=headers)
        res = conn.getresponse()
        text = res.read()
        return Answer(res.status, res.getheader("Content-Type", ""), json.loads(text))
    finally:
        conn.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World(tmp_path_factory.mktemp("openapi"))


@pytest.fixture(scope="module")
def ports(world: World) -> Iterator[dict[str, int]]:
    """The API with the policy (``main``), and one without (``bare``), same fabric."""
    main, bare = (ShimApp(ShimCounts(), world.sim.apply) for _ in range(2))
    with serving(world.api(True), main) as a, serving(world.api(False), bare) as b:
        yield {"main": a, "bare": b}


@pytest.fixture(scope="module")
def answers(world: World, ports: dict[str, int]) -> dict[str, tuple[Case, Answer]]:
    out = {}
    for shape, case in zip(CASES, cases(world.ips, world.mac), strict=True):
        if case.before is not None:
            case.before(world)
        url = BASE + (case.path or case.doc_path)
        if case.query:
            url += "?" + urlencode(case.query)
        out[shape.ident] = (case, request(ports[case.api], case.method, url, case.body, case.token))
    return out


def operation(method: str, path: str) -> dict[str, Any]:
    op: dict[str, Any] = DOC["paths"][path][method]
    return op


def pointer(*parts: str) -> str:
    return "#/" + "/".join(quote(p.replace("~", "~0").replace("/", "~1"), safe="") for p in parts)


def schema_at(*parts: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": URI + pointer(*parts)}, registry=REGISTRY)


def response_schema(method: str, path: str, status: int) -> Draft202012Validator:
    """The schema of a documented answer, through a ``$ref`` to a shared response."""
    parts = ["paths", path, method, "responses", str(status)]
    ref = operation(method, path)["responses"][str(status)].get("$ref")
    if ref is not None:
        parts = ref.removeprefix("#/").split("/")
    return schema_at(*parts, "content", "application/json", "schema")


def documented_calls() -> set[tuple[str, str, str | None]]:
    """(METHOD, resource, shape) of every documented operation, as ``LoomApi`` routes them."""
    calls = set()
    for path, item in DOC["paths"].items():
        resource, *rest = path.strip("/").split("/")
        shape = None if not rest else "*" if len(rest) == 1 else f"*/{rest[1]}"
        calls |= {(m.upper(), resource, shape) for m in METHODS if m in item}
    return calls


def test_the_document_is_valid_openapi_3_1() -> None:
    validate(DOC)
    assert DOC["openapi"].startswith("3.1.") and DOC["servers"][0]["url"].endswith(BASE)


def test_the_document_names_every_call_the_api_routes_and_no_other() -> None:
    assert documented_calls() == the_apis_calls()


def test_every_call_but_health_may_need_a_token() -> None:
    for path, item in DOC["paths"].items():
        for method in METHODS:
            if method in item:
                op = operation(method, path)
                if path == "/health":
                    assert "security" not in op and "401" not in op["responses"], path
                else:
                    assert op["security"] == [{"bearer": []}] and "401" in op["responses"], path
    assert DOC["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_every_documented_answer_is_asked_for() -> None:
    documented = {
        (m, p, int(s))
        for p, item in DOC["paths"].items()
        for m in METHODS
        if m in item
        for s in operation(m, p)["responses"]
    }
    asked = {(c.method, c.doc_path, c.status) for c in CASES}
    assert {d for d in documented - asked if d[2] not in UNEXERCISED} == set()
    assert asked <= documented


@pytest.mark.parametrize("shape", CASES, ids=lambda c: c.ident)
def test_the_live_answer_matches_the_document(
    answers: dict[str, tuple[Case, Answer]], shape: Case
) -> None:
    case, answer = answers[shape.ident]
    assert answer.status == case.status, answer.body
    assert answer.content_type.startswith("application/json")
    errors = list(response_schema(case.method, case.doc_path, case.status).iter_errors(answer.body))
    assert errors == [], [f"{list(e.absolute_path)}: {e.message}" for e in errors]
    if 200 <= case.status < 300 and case.body is not None:
        request_schema = schema_at(
            "paths", case.doc_path, case.method, "requestBody", "content", "application/json",
            "schema",
        )  # fmt: skip
        assert list(request_schema.iter_errors(case.body)) == []


def test_methods_the_document_does_not_name_are_refused(ports: dict[str, int]) -> None:
    """The reverse on the wire: every method a documented path does not list gets 405."""
    for path, item in DOC["paths"].items():
        concrete = BASE + path.replace("{name}", "train")
        for method in (m for m in METHODS if m not in item):
            answer = request(ports["main"], method, concrete)
            assert answer.status == 405, (method, path, answer.body)
            assert not list(schema_at("components", "schemas", "Error").iter_errors(answer.body))
