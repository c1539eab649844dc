"""Collectives at cluster scale (``docs/benchmarks.md`` §2, "Many jobs"): several gloo jobs
at once on the k=4 fat-tree of :mod:`.collectives`.

    python -m mininet_scenarios.bench.collectives_jobs [--rate 10] [--mib 16] [--iters 3]
        [--warmup 1] [--seeds 1] [--mixes 4x4,2x8] [--modes ecmp,loom] [--churn 3,2,3]
        [--no-churn] [--out results/collectives-jobs] [--quick] [--mtu 9000]
        [--queue-bytes 270420] [--plain]

The fabric is the collectives benchmark's: every link 10 Mbit/s, MTU 9000, the DSCP
queue classes on every port with 30-jumbo-frame class queues, Loom told the link rate
(``--plain``: no class tree, the kernel's queues, no ``LOOM_*`` hint). Two modes, each one
network started once for all of its runs: ``ecmp`` (``LOOM_TE=off``, the jobs not
registered) and ``loom`` (every job registered with its own name and tenant before its
first byte, deleted when it is done).

* **Mixes** ``4x4`` (4 all-reduce jobs of 4 ranks) and ``2x8`` (2 of 8): the 16 hosts
  shuffled by the seed and dealt out like cards
  (:func:`~mininet_scenarios.workloads.collectives.multijob.deal`), so a job's ranks land
  across pods as a scheduler leaves them; job ``j`` in tenant ``tj``. Every job runs alone
  (the others' ranks up and idle), then all together
  (:func:`~mininet_scenarios.workloads.collectives.multijob.run_mix`): the figure is each
  job's busbw in the mix / alone, on the same hosts, order and TCP connections. Target:
  every job >= 0.90 in ``loom``.
* **Churn**: the ``4x4`` deal of the first seed; jobs 1 and 2 run until told to stop; after
  ``before`` of their iterations job 3 arrives (registered, runs its iterations) and
  leaves (deleted), ``between`` iterations later job 4 does, then ``after`` more
  (:func:`~mininet_scenarios.workloads.collectives.multijob.run_churn`). Figures: the long
  jobs' worst iteration from the first arrival on / their median before it; their
  retransmitted bytes per iteration before and during the arrivals; collective-class
  drops over the same spans.

Tenants: every run writes a policy file (``LOOM_POLICY``, reloaded through
``POST /loom/v1/policy/reload`` when the deal changes) with tenant ``tj`` holding job
``j``'s hosts: the jobs are isolated from each other in both modes, and Loom accepts a
job only from the tenant that holds its hosts. The same policy is in force on the plain
fabric (tenants are the user's own setup, not a hint about the links). After a reload
every host's ARP cache is flushed, as a host handed to another tenant starts afresh: a
peer's MAC is a Loom address carrying its tenant, and a cache still holding the old one
sends into the new tenant's isolation check (the first quick run, without the flush: gloo
ranks on hosts that had moved tenants together took 15-95 s to connect, in steps of TCP's
SYN back-off, where 6 s is usual).

Like :mod:`.collectives`: progress lines while running, ``results.json`` rewritten after
every run, a table and a PNG at the end (:mod:`.collectives_jobs_report`). Wrap it in
``flock /tmp/loom-emulation.lock`` (``make bench-collectives-jobs`` does).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mininet_scenarios.bench.collectives import (
    CPU_IDLE_MIN,
    QUEUE_BYTES,
    environment_facts,
    expected_seconds,
    queue_classes,
)
from mininet_scenarios.bench.collectives_jobs_report import (
    TARGET,
    figures,
    job_rows,
    plot,
    table,
)
from mininet_scenarios.bench.modes import begin, record_run, run_all, say
from mininet_scenarios.harness.client import LoomApiError
from mininet_scenarios.harness.processes import REPO_ROOT
from mininet_scenarios.workloads.collectives.hosts import CollectiveError, set_mtu
from mininet_scenarios.workloads.collectives.model import JobPlan, deal
from mininet_scenarios.workloads.collectives.multijob import (
    ChurnResult,
    MixResult,
    run_churn,
    run_mix,
)
from topologies import fat_tree
from topologies.graph import host_list

MIXES = {"4x4": (4, 4), "2x8": (2, 8)}  # jobs x ranks
MODES = ("ecmp", "loom")
MODE_ENV = {"ecmp": {"LOOM_TE": "off"}, "loom": {}}
BASE_PORT = 29500  # job j's rendezvous port: BASE_PORT + j (churn: + 10 + j)


@dataclass(frozen=True)
class Run:
    """One run of the plan: a mix on one seed's deal, or the churn."""

    mode: str
    kind: str  # mix | churn
    mix: str  # 4x4 | 2x8 (churn: the deal it uses)
    seed: int

    @property
    def key(self) -> str:
        return (
            f"{self.mode}/churn"
            if self.kind == "churn"
            else f"{self.mode}/{self.mix}/seed{self.seed}"
        )


def plan(mixes: Sequence[str], seeds: int, modes: Sequence[str], churn: bool) -> list[Run]:
    """Every mode's runs, grouped by mode (one network per mode): each mix on each seed,
    and the churn once, on the first seed's 4x4 deal and right after its mix (the same
    tenants: no policy change in between)."""
    runs: list[Run] = []
    for mode in (m for m in MODES if m in modes):
        for seed in range(1, seeds + 1):
            for mix in mixes:
                runs.append(Run(mode, "mix", mix, seed))
                if churn and seed == 1 and mix == "4x4":
                    runs.append(Run(mode, "churn", "4x4", 1))
        if churn and "4x4" not in mixes:
            runs.append(Run(mode, "churn", "4x4", 1))
    return runs


def job_plans(run: Run, hosts: Sequence[str]) -> list[JobPlan]:
    """The jobs of ``run``: job j (from 1) named after the run, in tenant ``tj``, on the
    j-th hand of the seed's deal, with its own rendezvous port."""
    jobs, ranks = MIXES[run.mix]
    orders = deal(hosts, jobs, ranks, run.seed)
    prefix = "churn" if run.kind == "churn" else f"mix{run.mix}-s{run.seed}"
    port = BASE_PORT + (10 if run.kind == "churn" else 0)
    return [
        JobPlan(f"{prefix}-j{j + 1}", f"t{j + 1}", tuple(order), "all_reduce", port + j)
        for j, order in enumerate(orders)
    ]


def tenant_policy(graph: Any, tenants: Mapping[str, Sequence[str]]) -> str:
    """A Loom policy file (``LOOM_POLICY``) with each tenant's hosts by MAC and IP and
    nothing else: every traffic class allowed, hosts in no tenant denied, the fabric
    settings left to the controller's environment."""
    lines = ["version: 1", "tenants:"]
    for name, hosts in tenants.items():
        lines += [f"  - name: {name}", "    hosts:"]
        for h in hosts:
            node = graph.nodes[h]
            lines.append(f'      - {{mac: "{node["mac"]}", ip: {node["ip"]}}}')
    return "\n".join(lines) + "\n"


def tenants_of(plans: Sequence[JobPlan]) -> dict[str, list[str]]:
    return {p.tenant: list(p.hosts) for p in plans}


# --------------------------------------------------------------------------- records


def mix_record(run: Run, res: MixResult) -> dict[str, Any]:
    """A mix as saved: per job the figures' inputs (alone and mix busbw, ratio) and the
    details (iterations, retransmits, Loom's view), the classes and CPU of every phase."""
    jobs = []
    for p in res.plans:
        alone, mixed = res.alone[p.name], res.mix[p.name]
        view = res.jobs.get(p.name) or {}
        jobs.append(
            {
                "name": p.name,
                "tenant": p.tenant,
                "hosts": list(p.hosts),
                "ranks": len(p.hosts),
                "port": p.port,
                "alone_busbw_mbps": alone.busbw,
                "alone_over_link": alone.busbw / alone.link_mbps,
                "mix_busbw_mbps": res.mix_busbw_mbps[p.name],
                "ratio": res.ratio(p.name),
                "mix_iterations_in_window": len(mixed.busbw_within(*res.window)),
                "alone": alone.as_dict(),
                "mix": mixed.as_dict(),
                "loom": {
                    k: view.get(k)
                    for k in (
                        "status",
                        "pattern",
                        "ring_direction",
                        "bytes",
                        "max_link_utilization",
                        "paths",
                    )
                }
                if view
                else None,
                "deleted": res.deleted.get(p.name),
            }
        )
    return {
        "key": run.key,
        **asdict(run),
        "jobs": jobs,
        "window": res.window,
        "classes": res.classes,
        "cpu": res.cpu,
        "primed_lost": res.primed_lost,
        "startup_s": res.startup_s,
        "run_wall_s": res.wall_s,
    }


def churn_record(run: Run, res: ChurnResult) -> dict[str, Any]:
    return {"key": run.key, **asdict(run), **res.as_dict()}


# --------------------------------------------------------------------------- running


def _write_policy(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _notes(rec: dict[str, Any]) -> str:
    notes = []
    jobs = rec.get("jobs") or []
    if any(not (j["alone"]["check_ok"] and j["mix"]["check_ok"]) for j in jobs):
        notes.append("WRONG RESULT")
    idle = [c.get("idle_mean") for c in rec.get("cpu", {}).values()]
    if any(i is not None and i < CPU_IDLE_MIN for i in idle):
        notes.append(f"CPU idle < {CPU_IDLE_MIN:g} % in a phase")
    if any(j["mix_iterations_in_window"] == 0 for j in jobs):
        notes.append("a job had no mix iteration while every job ran")
    return f"  WARNING {'; '.join(notes)}" if notes else ""


def run_mode(
    mode: str,
    runs: Sequence[Run],
    args: argparse.Namespace,
    doc: dict[str, Any],
    progress: dict[str, Any],
) -> None:
    """Start ``mode``'s network once (with the first run's tenants) and run its part."""
    from mininet_scenarios.harness.stack import LoomStack

    graph = fat_tree(4, rate_mbps=args.rate)
    hosts = host_list(graph)
    run_dir = args.out / "runs" / mode
    run_dir.mkdir(parents=True, exist_ok=True)
    policy = run_dir / "policy.yaml"
    text = tenant_policy(graph, tenants_of(job_plans(runs[0], hosts)))
    _write_policy(policy, text)
    told = {"LOOM_LINK_CAPACITY_MBPS": f"{args.rate:g}", "LOOM_POLL_INTERVAL": "0.5"}
    env = {**({} if args.plain else told), **MODE_ENV[mode], "LOOM_POLICY": str(policy)}
    say(f"{mode}: starting Loom ({' '.join(f'{k}={v}' for k, v in env.items())}) + fat-tree ...")
    t0 = time.monotonic()
    with LoomStack(
        graph,
        run_dir,
        env=env,
        queue_classes=None if args.plain else queue_classes(None),
        queue_bytes=args.queue_bytes or None,
    ) as st:
        if args.mtu != 1500:
            set_mtu(st.net, args.mtu)
        doc["modes"][mode] = {
            "env": env,
            "startup_s": round(time.monotonic() - t0, 1),
            "discovery_s": round(st.discovery_seconds, 1),
        }
        say(f"{mode}: up in {time.monotonic() - t0:.0f} s")
        for run in runs:
            plans = job_plans(run, hosts)
            record: dict[str, Any]
            t1 = time.monotonic()
            try:
                new = tenant_policy(graph, tenants_of(plans))
                if new != text:
                    _write_policy(policy, new)
                    status = st.api.request("POST", "/loom/v1/policy/reload")
                    text = new
                    for h in hosts:  # as a host handed to another tenant starts afresh
                        st.net.host(h).cmd("ip neigh flush all")
                    say(
                        f"{run.key}: policy reloaded, tenants"
                        f" {', '.join(t['name'] for t in status.get('tenants', []))};"
                        " the hosts' ARP caches flushed"
                    )
                record = run_one(st, run, plans, args, run_dir)
            except (CollectiveError, LoomApiError, OSError, ValueError) as exc:
                record = {"key": run.key, **asdict(run), "error": f"{type(exc).__name__}: {exc}"}
                say(f"{run.key}: FAILED {record['error']}")
            record_run(doc, record, figures, args, progress, st, t1)


def run_one(
    st: Any, run: Run, plans: Sequence[JobPlan], args: argparse.Namespace, run_dir: Path
) -> dict[str, Any]:
    ranks = len(plans[0].hosts)
    est = expected_seconds(
        "all_reduce", ranks, args.mib, args.rate, args.iters, args.warmup, args.mtu
    )
    timeout = max(240.0, 6 * est + 120)
    register = st.api if run.mode == "loom" else None
    out = run_dir / run.key.replace("/", "_")
    for p in plans:
        say(f"{run.key}: {p.name} ({p.tenant}) on {' '.join(p.hosts)}")
    if run.kind == "churn":
        before, between, after = args.churn_iters
        say(
            f"{run.key}: {plans[0].name} and {plans[1].name} run long; {plans[2].name}, then"
            f" {plans[3].name} arrive and leave ({before}/{between}/{after} long iterations"
            f" before/between/after; >= {est:.0f} s per arrival at line rate)"
        )
        churned = run_churn(
            st,
            plans[:2],
            plans[2:],
            mib=args.mib,
            iters=args.iters,
            warmup=args.warmup,
            register=register,
            out_dir=out,
            before=before,
            between=between,
            after=after,
            phase_timeout=timeout,
            say=say,
        )
        rec = churn_record(run, churned)
        fig = figures([rec])["churn"].get(run.mode, {})
        say(
            f"{run.key}: worst long-job iteration / median before"
            f" {fig.get('worst_over_before', float('nan')):.3f}; retransmitted per iteration"
            f" {fig.get('retrans_before_per_iter', 0) / 1e3:.0f} kB before,"
            f" {fig.get('retrans_during_per_iter', 0) / 1e3:.0f} kB during arrivals;"
            f" collective-class drops {fig.get('drops_before')} before,"
            f" {fig.get('drops_during')} during"
        )
        return rec
    say(
        f"{run.key}: {len(plans)} jobs of {ranks} ranks, each alone then all together"
        f" (>= {est:.0f} s per phase at line rate; timeout {timeout:.0f} s)"
    )
    res = run_mix(
        st,
        plans,
        mib=args.mib,
        iters=args.iters,
        warmup=args.warmup,
        register=register,
        out_dir=out,
        phase_timeout=timeout,
        say=say,
    )
    rec = mix_record(run, res)
    for row in job_rows([rec]):
        say(
            f"{run.key}: {row['name']}: alone {row['alone_busbw_mbps']:.2f} Mbit/s"
            f" ({row['alone_over_link']:.3f} of link), in the mix"
            f" {row['mix_busbw_mbps'] or float('nan'):.2f} -> {row['ratio'] or float('nan'):.3f}"
        )
    say(f"{run.key}: done in {res.wall_s:.0f} s{_notes(rec)}")
    return rec


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m mininet_scenarios.bench.collectives_jobs",
        description="several gloo jobs at once on a k=4 fat-tree: each job's busbw in a mix"
        " / alone, and long jobs while others arrive and leave; ecmp vs loom.",
    )
    ap.add_argument("--rate", type=float, default=10.0, help="link rate, Mbit/s (default 10)")
    ap.add_argument("--mib", type=float, help="per-rank buffer, MiB (default 16; quick 4)")
    ap.add_argument("--iters", type=int, help="timed iterations per phase (default 3; quick 2)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed iterations first")
    ap.add_argument("--seeds", type=int, default=1, help="deals 1..N (default 1)")
    ap.add_argument("--mixes", default=",".join(MIXES), help=f"subset of {','.join(MIXES)}")
    ap.add_argument("--modes", default=",".join(MODES), help=f"subset of {','.join(MODES)}")
    ap.add_argument(
        "--churn",
        default=None,
        help="long-job iterations before the first arrival, between arrivals and after the"
        " last (default 3,2,3; quick 2,1,2)",
    )
    ap.add_argument("--no-churn", action="store_true", help="the mixes only")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "results" / "collectives-jobs")
    ap.add_argument("--quick", action="store_true", help="4 MiB, 2 iterations, churn 2,1,2")
    ap.add_argument("--mtu", type=int, default=9000, help="MTU of every link end (default 9000)")
    ap.add_argument(
        "--queue-bytes",
        type=int,
        default=QUEUE_BYTES,
        help=f"queue limit of each class on every port, bytes (default {QUEUE_BYTES}; 0: the"
        " kernel's 1000 packets)",
    )
    ap.add_argument("--drain", type=float, default=2.0, help="quiet seconds between runs")
    ap.add_argument(
        "--plain",
        action="store_true",
        help="a user's fabric: no class tree, the kernel's queues, Loom told nothing about"
        " the links (the tenant policy stays)",
    )
    args = ap.parse_args(argv)
    if args.plain:
        args.queue_bytes = 0
        if args.out == REPO_ROOT / "results" / "collectives-jobs":
            args.out = REPO_ROOT / "results" / "collectives-jobs-plain"
    args.mib = args.mib if args.mib is not None else (4.0 if args.quick else 16.0)
    args.iters = args.iters if args.iters is not None else (2 if args.quick else 3)
    if args.quick:
        args.seeds = 1
    churn = args.churn or ("2,1,2" if args.quick else "3,2,3")
    try:
        args.churn_iters = tuple(int(x) for x in churn.split(","))
    except ValueError:
        args.churn_iters = ()
    if len(args.churn_iters) != 3 or min(args.churn_iters) < 1:
        ap.error("--churn: expected BEFORE,BETWEEN,AFTER, three positive integers")
    args.mix_list = [m for m in args.mixes.split(",") if m]
    args.mode_list = [m for m in args.modes.split(",") if m]
    bad = [m for m in args.mix_list if m not in MIXES] + [
        m for m in args.mode_list if m not in MODES
    ]
    if bad or not args.mode_list or not (args.mix_list or not args.no_churn):
        ap.error(f"unknown or no mix or mode: {', '.join(bad) or '(none)'}")
    if args.iters < 1 or args.warmup < 0 or args.mib <= 0 or args.seeds < 1:
        ap.error("need --iters >= 1, --warmup >= 0, --mib > 0 and --seeds >= 1")
    if args.queue_bytes and args.queue_bytes < args.mtu + 14:
        ap.error(f"--queue-bytes must hold one frame ({args.mtu + 14} bytes) or be 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    started = begin("collectives_jobs", argv, parse_args)
    if started is None:
        return 2
    argv_used, args = started
    runs = plan(args.mix_list, args.seeds, args.mode_list, not args.no_churn)
    doc: dict[str, Any] = {
        "benchmark": "collectives at cluster scale (docs/benchmarks.md §2, many jobs)",
        "command": shlex.join(
            [sys.executable, "-m", "mininet_scenarios.bench.collectives_jobs", *argv_used]
        ),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "environment": environment_facts(),
        "conventions": {
            "busbw": "nccl-tests: algbw = per-rank buffer bytes / slowest rank's iteration"
            " time; busbw = algbw*2(n-1)/n (all-reduce); Mbit/s = 1e6 bit/s",
            "ratio": "a job's median busbw over its mix iterations that lie wholly inside the"
            " window where every job was in its mix phase / its median busbw alone (the"
            " other jobs' ranks up and idle); same hosts, rank order and TCP connections",
            "churn": "worst long-job iteration from the first arrival on / that job's median"
            " before it; 'during' = iterations overlapping an arriving job's span"
            " (registered .. deleted); retransmits: the long jobs' own connections",
            "tenants": "policy file with tenant tj = job j's hosts, in both modes",
        },
        "plain": args.plain,
        "queue_classes": [asdict(qc) for qc in (() if args.plain else queue_classes(None))],
        "queue_bytes": args.queue_bytes or None,
        "targets": {"mix_over_alone": TARGET},
        "modes": {},
        "runs": [],
    }
    say(
        f"{len(runs)} runs: mixes {','.join(args.mix_list) or '-'}"
        f"{'' if args.no_churn else ' + churn'}, modes {','.join(args.mode_list)},"
        f" {args.mib:g} MiB, {args.warmup}+{args.iters} iterations, {args.rate:g} Mbit/s,"
        f" seeds {args.seeds}; results in {args.out}"
    )
    run_all(MODES, runs, run_mode, args, doc, (figures, table, plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
