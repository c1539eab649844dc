"""The collectives-at-cluster-scale benchmark without a network: its plan, the jobs and
tenants of a run, its options, and the report's figures, table and plot from a saved
results document (built with the program's own record functions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.policy.loader import load_policy
from controller.vocabulary import NAME_RE
from mininet_scenarios.bench.collectives_jobs import (
    Run,
    churn_record,
    job_plans,
    mix_record,
    parse_args,
    plan,
    tenant_policy,
    tenants_of,
)
from mininet_scenarios.bench.collectives_jobs_report import (
    crowded_links,
    figures,
    job_rows,
    plot,
    table,
)
from mininet_scenarios.bench.sidebyside import jobs_figures
from mininet_scenarios.workloads.collectives.model import JobPlan, PhaseResult, label_spans
from mininet_scenarios.workloads.collectives.multijob import ChurnResult, MixResult
from topologies import fat_tree
from topologies.graph import host_list

FAT = fat_tree(4)
HOSTS = host_list(FAT)


# --------------------------------------------------------------------------- plan and jobs


def test_the_plan_runs_every_mix_per_seed_and_the_churn_once_per_mode() -> None:
    runs = plan(["4x4", "2x8"], seeds=2, modes=["ecmp", "loom"], churn=True)
    keys = [r.key for r in runs]
    assert len(set(keys)) == len(keys) == 10
    assert keys[:5] == [
        "ecmp/4x4/seed1",
        "ecmp/churn",  # right after the mix whose deal (and tenants) it uses
        "ecmp/2x8/seed1",
        "ecmp/4x4/seed2",
        "ecmp/2x8/seed2",
    ]
    assert [r.mode for r in runs] == ["ecmp"] * 5 + ["loom"] * 5  # one network per mode
    assert [r.key for r in plan(["2x8"], 1, ["loom"], churn=False)] == ["loom/2x8/seed1"]
    assert [r.key for r in plan(["2x8"], 1, ["loom"], churn=True)] == [
        "loom/2x8/seed1",
        "loom/churn",
    ]


def test_each_job_has_its_own_tenant_port_and_name_on_a_disjoint_deal() -> None:
    for run in (Run("loom", "mix", "4x4", 1), Run("loom", "mix", "2x8", 3)):
        plans = job_plans(run, HOSTS)
        jobs, ranks = (4, 4) if run.mix == "4x4" else (2, 8)
        assert [p.tenant for p in plans] == [f"t{j}" for j in range(1, jobs + 1)]
        assert all(len(p.hosts) == ranks and p.op == "all_reduce" for p in plans)
        assert sorted(h for p in plans for h in p.hosts) == sorted(HOSTS)
        assert len({p.port for p in plans}) == jobs
        assert all(NAME_RE.match(p.name) for p in plans)  # Loom accepts the names
    churn = job_plans(Run("loom", "churn", "4x4", 1), HOSTS)
    mix = job_plans(Run("loom", "mix", "4x4", 1), HOSTS)
    assert [p.hosts for p in churn] == [p.hosts for p in mix]  # the first seed's deal
    assert not {p.port for p in churn} & {p.port for p in mix}
    assert not {p.name for p in churn} & {p.name for p in mix}


def test_the_tenant_policy_is_one_loom_accepts(tmp_path: Path) -> None:
    plans = job_plans(Run("ecmp", "mix", "2x8", 1), HOSTS)
    path = tmp_path / "policy.yaml"
    path.write_text(tenant_policy(FAT, tenants_of(plans)))
    policy = load_policy(path)  # the controller's own loader and validation
    assert [t.name for t in policy.tenants] == ["t1", "t2"]
    ips = {t.name: sorted(str(h.ip) for h in t.hosts) for t in policy.tenants}
    assert ips["t1"] == sorted(str(FAT.nodes[h]["ip"]) for h in plans[0].hosts)
    assert policy.fabric.unassigned_hosts == "deny"


def test_options() -> None:
    quick = parse_args(["--quick"])
    assert (quick.mib, quick.iters, quick.seeds, quick.churn_iters) == (4.0, 2, 1, (2, 1, 2))
    full = parse_args(["--seeds", "3"])
    assert (full.mib, full.iters, full.seeds, full.churn_iters) == (16.0, 3, 3, (3, 2, 3))
    assert full.mix_list == ["4x4", "2x8"] and full.mode_list == ["ecmp", "loom"]
    plain = parse_args(["--plain"])
    assert plain.queue_bytes == 0 and plain.out.name == "collectives-jobs-plain"
    assert parse_args([]).queue_bytes == 30 * 9014
    assert parse_args(["--churn", "4,1,5", "--mixes", "2x8"]).churn_iters == (4, 1, 5)
    for bad in (["--mixes", "3x5"], ["--modes", "faucet"], ["--churn", "1,2"], ["--churn", "a"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


# --------------------------------------------------------------------------- the report

LINK = 10.0


def _phase(
    name: str, busbw: list[float], t0: float, retrans: list[int] | None = None
) -> PhaseResult:
    walls = [[t0 + 10 * i, t0 + 10 * i + 9] for i in range(len(busbw))]
    return PhaseResult(
        name=name,
        tenant="t",
        op="all_reduce",
        hosts=["h1", "h2", "h3", "h4"],
        world=4,
        bytes=4 * 2**20,
        link_mbps=LINK,
        seconds=[5.0] * len(busbw),
        busbw_mbps=busbw,
        iter_wall=walls,
        warmup_wall=[[t0 - 10, t0 - 1]],
        check_ok=True,
        tcp_retrans_bytes=1000,
        retrans_iter=retrans or [],
        ring_direction="backward",
        wire_factor=1.5,
        startup_s=3.0,
    )


def _mix(mode: str, mixed: dict[str, float], paths: dict[str, list[list[str]]]) -> dict[str, Any]:
    plans = [
        JobPlan(f"mix4x4-s1-j{j}", f"t{j}", ("a", "b", "c", "d"), port=29500 + j) for j in (1, 2)
    ]
    res = MixResult(
        plans=plans,
        alone={p.name: _phase(p.name, [9.6, 9.8, 9.7], 0.0) for p in plans},
        mix={p.name: _phase(p.name, [mixed[p.name]] * 3, 100.0) for p in plans},
        window=[90.0, 200.0],
        mix_busbw_mbps={p.name: mixed[p.name] for p in plans},
        jobs={
            p.name: {"status": "active", "paths": [
                {"src": f"10.0.0.{i}", "dst": f"10.0.1.{i}", "switches": sw}
                for i, sw in enumerate(paths.get(p.name, []))
            ]}
            for p in plans
        } if paths else {},
    )  # fmt: skip
    return mix_record(Run(mode, "mix", "4x4", 1), res)


def _churn(mode: str) -> dict[str, Any]:
    # long job j1: 9 before, dips to 6 while j3 is there, 8 while j4 is; j2 steady at 9.5
    j1 = _phase("churn-j1", [9.0, 9.2, 6.0, 9.0, 8.0, 9.0], 0.0, [0, 100, 5000, 0, 3000, 0])
    j2 = _phase("churn-j2", [9.5, 9.5, 9.5, 9.5, 9.5, 9.5], 0.0, [0, 0, 1000, 0, 0, 0])
    marks = [("churn-j3", 20.0, 29.5), ("churn-j4", 40.0, 49.5)]
    res = ChurnResult(
        long={"churn-j1": j1, "churn-j2": j2},
        arrivals={k: _phase(k, [9.0], 21) for k in ("churn-j3", "churn-j4")},
        marks=marks,
        labels={k: label_spans(j1.iter_wall, marks, "before") for k in ("churn-j1", "churn-j2")},
        go_at=-10.0,
        end_at=60.0,
        classes={
            "before": {"collective": {"bytes": 10, "dropped": 1}},
            "churn-j3": {"collective": {"bytes": 10, "dropped": 7}},
            "churn-j3:after": {"collective": {"bytes": 10, "dropped": 0}},
            "churn-j4": {"collective": {"bytes": 10, "dropped": 2}},
        },
    )  # fmt: skip
    return churn_record(Run(mode, "churn", "4x4", 1), res)


def _doc() -> dict[str, Any]:
    crowded = {"mix4x4-s1-j1": [["e1", "a1", "e2"]], "mix4x4-s1-j2": [["e3", "a1", "e2"]]}
    runs = [
        _mix("ecmp", {"mix4x4-s1-j1": 4.85, "mix4x4-s1-j2": 9.7}, {}),
        _mix("loom", {"mix4x4-s1-j1": 9.215, "mix4x4-s1-j2": 9.7}, crowded),
        _churn("ecmp"),
        _churn("loom"),
        {"key": "loom/2x8/seed1", "mode": "loom", "kind": "mix", "mix": "2x8", "seed": 1,
         "error": "CollectiveError: boom"},
    ]  # fmt: skip
    doc = {"args": {"mib": 4.0, "rate": LINK, "mtu": 9000}, "plain": False, "runs": runs}
    return dict(json.loads(json.dumps(doc)))  # as saved and read back


def test_mix_figures_divide_each_job_by_itself_alone() -> None:
    figs = figures(_doc()["runs"])["mixes"]
    assert set(figs) == {"4x4"}  # the failed 2x8 run has no figure
    assert figs["4x4"]["ecmp"]["ratios"] == pytest.approx([0.5, 1.0])
    assert figs["4x4"]["loom"]["min"] == pytest.approx(0.95)
    assert figs["4x4"]["loom"]["at_target"] == 2 and figs["4x4"]["ecmp"]["at_target"] == 1
    assert figs["4x4"]["ecmp"]["mix_over_link_min"] == pytest.approx(0.485)


def test_crowded_links_come_from_looms_paths() -> None:
    loom = _doc()["runs"][1]
    assert crowded_links(loom) == {
        "a1>e2": ["mix4x4-s1-j1:10.0.0.0>10.0.1.0", "mix4x4-s1-j2:10.0.0.0>10.0.1.0"]
    }
    rows = {(r["mode"], r["name"]): r for r in job_rows(_doc()["runs"])}
    assert rows[("loom", "mix4x4-s1-j1")]["shares_with"] == ["mix4x4-s1-j2"]
    assert rows[("ecmp", "mix4x4-s1-j1")]["crowded_links"] == 0


def test_churn_figures() -> None:
    c = figures(_doc()["runs"])["churn"]["loom"]
    j1 = c["per_job"]["churn-j1"]
    assert j1["median_before"] == pytest.approx(9.1)
    assert (j1["worst"], j1["worst_at"]) == (6.0, "churn-j3")
    assert c["worst_over_before"] == pytest.approx(6.0 / 9.1)
    assert c["per_job"]["churn-j2"]["worst_over_before"] == pytest.approx(1.0)
    # before: j1 0, 100 and j2 0, 0; during (j3, j4): 5000, 3000, 1000, 0; gaps: 0,0,0,0
    assert c["retrans_before_per_iter"] == pytest.approx(25)
    assert c["retrans_during_per_iter"] == pytest.approx(2250)
    assert c["retrans_gaps_per_iter"] == 0
    assert (c["drops_before"], c["drops_during"]) == (1, 9)
    assert (c["before_s"], c["during_s"]) == (30.0, 19.0)


def test_table_plot_and_side_by_side_rows(tmp_path: Path) -> None:
    doc = _doc()
    text = table(doc)
    assert "4x4   loom       2   0.950   0.975   1.000  2/2          0.921" in text
    assert "4x4   ecmp       2   0.500" in text
    assert "loom/2x8/seed1: FAILED CollectiveError: boom" in text
    assert "churn-j1: median before 9.10 Mbit/s, worst 6.00 (churn-j3)" in text
    png = plot(doc, tmp_path)
    assert png is not None and png.stat().st_size > 10_000
    rows = jobs_figures(doc)
    assert rows["4x4 worst job mix/alone"] == pytest.approx({"ecmp": 0.5, "loom": 0.95})
    assert rows["churn worst iter/before"]["loom"] == pytest.approx(6.0 / 9.1)
