"""Periodic per-switch work at a bounded rate: exact on small fabrics, spread on large."""

from __future__ import annotations

from collections import Counter

from controller.cadence import Cadence


def run(cadence: Cadence, switches: int, seconds: float, step: float = 0.1) -> list[list[int]]:
    weights = dict.fromkeys(range(switches), 1.0)
    ticks, now = [], 0.0
    while now < seconds - 1e-9:
        now = round(now + step, 6)
        ticks.append(cadence.due(now, weights))
    return ticks


def test_a_small_fabric_is_visited_at_the_nominal_interval_all_at_once() -> None:
    ticks = run(Cadence(0.5, 2000.0), 20, 2.0)
    busy = [i for i, t in enumerate(ticks) if t]
    assert busy == [0, 5, 10, 15] and all(len(ticks[i]) == 20 for i in busy)


def test_a_large_fabric_is_spread_over_ticks_within_the_rate() -> None:
    ticks = run(Cadence(0.5, 2000.0), 2880, 10.0)
    assert max(len(t) for t in ticks[1:]) <= 200 + 1  # 2,000 a second, 0.1 s ticks
    visits = Counter(d for t in ticks for d in t)
    assert set(visits) == set(range(2880))  # every switch, none starved
    period = Cadence(0.5, 2000.0).period(2880)
    assert 1.4 < period < 1.5 and max(visits.values()) <= 10.0 / period + 2
