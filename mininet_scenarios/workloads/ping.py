"""Ping as a measurement: loss and round-trip times between two hosts (:func:`ping_stats`),
and the parser of ``ping -q`` summaries (:func:`parse_ping`) other workloads reuse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mininet_scenarios.harness.reachability import RTT_RE

if TYPE_CHECKING:
    from mininet_scenarios.harness.network import FabricNet

_SENT_RE = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")


@dataclass(frozen=True)
class PingStats:
    sent: int
    received: int
    loss_pct: float
    rtt_min_ms: float | None
    rtt_avg_ms: float | None
    rtt_max_ms: float | None
    rtt_mdev_ms: float | None


def parse_ping(text: str) -> PingStats:
    sent = received = 0
    m = _SENT_RE.search(text)
    if m:
        sent, received = int(m.group(1)), int(m.group(2))
    r = RTT_RE.search(text)
    rtt = [float(r.group(i)) for i in range(1, 5)] if r else [None] * 4
    loss = 100.0 * (sent - received) / sent if sent else 100.0
    return PingStats(sent, received, loss, *rtt)


def ping_stats(
    fnet: FabricNet,
    src: str,
    dst: str,
    count: int = 10,
    interval: float = 0.2,
    timeout: float = 1.0,
) -> PingStats:
    """``count`` pings from ``src`` to ``dst`` ``interval`` seconds apart; loss and RTTs."""
    ip = fnet.graph.nodes[dst]["ip"]
    out = fnet.host(src).cmd(f"ping -n -q -c {count} -i {interval:g} -W {timeout:g} {ip} 2>&1")
    return parse_ping(out)
