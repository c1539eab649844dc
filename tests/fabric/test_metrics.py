"""The Prometheus exposition: every documented metric is served, with sensible values,
from a core that has discovered a fabric and tracked flows (fake fabric, no server)."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.engineer import TeConfig
from controller.fabric import FabricConfig
from controller.metrics import METRICS, LoomMetrics
from controller.model import GroupStats, PortStats
from tests.sim import LoomSim
from topologies import fat_tree

CONFIG = FabricConfig(poll_interval=0.2, link_capacity_mbps=10.0, te=TeConfig(te_interval=0.2))


def scrape(metrics: LoomMetrics) -> dict[str, list]:
    text = generate_latest(metrics.registry).decode()
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        out[family.name] = family.samples
    return out


def test_every_documented_metric_is_exposed() -> None:
    sim = LoomSim(fat_tree(4), CONFIG).start()
    metrics = LoomMetrics(sim.core)
    sim.start_flow("h1", "h5", 40001, mbps=9)
    sim.advance(1.5)
    sim.core.port_stats(sim.now, 1, [PortStats(1, 100, 200, 1, 2)])
    sim.core.group_stats(sim.now, 5, [GroupStats(12, (1, 2), (100, 200))])
    metrics.observe(sim.core.drain_timings())
    families = scrape(metrics)
    for doc in METRICS:
        base = doc.name[: -len("_total")] if doc.kind == "counter" else doc.name
        assert base in families, f"{doc.name} missing from /metrics"
        assert doc.name.startswith("loom_")
    values = {name: samples for name, samples in families.items()}
    assert values["loom_switches_up"][0].value == 20
    assert values["loom_links_up"][0].value == 64
    assert values["loom_hosts"][0].value == 16
    assert values["loom_elephant_flows"][0].value == 1
    links = values["loom_link_capacity_bits_per_second"]
    assert len(links) == 64 and all(s.value == 10e6 for s in links)
    assert {"src_switch", "src_port", "dst_switch", "dst_port"} <= set(links[0].labels)
    reroutes = {
        s.labels["reason"]: s.value for s in values["loom_reroutes"] if s.name.endswith("_total")
    }
    assert reroutes["new_elephant"] == 1
    hist = [s for s in values["loom_path_computation_seconds"] if s.name.endswith("_count")]
    assert {s.labels["kind"] for s in hist} == {"routes", "te"}
    buckets = [s for s in values["loom_group_bucket_bytes"] if s.name.endswith("_total")]
    assert [s.value for s in buckets] == [100, 200]
