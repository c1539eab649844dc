"""CPU idle % from /proc/stat during a run: every hop of the userspace datapath costs CPU in
one ovs-vswitchd, so a busy CPU invalidates a benchmark.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class CpuIdle:
    """Idle % (idle + iowait over all CPUs) per sampling interval."""

    samples: list[float] = field(default_factory=list)

    @property
    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None

    @property
    def min(self) -> float | None:
        return min(self.samples) if self.samples else None


def _cpu_times() -> tuple[int, int]:
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return values[3] + values[4], sum(values[:8])  # idle+iowait, total without guest


@contextlib.contextmanager
def cpu_idle_sampler(interval: float = 0.5) -> Iterator[CpuIdle]:
    """``with cpu_idle_sampler() as cpu: ...`` then ``cpu.mean``: idle % during the block."""
    result = CpuIdle()
    stop = threading.Event()

    def sample() -> None:
        idle0, total0 = _cpu_times()
        while not stop.wait(interval):
            idle1, total1 = _cpu_times()
            if total1 > total0:
                result.samples.append(100.0 * (idle1 - idle0) / (total1 - total0))
            idle0, total0 = idle1, total1

    thread = threading.Thread(target=sample, name="cpu-idle", daemon=True)
    start = _cpu_times()
    thread.start()
    try:
        yield result
    finally:
        stop.set()
        thread.join()
        if not result.samples:  # block shorter than one interval: one sample for the block
            idle, total = _cpu_times()
            if total > start[1]:
                result.samples.append(100.0 * (idle - start[0]) / (total - start[1]))
