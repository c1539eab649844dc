"""Loom's REST API as pure request handling: (method, path, query, body) -> (status, JSON).

The Ryu WSGI glue in ``controller/ofp/rest.py`` only forwards requests here, so the
API is tested without a web server and keeps working under os-ken.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controller.fabric import Fabric

Response = tuple[int, Any]
Handler = Callable[[Mapping[str, str], bytes], Response]


class LoomApi:
    """Routes: GET /loom/v1/health, /loom/v1/topology, /loom/v1/routes?mac=MAC."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.routes: dict[tuple[str, str], Handler] = {
            ("GET", "health"): self.health,
            ("GET", "topology"): self.topology,
            ("GET", "routes"): self.host_routes,
        }

    def handle(
        self, method: str, path: str, query: Mapping[str, str], body: bytes = b""
    ) -> Response:
        parts = [p for p in path.strip("/").split("/") if p]
        if parts[:2] != ["loom", "v1"] or len(parts) != 3:
            return 404, {"error": f"no such resource: {path}"}
        handler = self.routes.get((method.upper(), parts[2]))
        if handler is None:
            allowed = sorted(m for m, name in self.routes if name == parts[2])
            if allowed:
                return 405, {"error": f"{method} not allowed on {path}; use {', '.join(allowed)}"}
            return 404, {"error": f"no such resource: {path}"}
        return handler(query, body)

    def health(self, query: Mapping[str, str], body: bytes) -> Response:
        topo = self.fabric.topo
        return 200, {
            "switches": len(topo.switches),
            "links": len(topo.links),
            "hosts": len(topo.hosts),
        }

    def topology(self, query: Mapping[str, str], body: bytes) -> Response:
        return 200, self.fabric.describe()

    def host_routes(self, query: Mapping[str, str], body: bytes) -> Response:
        mac = query.get("mac", "").lower()
        host = self.fabric.topo.hosts.get(mac)
        if host is None:
            return 404, {"error": f"unknown host MAC {mac!r}; expected a learned host's MAC"}
        hops = self.fabric.routes.ports.get(host.dpid, {})
        return 200, {
            "host": {"mac": host.mac, "ip": host.ip, "dpid": host.dpid, "port": host.port},
            "next_hops": {str(dpid): list(ports) for dpid, ports in sorted(hops.items())},
        }
