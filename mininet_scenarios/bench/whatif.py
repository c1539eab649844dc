"""What-if prediction (``docs/benchmarks.md`` §8): every link's load and every job's busbw
on a generated fabric under ``ecmp`` and ``loom``, from the rules Loom's own core installs.

    loom-whatif FABRIC [--jobs 64x256:allreduce,4x16:alltoall] [--order random|topology]
        [--seed 1] [--bulk N] [--draws 16] [--modes ecmp,loom] [--out results/whatif]
    loom-whatif --check-k4 [--measured results/collectives/results.json] [--seeds 1]

The core (``controller.conductor.Conductor``, configured as the app with no ``LOOM_*`` variable)
is brought up on the fabric over the scale benchmark's fake wire, exactly as
``bench_scale`` does, until every host is learned. Then, per mode:

* ``ecmp``: the jobs are not registered: their flows take the routes and select groups
  every host's traffic takes (traffic engineering never acts: the wire carries no
  traffic for it to see, as with ``LOOM_TE=off``);
* ``loom``: every job is registered with the core as ``POST /loom/v1/jobs`` would
  register it (the same request body, validated the same way), in ``--jobs`` order, and
  the core installs its placements.

Every flow's path is then read by tracing its first packet through the rules the
switches hold (:mod:`~mininet_scenarios.bench.whatif_trace`); select groups hash the
flow by a salted hash, one salt per draw, so ``--draws`` draws give the spread of what
hashing can do (a mode whose flows meet no select group is drawn once). The max-min fair
model (:mod:`~mininet_scenarios.bench.whatif_model`) turns paths into rates.

Jobs: ``COUNTxRANKS:PATTERN`` (``allreduce``: a ring, data flowing ``rank i -> i-1`` as
gloo sends it; ``alltoall``: every ordered pair). Hosts are dealt to jobs from one
shuffle by ``--seed`` (a scheduler that ignores the topology), each host to one job;
``--order topology`` deals them in topology order instead. ``--bulk N`` adds N free flows
between random host pairs (one per pair, never a pair a job uses).

``--check-k4`` predicts the collectives benchmark's k=4 scenarios (its rank orders, by
the same function and seeds) beside the figures a ``results.json`` of that benchmark
measured (``--measured``). Results: ``results.json``, a table on stdout (also
``table.txt``) and ``whatif.png`` (:mod:`~mininet_scenarios.bench.whatif_report`).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from controller.conductor import Conductor
from controller.jobspec import JobSpec, parse_job
from mininet_scenarios.bench.scale import OverBudget, Watch, core_config, settle
from mininet_scenarios.bench.scale_wire import Wire
from mininet_scenarios.bench.whatif_model import Flow, busbw, max_min
from mininet_scenarios.bench.whatif_report import check_table, plot, plot_check, save, table
from mininet_scenarios.bench.whatif_trace import Flow5, Tracer
from mininet_scenarios.workloads.collectives.model import (
    random_order,
    ring_pairs,
    tcp_ceiling,
    topology_order,
)
from mininet_scenarios.workloads.collectives.runner import LOOM_PATTERN, job_request
from topologies import by_name
from topologies.graph import host_list

OPS = {"allreduce": "all_reduce", "alltoall": "all_to_all"}
MODES = ("ecmp", "loom")
PORT_BASE, PORT_SPAN = 40960, 8192  # gloo's pinned ports in the emulation
BULK_PORT = 5201  # iperf3
HIST_BINS = 20
SETTLE_TICKS = 10  # simulated 0.1 s ticks after registering jobs
PROGRESS_EVERY_S = 5.0


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Job:
    """A job of the mix: its collective op and its hosts (graph names) in rank order."""

    name: str
    op: str  # all_reduce | all_to_all
    hosts: tuple[str, ...]
    tenant: str = "default"

    @property
    def pattern(self) -> str:
        return LOOM_PATTERN[self.op][0]

    def pairs(self) -> list[tuple[str, str]]:
        """Who sends to whom: gloo's ring (``i -> i-1``), or every ordered pair."""
        if self.op == "all_to_all":
            return [(a, b) for a in self.hosts for b in self.hosts if a != b]
        return ring_pairs(self.hosts, -1)

    def spec(self, graph: nx.MultiGraph) -> JobSpec:
        """The job as the REST API would take it (same body, same validation)."""
        ips = [str(graph.nodes[h]["ip"]) for h in self.hosts]
        return parse_job(job_request(self.name, self.tenant, ips, self.op))


def parse_jobs(text: str) -> list[tuple[int, int, str]]:
    """``64x256:allreduce,4x16:alltoall`` -> [(count, ranks, op), ...]."""
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            shape, kind = part.split(":")
            count, ranks = (int(x) for x in shape.lower().split("x"))
            op = OPS[kind.strip()]
        except (ValueError, KeyError):
            raise ValueError(
                f"{part!r}: expected COUNTxRANKS:PATTERN, PATTERN one of {', '.join(OPS)}"
            ) from None
        if count < 1 or ranks < 2:
            raise ValueError(f"{part!r}: at least one job of at least 2 ranks")
        out.append((count, ranks, op))
    return out


def deal_jobs(
    graph: nx.MultiGraph, mix: Sequence[tuple[int, int, str]], order: str, seed: int
) -> list[Job]:
    """Hosts dealt to the jobs of ``mix`` in turn, from one shuffle (or topology order)."""
    hosts = host_list(graph)
    dealt = topology_order(graph) if order == "topology" else random_order(hosts, seed)
    need = sum(count * ranks for count, ranks, _ in mix)
    if need > len(dealt):
        raise ValueError(f"the jobs need {need} hosts; the fabric has {len(dealt)}")
    jobs: list[Job] = []
    at = 0
    for count, ranks, op in mix:
        for _ in range(count):
            name = f"job-{len(jobs):03d}"
            jobs.append(Job(name, op, tuple(dealt[at : at + ranks])))
            at += ranks
    return jobs


def bulk_pairs(graph: nx.MultiGraph, jobs: Sequence[Job], n: int, seed: int) -> list[Flow5]:
    """``n`` bulk flows between random host pairs no job sends on."""
    hosts = host_list(graph)
    taken = {p for job in jobs for p in job.pairs()}
    rng = random.Random(seed * 7919 + 1)
    flows: list[Flow5] = []
    tries = 0
    while len(flows) < n:
        tries += 1
        if tries > 100 * n + 1000:
            raise ValueError(f"could not find {n} host pairs free of job traffic")
        a, b = rng.sample(hosts, 2)
        if (a, b) not in taken:
            taken.add((a, b))
            flows.append(Flow5(a, b, 30000 + len(flows) % 30000, BULK_PORT))
    return flows


# -- links -------------------------------------------------------------------------------
@dataclass
class Links:
    """Every directed link of the graph: an id per egress port (``node:port->peer``) and
    its capacity in Mbit/s."""

    by_egress: dict[tuple[int, int], str]  # (dpid, port) -> id
    uplink: dict[str, str]  # host -> id of its link to its switch
    capacity: dict[str, float]

    @staticmethod
    def of(graph: nx.MultiGraph) -> Links:
        by_egress, uplink, capacity = {}, {}, {}
        for a, b, data in graph.edges(data=True):
            for x, y in ((a, b), (b, a)):
                lid = f"{x}:{data['ports'][x]}->{y}"
                capacity[lid] = float(data["rate_mbps"])
                if graph.nodes[x]["kind"] == "host":
                    uplink[x] = lid
                else:
                    by_egress[(int(graph.nodes[x]["dpid"]), int(data["ports"][x]))] = lid
        return Links(by_egress, uplink, capacity)


# -- bring-up and modes ------------------------------------------------------------------
def bring_up(spec: str, budget: float) -> tuple[Wire, dict[str, Any]]:
    """The core on ``spec`` over the scale wire, settled from cold (as ``bench_scale``)."""
    graph = by_name(spec)
    wire = Wire(graph, Conductor(core_config(), timer=time.perf_counter))
    watch = Watch(wire, str(graph.graph.get("name", spec)), budget)
    wire.watch = watch
    hosts, switches = len(wire.hosts), len(wire.tables)
    say(f"{spec}: {switches} switches, {hosts} hosts: bringing the core up")
    result = settle(wire, watch, cold=True)
    if not result["settled"]:
        raise SystemExit(f"loom-whatif: {spec} did not settle: {result['reason']}")
    wire.watch = None
    facts = {
        "spec": spec,
        "name": graph.graph.get("name", spec),
        "switches": switches,
        "hosts": hosts,
        "bringup_core_s": round(wire.total.core_s, 3),
        "bringup_wall_s": round(watch.wall(), 3),
        "rules_installed": wire.rules_installed,
    }
    say(f"  settled: core {facts['bringup_core_s']:.1f} s, wall {facts['bringup_wall_s']:.1f} s")
    return wire, facts


def register(wire: Wire, jobs: Sequence[Job]) -> dict[str, Any]:
    """Register every job with the core, in order, then let a second of ticks pass."""
    t0, core0 = time.perf_counter(), wire.total.core_s
    shown, longest = t0, 0.0
    for i, job in enumerate(jobs):
        before = wire.total.core_s
        wire.run("create_job", wire.fabric.create_job, wire.now, job.spec(wire.graph))
        longest = max(longest, wire.total.core_s - before)
        if time.perf_counter() - shown >= PROGRESS_EVERY_S:
            shown = time.perf_counter()
            say(f"  registered {i + 1}/{len(jobs)} jobs, core {wire.total.core_s - core0:.1f} s")
    for _ in range(SETTLE_TICKS):
        wire.step()
    unplaced = [j.name for j in jobs if not wire.view.jobs[j.name].placed]
    if unplaced:
        raise SystemExit(f"loom-whatif: the core did not place {', '.join(unplaced[:5])}")
    return {
        "register_core_s": round(wire.total.core_s - core0, 3),
        "register_core_max_s": round(longest, 3),  # the longest single registration
        "register_wall_s": round(time.perf_counter() - t0, 3),
        "core_max_utilization": {
            j.name: round(wire.view.jobs[j.name].max_utilization, 4) for j in jobs
        },
    }


def unregister(wire: Wire, jobs: Sequence[Job]) -> None:
    for job in jobs:
        wire.run("delete_job", wire.fabric.delete_job, job.name)
    for _ in range(SETTLE_TICKS):
        wire.step()


def flows_of(jobs: Sequence[Job], bulk: Sequence[Flow5]) -> list[tuple[Flow5, str | None]]:
    """Every job pair as a TCP flow on fixed ports (the hash input), then the bulk flows."""
    out: list[tuple[Flow5, str | None]] = []
    for job in jobs:
        for a, b in job.pairs():
            k = len(out)
            five = Flow5(a, b, PORT_BASE + k % PORT_SPAN, PORT_BASE + (7 * k + 3) % PORT_SPAN)
            out.append((five, job.name))
    out.extend((f, None) for f in bulk)
    return out


def predict(
    wire: Wire,
    jobs: Sequence[Job],
    bulk: Sequence[Flow5],
    draws: int,
    label: str,
) -> dict[str, Any]:
    """Trace and solve ``draws`` times (once if no flow meets a select group)."""
    links = Links.of(wire.graph)
    tracer = Tracer(wire)
    flows = flows_of(jobs, bulk)
    by_job: dict[str, list[float]] = {j.name: [] for j in jobs}
    neck: dict[str, Counter[str]] = {j.name: Counter() for j in jobs}
    shared: dict[str, list[int]] = {j.name: [] for j in jobs}
    bulk_rates: list[float] = []
    max_u: list[float] = []
    mean_u: list[float] = []
    hist = [0] * (HIST_BINS + 1)  # idle links, then HIST_BINS bins over (0, 1]
    link_rate = {j.name: links.capacity[links.uplink[j.hosts[0]]] for j in jobs}
    members: dict[str, list[int]] = {j.name: [] for j in jobs}
    for i, (_, group) in enumerate(flows):
        if group is not None:
            members[group].append(i)
    t0 = shown = time.perf_counter()
    done = 0
    for draw in range(draws):
        paths = []
        for five, _ in flows:
            hops = tracer.trace(five, salt=draw)
            paths.append((links.uplink[five.src], *(links.by_egress[h] for h in hops)))
            done += 1
            if time.perf_counter() - shown >= PROGRESS_EVERY_S:
                shown = time.perf_counter()
                say(f"  {label} draw {draw + 1}/{draws}: {done} traces, {shown - t0:.0f} s")
        sol = max_min([Flow(p, g) for p, (_, g) in zip(paths, flows, strict=True)], links.capacity)
        for job in jobs:
            rate = sol.group_rate[job.name]
            by_job[job.name].append(busbw(job.pattern, len(job.hosts), rate) / link_rate[job.name])
            neck[job.name][str(sol.group_bottleneck[job.name])] += 1
            on = Counter(link for i in members[job.name] for link in paths[i])
            shared[job.name].append(max(on.values()))
        bulk_rates += [sol.flow_rate[i] / links.capacity[paths[i][0]] for i in sol.flow_bottleneck]
        util = [sol.utilisation.get(lid, 0.0) for lid in links.capacity]
        max_u.append(max(util))
        mean_u.append(statistics.fmean(util))
        for u in util:
            hist[0 if u <= 0 else min(HIST_BINS, 1 + int(u * HIST_BINS - 1e-9))] += 1
        if draw == 0 and not tracer.hashed:
            break
    used = len(max_u)
    return {
        "draws": used,
        "trace_wall_s": round(time.perf_counter() - t0, 3),
        "flows": len(flows),
        "jobs": {
            j.name: {
                **spread(by_job[j.name]),
                "bottleneck": min(neck[j.name].items(), key=lambda kv: (-kv[1], kv[0]))[0],
                "max_flows_on_a_link": max(shared[j.name]),
            }
            for j in jobs
        },
        "bulk_over_link": spread(bulk_rates) if bulk_rates else None,
        "max_utilization": spread(max_u),
        "mean_utilization": spread(mean_u),
        "links": len(links.capacity),
        "utilization_hist": hist,
    }


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values)}


def run_modes(
    wire: Wire, jobs: Sequence[Job], bulk: Sequence[Flow5], modes: Sequence[str], draws: int
) -> dict[str, Any]:
    """``ecmp`` on the settled fabric, then the jobs registered and ``loom``; unregisters
    them again, so the next scenario starts from the same fabric."""
    out: dict[str, Any] = {}
    if "ecmp" in modes:
        say(f"  ecmp: tracing {len(jobs)} jobs, {len(bulk)} bulk flows")
        out["ecmp"] = predict(wire, jobs, bulk, draws, "ecmp")
    if "loom" in modes:
        say(f"  loom: registering {len(jobs)} jobs")
        reg = register(wire, jobs)
        out["loom"] = {**predict(wire, jobs, bulk, draws, "loom"), **reg}
        unregister(wire, jobs)
    return out


# -- the k=4 check -----------------------------------------------------------------------
CHECK_SCENARIOS = (
    ("allreduce-random", "all_reduce", "random"),
    ("allreduce-topology", "all_reduce", "topology"),
    ("alltoall", "all_to_all", "random"),
)


def check_k4(args: argparse.Namespace) -> dict[str, Any]:
    """The collectives benchmark's scenarios: its rank orders (``random_order`` by seed,
    ``topology_order``), its job names and tenant, one job at a time as it runs them."""
    wire, facts = bring_up("fat_tree:k=4", args.budget)
    hosts = host_list(wire.graph)
    measured = measured_figures(args.measured)
    ceiling = tcp_ceiling(args.mtu)
    rows = []
    for scenario, op, order in CHECK_SCENARIOS:
        seeds = [0] if order == "topology" else list(range(1, args.seeds + 1))
        per_seed = []
        for seed in seeds:
            ranks = topology_order(wire.graph) if order == "topology" else random_order(hosts, seed)
            job = Job(f"bench-{op.replace('_', '-')}", op, tuple(ranks), tenant="bench")
            say(f"{scenario} seed {seed}: {' '.join(ranks)}")
            per_seed.append(run_modes(wire, [job], [], args.modes, args.draws))
        for mode in args.modes:
            figs = [s[mode]["jobs"][f"bench-{op.replace('_', '-')}"] for s in per_seed]
            raw = statistics.median(f["mean"] for f in figs)
            rows.append(
                {
                    "scenario": scenario,
                    "mode": mode,
                    "seeds": seeds,
                    "predicted": raw,
                    "predicted_min": min(f["min"] for f in figs),
                    "predicted_max": max(f["max"] for f in figs),
                    "predicted_scaled": raw * ceiling,
                    "bottleneck": figs[0]["bottleneck"],
                    "draws": [s[mode]["draws"] for s in per_seed],
                    "measured": measured.get(scenario, {}).get(mode) if measured else None,
                }
            )
    return {
        "kind": "check_k4",
        "fabric": facts,
        "mtu": args.mtu,
        "tcp_ceiling": ceiling,
        "measured_from": str(args.measured) if args.measured else None,
        "rows": rows,
    }


def measured_figures(path: Path | None) -> dict[str, dict[str, float | None]] | None:
    if path is None:
        return None
    from mininet_scenarios.bench.collectives_report import figures

    return figures(json.loads(path.read_text())["runs"])


# -- the command -------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="loom-whatif",
        description="Every link's load and every job's busbw under ecmp and loom, predicted"
        " from the rules Loom's core installs on a generated fabric (docs/benchmarks.md §8).",
    )
    ap.add_argument("fabric", nargs="?", help="fabric spec, e.g. fat_tree:k=32")
    ap.add_argument("--jobs", default="1x16:allreduce", help="COUNTxRANKS:PATTERN,...")
    ap.add_argument("--order", choices=("random", "topology"), default="random")
    ap.add_argument("--seed", type=int, default=1, help="of the rank placement and bulk pairs")
    ap.add_argument("--bulk", type=int, default=0, help="free flows between random host pairs")
    ap.add_argument("--draws", type=int, default=16, help="hash draws per mode (default 16)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated subset")
    ap.add_argument("--out", type=Path, default=Path("results/whatif"))
    ap.add_argument("--mtu", type=int, default=9000, help="for the TCP ceiling (default 9000)")
    ap.add_argument("--budget", type=float, default=1800.0, help="bring-up core and wall s")
    ap.add_argument("--check-k4", action="store_true", help="predict the collectives bench")
    ap.add_argument("--measured", type=Path, help="the collectives bench's results.json")
    ap.add_argument("--seeds", type=int, default=1, help="--check-k4: random orders 1..N")
    args = ap.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    if not args.modes or set(args.modes) - set(MODES):
        ap.error(f"--modes: a comma-separated subset of {','.join(MODES)}")
    if not args.check_k4 and not args.fabric:
        ap.error("give a FABRIC (e.g. fat_tree:k=16) or --check-k4")
    if args.draws < 1 or args.bulk < 0 or args.seeds < 1:
        ap.error("--draws and --seeds must be at least 1, --bulk at least 0")
    try:
        args.mix = parse_jobs(args.jobs)
    except ValueError as exc:
        ap.error(f"--jobs: {exc}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    command = " ".join(["loom-whatif", *(sys.argv[1:] if argv is None else argv)])
    try:
        if args.check_k4:
            doc = {"command": command, **check_k4(args)}
            text, png = check_table(doc), plot_check(doc, out / "whatif.png")
        else:
            wire, facts = bring_up(args.fabric, args.budget)
            jobs = deal_jobs(wire.graph, args.mix, args.order, args.seed)
            bulk = bulk_pairs(wire.graph, jobs, args.bulk, args.seed)
            doc = {
                "command": command,
                "kind": "predict",
                "fabric": facts,
                "jobs_spec": args.jobs,
                "order": args.order,
                "seed": args.seed,
                "bulk": args.bulk,
                "jobs": [
                    {"name": j.name, "op": j.op, "ranks": len(j.hosts), "hosts": list(j.hosts)}
                    for j in jobs
                ],
                "modes": run_modes(wire, jobs, bulk, args.modes, args.draws),
            }
            text, png = table(doc), plot(doc, out / "whatif.png")
    except (OverBudget, ValueError) as exc:
        print(f"loom-whatif: {exc}", file=sys.stderr)
        return 2
    doc["wall_s"] = round(time.perf_counter() - t0, 1)
    where = save(out, doc, text, png)
    print(text)
    say(where)
    return 0


if __name__ == "__main__":
    sys.exit(main())
