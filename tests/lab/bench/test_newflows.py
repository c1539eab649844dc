"""The new-flows benchmark on a k=4 fat-tree: a flow placed at its first packet costs its
accounting rule and at most one transit pin (at the aggregation switch it climbs to the
core from), a flow left to hashing only the accounting rule, and every switch holds what
the core believes in both modes."""

from __future__ import annotations

from pathlib import Path

from mininet_scenarios.bench.newflows import main, run_mode


def test_placement_adds_at_most_one_transit_rule_per_flow() -> None:
    off = run_mode("fat_tree:k=4", False, rate=100.0, seconds=4.0, seed=1)
    on = run_mode("fat_tree:k=4", True, rate=100.0, seconds=4.0, seed=1)
    for r in (off, on):
        assert r["settled"] and r["mismatched_switches"] == 0, r
        assert r["new_flows_per_s"] == 100.0
    assert off["flow_mods_total_per_s"] == 100.0 and off["pinned_flows"] == 0
    per_flow = on["flow_mods_total_per_s"] / on["new_flows_per_s"]
    assert 1.5 < per_flow <= 2.0, on  # 12 of 15 other hosts are in another pod
    assert on["rules_held"] > off["rules_held"]


def test_main_writes_the_results_and_the_table(tmp_path: Path) -> None:
    args = ["--fabrics", "fat_tree:k=4", "--rate", "50", "--seconds", "2", "--out", str(tmp_path)]
    assert main(args) == 0
    assert (tmp_path / "results.json").exists()
    assert "fat_tree:k=4" in (tmp_path / "table.txt").read_text()
