"""Loom's REST API as pure request handling: (method, path, query, body) -> (status, JSON).

The Ryu WSGI glue in ``controller/ofp/rest.py`` only forwards requests here, so the
API is tested without a web server. Changes go through the same core as switch events:
a handler returns the OpenFlow messages to send along with its response. When a token
is configured, every call that changes something must carry ``Authorization: Bearer``.

Routes (all under /loom/v1):
  GET health · GET topology · GET routes?mac=MAC · GET flows
  GET jobs · POST jobs · GET jobs/NAME · DELETE jobs/NAME
  GET policy · POST policy/reload · GET cluster
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.cluster.etcd import StoreUnavailable
from controller.cluster.shared import NO_QUORUM, SharedState
from controller.fabric import Fabric
from controller.jobspec import JobError, brief, parse_job
from controller.model import Messages
from controller.policy.manager import PolicyManager
from controller.view import FabricView

Clock = Callable[[], float]
MAX_BODY_BYTES = 1024 * 1024  # a 4,096-rank job is ~70 KB of JSON
log = logging.getLogger("loom.api")


@dataclass
class Response:
    status: int
    body: Any
    messages: Messages = field(default_factory=dict)


def error(status: int, message: str, **extra: Any) -> Response:
    return Response(status, {"error": message, **extra})


class LoomApi:
    def __init__(
        self,
        fabric: Fabric,
        clock: Clock,
        token: str | None = None,
        policy: PolicyManager | None = None,
        shared: SharedState | None = None,
        cluster: Callable[[], dict[str, object]] | None = None,
    ) -> None:
        self.fabric = fabric  # for changes only; reads go through the view
        self.view = FabricView(fabric)
        self.clock = clock
        self.token = token
        self.policy = policy
        self.shared = shared  # a cluster's store: changes go there first
        self.cluster = cluster

    def handle(
        self, method: str, path: str, query: Mapping[str, str], body: bytes = b"", auth: str = ""
    ) -> Response:
        """Answer one request. Whatever it holds, the answer is a 2xx or a 4xx that names
        what was wrong, and a refused request changes nothing."""
        try:
            return self._handle(method, path, query, body, auth)
        except StoreUnavailable as exc:
            log.error("%s %s refused: %s", brief(method), brief(path), exc)
            return error(503, NO_QUORUM)
        except Exception:  # a bug must not take the API down: logged with its trace
            log.exception("%s %s: internal error", brief(method), brief(path))
            return error(500, "internal error; the request changed nothing it had not finished")

    def _handle(
        self, method: str, path: str, query: Mapping[str, str], body: bytes, auth: str
    ) -> Response:
        parts = [p for p in path.strip("/").split("/") if p]
        if parts[:2] != ["loom", "v1"] or not 3 <= len(parts) <= 4:
            return error(404, f"no such resource: {brief(path)}")
        method = method.upper()
        if method != "GET" and self._guarded() and not self._authorized(auth):
            return error(401, "this call changes the fabric: send 'Authorization: Bearer <token>'")
        if len(body) > MAX_BODY_BYTES:
            return error(413, f"body: larger than {MAX_BODY_BYTES} bytes", field="body")
        resource, item = parts[2], (parts[3] if len(parts) == 4 else None)
        route = {
            ("GET", "health", False): lambda: self.health(),
            ("GET", "topology", False): lambda: self.topology(),
            ("GET", "routes", False): lambda: self.host_routes(query),
            ("GET", "flows", False): lambda: self.flows(),
            ("GET", "jobs", False): lambda: self.list_jobs(),
            ("POST", "jobs", False): lambda: self.create_job(body),
            ("GET", "jobs", True): lambda: self.show_job(str(item)),
            ("DELETE", "jobs", True): lambda: self.delete_job(str(item)),
            ("GET", "policy", False): lambda: self.show_policy(),
            ("POST", "policy", True): lambda: self.reload_policy(str(item)),
            ("GET", "cluster", False): lambda: self.show_cluster(),
        }
        handler = route.get((method, resource, item is not None))
        if handler is None:
            allowed = sorted({m for m, r, i in route if r == resource and i == (item is not None)})
            if allowed:
                return error(
                    405, f"{brief(method)} not allowed on {brief(path)}; use {', '.join(allowed)}"
                )
            return error(404, f"no such resource: {brief(path)}")
        return handler()

    def _guarded(self) -> bool:
        return bool(self.token or (self.shared is not None and self.shared.token_digest))

    def _authorized(self, auth: str) -> bool:
        if self.shared is not None and self.shared.token_digest:  # the cluster's token
            return auth.startswith("Bearer ") and self.shared.authorized(auth[7:])
        expected = f"Bearer {self.token}".encode()
        return hmac.compare_digest(auth.encode("utf-8", "replace"), expected)

    def show_cluster(self) -> Response:
        if self.cluster is None:
            return Response(200, {"mode": "embedded"})
        return Response(200, self.cluster())

    # -- fabric -------------------------------------------------------------------
    def health(self) -> Response:
        v = self.view
        return Response(
            200,
            {
                "switches": len(v.switches),
                "links": len(v.links),
                "hosts": len(v.hosts),
                "jobs": len(v.jobs),
                "elephants": len(v.elephants()),
            },
        )

    def topology(self) -> Response:
        return Response(200, self.view.describe())

    def host_routes(self, query: Mapping[str, str]) -> Response:
        mac = query.get("mac", "").lower()
        host = self.view.hosts.get(mac)
        if host is None:
            return error(404, f"unknown host MAC {brief(mac)}; expected a learned host's MAC")
        hops = self.view.next_hops(host.dpid)
        return Response(
            200,
            {
                "host": {"mac": host.mac, "ip": host.ip, "dpid": host.dpid, "port": host.port},
                "next_hops": {str(dpid): list(ports) for dpid, ports in sorted(hops.items())},
            },
        )

    def flows(self) -> Response:
        """Tracked flows, largest first: rate, elephant or not, and the pinned path."""
        v = self.view
        peer = v.peers()
        name = v.switch_name
        out = []
        for flow in sorted(v.flows.values(), key=lambda x: (-x.rate_bps, x.key)):
            path = v.pinned_path(flow.key)
            switches = [name(flow.ingress)] + [name(peer[h]) for h in path or () if h in peer]
            out.append(
                {
                    "flow": str(flow.key),
                    "mbps": round(flow.rate_bps / 1e6, 3),
                    "elephant": flow.elephant,
                    "ingress": name(flow.ingress),
                    "pinned": path is not None,
                    "path": switches if path is not None else None,
                    "ack_priority": v.ack_priority(flow.key),
                }
            )
        return Response(200, {"flows": out, "reroutes": dict(v.reroutes)})

    # -- jobs -----------------------------------------------------------------------
    def list_jobs(self) -> Response:
        return Response(200, {"jobs": [self.view.describe_job(n) for n in sorted(self.view.jobs)]})

    def show_job(self, name: str) -> Response:
        if name not in self.view.jobs:
            return error(404, f"no job named {brief(name)}")
        return Response(200, self.view.describe_job(name))

    def create_job(self, body: bytes) -> Response:
        try:
            spec = parse_job(read_json(body))
            if self.shared is not None:  # checked, then stored, then applied here
                self.fabric.jobs.check(spec, self.fabric.tenants)
                self.shared.publish_job(spec.name, body)
            try:
                messages = self.fabric.create_job(self.clock(), spec)
            except JobError:
                if self.shared is not None:  # refused here after all: not for the others
                    self.shared.withdraw_job(spec.name)
                raise
        except JobError as exc:
            return error(409 if exc.conflict else 400, str(exc), field=exc.field)
        return Response(201, self.view.describe_job(spec.name), messages)

    # -- policy ---------------------------------------------------------------------
    def show_policy(self) -> Response:
        if self.policy is None:
            return Response(200, {"file": None, "enforcing": False, "tenants": []})
        return Response(200, self.policy.describe())

    def reload_policy(self, action: str) -> Response:
        if action != "reload":
            return error(404, f"no such action: policy/{brief(action)}; use policy/reload")
        if self.policy is None or self.policy.status.path is None:
            return error(409, "no policy file configured (set LOOM_POLICY)")
        if self.shared is not None:
            self.shared.client.get(self.shared.prefix)  # refused now if the store is down
        messages = self.policy.reload(self.clock())
        body = self.policy.describe()
        if not self.policy.status.ok:
            return Response(
                422, {"error": "policy rejected; the running policy stays in force", **body}
            )
        if self.shared is not None:
            self.shared.publish_policy()
        return Response(200, body, messages)

    def delete_job(self, name: str) -> Response:
        try:
            if self.shared is not None and name in self.view.jobs:
                self.shared.withdraw_job(name)
            messages = self.fabric.delete_job(name)
        except JobError as exc:
            return error(404, str(exc), field=exc.field)
        return Response(200, {"deleted": name}, messages)


def read_json(body: bytes) -> Any:
    """A request body as JSON, strictly: UTF-8, no NaN or Infinity, no key given twice,
    nesting within Python's limits; anything else is a ``JobError`` on ``body``."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JobError("body", f"not UTF-8: byte offset {exc.start}") from None
    try:
        return json.loads(text or "null", object_pairs_hook=_no_duplicates, parse_constant=_no_nan)
    except JobError:
        raise
    except RecursionError:
        raise JobError("body", "JSON nested too deeply") from None
    except ValueError as exc:
        raise JobError("body", f"not JSON ({brief(str(exc), 120)})") from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JobError(key[:64], "key given twice")
        out[key] = value
    return out


def _no_nan(name: str) -> Any:
    raise JobError("body", f"{name} is not a JSON number")
