"""Loom's REST API as pure request handling: (method, path, query, body) -> (status, JSON).

The Ryu WSGI glue in ``controller/ofp/rest.py`` only forwards requests here, so the
API is tested without a web server. Changes go through the same core as switch events:
a handler returns the OpenFlow messages to send along with its response. When a token
is configured, every call that changes something must carry ``Authorization: Bearer``.

Routes (all under /loom/v1):
  GET health · GET topology · GET routes?mac=MAC · GET flows
  GET jobs · POST jobs · GET jobs/NAME · DELETE jobs/NAME
  GET policy · POST policy/reload
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.collectives import JobError, describe, parse_job
from controller.fabric import Fabric
from controller.model import Messages
from controller.policy.manager import PolicyManager

Clock = Callable[[], float]


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
    ) -> None:
        self.fabric = fabric
        self.clock = clock
        self.token = token
        self.policy = policy

    def handle(
        self, method: str, path: str, query: Mapping[str, str], body: bytes = b"", auth: str = ""
    ) -> Response:
        parts = [p for p in path.strip("/").split("/") if p]
        if parts[:2] != ["loom", "v1"] or not 3 <= len(parts) <= 4:
            return error(404, f"no such resource: {path}")
        method = method.upper()
        if method != "GET" and self.token and not hmac.compare_digest(auth, f"Bearer {self.token}"):
            return error(401, "this call changes the fabric: send 'Authorization: Bearer <token>'")
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
        }
        handler = route.get((method, resource, item is not None))
        if handler is None:
            allowed = sorted({m for m, r, i in route if r == resource and i == (item is not None)})
            if allowed:
                return error(405, f"{method} not allowed on {path}; use {', '.join(allowed)}")
            return error(404, f"no such resource: {path}")
        return handler()

    # -- fabric -------------------------------------------------------------------
    def health(self) -> Response:
        t = self.fabric.topo
        return Response(
            200,
            {
                "switches": len(t.switches),
                "links": len(t.links),
                "hosts": len(t.hosts),
                "jobs": len(self.fabric.jobs),
                "elephants": len(self.fabric.te.flows.elephants()),
            },
        )

    def topology(self) -> Response:
        return Response(200, self.fabric.describe())

    def host_routes(self, query: Mapping[str, str]) -> Response:
        mac = query.get("mac", "").lower()
        host = self.fabric.topo.hosts.get(mac)
        if host is None:
            return error(404, f"unknown host MAC {mac!r}; expected a learned host's MAC")
        hops = self.fabric.routes.ports.get(host.dpid, {})
        return Response(
            200,
            {
                "host": {"mac": host.mac, "ip": host.ip, "dpid": host.dpid, "port": host.port},
                "next_hops": {str(dpid): list(ports) for dpid, ports in sorted(hops.items())},
            },
        )

    def flows(self) -> Response:
        """Tracked flows, largest first: rate, elephant or not, and the pinned path."""
        f = self.fabric
        peer = {(u, k): v for u, v, k in f.routes.graph.edges(keys=True)}
        name = self._switch_name
        out = []
        for flow in sorted(f.te.flows.flows.values(), key=lambda x: (-x.rate_bps, x.key)):
            path = f.te.paths.get(flow.key)
            switches = [name(flow.ingress)] + [name(peer[h]) for h in path or () if h in peer]
            out.append(
                {
                    "flow": str(flow.key),
                    "mbps": round(flow.rate_bps / 1e6, 3),
                    "elephant": flow.elephant,
                    "ingress": name(flow.ingress),
                    "pinned": path is not None,
                    "path": switches if path is not None else None,
                    "ack_priority": flow.key in f.te.acks,
                }
            )
        return Response(200, {"flows": out, "reroutes": dict(f.te.reroutes)})

    def _switch_name(self, dpid: int) -> str:
        switch = self.fabric.topo.switches.get(dpid)
        return switch.name if switch else str(dpid)

    # -- jobs -----------------------------------------------------------------------
    def _describe(self, name: str) -> dict[str, Any]:
        return describe(self.fabric.jobs[name], self.fabric.topo, self._switch_name)

    def list_jobs(self) -> Response:
        return Response(200, {"jobs": [self._describe(n) for n in sorted(self.fabric.jobs)]})

    def show_job(self, name: str) -> Response:
        if name not in self.fabric.jobs:
            return error(404, f"no job named {name!r}")
        return Response(200, self._describe(name))

    def create_job(self, body: bytes) -> Response:
        try:
            data = json.loads(body or b"null")
        except ValueError as exc:
            return error(400, f"body: not JSON ({exc})", field="body")
        try:
            spec = parse_job(data)
            messages = self.fabric.create_job(self.clock(), spec)
        except JobError as exc:
            return error(409 if exc.conflict else 400, str(exc), field=exc.field)
        return Response(201, self._describe(spec.name), messages)

    # -- policy ---------------------------------------------------------------------
    def show_policy(self) -> Response:
        if self.policy is None:
            return Response(200, {"file": None, "enforcing": False, "tenants": []})
        return Response(200, self.policy.describe())

    def reload_policy(self, action: str) -> Response:
        if action != "reload":
            return error(404, f"no such action: policy/{action}; use policy/reload")
        if self.policy is None or self.policy.status.path is None:
            return error(409, "no policy file configured (set LOOM_POLICY)")
        messages = self.policy.reload(self.clock())
        body = self.policy.describe()
        if not self.policy.status.ok:
            return Response(
                422, {"error": "policy rejected; the running policy stays in force", **body}
            )
        return Response(200, body, messages)

    def delete_job(self, name: str) -> Response:
        try:
            messages = self.fabric.delete_job(name)
        except JobError as exc:
            return error(404, str(exc), field=exc.field)
        return Response(200, {"deleted": name}, messages)
