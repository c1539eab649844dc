"""Traffic engineering on a plain fabric, told nothing: ports report the 10 Gbit/s of a
veth, links are shaped below it, no DSCP class tree, and the controller is started as
the README says with no ``LOOM_*`` hint. Loom learns what the links carry from what it
measures, and an induced collision of two elephants on one uplink is resolved."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator

import pytest

from mininet_scenarios.harness.stack import LoomStack
from mininet_scenarios.workloads.iperf import iperf3_flows
from topologies import fat_tree

pytestmark = pytest.mark.emulation
RATE = 10.0  # Mbit/s, shaped; the ports report 10,000
VETH_BPS = 10e9


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomStack]:
    run_dir = tmp_path_factory.mktemp("loom-te-plain")
    graph = fat_tree(4, rate_mbps=RATE)
    with LoomStack(graph, run_dir, env={}) as stack:
        assert stack.net.pingall(timeout=2.0).loss_pct == 0.0
        yield stack


def uplink_bytes(stack: LoomStack) -> tuple[int, int]:
    counters = stack.net.port_counters("e0_0")
    return counters[3].tx_bytes, counters[4].tx_bytes  # to a0_0 and a0_1


def test_ports_report_the_veth_speed_and_nothing_is_learned_while_idle(plain: LoomStack) -> None:
    links = plain.api.topology()["links"]
    assert links and all(link["reported_bps"] == VETH_BPS for link in links), links[:2]
    assert {link["capacity_source"] for link in links} == {"reported"}, links[:2]


def test_a_collision_of_two_elephants_is_resolved_without_any_hint(plain: LoomStack) -> None:
    samples: list[tuple[float, int, int]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.monotonic(), *uplink_bytes(plain)))
            time.sleep(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    # The same client port on both: OVS hashes src XOR dst, which is equal for these two
    # flows, so the edge's select group puts both on one uplink until Loom moves one.
    t0 = time.monotonic()
    sampler.start()
    try:
        run = iperf3_flows(
            plain.net, [("h1", "h5"), ("h2", "h6")], seconds=15, extra_args=("--cport", "40000")
        )
    finally:
        stop.set()
        sampler.join()
    rates = [
        (t1 - t0, 8 * (a1 - a0) / (t1 - ta) / 1e6, 8 * (b1 - b0) / (t1 - ta) / 1e6)
        for (ta, a0, b0), (t1, a1, b1) in itertools.pairwise(samples)
    ]
    links = plain.api.topology()["links"]
    learned = sorted({(lk["capacity_source"], round(lk["capacity_bps"] / 1e6, 2)) for lk in links})
    busy_both = [t for t, a, b in rates if a > 0.6 * RATE and b > 0.6 * RATE]
    one_only = [t for t, a, b in rates[:4] if (a > 0.6 * RATE) != (b > 0.6 * RATE)]
    (plain.run_dir / "collision.json").write_text(
        json.dumps({"rates": rates, "flows": [f.mbps for f in run.flows], "learned": learned})
    )
    assert one_only, f"expected the flows to start on one uplink: {rates[:6]}"
    assert busy_both, f"the collision was never resolved: {rates}; capacities {learned}"
    # what Loom believes now: every link below the 10 Gbit/s its port reports, near RATE
    beliefs = [link["capacity_bps"] for link in links]
    assert max(beliefs) < 2 * RATE * 1e6, learned
    assert min(beliefs) > 0.8 * RATE * 1e6, learned
    record = {
        "collision_resolved_after_s": round(busy_both[0], 2),
        "flows_mbps": [round(f.mbps, 2) for f in run.flows],
        "capacities": learned,
    }
    (plain.run_dir / "figures.json").write_text(json.dumps(record))
