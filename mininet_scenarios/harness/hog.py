"""A noisy neighbour on the controller's CPU: busy processes pinned to the one CPU the
controller is pinned to for as long as the hog runs, so it gets only what the scheduler
leaves it (a controller starved of CPU answers ARP late, or not at all).

The kernel's fair scheduler shares a CPU between *sessions* first when autogroup is on
(``kernel.sched_autogroup_enabled``, Debian's default), and only then by nice value within
each: a busy process weighs as much as the whole controller, whatever its nice, unless its
session's nice is set too. So each worker is a session of its own that pins itself and
sets its own and its session's nice (``/proc/self/autogroup``) before it spins: ``workers``
at nice -20 leave a nice-0 controller about 1 / (1 + 87 x workers) of its CPU.

Everything here is found and stopped by PID: the hog's process group, and the controller's
threads, whose CPU affinity is restored afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from mininet_scenarios.harness.processes import group_members

# argv: CPU NICE. Pins itself, weighs itself and its session, spins.
BUSY_LOOP = """
import os, sys
cpu, nice = int(sys.argv[1]), int(sys.argv[2])
os.sched_setaffinity(0, {cpu})
try:
    with open("/proc/self/autogroup", "w") as f:
        f.write(str(nice))
except OSError:
    pass
os.setpriority(os.PRIO_PROCESS, 0, nice)
while True:
    pass
"""


def threads_of(pids: Sequence[int]) -> list[int]:
    """Every thread (task ID) of the processes ``pids``."""
    tids: list[int] = []
    for pid in pids:
        with contextlib.suppress(OSError):
            tids += [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    return tids


def last_cpu(pid: int) -> int:
    """The CPU ``pid`` last ran on (``/proc/<pid>/stat`` field 39)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[36])


def pin(tids: Sequence[int], cpus: set[int]) -> dict[int, set[int]]:
    """Pin threads to ``cpus``; their previous affinities, for :func:`restore`."""
    before: dict[int, set[int]] = {}
    for tid in tids:
        with contextlib.suppress(OSError):
            before[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cpus)
    return before


def restore(affinities: dict[int, set[int]]) -> None:
    for tid, cpus in affinities.items():
        with contextlib.suppress(OSError):  # the thread may have ended
            os.sched_setaffinity(tid, cpus)


class CpuHog:
    """``with CpuHog([ctl.pid], workers=4, nice=-20) as hog:`` the controllers' process
    groups pinned to one CPU (``cpu``; default: the one the first controller last ran on)
    and ``workers`` busy Python loops at ``nice`` pinned to the same CPU, each a session of
    its own; on exit the hog is killed and the controllers get their affinity back."""

    def __init__(
        self, controller_pids: Sequence[int], workers: int = 4, nice: int = -20, cpu: int = -1
    ) -> None:
        self.controller_pids = [p for p in controller_pids if p]
        self.workers = workers
        self.nice = nice
        self.cpu = cpu
        self.procs: list[subprocess.Popen[bytes]] = []
        self._affinities: dict[int, set[int]] = {}

    @property
    def controller_share(self) -> float:
        """The share of its CPU the fair scheduler leaves a nice-0 controller."""
        weight = 1024 / 1.25**self.nice  # the kernel's nice-to-weight table, near enough
        return 1024 / (1024 + self.workers * weight)

    def start(self) -> CpuHog:
        if self.cpu < 0:
            self.cpu = last_cpu(self.controller_pids[0]) if self.controller_pids else 0
        members = [m for pgid in self.controller_pids for m in group_members(pgid)]
        self._affinities = pin(threads_of(members), {self.cpu})
        try:
            for _ in range(self.workers):
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, "-c", BUSY_LOOP, str(self.cpu), str(self.nice)],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        procs, self.procs = self.procs, []
        for proc in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: the group is its PID
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5.0)
        restore(self._affinities)
        self._affinities = {}

    def __enter__(self) -> CpuHog:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
