"""Loom on a k=4 fat-tree of userspace Open vSwitch switches, with real packets.

Started with ``ryu-manager controller/app.py`` and no topology file, the controller must
discover the fabric, route every pair, spread flows over the core and survive a link
failure. Figures measured on the way are saved in the run directory (figures.json).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mininet_scenarios.harness.stack import LoomStack, expected_links
from mininet_scenarios.workloads.iperf import iperf3_flows
from tests.emulation.collision_support import collide
from topologies import fat_tree

pytestmark = pytest.mark.emulation
RATE = 10.0


def record(run_dir: Path, name: str, value: object) -> None:
    """Keep the figures a run measured next to its logs (the closing notes quote them)."""
    path = run_dir / "figures.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[name] = value
    path.write_text(json.dumps(data, indent=1))


@pytest.fixture(scope="module")
def fat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomStack]:
    run_dir = tmp_path_factory.mktemp("loom-fat-tree")
    with LoomStack(fat_tree(4, rate_mbps=RATE), run_dir) as stack:
        record(run_dir, "discovery_seconds", round(stack.discovery_seconds, 2))
        yield stack


def test_fat_tree_every_link_discovered(fat: LoomStack) -> None:
    topo = fat.api.topology()
    assert len(topo["switches"]) == 20
    assert len(topo["links"]) == expected_links(fat.graph) == 64
    assert topo["groups"] is None  # no dragonfly groups on a fat-tree


def test_fat_tree_pingall_loses_nothing(fat: LoomStack) -> None:
    result = fat.net.pingall(timeout=2.0)
    record(fat.run_dir, "pingall_loss_pct", result.loss_pct)
    assert result.loss_pct == 0.0, (
        f"failed pairs: {result.failed[:10]}\n{fat.controller_log()[-2000:]}"
    )
    assert fat.api.health()["hosts"] == 16


def test_cross_pod_tcp_flow_reaches_90_percent_of_link_rate(fat: LoomStack) -> None:
    run = iperf3_flows(fat.net, [("h1", "h16")], seconds=8)
    (flow,) = run.flows
    record(fat.run_dir, "cross_pod_mbps", round(flow.mbps, 2))
    assert flow.error is None, flow.error
    assert flow.mbps >= 0.9 * RATE, f"{flow.mbps:.2f} Mbit/s of {RATE}"


def test_two_elephants_hashing_would_collide_are_placed_apart_from_the_first_packet(
    fat: LoomStack,
) -> None:
    """The pair ``collide`` runs shares one uplink under ECMP hashing (the traffic-
    engineering tests show it with placement off); placed at their first packet, they run
    apart from the start, on a fabric whose ports report 10 Gbit/s."""
    rates, run = collide(fat, seconds=8)
    start = next(t for t, a, b in rates if min(a, b) > 0.05 * RATE)  # both sending
    apart = next((t for t, a, b in rates if a > 0.6 * RATE and b > 0.6 * RATE), None)
    record(fat.run_dir, "placed_pair_apart_after_s", apart and round(apart - start, 2))
    record(fat.run_dir, "placed_pair_mbps", [round(f.mbps, 2) for f in run.flows])
    # 1.5 s from when both send, as the demo checks: slow start, on a machine also running
    # the fabric; moved by traffic engineering after measuring instead, the pair shares one
    # uplink for 3 s or more (3.1-3.45 s measured). Counted from the first flow instead, a
    # busy machine's client start skew alone (one flow at 10 Mbit/s alone for 1.3 s) failed it.
    assert apart is not None and apart - start <= 1.5, rates[:8]
    assert all(f.mbps > 0.85 * RATE for f in run.flows), [f.mbps for f in run.flows]


def core_tx_bytes(stack: LoomStack) -> dict[str, int]:
    return {
        c: sum(p.tx_bytes for p in stack.net.port_counters(c).values())
        for c in ("c1", "c2", "c3", "c4")
    }


def test_eight_cross_pod_flows_spread_over_more_than_half_the_cores(fat: LoomStack) -> None:
    before = core_tx_bytes(fat)
    pairs = [(f"h{i}", f"h{i + 8}") for i in range(1, 9)]  # pods 0,1 -> pods 2,3
    # Fixed, distinct client ports: the switches hash the same flows the same way on every
    # run. (OVS hashes symmetrically, src XOR dst: with one shared client port every flow
    # of this stride pattern hashes alike and all pick the same aggregation switch.)
    run = iperf3_flows(fat.net, pairs, seconds=6, cport_base=43210)
    assert all(f.error is None for f in run.flows), [f.error for f in run.flows]
    after = core_tx_bytes(fat)
    carried = {c: after[c] - before[c] for c in after}
    one_flow = 6 * RATE * 1e6 / 8 * 0.3  # 30 % of what one flow sends in the run
    busy = sorted(c for c, b in carried.items() if b > one_flow)
    record(fat.run_dir, "cores_carrying_traffic", busy)
    assert len(busy) > 2, f"core bytes: {carried}"


def test_fat_tree_link_down_then_pingall_recovers(fat: LoomStack) -> None:
    fat.net.set_link("a0_0", "c1", False)
    try:
        wait_links(fat, 62)  # both directions gone, from PortStatus alone
        failed: list[list[tuple[str, str]]] = []
        for _ in range(3):  # recovered: a pingall with no loss within a few seconds
            result = fat.net.pingall(timeout=2.0)
            if result.loss_pct == 0.0:
                break
            failed.append(result.failed[:10])
            time.sleep(1.0)
        record(fat.run_dir, "link_down_rounds_with_loss", failed)
        assert result.loss_pct == 0.0, failed
    finally:
        fat.net.set_link("a0_0", "c1", True)
    fat.api.wait_for(20, 64, timeout=15)


def wait_links(stack: LoomStack, n: int, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while (seen := stack.api.health()["links"]) != n:
        assert time.monotonic() < deadline, f"controller sees {seen} links, expected {n}"
        time.sleep(0.05)
