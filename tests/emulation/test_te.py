"""Traffic engineering and telemetry on real switches: a collision of two elephants on one
uplink is seen in the counters and undone; an elephant's ACKs cross the fabric in the
control class; the metrics endpoint and a real Prometheus server both serve every
documented metric."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.metrics import METRICS
from mininet_scenarios.harness.prometheus import PrometheusProcess
from mininet_scenarios.harness.shaping import DEFAULT_CLASSES, class_counters, root_run
from mininet_scenarios.harness.stack import LoomStack
from mininet_scenarios.workloads.iperf import iperf3_flows
from tests.emulation.collision_support import collide
from topologies import fat_tree

pytestmark = pytest.mark.emulation
RATE = 10.0
POLL = 0.5


@pytest.fixture(scope="module")
def te(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomStack]:
    run_dir = tmp_path_factory.mktemp("loom-te")
    env = {
        "LOOM_TE": "on",
        "LOOM_LINK_CAPACITY_MBPS": str(RATE),
        "LOOM_POLL_INTERVAL": str(POLL),
        "LOOM_TE_INTERVAL": str(POLL),
        "LOOM_PLACE_NEW_FLOWS": "off",  # hashing places the flows, so they can collide
    }
    graph = fat_tree(4, rate_mbps=RATE)
    with LoomStack(graph, run_dir, env=env, queue_classes=DEFAULT_CLASSES) as stack:
        assert stack.net.pingall(timeout=2.0).loss_pct == 0.0
        yield stack


def test_collision_of_two_elephants_on_one_uplink_is_resolved(te: LoomStack) -> None:
    rates, run = collide(te, seconds=10)
    busy_both = [t for t, a, b in rates if a > 0.6 * RATE and b > 0.6 * RATE]
    one_only = [t for t, a, b in rates[:4] if (a > 0.6 * RATE) != (b > 0.6 * RATE)]
    (te.run_dir / "collision.json").write_text(
        json.dumps({"rates": rates, "flows": [f.mbps for f in run.flows]})
    )
    assert one_only, f"expected the flows to start on one uplink: {rates[:6]}"
    assert busy_both, f"the collision was never resolved: {rates}"
    resolved_after = busy_both[0]
    assert resolved_after < 8 * POLL, f"resolved only after {resolved_after:.1f} s"
    assert all(f.mbps > 0.8 * RATE for f in run.flows), [f.mbps for f in run.flows]
    record = te.run_dir / "figures.json"
    record.write_text(
        json.dumps(
            {
                "collision_resolved_after_s": round(resolved_after, 2),
                "flows_mbps": [round(f.mbps, 2) for f in run.flows],
            }
        )
    )


def class_bytes(stack: LoomStack, switch: str, ports: tuple[int, ...]) -> dict[str, int]:
    """Bytes each DSCP class sent out of these switch ports, summed."""
    out: dict[str, int] = {}
    for port in ports:
        for name, c in class_counters(root_run, stack.net.intf(switch, port)).items():
            out[name] = out.get(name, 0) + c.bytes
    return out


def test_an_elephants_acks_cross_the_fabric_in_the_control_class(te: LoomStack) -> None:
    """h1 (e0_0) sends to h9 (e2_0): the data leaves e0_0 in bulk, and once the flow is an
    elephant its ACKs leave e2_0 in the control class (uplinks 3 and 4 at both)."""
    data0, acks0 = class_bytes(te, "e0_0", (3, 4)), class_bytes(te, "e2_0", (3, 4))
    marked: list[dict[str, Any]] = []

    def watch() -> None:
        time.sleep(3.0)
        marked.extend(f for f in te.api.get("/loom/v1/flows")["flows"] if f.get("ack_priority"))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    run = iperf3_flows(te.net, [("h1", "h9")], seconds=6, extra_args=("--cport", "40100"))
    watcher.join()
    data1, acks1 = class_bytes(te, "e0_0", (3, 4)), class_bytes(te, "e2_0", (3, 4))
    data = {k: data1[k] - data0[k] for k in data1}
    acks = {k: acks1[k] - acks0[k] for k in acks1}
    (te.run_dir / "ack_classes.json").write_text(
        json.dumps({"data_side": data, "ack_side": acks, "marked": marked})
    )
    # (the previous test's elephants may still be marked for the few polls they take to
    # stop being elephants; this flow's own ACK stream must be, its data must not be)
    names = [f["flow"] for f in marked]
    assert "tcp:10.2.0.2:5201->10.0.0.2:40100" in names, marked
    assert "tcp:10.0.0.2:40100->10.2.0.2:5201" not in names, marked
    assert data["bulk"] > 4_000_000 and data["control"] < 0.01 * data["bulk"], data
    assert acks["control"] > 50_000, acks  # ACKs (and only a few in bulk before marking)
    assert acks["bulk"] < acks["control"], acks
    assert run.flows[0].mbps > 0.8 * RATE


def scrape(url: str) -> dict[str, list[Any]]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_metrics_endpoint_serves_every_documented_metric(te: LoomStack) -> None:
    families = scrape(te.metrics_url)
    for doc in METRICS:
        base = doc.name[: -len("_total")] if doc.kind == "counter" else doc.name
        assert base in families, doc.name
    assert families["loom_switches_up"][0].value == 20
    util = families["loom_link_utilization_ratio"]
    assert len(util) == 64 and {s.labels["src_switch"] for s in util} >= {"e0_0", "c1"}
    tx = [s for s in families["loom_port_transmit_bytes"] if s.name.endswith("_total")]
    assert sum(s.value for s in tx) > 0


def test_real_prometheus_scrapes_loom(te: LoomStack, tmp_path: Path) -> None:
    target = te.metrics_url.split("//")[1].split("/")[0]
    with PrometheusProcess([target], tmp_path) as prom:
        up = prom.wait_for('up{job="loom"} == 1', timeout=20)
        assert up
        assert prom.wait_for("loom_links_up")[0]["value"][1] == "64"
        iperf3_flows(te.net, [("h3", "h12")], seconds=4)
        rate = prom.wait_for('sum(rate(loom_port_transmit_bytes_total{switch="e0_1"}[5s])) > 0')
        assert float(rate[0]["value"][1]) > 0
        elephants = prom.query("max_over_time(loom_elephant_flows[30s])")
        assert elephants and float(elephants[0]["value"][1]) >= 1
