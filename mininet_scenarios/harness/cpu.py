"""CPU idle % from /proc/stat during a run: every hop of the userspace datapath costs CPU in
one ovs-vswitchd, so a busy CPU invalidates a benchmark.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


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


OVS_VSWITCHD_PIDFILE = "/var/run/openvswitch/ovs-vswitchd.pid"


def ovs_vswitchd_pid() -> int | None:
    """ovs-vswitchd's PID from its pidfile (None: not running or unreadable)."""
    try:
        with open(OVS_VSWITCHD_PIDFILE) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def thread_cpu_seconds(pid: int) -> dict[int, tuple[str, float]]:
    """Thread ID -> (name, user + system CPU seconds so far) of every thread of ``pid``.
    The userspace datapath forwards in a few threads: one of them saturated caps the whole
    fabric while the machine as a whole still looks idle."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[str, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        out[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / tick)
    return out


def busiest_thread(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], seconds: float
) -> dict[str, object] | None:
    """The thread that used the most CPU between two :func:`thread_cpu_seconds` readings
    ``seconds`` apart: its name and its share of one CPU in %."""
    if seconds <= 0:
        return None
    best: tuple[float, str] | None = None
    for tid, (name, used) in after.items():
        delta = used - before.get(tid, (name, 0.0))[1]
        if best is None or delta > best[0]:
            best = (delta, f"{name}/{tid}")
    if best is None:
        return None
    return {"thread": best[1], "cpu_pct": round(100.0 * best[0] / seconds, 1)}


Threads = dict[int, tuple[str, float]]


def cpu_mark(ctl_pid: int | None) -> tuple[float, Threads, Threads]:
    """When, and the CPU seconds so far of ovs-vswitchd's threads and the controller's."""
    ovs = ovs_vswitchd_pid()
    return (
        time.monotonic(),
        thread_cpu_seconds(ovs) if ovs is not None else {},
        thread_cpu_seconds(ctl_pid) if ctl_pid is not None else {},
    )


def cpu_used(
    before: tuple[float, Threads, Threads], after: tuple[float, Threads, Threads]
) -> dict[str, Any]:
    """A run's CPU, in % of one CPU: ovs-vswitchd's busiest thread (one saturated thread
    caps the whole emulated fabric: the figure is then the emulator's) and the controller."""
    span = after[0] - before[0]
    busiest = busiest_thread(before[1], after[1], span) if after[1] else None
    used = sum(c for _, c in after[2].values()) - sum(c for _, c in before[2].values())
    return {
        "ovs_busiest_pct": busiest["cpu_pct"] if busiest else None,
        "controller_cpu_pct": round(100 * used / span, 1) if after[2] and span > 0 else None,
    }
