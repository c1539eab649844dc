"""Collectives benchmark (``docs/benchmarks.md`` §2 Collectives): real gloo collectives on a
k=4 fat-tree.

    python -m mininet_scenarios.bench.collectives [--rate 10] [--mib 16] [--iters 3]
        [--warmup 1] [--seeds 1] [--out results/collectives] [--quick] [--mtu 9000]
        [--scenarios allreduce,protection,alltoall,allgather,reducescatter]
        [--modes one-switch,ecmp,no-qos,loom]
        [--bulk-share 0.05] [--queue-bytes 270420] [--bulk-frames standard,jumbo]

Every port (switch and host side) carries the DSCP queue classes of
:data:`~mininet_scenarios.harness.shaping.DEFAULT_CLASSES`. Three controller modes, each one
network started once and used for all of its runs:

* ``ecmp``: ``LOOM_TE=off``, the job is *not* registered: static hashed ECMP, the baseline.
* ``loom``: traffic engineering on, the job registered before the first byte (placed on
  paths, marked DSCP 26 at the ingress, counted per job).
* ``no-qos``: ``LOOM_QOS=off``, the job registered (placed) but not marked: isolates what the
  DSCP priority queues add under background load.
* ``one-switch``: the same 16 hosts (names, MACs, IPs, link rate, classes) on one switch,
  no fabric: the all-to-all's reference, what the hosts' TCP gets with nothing between
  them but one switch's ports (a fabric with deeper queues along the way can do a little
  better when the one switch's queues overflow and stall TCP).

Scenarios (each seed gives one random rank order, used by every mode):

* ``allreduce``: 16-rank ring all-reduce, random rank order, ``ecmp`` vs ``loom``
  (figure: busbw / link rate, target ``loom`` >= 0.90); topology-ordered in both for
  reference.
* ``protection``: the same all-reduce idle and while one bulk iperf3 TCP flow per host runs
  to the host at the same position in the next pod (every host uplink and downlink and the
  core carry bulk traffic), ``no-qos`` vs ``loom`` (figure: busbw with background / busbw
  idle in the same mode, target ``loom`` >= 0.90).
* ``alltoall``: 16-rank all-to-all, ``ecmp`` vs ``loom``, and ``one-switch`` (figures:
  busbw / link, and busbw / one switch's on the same rank order).
* ``allgather``: 16-rank ring all-gather, random order, ``ecmp`` vs ``loom`` (figure:
  busbw / link, busbw = algbw (n-1)/n); gloo's ring sends to rank+1, so Loom is told
  ``forward`` (:data:`~mininet_scenarios.workloads.collectives.runner.LOOM_PATTERN`; each
  run records the direction its bytes really took, ``ring_direction_seen``).
* ``reducescatter``: 16-rank reduce-scatter, the same way (busbw = algbw (n-1)/n). torch's
  gloo backend runs it (``dist.reduce_scatter_single``), but as an all-reduce that keeps
  one chunk: every rank sends 2(n-1)/n of the buffer on all-reduce's backward ring, twice
  the convention's bytes, so the figure is at most about half the link whatever the
  fabric does; ``wire_factor`` (bytes the busiest rank sent per iteration / buffer) shows
  it. Reported as measured, with no target.

Why it is built this way: the modes of a comparison run the same rank orders and background
pairs in one invocation (absolute Mbit/s drift on a 2-core machine where other emulations
may run at the same time; ratios do not);
``results.json`` is rewritten after every run, so an interrupted benchmark keeps what it
measured; CPU idle is recorded per run over the timed iterations (all switching runs in one
``ovs-vswitchd``; a machine under 35 % idle measures the CPU, not the fabric).

Jumbo frames (``--mtu 9000``, the default) on every link end, as AI fabrics use: the
userspace datapath's cost is per packet, and at MTU 1500 a 16-rank random-order ring keeps
ovs-vswitchd's one forwarding thread saturated, so the figure measures that thread, not
the placement (same network, same rank order: 0.60 of link at MTU 1500, 0.97 at 9000).
The HTB+TCP ceiling is :func:`~mininet_scenarios.workloads.collectives.model.tcp_ceiling` of the
MTU.

Protection is bounded by the queue shares: a saturating bulk class keeps its guaranteed
rate (``--bulk-share``, default 0.05 of every link), so the collective gets at most the
rest: busbw with background / idle <= about ``1 - bulk share``. Each class queues at most
``--queue-bytes`` (default 30 jumbo frames, 0.2 s at 10 Mbit/s), counted in bytes as a
switch's buffer is, whatever the frame size: the kernel's 1000-packet default holds seconds
of a saturating class at these rates.

The protection scenario runs twice per mode (``--bulk-frames``): bulk flows with standard
1500-byte frames (the figure ``protection``) and with jumbo frames (``protection-jumbo``).
A port cannot preempt a frame it has started, so a collective packet that arrives behind a
bulk frame waits for it: 7.2 ms for a jumbo frame at 10 Mbit/s, where a 100 Gbit/s port
takes 0.7 us. Scaling the link rate down 10^4 without scaling the frames makes that wait,
paid at every hop of every step of the lock-step ring, the largest cost of the emulation;
1500-byte frames still wait 1.2 ms, 1600 times longer than on a real port, so
``protection`` is the nearer figure and ``protection-jumbo`` the bound under a worse case.

Wrap the command in ``flock /tmp/loom-emulation.lock`` where other emulations may run at the
same time (``make bench-collectives`` does).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mininet_scenarios.bench.collectives_report import (
    MODE_ORDER,
    ONE_SWITCH,
    TARGETS,
    figures,
    plot,
    table,
)
from mininet_scenarios.bench.modes import begin, record_run, run_all, say
from mininet_scenarios.bench.patterns import nonblocking_graph
from mininet_scenarios.harness.processes import REPO_ROOT
from mininet_scenarios.harness.shaping import DEFAULT_CLASSES, QueueClass
from mininet_scenarios.workloads.collectives.background import cross_pod_background
from mininet_scenarios.workloads.collectives.hosts import CollectiveError, set_mtu
from mininet_scenarios.workloads.collectives.model import (
    bus_factor,
    random_order,
    ring_pairs,
    tcp_ceiling,
    topology_order,
    wire_factor,
)
from mininet_scenarios.workloads.collectives.runner import (
    LOOM_PATTERN,
    CollectiveResult,
    run_collective,
)
from topologies import fat_tree
from topologies.graph import host_list

CPU_IDLE_MIN = 35.0
# % of the time ovs-vswitchd's forwarding thread waited, runnable, for a core: the machine
# starving the switch. (Its on-CPU share is no such sign: 75-98 % in runs at full speed.)
OVS_WAIT_MAX = 10.0
QUEUE_BYTES = 30 * 9014  # per class and port: 30 jumbo frames on the wire
BULK_FRAMES = ("standard", "jumbo")  # background variants: MSS 1448, or as the MTU allows
STANDARD_MSS = 1448
SCENARIOS = ("allreduce", "protection", "alltoall", "allgather", "reducescatter")
RING_SCENARIOS = {"allgather": "all_gather", "reducescatter": "reduce_scatter"}
MODE_ENV = {
    "one-switch": {"LOOM_TE": "off"},  # the hosts on one switch: no fabric to engineer
    "ecmp": {"LOOM_TE": "off"},
    "unregistered": {},  # Loom as it is, the job never registered: traffic engineering alone
    "no-qos": {"LOOM_QOS": "off"},
    "loom": {},
}


@dataclass(frozen=True)
class Run:
    """One collective run of the plan: which mode, what, on which rank order."""

    mode: str
    scenario: str  # allreduce | protection | alltoall | allgather | reducescatter
    op: str
    order: str  # random | topology
    seed: int
    background: bool
    register: bool
    bulk_frames: str = "standard"  # of the background: standard (1500 bytes) | jumbo

    @property
    def key(self) -> str:
        bg = ""
        if self.background:
            bg = "+bulk-jumbo" if self.bulk_frames == "jumbo" else "+bulk"
        return (
            f"{self.mode}/{self.op}/{self.order}{self.seed if self.order == 'random' else ''}{bg}"
        )


def plan(
    scenarios: Sequence[str],
    seeds: int,
    topo_reference: bool = True,
    bulk_frames: Sequence[str] = BULK_FRAMES,
) -> list[Run]:
    """The runs of every mode, grouped by mode (one network per mode); the protection
    scenario once per size of the bulk flows' frames."""
    runs: list[Run] = []
    for mode in MODE_ORDER:
        reg = mode not in ("one-switch", "ecmp", "unregistered")
        for seed in range(1, seeds + 1):
            if mode in ("ecmp", "unregistered", "loom") and "allreduce" in scenarios:
                runs.append(Run(mode, "allreduce", "all_reduce", "random", seed, False, reg))
            if mode in ("no-qos", "loom") and "protection" in scenarios:
                if mode == "no-qos" or "allreduce" not in scenarios:  # loom's idle run exists
                    runs.append(Run(mode, "protection", "all_reduce", "random", seed, False, reg))
                for frames in bulk_frames:
                    runs.append(
                        Run(mode, "protection", "all_reduce", "random", seed, True, reg, frames)
                    )
            if mode in ("one-switch", "ecmp", "loom") and "alltoall" in scenarios:
                runs.append(Run(mode, "alltoall", "all_to_all", "random", seed, False, reg))
            for scen, op in RING_SCENARIOS.items():
                if mode in ("ecmp", "loom") and scen in scenarios:
                    runs.append(Run(mode, scen, op, "random", seed, False, reg))
        if topo_reference and mode in ("ecmp", "loom") and "allreduce" in scenarios:
            runs.append(Run(mode, "allreduce", "all_reduce", "topology", 0, False, reg))
    return runs


def expected_seconds(
    op: str, n: int, mib: float, rate: float, iters: int, warmup: int, mtu: int = 1500
) -> float:
    """Wall time of one run at the HTB+TCP ceiling (bytes on each rank's link / goodput)."""
    wire = mib * 2**20 * bus_factor(op, n) * 8 / (rate * 1e6 * tcp_ceiling(mtu))
    return wire * (iters + warmup)


def queue_classes(bulk_share: float | None) -> tuple[QueueClass, ...]:
    """:data:`DEFAULT_CLASSES`, or the same with bulk guaranteed ``bulk_share`` and the
    collective class the rest (control keeps its share): the knob that bounds how much a
    saturating bulk class can take from a collective."""
    if bulk_share is None:
        return DEFAULT_CLASSES
    control = next(qc for qc in DEFAULT_CLASSES if qc.name == "control").rate_share
    out = []
    for qc in DEFAULT_CLASSES:
        share = {"bulk": bulk_share, "collective": 1.0 - control - bulk_share}.get(
            qc.name, qc.rate_share
        )
        out.append(QueueClass(qc.name, qc.minor, qc.dscp_values, qc.prio, share, qc.ceil_share))
    return tuple(out)


# --------------------------------------------------------------------------- running


def _cmd(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def environment_facts() -> dict[str, Any]:
    torch_version = _cmd([sys.executable, "-c", "import torch; print(torch.__version__)"])
    return {
        "git_commit": _cmd(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"]),
        "controller_dirty": bool(
            _cmd(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--", "controller"])
        ),
        "torch": torch_version,
        "wmem_default": _cmd(["sysctl", "-n", "net.core.wmem_default"]),
        "tcp_congestion_control": _cmd(["sysctl", "-n", "net.ipv4.tcp_congestion_control"]),
        "cpus": os.cpu_count(),
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
    }


def _record(run: Run, res: CollectiveResult, warmup: int = 1) -> dict[str, Any]:
    """One run as saved: the plan's fields, the medians the figures use, and the details
    (iterations, CPU, class counters, background flows, Loom's view of the job)."""
    job = res.job or {}
    sent: dict[tuple[str, str], int] = {}
    for pair, nbytes in res.tcp_sent.items():
        src, dst = pair.split(">", 1)
        sent[(src, dst)] = nbytes
    return {
        "key": run.key,
        **run.__dict__,
        "busbw_mbps": res.busbw,
        "algbw_mbps": res.algbw,
        "busbw_over_link": res.busbw_over_link,
        "link_mbps": res.link_mbps,
        "world": res.world,
        "bytes": res.bytes,
        "hosts": res.hosts,
        "seconds": res.seconds,
        "busbw_iter_mbps": res.busbw_mbps,
        "rank_seconds": res.rank_seconds,
        "check_ok": res.check_ok,
        "ring_direction_seen": res.ring_direction,
        # the ranks' ss deltas count the warm-up's bytes too
        "wire_factor": wire_factor(sent, res.bytes, len(res.seconds) + warmup),
        "cpu_idle_mean": res.cpu_idle_mean,
        "cpu_idle_min": res.cpu_idle_min,
        "ovs_busy_mean": res.ovs_busy_mean,
        "ovs_wait_mean": res.ovs_wait_mean,
        "startup_s": res.startup_seconds,
        "collective_wall_s": res.wall_seconds,
        "classes": res.classes,
        "shared_links": res.shared,
        "tcp_retrans_bytes": res.tcp_retrans_bytes,
        "ovs_port_drops": res.ovs_port_drops,
        "ovs_socket_drops": res.ovs_socket_drops,
        "bulk_flows": [f.__dict__ for f in res.background],
        "bulk_mbps_total": sum(f.mbps or 0.0 for f in res.background) if res.background else None,
        "job": {
            k: job.get(k)
            for k in (
                "name",
                "status",
                "bytes",
                "pattern",
                "ring_direction",
                "max_link_utilization",
                "paths",
            )
        }
        if job
        else None,
        "job_deleted": res.job_deleted,
        "tcp_sent": res.tcp_sent,
        "started_at": res.started_at,
        "run_dir": res.run_dir,
    }


def run_mode(
    mode: str,
    runs: Sequence[Run],
    args: argparse.Namespace,
    doc: dict[str, Any],
    progress: dict[str, Any],
) -> None:
    """Start ``mode``'s network once and run its part of the plan."""
    from mininet_scenarios.harness.stack import LoomStack

    graph = fat_tree(4, rate_mbps=args.rate)
    hosts = host_list(graph)
    if mode == ONE_SWITCH:
        graph = nonblocking_graph(graph)
    told = {"LOOM_LINK_CAPACITY_MBPS": f"{args.rate:g}", "LOOM_POLL_INTERVAL": "0.5"}
    env = {**({} if args.plain else told), **MODE_ENV[mode]}
    run_dir = args.out / "runs" / mode
    say(f"{mode}: starting Loom ({' '.join(f'{k}={v}' for k, v in env.items())}) + fat-tree ...")
    t0 = time.monotonic()
    with LoomStack(
        graph,
        run_dir,
        env=env,
        queue_classes=None if args.plain else queue_classes(args.bulk_share),
        queue_bytes=args.queue_bytes or None,
        host_queues=args.host_queues,
    ) as st:
        if args.mtu != 1500:
            set_mtu(st.net, args.mtu)
        ping = st.net.pingall(timeout=2.0)
        doc["modes"][mode] = {
            "env": env,
            "startup_s": round(time.monotonic() - t0, 1),
            "discovery_s": round(st.discovery_seconds, 1),
            "pingall_loss_pct": ping.loss_pct,
        }
        say(f"{mode}: up in {time.monotonic() - t0:.0f} s, pingall loss {ping.loss_pct:.1f} %")
        for run in runs:
            order = (
                topology_order(graph) if run.order == "topology" else random_order(hosts, run.seed)
            )
            # the job's own pairs carry no bulk flow: Loom would mark it as the job's
            avoid = ring_pairs(order, -1) if run.op == "all_reduce" else []
            bg = (
                cross_pod_background(graph, hosts, avoid=avoid, seed=run.seed)
                if run.background
                else None
            )
            est = expected_seconds(
                run.op, len(order), args.mib, args.rate, args.iters, args.warmup, args.mtu
            )
            timeout = max(240.0, 4 * est + 120)
            say(
                f"{run.key}: {len(order)} ranks, order {' '.join(order)}"
                + (f", {len(bg)} bulk flows" if bg else "")
                + f" (>= {est:.0f} s at line rate; timeout {timeout:.0f} s)"
                f" [{progress['done'] + 1}/{progress['total']}]"
            )
            t1 = time.monotonic()
            record: dict[str, Any]
            try:
                res = run_collective(
                    st,
                    order,
                    run.op,
                    args.mib,
                    args.iters,
                    warmup=args.warmup,
                    register=st.api if run.register else None,
                    job_name=f"bench-{run.op.replace('_', '-')}",
                    tenant="bench",
                    background=bg,
                    bulk_mss=STANDARD_MSS if run.bulk_frames == "standard" else None,
                    timeout=timeout,
                    out_dir=run_dir / run.key.replace("/", "_").replace("+", "_"),
                )
            except (CollectiveError, OSError, ValueError) as exc:
                record = {"key": run.key, **run.__dict__, "error": f"{type(exc).__name__}: {exc}"}
                say(f"{run.key}: FAILED {record['error']}")
            else:
                record = _record(run, res, args.warmup)
                notes = []
                if not res.check_ok:
                    notes.append("WRONG RESULT")
                if res.cpu_idle_mean is not None and res.cpu_idle_mean < CPU_IDLE_MIN:
                    notes.append(f"CPU idle < {CPU_IDLE_MIN:g} %")
                if res.ovs_socket_drops:
                    notes.append(f"{res.ovs_socket_drops} packets lost in ovs receive sockets")
                if res.ovs_wait_mean is not None and res.ovs_wait_mean > OVS_WAIT_MAX:
                    notes.append(f"ovs-vswitchd waited for a core > {OVS_WAIT_MAX:g} %")
                way = LOOM_PATTERN[run.op][1]
                if way is not None and res.ring_direction not in (None, way):
                    notes.append(f"ring ran {res.ring_direction}, Loom is told {way}")
                bgm = [f.mbps for f in res.background if f.mbps is not None]
                coll = res.classes.get("collective", {})
                say(
                    f"{run.key}: busbw {res.busbw:.2f} Mbit/s = {res.busbw_over_link:.3f} of link;"
                    f" iterations {', '.join(f'{s:.1f}' for s in res.seconds)} s;"
                    f" cpu idle {res.cpu_idle_mean or 0:.0f} % (min {res.cpu_idle_min or 0:.0f}),"
                    f" ovs-vswitchd ran {res.ovs_busy_mean or 0:.0f} %,"
                    f" waited {res.ovs_wait_mean or 0:.0f} %"
                    + (f"; bulk {sum(bgm):.1f} Mbit/s in all" if bgm else "")
                    + (f"; collective-class drops {coll.get('dropped')}" if coll else "")
                    + f"; gloo retransmitted {res.tcp_retrans_bytes / 1e6:.2f} MB"
                    + f"; port drops {sum(res.ovs_port_drops.values())}"
                    + f"; ovs socket drops {res.ovs_socket_drops}"
                    + (f"; job bytes {res.job.get('bytes')}" if res.job else "")
                    + (f"  WARNING {'; '.join(notes)}" if notes else "")
                )
            record_run(doc, record, figures, args, progress, st, t1)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m mininet_scenarios.bench.collectives",
        description="gloo collectives on a k=4 fat-tree: ecmp vs loom, no-qos vs loom.",
    )
    ap.add_argument("--rate", type=float, default=10.0, help="link rate, Mbit/s (default 10)")
    ap.add_argument("--mib", type=float, help="per-rank buffer, MiB (default 16; quick 4)")
    ap.add_argument("--iters", type=int, help="timed iterations (default 3; quick 2)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed iterations first")
    ap.add_argument("--seeds", type=int, default=1, help="random rank orders 1..N (default 1)")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "results" / "collectives")
    ap.add_argument("--quick", action="store_true", help="4 MiB, 2 iterations, no topo order")
    ap.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated subset of {','.join(SCENARIOS)}",
    )
    ap.add_argument("--modes", default=",".join(MODE_ORDER), help="comma-separated subset")
    ap.add_argument(
        "--bulk-share",
        type=float,
        help="guaranteed share of the bulk class (default: DEFAULT_CLASSES, 0.05); the"
        " collective class gets the rest after control",
    )
    ap.add_argument(
        "--queue-bytes",
        type=int,
        default=QUEUE_BYTES,
        help=f"queue limit of each class on every port, bytes (default {QUEUE_BYTES}: 30 jumbo"
        " frames; 0: the kernel's 1000 packets)",
    )
    ap.add_argument(
        "--mtu",
        type=int,
        default=9000,
        help="MTU of every link end (default 9000: ovs-vswitchd's load is per packet)",
    )
    ap.add_argument(
        "--bulk-frames",
        default=",".join(BULK_FRAMES),
        help="frame sizes of the protection scenario's bulk flows, each its own run:"
        " standard (1500 bytes), jumbo (the MTU) (default: both)",
    )
    ap.add_argument(
        "--host-queues",
        choices=("bounded", "kernel"),
        default="bounded",
        help="a host's own interface: bounded like a switch port (--queue-bytes; default)"
        " or the kernel's 1000 packets, as a server's NIC queue is",
    )
    ap.add_argument("--drain", type=float, default=2.0, help="quiet seconds between runs")
    ap.add_argument(
        "--plain",
        action="store_true",
        help="a user's fabric: no class tree on any port, the kernel's queues, Loom told"
        " nothing (no LOOM_* variable); the protection scenario needs the classes: skipped",
    )
    args = ap.parse_args(argv)
    if args.plain:
        args.queue_bytes = 0
        if args.out == REPO_ROOT / "results" / "collectives":
            args.out = REPO_ROOT / "results" / "collectives-plain"
    args.mib = args.mib if args.mib is not None else (4.0 if args.quick else 16.0)
    args.iters = args.iters if args.iters is not None else (2 if args.quick else 3)
    scen = [s for s in args.scenarios.split(",") if s and not (args.plain and s == "protection")]
    modes = [m for m in args.modes.split(",") if m]
    bad = [s for s in scen if s not in SCENARIOS] + [m for m in modes if m not in MODE_ORDER]
    if bad:
        ap.error(f"unknown scenario or mode: {', '.join(bad)}")
    if args.queue_bytes and args.queue_bytes < args.mtu + 14:
        ap.error(f"--queue-bytes must hold one frame ({args.mtu + 14} bytes) or be 0")
    args.bulk_frame_list = [f for f in args.bulk_frames.split(",") if f]
    if not args.bulk_frame_list or set(args.bulk_frame_list) - set(BULK_FRAMES):
        ap.error(f"--bulk-frames: expected a comma-separated subset of {','.join(BULK_FRAMES)}")
    if args.bulk_share is not None and not 0 < args.bulk_share < 0.95:
        ap.error("--bulk-share must be in (0, 0.95)")
    args.scenario_list, args.mode_list = scen, modes
    return args


def main(argv: Sequence[str] | None = None) -> int:
    started = begin("collectives", argv, parse_args)
    if started is None:
        return 2
    argv_used, args = started
    runs = [
        r
        for r in plan(args.scenario_list, args.seeds, not args.quick, args.bulk_frame_list)
        if r.mode in args.mode_list
    ]
    doc: dict[str, Any] = {
        "benchmark": "collectives (docs/benchmarks.md §2)",
        "command": shlex.join(
            [sys.executable, "-m", "mininet_scenarios.bench.collectives", *argv_used]
        ),
        "args": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k not in ("scenario_list", "mode_list")
        },
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "environment": environment_facts(),
        "conventions": {
            "busbw": "nccl-tests: algbw = per-rank buffer bytes / slowest rank's iteration"
            " time; busbw = algbw*2(n-1)/n (all-reduce), algbw*(n-1)/n (all-gather,"
            " reduce-scatter, all-to-all); median over timed iterations; Mbit/s = 1e6 bit/s",
            "wire_factor": "bytes the busiest rank sent per iteration (warm-up included) /"
            " per-rank buffer: 2(n-1)/n for a ring all-reduce, (n-1)/n for all-gather;"
            " gloo's reduce-scatter sends all-reduce's bytes",
            "protection": "busbw with bulk background / busbw idle, same mode and rank order",
            "bulk_frames": f"standard: bulk iperf3 flows send TCP segments of {STANDARD_MSS}"
            " bytes (1500-byte frames); jumbo: as the MTU allows",
            "host_egress": "gloo's ports pinned to 40960-49151 and classified into the"
            " collective class at each host's own egress HTB in every mode (emulated NIC"
            " priority); background iperf3 clients use ports from 30000",
        },
        "plain": args.plain,
        "queue_classes": [
            qc.__dict__ for qc in (() if args.plain else queue_classes(args.bulk_share))
        ],
        "queue_bytes": args.queue_bytes or None,
        "targets": TARGETS,
        "modes": {},
        "runs": [],
    }
    say(
        f"{len(runs)} runs: {args.mib:g} MiB, {args.warmup}+{args.iters} iterations,"
        f" {args.rate:g} Mbit/s, seeds {args.seeds}; results in {args.out}"
    )
    run_all(MODE_ORDER, runs, run_mode, args, doc, (figures, table, plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
