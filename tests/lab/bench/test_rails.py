"""The rails benchmark without a network: its plan, the rank orders and their cross-rail
hops, the jobs' NICs, the policy, and the figures, table and plot from saved runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller.policy.loader import load_policy
from mininet_scenarios.bench.rails import (
    cross_rail_hops,
    default_order,
    fabric,
    job_hosts,
    one_switch_graph,
    parse_args,
    plan,
    policy_yaml,
    rail_aware_order,
)
from mininet_scenarios.bench.rails_report import figures, plot, table, verdict
from topologies.graph import host_list

ARGS = parse_args([])
RAILS = fabric(ARGS)
NICS = host_list(RAILS)


def test_the_plan_runs_ecmp_with_the_default_order_only_and_one_switch_as_reference() -> None:
    runs = plan(["allreduce", "alltoall", "jobs"], ["one-switch", "ecmp", "loom"])
    keys = [r.key for r in runs]
    assert len(set(keys)) == len(keys)
    assert [r.mode for r in runs] == sorted(
        (r.mode for r in runs), key=["one-switch", "ecmp", "loom"].index
    )  # grouped by mode: one network each
    assert {k for k in keys if k.startswith("ecmp/")} == {
        "ecmp/allreduce/default",
        "ecmp/alltoall/default",
        "ecmp/jobs/default",
    }
    assert {"loom/allreduce/default", "loom/allreduce/rail", "loom/jobs/rail"} <= set(keys)
    assert "one-switch/alltoall/rail" not in keys  # an all-to-all's pairs ignore the order
    assert "one-switch/allreduce/rail" in keys


def test_the_default_order_numbers_server_by_server_and_crosses_rails_between_them() -> None:
    order = default_order(RAILS, list(reversed(NICS)))
    assert order == NICS  # s1n0 s1n1 .. s4n3, as torchrun numbers node after node
    assert cross_rail_hops(RAILS, order) == [3, 7, 11, 15]  # s1n3 -> s2n0, ..., s4n3 -> s1n0


def test_the_rail_aware_order_keeps_servers_together_and_every_hop_on_a_rail() -> None:
    order = rail_aware_order(RAILS, NICS)
    assert sorted(order) == sorted(NICS)
    servers = [RAILS.nodes[h]["server"] for h in order]
    assert servers == [s for s in ("s1", "s2", "s3", "s4") for _ in range(4)]
    assert cross_rail_hops(RAILS, order) == []
    # as docs/schedulers.md shows it: server 1 NIC 0,2,3,1, server 2 NIC 1,2,3,0, ...
    assert [RAILS.nodes[h]["nic"] for h in order[:8]] == [0, 2, 3, 1, 1, 2, 3, 0]


def test_jobs_take_a_block_of_nics_on_every_server() -> None:
    one, two = job_hosts(RAILS, "jobs", 2)
    assert {RAILS.nodes[h]["nic"] for h in one} == {0, 1}
    assert {RAILS.nodes[h]["nic"] for h in two} == {2, 3}
    assert len(one) == len(two) == 8
    assert job_hosts(RAILS, "allreduce", 2) == [NICS]
    for hosts in (one, two):
        assert cross_rail_hops(RAILS, default_order(RAILS, hosts)) == [1, 3, 5, 7]
        assert cross_rail_hops(RAILS, rail_aware_order(RAILS, hosts)) == []


def test_the_fabric_spans_two_units_and_one_switch_keeps_the_servers() -> None:
    assert RAILS.graph["params"]["servers_per_su"] == 2
    assert RAILS.nodes["s3n0"]["switch"] != RAILS.nodes["s1n0"]["switch"]  # a spine between
    g = one_switch_graph(RAILS)
    for h in NICS:
        assert {k: g.nodes[h][k] for k in ("ip", "mac", "server", "nic")} == {
            k: RAILS.nodes[h][k] for k in ("ip", "mac", "server", "nic")
        }


def test_the_policy_holds_every_nic_in_one_tenant_and_declares_the_servers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(policy_yaml(RAILS))
    policy = load_policy(path)
    assert [t.name for t in policy.tenants] == ["bench"]
    assert len(policy.tenants[0].hosts) == 16
    assert [s.name for s in policy.servers] == ["s1", "s2", "s3", "s4"]
    assert [len(s.nics) for s in policy.servers] == [4, 4, 4, 4]


def test_options() -> None:
    quick = parse_args(["--quick"])
    assert (quick.mib, quick.iters, quick.scenario_list) == (1.0, 1, ["allreduce"])
    assert ARGS.scenario_list == ["allreduce", "alltoall", "jobs"]
    for bad in (["--jobs", "3"], ["--modes", "nope"], ["--scenarios", "ring"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


def _run(mode: str, scen: str, order: str, *busbw: float, busy: float = 20.0) -> dict[str, Any]:
    return {
        "key": f"{mode}/{scen}/{order}",
        "mode": mode,
        "scenario": scen,
        "order": order,
        "jobs": [
            {
                "busbw_mbps": b,
                "link_mbps": 10.0,
                "check_ok": True,
                "alone_mbps": None,
                "cross_rail_hops": [3, 7] if order == "default" else [],
            }
            for b in busbw
        ],
        "ovs_busy_mean": busy,
        "cpu_idle_mean": 50.0,
    }


RUNS = [
    _run("one-switch", "allreduce", "default", 9.0),
    _run("one-switch", "allreduce", "rail", 10.0),
    _run("one-switch", "alltoall", "default", 8.0),
    _run("one-switch", "jobs", "default", 9.0, 8.0),
    _run("ecmp", "allreduce", "default", 4.5, busy=95.0),
    _run("ecmp", "alltoall", "default", 6.0),
    _run("ecmp", "jobs", "default", 9.0, 4.0),
    _run("loom", "allreduce", "rail", 9.6),
    _run("loom", "alltoall", "rail", 8.0),
    {"key": "loom/jobs/rail", "mode": "loom", "scenario": "jobs", "order": "rail", "error": "x"},
]


def test_figures_divide_by_link_and_by_the_same_scenario_and_order_on_one_switch() -> None:
    figs = figures(RUNS)
    assert figs["allreduce"]["ecmp/default"]["over_link"] == pytest.approx(0.45)
    assert figs["allreduce"]["ecmp/default"]["over_one_switch"] == pytest.approx(0.5)
    assert figs["allreduce"]["loom/rail"]["over_one_switch"] == pytest.approx(0.96)
    assert figs["allreduce"]["loom/rail"]["cross_rail_hops"] == 0
    assert figs["allreduce"]["ecmp/default"]["cross_rail_hops"] == 2
    # the all-to-all's one-switch run has the default order only: it serves every order
    assert figs["alltoall"]["loom/rail"]["over_one_switch"] == pytest.approx(1.0)
    jobs = figs["jobs"]["ecmp/default"]
    assert jobs["over_one_switch"] == pytest.approx((1.0 + 0.5) / 2)
    assert jobs["worst_over_one_switch"] == pytest.approx(0.5)
    assert "loom/rail" not in figs["jobs"]  # failed runs have no figure
    assert "0.960, met; ECMP with the default order 0.500 (of that order on one switch;" in (
        verdict(figs)
    )


def test_table_and_plot(tmp_path: Path) -> None:
    doc = {
        "runs": RUNS,
        "args": {"rate": 10.0, "mib": 8.0},
        "fabric": {"servers": 4, "nics": 4, "spines": 2},
    }
    text = table(doc)
    assert "busbw / one switch" in text and "FAILED: x" in text
    assert "the emulator's" in text and "allreduce ecmp/default" in text
    png = plot(doc, tmp_path)
    assert png is not None and png.stat().st_size > 10_000
