"""A real Prometheus server (Debian's) on loopback, scraping Loom, for tests and the demo.

``PrometheusProcess(targets, run_dir)`` writes a scrape configuration, starts
``/usr/bin/prometheus`` with its data in ``run_dir``, waits until it is ready and stops
it on exit (the lifecycle of :class:`~mininet_scenarios.harness.processes.ChildProcess`).
``query`` and ``query_range`` use the HTTP API, the same one Grafana uses.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mininet_scenarios.harness.processes import ChildProcess, ProcessError, free_port, http_ok

PROMETHEUS = "/usr/bin/prometheus"


class PrometheusError(ProcessError):
    pass


class PrometheusProcess(ChildProcess):
    error = PrometheusError

    def __init__(
        self,
        targets: Sequence[str],
        run_dir: Path,
        *,
        scrape_interval: float = 1.0,
        rule_files: Sequence[Path] = (),
        port: int | None = None,
    ) -> None:
        self.targets = list(targets)  # host:port of each /metrics endpoint
        self.run_dir = Path(run_dir) / "prometheus"
        self.scrape_interval = scrape_interval
        self.rule_files = [Path(p).resolve() for p in rule_files]
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_path = self.run_dir / "prometheus.yml"
        super().__init__(
            [
                PROMETHEUS,
                f"--config.file={self.config_path}",
                f"--storage.tsdb.path={self.run_dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
            ],
            self.run_dir / "prometheus.txt",
            name="prometheus",
            cwd=Path.cwd(),
            ready=http_ok(f"{self.url}/-/ready"),
            waiting_for=f"ready at {self.url}",
            start_timeout=30.0,
            stop_timeout=10.0,
            poll_interval=0.2,
        )

    def config(self) -> str:
        interval = f"{self.scrape_interval:g}s"
        lines = [
            "global:",
            f"  scrape_interval: {interval}",
            f"  evaluation_interval: {interval}",
        ]
        if self.rule_files:
            lines.append("rule_files:")
            lines += [f"  - {p}" for p in self.rule_files]
        lines += [
            "scrape_configs:",
            "  - job_name: loom",
            "    static_configs:",
            f"      - targets: [{', '.join(repr(t) for t in self.targets)}]",
        ]
        return "\n".join(lines) + "\n"

    def prepare(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config())

    def api(self, path: str, **params: Any) -> Any:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.loads(resp.read())
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; the result vector (each item has ``metric`` and ``value``)."""
        return list(self.api("query", query=expr)["result"])

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        return list(self.api("query_range", query=expr, start=start, end=end, step=step)["result"])

    def wait_for(self, expr: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Poll an instant query until it returns data."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.query(expr)
            if result:
                return result
            time.sleep(0.5)
        raise PrometheusError(f"no data for {expr!r} after {timeout:g} s")
