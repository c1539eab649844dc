"""The TE model on a k=4 fat-tree: nonblocking gives every flow of a permutation its whole
link, hashing collides a pod-crossing stride, Loom's real core (fed the modelled counters)
places it at full rate, the wire's counters follow the modelled rates, and the command
writes what the docs cite; the k=4 check reads a patterns results.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mininet_scenarios.bench.patterns import cport_base
from mininet_scenarios.bench.te_model import (
    bring_up,
    main,
    run_ecmp,
    run_loom,
    run_nonblocking,
    scenarios_of,
    split_list,
)
from mininet_scenarios.bench.te_model_sim import (
    FreshTracer,
    LinkMap,
    Meter,
    Simulation,
    TrafficWire,
    iperf_tests,
)
from mininet_scenarios.workloads.patterns import by_name as pattern_by_name
from topologies import by_name

K4 = "fat_tree:k=4,rate_mbps=4"


@pytest.fixture(scope="module")
def loom() -> TrafficWire:
    return bring_up(K4, "loom", None)[0]


@pytest.fixture(scope="module")
def ecmp() -> TrafficWire:
    return bring_up(K4, "ecmp", None)[0]


def scenario(name: str, seed: int = 1) -> Any:
    return scenarios_of(K4, [name], [seed])[0]


def test_nonblocking_gives_every_flow_of_a_permutation_its_link() -> None:
    links = LinkMap.of(by_name(K4))
    for name in ("stride4", "randbij"):
        got = run_nonblocking(links, scenario(name))
        assert got["worst_over_link"] == pytest.approx(1.0), name
        assert got["aggregate_mbps"] == pytest.approx(16 * 4.0), name


def test_nonblocking_shares_a_receiver_that_two_flows_send_to() -> None:
    links = LinkMap.of(by_name(K4))
    got = run_nonblocking(links, scenario("hotspot"))
    assert got["aggregate_mbps"] == pytest.approx(4.0)  # one receiver's link
    assert got["worst_over_link"] == pytest.approx(1 / 15)


def test_hashing_a_pod_crossing_stride_collides(ecmp: TrafficWire) -> None:
    links, sc = LinkMap.of(ecmp.graph), scenario("stride4")
    got = run_ecmp(ecmp, links, sc, draws=4, base=64.0)
    assert got["draws"] == 4
    assert got["max"] < 1.0, got  # 16 flows over 4 cores, 2 choices a hop: no draw is clean
    assert len(set(got["ratios"])) > 1, "the salts should give different draws"


def test_ecmp_leaves_first_packets_to_the_switches(ecmp: TrafficWire) -> None:
    tracer = FreshTracer(ecmp)
    test = iperf_tests(scenario("stride4").matrix, 20000, "t")[0]
    assert tracer.copied_by(test.data) is None  # TE off: no catch rule


def test_loom_places_a_pod_crossing_stride_at_full_rate(loom: TrafficWire) -> None:
    links, sc = LinkMap.of(loom.graph), scenario("stride4")
    got = run_loom(loom, links, sc, seconds=4.0, base=64.0, label="test")
    assert got["steady"] >= 0.95 and got["whole"] >= 0.95, got
    assert got["tracked_data_flows"] == 16
    assert got["caught_first_packets"] == 64  # control, data and both ACK streams
    assert got["per_flow"] is not None and len(got["per_flow"]["end_mbps"]) == 16
    assert not loom.fabric.sources.te.flows.flows, "drained: no flow tracked after the run"


def test_the_wire_counts_what_the_model_sends(loom: TrafficWire) -> None:
    """Port counters and the accounting rules' counters grow at the solved rates."""
    sc = scenario("randbij", 2)
    sim = Simulation(loom, LinkMap.of(loom.graph), iperf_tests(sc.matrix, sc.cport_base, "w"))
    sim.start()
    first = sim.tests[0]
    ingress = loom.where[first.src]
    before = loom.rx[ingress].value(loom.now)
    flow_meter = loom.flow_meters[(ingress[0], sim.keys[0])]
    counted = flow_meter.value(loom.now)
    for _ in range(10):
        sim.tick()
    rate = sim.rates[0] * 125_000  # bytes/s
    assert flow_meter.value(loom.now) - counted == pytest.approx(rate * 1.0, rel=0.3)
    assert loom.rx[ingress].value(loom.now) - before == pytest.approx(rate * 1.0, rel=0.3)
    stats = {s.port_no: s for s in loom._port_stats(ingress[0])}
    assert stats[ingress[1]].rx_bytes >= int(loom.rx[ingress].value(loom.now))
    sim.stop()
    sim.drain(quiet_s=1.0)


def test_a_meter_integrates_a_piecewise_constant_rate() -> None:
    m = Meter(10.0)
    m.set_rate(0.0, 100.0)
    m.set_rate(2.0, 50.0)
    assert m.value(4.0) == pytest.approx(10 + 200 + 100)


def test_tests_follow_iperf3s_ports() -> None:
    tests = iperf_tests([("h1", "h2"), ("h3", "h2"), ("h2", "h1")], 30000, "x")
    assert [t.server_port for t in tests] == [5201, 5202, 5201]
    assert [t.cport for t in tests] == [30000, 30001, 30002]
    assert all(32768 <= t.control_port < 61000 for t in tests)


def test_lists_split_outside_parentheses_and_join_spec_arguments() -> None:
    assert split_list("stride4,stag(0.5,0.3),random") == ["stride4", "stag(0.5,0.3)", "random"]
    specs = split_list("fat_tree:k=4,rate_mbps=4,fat_tree:k=8", joins=lambda p: ":" not in p)
    assert specs == ["fat_tree:k=4,rate_mbps=4", "fat_tree:k=8"]


def test_main_writes_the_figures_the_docs_cite(tmp_path: Path) -> None:
    args = ["--fabrics", K4, "--patterns", "stride4", "--seeds", "1", "--seconds", "3"]
    assert main([*args, "--draws", "2", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    run = doc["runs"][0]
    assert {"nonblocking", "ecmp", "loom"} <= run.keys()
    assert {"median", "min", "max", "ratios", "worst_over_link"} <= run["ecmp"].keys()
    for key in ("steady", "trimmed", "whole", "worst_over_link", "moves"):
        assert key in run["loom"], key
    assert {"placement_steady_s", "tracked_data_flows", "core_s", "wall_s"} <= run["loom"].keys()
    assert doc["fabrics"][0]["loom"]["bringup_wall_s"] >= 0
    table = (tmp_path / "table.txt").read_text()
    assert "stride4" in table and "yes (>= 0.95)" in table
    assert (tmp_path / "te_model.png").stat().st_size > 0


def measured_doc() -> dict[str, Any]:
    """A patterns results.json of two runs per mode, by hand: ecmp at 0.6, loom at 1.0."""
    graph = by_name(K4)
    matrix = pattern_by_name("stride4").matrix(graph, 1)
    runs = []
    for mode, share in (("nonblocking", 1.0), ("ecmp", 0.6), ("loom", 1.0)):
        runs.append(
            {
                "mode": mode,
                "pattern": "stride4",
                "seed": 1,
                "cport_base": cport_base("stride4", 1),
                "matrix": [list(p) for p in matrix],
                "aggregate_mbps": 60.0 * share,
                "whole_aggregate_mbps": 58.0 * share,
            }
        )
    return {
        "fabric": {"params": {"k": 4, "rate_mbps": 4.0}},
        "link_rate_mbps": 4.0,
        "plain": True,
        "modes": ["nonblocking", "ecmp", "loom"],
        "runs": runs,
    }


def test_check_k4_models_the_recorded_matrices(tmp_path: Path) -> None:
    measured = tmp_path / "measured.json"
    measured.write_text(json.dumps(measured_doc()))
    out = tmp_path / "out"
    args = ["--check-k4", "--measured", str(measured), "--seconds", "3", "--draws", "4"]
    assert main([*args, "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["reported_mbps"] == 10_000.0  # plain: the ports report a veth's speed
    rows = {(r["mode"], r["figure"]): r for r in doc["check"]}
    assert set(rows) == {(m, f) for m in ("ecmp", "loom") for f in ("trimmed", "whole")}
    loom = rows[("loom", "trimmed")]
    assert loom["measured"] == pytest.approx(1.0) and loom["within"] is True, loom
    ecmp = rows[("ecmp", "trimmed")]
    assert ecmp["measured"] == pytest.approx(0.6) and ecmp["model"] < 0.9, ecmp
    assert "within ±5%" in (out / "table.txt").read_text()
