"""A small client for Loom's REST API (stdlib only), used by scenarios, tests and benchmarks."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from typing import Any


class LoomApiError(RuntimeError):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


class LabClient:
    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 5.0,
        context: ssl.SSLContext | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.context = context  # for an https:// base_url: the CA (and our certificate)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.context) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            payload = err.read()
            try:
                parsed = json.loads(payload)
            except ValueError:
                parsed = payload.decode(errors="replace")
            raise LoomApiError(err.code, parsed) from None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def topology(self) -> dict[str, Any]:
        return dict(self.get("/loom/v1/topology"))

    def health(self) -> dict[str, Any]:
        return dict(self.get("/loom/v1/health"))

    def wait_for(self, switches: int, links: int, timeout: float = 60.0, hosts: int = 0) -> float:
        """Seconds until the controller reports at least this many switches, directed links
        and hosts; raises TimeoutError with what it saw."""
        start = time.monotonic()
        seen: dict[str, Any] = {}
        while time.monotonic() - start < timeout:
            try:
                seen = self.health()
            except (OSError, LoomApiError):
                seen = {}
            if (
                seen
                and seen["switches"] >= switches
                and seen["links"] >= links
                and seen["hosts"] >= hosts
            ):
                return time.monotonic() - start
            time.sleep(0.2)
        raise TimeoutError(
            f"controller saw {seen or 'nothing'}; wanted {switches} switches, {links} links"
        )
