"""The ``faucet`` baseline: Faucet (from ``.venv-faucet``) runs the fabric Loom runs.

Faucet's own config checker accepts what ``faucet_config`` generates for every kind of
fabric (and rejects a mis-cabled stack, so it really checks); on a k=4 fat-tree with Faucet
as controller the stack comes up, every host pair answers and one cross-pod TCP flow runs at
line rate over the tree. Figures land in the run directory (figures.json).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import networkx as nx
import pytest
import yaml

from mininet_scenarios.harness.faucet import (
    FAUCET_BIN,
    FaucetProcess,
    check_faucet_config,
    faucet_config,
    faucet_ready,
)
from mininet_scenarios.harness.network import FabricNet
from mininet_scenarios.workloads.iperf import iperf3_flows
from topologies import dragonfly, fat_tree, leaf_spine

pytestmark = [
    pytest.mark.emulation,
    pytest.mark.skipif(
        not FAUCET_BIN.exists() and not os.environ.get("LOOM_REQUIRE_EMULATION"),
        reason="no .venv-faucet (make faucet-venv)",
    ),
]
RATE = 10.0
READY_WITHIN = 60.0  # measured: stack UP 7-9 s after Faucet starts, every pair 10-12 s
GRAPHS: dict[str, Callable[[], nx.MultiGraph]] = {
    "fat_tree4": lambda: fat_tree(4),
    "dragonfly_4_1_1_5": lambda: dragonfly(a=4, p=1, h=1, g=5),
    "leaf_spine": lambda: leaf_spine(),
}


def record(run_dir: Path, name: str, value: object) -> None:
    path = run_dir / "figures.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[name] = value
    path.write_text(json.dumps(data, indent=1))


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_faucets_checker_accepts_the_generated_config(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(faucet_config(GRAPHS[name]()))
    ok, output = check_faucet_config(path)
    assert ok, output[-3000:]


def test_faucets_checker_rejects_a_miscabled_stack(tmp_path: Path) -> None:
    doc = yaml.safe_load(faucet_config(fat_tree(4)))
    # c1 port 1 leads to a0_0 port 3; claim a port a0_0 does not have.
    assert doc["dps"]["c1"]["interfaces"][1]["stack"] == {"dp": "a0_0", "port": 3}
    doc["dps"]["c1"]["interfaces"][1]["stack"]["port"] = 9
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    ok, output = check_faucet_config(path)
    assert not ok and "stack port 9" in output, output[-2000:]


@pytest.fixture(scope="module")
def fat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """Faucet and a k=4 fat-tree at 10 Mbit/s, up and fully reachable (or the error)."""
    run_dir = tmp_path_factory.mktemp("faucet-fat-tree")
    graph = fat_tree(4, rate_mbps=RATE)
    with (
        FaucetProcess(graph, run_dir) as faucet,
        FabricNet(graph, controller=faucet.address, run_dir=run_dir) as fnet,
    ):
        started = time.monotonic()
        assert fnet.wait_connected(30), faucet.log_tail()
        error = None
        try:
            ready = faucet_ready(fnet, READY_WITHIN, faucet=faucet)
        except Exception as exc:  # reported by the test that needs it, not as a setup error
            ready, error = None, exc
        if ready is not None:
            record(run_dir, "stack_up_seconds", round(ready.stack_seconds or 0.0, 2))
            record(run_dir, "ready_seconds", round(time.monotonic() - started, 2))
        yield SimpleNamespace(faucet=faucet, fnet=fnet, ready=ready, error=error, run_dir=run_dir)
        faucet.check_alive()


def test_stack_comes_up_and_pingall_reaches_zero_loss(fat: SimpleNamespace) -> None:
    assert fat.error is None, str(fat.error)
    assert fat.ready.pingall.loss_pct == 0.0
    # The tree Faucet computed is rooted at the core switch c1: every other switch has a
    # port towards it, and the aggregation switches of c1 use their c1 uplink (port 3).
    hops = fat.faucet.root_hop_ports()
    assert set(hops) == set(fat.fnet.switch_names) - {"c1"}
    assert all(hops[f"a{pod}_0"] == 3 for pod in range(4))
    again = fat.fnet.pingall(timeout=2.0)
    # A busy machine can hold one ping past 2 s (an ARP entry renewed through Faucet's
    # controller path); such pairs must answer within three tries of 5 s.
    for src, dst in again.failed:
        ip = fat.fnet.graph.nodes[dst]["ip"]
        out = fat.fnet.host(src).cmd(f"ping -n -q -c3 -W5 {ip}")
        assert " 0 received" not in out and "100% packet loss" not in out, (src, dst, out)


def test_cross_pod_tcp_flow_reaches_80_percent_of_link_rate(fat: SimpleNamespace) -> None:
    assert fat.error is None, str(fat.error)
    for _ in range(2):
        # Under CPU contention Faucet's beacons can run late and it drops and re-forms the
        # whole stack (seen once in ~10 runs here); such a run measures that, not the tree,
        # so it is recorded and measured again once the stack is back.
        before = fat.faucet.stack_changes()
        run = iperf3_flows(fat.fnet, [("h1", "h16")], seconds=8)
        flaps = fat.faucet.stack_changes() - before
        if not flaps:
            break
        record(fat.run_dir, "stack_changes_during_flow", flaps)
        faucet_ready(fat.fnet, READY_WITHIN, faucet=fat.faucet)
    (flow,) = run.flows
    record(fat.run_dir, "cross_pod_mbps", round(flow.mbps, 2))
    assert flow.error is None, flow.error
    assert flow.mbps >= 0.8 * RATE, f"{flow.mbps:.2f} Mbit/s of {RATE}; stack changes {flaps}"
