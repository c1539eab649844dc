"""The induced collision both traffic-engineering tests run: two iperf3 elephants that
Open vSwitch's select group hashes onto one of e0_0's uplinks, and the uplinks' rates
sampled meanwhile."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from mininet_scenarios.harness.stack import LoomStack
from mininet_scenarios.workloads.iperf import iperf3_flows


def uplink_bytes(stack: LoomStack) -> tuple[int, int]:
    counters = stack.net.port_counters("e0_0")
    return counters[3].tx_bytes, counters[4].tx_bytes  # to a0_0 and a0_1


def collide(stack: LoomStack, seconds: float) -> tuple[list[tuple[float, float, float]], Any]:
    """Run the two elephants; returns (seconds since start, Mbit/s on each uplink) every
    0.25 s, and the iperf3 run."""
    samples: list[tuple[float, int, int]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.monotonic(), *uplink_bytes(stack)))
            time.sleep(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    # The same client port on both: OVS hashes src XOR dst, which is equal for these two
    # flows, so the edge's select group puts both on one uplink until Loom moves one.
    t0 = time.monotonic()
    sampler.start()
    try:
        pairs = [("h1", "h5"), ("h2", "h6")]
        run = iperf3_flows(stack.net, pairs, seconds=seconds, extra_args=("--cport", "40000"))
    finally:
        stop.set()
        sampler.join()
    rates = [
        (t1 - t0, 8 * (a1 - a0) / (t1 - ta) / 1e6, 8 * (b1 - b0) / (t1 - ta) / 1e6)
        for (ta, a0, b0), (t1, a1, b1) in itertools.pairwise(samples)
    ]
    return rates, run
