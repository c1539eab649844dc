"""The weights benchmark without a network: its rings, figures and summary."""

from __future__ import annotations

import pytest

from mininet_scenarios.bench.weights import RINGS, job_figures, summary, table
from mininet_scenarios.workloads.collectives.model import ring_pairs
from topologies import leaf_spine


def test_every_hop_of_both_rings_crosses_leaves() -> None:
    g = leaf_spine(leaves=2, spines=2, hosts_per_leaf=4)
    leaf = {h: next(iter(g.neighbors(h))) for ring in RINGS.values() for h in ring}
    for ring in RINGS.values():
        assert all(leaf[a] != leaf[b] for a, b in ring_pairs(ring, 1))
    sending = [a for ring in RINGS.values() for a, _ in ring_pairs(ring, 1)]
    assert sorted(leaf[a] for a in sending) == ["leaf1"] * 4 + ["leaf2"] * 4


def test_a_ring_runs_at_its_slowest_hop() -> None:
    rates = {hop: 5.0 for ring in RINGS.values() for hop in ring_pairs(ring, 1)}
    rates[("h1", "h5")] = 9.6
    rates[("h3", "h7")] = 3.2
    assert job_figures(rates, 10.0) == {"small": 0.5, "large": 0.32}


def test_summary_takes_medians_and_the_ratio() -> None:
    runs = [
        {"mode": "weighted", "jobs": {"small": 0.9, "large": 0.3}},
        {"mode": "weighted", "jobs": {"small": 1.0, "large": 0.34}},
        {"mode": "equal", "jobs": {"small": 0.5, "large": 0.5}},
    ]
    got = summary(runs)
    assert got["weighted"] == pytest.approx({"small": 0.95, "large": 0.32, "small/large": 2.97})
    assert got["equal"]["small/large"] == 1.0
    assert "unregistered" not in got
    assert table({"runs": runs}).splitlines()[1].startswith("equal")
