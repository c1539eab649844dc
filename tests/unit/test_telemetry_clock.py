"""Port rates over the switch's own clock: replies that arrive late or early (a busy
switch, a busy controller) must not make a link TCP holds flat read as varying."""

from __future__ import annotations

from collections.abc import Sequence

from controller.model import PortStats
from controller.telemetry import Telemetry

MBIT = 1_000_000 // 8  # bytes a second at 1 Mbit/s


def readings(arrivals: Sequence[float], uptimes: Sequence[float | None]) -> list[float]:
    """Seconds of each interval of a port sending 1 Mbit/s by its own clock."""
    t = Telemetry()
    out = []
    for now, up in zip(arrivals, uptimes, strict=True):
        sent = int((up if up is not None else now) * MBIT)
        for _, reading in t.port_stats(now, 1, [PortStats(2, tx_bytes=sent, uptime=up)]):
            out.append(8 * reading.tx_bytes / reading.seconds / 1e6)
    return out


def test_rates_are_taken_over_the_switch_clock_not_the_reply_arrivals() -> None:
    arrivals = [0.0, 0.62, 0.91, 1.58, 2.0]  # a 0.5 s poll, replies held up on the way
    uptimes = [10.0, 10.5, 11.0, 11.5, 12.0]
    assert readings(arrivals, uptimes) == [1.0, 1.0, 1.0, 1.0]


def test_without_a_switch_clock_the_arrivals_are_used() -> None:
    arrivals = [0.0, 0.5, 1.0]
    assert readings(arrivals, [None, None, None]) == [1.0, 1.0]


def test_a_port_that_restarted_its_clock_falls_back_to_the_arrivals() -> None:
    t = Telemetry()
    t.port_stats(0.0, 1, [PortStats(2, tx_bytes=0, uptime=100.0)])
    ((_, reading),) = t.port_stats(0.5, 1, [PortStats(2, tx_bytes=MBIT // 2, uptime=0.2)])
    assert reading.seconds == 0.5
