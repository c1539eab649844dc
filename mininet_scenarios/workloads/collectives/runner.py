"""Real ``torch.distributed`` (gloo) collectives on the emulated fabric, measured like nccl-tests.

:func:`run_collective` starts one :mod:`.worker` per host (:data:`WORKER`), in rank order
(rank 0's address is the rendezvous), optionally registers the job with Loom first and
deletes it afterwards, optionally loads the links with bulk iperf3 TCP flows for the whole
run, and returns a :class:`CollectiveResult`. The maths (busbw, rank orders) is in
:mod:`.model`, the hosts' preparation in :mod:`.hosts`, the bulk traffic in
:mod:`.background`, the diagnostics in :mod:`.diag`.

Each result carries the bytes every rank's TCP connections sent to each peer (``ss``), so
the ring's real direction is read, not assumed, and the bytes they retransmitted (loss that
no queue counter shows).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mininet_scenarios import emulation_logger
from mininet_scenarios.harness.client import LabClient, LoomApiError
from mininet_scenarios.harness.processes import REPO_ROOT, alive, kill_pids
from mininet_scenarios.workloads.collectives.background import (
    BackgroundFlow,
    Bulk,
    start_background,
    stop_background,
)
from mininet_scenarios.workloads.collectives.diag import (
    CpuSample,
    class_delta,
    class_snapshot,
    cpu_sampler,
    port_drops,
    shared_links,
    socket_drops,
)
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
from mininet_scenarios.workloads.collectives.model import OPS, ring_direction_seen, summarize

if TYPE_CHECKING:
    from mininet_scenarios.harness.network import FabricNet
    from mininet_scenarios.harness.stack import LoomStack

log = emulation_logger()

WORKER = "mininet_scenarios.workloads.collectives.worker"  # the rank, run in each host
# Loom job pattern and ring direction for each op, as gloo moves the data (see .model;
# read from `ss` on 4 loopback ranks and in the fabric, ring_direction_seen, torch 2.13):
# reduce-scatter is gloo's all-reduce ring underneath, so it sends as all-reduce does.
LOOM_PATTERN = {
    "all_reduce": ("ring", "backward"),
    "all_gather": ("ring", "forward"),
    "reduce_scatter": ("ring", "backward"),
    "all_to_all": ("all_to_all", None),
}


@dataclass
class CollectiveResult:
    """One collective run. ``seconds[i]``: iteration i's slowest rank; bandwidths in Mbit/s."""

    op: str
    hosts: list[str]
    ips: list[str]
    world: int
    bytes: int
    seconds: list[float]
    rank_seconds: list[list[float]]
    algbw_mbps: list[float]
    busbw_mbps: list[float]
    link_mbps: float
    wall_seconds: float
    startup_seconds: float
    check_ok: bool
    cpu_idle_mean: float | None
    cpu_idle_min: float | None
    ovs_busy_mean: float | None  # % of the time ovs-vswitchd's forwarding thread ran
    ovs_wait_mean: float | None  # % of the time it waited, runnable, for a core
    tcp_sent: dict[str, int] = field(default_factory=dict)  # "src>dst" (host names) -> bytes
    tcp_retrans_bytes: int = 0  # retransmitted by the ranks during the timed iterations
    ovs_port_drops: dict[str, int] = field(default_factory=dict)  # rx/tx dropped, all ports
    ovs_socket_drops: int = 0  # dropped by ovs-vswitchd's full receive sockets, our ports
    ring_direction: str | None = None
    job: dict[str, Any] | None = None  # Loom's view right before DELETE (bytes, paths)
    job_deleted: bool | None = None
    background: list[BackgroundFlow] = field(default_factory=list)
    classes: dict[str, dict[str, int]] = field(default_factory=dict)  # fabric-wide deltas
    shared: dict[str, dict[str, int]] = field(default_factory=dict)  # see shared_links
    started_at: str = ""
    run_dir: str = ""

    @property
    def busbw(self) -> float:
        """Median busbw over the timed iterations, Mbit/s."""
        return statistics.median(self.busbw_mbps)

    @property
    def algbw(self) -> float:
        return statistics.median(self.algbw_mbps)

    @property
    def busbw_over_link(self) -> float:
        return self.busbw / self.link_mbps

    def as_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["busbw_median_mbps"] = self.busbw
        doc["algbw_median_mbps"] = self.algbw
        doc["busbw_over_link"] = self.busbw_over_link
        return doc

    def summary(self) -> str:
        return (
            f"{self.op} x{self.world} {self.bytes / 2**20:g} MiB: busbw {self.busbw:.2f} Mbit/s"
            f" = {self.busbw_over_link:.3f} of {self.link_mbps:g} Mbit/s"
            f" (iterations {', '.join(f'{s:.1f}' for s in self.seconds)} s)"
        )


# --------------------------------------------------------------------------- Loom jobs


def job_request(name: str, tenant: str, ips: Sequence[str], op: str) -> dict[str, Any]:
    """The ``POST /loom/v1/jobs`` body for ``op`` on ``ips`` in rank order."""
    pattern, direction = LOOM_PATTERN[op]
    body: dict[str, Any] = {
        "name": name,
        "tenant": tenant,
        "hosts": list(ips),
        "pattern": pattern,
        "traffic_class": "collective",
    }
    if direction is not None:
        body["ring_direction"] = direction
    return body


def _prime(fnet: FabricNet, hosts: Sequence[str]) -> None:
    """One ping from each host to the next, so Loom has learned every host."""
    ips = host_ips(fnet, hosts)
    for i, h in enumerate(hosts):
        fnet.host(h).cmd(f"ping -n -q -c1 -W1 {ips[(i + 1) % len(ips)]} >/dev/null 2>&1")


def register_job(
    api: LabClient,
    fnet: FabricNet,
    hosts: Sequence[str],
    op: str,
    name: str,
    tenant: str,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """POST the job and wait until Loom reports it ``active`` (every host learned, placed)."""
    body = job_request(name, tenant, host_ips(fnet, hosts), op)
    with contextlib.suppress(LoomApiError):
        api.request("DELETE", f"/loom/v1/jobs/{name}")  # a leftover of an aborted run
    job = api.request("POST", "/loom/v1/jobs", body)
    deadline = time.monotonic() + timeout
    while job.get("status") != "active":
        if time.monotonic() > deadline:
            raise CollectiveError(f"job {name} not active after {timeout:.0f} s: {job}")
        _prime(fnet, hosts)
        time.sleep(0.5)
        job = api.request("GET", f"/loom/v1/jobs/{name}")
    log.info(
        "collective: job %s active (%d paths, max link utilization %s)",
        name,
        len(job.get("paths", [])),
        job.get("max_link_utilization"),
    )
    return dict(job)


# --------------------------------------------------------------------------- the runner


def run_collective(
    target: LoomStack | FabricNet,
    hosts: Sequence[str],
    op: str,
    mib: float,
    iters: int,
    *,
    warmup: int = 1,
    register: LabClient | None = None,
    job_name: str = "collective",
    tenant: str = "bench",
    background: Sequence[tuple[str, str]] | None = None,
    bulk_mss: int | None = None,
    timeout: float = 900.0,
    port: int = 29500,
    out_dir: Path | None = None,
    poll_interval: float = 0.5,
    progress_every: float = 15.0,
) -> CollectiveResult:
    """Run ``op`` (all_reduce | all_gather | reduce_scatter | all_to_all) on ``hosts`` in
    rank order.

    ``mib``: per-rank buffer (nccl-tests' size); ``iters`` timed iterations after ``warmup``.
    ``register``: Loom's client, to register the job before the first byte (pattern and
    ring direction from :data:`LOOM_PATTERN`) and delete it afterwards; its final view
    (bytes counted, paths) is in ``result.job``. ``background``: ``(src, dst)`` bulk
    iperf3 flows started before the ranks and stopped after them, with TCP segments of
    ``bulk_mss`` bytes (None: as the MTU allows). ``timeout``: seconds for
    the whole run; then everything started here is killed (by PID) and
    :class:`CollectiveError` raised. ``poll_interval``: Loom's counter poll interval, so
    the job's byte count is read after Loom has seen the last bytes.
    """
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; expected one of {', '.join(OPS)}")
    if len(hosts) < 2 or len(set(hosts)) != len(hosts):
        raise ValueError(f"need at least 2 distinct hosts, got {list(hosts)}")
    fnet = fabric_of(target)
    ips = host_ips(fnet, hosts)
    link = link_rate(fnet, hosts)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out_dir = out_dir or fnet.run_dir / f"collective-{op}-{stamp}"
    out_dir.mkdir(parents=True, exist_ok=True)
    n = len(hosts)
    log.info(
        "collective: %s of %g MiB on %d ranks (%d+%d iterations)%s%s",
        op,
        mib,
        n,
        warmup,
        iters,
        ", registered with Loom" if register else "",
        f", {len(background)} background flows" if background else "",
    )
    prepare_rank_hosts(fnet, hosts)
    job: dict[str, Any] | None = None
    if register is not None:
        job = register_job(register, fnet, hosts, op, job_name, tenant)
    bulk: list[Bulk] = []
    pids: list[int] = []
    outs = [out_dir / f"rank{r}.json" for r in range(n)]
    logs = [out_dir / f"rank{r}.txt" for r in range(n)]
    for stale in outs + logs:  # a rank is done when its output exists: never an old one's
        stale.unlink(missing_ok=True)
    bg_result: list[BackgroundFlow] = []
    classes_before = class_snapshot(fnet)
    drops_before = port_drops(fnet)
    sockets_before = socket_drops()
    t0 = time.monotonic()
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S")
    deleted: bool | None = None
    try:
        if background:
            bulk = start_background(fnet, background, timeout + 60, out_dir, bulk_mss)
        masters = rendezvous(fnet, hosts)
        with cpu_sampler() as cpu:
            for r, h in enumerate(hosts):
                cmd = (
                    f"env PYTHONPATH={REPO_ROOT} OMP_NUM_THREADS=1 MKL_NUM_THREADS=1"
                    f" {sys.executable} -m {WORKER}"
                    f" --rank {r} --world {n} --master {masters[r]} --port {port}"
                    f" --op {op} --mib {mib:g} --iters {iters} --warmup {warmup}"
                    f" --ifname {host_intf(fnet, h)} --out {outs[r]}"
                    f" --timeout {int(timeout)} > {logs[r]} 2>&1"
                )
                pids.append(start_in_host(fnet, h, cmd))
            _wait(pids, outs, logs, t0, timeout, progress_every)
        wall = time.monotonic() - t0
        classes_after = class_snapshot(fnet)
        drops_after = port_drops(fnet)
        sockets_after = socket_drops()
        if bulk:
            bg_result = stop_background(bulk)
            bulk = []
        if register is not None:
            time.sleep(3 * poll_interval)  # Loom's next counter poll sees the last bytes
            job = dict(register.request("GET", f"/loom/v1/jobs/{job_name}"))
    finally:
        kill_pids([p for p in pids if alive(p)], grace=1.0)
        if bulk:
            stop_background(bulk)
        if register is not None:
            try:
                register.request("DELETE", f"/loom/v1/jobs/{job_name}")
                try:
                    register.request("GET", f"/loom/v1/jobs/{job_name}")
                    deleted = False
                except LoomApiError as err:
                    deleted = err.status == 404
            except (LoomApiError, OSError) as err:
                log.warning("collective: could not delete job %s: %s", job_name, err)
    docs = [json.loads(p.read_text()) for p in outs]
    seconds, alg, bus = summarize(op, docs)
    idle, ovs, wait = _cpu_in_window(cpu, docs)
    servers = [fnet.nics[h].server if h in fnet.nics else None for h in hosts]
    sent, retrans = _tcp_sent(hosts, ips, docs, servers)
    result = CollectiveResult(
        op=op,
        hosts=list(hosts),
        ips=ips,
        world=n,
        bytes=int(docs[0]["bytes"]),
        seconds=seconds,
        rank_seconds=[list(d["seconds"]) for d in docs],
        algbw_mbps=alg,
        busbw_mbps=bus,
        link_mbps=link,
        wall_seconds=wall,
        startup_seconds=max(d["import_seconds"] + d["init_seconds"] for d in docs),
        check_ok=all(d.get("check_ok", False) for d in docs),
        cpu_idle_mean=statistics.fmean(idle) if idle else None,
        cpu_idle_min=min(idle) if idle else None,
        ovs_busy_mean=statistics.fmean(ovs) if ovs else None,
        ovs_wait_mean=statistics.fmean(wait) if wait else None,
        tcp_sent={f"{a}>{b}": v for (a, b), v in sent.items()},
        tcp_retrans_bytes=retrans,
        ovs_port_drops={k: drops_after[k] - drops_before.get(k, 0) for k in drops_after},
        ovs_socket_drops=sum(
            d - sockets_before.get(i, 0)
            for i, d in sockets_after.items()
            if i in set(fnet.intf_names.values())
        ),
        ring_direction=ring_direction_seen(hosts, sent) if op != "all_to_all" else None,
        job=job,
        job_deleted=deleted,
        background=bg_result,
        classes=class_delta(classes_before, classes_after),
        shared=shared_links(classes_before, classes_after),
        started_at=started_at,
        run_dir=str(out_dir),
    )
    (out_dir / "result.json").write_text(json.dumps(result.as_dict(), indent=1))
    log.info(
        "collective: %s; CPU idle %.0f %%, ovs-vswitchd forwarding thread ran %.0f %%,"
        " waited for a core %.0f %%; %d bytes retransmitted; port drops %s;"
        " ovs receive-socket drops %d",
        result.summary(),
        result.cpu_idle_mean or -1,
        result.ovs_busy_mean or -1,
        result.ovs_wait_mean or -1,
        retrans,
        result.ovs_port_drops,
        result.ovs_socket_drops,
    )
    return result


def _cpu_in_window(
    cpu: Sequence[CpuSample], docs: Sequence[dict[str, Any]]
) -> tuple[list[float], list[float], list[float]]:
    """Machine idle %, ovs-vswitchd busy % and wait % sampled during the timed iterations."""
    start, end = min(d["timed_start"] for d in docs), max(d["timed_end"] for d in docs)
    inside = [c for c in cpu if start <= c.at <= end] or list(cpu)
    return (
        [c.idle for c in inside],
        [c.ovs_busy for c in inside if c.ovs_busy is not None],
        [c.ovs_wait for c in inside if c.ovs_wait is not None],
    )


def _tcp_sent(
    hosts: Sequence[str],
    ips: Sequence[str],
    docs: Sequence[dict[str, Any]],
    servers: Sequence[str | None] | None = None,
) -> tuple[dict[tuple[str, str], int], int]:
    """Bytes each rank's connections delivered to each other rank ``(src, dst)``, and the
    bytes they retransmitted, from the workers' ``ss`` deltas.

    ``servers``: each rank's server (GPU servers), else None. Two ranks of one server
    share its namespace, and the connection between them has the destination's address
    at both ends (the kernel's source for a local address), so the rank that accepted it
    sees its own address as the peer: those bytes are the other rank's of its server when
    the job has exactly one, and are left out otherwise."""
    name_of = dict(zip(ips, hosts, strict=True))
    server_of = dict(zip(hosts, servers or [None] * len(hosts), strict=True))
    sent: dict[tuple[str, str], int] = {}
    retrans = 0
    for h, d in zip(hosts, docs, strict=True):
        mates = [o for o in hosts if o != h and server_of[h] and server_of[o] == server_of[h]]
        for peer_ip, c in d.get("tcp_by_peer", {}).items():
            peer = name_of.get(peer_ip)
            if peer == h:
                peer = mates[0] if len(mates) == 1 else None
            if peer is None:
                continue
            retrans += int(c.get("retrans", 0))
            if c.get("sent", 0) > 0:
                sent[(h, peer)] = sent.get((h, peer), 0) + int(c["sent"])
    return sent, retrans


def _wait(
    pids: Sequence[int],
    outs: Sequence[Path],
    logs: Sequence[Path],
    t0: float,
    timeout: float,
    progress_every: float,
) -> None:
    """Until every rank wrote its result; progress lines meanwhile; raise on death/timeout."""
    next_note = t0 + progress_every
    while True:
        done = [p.exists() for p in outs]
        if all(done):
            return
        now = time.monotonic()
        dead = [r for r, pid in enumerate(pids) if not done[r] and not alive(pid)]
        if dead:
            time.sleep(0.5)  # a rank may have written its file just before exiting
            dead = [r for r in dead if not outs[r].exists()]
        if dead:
            tails = "\n".join(f"rank {r}: {_tail(logs[r])}" for r in dead[:4])
            raise CollectiveError(f"ranks {dead} exited without a result:\n{tails}")
        if now - t0 > timeout:
            tails = "\n".join(f"rank {r}: {_tail(logs[r], 1)}" for r in range(min(3, len(logs))))
            raise CollectiveError(f"collective not done after {timeout:.0f} s:\n{tails}")
        if now >= next_note:
            last = _tail(logs[0], 1).strip() or "starting"
            log.info(
                "collective: %3.0f s, %d/%d ranks done; rank 0: %s",
                now - t0,
                sum(done),
                len(outs),
                last,
            )
            next_note = now + progress_every
        time.sleep(0.25)


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"
