"""Loom on a 5-group dragonfly (4 routers per group, one global link per router).

The controller must infer the groups from the learned graph alone, route minimally and
recover from a global link failure.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from mininet_scenarios.harness.stack import LoomStack, expected_links
from tests.emulation.test_fat_tree import RATE, wait_links
from topologies import dragonfly

pytestmark = pytest.mark.emulation


@pytest.fixture(scope="module")
def fly(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomStack]:
    run_dir = tmp_path_factory.mktemp("loom-dragonfly")
    with LoomStack(dragonfly(a=4, p=1, h=1, g=5, rate_mbps=RATE), run_dir) as stack:
        yield stack


def test_dragonfly_discovered_as_five_groups_and_fully_reachable(fly: LoomStack) -> None:
    topo = fly.api.topology()
    assert len(topo["links"]) == expected_links(fly.graph) == 80
    assert topo["groups"] == 5
    result = fly.net.pingall(timeout=2.0)
    assert result.loss_pct == 0.0, result.failed[:10]


def test_dragonfly_global_link_down_then_pingall_recovers(fly: LoomStack) -> None:
    a, b = next((u, v) for u, v, d in fly.graph.edges(data=True) if d["scope"] == "global")
    fly.net.set_link(a, b, False)
    try:
        wait_links(fly, expected_links(fly.graph) - 2)
        failed: list[list[tuple[str, str]]] = []
        for _ in range(3):  # recovered: a pingall with no loss within a few seconds
            result = fly.net.pingall(timeout=2.0)
            if result.loss_pct == 0.0:
                break
            failed.append(result.failed)
            time.sleep(1.0)
        print(f"pingall rounds that lost pairs before recovery: {failed}")
        assert result.loss_pct == 0.0, failed
    finally:
        fly.net.set_link(a, b, True)
