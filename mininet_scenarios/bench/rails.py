"""Rails benchmark (``docs/benchmarks.md`` §15 Rails): gloo collectives of NIC-bound
workers on a rail-optimized fabric, with the launcher's rank order and with Loom's.

    python -m mininet_scenarios.bench.rails [--servers 4] [--nics 4] [--spines 2]
        [--servers-per-su 2] [--rate 10] [--mib 8] [--iters 3] [--warmup 1] [--jobs 2]
        [--scenarios allreduce,alltoall,jobs] [--modes one-switch,ecmp,loom]
        [--mtu 9000] [--out results/rails] [--quick]

The fabric is ``topologies.rail_optimized``: every server one namespace with one
interface per NIC in its rail's /16 (``mininet_scenarios.harness.servers``), NIC ``i`` of
every server on rail ``i``'s leaf of its scalable unit, the leaves on the spines. By
default 4 servers x 4 NICs in 2 scalable units of 2 servers, so every rail spans two
leaves and a rail's traffic between the units crosses a spine (with one unit there would
be nothing for ECMP or Loom to place). A plain fabric: no class tree, the kernel's queues,
Loom started as the README says, told nothing but the policy: one tenant with every NIC
and the servers declared (the user's own setup, what ``GET order`` needs).

One network per mode, side by side in one run:

* ``ecmp``: ``LOOM_TE=off``, no job registered, the launcher's **default** order;
* ``loom``: the job registered before its first byte, with the **default** order (Loom
  told a rail-unaware order) and with Loom's **rail** order (``GET /loom/v1/order``);
* ``one-switch``: the same servers and NICs on one switch, no fabric: the reference.

The default order is how a launcher numbers ranks (torchrun: node after node, local rank
``i`` on GPU ``i``): each server's NICs in NIC order, servers in name order. Its hops
between servers leave NIC 3 of one server for NIC 0 of the next: they cross rails. Loom's
order keeps each server's ranks together too and puts every hop between servers on one
rail (:func:`rail_aware_order` is the same rule, for the one-switch reference, where no
fabric has rails). ``cross_rail_hops`` of every order is recorded.

What the emulation can and cannot show: a worker bound to NIC 0 that sends to NIC 3 of
another server leaves by its server's NIC 3 (the kernel routes by the destination's rail,
see ``harness.servers``), as NCCL's PXN moves such a hop over NVLink to the GPU whose NIC
is on the right rail. A cross-rail hop here costs the NIC it lands on, not a spine
crossing; where a real NIC-to-NIC transfer would cross rails is what ``cross_rail_hops``
counts.

Scenarios: ``allreduce`` (ring, every NIC a rank), ``alltoall`` (every NIC a rank) and
``jobs`` (``--jobs`` all-reduce jobs at once, job ``j`` on NIC block ``j`` of every server;
each alone, then all together: :func:`~mininet_scenarios.workloads.collectives.multijob.run_mix`).
Figures (:mod:`.rails_report`): busbw / link rate and busbw / the same job's on one switch,
with ovs-vswitchd's forwarding thread's share of a core (the emulator's one busy thread)
beside each. Target: rail-aware all-reduce >= 0.95 of one switch.

Like :mod:`.collectives`: progress lines, ``results.json`` rewritten after every run, a
table and a PNG at the end. Wrap it in ``flock /tmp/loom-emulation.lock``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from controller.railorder import rail_ring
from mininet_scenarios.bench.collectives import environment_facts, expected_seconds
from mininet_scenarios.bench.collectives_jobs import tenant_policy
from mininet_scenarios.bench.modes import begin, record_run, run_all, say
from mininet_scenarios.bench.patterns import nonblocking_graph
from mininet_scenarios.bench.rails_report import (
    MODES,
    ONE_SWITCH,
    TARGET,
    figures,
    plot,
    table,
)
from mininet_scenarios.harness.client import LoomApiError
from mininet_scenarios.harness.processes import REPO_ROOT
from mininet_scenarios.harness.servers import servers_yaml
from mininet_scenarios.workloads.collectives.hosts import CollectiveError, host_ips, set_mtu
from mininet_scenarios.workloads.collectives.model import JobPlan
from mininet_scenarios.workloads.collectives.multijob import MixResult, run_mix
from mininet_scenarios.workloads.collectives.runner import CollectiveResult, run_collective
from topologies import rail_optimized
from topologies.graph import host_list

SCENARIOS = ("allreduce", "alltoall", "jobs")
OP = {"allreduce": "all_reduce", "alltoall": "all_to_all", "jobs": "all_reduce"}
MODE_ENV = {ONE_SWITCH: {"LOOM_TE": "off"}, "ecmp": {"LOOM_TE": "off"}, "loom": {}}
# ECMP runs the launcher's order only; an all-to-all's pairs are the same in any order,
# so one switch runs it once
ORDERS = {ONE_SWITCH: ("default", "rail"), "ecmp": ("default",), "loom": ("default", "rail")}
TENANT = "bench"
BASE_PORT = 29500
ORDER_WAIT = 45.0  # seconds for Loom to learn every NIC before GET order uses the rails


@dataclass(frozen=True)
class Run:
    """One run of the plan: which network, which workload, which rank order."""

    mode: str
    scenario: str  # allreduce | alltoall | jobs
    order: str  # default | rail

    @property
    def key(self) -> str:
        return f"{self.mode}/{self.scenario}/{self.order}"


def plan(scenarios: Sequence[str], modes: Sequence[str]) -> list[Run]:
    """Every mode's runs, grouped by mode (one network per mode)."""
    runs = []
    for mode in (m for m in MODES if m in modes):
        for scen in (s for s in SCENARIOS if s in scenarios):
            for order in ORDERS[mode]:
                if not (mode == ONE_SWITCH and scen == "alltoall" and order != "default"):
                    runs.append(Run(mode, scen, order))
    return runs


# --------------------------------------------------------------------------- orders


def default_order(graph: nx.MultiGraph, hosts: Sequence[str]) -> list[str]:
    """``hosts`` as a launcher numbers them: server by server, NIC by NIC (the graph's
    host order), blind to the rails."""
    asked = set(hosts)
    return [h for h in host_list(graph) if h in asked]


def rail_aware_order(graph: nx.MultiGraph, hosts: Sequence[str]) -> list[str]:
    """``hosts`` in Loom's rail-aware order (``controller.railorder.rail_ring``, servers as
    the default order meets them): for the one-switch reference, which has no rails."""
    by_server: dict[str, dict[int, str]] = {}
    for h in default_order(graph, hosts):
        by_server.setdefault(str(graph.nodes[h]["server"]), {})[int(graph.nodes[h]["nic"])] = h
    rails, _crossing = rail_ring([sorted(nics) for nics in by_server.values()])
    return [by_server[s][nic] for s, nics in zip(by_server, rails, strict=True) for nic in nics]


def cross_rail_hops(graph: nx.MultiGraph, order: Sequence[str]) -> list[int]:
    """The ranks whose hop to the next rank (the last: to rank 0) goes between servers
    on two rails, as ``GET order`` counts them."""
    nodes = graph.nodes
    n = len(order)
    return [
        r
        for r in range(n)
        if nodes[order[r]]["server"] != nodes[order[(r + 1) % n]]["server"]
        and nodes[order[r]]["nic"] != nodes[order[(r + 1) % n]]["nic"]
    ]


def job_hosts(graph: nx.MultiGraph, scenario: str, jobs: int) -> list[list[str]]:
    """The NICs of each job: every NIC for one job; for ``jobs``, job ``j`` on NIC block
    ``j`` of every server (NICs ``j*k .. j*k+k-1``, ``k = nics / jobs``)."""
    hosts = host_list(graph)
    if scenario != "jobs":
        return [hosts]
    nics = int(graph.graph["params"]["nics"])
    k = nics // jobs
    return [[h for h in hosts if int(graph.nodes[h]["nic"]) // k == j] for j in range(jobs)]


def fabric(args: argparse.Namespace) -> nx.MultiGraph:
    return rail_optimized(
        servers=args.servers,
        nics=args.nics,
        spines=args.spines,
        servers_per_su=args.servers_per_su,
        rate_mbps=args.rate,
    )


def one_switch_graph(graph: nx.MultiGraph) -> nx.MultiGraph:
    """The servers' NICs (names, MACs, IPs, rates, servers) on one non-blocking switch."""
    g = nonblocking_graph(graph)
    for h in host_list(graph):
        g.nodes[h].update(server=graph.nodes[h]["server"], nic=graph.nodes[h]["nic"])
    return g


def policy_yaml(graph: nx.MultiGraph) -> str:
    """One tenant with every NIC, and the servers with their NICs in NIC order (by MAC)."""
    return tenant_policy(graph, {TENANT: host_list(graph)}) + servers_yaml(graph)


# --------------------------------------------------------------------------- running


def loom_order(st: Any, hosts: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """Loom's rank order of ``hosts`` (``GET order``), once Loom uses the rails for them
    (pinging along the rails meanwhile, so every NIC has spoken)."""
    ips = host_ips(st.net, hosts)
    by_ip = dict(zip(ips, hosts, strict=True))
    deadline = time.monotonic() + ORDER_WAIT
    while True:
        body = dict(st.api.get("/loom/v1/order?hosts=" + ",".join(ips)))
        if body.get("rails") == "used":
            return [by_ip[ip] for ip in body["hosts"]], body
        if time.monotonic() > deadline:
            raise CollectiveError(f"GET order did not use the rails: {body}")
        st.net.pingall(timeout=1.0)


def orders_of(
    st: Any, graph: nx.MultiGraph, run: Run, jobs: int
) -> tuple[list[list[str]], list[dict[str, Any] | None]]:
    """Each job's rank order for ``run``, with Loom's answer where it gave it."""
    out: list[list[str]] = []
    bodies: list[dict[str, Any] | None] = []
    for hosts in job_hosts(graph, run.scenario, jobs):
        body = None
        if run.order == "default":
            order = default_order(graph, hosts)
        elif run.mode == ONE_SWITCH:
            order = rail_aware_order(graph, hosts)
        else:
            order, body = loom_order(st, hosts)
        out.append(order)
        bodies.append(body)
    return out, bodies


def _job(graph: nx.MultiGraph, order: Sequence[str], body: dict[str, Any] | None) -> dict[str, Any]:
    """A job's order as saved, with Loom's answer and whether it is the rule's order."""
    return {
        "hosts": list(order),
        "cross_rail_hops": cross_rail_hops(graph, order),
        "loom_order": body,
        "same_as_rule": None if body is None else list(order) == rail_aware_order(graph, order),
    }


def single_record(jobs: list[dict[str, Any]], res: CollectiveResult) -> dict[str, Any]:
    """One job alone: its busbw (median over the timed iterations) and the whole result."""
    jobs[0].update(
        busbw_mbps=res.busbw, link_mbps=res.link_mbps, check_ok=res.check_ok, alone_mbps=None
    )
    return {
        "jobs": jobs,
        "ovs_busy_mean": res.ovs_busy_mean,
        "ovs_wait_mean": res.ovs_wait_mean,
        "cpu_idle_mean": res.cpu_idle_mean,
        "result": res.as_dict(),
    }


def mix_record(jobs: list[dict[str, Any]], res: MixResult) -> dict[str, Any]:
    """A mix: each job's busbw in it (median inside the window where every job ran; all
    its mix iterations if none lies wholly inside) and alone."""
    for job, p in zip(jobs, res.plans, strict=True):
        inside = res.mix_busbw_mbps.get(p.name)
        mixed = res.mix[p.name]
        job.update(
            name=p.name,
            busbw_mbps=inside if inside is not None else mixed.busbw,
            link_mbps=mixed.link_mbps,
            check_ok=mixed.check_ok and res.alone[p.name].check_ok,
            alone_mbps=res.alone[p.name].busbw,
        )
    cpu = res.cpu.get("mix", {})
    return {
        "jobs": jobs,
        "ovs_busy_mean": cpu.get("ovs_busy_mean"),
        "ovs_wait_mean": cpu.get("ovs_wait_mean"),
        "cpu_idle_mean": cpu.get("idle_mean"),
        "result": res.as_dict(),
    }


def run_one(st: Any, graph: nx.MultiGraph, run: Run, args: argparse.Namespace) -> dict[str, Any]:
    orders, bodies = orders_of(st, graph, run, args.jobs)
    jobs = [_job(graph, o, b) for o, b in zip(orders, bodies, strict=True)]
    op = OP[run.scenario]
    n = len(orders[0])
    est = expected_seconds(op, n, args.mib, args.rate, args.iters, args.warmup, args.mtu)
    timeout = max(240.0, 4 * est + 120)
    register = st.api if run.mode == "loom" else None
    out = args.out / "runs" / run.key.replace("/", "_")
    for j in jobs:
        say(f"{run.key}: order {' '.join(j['hosts'])}; cross-rail hops {j['cross_rail_hops']}")
    if run.scenario != "jobs":
        say(f"{run.key}: {n} ranks (>= {est:.0f} s at line rate; timeout {timeout:.0f} s)")
        res = run_collective(
            st, orders[0], op, args.mib, args.iters, warmup=args.warmup, register=register,
            job_name=f"rails-{run.scenario}", tenant=TENANT, timeout=timeout, out_dir=out,
        )  # fmt: skip
        return single_record(jobs, res)
    plans = [
        JobPlan(f"rails-j{j + 1}", TENANT, tuple(o), op, BASE_PORT + j)
        for j, o in enumerate(orders)
    ]
    say(f"{run.key}: {len(plans)} jobs of {n} ranks, each alone then together")
    mixed = run_mix(
        st, plans, mib=args.mib, iters=args.iters, warmup=args.warmup, register=register,
        out_dir=out, phase_timeout=timeout, say=say,
    )  # fmt: skip
    return mix_record(jobs, mixed)


def run_mode(
    mode: str,
    runs: Sequence[Run],
    args: argparse.Namespace,
    doc: dict[str, Any],
    progress: dict[str, Any],
) -> None:
    """Start ``mode``'s network once and run its part of the plan."""
    from mininet_scenarios.harness.stack import LoomStack

    graph = fabric(args)
    run_dir = args.out / "runs" / mode
    run_dir.mkdir(parents=True, exist_ok=True)
    policy = run_dir / "policy.yaml"
    policy.write_text(policy_yaml(graph))
    env = {**MODE_ENV[mode], "LOOM_POLICY": str(policy)}
    net_graph = one_switch_graph(graph) if mode == ONE_SWITCH else graph
    say(f"{mode}: starting Loom ({' '.join(f'{k}={v}' for k, v in env.items())}) ...")
    t0 = time.monotonic()
    with LoomStack(net_graph, run_dir, env=env, queue_classes=None) as st:
        if args.mtu != 1500:
            set_mtu(st.net, args.mtu)
        ping = st.net.pingall(timeout=2.0)
        doc["modes"][mode] = {
            "env": env,
            "startup_s": round(time.monotonic() - t0, 1),
            "discovery_s": round(st.discovery_seconds, 1),
            "pingall_loss_pct": ping.loss_pct,
            "rails": st.api.topology().get("rails"),
        }
        say(f"{mode}: up in {time.monotonic() - t0:.0f} s, pingall loss {ping.loss_pct:.1f} %")
        for run in runs:
            t1 = time.monotonic()
            record: dict[str, Any] = {"key": run.key, **asdict(run)}
            try:
                record.update(run_one(st, graph, run, args))
            except (CollectiveError, LoomApiError, OSError, ValueError) as exc:
                record["error"] = f"{type(exc).__name__}: {exc}"
                say(f"{run.key}: FAILED {record['error']}")
            else:
                busy = record["ovs_busy_mean"]
                say(
                    f"{run.key}: busbw "
                    + ", ".join(f"{j['busbw_mbps']:.2f}" for j in record["jobs"])
                    + f" Mbit/s (link {record['jobs'][0]['link_mbps']:g});"
                    f" ovs-vswitchd forwarding thread {busy or 0:.0f} % of a core,"
                    f" cpu idle {record['cpu_idle_mean'] or 0:.0f} %"
                    + ("" if all(j["check_ok"] for j in record["jobs"]) else "  WRONG RESULT")
                )
            record_run(doc, record, figures, args, progress, st, t1)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m mininet_scenarios.bench.rails",
        description="gloo collectives of NIC-bound workers on a rail-optimized fabric:"
        " ECMP and Loom with the launcher's order, Loom with its rail-aware order, and"
        " the same jobs on one switch.",
    )
    ap.add_argument("--servers", type=int, default=4)
    ap.add_argument("--nics", type=int, default=4, help="NICs (and rails) per server")
    ap.add_argument("--spines", type=int, default=2)
    ap.add_argument("--servers-per-su", type=int, default=2, help="servers per scalable unit")
    ap.add_argument("--rate", type=float, default=10.0, help="link rate, Mbit/s (default 10)")
    ap.add_argument("--mib", type=float, help="per-rank buffer, MiB (default 8; quick 1)")
    ap.add_argument("--iters", type=int, help="timed iterations (default 3; quick 1)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed iterations first")
    ap.add_argument("--jobs", type=int, default=2, help="jobs of the jobs scenario (default 2)")
    ap.add_argument("--scenarios", help=f"subset of {','.join(SCENARIOS)} (quick: allreduce)")
    ap.add_argument("--modes", default=",".join(MODES), help=f"subset of {','.join(MODES)}")
    ap.add_argument("--mtu", type=int, default=9000, help="MTU of every link end")
    ap.add_argument("--drain", type=float, default=2.0, help="quiet seconds between runs")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "results" / "rails")
    ap.add_argument("--quick", action="store_true", help="1 MiB, 1 iteration, all-reduce")
    args = ap.parse_args(argv)
    args.out = args.out.resolve()  # the policy's path is handed to the controller
    args.mib = args.mib if args.mib is not None else (1.0 if args.quick else 8.0)
    args.iters = args.iters if args.iters is not None else (1 if args.quick else 3)
    scen = args.scenarios or ("allreduce" if args.quick else ",".join(SCENARIOS))
    args.scenario_list = [s for s in scen.split(",") if s]
    args.mode_list = [m for m in args.modes.split(",") if m]
    bad = [s for s in args.scenario_list if s not in SCENARIOS]
    bad += [m for m in args.mode_list if m not in MODES]
    if bad or not args.scenario_list or not args.mode_list:
        ap.error(f"unknown or no scenario or mode: {', '.join(bad) or '(none)'}")
    if args.jobs < 1 or args.nics % args.jobs or args.servers * args.nics // args.jobs < 2:
        ap.error("--jobs must divide --nics and leave every job two ranks")
    if args.iters < 1 or args.warmup < 0 or args.mib <= 0:
        ap.error("need --iters >= 1, --warmup >= 0 and --mib > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    started = begin("rails", argv, parse_args)
    if started is None:
        return 2
    argv_used, args = started
    runs = plan(args.scenario_list, args.mode_list)
    graph = fabric(args)
    doc: dict[str, Any] = {
        "benchmark": "rails (docs/benchmarks.md §15)",
        "command": shlex.join([sys.executable, "-m", "mininet_scenarios.bench.rails", *argv_used]),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "environment": environment_facts(),
        "fabric": {k: v for k, v in graph.graph["params"].items()},
        "conventions": {
            "busbw": "nccl-tests: algbw = per-rank buffer bytes / slowest rank's iteration"
            " time; busbw = algbw*2(n-1)/n (all-reduce), algbw*(n-1)/n (all-to-all);"
            " median over timed iterations; Mbit/s = 1e6 bit/s",
            "one_switch": "busbw / the same job's (same hosts, same rank order; all-to-all:"
            " any order) on one non-blocking switch",
            "jobs": "each job's busbw while every job runs (median of its iterations inside"
            " the window where all ran) / link, / the same job's mix on one switch",
            "ovs_busy": "% of a core ovs-vswitchd's forwarding thread ran during the timed"
            " iterations (near 100: the figure is the emulator's)",
        },
        "target": {"allreduce rail-aware / one switch": TARGET},
        "modes": {},
        "runs": [],
    }
    say(
        f"{len(runs)} runs: {args.servers} servers x {args.nics} NICs, {args.spines} spines,"
        f" {args.mib:g} MiB, {args.warmup}+{args.iters} iterations, {args.rate:g} Mbit/s;"
        f" results in {args.out}"
    )
    run_all(MODES, runs, run_mode, args, doc, (figures, table, plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
