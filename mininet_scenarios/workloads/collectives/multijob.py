"""Several gloo collectives at once on disjoint host sets, as a shared cluster runs them.

:func:`run_mix` starts every job's ranks at once (each job its own rendezvous port, Loom
job name, tenant and directory), registers them with Loom first when asked, and drives
them through phases with the worker's go files (:mod:`.worker`): each job alone, one after
the other, the others' ranks up and idle; then all of them together. One process group per
job serves both phases, so a job keeps its TCP connections (and so its ECMP hashes) from
its run alone to the mix: the ratio of the two is what sharing the fabric costs it, not a
different roll of the hash. In the mix every job runs on until every job has done its
timed iterations, and a job's mix busbw is the median of its timed iterations that lie
wholly inside the *window* where every job was in its mix phase: a job that finishes
first never leaves another's last iteration running alone.

:func:`run_churn` keeps some jobs running (until told to stop) while others arrive one
at a time (registered, set going, run a few iterations, deleted) and records every
iteration of the long-running jobs (busbw, wall-clock span, retransmitted bytes) and the
collective-class counters at every arrival and departure.

:func:`run_collective` (:mod:`.runner`) stays the way to run one job by itself.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mininet_scenarios import emulation_logger
from mininet_scenarios.harness.client import LabClient, LoomApiError
from mininet_scenarios.harness.processes import REPO_ROOT, alive, kill_pids
from mininet_scenarios.workloads.collectives.diag import class_delta, class_snapshot, cpu_sampler
from mininet_scenarios.workloads.collectives.hosts import (
    CollectiveError,
    fabric_of,
    host_intf,
    host_ips,
    link_rate,
    prepare_rank_hosts,
    rendezvous,
    start_in_host,
)
from mininet_scenarios.workloads.collectives.model import (
    OPS,
    JobPlan,
    PhaseResult,
    label_spans,
    mix_window,
    phase_result,
)
from mininet_scenarios.workloads.collectives.runner import WORKER, register_job

if TYPE_CHECKING:
    from mininet_scenarios.harness.network import FabricNet
    from mininet_scenarios.harness.stack import LoomStack

log = emulation_logger()
Say = Callable[[str], None]


# --------------------------------------------------------------------------- one job's ranks


class JobRanks:
    """The rank processes of one job, started together and driven through ``phases`` (go
    file names; none: one phase that starts at once and runs ``iters`` iterations)."""

    def __init__(
        self,
        fnet: FabricNet,
        plan: JobPlan,
        out_dir: Path,
        *,
        mib: float,
        iters: int,
        warmup: int,
        phases: Sequence[str] = (),
        timeout: float = 900.0,
        tcp_every_iter: bool = False,
    ) -> None:
        if plan.op not in OPS:
            raise ValueError(f"unknown op {plan.op!r}; expected one of {', '.join(OPS)}")
        self.fnet, self.plan, self.out_dir = fnet, plan, out_dir
        self.mib, self.iters, self.warmup = mib, iters, warmup
        self.timeout, self.tcp_every_iter = timeout, tcp_every_iter
        self.phases = list(phases)
        n = len(plan.hosts)
        self.outs = [out_dir / f"rank{r}.json" for r in range(n)]
        self.logs = [out_dir / f"rank{r}.txt" for r in range(n)]
        self.progress_path = out_dir / "progress.json"
        self.go_files = [out_dir / f"go-{p}" for p in self.phases]
        self.pids: list[int] = []

    def start(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        stale = [*self.outs, *self.logs, self.progress_path, *self.go_files]
        for path in stale + [self.stop_file(i) for i in range(len(self.phases))]:
            path.unlink(missing_ok=True)  # a job is driven by these files: never old ones
        ips = host_ips(self.fnet, self.plan.hosts)
        n = len(ips)
        masters = rendezvous(self.fnet, self.plan.hosts)
        gos = "".join(f" --go {g}" for g in self.go_files)
        for r, h in enumerate(self.plan.hosts):
            cmd = (
                f"env PYTHONPATH={REPO_ROOT} OMP_NUM_THREADS=1 MKL_NUM_THREADS=1"
                f" {sys.executable} -m {WORKER}"
                f" --rank {r} --world {n} --master {masters[r]} --port {self.plan.port}"
                f" --op {self.plan.op} --mib {self.mib:g} --iters {self.iters}"
                f" --warmup {self.warmup} --ifname {host_intf(self.fnet, h)} --out {self.outs[r]}"
                f" --timeout {int(self.timeout)} --progress {self.progress_path}{gos}"
                + (" --tcp-every-iter" if self.tcp_every_iter else "")
                + f" > {self.logs[r]} 2>&1"
            )
            self.pids.append(start_in_host(self.fnet, h, cmd))

    def stop_file(self, phase: int) -> Path:
        go = self.go_files[phase]
        return go.with_name(go.name + ".stop")

    def progress(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.progress_path.read_text()))
        except (OSError, ValueError):
            return {}

    def ready(self) -> bool:
        return bool(self.progress().get("ready"))

    def go(self, phase: int, hold: bool = False) -> float:
        """Start ``phase``; ``hold``: it runs on after its iterations until :meth:`stop`."""
        if not hold:
            self.stop_file(phase).touch()
        self.go_files[phase].touch()
        return time.time()

    def stop(self, phase: int) -> None:
        self.stop_file(phase).touch()

    def timed(self, phase: int) -> int:
        """Timed iterations ``phase`` has done (all of them once it is over)."""
        p = self.progress()
        if p.get("phase", -1) < phase:
            return 0
        if p.get("phase") == phase:
            return int(p.get("timed", 0))
        return 10**9

    def phase_done(self, phase: int) -> bool:
        return int(self.progress().get("phase_done", -1)) >= phase or self.finished()

    def finished(self) -> bool:
        return all(p.exists() for p in self.outs)

    def check(self) -> None:
        """Raise :class:`CollectiveError` if a rank died without writing its result."""
        dead = [
            r for r, pid in enumerate(self.pids) if not alive(pid) and not self.outs[r].exists()
        ]
        if dead:
            time.sleep(0.5)  # a rank may have written its file just before exiting
            dead = [r for r in dead if not self.outs[r].exists()]
        if dead:
            tails = "\n".join(f"rank {r}: {_tail(self.logs[r])}" for r in dead[:4])
            raise CollectiveError(
                f"{self.plan.name}: ranks {dead} exited without a result:\n{tails}"
            )

    def kill(self) -> None:
        kill_pids([p for p in self.pids if alive(p)], grace=1.0)

    def docs(self) -> list[dict[str, Any]]:
        return [json.loads(p.read_text()) for p in self.outs]

    def result(self, phase: int = 0) -> PhaseResult:
        """``phase`` of the finished job, from the ranks' documents."""
        hosts, fnet = self.plan.hosts, self.fnet
        return phase_result(
            self.plan, self.docs(), phase, link_rate(fnet, hosts), host_ips(fnet, hosts)
        )


def wait_until(
    cond: Callable[[], bool], jobs: Sequence[JobRanks], timeout: float, what: str
) -> float:
    """Poll ``cond`` until it holds (seconds waited); raise if a rank of ``jobs`` died or
    ``timeout`` passed."""
    t0 = time.monotonic()
    while not cond():
        for j in jobs:
            j.check()
        if time.monotonic() - t0 > timeout:
            tails = "; ".join(f"{j.plan.name}: {_tail(j.logs[0], 1).strip()}" for j in jobs)
            raise CollectiveError(f"{what}: not done after {timeout:.0f} s ({tails})")
        time.sleep(0.2)
    return time.monotonic() - t0


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


def cpu_summary(samples: Sequence[Any], lo: float, hi: float) -> dict[str, float | None]:
    """Machine idle % (mean, min), ovs-vswitchd's forwarding thread's time on a core and
    its wait for one (means) in ``[lo, hi]``."""
    inside = [c for c in samples if lo <= c.at <= hi]
    idle = [c.idle for c in inside]
    busy = [c.ovs_busy for c in inside if c.ovs_busy is not None]
    wait = [c.ovs_wait for c in inside if c.ovs_wait is not None]
    return {
        "idle_mean": statistics.fmean(idle) if idle else None,
        "idle_min": min(idle) if idle else None,
        "ovs_busy_mean": statistics.fmean(busy) if busy else None,
        "ovs_wait_mean": statistics.fmean(wait) if wait else None,
    }


def prime(fnet: FabricNet, hosts: Sequence[str]) -> int:
    """One ping from each host to the next in rank order, so Loom has learned every host
    (a job's hosts are one tenant's: the policy lets them reach each other); pings lost."""
    ips = host_ips(fnet, hosts)
    lost = 0
    for i, h in enumerate(hosts):
        out = fnet.host(h).cmd(
            f"ping -n -q -c1 -W1 {ips[(i + 1) % len(ips)]} >/dev/null; echo rc=$?"
        )
        lost += "rc=0" not in out
    return lost


class _Loom:
    """The jobs of one run as Loom knows them: registered, read, deleted (no-ops when the
    run does not register its jobs)."""

    def __init__(self, fnet: FabricNet, api: LabClient | None, poll_interval: float) -> None:
        self.fnet, self.api, self.poll_interval = fnet, api, poll_interval
        self.registered: list[str] = []
        self.views: dict[str, dict[str, Any] | None] = {}
        self.deleted: dict[str, bool | None] = {}

    def register(self, plan: JobPlan) -> None:
        if self.api is not None:
            register_job(self.api, self.fnet, list(plan.hosts), plan.op, plan.name, plan.tenant)
            self.registered.append(plan.name)

    def read(self, names: Sequence[str]) -> None:
        """Loom's view of each job, after its next counter poll has seen the last bytes."""
        if self.api is None:
            return
        time.sleep(3 * self.poll_interval)
        for name in names:
            try:
                self.views[name] = dict(self.api.request("GET", f"/loom/v1/jobs/{name}"))
            except (LoomApiError, OSError):
                self.views[name] = None

    def delete(self, name: str) -> None:
        """DELETE the job; ``deleted``: True once Loom answers 404, None if a call failed."""
        if self.api is None or name not in self.registered:
            return
        self.registered.remove(name)
        try:
            self.api.request("DELETE", f"/loom/v1/jobs/{name}")
            try:
                self.api.request("GET", f"/loom/v1/jobs/{name}")
                self.deleted[name] = False
            except LoomApiError as err:
                self.deleted[name] = err.status == 404
        except (LoomApiError, OSError) as err:
            log.warning("multijob: could not delete job %s: %s", name, err)
            self.deleted[name] = None

    def close(self) -> None:
        for name in list(self.registered):
            self.delete(name)


def _prepare(fnet: FabricNet, plans: Sequence[JobPlan]) -> int:
    """Check the jobs are disjoint, prepare their hosts, prime them; pings lost."""
    hosts = [h for p in plans for h in p.hosts]
    if len(set(hosts)) != len(hosts):
        raise ValueError("the jobs' host sets overlap")
    if len({p.port for p in plans}) != len(plans) or len({p.name for p in plans}) != len(plans):
        raise ValueError("every job needs its own name and rendezvous port")
    prepare_rank_hosts(fnet, hosts)
    return sum(prime(fnet, p.hosts) for p in plans)


# --------------------------------------------------------------------------- a mix


@dataclass
class MixResult:
    """Every job alone and in the mix. ``window``: wall-clock span in which every job was in
    its mix phase; ``mix_busbw_mbps``: each job's median over its timed mix iterations
    inside it (None: none inside)."""

    plans: list[JobPlan]
    alone: dict[str, PhaseResult]
    mix: dict[str, PhaseResult]
    window: list[float]
    mix_busbw_mbps: dict[str, float | None]
    jobs: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # Loom's views
    deleted: dict[str, bool | None] = field(default_factory=dict)
    classes: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    cpu: dict[str, dict[str, float | None]] = field(default_factory=dict)
    primed_lost: int = 0
    startup_s: float = 0.0
    wall_s: float = 0.0

    def ratio(self, name: str) -> float | None:
        """The job's busbw in the mix / alone."""
        mixed = self.mix_busbw_mbps.get(name)
        return None if mixed is None else mixed / self.alone[name].busbw

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": {p.name: self.ratio(p.name) for p in self.plans}}


def run_mix(
    target: LoomStack | FabricNet,
    plans: Sequence[JobPlan],
    *,
    mib: float,
    iters: int,
    warmup: int = 1,
    register: LabClient | None = None,
    out_dir: Path,
    phase_timeout: float = 600.0,
    drain: float = 1.0,
    poll_interval: float = 0.5,
    say: Say = log.info,
) -> MixResult:
    """Every job of ``plans`` alone (one after another, in order), then all at once.

    ``register``: Loom's client; every job is registered (its own name and tenant) before
    any rank starts and deleted at the end, and Loom's view of each (paths, bytes) is read
    after the mix. ``phase_timeout``: seconds for one phase (start-up included)."""
    fnet = fabric_of(target)
    t_start = time.monotonic()
    lost = _prepare(fnet, plans)
    total = phase_timeout * (len(plans) + 2)
    ranks = [
        JobRanks(fnet, p, out_dir / p.name, mib=mib, iters=iters, warmup=warmup,
                 phases=("alone", "mix"), timeout=total)
        for p in plans
    ]  # fmt: skip
    loom = _Loom(fnet, register, poll_interval)
    classes: dict[str, dict[str, dict[str, int]]] = {}
    spans: dict[str, tuple[float, float]] = {}
    try:
        for p in plans:
            loom.register(p)
        with cpu_sampler() as cpu:
            for j in ranks:
                j.start()
            startup = wait_until(lambda: all(j.ready() for j in ranks), ranks, total, "start-up")
            say(f"{len(ranks)} jobs' ranks up in {startup:.0f} s")
            for j in ranks:
                name, before = j.plan.name, class_snapshot(fnet)
                t0 = j.go(0)
                wait_until(partial(j.phase_done, 0), ranks, phase_timeout, f"{name} alone")
                spans[f"alone:{name}"] = (t0, time.time())
                classes[f"alone:{name}"] = class_delta(before, class_snapshot(fnet))
                secs = j.progress().get("seconds") or []
                say(f"{name} alone: {' '.join(f'{s:.1f}' for s in secs)} s (rank 0)")
                time.sleep(drain)
            before = class_snapshot(fnet)
            t0 = min(j.go(1, hold=True) for j in ranks)
            enough = lambda: all(j.timed(1) >= iters for j in ranks)  # noqa: E731
            wait_until(enough, ranks, phase_timeout, "the mix")
            for j in ranks:
                j.stop(1)
            wait_until(lambda: all(j.finished() for j in ranks), ranks, phase_timeout, "the mix")
            spans["mix"] = (t0, time.time())
            classes["mix"] = class_delta(before, class_snapshot(fnet))
        loom.read([p.name for p in plans])
    finally:
        for j in ranks:
            j.kill()
        loom.close()
    mixed = {j.plan.name: j.result(1) for j in ranks}
    window = mix_window(list(mixed.values()))
    inside = {k: r.busbw_within(*window) for k, r in mixed.items()}
    result = MixResult(
        plans=list(plans),
        alone={j.plan.name: j.result(0) for j in ranks},
        mix=mixed,
        window=window,
        mix_busbw_mbps={k: statistics.median(v) if v else None for k, v in inside.items()},
        jobs=loom.views,
        deleted=loom.deleted,
        classes=classes,
        cpu={k: cpu_summary(cpu, lo, hi) for k, (lo, hi) in spans.items()},
        primed_lost=lost,
        startup_s=startup,
        wall_s=time.monotonic() - t_start,
    )
    (out_dir / "mix.json").write_text(json.dumps(result.as_dict(), indent=1))
    return result


# --------------------------------------------------------------------------- churn


@dataclass
class ChurnResult:
    """Long-running jobs while others come and go. ``marks``: ``(job, arrived, left)`` wall
    clock (registered and started; done and deleted); ``labels``: per long job, each timed
    iteration's place (``before``, an arriving job's name, ``<name>:after``); ``classes``:
    class counter deltas over the same spans."""

    long: dict[str, PhaseResult]
    arrivals: dict[str, PhaseResult]
    marks: list[tuple[str, float, float]]
    labels: dict[str, list[str]]
    go_at: float
    end_at: float
    classes: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    cpu_idle_iter: dict[str, list[float | None]] = field(default_factory=dict)
    jobs: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    deleted: dict[str, bool | None] = field(default_factory=dict)
    startup_s: float = 0.0
    wall_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_churn(
    target: LoomStack | FabricNet,
    long: Sequence[JobPlan],
    arrivals: Sequence[JobPlan],
    *,
    mib: float,
    iters: int,
    warmup: int = 1,
    register: LabClient | None = None,
    out_dir: Path,
    before: int = 3,
    between: int = 2,
    after: int = 3,
    phase_timeout: float = 600.0,
    poll_interval: float = 0.5,
    say: Say = log.info,
) -> ChurnResult:
    """``long`` jobs run from the start until the end; after ``before`` of their timed
    iterations each of ``arrivals`` in turn arrives (registered, then started), runs its
    ``warmup`` + ``iters`` iterations and leaves (deleted); ``between`` long iterations
    pass between arrivals and ``after`` after the last.

    Every job's ranks start at the beginning and the arriving ones wait, idle, at their go
    file (a scheduler's containers at a barrier): an arrival is then the job's traffic,
    not four Python processes importing torch on a 2-core machine that also switches the
    fabric. Its idle TCP connections, opened at start-up, carried only gloo's handshake;
    it is registered right before its go, i.e. before its first data byte. The long jobs
    record the retransmitted bytes of every iteration."""
    fnet = fabric_of(target)
    t_start = time.monotonic()
    _prepare(fnet, [*long, *arrivals])
    total = phase_timeout * (len(arrivals) + 3)
    longs = [
        JobRanks(fnet, p, out_dir / p.name, mib=mib, iters=iters, warmup=warmup,
                 phases=("churn",), timeout=total, tcp_every_iter=True)
        for p in long
    ]  # fmt: skip
    comers = [
        JobRanks(fnet, p, out_dir / p.name, mib=mib, iters=iters, warmup=warmup,
                 phases=("arrive",), timeout=total)
        for p in arrivals
    ]  # fmt: skip
    everyone = [*longs, *comers]
    loom = _Loom(fnet, register, poll_interval)
    classes: dict[str, dict[str, dict[str, int]]] = {}
    marks: list[tuple[str, float, float]] = []

    def long_iterations(more: int, what: str) -> None:
        base = {j.plan.name: j.timed(0) for j in longs}
        done = lambda: all(j.timed(0) >= base[j.plan.name] + more for j in longs)  # noqa: E731
        wait_until(done, everyone, phase_timeout, what)

    try:
        for p in long:
            loom.register(p)
        with cpu_sampler() as cpu:
            for j in everyone:
                j.start()
            up = lambda: all(j.ready() for j in everyone)  # noqa: E731
            startup = wait_until(up, everyone, total, "start-up")
            say(f"churn: {len(everyone)} jobs' ranks up in {startup:.0f} s; long jobs start")
            label, snap = "before", class_snapshot(fnet)
            go_at = min(j.go(0, hold=True) for j in longs)
            long_iterations(before, "the long jobs' first iterations")
            for k, (plan, j) in enumerate(zip(arrivals, comers, strict=True)):
                now = class_snapshot(fnet)
                classes[label], snap = class_delta(snap, now), now
                arrived = time.time()
                loom.register(plan)
                j.go(0)
                say(f"churn: {plan.name} arrives ({len(plan.hosts)} ranks)")
                wait_until(j.finished, everyone, phase_timeout, plan.name)
                loom.read([plan.name])
                loom.delete(plan.name)
                left = time.time()
                marks.append((plan.name, arrived, left))
                now = class_snapshot(fnet)
                classes[plan.name], snap = class_delta(snap, now), now
                label = f"{plan.name}:after"
                say(f"churn: {plan.name} left after {left - arrived:.0f} s")
                last = k == len(arrivals) - 1
                long_iterations(after if last else between, f"long jobs after {plan.name}")
            for j in longs:
                j.stop(0)
            done = lambda: all(j.finished() for j in longs)  # noqa: E731
            wait_until(done, everyone, phase_timeout, "the end")
            end_at = time.time()
            classes[label] = class_delta(snap, class_snapshot(fnet))
        loom.read([p.name for p in long])
    finally:
        for j in everyone:
            j.kill()
        loom.close()
    long_res = {j.plan.name: j.result(0) for j in longs}
    result = ChurnResult(
        long=long_res,
        arrivals={j.plan.name: j.result(0) for j in comers},
        marks=marks,
        labels={k: label_spans(r.iter_wall, marks, "before") for k, r in long_res.items()},
        go_at=go_at,
        end_at=end_at,
        classes=classes,
        cpu_idle_iter={
            k: [cpu_summary(cpu, a, b)["idle_mean"] for a, b in r.iter_wall]
            for k, r in long_res.items()
        },
        jobs=loom.views,
        deleted=loom.deleted,
        startup_s=startup,
        wall_s=time.monotonic() - t_start,
    )
    (out_dir / "churn.json").write_text(json.dumps(result.as_dict(), indent=1))
    return result
