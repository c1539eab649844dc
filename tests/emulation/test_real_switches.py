"""Loom, started as a user starts it, on a k=8 fat-tree of real Open vSwitch bridges
(control plane only: a private ovs-vswitchd with dummy datapaths, shuffled datapath ids).

One bring-up (``bench.real_switches.Size``, as ``make bench-real`` runs it) and then: every
switch, link and host learned; every sampled host pair's UDP packet, traced through the
rules the switches hold, leaves by the destination's port, untagged, with its real MAC;
the fullest switch holds no more rules than a bound; and after one aggregation-core link
loses its end, every sampled pair traces right again within seconds.

Timeouts for learning are generous (the machine may be busy beside the test); the checks
of where packets go are exact. The private switch shares nothing with the machine's Open
vSwitch or with other emulations, so it runs alongside them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mininet_scenarios.bench.real_switches import Options, Size

pytestmark = pytest.mark.emulation
K = 8
PAIRS = 120
# Measured on k=8 with shuffled ids (seeds 1 and 3) and with consecutive ids: the fullest
# switch, an aggregation switch, held 130 flows and 20 groups (mean 67 flows); the bound
# leaves room for a few more rules, not for a rule per host (128 hosts).
MAX_FLOWS = 200
RECOVER_BOUND_S = 10.0  # measured: every pair right again within 0.2-0.45 s of the cut


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("real-switches")
    opt = Options(
        seed=3, pairs=PAIRS, budget=100.0, settle_limit=60.0, rest_window=1.0, recover=30.0,
        out=Path(out),
    )  # fmt: skip
    res = Size(K, opt).go()
    print(f"\n[real] k={K}: {json.dumps({k: v for k, v in res.items() if k != 'timeline'})}")
    return res


def test_every_switch_link_and_host_learned(result: dict[str, Any]) -> None:
    assert result["switches_connected_s"] is not None, result
    assert result["links_learned_s"] is not None, result
    assert result["ovs_connected"] == result["switches"], result
    assert result["arp"]["all_learned_after_s"] is not None, result["arp"]
    assert result["settled_s"] is not None, {k: result.get(k) for k in ("arp", "logs")}


def test_every_sampled_pair_arrives_at_its_port(result: dict[str, Any]) -> None:
    c = result["correctness"]
    assert c["pairs"] == PAIRS
    assert c["answered_by_arp"] == PAIRS and c["arp_vs_rest_mismatch"] == 0, c
    assert c["traced_right"] == PAIRS, c["wrong"]


def test_fullest_switch_within_bound(result: dict[str, Any]) -> None:
    fullest = result["tables"]["fullest"]
    assert fullest["flows"] <= MAX_FLOWS, fullest


def test_every_pair_right_again_after_a_link_cut(result: dict[str, Any]) -> None:
    down = result["correctness"]["link_down"]
    assert down["right_again_after_s"] is not None, down["polls"][-3:]
    assert down["right_again_after_s"] <= RECOVER_BOUND_S, down["polls"]
    assert result["logs"]["ovs_connection_drops"]["count"] == 0, result["logs"]
