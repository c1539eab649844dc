"""What every fuzz checker shares: the per-input time bound, the count of cases tried
and an optional observer (the benchmark records every case's time through it)."""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.fuzz.budget import BOUND_S

WATCHDOG_S = 10.0  # an input still running after this long is a hang: interrupted, failed
CASES: Counter[str] = Counter()  # kind -> inputs checked in this process
Observer = Callable[[str, float], None]
_observers: list[Observer] = []


def observe(fn: Observer) -> None:
    _observers.append(fn)


def unobserve(fn: Observer) -> None:
    _observers.remove(fn)


def record(kind: str, seconds: float) -> float:
    """Count one checked input of ``kind`` (before its invariants are asserted)."""
    CASES[kind] += 1
    for fn in list(_observers):
        fn(kind, seconds)
    return seconds


class _Hang(BaseException):
    """Raised by the watchdog; a BaseException so no ``except Exception`` swallows it."""


@contextmanager
def stopwatch(limit: float = WATCHDOG_S) -> Iterator[list[float]]:
    """``with stopwatch() as t: ...`` then ``t[0]`` is the elapsed seconds. A body that
    runs ``limit`` seconds is interrupted (SIGALRM, main thread only) and reported as a
    hang, so one looping input fails its test instead of stopping the suite."""
    out: list[float] = []
    armed = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    previous: Any = None
    if armed:

        def alarm(signum: int, frame: Any) -> None:
            raise _Hang

        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, limit)
    start = time.perf_counter()
    try:
        yield out
    except _Hang:
        raise AssertionError(f"hang: no answer within {limit:g} s (interrupted)") from None
    finally:
        if armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        out.append(time.perf_counter() - start)


def assert_bounded(kind: str, seconds: float, what: str) -> None:
    assert seconds < BOUND_S, f"{kind}: {what} took {seconds:.3f} s (bound {BOUND_S} s)"


def short(value: object, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"
