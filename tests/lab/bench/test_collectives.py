"""The collectives benchmark without a network: its plan, figures, expected durations,
queue classes and options."""

from __future__ import annotations

from typing import Any

import pytest

from mininet_scenarios.bench.collectives import expected_seconds, parse_args, plan, queue_classes
from mininet_scenarios.bench.collectives_report import figures


def test_the_plan_runs_the_same_orders_in_the_modes_it_compares() -> None:
    runs = plan(["allreduce", "protection", "alltoall"], seeds=2)
    keys = {r.key for r in runs}
    for seed in (1, 2):
        assert {
            f"ecmp/all_reduce/random{seed}",
            f"unregistered/all_reduce/random{seed}",
            f"loom/all_reduce/random{seed}",
        } <= keys
        assert {
            f"no-qos/all_reduce/random{seed}+bulk",
            f"loom/all_reduce/random{seed}+bulk",
            f"no-qos/all_reduce/random{seed}+bulk-jumbo",
            f"loom/all_reduce/random{seed}+bulk-jumbo",
        } <= keys
        assert f"no-qos/all_reduce/random{seed}" in keys  # no-qos's own idle run
        assert {
            f"one-switch/all_to_all/random{seed}",
            f"ecmp/all_to_all/random{seed}",
            f"loom/all_to_all/random{seed}",
        } <= keys
    unregistered = ("one-switch", "ecmp", "unregistered")
    assert not any(r.register for r in runs if r.mode in unregistered)
    assert all(r.register for r in runs if r.mode not in unregistered)
    assert {r.op for r in runs if r.mode == "one-switch"} == {"all_to_all"}
    assert len(keys) == len(runs)


def test_figures_divide_background_by_idle_of_the_same_mode_and_seed() -> None:
    def run(
        mode: str, op: str, bg: bool, busbw: float, order: str = "random", frames: str = "standard"
    ) -> dict[str, Any]:
        return {
            "mode": mode,
            "op": op,
            "order": order,
            "seed": 1,
            "background": bg,
            "bulk_frames": frames,
            "busbw_mbps": busbw,
            "busbw_over_link": busbw / 10,
        }

    figs = figures(
        [
            run("ecmp", "all_reduce", False, 4.0),
            run("loom", "all_reduce", False, 9.0),
            run("loom", "all_reduce", True, 8.1),
            run("no-qos", "all_reduce", False, 9.0),
            run("no-qos", "all_reduce", True, 4.5),
            run("loom", "all_reduce", True, 7.2, frames="jumbo"),
            run("no-qos", "all_reduce", True, 3.6, frames="jumbo"),
            run("loom", "all_to_all", False, 7.0),
            run("loom", "all_reduce", False, 9.3, order="topology"),
            {"mode": "ecmp", "op": "all_to_all", "error": "boom"},
        ]
    )
    assert figs["allreduce-random"] == {"ecmp": 0.4, "loom": 0.9, "no-qos": 0.9}
    assert figs["protection"] == pytest.approx({"loom": 0.9, "no-qos": 0.5})
    assert figs["protection-jumbo"] == pytest.approx({"loom": 0.8, "no-qos": 0.4})
    assert figs["alltoall"] == {"loom": 0.7}
    assert "alltoall-vs-one-switch" not in figs  # no one-switch run: no reference
    assert figs["allreduce-topology"] == {"loom": pytest.approx(0.93)}


def test_the_all_to_all_is_also_divided_by_the_same_order_on_one_switch() -> None:
    def run(mode: str, busbw: float) -> dict[str, Any]:
        return {"mode": mode, "op": "all_to_all", "seed": 1, "busbw_over_link": busbw}

    figs = figures([run("one-switch", 0.6), run("ecmp", 0.54), run("loom", 0.66)])
    assert figs["alltoall"] == {"one-switch": 0.6, "ecmp": 0.54, "loom": 0.66}
    assert figs["alltoall-vs-one-switch"] == pytest.approx({"ecmp": 0.9, "loom": 1.1})


def test_expected_seconds_and_queue_classes() -> None:
    # 16 MiB all-reduce on 16 ranks at 10 Mbit/s: ~26.3 s per iteration at the TCP ceiling
    assert expected_seconds("all_reduce", 16, 16, 10, 3, 1) == pytest.approx(4 * 26.3, rel=0.01)
    default = queue_classes(None)
    assert [qc.rate_share for qc in default] == [0.90, 0.05, 0.05]
    tuned = {qc.name: qc.rate_share for qc in queue_classes(0.02)}
    assert tuned == pytest.approx({"collective": 0.93, "control": 0.05, "bulk": 0.02})


def test_bulk_frames_option_runs_protection_with_the_frames_asked_for() -> None:
    assert parse_args([]).bulk_frame_list == ["standard", "jumbo"]
    assert parse_args(["--bulk-frames", "jumbo"]).bulk_frame_list == ["jumbo"]
    keys = {r.key for r in plan(["protection"], seeds=1, bulk_frames=["jumbo"])}
    assert keys == {"no-qos/all_reduce/random1", "no-qos/all_reduce/random1+bulk-jumbo"} | {
        "loom/all_reduce/random1",
        "loom/all_reduce/random1+bulk-jumbo",
    }
    with pytest.raises(SystemExit):
        parse_args(["--bulk-frames", "tiny"])


def test_every_mode_has_a_colour_in_the_figure() -> None:
    from mininet_scenarios.bench.collectives_report import MODE_COLORS, MODE_ORDER

    assert set(MODE_ORDER) <= set(MODE_COLORS)


def test_all_gather_and_reduce_scatter_run_in_ecmp_and_loom() -> None:
    from mininet_scenarios.bench.collectives_report import TARGETS, table

    runs = plan(["allgather", "reducescatter"], seeds=2, topo_reference=False)
    assert {(r.mode, r.op, r.seed) for r in runs} == {
        (mode, op, seed)
        for mode in ("ecmp", "loom")
        for op in ("all_gather", "reduce_scatter")
        for seed in (1, 2)
    }
    assert all(r.register == (r.mode == "loom") for r in runs)
    assert "allgather" in parse_args(["--scenarios", "allgather,reducescatter"]).scenario_list

    def run(mode: str, op: str, busbw: float) -> dict[str, Any]:
        return {
            "key": f"{mode}/{op}/random1",
            "mode": mode,
            "op": op,
            "order": "random",
            "seed": 1,
            "background": False,
            "busbw_mbps": busbw,
            "busbw_over_link": busbw / 10,
            "seconds": [3.0],
            "wire_factor": 1.875 if op == "reduce_scatter" else 0.9375,
            "ring_direction_seen": "backward" if op == "reduce_scatter" else "forward",
        }

    runs_saved = [
        run("ecmp", "all_gather", 3.3),
        run("loom", "all_gather", 9.6),
        run("loom", "reduce_scatter", 4.8),
    ]
    figs = figures(runs_saved)
    assert figs["allgather"] == pytest.approx({"ecmp": 0.33, "loom": 0.96})
    assert figs["reducescatter"] == pytest.approx({"loom": 0.48})
    assert "reducescatter" not in TARGETS  # gloo sends all-reduce's bytes: no target
    text = table({"runs": runs_saved})
    assert "1.88  backward" in text and "0.94   forward" in text
