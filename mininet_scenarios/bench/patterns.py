"""Traffic-pattern benchmark (``docs/benchmarks.md`` §1 fat-tree, §3 dragonfly): one long TCP flow
per sender on the same matrices in every mode, reported as aggregate ÷ ``nonblocking``.

    python -m mininet_scenarios.bench.patterns [--fabric fat-tree|dragonfly] [--modes ...]
        [--patterns ...] [--seeds 2] [--seconds 25] [--rate 5] [--k 4] [--out results/patterns]

Why it is built this way:

* Each mode's network starts **once** and runs every (pattern, seed): starting a 20-switch
  fabric and waiting for discovery costs ~30 s, more than a run. The controller is told
  nothing between runs; ``--drain`` seconds of quiet let TCP and the HTB queues empty.
* The matrix of a (pattern, seed) is computed once, on the real fabric's graph, and reused
  in every mode, including ``nonblocking`` (the same hosts, MACs and IPs on one switch), so
  each ratio divides two runs of the same flows. Client ports come from the pattern and seed
  (``cport_base``): hashing differs across seeds but is identical across modes (fresh
  namespaces otherwise reuse the same source ports and every seed hashes alike).
* ``nonblocking`` runs first, so an interrupted run still has its denominator, and
  ``results.json`` is rewritten after every run.
* Every port has the same DSCP class tree in every mode (collective, control, bulk, as in
  the collectives benchmark): the same emulated hardware for all. Only Loom marks anything
  (an elephant's ACK stream into the control class, ``LOOM_ACK_PRIORITY``); the others
  leave all traffic in the default class.
* CPU idle is sampled in every run: all switching happens in one ``ovs-vswitchd``, and a
  saturated CPU (< 35 % idle) would measure the machine, not the routing.

Wrap the command in ``flock /tmp/loom-emulation.lock`` where other emulations may run at the
same time (``make bench-patterns`` does).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from mininet_scenarios.bench.flowruns import (
    CPU_INTERVAL,
    FLOWS,
    cpu_window,
    flow_records,
    last_moves,
    read_flows,
    steady_after,
)
from mininet_scenarios.bench.patterns_report import (
    DENOMINATOR,
    FAT_TREE_ANCHORS,
    FAUCET_VENV,
    dragonfly_anchors,
    faucet_version,
    loom_version,
    machine_facts,
    report,
    run_ratios,
    summarize,
    summary_json,
)
from mininet_scenarios.harness.shaping import DEFAULT_CLASSES
from mininet_scenarios.workloads.patterns import (
    DRAGONFLY_PATTERNS,
    FAT_TREE_PATTERNS,
    Matrix,
    by_name,
)
from topologies import dragonfly, fat_tree
from topologies.graph import add_host, add_switch, host_list, link_ends, new_graph

WMEM_MIN = 16777216  # docs/environment.md: below this, congestion drops packets
CPU_IDLE_MIN = 35.0  # docs/benchmarks.md §1: below, the CPU is measured


@dataclass(frozen=True)
class Mode:
    """How to run the fabric: Loom with ``env``, or Faucet (``faucet=True``); ``single``:
    on the one-switch ``nonblocking`` graph instead of the real fabric."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    faucet: bool = False
    single: bool = False


def modes_for(fabric: str, rate: float, plain: bool = False) -> dict[str, Mode]:
    """The modes of a fabric; ``plain``: Loom as docs/operator.md starts it, told nothing (no
    link rate, no polling interval: what it knows of the links it learns)."""
    told = {"LOOM_TE": "on", "LOOM_LINK_CAPACITY_MBPS": f"{rate:g}", "LOOM_POLL_INTERVAL": "0.5"}
    te: dict[str, str] = {} if plain else told
    off = {"LOOM_TE": "off"}
    if fabric == "dragonfly":
        return {
            "nonblocking": Mode("nonblocking", off, single=True),
            # TE off is static minimal ECMP; the policy is named too so no default can leak in.
            "minimal": Mode("minimal", {**off, "LOOM_PATH_POLICY": "minimal"}),
            "valiant": Mode("valiant", {**te, "LOOM_PATH_POLICY": "valiant"}),
            "loom": Mode("loom", {**te, "LOOM_PATH_POLICY": "adaptive"}),
        }
    return {
        "nonblocking": Mode("nonblocking", off, single=True),
        "ecmp": Mode("ecmp", off),
        "loom": Mode("loom", te),
        "faucet": Mode("faucet", faucet=True),
        # not run unless named: every new elephant placed afresh (what LOOM_KEEP_PLACED=on
        # is measured against)
        "loom-moves": Mode("loom-moves", {**te, "LOOM_KEEP_PLACED": "off"}),
    }


def nonblocking_graph(graph: nx.MultiGraph) -> nx.MultiGraph:
    """Every host of ``graph`` (same name, MAC, IP, group, host-link rate) on one switch:
    the fabric with infinite bisection, whose throughput on a matrix is the denominator."""
    hs = host_list(graph)
    g = new_graph(f"nonblocking({len(hs)})", "custom", hosts=len(hs))
    add_switch(g, "nb1", 1, "nonblocking")
    for port, h in enumerate(hs, start=1):
        d = graph.nodes[h]
        rate = link_ends(graph, h)[0].rate_mbps
        add_host(g, h, "nb1", d["ip"], rate, group=d["group"], switch_port=port, mac=d["mac"])
    return g


def cport_base(pattern: str, seed: int) -> int:
    """Client ports of a (pattern, seed): stable across modes and processes (crc32, not the
    salted ``hash()``), different across seeds, 64 ports per run between 20000 and 58400."""
    return 20000 + (zlib.crc32(f"{pattern}/{seed}".encode()) % 600) * 64


def faucet_unavailable() -> str | None:
    """Why the ``faucet`` mode cannot run here, or None if it can."""
    try:
        importlib.import_module("mininet_scenarios.harness.faucet")
    except ImportError as exc:
        return f"mininet_scenarios.harness.faucet does not import ({exc})"
    py = FAUCET_VENV / "bin" / "python"
    check = [str(py), "-c", "import faucet"]
    if not py.exists() or subprocess.run(check, capture_output=True, timeout=60).returncode:
        return f"{FAUCET_VENV} has no working faucet (make faucet-venv)"
    return None


# --------------------------------------------------------------------------- modes


@contextlib.contextmanager
def start_mode(
    mode: Mode,
    graph: nx.MultiGraph,
    run_dir: Path,
    queue_packets: int | None = None,
    plain: bool = False,
) -> Iterator[tuple[Any, dict[str, Any], Callable[[], bool], Callable[[], Any]]]:
    """The running fabric of ``mode``, facts about its start (discovery time, version), a
    liveness check of its controller (the rules a dead controller installed keep forwarding,
    so a crash would otherwise go unnoticed in the numbers) and a reader of Loom's tracked
    flows (``GET flows``; ``None`` for other controllers). ``plain``: no DSCP class tree
    on any port (the shaper alone, as a user's fabric)."""
    classes = None if plain else DEFAULT_CLASSES
    from mininet_scenarios.harness.network import FabricNet
    from mininet_scenarios.harness.stack import LoomStack

    t0 = time.monotonic()
    if mode.faucet:
        fm = importlib.import_module("mininet_scenarios.harness.faucet")
        with (
            fm.FaucetProcess(graph, run_dir) as faucet,
            FabricNet(
                graph,
                controller=faucet.address,
                run_dir=run_dir,
                queue_classes=classes,
                queue_packets=queue_packets,
            ) as fnet,
        ):
            ready = fm.faucet_ready(fnet, 120.0, faucet=faucet)
            info = {
                "controller": "faucet",
                "version": faucet_version(),
                "ready_s": round(ready.seconds, 1),
                "stack_up_s": None
                if ready.stack_seconds is None
                else round(ready.stack_seconds, 1),
                "ready_pingalls": ready.attempts,
            }
            info["startup_s"] = round(time.monotonic() - t0, 1)
            yield fnet, info, lambda: _faucet_alive(faucet), lambda: None
        return
    with LoomStack(
        graph, run_dir, env=mode.env, queue_classes=classes, queue_packets=queue_packets
    ) as stack:
        info = {
            "controller": "loom",
            "env": mode.env,
            "discovery_s": round(stack.discovery_seconds, 2),
            "startup_s": round(time.monotonic() - t0, 1),
        }
        with contextlib.suppress(Exception):
            info["health"] = stack.api.health()
        ctl, api = stack.ctl, stack.api
        info["controller_pid"] = ctl.pid if ctl is not None else None
        yield stack.net, info, lambda: ctl is not None and ctl.alive(), lambda: api.get(FLOWS)


def _faucet_alive(faucet: Any) -> bool:
    try:
        faucet.check_alive()  # raises FaucetError once the process has exited
    except Exception:
        return False
    return True


def say(text: str) -> None:
    print(f"[bench] {text}", flush=True)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)


def _save(doc: dict[str, Any], out: Path) -> None:
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(out / "results.json")


def measure_mode(
    mode: Mode,
    graph: nx.MultiGraph,
    matrices: dict[tuple[str, int], Matrix],
    args: argparse.Namespace,
    doc: dict[str, Any],
    progress: dict[str, Any],
) -> None:
    """Start ``mode`` once, run every matrix on it, append each run to ``doc`` as it ends."""
    from mininet_scenarios.harness.cpu import cpu_idle_sampler, cpu_mark, cpu_used
    from mininet_scenarios.harness.reachability import pingall
    from mininet_scenarios.workloads.iperf import iperf3_flows

    out: Path = args.out
    info: dict[str, Any] = doc["mode_info"].setdefault(mode.name, {})
    net_graph = nonblocking_graph(graph) if mode.single else graph
    run_dir = out / "runs" / mode.name
    say(f"{mode.name}: starting {net_graph.graph['name']} ...")
    queue = args.queue_packets or None
    with start_mode(mode, net_graph, run_dir, queue, args.plain) as (fnet, started, alive, flows):
        info.update(started)
        say(f"{mode.name}: up in {started['startup_s']:.1f} s; warm-up pingall ...")
        ping = pingall(fnet, timeout=2.0)
        info["pingall_loss_pct"] = round(ping.loss_pct, 2)
        if ping.loss_pct:
            say(f"{mode.name}: WARNING pingall lost {ping.loss_pct:.1f} % ({ping.failed[:4]} ...)")
        for (pattern, seed), matrix in matrices.items():
            time.sleep(args.drain)
            started_at = dt.datetime.now().astimezone().isoformat(timespec="seconds")
            t0 = time.monotonic()
            iperf_dir = run_dir / f"{_slug(pattern)}-seed{seed}"
            base = cport_base(pattern, seed)
            record: dict[str, Any] = {
                "mode": mode.name,
                "pattern": pattern,
                "seed": seed,
                "cport_base": base,
                "matrix": [list(p) for p in matrix],
                "started": started_at,
            }
            try:
                wall0 = time.time()
                before = cpu_mark(info.get("controller_pid"))
                with cpu_idle_sampler(CPU_INTERVAL) as cpu:
                    res = iperf3_flows(
                        fnet, matrix, args.seconds, cport_base=base, out_dir=iperf_dir
                    )
                record.update(cpu_used(before, cpu_mark(info.get("controller_pid"))))
                idle = cpu_window(cpu.samples, wall0, iperf_dir / "go", args.seconds)
                moved = last_moves(fnet.graph, res.flows, base, read_flows(flows))
            except Exception as exc:  # one broken run must not lose the others
                record.update(aggregate_mbps=None, error=f"{type(exc).__name__}: {exc}")
                say(f"{mode.name} {pattern} seed {seed}: FAILED {record['error']}")
            else:
                record.update(
                    aggregate_mbps=round(res.aggregate, 4),
                    whole_aggregate_mbps=round(res.whole_aggregate, 4),
                    placement_steady_s=steady_after(moved),
                    flows=flow_records(res.flows, base, moved),
                    flow_errors=sum(1 for f in res.flows if f.error),
                    cpu_idle_mean=round(sum(idle) / len(idle), 1) if idle else None,
                    cpu_idle_min=round(min(idle), 1) if idle else None,
                    cpu_idle_call_mean=round(cpu.mean, 1) if cpu.mean is not None else None,
                )
            record["wall_s"] = round(time.monotonic() - t0, 1)
            record["controller_alive"] = alive()
            doc["runs"].append(record)
            if not args.keep_raw:
                shutil.rmtree(iperf_dir, ignore_errors=True)
            _save(doc, out)
            progress["done"] += 1
            progress["run_s"].append(time.monotonic() - t0 + args.drain)
            _progress_line(record, doc, progress)
    logs = [p for p in run_dir.glob("*.txt") if p.is_file()]
    info["log_tracebacks"] = sum(p.read_text(errors="replace").count("Traceback") for p in logs)
    if info["log_tracebacks"]:
        say(f"{mode.name}: WARNING {info['log_tracebacks']} tracebacks in {run_dir}/*.txt")


def _progress_line(record: dict[str, Any], doc: dict[str, Any], progress: dict[str, Any]) -> None:
    if record.get("aggregate_mbps") is None:
        return
    ratio = next(
        (
            x["ratio"]
            for x in run_ratios(doc["runs"])
            if (x["mode"], x["pattern"], x["seed"])
            == (record["mode"], record["pattern"], record["seed"])
        ),
        None,
    )
    per_run = sum(progress["run_s"]) / len(progress["run_s"])
    left = (progress["total"] - progress["done"]) * per_run / 60
    idle = record["cpu_idle_mean"]
    notes = []
    if not record["controller_alive"]:
        notes.append("controller DEAD")
    if record["flow_errors"]:
        notes.append(f"{record['flow_errors']} flows failed")
    if idle is not None and idle < CPU_IDLE_MIN:
        notes.append(f"CPU idle below {CPU_IDLE_MIN:g} %: CPU-bound")
    say(
        f"{record['mode']:<11} {record['pattern']:<14} seed {record['seed']}:"
        f" aggregate {record['aggregate_mbps']:6.2f} Mbit/s"
        f"  ratio {'  -  ' if ratio is None else f'{ratio:.3f}'}"
        f"  cpu idle {idle if idle is not None else '-'} % (min {record['cpu_idle_min']})"
        f"  [{progress['done']}/{progress['total']}, ~{left:.0f} min left]"
        + (f"  WARNING {'; '.join(notes)}" if notes else "")
    )


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m mininet_scenarios.bench.patterns",
        description=(__doc__ or "").splitlines()[0],
    )
    ap.add_argument("--fabric", choices=["fat-tree", "dragonfly"], default="fat-tree")
    ap.add_argument("--modes", help="comma-separated (default: every mode of the fabric)")
    ap.add_argument("--patterns", help="comma-separated, e.g. stride4,stag(0.2,0.3),randbij")
    ap.add_argument("--seeds", type=int, default=2, help="seeds 1..N per pattern (default 2)")
    ap.add_argument("--seconds", type=float, default=25.0, help="iperf3 duration per run")
    ap.add_argument("--rate", type=float, default=5.0, help="link rate, Mbit/s (default 5)")
    ap.add_argument("--k", type=int, default=4, help="fat-tree arity (default 4)")
    ap.add_argument(
        "--dragonfly", default="a=4,p=1,h=1,g=5", help="dragonfly a,p,h,g as key=value pairs"
    )
    ap.add_argument("--drain", type=float, default=2.0, help="quiet seconds before each run")
    ap.add_argument(
        "--queue-packets",
        type=int,
        help="queue limit of every shaped port, packets (default 100, or with --plain 0: the "
        "kernel's 1000, whose seconds of queueing at a few Mbit/s starve ACKs of hosts that "
        "send and receive)",
    )
    ap.add_argument(
        "--plain",
        action="store_true",
        help="a user's fabric: no DSCP class tree on any port, the kernel's queues, and Loom "
        "told nothing (no LOOM_* variable; the ports report 10 Gbit/s)",
    )
    ap.add_argument("--out", type=Path, help="default results/patterns or results/dragonfly")
    ap.add_argument("--keep-raw", action="store_true", help="keep iperf3 JSON files")
    args = ap.parse_args(argv)
    df = args.fabric == "dragonfly"
    kind = "-plain" if args.plain else ""
    args.out = args.out or Path(("results/dragonfly" if df else "results/patterns") + kind)
    if args.queue_packets is None:
        args.queue_packets = 0 if args.plain else 100
    named_only = {"loom-moves"}
    args.mode_list = _split(args.modes) or [
        m for m in modes_for(args.fabric, args.rate) if m not in named_only
    ]
    args.pattern_list = _split(args.patterns) or list(
        DRAGONFLY_PATTERNS if df else FAT_TREE_PATTERNS
    )
    if args.seeds < 1 or args.seconds < 2:
        # under 5 s the middle 80 % of the 1 s intervals is all of them: trimmed = whole
        ap.error("--seeds must be >= 1 and --seconds >= 2 (a flow's rate needs intervals)")
    return args


def _split(text: str | None) -> list[str]:
    """Comma-separated names; commas inside parentheses (``stag(0.2,0.3)``) do not split."""
    out, depth, cur = [], 0, ""
    for c in text or "":
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        out.append(cur.strip())
    return [x for x in out if x]


def build_fabric(args: argparse.Namespace) -> nx.MultiGraph:
    if args.fabric == "dragonfly":
        params = {}
        for item in _split(args.dragonfly):
            key, _, value = item.partition("=")
            if key.strip() not in ("a", "p", "h", "g") or not value.strip().isdigit():
                raise ValueError(f"--dragonfly: expected a=,p=,h=,g= integers, got {item!r}")
            params[key.strip()] = int(value)
        return dragonfly(
            a=params.get("a", 4),
            p=params.get("p", 1),
            h=params.get("h", 1),
            g=params.get("g", 5),
            rate_mbps=args.rate,
        )
    return fat_tree(args.k, rate_mbps=args.rate)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    all_modes = modes_for(args.fabric, args.rate, args.plain)
    unknown = [m for m in args.mode_list if m not in all_modes]
    if unknown:
        print(f"unknown modes {unknown}; {args.fabric} has {list(all_modes)}", file=sys.stderr)
        return 2
    if DENOMINATOR not in args.mode_list:
        say(f"adding mode {DENOMINATOR}: every ratio divides by it")
    names = [DENOMINATOR] + [m for m in args.mode_list if m != DENOMINATOR]
    seeds = list(range(1, args.seeds + 1))
    try:  # PatternError and TopologyError are ValueErrors that name the bad input
        patterns = [by_name(p) for p in args.pattern_list]
        graph = build_fabric(args)
        matrices = {(p.name, s): p.matrix(graph, s) for p in patterns for s in seeds}
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("needs root (Mininet, Open vSwitch)", file=sys.stderr)
        return 2
    skipped = {}
    if "faucet" in names and (why := faucet_unavailable()):
        say(f"WARNING skipping mode faucet: {why}")
        names.remove("faucet")
        skipped["faucet"] = why
    facts = machine_facts()
    if (facts["wmem_default"] or 0) < WMEM_MIN:
        say("WARNING net.core.wmem_default is low: ovs-vswitchd drops packets (make setup)")
    args.out.mkdir(parents=True, exist_ok=True)
    anchors = dragonfly_anchors(graph) if args.fabric == "dragonfly" else FAT_TREE_ANCHORS
    doc: dict[str, Any] = {
        "benchmark": "dragonfly" if args.fabric == "dragonfly" else "patterns",
        "command": shlex.join(
            [
                sys.executable,
                "-m",
                "mininet_scenarios.bench.patterns",
                *(sys.argv[1:] if argv is None else argv),
            ]
        ),
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "ended": None,
        "fabric": {
            "name": graph.graph["name"],
            "kind": graph.graph["kind"],
            "params": graph.graph["params"],
            "hosts": len(host_list(graph)),
        },
        "link_rate_mbps": args.rate,
        "queue_packets": args.queue_packets or 1000,
        "plain": args.plain,
        "queue_classes": [] if args.plain else [c.name for c in DEFAULT_CLASSES],
        "seconds": args.seconds,
        "drain_s": args.drain,
        "seeds": seeds,
        "patterns": [p.name for p in patterns],
        "modes": names,
        "denominator": DENOMINATOR,
        "anchors": {p: a for p, a in anchors.items() if p in {q.name for q in patterns}},
        "versions": {
            "loom": loom_version(),
            "faucet": faucet_version() if "faucet" in names else None,
            **facts,
        },
        "mode_info": {n: {"env": all_modes[n].env} for n in names},
        "skipped_modes": skipped,
        "runs": [],
    }
    total = len(names) * len(matrices)
    # Measured: ~10 s per Loom start + pingall (Faucet ~30 s), ~1.5 s per run beyond flows.
    est = len(names) * (20 + len(matrices) * (args.seconds + args.drain + 1.5)) / 60
    say(
        f"{graph.graph['name']} at {args.rate:g} Mbit/s: modes {names}, {len(patterns)}"
        f" patterns x {len(seeds)} seeds = {total} runs of {args.seconds:g} s, ~{est:.0f} min"
    )
    progress: dict[str, Any] = {"done": 0, "total": total, "run_s": []}
    t0 = time.monotonic()
    failed = False
    try:
        for name in names:
            try:
                measure_mode(all_modes[name], graph, matrices, args, doc, progress)
            except Exception as exc:  # report it, go on with the other modes
                failed = True
                doc["mode_info"][name]["error"] = f"{type(exc).__name__}: {exc}"
                say(f"{name}: FAILED {type(exc).__name__}: {exc}")
                progress["total"] -= len(matrices) - sum(
                    1 for r in doc["runs"] if r["mode"] == name
                )
            time.sleep(args.drain)
    finally:
        doc["ended"] = dt.datetime.now().astimezone().isoformat(timespec="seconds")
        doc["wall_s"] = round(time.monotonic() - t0, 1)
        doc["ratios"] = run_ratios(doc["runs"])
        table, png = report(doc, args.out)
        doc["summary"] = summary_json(summarize(doc["runs"], doc["patterns"], names))
        _save(doc, args.out)
        print()
        say("ratio to nonblocking, median over seeds [min-max]:")
        print(table, flush=True)
        say(f"results: {args.out / 'results.json'}" + (f", figure: {png}" if png else ""))
        say(f"wall time {doc['wall_s'] / 60:.1f} min")
    failed = failed or any(r.get("aggregate_mbps") is None for r in doc["runs"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
