"""Traffic engineering at size, with traffic: a flow-level model of Hedera's patterns over
the paths Loom's real core installs, with ``nonblocking``, hashed ``ecmp`` and ``loom``
side by side (``docs/benchmarks.md``).

    python -m mininet_scenarios.bench.te_model [--fabrics fat_tree:k=16,fat_tree:k=32]
        [--patterns stride4,stride8,randbij,random,"stag(0.5,0.3)"] [--seeds 2]
        [--seconds 10] [--modes nonblocking,ecmp,loom] [--draws 8] [--out results/te-model]
    python -m mininet_scenarios.bench.te_model --check-k4
        [--measured results/patterns-plain-whole/results.json]

Every mode runs the same matrices (``workloads.patterns``, one iperf3 test per sender,
client ports ``cport_base(pattern, seed)`` as the patterns benchmark gives them) and is
divided by ``nonblocking``:

* ``nonblocking``: max-min fair rates with only the hosts' own links as limits;
* ``ecmp``: the core as the app runs it with ``LOOM_TE=off``, brought up on the fabric
  over the scale wire (:mod:`~mininet_scenarios.bench.scale_wire`); each flow's path is
  traced through the rules the switches hold, select groups hashed by a salted hash,
  one salt per draw (``--draws``), then max-min fair rates;
* ``loom``: the core as the app runs it with no ``LOOM_*`` variable, on a wire whose
  counters move at the modelled rates (:mod:`~mininet_scenarios.bench.te_model_sim`):
  every test's first packets reach it as packet-ins at one instant, as the emulation's
  tests start together, then ``--seconds`` of simulated time in 0.1 s ticks in which it
  polls, finds elephants and moves them; paths are traced again whenever the rules of a
  switch they cross change. Per run: the aggregate at the end (``steady``), over the
  middle 80 % (``trimmed``, iperf3's figure) and from first byte to last (``whole``),
  the worst flow ÷ its link rate, when the last path changed, how many moved and the
  core time. Runs follow each other on one core, drained between them until it tracks
  no flow. ``loom-moves`` (named only): the same with ``LOOM_KEEP_PLACED=off``.

``--check-k4`` runs the model on the k=4 fat-tree with exactly the matrices and client
ports a patterns benchmark ``results.json`` recorded (``--measured``), and prints model
beside measured ratio to ``nonblocking`` per pattern and mode. Results: ``results.json``,
``table.txt`` and ``te_model.png`` (:mod:`~mininet_scenarios.bench.te_model_report`).
No emulation and no root; the large sizes take minutes of CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller import heap
from controller.conductor import Conductor, FabricConfig
from mininet_scenarios.bench.patterns import cport_base
from mininet_scenarios.bench.patterns_report import TRIMMED, WHOLE, summarize
from mininet_scenarios.bench.scale import Watch, core_config, settle
from mininet_scenarios.bench.te_model_report import check_rows, check_table, plot, table
from mininet_scenarios.bench.te_model_sim import (
    FreshTracer,
    LinkMap,
    Simulation,
    TrafficWire,
    iperf_tests,
    nonblocking_rates,
)
from mininet_scenarios.bench.whatif_model import Flow, max_min
from mininet_scenarios.bench.whatif_report import save
from mininet_scenarios.workloads.patterns import by_name as pattern_by_name
from topologies import by_name

MODES = ("nonblocking", "ecmp", "loom", "loom-moves")
DEFAULT_MODES = "nonblocking,ecmp,loom"
DEFAULT_PATTERNS = "stride4,stride8,randbij,random,stag(0.5,0.3)"
DEFAULT_FABRICS = "fat_tree:k=16,fat_tree:k=32,fat_tree:k=48"
BUDGET_S = 1800.0  # bring-up, core and wall
PROGRESS_EVERY_S = 10.0
VETH_MBPS = 10_000.0  # what the emulation's ports report (a veth), whatever shapes them


def say(text: str) -> None:
    print(f"[te-model] {text}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Scenario:
    """One (pattern, seed): its matrix and its client ports."""

    pattern: str
    seed: int
    matrix: tuple[tuple[str, str], ...]
    cport_base: int
    permutation: bool


def split_list(text: str, joins: Callable[[str], bool] = lambda _p: False) -> list[str]:
    """Comma-separated names; commas inside parentheses (``stag(0.5,0.3)``) do not split,
    nor before a part that ``joins`` the previous one (``fat_tree:k=4,rate_mbps=4``)."""
    out: list[str] = []
    depth, cur = 0, ""
    for c in text + ",":
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            part = cur.strip()
            if part and out and joins(part):
                out[-1] += "," + part
            elif part:
                out.append(part)
            cur = ""
        else:
            cur += c
    return out


def mode_config(
    mode: str, max_flows: int | None = None, max_candidates: int | None = None
) -> FabricConfig:
    """The app's configuration with no ``LOOM_*`` variable, and for ``ecmp`` with
    ``LOOM_TE=off``, for ``loom-moves`` ``LOOM_KEEP_PLACED=off``; ``max_flows`` and
    ``max_candidates`` replace how many flows the core tracks at most and how many
    equal-cost paths it considers per flow (diagnostics: no setting names them)."""
    base = core_config()
    te = base.te
    if mode == "ecmp":
        te = dataclasses.replace(te, enabled=False)
    elif mode == "loom-moves":
        te = dataclasses.replace(te, keep_placed=False)
    if max_flows is not None:
        te = dataclasses.replace(te, max_flows=max_flows)
    if max_candidates is not None:
        te = dataclasses.replace(te, max_candidates=max_candidates)
    return dataclasses.replace(base, te=te)


def bring_up(
    spec: str,
    mode: str,
    reported_mbps: float | None,
    max_flows: int | None = None,
    max_candidates: int | None = None,
) -> tuple[TrafficWire, dict[str, Any]]:
    """The core of ``mode`` on ``spec`` over the traffic wire, settled from cold."""
    graph = by_name(spec)
    heap.start()
    config = mode_config(mode, max_flows, max_candidates)
    fabric = Conductor(config, timer=time.perf_counter)
    wire = TrafficWire(graph, fabric, reported_mbps)
    watch = Watch(wire, f"{spec} {mode}", BUDGET_S)
    wire.watch = watch
    say(f"{spec} {mode}: {len(wire.tables)} switches, {len(wire.hosts)} hosts: bringing up")
    result = settle(wire, watch, cold=True)
    wire.watch = None
    if not result["settled"]:
        raise SystemExit(f"te_model: {spec} did not settle: {result['reason']}")
    facts = {
        "switches": len(wire.tables),
        "hosts": len(wire.hosts),
        "bringup_core_s": round(wire.total.core_s, 2),
        "bringup_wall_s": round(watch.wall(), 2),
    }
    say(f"  settled: core {facts['bringup_core_s']} s, wall {facts['bringup_wall_s']} s")
    return wire, facts


def scenarios_of(spec: str, patterns: Sequence[str], seeds: Sequence[int]) -> list[Scenario]:
    graph = by_name(spec)
    out = []
    for name in patterns:
        p = pattern_by_name(name)
        for seed in seeds:
            m = tuple(p.matrix(graph, seed))
            out.append(Scenario(p.name, seed, m, cport_base(p.name, seed), p.permutation))
    return out


def spread(values: Sequence[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
    }


# -- modes ---------------------------------------------------------------------------------
def run_nonblocking(links: LinkMap, sc: Scenario) -> dict[str, Any]:
    rates = nonblocking_rates(links, sc.matrix)
    link = links.capacity[links.uplink[sc.matrix[0][0]]]
    return {"aggregate_mbps": sum(rates), "worst_over_link": min(rates) / link}


def run_ecmp(
    wire: TrafficWire, links: LinkMap, sc: Scenario, draws: int, base: float
) -> dict[str, Any]:
    """Trace and solve ``draws`` times, one salt each (once if nothing was hashed)."""
    tracer = FreshTracer(wire)
    tests = iperf_tests(sc.matrix, sc.cport_base, f"{sc.pattern}/{sc.seed}")
    link = links.capacity[links.uplink[sc.matrix[0][0]]]
    ratios, worst = [], []
    t0 = time.perf_counter()
    for salt in range(draws):
        paths = [links.path(t.data, tracer.trace(t.data, salt)) for t in tests]
        rates = max_min([Flow(p) for p in paths], links.capacity).flow_rate
        ratios.append(sum(rates) / base)
        worst.append(min(rates) / link)
        if not tracer.hashed:
            break
    return {
        "draws": len(ratios),
        "ratios": ratios,
        **spread(ratios),
        "worst_over_link": statistics.median(worst),
        "wall_s": round(time.perf_counter() - t0, 2),
    }


def run_loom(
    wire: TrafficWire,
    links: LinkMap,
    sc: Scenario,
    seconds: float,
    base: float,
    label: str,
    drain: bool = True,
) -> dict[str, Any]:
    """One simulated run on the settled core, then (``drain``) drained back to no
    tracked flow for the next."""
    tests = iperf_tests(sc.matrix, sc.cport_base, f"{sc.pattern}/{sc.seed}")
    te = wire.fabric.sources.te
    reroutes0, events0 = dict(te.reroutes), dict(te.events)
    sim = Simulation(wire, links, tests)
    t0 = shown = time.perf_counter()

    def progress(n: int, ticks: int) -> None:
        nonlocal shown
        if time.perf_counter() - shown >= PROGRESS_EVERY_S:
            shown = time.perf_counter()
            say(
                f"  {label}: sim {n * 0.1:.1f}/{seconds:g} s, core"
                f" {wire.total.core_s:.1f} s, wall {shown - t0:.0f} s, solves {sim.solves}"
            )

    out = sim.run(seconds, progress)
    wall = time.perf_counter() - t0
    link = links.capacity[links.uplink[sc.matrix[0][0]]]
    ends, whole = out.pop("end_mbps"), out.pop("whole_mbps")
    trimmed = out.pop("trimmed_mbps")
    moves, last = out.pop("moves"), out.pop("last_moved_s")
    reroutes = {k: v - reroutes0.get(k, 0) for k, v in te.reroutes.items()}
    quiet = 2 * wire.fabric.discovery.polls.period(len(wire.tables))
    drained = sim.drain(quiet_s=quiet) if drain else 0.0
    return {
        "steady": sum(ends) / base,
        "trimmed": sum(trimmed) / base,
        "whole": sum(whole) / base,
        "worst_over_link": min(ends) / link,
        "worst_whole_over_link": min(whole) / link,
        "moves": sum(moves),
        "flows_moved": sum(1 for m in moves if m),
        "reroutes": {k: v for k, v in reroutes.items() if v},
        "flows_placed": te.events["flows_placed"] - events0.get("flows_placed", 0),
        "recoloured": te.events["recoloured"] - events0.get("recoloured", 0),
        **out,
        "wall_s": round(wall, 2),
        "drained_sim_s": round(drained, 1),
        "per_flow": {
            "end_mbps": ends,
            "whole_mbps": whole,
            "trimmed_mbps": trimmed,
            "last_moved_s": last,
        }
        if len(tests) <= 1024
        else None,
    }


def run_fabric(
    spec: str, scenarios: Sequence[Scenario], args: argparse.Namespace
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every scenario in every mode on ``spec``; one bring-up per core mode."""
    graph = by_name(spec)
    links = LinkMap.of(graph)
    rows: list[dict[str, Any]] = [
        {
            "fabric": spec,
            "pattern": sc.pattern,
            "seed": sc.seed,
            "permutation": sc.permutation,
            "cport_base": sc.cport_base,
            "flows": len(sc.matrix),
            "nonblocking": run_nonblocking(links, sc),
        }
        for sc in scenarios
    ]
    facts: dict[str, Any] = {"spec": spec, "name": graph.graph.get("name", spec)}
    for mode in (m for m in args.modes if m != "nonblocking"):
        t0 = time.perf_counter()
        wire, facts[mode] = bring_up(
            spec, mode, args.reported_mbps, args.max_flows, args.max_candidates
        )
        for n, (sc, row) in enumerate(zip(scenarios, rows, strict=True), start=1):
            base = row["nonblocking"]["aggregate_mbps"]
            label = f"{spec} {mode} {sc.pattern} seed {sc.seed}"
            if mode == "ecmp":
                row[mode] = run_ecmp(wire, links, sc, args.draws, base)
                e = row[mode]
                got = f"median {e['median']:.3f} [{e['min']:.3f}-{e['max']:.3f}]"
            else:
                more = n < len(scenarios)
                row[mode] = run_loom(wire, links, sc, args.seconds, base, label, drain=more)
                r = row[mode]
                got = (
                    f"steady {r['steady']:.3f} whole {r['whole']:.3f} worst"
                    f" {r['worst_over_link']:.2f} moves {r['moves']} steady at"
                    f" {r['placement_steady_s']} s, tracked"
                    f" {r['tracked_data_flows']}/{row['flows']}"
                )
            say(f"{label}: {got} ({row[mode]['wall_s']:.0f} s)")
        facts[mode]["wall_s"] = round(time.perf_counter() - t0, 1)
        del wire
        gc.collect()
    return rows, facts


# -- the k=4 check -------------------------------------------------------------------------
def check_k4(args: argparse.Namespace) -> dict[str, Any]:
    """The patterns benchmark's matrices and client ports, modelled, beside its figures."""
    measured = json.loads(args.measured.read_text())
    runs = [r for r in measured["runs"] if r.get("aggregate_mbps") is not None]
    k = int(measured["fabric"]["params"]["k"])
    rate = float(measured["link_rate_mbps"])
    spec = f"fat_tree:k={k},rate_mbps={rate:g}"
    if args.reported_mbps is None and measured.get("plain"):
        args.reported_mbps = VETH_MBPS
    patterns = list(dict.fromkeys(r["pattern"] for r in runs))
    kinds = {p.name: p.permutation for p in map(pattern_by_name, patterns)}
    scenarios = []
    for (name, seed), r in {(r["pattern"], r["seed"]): r for r in runs}.items():
        m = tuple((a, b) for a, b in r["matrix"])
        scenarios.append(Scenario(name, seed, m, int(r["cport_base"]), kinds[name]))
    modes = [m for m in measured["modes"] if m in MODES and m != "nonblocking"]
    args.modes = ["nonblocking", *modes]
    rows, facts = run_fabric(spec, scenarios, args)
    by_figure = {
        figure: summarize(runs, patterns, measured["modes"], figure=figure)
        for figure in (TRIMMED, WHOLE)
    }
    return {
        "kind": "check_k4",
        "fabric": facts,
        "measured_from": str(args.measured),
        "measured_command": measured.get("command"),
        "reported_mbps": args.reported_mbps,
        "runs": rows,
        "check": check_rows(rows, by_figure, patterns, modes),
    }


# -- the command ---------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m mininet_scenarios.bench.te_model",
        description="Hedera's patterns at size: nonblocking, hashed ECMP and Loom's real core"
        " side by side, flow-level (max-min fair) over the paths the core installs.",
    )
    ap.add_argument("--fabrics", default=DEFAULT_FABRICS, help="comma-separated fabric specs")
    ap.add_argument("--patterns", default=DEFAULT_PATTERNS, help="comma-separated")
    ap.add_argument("--seeds", type=int, default=2, help="seeds 1..N per pattern (default 2)")
    ap.add_argument("--seconds", type=float, default=10.0, help="simulated seconds per run")
    ap.add_argument("--modes", default=DEFAULT_MODES, help=f"a subset of {','.join(MODES)}")
    ap.add_argument("--draws", type=int, default=8, help="ecmp hash draws per run (default 8)")
    ap.add_argument("--reported-mbps", type=float, help="the speed ports report (default: rate)")
    ap.add_argument("--max-flows", type=int, help="diagnostic: flows the core tracks at most")
    ap.add_argument("--max-candidates", type=int, help="diagnostic: equal-cost paths per flow")
    ap.add_argument("--out", type=Path, default=Path("results/te-model"))
    ap.add_argument("--check-k4", action="store_true", help="model a patterns results.json")
    ap.add_argument(
        "--measured",
        type=Path,
        default=Path("results/patterns-plain-whole/results.json"),
        help="--check-k4: the patterns benchmark's results.json",
    )
    args = ap.parse_args(argv)
    args.modes = ["nonblocking"] + [m for m in split_list(args.modes) if m != "nonblocking"]
    if set(args.modes) - set(MODES):
        ap.error(f"--modes: a comma-separated subset of {','.join(MODES)}")
    args.fabric_list = split_list(args.fabrics, joins=lambda part: ":" not in part)
    args.pattern_list = split_list(args.patterns)
    if args.seeds < 1 or args.draws < 1 or args.seconds < 1:
        ap.error("--seeds and --draws must be at least 1, --seconds at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    command = " ".join(["te_model", *(sys.argv[1:] if argv is None else argv)])
    try:
        if args.check_k4:
            doc = {"command": command, **check_k4(args)}
            text = check_table(doc)
        else:
            seeds = list(range(1, args.seeds + 1))
            doc = {
                "command": command,
                "kind": "model",
                "seconds": args.seconds,
                "draws": args.draws,
                "modes": args.modes,
                "patterns": args.pattern_list,
                "seeds": seeds,
                "reported_mbps": args.reported_mbps,
                "max_flows": args.max_flows,
                "max_candidates": args.max_candidates,
                "fabrics": [],
                "runs": [],
            }
            for spec in args.fabric_list:
                t1 = time.perf_counter()
                scenarios = scenarios_of(spec, args.pattern_list, seeds)
                rows, facts = run_fabric(spec, scenarios, args)
                facts["wall_s"] = round(time.perf_counter() - t1, 1)
                doc["fabrics"].append(facts)
                doc["runs"].extend(rows)
                (out / "results.json").write_text(json.dumps(doc, indent=1))
            text = table(doc)
    except ValueError as exc:
        print(f"te_model: {exc}", file=sys.stderr)
        return 2
    doc["wall_s"] = round(time.perf_counter() - t0, 1)
    where = save(out, doc, text, plot(doc, out / "te_model.png"))
    print(text)
    say(where)
    return 0


if __name__ == "__main__":
    sys.exit(main())
