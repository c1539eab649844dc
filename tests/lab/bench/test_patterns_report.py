"""Benchmark reporting on synthetic results: ratios, medians, table, figure (no emulation)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mininet_scenarios.bench.patterns import (
    _split,
    cport_base,
    modes_for,
    nonblocking_graph,
    parse_args,
)
from mininet_scenarios.bench.patterns_report import (
    FAT_TREE_ANCHORS,
    dragonfly_anchors,
    format_table,
    main,
    report,
    run_ratios,
    summarize,
    verdict,
)
from mininet_scenarios.workloads.patterns import FAT_TREE_PATTERNS
from topologies import dragonfly, fat_tree
from topologies.graph import host_list, validate

MODES = ["nonblocking", "ecmp", "loom", "faucet"]
PATTERNS = list(FAT_TREE_PATTERNS)
# Synthetic ratios per mode; seed 2 is 0.1 lower than seed 1 (except the denominator).
RATIO = {"nonblocking": 1.0, "ecmp": 0.6, "loom": 0.97, "faucet": 0.3}


def run(mode: str, pattern: str, seed: int, agg: float | None) -> dict[str, Any]:
    return {"mode": mode, "pattern": pattern, "seed": seed, "aggregate_mbps": agg}


def synthetic() -> list[dict[str, Any]]:
    runs = []
    for p in PATTERNS:
        for seed in (1, 2, 3):
            base = 60.0 + seed  # absolute numbers drift by seed; ratios must not care
            for m in MODES:
                r = RATIO[m] - (0.1 if seed == 2 and m != "nonblocking" else 0.0)
                runs.append(run(m, p, seed, base * r))
    return runs


def test_ratios_pair_runs_by_pattern_and_seed() -> None:
    ratios = run_ratios(synthetic())
    for x in ratios:
        want = RATIO[x["mode"]] - (0.1 if x["seed"] == 2 and x["mode"] != "nonblocking" else 0)
        assert x["ratio"] == pytest.approx(want)


def test_ratio_missing_or_failed_denominator_is_none() -> None:
    runs = [
        run("ecmp", "stride4", 1, 30.0),
        run("nonblocking", "stride4", 2, 0.0),
        run("ecmp", "stride4", 2, 30.0),
        run("nonblocking", "stride8", 1, 60.0),
        run("ecmp", "stride8", 1, None),
    ]
    assert [x["ratio"] for x in run_ratios(runs)] == [None, None, None, 1.0, None]


def test_summary_median_over_seeds_and_range() -> None:
    s = summarize(synthetic(), PATTERNS, MODES)
    cell = s["stride4"]["ecmp"]
    assert cell.median == pytest.approx(0.6)  # median of 0.6, 0.5, 0.6
    assert cell.low == pytest.approx(0.5)
    assert cell.high == pytest.approx(0.6)
    assert s["stride4"]["nonblocking"].mbps == pytest.approx(62.0)
    assert s["stride4"]["faucet"].median == pytest.approx(0.3)


def test_table_has_every_pattern_and_mode() -> None:
    s = summarize(synthetic(), PATTERNS, MODES)
    table = format_table(s, PATTERNS, MODES, FAT_TREE_ANCHORS)
    lines = table.splitlines()
    header = lines[0]
    for m in MODES:
        assert m in header
    assert "nonblocking (Mbit/s)" in header
    assert len(lines) == 2 + len(PATTERNS)
    for p, line in zip(PATTERNS, lines[2:], strict=True):
        assert line.startswith(p)
        assert "0.60 [0.50-0.60]" in line and "0.97 [0.87-0.97]" in line
    stride4 = lines[2 + PATTERNS.index("stride4")]
    assert "ideal ECMP 0.62" in stride4 and "yes (>= 0.95)" in stride4
    hotspot = lines[2 + PATTERNS.index("hotspot")]
    assert hotspot.rstrip().endswith("-")  # no target on the sanity pattern


def test_table_with_missing_mode_shows_dash() -> None:
    runs = [r for r in synthetic() if r["mode"] != "faucet"]
    table = format_table(summarize(runs, PATTERNS, MODES), PATTERNS, MODES)
    assert all(" - " in line for line in table.splitlines()[2:])


def test_verdicts() -> None:
    s = summarize(synthetic(), PATTERNS, MODES)
    assert verdict("random", s["random"], "fat_tree") == "yes (>= 0.92)"
    low = {"loom": s["random"]["ecmp"]}
    assert verdict("stride4", low, "fat_tree").startswith("NO")
    df = {"minimal": s["random"]["faucet"], "valiant": s["random"]["ecmp"]}
    assert verdict("df-uniform", {**df, "loom": s["random"]["loom"]}, "dragonfly") == "yes (+0.37)"
    assert verdict("df-uniform", {**df, "loom": s["random"]["faucet"]}, "dragonfly").startswith(
        "NO"
    )


def doc(runs: list[dict[str, Any]], kind: str = "fat_tree") -> dict[str, Any]:
    return {
        "patterns": PATTERNS,
        "modes": MODES,
        "seeds": [1, 2, 3],
        "fabric": {"name": "fat_tree(4)", "kind": kind},
        "link_rate_mbps": 5,
        "anchors": FAT_TREE_ANCHORS,
        "runs": runs,
    }


def test_report_writes_png(tmp_path: Path) -> None:
    table, png = report(doc(synthetic()), tmp_path)
    assert png == tmp_path / "patterns.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000
    assert "stag(0.2,0.3)" in table


def test_report_dragonfly_png_name_and_no_runs(tmp_path: Path) -> None:
    _, png = report(doc(synthetic(), kind="dragonfly"), tmp_path)
    assert png is not None and png.name == "dragonfly.png"
    _, none = report(doc([]), tmp_path / "empty")
    assert none is None


def test_main_replots_saved_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc(synthetic())))
    assert main([str(path)]) == 0
    assert "randbij" in capsys.readouterr().out
    assert (tmp_path / "patterns.png").exists()


def test_nonblocking_graph_keeps_host_identity() -> None:
    ft = fat_tree(4, rate_mbps=5)
    nb = nonblocking_graph(ft)
    validate(nb)
    assert host_list(nb) == host_list(ft)
    for h in host_list(ft):
        for key in ("mac", "ip", "group", "index"):
            assert nb.nodes[h][key] == ft.nodes[h][key]
        assert nb.nodes[h]["switch"] == "nb1"
    assert {d["rate_mbps"] for _, _, d in nb.edges(data=True)} == {5.0}
    assert sum(1 for _, d in nb.nodes(data=True) if d["kind"] == "switch") == 1


def test_cport_base_stable_and_seed_dependent() -> None:
    assert cport_base("stride4", 1) == cport_base("stride4", 1)
    assert len({cport_base("stride4", s) for s in range(1, 6)}) == 5
    assert all(20000 <= cport_base(p, s) <= 65535 - 64 for p in PATTERNS for s in range(9))


def test_modes_and_cli_defaults() -> None:
    assert list(modes_for("fat-tree", 5)) == [*MODES, "loom-moves"]
    assert modes_for("fat-tree", 5, plain=True)["loom-moves"].env == {"LOOM_KEEP_PLACED": "off"}
    assert modes_for("fat-tree", 5)["loom"].env["LOOM_LINK_CAPACITY_MBPS"] == "5"
    assert modes_for("fat-tree", 5)["ecmp"].env == {"LOOM_TE": "off"}
    assert modes_for("dragonfly", 5)["valiant"].env["LOOM_PATH_POLICY"] == "valiant"
    args = parse_args([])
    assert args.mode_list == MODES and args.pattern_list == PATTERNS
    assert args.out == Path("results/patterns")
    args = parse_args(["--fabric", "dragonfly"])
    assert args.mode_list == ["nonblocking", "minimal", "valiant", "loom"]
    assert args.pattern_list == ["df-uniform", "df-adversarial"]
    assert _split("stride4,stag(0.2,0.3), random") == ["stride4", "stag(0.2,0.3)", "random"]


def test_dragonfly_anchor_is_global_links_over_hosts_per_group() -> None:
    assert dragonfly_anchors(dragonfly(a=4, p=1, h=1, g=5))["df-adversarial"] == {
        "minimal cap": 0.25,
        "Valiant cap": 0.5,
    }
    # a*h = 4 global ports, 2 other groups: two links per group pair.
    assert dragonfly_anchors(dragonfly(a=2, p=2, h=2, g=3))["df-adversarial"]["minimal cap"] == 0.5


def test_faucet_mode_is_skipped_with_a_reason_when_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import importlib

    import mininet_scenarios.bench.patterns as bp

    def no_module(name: str) -> None:
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(importlib, "import_module", no_module)
    assert "harness.faucet" in (bp.faucet_unavailable() or "")
    monkeypatch.undo()
    monkeypatch.setattr(bp, "FAUCET_VENV", tmp_path / "no-venv")
    assert "make faucet-venv" in (bp.faucet_unavailable() or "")


def test_cpu_window_keeps_the_middle_of_the_flows(tmp_path: Path) -> None:
    from mininet_scenarios.bench.flowruns import cpu_window

    go = tmp_path / "go"
    go.touch()
    os.utime(go, (1002.0, 1002.0))  # flows started 2 s after sampling began
    samples = [float(k) for k in range(30)]  # 0.5 s each from t=1000
    kept = cpu_window(samples, 1000.0, go, 10.0)  # window 1003..1011
    assert kept == [float(k) for k in range(6, 22)]
    assert cpu_window(samples, 1000.0, tmp_path / "missing", 10.0) == samples


def test_whole_flow_ratios_and_placement_steady_times_are_reported_beside_trimmed() -> None:
    from mininet_scenarios.bench.patterns_report import WHOLE

    runs = synthetic()
    for r in runs:  # whole flows lose a first second's collision under loom and ecmp
        r[WHOLE] = r["aggregate_mbps"] * (1.0 if r["mode"] == "nonblocking" else 0.9)
        if r["mode"] == "loom":
            r["placement_steady_s"] = 1.5 * r["seed"]
            r["flows"] = [{"last_moved_s": 1.5 * r["seed"]}, {"last_moved_s": None}]
    whole = {(x["mode"], x["seed"]): x["ratio"] for x in run_ratios(runs, figure=WHOLE)}
    assert whole[("loom", 1)] == pytest.approx(0.97 * 0.9)
    doc = {"patterns": ["stride4", "random"], "modes": MODES, "runs": runs, "seeds": [1, 2, 3]}
    table, _ = report(doc, Path("/nonexistent"))
    trimmed, rest = table.split("whole flows, first byte to last:")
    assert "stride4" in trimmed and "0.97" in trimmed
    # 0.97 * 0.9 < 0.95: the whole-flow table says so for random too (a 0.95 target there)
    assert rest.count("NO (>= 0.95)") == 2
    assert "loom 3.0 [3]" in rest  # median of 1.5, 3.0, 4.5; one flow moved per seed


def test_last_moves_match_iperf_flows_to_loom_flows_by_their_ports() -> None:
    from types import SimpleNamespace

    from mininet_scenarios.bench.flowruns import last_moves, steady_after

    graph = fat_tree(4)
    hosts = host_list(graph)
    flows = [SimpleNamespace(sender=hosts[0], receiver=hosts[5], port=5201)] * 2
    ip = [graph.nodes[h]["ip"] for h in (hosts[0], hosts[5])]
    tracked = [{"flow": f"tcp:{ip[0]}:40000->{ip[1]}:5201", "last_moved_s": 0.8}]
    moved = last_moves(graph, flows, 40000, tracked)
    assert moved == [0.8, "untracked"]
    assert steady_after(moved) == 0.8
    assert last_moves(graph, flows, 40000, None) is None and steady_after(None) is None
    assert steady_after([None, "untracked"]) == 0.0


def test_cpu_of_the_busiest_ovs_thread_and_the_controller_is_reported_per_run() -> None:
    from mininet_scenarios.harness.cpu import cpu_used

    before = (10.0, {7: ("pmd-c01", 1.0), 8: ("handler1", 0.5)}, {9: ("ryu", 2.0)})
    after = (12.0, {7: ("pmd-c01", 2.9), 8: ("handler1", 0.7)}, {9: ("ryu", 2.5)})
    assert cpu_used(before, after) == {"ovs_busiest_pct": 95.0, "controller_cpu_pct": 25.0}
    assert cpu_used(before, (12.0, {}, {})) == {
        "ovs_busiest_pct": None,
        "controller_cpu_pct": None,
    }
    runs = synthetic()
    for r in runs:
        r["ovs_busiest_pct"], r["controller_cpu_pct"] = 90.0 + r["seed"], 10.0 * r["seed"]
    doc = {"patterns": ["stride4"], "modes": MODES, "runs": runs, "seeds": [1, 2, 3]}
    table, _ = report(doc, Path("/nonexistent"))
    assert "ovs-vswitchd busiest thread / controller" in table
    assert "loom 92/20" in table  # medians over the three seeds


def test_short_flows_are_allowed_down_to_two_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["--seconds", "2"]).seconds == 2
    with pytest.raises(SystemExit):
        parse_args(["--seconds", "1"])
    assert "--seconds >= 2" in capsys.readouterr().err
