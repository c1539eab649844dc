"""The Prometheus exposition: every documented metric is served, with sensible values,
from a core that has discovered a fabric and tracked flows (fake fabric, no server)."""

from __future__ import annotations

from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.metrics import METRICS, LoomMetrics
from controller.model import GroupStats, PortStats
from tests.sim import LoomSim
from topologies import fat_tree

CONFIG = FabricConfig(poll_interval=0.2, link_capacity_mbps=10.0, te=TeConfig(te_interval=0.2))


def scrape(metrics: LoomMetrics) -> dict[str, list[Any]]:
    text = generate_latest(metrics.registry).decode()
    out: dict[str, list[Any]] = {}
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
    transits = values["loom_link_lldp_transit_seconds"]  # every link timed by its LLDP
    assert len(transits) == 64 and all(0.0 <= s.value < 1.0 for s in transits)
    reroutes = {
        s.labels["reason"]: s.value for s in values["loom_reroutes"] if s.name.endswith("_total")
    }
    assert reroutes["new_elephant"] == 0  # placed at its first packet: never moved
    placed = [s.value for s in values["loom_flows_placed"] if s.name.endswith("_total")]
    assert placed == [1]
    hist = [s for s in values["loom_path_computation_seconds"] if s.name.endswith("_count")]
    assert {s.labels["kind"] for s in hist} == {"routes", "te"}
    buckets = [s for s in values["loom_group_bucket_bytes"] if s.name.endswith("_total")]
    assert [s.value for s in buckets] == [100, 200]


def test_reroute_latency_is_timed_to_the_last_barrier_reply() -> None:
    """A PortStatus's reroute counts as done when every switch it modified has answered its
    barrier; a fence with a switch that disconnected never yields a time."""
    from controller.model import PortDesc
    from controller.ofp.barriers import BarrierFences, modified_switches

    sim = LoomSim(fat_tree(4), CONFIG).start()
    metrics = LoomMetrics(sim.core)
    (dpid, port) = min(sim.view.links)
    messages = sim.core.port_status(sim.now, dpid, PortDesc(port, up=False))
    changed = modified_switches(messages)  # a dead link: several switches get new rules
    assert len(changed) > 1 and set(changed) <= set(messages)

    fences = BarrierFences(expire_after=5.0)
    fences.start(10.0, 9.99, [(1, 100), (2, 200)])
    assert fences.reply(10.01, 1, 100) is None
    assert fences.reply(10.02, 9, 999) is None  # not ours (e.g. a clear_switch barrier)
    done = fences.reply(10.04, 2, 200)
    assert done is not None and abs(done - 0.05) < 1e-9
    metrics.rerouted(done)
    fences.start(11.0, 11.0, [(3, 1), (4, 2)])
    fences.switch_gone(4)
    assert fences.reply(11.1, 3, 1) is None and len(fences) == 0
    fences.start(12.0, 12.0, [(5, 1)])
    fences.start(20.0, 20.0, [])  # expires the fence of 12.0
    assert len(fences) == 0 and fences.reply(20.1, 5, 1) is None

    families = scrape(metrics)
    samples = {
        (s.name, s.labels.get("le")): s.value for s in families["loom_reroute_latency_seconds"]
    }
    assert samples[("loom_reroute_latency_seconds_count", None)] == 1
    assert samples[("loom_reroute_latency_seconds_bucket", "0.04")] == 0
    assert samples[("loom_reroute_latency_seconds_bucket", "0.05")] == 1
