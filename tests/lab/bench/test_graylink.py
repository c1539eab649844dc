"""The gray-link benchmark's pure parts (no emulation): the traffic of each case fits the
healthy links (a perfect controller could carry it), the analysis of a flow's series, the
slow link on a pinned path, the polls' times, and the table and figure on synthetic runs."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from mininet_scenarios.bench.graylink import (
    CASES,
    all_modes,
    cut,
    link_labels,
    matrix_for,
    parse_args,
    region,
    shaped,
    slow_link,
    stride,
)
from mininet_scenarios.bench.graylink_report import (
    add_ratios,
    format_table,
    gray_times,
    link_label,
    main,
    marked_links,
    on_path,
    on_slow,
    ovs_window,
    progress_line,
    recovered_after,
    report,
    rolling_mean,
    verdicts,
    worst_flow,
)
from topologies import fat_tree
from topologies.graph import switch_graph

RATE = 4.0


def graph() -> nx.MultiGraph:
    return fat_tree(4, rate_mbps=RATE)


# --------------------------------------------------------------------------- cases


def test_slow_links_and_the_shaped_copy() -> None:
    g = graph()
    assert slow_link(g, "agg-core") == ("a0_0", "c1")
    assert slow_link(g, "edge-agg") == ("e0_0", "a0_0")
    slow = shaped(g, ("a0_0", "c1"), 0.25)
    rates = {frozenset((u, v)): d["rate_mbps"] for u, v, d in slow.edges(data=True) if u != v}
    assert rates[frozenset(("a0_0", "c1"))] == RATE / 4
    assert sum(1 for r in rates.values() if r != RATE) == 1
    assert next(iter(g["a0_0"]["c1"].values()))["rate_mbps"] == RATE  # the original is intact
    assert link_labels(g, ("a0_0", "c1")) == ["a0_0:3->c1:1", "c1:1->a0_0:3"]
    with pytest.raises(ValueError, match="unknown case"):
        slow_link(g, "core-core")


@pytest.mark.parametrize("case", CASES)
def test_case_traffic_never_exceeds_the_healthy_cut(case: str) -> None:
    g = graph()
    link = slow_link(g, case)
    inside = region(g, case, link)
    c = cut(shaped(g, link, 0.25), matrix_for(g, case), inside, link)
    assert c["out_mbps"] <= c["healthy_mbps"] and c["in_mbps"] <= c["healthy_mbps"], c
    assert c["out_mbps"] == c["healthy_mbps"]  # as loaded as the healthy links allow
    # the full stride permutation overloads the same cut: the check can fail
    full = cut(g, stride(g), inside, link)
    assert full["out_mbps"] > full["healthy_mbps"] and full["in_mbps"] > full["healthy_mbps"]


@pytest.mark.parametrize("case", CASES)
def test_every_host_sends_and_receives_at_most_once_across_pods(case: str) -> None:
    g = graph()
    m = matrix_for(g, case)
    senders, receivers = Counter(s for s, _ in m), Counter(d for _, d in m)
    assert max(senders.values()) == 1 and max(receivers.values()) == 1
    assert all(g.nodes[s]["group"] != g.nodes[d]["group"] for s, d in m)
    assert len(m) == 15  # one host fewer sends and one fewer receives than in stride


def _paths(sw: nx.MultiGraph, a: str, b: str) -> list[list[str]]:
    return [[a]] if a == b else [list(p) for p in nx.all_shortest_paths(sw, a, b)]


def _perfect(g: nx.MultiGraph, m: list[tuple[str, str]]) -> bool:
    """Whether every flow of ``m`` gets a shortest path whose every directed fabric link
    carries no more flows at host rate than it has rate for (the slow link: none)."""
    sw = switch_graph(g)
    room: dict[tuple[str, str], int] = {}
    for u, v, d in sw.edges(data=True):
        room[(u, v)] = room[(v, u)] = int(d["rate_mbps"] / RATE + 1e-9)
    options = [_paths(sw, g.nodes[s]["switch"], g.nodes[d]["switch"]) for s, d in m]

    def place(i: int) -> bool:
        if i == len(options):
            return True
        for p in options[i]:
            hops = list(itertools.pairwise(p))
            if all(room[h] > 0 for h in hops):
                for h in hops:
                    room[h] -= 1
                if place(i + 1):
                    return True
                for h in hops:
                    room[h] += 1
        return False

    return place(0)


@pytest.mark.parametrize("case", CASES)
def test_a_perfect_controller_carries_the_case_on_healthy_links(case: str) -> None:
    g = graph()
    slow = shaped(g, slow_link(g, case), 0.25)
    assert _perfect(slow, matrix_for(g, case))
    assert not _perfect(slow, stride(g))  # the full permutation needs the slow link


def test_modes_tell_loom_nothing_and_parse_args() -> None:
    modes = all_modes(RATE)
    assert modes["loom"].env == {} and modes["loom-healthy"].env == {}
    assert modes["ecmp"].env == {"LOOM_TE": "off"}
    assert modes["nonblocking"].single and modes["nonblocking"].env == {"LOOM_TE": "off"}
    args = parse_args(["--cases", "edge-agg", "--modes", "loom,ecmp"])
    assert args.case_list == ["edge-agg"] and args.mode_list == ["loom", "ecmp"]
    with pytest.raises(SystemExit):
        parse_args(["--cases", "nowhere"])


# --------------------------------------------------------------------------- series


def test_rolling_mean_over_fewer_values_at_the_start() -> None:
    assert rolling_mean([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]
    assert rolling_mean([2.0, 4.0], 1) == [2.0, 4.0]


def test_recovered_after_is_the_start_of_the_window_that_holds_to_the_end() -> None:
    t = 0.9 * RATE
    assert recovered_after([1.0, 4.0, 4.0, 4.0, 4.0], t) == 0.5  # roll 1, 2.5, 4, 4, 4
    assert recovered_after([4.0] * 6, t) == 0.0
    late = [1.0] * 10 + [4.0] * 10
    assert recovered_after(late, t) == 5.0
    assert recovered_after([4.0, 4.0, 4.0, 1.0, 1.0], t) is None  # falls at the end
    assert recovered_after([4.0, 4.0, 1.0, 4.0, 4.0, 4.0], t) == 1.5  # a dip resets it
    # iperf3's short last interval after --seconds is left out with length
    assert recovered_after([4.0, 4.0, 4.0, 0.2], t, length=3) == 0.0
    assert recovered_after([], t) is None


def test_worst_flow_by_whole_rate() -> None:
    flows: list[dict[str, Any]] = [{"whole_mbps": 3.0}, {"whole_mbps": 1.0}, {"whole_mbps": 2.0}]
    assert worst_flow(flows) == 1
    assert worst_flow([]) is None


# --------------------------------------------------------------------------- Loom's API


def test_slow_link_on_a_pinned_path_in_either_order() -> None:
    path = ["e0_0", "a0_0", "c1", "a1_0", "e1_0"]
    assert on_path(path, "a0_0", "c1", {})
    assert on_path(path, "c1", "a0_0", {})
    assert on_path(list(reversed(path)), "a0_0", "c1", {})
    assert not on_path(path, "e0_0", "c1", {})  # both on it, not adjacent
    assert not on_path(path, "a0_1", "c3", {})
    assert not on_path(None, "a0_0", "c1", {})
    hexed = ["0000000000000005", "0000000000000001"]  # switches named by dpid
    alias = {"0000000000000005": "a0_0", "0000000000000001": "c1"}
    assert on_path(hexed, "a0_0", "c1", alias) and not on_path(hexed, "a0_0", "c1", {})
    flows: list[dict[str, Any]] = [
        {"path": path, "elephant": True},
        {"path": ["e0_0", "a0_0", "c2"], "elephant": True},
        {"path": ["c1", "a0_0"], "elephant": False},
        {"path": None},
    ]
    assert on_slow(flows, "a0_0", "c1", {}) == (2, 1)


def test_marked_links_from_the_topology_body() -> None:
    names = {5: "a0_0", 1: "c1"}
    body = {
        "links": [
            {"src": [5, 3], "dst": [1, 1], "capacity_source": "suspect"},
            {"src": [1, 1], "dst": [5, 3], "capacity_source": "learned"},
            {"src": [5, 4], "dst": [2, 1], "capacity_source": "degraded"},
        ]
    }
    assert marked_links(body, names) == {"a0_0:3->c1:1": "suspect", "a0_0:4->0x2:1": "degraded"}
    assert link_label([1, 1], [5, 3], names) == "c1:1->a0_0:3"


SLOW = ["a0_0:3->c1:1", "c1:1->a0_0:3"]


def poll(t: float, marks: dict[str, str], n: int, el: int | None = None) -> dict[str, Any]:
    return {"t": t, "marks": marks, "on_slow": n, "on_slow_elephants": n if el is None else el}


def test_gray_times_from_the_polls() -> None:
    polls = [
        poll(-0.2, {}, 0),
        poll(0.5, {}, 3),
        {"t": 1.0, "error": "timeout"},
        poll(1.5, {"c1:1->a0_0:3": "suspect"}, 3),
        poll(2.0, {"c1:1->a0_0:3": "suspect", "a1_0:3->c1:2": "suspect"}, 1, 0),
        poll(2.5, {"c1:1->a0_0:3": "suspect"}, 0),
        poll(4.5, {"c1:1->a0_0:3": "degraded"}, 0),
        poll(31.0, {"c1:1->a0_0:3": "degraded"}, 2),  # after the run: not a use
    ]
    t = gray_times(polls, SLOW, 30.0)
    assert t["detection_s"] == 1.5 and t["confirmation_s"] == 4.5
    assert t["last_use_s"] == 2.0 and t["last_elephant_use_s"] == 1.5
    assert t["other_marked"] == ["a1_0:3->c1:2"]
    assert t["poll_errors"] == 1 and not t["on_slow_at_end"]
    never = gray_times([poll(0.5, {}, 2), poll(29.5, {}, 2)], SLOW, 30.0)
    assert never["detection_s"] is None and never["confirmation_s"] is None
    assert never["last_use_s"] == 29.5 and never["on_slow_at_end"]


def test_ovs_cpu_between_the_start_and_the_end() -> None:
    def cpu(a: float, b: float) -> dict[int, tuple[str, float]]:
        return {1: ("pmd", a), 2: ("handler", b)}

    samples = [
        (9.0, cpu(0.0, 0.0)),
        (10.0, cpu(1.0, 0.5)),
        (20.0, cpu(9.0, 1.5)),
        (31.0, cpu(20, 2)),
    ]
    w = ovs_window(samples, 10.0, 30.0)
    assert w["ovs_cpu_s"] == 9.0 and w["ovs_span_s"] == 10.0 and w["ovs_cpu_pct"] == 90.0
    assert w["ovs_busiest"] == {"thread": "pmd/1", "cpu_pct": 80.0}
    assert ovs_window(samples[:1], 0.0, 30.0)["ovs_cpu_s"] is None


# --------------------------------------------------------------------------- report


def run(mode: str, whole: float, **extra: Any) -> dict[str, Any]:
    r: dict[str, Any] = {
        "mode": mode,
        "case": "agg-core",
        "seed": 1,
        "link_rate_mbps": RATE,
        "whole_aggregate_mbps": whole,
        "aggregate_mbps": whole * 1.02,
        "worst_whole_mbps": 1.0,
        "worst_recovered_s": None,
        "worst_series": [1.0] * 10 + [3.8] * 50,
        "slow_link": SLOW[0],
        "controller_alive": True,
        "cpu_idle_mean": 60.0,
        "cpu_idle_min": 41.0,
        "ovs_cpu_s": 21.5,
        "ovs_cpu_pct": 71.7,
        "ovs_busiest": {"thread": "pmd/7", "cpu_pct": 48.0},
        "ctl_cpu_pct": 37.4,
    }
    r.update(extra)
    return r


def doc(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "fabric": "fat_tree(4)",
        "link_rate_mbps": RATE,
        "slow_share": 0.25,
        "cases": ["agg-core", "edge-agg"],
        "modes": ["nonblocking", "loom-healthy", "ecmp", "loom"],
        "interval_s": 0.5,
        "runs": runs,
    }


def synthetic(loom_whole: float = 55.0) -> list[dict[str, Any]]:
    gray = {"polls": 60, "other_marked": []}
    return [
        run("nonblocking", 60.0, worst_recovered_s=0.5),
        run("loom-healthy", 58.0, worst_recovered_s=1.0, **gray),
        run("ecmp", 40.0, **gray),
        run(
            "loom",
            loom_whole,
            worst_recovered_s=4.5,
            detection_s=2.1,
            confirmation_s=4.6,
            last_use_s=3.0,
            last_elephant_use_s=2.5,
            **gray,
        ),
    ]


def test_ratios_pair_runs_by_case_and_seed() -> None:
    runs = synthetic()
    runs.append(run("loom", 30.0, seed=2))  # no denominators for seed 2
    add_ratios(runs)
    by = {(r["mode"], r["seed"]): r for r in runs}
    assert by[("loom", 1)]["ratio_nonblocking"] == pytest.approx(55 / 60, abs=1e-4)
    assert by[("loom", 1)]["ratio_healthy"] == pytest.approx(55 / 58, abs=1e-4)
    assert by[("nonblocking", 1)]["ratio_nonblocking"] == 1.0
    assert by[("loom", 2)]["ratio_nonblocking"] is None


def test_verdicts_say_each_target_and_the_measured_figure() -> None:
    runs = synthetic(loom_whole=56.0)  # 56 / 58 = 0.966
    ok = verdicts(runs[3], runs[1])
    assert [v for _, v in ok] == [True, True, True]
    assert "0.966" in ok[0][0] and "from 4.5 s" in ok[1][0] and "detection 2.1 s" in ok[2][0]
    bad = verdicts(
        run("loom", 50.0, worst_recovered_s=7.0, detection_s=None), runs[1]
    )  # 50 / 58 = 0.862
    assert [v for _, v in bad] == [False, False, False]
    assert "never" in bad[2][0]
    assert verdicts(run("loom", 50.0, worst_recovered_s=1.0), None)[0][1] is None
    # after a history phase the link is met, and found, before the measured flows start
    seen = run("loom", 56.0, history_s=15.0, detection_s=-11.0, detection_from_history_s=4.0)
    (text, met) = verdicts(seen, runs[1])[2]
    assert met and text.startswith("detection 4.0 s into the history (-11.0 s from the measured")
    late = run("loom", 56.0, history_s=15.0, detection_s=2.0, detection_from_history_s=17.0)
    assert verdicts(late, runs[1])[2][1] is False


def test_table_has_every_figure_and_the_verdicts() -> None:
    runs = synthetic(loom_whole=50.0)
    runs[1]["other_marked"] = ["a1_0:3->c1:2"]  # a false detection on the healthy fabric
    runs.append({"mode": "ecmp", "case": "edge-agg", "seed": 1, "error": "TimeoutError: x"})
    add_ratios(runs)
    table = format_table(doc(runs))
    assert "agg-core (slow link a0_0:3->c1:1), seed 1:" in table
    loom = next(ln for ln in table.splitlines() if ln.startswith("loom "))
    for figure in ("50.00", "51.00", "0.833", "0.862", "1.00 (0.25)", "4.5", "2.1", "4.6"):
        assert figure in loom, (figure, loom)
    assert "3.0 (2.5)" in loom and "60/41" in loom and "21.5 (72%, 48%)" in loom and " 37 " in loom
    assert "loom whole aggregate / loom-healthy 0.862 (target >= 0.95): NO" in table
    assert "from 4.5 s (target <= 5 s): yes" in table
    assert "loom-healthy: other directions marked: a1_0:3->c1:2" in table
    assert "FAILED: TimeoutError: x" in table
    assert "controller" not in table.splitlines()[-1]  # no versions recorded
    runs[0]["loom"] = runs[3]["loom"] = {"commit": "abc1234", "controller_sha256": "f00"}
    runs[2]["loom"] = {"commit": "abc1234", "dirty": True, "controller_sha256": "ba7"}
    lines = format_table(doc(runs)).splitlines()
    assert lines[-2:] == [
        "controller abc1234 (controller/*.py sha256 f00): 2 runs",
        "controller abc1234+dirty (controller/*.py sha256 ba7): 1 runs",
    ]
    ok = format_table(doc(synthetic(loom_whole=57.0)))
    assert "(target >= 0.95): yes" in ok and ": NO" not in ok


def test_report_writes_table_and_png_and_main_rerenders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = doc(synthetic())
    table, png = report(d, tmp_path)
    assert (tmp_path / "table.txt").read_text().strip() == table
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000
    (tmp_path / "results.json").write_text(json.dumps(d))
    (tmp_path / "graylink.png").unlink()
    assert main([str(tmp_path / "results.json")]) == 0
    assert "seed 1:" in capsys.readouterr().out and (tmp_path / "graylink.png").exists()
    assert report(doc([]), tmp_path / "empty")[1] is None


def test_progress_line_warns_of_false_marks_a_dead_controller_and_a_busy_cpu() -> None:
    runs = synthetic()
    add_ratios(runs)
    calm = progress_line(runs[3])
    assert (
        "detect 2.1 confirm 4.6 last use 3" in calm
        and "/healthy 0.948" in calm
        and "controller 37.4 %" in calm
    )
    assert "WARNING" not in calm
    runs[3].update(controller_alive=False, other_marked=["a0_0:2->e0_1:3"], cpu_idle_mean=20.0)
    loud = progress_line(runs[3])
    assert "controller DEAD" in loud and "a0_0:2->e0_1:3" in loud and "CPU-bound" in loud
    runs[2]["ovs_busiest"] = {"thread": "ovs-vswitchd/1", "cpu_pct": 95.0}
    assert "CPU-bound" in progress_line(runs[2])
    assert "FAILED boom" in progress_line(
        {"case": "agg-core", "seed": 1, "mode": "loom", "error": "boom"}
    )
