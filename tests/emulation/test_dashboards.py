"""Every query of every Grafana dashboard, run against a real Prometheus scraping Loom.

Loom runs on an emulated k=4 fat-tree (10 Mbit/s links) with two tenants and a registered
ring job; iperf3 traffic along the ring and a pair of colliding flows in the other tenant
(left to hashing: placement at the first packet is off) makes elephants, reroutes and hot
links. A real Prometheus, configured from
grafana/prometheus.yml with the recording and alerting rules of grafana/rules, scrapes it
every second. Then every panel query (Grafana variables substituted the way Grafana would)
goes through Prometheus's HTTP API, as Grafana sends it: each must parse and return data.
A panel may return nothing only if its description carries the [empty-ok] marker, which
tests/unit/test_grafana.py keeps to a short, justified list.
"""

from __future__ import annotations

import math
import threading
import time
import urllib.error
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from mininet_scenarios.harness.prometheus import PrometheusError, PrometheusProcess
from mininet_scenarios.harness.stack import LoomStack
from mininet_scenarios.workloads.iperf import IperfRun, iperf3_flows
from tests.dashboard_queries import (
    DS_VARIABLE,
    PROMETHEUS_CONFIG,
    RULE_FILES,
    Query,
    annotation_exprs,
    load_dashboards,
    panel_queries,
    parse_label_values,
    recording_rules,
    substitute,
    variable_query,
    variables,
)
from topologies import fat_tree

pytestmark = pytest.mark.emulation

RATE_MBPS = 10
TRAFFIC_SECONDS = 30
RATE_INTERVAL = "15s"  # what $__rate_interval becomes (Grafana: at least 4 scrapes)
INTERVAL = "5s"  # $__interval
POLICY = """\
version: 1
fabric:
  unassigned_hosts: deny
tenants:
  - name: research          # pods 0 and 1
    traffic_classes: [collective, control, bulk]
    hosts: [{ip: 10.0.0.2}, {ip: 10.0.0.3}, {ip: 10.0.1.2}, {ip: 10.0.1.3},
            {ip: 10.1.0.2}, {ip: 10.1.0.3}, {ip: 10.1.1.2}, {ip: 10.1.1.3}]
  - name: production        # pods 2 and 3
    hosts: [{ip: 10.2.0.2}, {ip: 10.2.0.3}, {ip: 10.2.1.2}, {ip: 10.2.1.3},
            {ip: 10.3.0.2}, {ip: 10.3.0.3}, {ip: 10.3.1.2}, {ip: 10.3.1.3}]
"""
# A ring over h1, h5, h3, h7 (two pods, so every pair crosses the core) ...
JOB = {
    "name": "llm-ring",
    "tenant": "research",
    "hosts": ["10.0.0.2", "10.1.0.2", "10.0.1.2", "10.1.1.2"],
    "pattern": "ring",
}
RING = [("h1", "h5"), ("h5", "h3"), ("h3", "h7"), ("h7", "h1")]
# ... and two flows of the other tenant from one edge switch with the same client port:
# the edge's select group hashes them onto one uplink until Loom moves one.
COLLIDING = [("h9", "h13"), ("h10", "h14")]


class ShippedPrometheus(PrometheusProcess):
    """Prometheus configured from grafana/prometheus.yml: only the target, the intervals
    and the rule files' paths change."""

    def config(self) -> str:
        cfg = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
        interval = f"{self.scrape_interval:g}s"
        cfg["global"]["scrape_interval"] = cfg["global"]["evaluation_interval"] = interval
        cfg["rule_files"] = [str(p) for p in self.rule_files]
        (job,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "loom"]
        job["scrape_timeout"] = interval
        job["static_configs"] = [{"targets": list(self.targets)}]
        return str(yaml.safe_dump(cfg, sort_keys=False))


@dataclass
class Outcome:
    where: str
    expr: str
    series: int = 0
    finite: int = 0
    peak: float = math.nan  # the largest finite value seen, for the table
    error: str = ""
    empty_ok: bool = False

    @property
    def ok(self) -> bool:
        if self.error:
            return False
        return self.finite > 0 or (self.empty_ok and self.series == 0)

    @property
    def status(self) -> str:
        if self.error:
            return "ERROR"
        if self.finite > 0:
            return "ok"
        if self.series == 0:
            return "empty (allowed)" if self.empty_ok else "EMPTY"
        return "NaN only"


def count(result: Mapping[str, Any]) -> tuple[int, int, float]:
    """(series, series with at least one finite value, largest finite value) of a
    query's result."""
    series = finite = 0
    peak = math.nan
    rows = result["result"]
    if result["resultType"] == "scalar":
        rows = [{"value": rows}]
    for row in rows:
        series += 1
        values = [float(v) for _, v in row.get("values") or [row["value"]]]
        numbers = [v for v in values if math.isfinite(v)]
        finite += bool(numbers)
        if numbers:
            peak = max(numbers) if math.isnan(peak) else max(peak, *numbers)
    return series, finite, peak


def run_query(prom: PrometheusProcess, expr: str, instant: bool, start: float, end: float) -> Any:
    try:
        if instant:
            return prom.api("query", query=expr, time=end)
        return prom.api("query_range", query=expr, start=start, end=end, step=1)
    except urllib.error.HTTPError as err:  # a bad query: Prometheus answers 400 and says why
        raise PrometheusError(err.read().decode(errors="replace")) from None


def resolve_variables(
    prom: PrometheusProcess, dash: Mapping[str, Any], start: float, end: float, window: str
) -> tuple[dict[str, str], list[Outcome]]:
    """Values for the dashboard's variables, chosen as a user would: the data source, a
    custom variable's current value, a query variable's first value (Grafana runs
    label_values() through the labels API)."""
    values = {
        "__rate_interval": RATE_INTERVAL,
        "__interval": INTERVAL,
        "__range": window,
        DS_VARIABLE: "loom-prometheus",
    }
    outcomes = []
    for var in variables(dash):
        if var["type"] == "custom":
            values[var["name"]] = str(var["current"]["value"])
        elif var["type"] == "query":
            selector, label = parse_label_values(substitute(variable_query(var), values))
            where = f"{dash['uid']} / ${var['name']}"
            params: dict[str, Any] = {"start": start, "end": end}
            if selector:
                params["match[]"] = selector
            found = sorted(prom.api(f"label/{label}/values", **params))
            outcomes.append(Outcome(where, variable_query(var), len(found), len(found), len(found)))
            if found:
                values[var["name"]] = found[0]
    return values, outcomes


def evaluate(prom: PrometheusProcess, start: float, end: float) -> list[Outcome]:
    window = f"{max(1, int(end - start))}s"
    outcomes: list[Outcome] = []
    for dash in load_dashboards():
        values, resolved = resolve_variables(prom, dash, start, end, window)
        outcomes += resolved
        queries: list[Query] = panel_queries(dash)
        for q in queries:
            out = Outcome(f"{q.dashboard} / {q.panel} / {q.ref}", q.expr, empty_ok=q.empty_ok)
            try:
                out.series, out.finite, out.peak = count(
                    run_query(prom, substitute(q.expr, values), q.instant, start, end)
                )
            except (PrometheusError, KeyError) as err:
                out.error = str(err)
            outcomes.append(out)
        for name, expr in annotation_exprs(dash):
            # Annotations mark events (a topology change, a policy reload): they may be
            # empty, but they must parse.
            out = Outcome(f"{dash['uid']} / annotation {name}", expr, empty_ok=True)
            try:
                out.series, out.finite, out.peak = count(
                    run_query(prom, substitute(expr, values), False, start, end)
                )
            except PrometheusError as err:
                out.error = str(err)
            outcomes.append(out)
    for record in recording_rules():
        out = Outcome(f"recording rule {record}", record)
        out.series, out.finite, out.peak = count(run_query(prom, record, False, start, end))
        outcomes.append(out)
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    width = max(len(o.where) for o in outcomes)
    lines = [f"{'dashboard / panel / query':<{width}}  series  finite        peak  status"]
    lines += [
        f"{o.where:<{width}}  {o.series:>6}  {o.finite:>6}  {o.peak:>10.4g}  {o.status}"
        for o in outcomes
    ]
    return "\n".join(lines)


def test_every_dashboard_query_returns_data(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    env = {
        "LOOM_LINK_CAPACITY_MBPS": str(RATE_MBPS),
        "LOOM_POLL_INTERVAL": "0.5",
        "LOOM_POLICY": str(policy),
        # The reroute panels need reroutes: placed at their first packet, the colliding
        # pair would never collide, and nothing would be moved.
        "LOOM_PLACE_NEW_FLOWS": "off",
    }
    t0 = time.monotonic()
    with LoomStack(fat_tree(4, rate_mbps=RATE_MBPS), tmp_path / "run", env=env) as stack:
        stack.net.pingall(timeout=1.0)  # hosts are learned; pairs between tenants fail
        job = stack.api.request("POST", "/loom/v1/jobs", JOB)
        assert job["status"] == "active", job
        stack.api.request("POST", "/loom/v1/policy/reload")  # an ok reload to count
        target = stack.metrics_url.split("//")[1].split("/")[0]
        with ShippedPrometheus(
            [target], tmp_path, scrape_interval=1.0, rule_files=RULE_FILES
        ) as prom:
            prom.wait_for('up{job="loom"} == 1', timeout=20)
            start = time.time()
            runs: list[IperfRun] = []
            traffic = threading.Thread(
                target=lambda: runs.append(
                    iperf3_flows(
                        stack.net,
                        RING + COLLIDING,
                        seconds=TRAFFIC_SECONDS,
                        extra_args=("--cport", "40000"),
                    )
                ),
                daemon=True,
            )
            traffic.start()
            try:
                prom.wait_for("fabric:loom_links_hot:count > 0", timeout=30)
                prom.wait_for("loom_elephant_flows > 0", timeout=30)
                prom.wait_for("sum(reason:loom_reroutes:rate1m) > 0", timeout=30)
                # Enough traffic history for every rate window ($__rate_interval, 1m rules).
                time.sleep(max(0.0, start + 20 - time.time()))
                end = time.time()
                outcomes = evaluate(prom, start, end)
                rules = prom.api("rules")["groups"]
            finally:
                traffic.join(timeout=TRAFFIC_SECONDS + 30)
    elapsed = time.monotonic() - t0
    print(f"\n{table(outcomes)}\n")
    panels = [o for o in outcomes if " / " in o.where and "annotation" not in o.where]
    print(
        f"{len(panels)} panel queries and variables, {sum(o.finite > 0 for o in panels)} with "
        f"data; {len(outcomes)} checks in all; test took {elapsed:.0f} s"
    )
    broken_rules = [
        f"{g['name']}/{r.get('name')}: {r.get('lastError')}"
        for g in rules
        for r in g["rules"]
        if r.get("health") != "ok" or r.get("lastError")
    ]
    assert not broken_rules, broken_rules
    failed = [o for o in outcomes if not o.ok]
    assert not failed, "queries without data:\n" + "\n".join(
        f"{o.where}: {o.status} {o.error}\n    {o.expr}" for o in failed
    )
    assert runs and all(f.error is None for f in runs[0].flows), runs
