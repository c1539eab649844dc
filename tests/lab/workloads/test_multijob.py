"""Several collectives at once, without a network: dealing hosts to jobs, a phase's result
from the ranks' documents, the mix window, the churn's labels, the worker's phases (on
loopback ranks) and the reduce-scatter conventions."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mininet_scenarios.workloads.collectives.model import (
    JobPlan,
    bus_factor,
    deal,
    label_spans,
    mix_window,
    phase_result,
    wire_factor,
    within,
)
from mininet_scenarios.workloads.collectives.runner import LOOM_PATTERN, job_request
from mininet_scenarios.workloads.collectives.worker import parse_args, stop_file
from topologies import fat_tree
from topologies.graph import host_list

HOSTS = host_list(fat_tree(4))
MIB = 2**20


# --------------------------------------------------------------------------- dealing


@pytest.mark.parametrize(("jobs", "ranks"), [(4, 4), (2, 8)])
def test_a_deal_is_disjoint_seeded_and_uses_every_host(jobs: int, ranks: int) -> None:
    hands = deal(HOSTS, jobs, ranks, seed=1)
    assert len(hands) == jobs and all(len(h) == ranks for h in hands)
    flat = [h for hand in hands for h in hand]
    assert sorted(flat) == sorted(HOSTS)  # disjoint and every host used
    assert deal(HOSTS, jobs, ranks, seed=1) == hands
    assert deal(HOSTS, jobs, ranks, seed=2) != hands
    assert host_list(fat_tree(4)) == HOSTS  # the input is not shuffled in place


def test_a_deal_scatters_jobs_across_pods() -> None:
    # dealt like cards from a shuffle, not cut in blocks of the host numbering
    hands = deal(HOSTS, 4, 4, seed=1)
    pods = [{fat_tree(4).nodes[h]["group"] for h in hand} for hand in hands]
    assert any(len(p) > 1 for p in pods)


def test_a_deal_refuses_what_does_not_fit() -> None:
    with pytest.raises(ValueError, match="cannot deal"):
        deal(HOSTS, 3, 6, seed=1)
    with pytest.raises(ValueError, match="cannot deal"):
        deal(HOSTS, 2, 1, seed=1)
    with pytest.raises(ValueError, match="cannot deal"):
        deal([*HOSTS[:3], HOSTS[0]], 1, 4, seed=1)
    assert len(deal(HOSTS, 3, 4, seed=1)) == 3  # a partial deal leaves hosts out


# --------------------------------------------------------------------------- phases


def _rank_doc(
    seconds: list[float], t0: float, sent: dict[str, int], retrans: int
) -> dict[str, Any]:
    walls, t = [], t0
    for s in [1.0, *seconds]:  # one warm-up iteration first
        walls.append([t, t + s])
        t += s + 0.1
    return {
        "bytes": 4 * MIB,
        "import_seconds": 2.0,
        "init_seconds": 0.5,
        "phases": [
            {
                "warmup": 1,
                "seconds": seconds,
                "iter_wall": walls,
                "retrans_iter": [7, *([retrans] * len(seconds))],
                "check_ok": True,
                "tcp_by_peer": {
                    ip: {"sent": n, "received": 0, "retrans": retrans} for ip, n in sent.items()
                },
            }
        ],
    }


def test_phase_result_takes_the_slowest_rank_and_the_widest_span() -> None:
    plan = JobPlan("j1", "t1", ("a", "b", "c", "d"))
    ips = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
    # gloo's all-reduce ring: rank i sends to rank i-1 (1.5 buffers per iteration, 3 iterations)
    docs = [
        _rank_doc([2.0, 3.0], 100.0 + r * 0.01, {ips[(r - 1) % 4]: 18 * MIB}, retrans=r)
        for r in range(4)
    ]
    docs[2]["phases"][0]["seconds"] = [2.5, 2.0]
    docs[3]["phases"][0]["tcp_by_peer"]["10.9.9.9"] = {"sent": 10**9, "retrans": 10**6}
    res = phase_result(plan, docs, 0, 10.0, ips)
    assert res.seconds == [2.5, 3.0]
    assert res.busbw_mbps[0] == pytest.approx(8 * 4 * MIB / 2.5 / 1e6 * 1.5)
    assert res.iter_wall[0] == pytest.approx([101.1, 103.13])  # first timed iteration
    assert res.warmup_wall == [pytest.approx([100.0, 101.03])]
    assert res.retrans_iter == [0 + 1 + 2 + 3] * 2  # the warm-up's are left out
    assert res.tcp_retrans_bytes == 6  # the stranger 10.9.9.9 is not a peer
    assert res.ring_direction == "backward"
    assert res.wire_factor == pytest.approx(1.5)
    assert res.startup_s == pytest.approx(2.5)
    assert res.busbw_within(101.0, 103.2) == [res.busbw_mbps[0]]


def test_within_and_the_mix_window() -> None:
    walls = [[0.0, 1.0], [1.0, 2.5], [2.5, 4.0]]
    assert within(walls, 0.0, 4.0) == [0, 1, 2]
    assert within(walls, 0.5, 4.0) == [1, 2]
    assert within(walls, 0.0, 3.9) == [0, 1]
    plan = JobPlan("j", "t", ("a", "b"))
    ips = ["10.0.0.1", "10.0.0.2"]
    fast = phase_result(plan, [_rank_doc([1.0, 1.0], 10.0, {}, 0)] * 2, 0, 10.0, ips)
    slow = phase_result(plan, [_rank_doc([1.5, 2.0], 10.2, {}, 0)] * 2, 0, 10.0, ips)
    lo, hi = mix_window([fast, slow])
    assert lo == pytest.approx(10.2)  # the later warm-up start
    assert hi == pytest.approx(fast.iter_wall[-1][1])  # the first job's last end
    assert len(slow.busbw_within(lo, hi)) == 1  # its second iteration ran partly alone


def test_churn_labels_tell_before_during_and_after() -> None:
    walls = [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7]]
    marks = [("j3", 1.5, 3.2), ("j4", 4.5, 5.0)]
    assert label_spans(walls, marks, "before") == [
        "before",
        "j3",
        "j3",
        "j3",
        "j4",
        "j4:after",
        "j4:after",
    ]
    assert label_spans(walls, [], "before") == ["before"] * 7


# --------------------------------------------------------------------------- reduce-scatter


def test_reduce_scatter_conventions() -> None:
    assert bus_factor("reduce_scatter", 16) == pytest.approx(15 / 16)
    # gloo runs it on all-reduce's ring: Loom is told all-reduce's direction
    assert LOOM_PATTERN["reduce_scatter"] == ("ring", "backward")
    body = job_request("j", "t", ["10.0.0.2", "10.0.0.3"], "reduce_scatter")
    assert body["pattern"] == "ring" and body["ring_direction"] == "backward"
    # 2 ranks each sent 1.5 buffers per iteration over 2 iterations: all-reduce's bytes
    sent = {("a", "b"): 3 * MIB, ("b", "a"): 3 * MIB}
    assert wire_factor(sent, MIB, 2) == pytest.approx(1.5)
    assert wire_factor({}, MIB, 2) is None


def test_worker_options_for_phases() -> None:
    base = ["--rank", "0", "--world", "2", "--master", "10.0.0.2", "--ifname", "h1-eth0"]
    args = parse_args([*base, "--out", "x.json", "--op", "reduce_scatter"])
    assert args.op == "reduce_scatter" and args.go == [] and not args.tcp_every_iter
    args = parse_args([*base, "--out", "x", "--go", "/t/go-a", "--go", "/t/go-b"])
    assert args.go == [Path("/t/go-a"), Path("/t/go-b")]
    assert stop_file(Path("/t/go-a")) == Path("/t/go-a.stop")
    with pytest.raises(SystemExit):
        parse_args([*base, "--out", "x", "--iters", "5", "--max-iters", "4"])


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_worker_phases_on_loopback(tmp_path: Path) -> None:
    """Two real gloo ranks on 127.0.0.1: they wait for each go file, run exactly --iters
    in a phase whose stop file came first, and run on in a held phase until its stop."""
    go_a, go_b = tmp_path / "go-a", tmp_path / "go-b"
    progress = tmp_path / "progress.json"
    procs = [
        subprocess.Popen(
            [
                sys.executable, "-m", "mininet_scenarios.workloads.collectives.worker",
                "--rank", str(r), "--world", "2", "--master", "127.0.0.1", "--port", "29893",
                "--op", "reduce_scatter", "--mib", "0.25", "--iters", "2", "--warmup", "1",
                "--ifname", "lo", "--out", str(tmp_path / f"rank{r}.json"), "--timeout", "60",
                "--progress", str(progress), "--go", str(go_a), "--go", str(go_b),
                "--tcp-every-iter",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for r in range(2)
    ]  # fmt: skip

    def state() -> dict[str, Any]:
        try:
            return dict(json.loads(progress.read_text()))
        except (OSError, ValueError):
            return {}

    def wait(cond: Any) -> None:
        deadline = time.monotonic() + 60
        while not cond():
            assert time.monotonic() < deadline, f"stuck at {state()}"
            assert all(p.poll() in (None, 0) for p in procs)
            time.sleep(0.05)

    try:
        wait(lambda: state().get("ready"))
        time.sleep(0.3)
        assert state()["phase"] == -1  # nothing runs before its go file
        stop_file(go_a).touch()
        go_a.touch()
        wait(lambda: state().get("phase_done") == 0)
        go_b.touch()
        wait(lambda: state().get("phase") == 1 and state().get("timed", 0) >= 5)
        stop_file(go_b).touch()
        wait(lambda: all(p.poll() == 0 for p in procs))
    finally:
        for p in procs:
            p.kill()
    docs = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for d in docs:
        a, b = d["phases"]
        assert len(a["seconds"]) == 2 and len(a["iter_wall"]) == 3
        assert len(b["seconds"]) >= 5 and len(b["retrans_iter"]) == len(b["iter_wall"])
        assert a["check_ok"] and b["check_ok"] and d["check_ok"]
        assert b["iter_wall"][0][0] >= a["iter_wall"][-1][1]
    assert len(docs[0]["phases"][1]["seconds"]) == len(docs[1]["phases"][1]["seconds"])
