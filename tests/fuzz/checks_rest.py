"""The REST API's invariants, for one request against ``LoomApi.handle``.

It never raises and answers below 500 within the bound; the body serialises as the WSGI
glue does it (sorted keys) and as strict JSON (no NaN); every status >= 400 carries an
``"error"`` string, and a refused job request a ``"field"`` naming the offending key; a
refused request (and every GET) changes no job and no rule and sends nothing; with the
token set, a changing call without ``Authorization: Bearer <token>`` gets 401.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.api import LoomApi, Response
from controller.conductor import Conductor
from controller.jobspec import KEYS as ALLOWED_KEYS
from controller.policy.manager import PolicyManager
from tests.fuzz.common import assert_bounded, record, short, stopwatch
from tests.fuzz.world import clone, new_sim, store_snapshot, write_policy

KIND = "rest"
TOKEN = "fuzz-token"
AUTH = f"Bearer {TOKEN}"
RESOURCES = {"health", "topology", "routes", "flows", "jobs", "policy"}


@dataclass(frozen=True)
class RestCase:
    shape: str
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    auth: str = AUTH

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # Hypothesis's printer
        printer.text(repr(self))

    def __repr__(self) -> str:  # a 2 MiB body must not flood the report
        return (
            f"RestCase(shape={self.shape!r}, method={short(self.method, 80)}, "
            f"path={short(self.path, 200)}, query={short(self.query, 200)}, "
            f"body={short(self.body, 400)}, auth={short(self.auth, 120)})"
        )


class RestWorld:
    """An API over a learned fat-tree with a policy (two tenants) and one resident job,
    ``resident`` (h1 -> h2 -> h3 -> h4). Requests that changed something (2xx on a
    changing call, or a broken invariant) get a fresh copy for the next case."""

    def __init__(self, directory: Path) -> None:
        sim = new_sim()
        manager = PolicyManager(sim.core, str(write_policy(directory)))
        sim.apply(manager.reload(sim.now))
        assert manager.status.ok, manager.status.errors
        self.now = sim.now
        self.host_ips = [str(sim.graph.nodes[f"h{i}"]["ip"]) for i in range(1, 17)]
        self.host_macs = [str(sim.graph.nodes[f"h{i}"]["mac"]) for i in range(1, 17)]
        api = LoomApi(sim.core, self.clock, TOKEN, manager)
        body = {"name": "resident", "tenant": "research", "hosts": self.host_ips[:4]}
        res = api.handle("POST", "/loom/v1/jobs", {}, json.dumps(body).encode(), AUTH)
        assert res.status == 201, res.body
        self._pristine: tuple[Conductor, PolicyManager] = clone((sim.core, manager))
        self.api = self._fresh()
        self.dirty = False

    def clock(self) -> float:
        return self.now

    def _fresh(self) -> LoomApi:
        core, manager = clone(self._pristine)
        return LoomApi(core, self.clock, TOKEN, manager)

    def reset_if_dirty(self) -> None:
        if self.dirty:
            self.api = self._fresh()
            self.dirty = False


def _json_fields(body: bytes) -> set[str]:
    with contextlib.suppress(ValueError, RecursionError):
        data = json.loads(body)
        if isinstance(data, dict):
            return {str(k) for k in data}
    return set()


def _assert_body(case: RestCase, res: Response) -> None:
    assert isinstance(res.status, int) and 100 <= res.status < 500, f"status {res.status!r}"
    try:
        json.dumps(res.body, indent=1, sort_keys=True, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        bad = f"body does not serialise as JSON ({exc}): {short(res.body)}"
        raise AssertionError(bad) from None
    if res.status < 400:
        return
    assert isinstance(res.body, dict), f"error body is not an object: {short(res.body)}"
    assert isinstance(res.body.get("error"), str) and res.body["error"], short(res.body)
    parts = [p for p in case.path.strip("/").split("/") if p]
    is_jobs_post = case.method.upper() == "POST" and parts == ["loom", "v1", "jobs"]
    if is_jobs_post and res.status not in (401, 404, 405):
        name = res.body.get("field")
        assert isinstance(name, str), f"no 'field' for a bad body: {short(res.body)}"
        root = name.split("[", 1)[0]
        known = {"body", *ALLOWED_KEYS} | _json_fields(case.body)
        assert name in known or root in known, f"'field' {name!r} names no key of the request"


def _must_be_refused(case: RestCase) -> bool:
    """A changing call without the token, on a path that names one of the resources."""
    parts = [p for p in case.path.strip("/").split("/") if p]
    routable = parts[:2] == ["loom", "v1"] and 3 <= len(parts) <= 4 and parts[2] in RESOURCES
    return case.method.upper() != "GET" and case.auth != AUTH and routable


def check_rest(world: RestWorld, case: RestCase) -> float:
    world.reset_if_dirty()
    api = world.api
    core = api.fabric
    jobs, store = sorted(api.view.jobs), store_snapshot(core)
    world.dirty = True  # until it is known what the request changed
    res: Any = None
    with stopwatch() as t:
        res = api.handle(case.method, case.path, case.query, case.body, case.auth)
    record(KIND, t[0])
    jobs_after, store_after = sorted(api.view.jobs), store_snapshot(core)
    changed = jobs_after != jobs or store_after != store
    changing_call = isinstance(res, Response) and case.method.upper() != "GET"
    changed_ok = changing_call and 200 <= res.status < 300
    world.dirty = changed or changed_ok
    assert_bounded(KIND, t[0], f"{short(case.method, 40)} {short(case.path, 80)}")
    assert isinstance(res, Response), short(res)
    _assert_body(case, res)
    if _must_be_refused(case):
        assert res.status == 401, f"changing call without the token answered {res.status}"
    if not changed_ok:
        assert not any(res.messages.values()), f"{res.status}, yet sends {short(res.messages)}"
        assert jobs_after == jobs, f"{res.status}, yet jobs {jobs} -> {jobs_after}"
        assert store_after == store, f"{res.status}, yet the rule store changed"
    return t[0]
