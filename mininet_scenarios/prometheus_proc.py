"""A real Prometheus server (Debian's) on loopback, scraping Loom, for tests and the demo.

``PrometheusProcess(targets, run_dir)`` writes a scrape configuration, starts
``/usr/bin/prometheus`` with its data in ``run_dir``, waits until it is ready and stops
it on exit. ``query`` and ``query_range`` use the HTTP API, the same one Grafana uses.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from mininet_scenarios.controller_proc import free_port

PROMETHEUS = "/usr/bin/prometheus"


class PrometheusError(RuntimeError):
    pass


class PrometheusProcess:
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
        self.proc: subprocess.Popen[bytes] | None = None

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

    def __enter__(self) -> PrometheusProcess:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.run_dir / "prometheus.yml"
        cfg.write_text(self.config())
        log = open(self.run_dir / "prometheus.txt", "wb")  # closed in __exit__
        self._log = log
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={self.run_dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            self._wait_ready(30.0)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise PrometheusError(f"prometheus exited: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise PrometheusError(f"prometheus not ready after {timeout:g} s: {self.log_tail()}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if getattr(self, "_log", None):
            self._log.close()

    def log_tail(self, lines: int = 20) -> str:
        path = self.run_dir / "prometheus.txt"
        return (
            "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
            if path.exists()
            else ""
        )

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

    def targets_up(self) -> bool:
        active = self.api("targets")["activeTargets"]
        return bool(active) and all(t["health"] == "up" for t in active)

    def wait_for(self, expr: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Poll an instant query until it returns data."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.query(expr)
            if result:
                return result
            time.sleep(0.5)
        raise PrometheusError(f"no data for {expr!r} after {timeout:g} s")
