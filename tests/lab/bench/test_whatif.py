"""The what-if predictor on a k=4 fat-tree: packets traced through the rules the real core
installed reach the right host in both modes, a registered ring is placed with no link
carrying two of its hops (so the model predicts it at full link rate), and the command
writes its table, JSON and plot."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import pytest

from mininet_scenarios.bench.scale_wire import Wire
from mininet_scenarios.bench.whatif import (
    Job,
    Links,
    bring_up,
    deal_jobs,
    main,
    parse_jobs,
    predict,
    register,
    unregister,
)
from mininet_scenarios.bench.whatif_trace import Flow5, TraceError, Tracer
from mininet_scenarios.workloads.collectives.model import random_order
from topologies.graph import host_list


@pytest.fixture(scope="module")
def wire() -> Wire:
    settled, _ = bring_up("fat_tree:k=4", budget=60.0)
    return settled


def ring(wire: Wire) -> Job:
    return Job("ring16", "all_reduce", tuple(random_order(host_list(wire.graph), 1)))


def every_pair_arrives(wire: Wire, salt: int) -> None:
    tracer = Tracer(wire)
    for a, b in itertools.permutations(wire.hosts, 2):
        hops = tracer.trace(Flow5(a, b, 40960, 40961), salt=salt)
        assert wire.host_at[hops[-1]] == b, f"{a}->{b} ends at {wire.host_at[hops[-1]]}"
        assert len(hops) in (1, 3, 5), f"{a}->{b}: {len(hops)} hops is not a minimal path"


def test_every_host_pair_reaches_its_host_with_the_job_unregistered(wire: Wire) -> None:
    for salt in range(3):
        every_pair_arrives(wire, salt)


def test_a_registered_ring_is_placed_hop_disjoint_and_predicted_at_link_rate(wire: Wire) -> None:
    job = ring(wire)
    facts = register(wire, [job])
    try:
        every_pair_arrives(wire, 0)
        links, tracer = Links.of(wire.graph), Tracer(wire)
        on: Counter[str] = Counter()
        for a, b in job.pairs():
            on.update(links.by_egress[h] for h in tracer.trace(Flow5(a, b, 40960, 40961)))
        assert max(on.values()) == 1, on.most_common(3)
        assert not tracer.hashed  # the ingress rule pins the hop: no select group
        got = predict(wire, [job], [], draws=4, label="loom")
    finally:
        unregister(wire, [job])
    assert facts["core_max_utilization"] == {"ring16": 1.0}
    assert got["draws"] == 1
    assert got["jobs"]["ring16"]["mean"] == pytest.approx(1.0)
    assert got["jobs"]["ring16"]["max_flows_on_a_link"] == 1


def test_hashing_spreads_a_random_ring_and_costs_it_half_the_link(wire: Wire) -> None:
    got = predict(wire, [ring(wire)], [], draws=4, label="ecmp")
    assert got["draws"] == 4
    assert got["jobs"]["ring16"]["max"] <= 0.5 + 1e-9  # two hops share some link
    assert 0 < got["max_utilization"]["min"] <= 1.0 + 1e-9


def test_a_trace_that_no_rule_forwards_fails_loudly(
    wire: Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracer = Tracer(wire)
    pkt_for = tracer.packet
    forged = 0x0A_FF_FF_FF_FF_FF  # a Loom address of no switch
    monkeypatch.setattr(tracer, "packet", lambda f: {**pkt_for(f), "eth_dst": forged})
    with pytest.raises(TraceError, match=r"controller|no rule|drops"):
        tracer.trace(Flow5("h1", "h16", 1, 2))


def test_jobs_are_parsed_and_dealt_one_host_each(wire: Wire) -> None:
    assert parse_jobs("2x4:allreduce, 1x3:alltoall") == [(2, 4, "all_reduce"), (1, 3, "all_to_all")]
    for bad in ("2x1:allreduce", "4:allreduce", "1x4:tree"):
        with pytest.raises(ValueError, match=r"COUNTxRANKS|at least"):
            parse_jobs(bad)
    jobs = deal_jobs(wire.graph, parse_jobs("2x4:allreduce,1x3:alltoall"), "random", 1)
    dealt = [h for j in jobs for h in j.hosts]
    assert len(dealt) == len(set(dealt)) == 11
    assert len(jobs[2].pairs()) == 6 and len(jobs[0].pairs()) == 4
    with pytest.raises(ValueError, match="hosts"):
        deal_jobs(wire.graph, parse_jobs("5x4:allreduce"), "random", 1)


def test_the_command_writes_the_check_with_the_measured_figures(tmp_path: Path) -> None:
    measured = tmp_path / "measured.json"
    run = {"busbw_over_link": 0.45, "mode": "ecmp", "op": "all_reduce", "order": "random"}
    measured.write_text(json.dumps({"runs": [{**run, "background": False, "seed": 1}]}))
    out = tmp_path / "out"
    assert main(["--check-k4", "--draws", "2", "--measured", str(measured), "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    rows = {(r["scenario"], r["mode"]): r for r in doc["rows"]}
    assert len(rows) == 6
    assert rows[("allreduce-random", "ecmp")]["measured"] == 0.45
    assert rows[("allreduce-random", "loom")]["predicted"] == pytest.approx(1.0)
    assert rows[("allreduce-topology", "ecmp")]["predicted"] == pytest.approx(1.0)
    assert (out / "whatif.png").stat().st_size > 0
    assert "allreduce-random" in (out / "table.txt").read_text()


def test_the_command_predicts_a_job_mix_with_bulk_flows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["fat_tree:k=4", "--jobs", "2x4:allreduce,1x4:alltoall", "--bulk", "3"]
    assert main([*argv, "--draws", "2", "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert set(doc["modes"]) == {"ecmp", "loom"}
    for mode in doc["modes"].values():
        assert set(mode["jobs"]) == {"job-000", "job-001", "job-002"}
        assert mode["bulk_over_link"] is not None
        assert mode["max_utilization"]["max"] <= 1.0 + 1e-9
    assert (out / "whatif.png").stat().st_size > 0
