"""Gray-link benchmark: one fabric link works at a quarter of its rate while its ports report
full speed; does Loom, told nothing, find it, move its flows off, and carry what it would
carry without it?

    python -m mininet_scenarios.bench.graylink [--rate 4] [--seconds 30]
        [--cases agg-core,edge-agg] [--modes nonblocking,loom-healthy,ecmp,loom] [--seeds 1]
        [--out results/graylink] [--drain 2]

How it is built:

* A plain k=4 fat-tree (no DSCP class tree, the kernel's queues, as ``patterns --plain``)
  at ``--rate`` Mbit/s. A case shapes one link, both ways, to ``rate/4`` in a copy of the
  graph (its HTB at each end); its ports still report their usual speed.
  ``agg-core``: a0_0 and its first core; ``edge-agg``: e0_0 and a0_0.
* The traffic of a case is one a perfect controller carries at full rate on the healthy
  links alone: a stride permutation (host i to i + hosts per pod) from which the affected
  pod (edge switch) keeps as many senders and receivers as it has healthy uplinks, the
  orphaned hosts paired across pods again (:func:`matrix_for`; the cut is checked).
* Modes: ``nonblocking`` (the same hosts on one switch: the denominator), ``loom-healthy``
  (Loom on the unshaped fabric: the reference the target divides by), ``ecmp`` (Loom with
  TE off) and ``loom`` on the shaped fabric; Loom is told nothing (no LOOM_* variable).
  Every (case, seed, mode) is a fresh fabric and controller: a degraded link stays
  believed for 10 minutes, and a run must not start from the previous one's verdicts.
* During a run a thread polls Loom every 0.5 s: ``GET topology`` (a direction of the slow
  link ``suspect`` or ``degraded``), ``GET flows`` (a pinned path across it) and
  the CPU of ovs-vswitchd per thread (its busy thread often limits the emulation) and of
  the controller.
  Times count from the release of the iperf3 clients (the start file's mtime).

Wrap the command in ``flock /tmp/loom-emulation.lock`` where other emulations may run at
the same time (``make bench-graylink`` does). Figures: :mod:`.graylink_report`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import networkx as nx

from mininet_scenarios.bench.flowruns import (
    CPU_INTERVAL,
    FLOWS,
    cpu_window,
    flow_records,
    last_moves,
    read_flows,
)
from mininet_scenarios.bench.graylink_report import (
    DENOMINATOR,
    REFERENCE,
    WINDOW_S,
    WORST_SHARE,
    gray_times,
    marked_links,
    on_slow,
    ovs_window,
    progress_line,
    recovered_after,
    report,
    worst_flow,
)
from mininet_scenarios.bench.patterns import (
    WMEM_MIN,
    Mode,
    _save,
    _split,
    cport_base,
    modes_for,
    nonblocking_graph,
    say,
)
from mininet_scenarios.bench.patterns_report import loom_version, machine_facts
from topologies import fat_tree
from topologies.graph import host_list, link_ends

CASES = ("agg-core", "edge-agg")
MODES = (DENOMINATOR, REFERENCE, "ecmp", "loom")
SLOW_SHARE = 0.25
POLL_S = 0.5
INTERVAL_S = 0.5  # iperf3 reporting interval: the series' step
TOPOLOGY = "/loom/v1/topology"
VERDICTS = ("suspected", "degraded", "cleared", "retried")
GRAY_LOG = re.compile(r"link [0-9a-f]{16}:\d+ (held at|degraded:|cleared:|believed again)")

Matrix = list[tuple[str, str]]


# --------------------------------------------------------------------------- cases (pure)


def slow_link(graph: nx.MultiGraph, case: str) -> tuple[str, str]:
    """The two switches of the link a case slows down."""
    if case == "agg-core":
        core = next(
            e.peer for e in link_ends(graph, "a0_0") if graph.nodes[e.peer]["role"] == "core"
        )
        return "a0_0", core
    if case == "edge-agg":
        return "e0_0", "a0_0"
    raise ValueError(f"unknown case {case!r}; expected one of {', '.join(CASES)}")


def shaped(graph: nx.MultiGraph, link: tuple[str, str], share: float) -> nx.MultiGraph:
    """A copy of ``graph`` whose ``link`` (both directions) runs at ``share`` of its rate."""
    g = graph.copy()
    edges = g[link[0]][link[1]]
    if len(edges) != 1:
        raise ValueError(f"{link}: expected one link, found {len(edges)}")
    for d in edges.values():
        d["rate_mbps"] = float(d["rate_mbps"]) * share
    g.graph["name"] = f"{graph.graph['name']} with {link[0]}-{link[1]} at {share:g}x"
    return g


def link_labels(graph: nx.MultiGraph, link: tuple[str, str]) -> list[str]:
    """Both directions of ``link`` as ``a:port->b:port``, as Loom's API is read here."""
    a, b = link
    ports = next(iter(graph[a][b].values()))["ports"]
    return [f"{a}:{ports[a]}->{b}:{ports[b]}", f"{b}:{ports[b]}->{a}:{ports[a]}"]


def region(graph: nx.MultiGraph, case: str, link: tuple[str, str]) -> set[str]:
    """The switches behind the slow link: the agg's pod (agg-core) or the edge switch."""
    if case == "agg-core":
        pod = graph.nodes[link[0]]["group"]
        return {n for n, d in graph.nodes(data=True) if d["kind"] == "switch" and d["group"] == pod}
    return {n for n in link if graph.nodes[n]["role"] == "edge"}


def _host_rate(graph: nx.MultiGraph, h: str) -> float:
    return float(link_ends(graph, h)[0].rate_mbps)


def cut(
    graph: nx.MultiGraph, matrix: Sequence[tuple[str, str]], inside: set[str], slow: tuple[str, str]
) -> dict[str, float]:
    """Demand out of and into the hosts of the switches ``inside`` (each flow at its slower
    host link) and the healthy capacity across their boundary (the slow link left out)."""
    hosts = {h for h in host_list(graph) if graph.nodes[h]["switch"] in inside}

    def demand(s: str, d: str) -> float:
        return min(_host_rate(graph, s), _host_rate(graph, d))

    healthy = sum(
        float(d["rate_mbps"])
        for u, v, d in graph.edges(data=True)
        if d["scope"] != "host" and (u in inside) != (v in inside) and {u, v} != set(slow)
    )
    return {
        "out_mbps": sum(demand(s, d) for s, d in matrix if s in hosts and d not in hosts),
        "in_mbps": sum(demand(s, d) for s, d in matrix if d in hosts and s not in hosts),
        "healthy_mbps": healthy,
    }


def stride(graph: nx.MultiGraph) -> Matrix:
    """Host i sends to host i + (hosts per pod), mod the host count: every flow crosses pods."""
    hs = host_list(graph)
    pods = len({graph.nodes[h]["group"] for h in hs})
    step = len(hs) // pods
    return [(h, hs[(i + step) % len(hs)]) for i, h in enumerate(hs)]


def matrix_for(graph: nx.MultiGraph, case: str) -> Matrix:
    """The case's traffic: :func:`stride` from which the hosts behind the slow link keep
    the first senders and the last receivers their healthy uplinks carry at host rate; the
    senders and receivers the dropped flows leave alone are paired again across pods."""
    link = slow_link(graph, case)
    inside = region(graph, case, link)
    hosts = [h for h in host_list(graph) if graph.nodes[h]["switch"] in inside]
    base = stride(graph)
    healthy = cut(graph, [], inside, link)["healthy_mbps"]
    fits = int(healthy / max(_host_rate(graph, h) for h in hosts) + 1e-9)
    senders = [s for s, d in base if s in hosts and d not in hosts]
    receivers = [d for s, d in base if d in hosts and s not in hosts]
    drop_s = set(senders[fits:])
    drop_r = set(receivers[: max(0, len(receivers) - fits)])
    kept = [(s, d) for s, d in base if s not in drop_s and d not in drop_r]
    lone_s = [s for s, d in base if d in drop_r and s not in drop_s]
    lone_r = [d for s, d in base if s in drop_s and d not in drop_r]
    pod = {h: graph.nodes[h]["group"] for h in host_list(graph)}
    for s in lone_s:
        d = next((r for r in lone_r if pod[r] != pod[s]), None)
        if d is not None:
            kept.append((s, d))
            lone_r.remove(d)
    return kept


# --------------------------------------------------------------------------- polling


def _ovs_pid() -> int | None:
    from mininet_scenarios.harness.cpu import ovs_vswitchd_pid

    pid = ovs_vswitchd_pid()
    if pid is None:
        out = subprocess.run(["pgrep", "-x", "ovs-vswitchd"], capture_output=True, text=True)
        pids = out.stdout.split()
        pid = int(pids[0]) if len(pids) == 1 else None
    return pid


class Poller:
    """A thread that reads Loom's topology and flows (``watch``) and the CPU per thread of
    ovs-vswitchd and the controller (``ctl_pid``) every ``POLL_S`` while a run goes on;
    times are wall-clock (``time.time``)."""

    def __init__(
        self,
        api: Any,
        link: tuple[str, str],
        names: dict[int, str],
        watch: bool,
        ctl_pid: int | None,
    ) -> None:
        from mininet_scenarios.harness.cpu import thread_cpu_seconds

        self.api, self.link, self.names, self.watch = api, link, names, watch
        self.alias = {f"{dpid:016x}": n for dpid, n in names.items()}
        self.poll: list[dict[str, Any]] = []
        self.pids = {"ovs": _ovs_pid(), "ctl": ctl_pid}
        self.cpu: dict[str, list[tuple[float, dict[int, tuple[str, float]]]]] = {
            "ovs": [],
            "ctl": [],
        }
        self._cpu = thread_cpu_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="graylink-poll", daemon=True)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while True:
            self._tick()
            if self._stop.wait(POLL_S):
                return

    def _tick(self) -> None:
        t = time.time()
        for name, pid in self.pids.items():
            if pid is not None:
                self.cpu[name].append((t, self._cpu(pid)))
        if not self.watch:
            return
        try:
            marks = marked_links(self.api.get(TOPOLOGY), self.names)
            flows = list(self.api.get(FLOWS).get("flows", []))
        except Exception as exc:  # a poll is lost, not the run
            self.poll.append({"t": t, "error": f"{type(exc).__name__}: {exc}"[:200]})
            return
        n, elephants = on_slow(flows, *self.link, self.alias)
        self.poll.append(
            {
                "t": t,
                "marks": marks,
                "on_slow": n,
                "on_slow_elephants": elephants,
                "listed": len(flows),
            }
        )


# --------------------------------------------------------------------------- one run


def _metrics(url: str) -> dict[str, Any]:
    """Loom's gray-link verdict counters and the directions it believes suspect/degraded."""
    from mininet_scenarios.harness.metrics import sample, scrape

    s = scrape(url)
    gray = {}
    for (name, labels), value in s.items():
        lab = dict(labels)
        if name == "loom_link_capacity_bits_per_second" and lab.get("source") in (
            "suspect",
            "degraded",
        ):
            key = f"{lab['src_switch']}:{lab['src_port']}->{lab['dst_switch']}:{lab['dst_port']}"
            gray[key] = {"source": lab["source"], "bps": value}
    return {
        "verdicts": {
            v: sample(s, "loom_degraded_link_verdicts_total", verdict=v) for v in VERDICTS
        },
        "gray_capacity": gray,
    }


def measure(
    mode: Mode, graph: nx.MultiGraph, case: str, seed: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Start ``mode`` on ``graph``, run the case's flows once, return the run's record."""
    from mininet_scenarios.harness.cpu import cpu_idle_sampler
    from mininet_scenarios.harness.reachability import pingall
    from mininet_scenarios.harness.stack import LoomStack
    from mininet_scenarios.workloads.iperf import iperf3_flows

    link = slow_link(graph, case)
    net_graph = nonblocking_graph(graph) if mode.single else graph
    run_dir = args.out / "runs" / f"{case}-seed{seed}" / mode.name
    iperf_dir = run_dir / "iperf3"
    base = cport_base(case, seed)
    names = {int(d["dpid"]): n for n, d in net_graph.nodes(data=True) if d["kind"] == "switch"}
    rec: dict[str, Any] = {"mode": mode.name, "case": case, "seed": seed, "cport_base": base}
    rec["started"] = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    rec["loom"] = loom_version()  # per run: the controller may be edited between runs
    t0 = time.monotonic()
    # LoomStack as patterns.start_mode(plain=True) starts it (no class tree, the kernel's
    # queues), held directly: the poller reads the topology and the metrics too.
    with LoomStack(net_graph, run_dir, env=mode.env) as stack:
        rec["discovery_s"] = round(stack.discovery_seconds, 2)
        rec["pingall_loss_pct"] = round(pingall(stack.net, timeout=2.0).loss_pct, 2)
        time.sleep(args.drain)
        ctl_pid = stack.ctl.pid if stack.ctl is not None else None
        poller = Poller(stack.api, link, names, not mode.single, ctl_pid)
        with poller:
            first = history(stack.net, args, run_dir)
            wall0 = time.time()
            with cpu_idle_sampler(CPU_INTERVAL) as cpu:
                res = iperf3_flows(
                    stack.net,
                    args.matrices[case],
                    args.seconds,
                    cport_base=base,
                    out_dir=iperf_dir,
                    interval=INTERVAL_S,
                )
        go = (iperf_dir / "go").stat().st_mtime
        moved = last_moves(
            stack.net.graph, res.flows, base, read_flows(lambda: stack.api.get(FLOWS))
        )
        try:
            rec["metrics"] = _metrics(stack.metrics_url)
        except Exception as exc:
            rec["metrics"] = {"error": f"{type(exc).__name__}: {exc}"}
        rec["controller_alive"] = stack.ctl is not None and stack.ctl.alive()
        log = stack.controller_log()
    rec["log_tracebacks"] = log.count("Traceback")
    rec["log_gray_lines"] = [ln[-240:] for ln in log.splitlines() if GRAY_LOG.search(ln)][:20]
    idle = cpu_window(cpu.samples, wall0, iperf_dir / "go", args.seconds)
    flows = flow_records(res.flows, base, moved)
    w = worst_flow(flows)
    worst = flows[w] if w is not None else None
    poll = [{**p, "t": round(p["t"] - go, 3)} for p in poller.poll]
    length = round(args.seconds / INTERVAL_S)
    rec.update(
        slow_link=link_labels(net_graph, link)[0] if not mode.single else None,
        aggregate_mbps=round(res.aggregate, 4),
        whole_aggregate_mbps=round(res.whole_aggregate, 4),
        link_rate_mbps=args.rate,
        worst_flow=None if worst is None else f"{worst['src']}->{worst['dst']}",
        worst_whole_mbps=None if worst is None else worst["whole_mbps"],
        worst_series=None if worst is None else worst["series"],
        worst_recovered_s=None
        if worst is None
        else recovered_after(
            worst["series"], WORST_SHARE * args.rate, INTERVAL_S, WINDOW_S, length
        ),
        flow_errors=sum(1 for f in flows if f["error"]),
        cpu_idle_mean=round(sum(idle) / len(idle), 1) if idle else None,
        cpu_idle_min=round(min(idle), 1) if idle else None,
        **ovs_window(poller.cpu["ovs"], go, go + args.seconds),
        ctl_cpu_pct=ovs_window(poller.cpu["ctl"], go, go + args.seconds)["ovs_cpu_pct"],
        **(gray_times(poll, link_labels(net_graph, link), args.seconds) if not mode.single else {}),
        history_s=args.history,
        detection_from_history_s=None
        if first is None or mode.single
        else gray_times(
            [{**p, "t": round(p["t"] - first, 3)} for p in poller.poll],
            link_labels(net_graph, link),
            args.history + args.seconds,
        )["detection_s"],
        poll=poll,
        flows=flows,
    )
    rec["wall_s"] = round(time.monotonic() - t0, 1)
    if not args.keep_raw:
        shutil.rmtree(iperf_dir, ignore_errors=True)
    return rec


def history(fnet: Any, args: argparse.Namespace, run_dir: Path) -> float | None:
    """``--history`` seconds of :func:`stride` (every host sends across pods) before the
    measured flows, so the links that can carry a host's rate were seen doing so, as in a
    fabric that has run before; returns when its clients started (``None``: no history)."""
    from mininet_scenarios.workloads.iperf import iperf3_flows

    if args.history <= 0:
        return None
    out = run_dir / "history"
    iperf3_flows(fnet, stride(fnet.graph), args.history, cport_base=19000, out_dir=out)
    started = (out / "go").stat().st_mtime
    shutil.rmtree(out, ignore_errors=True)
    time.sleep(args.drain)
    return started


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m mininet_scenarios.bench.graylink",
        description=(__doc__ or "").splitlines()[0],
    )
    ap.add_argument("--rate", type=float, default=4.0, help="link rate, Mbit/s (default 4)")
    ap.add_argument("--seconds", type=float, default=30.0, help="iperf3 duration per run")
    ap.add_argument("--cases", help=f"comma-separated (default {','.join(CASES)})")
    ap.add_argument("--modes", help=f"comma-separated (default {','.join(MODES)})")
    ap.add_argument("--seeds", type=int, default=1, help="seeds 1..N (client ports; default 1)")
    ap.add_argument("--out", type=Path, default=Path("results/graylink"))
    ap.add_argument("--drain", type=float, default=2.0, help="quiet seconds before each run")
    ap.add_argument(
        "--history",
        type=float,
        default=15.0,
        help="seconds of a full cross-pod permutation before the measured flows (0: none): "
        "a fabric with a history, where the links that can carry more were seen doing so",
    )
    ap.add_argument("--keep-raw", action="store_true", help="keep iperf3 JSON files")
    args = ap.parse_args(argv)
    args.case_list = _split(args.cases) or list(CASES)
    args.mode_list = _split(args.modes) or list(MODES)
    bad = [c for c in args.case_list if c not in CASES] + [
        m for m in args.mode_list if m not in MODES
    ]
    if bad:
        ap.error(f"unknown {bad}; cases {list(CASES)}, modes {list(MODES)}")
    if args.seeds < 1 or args.seconds < 5 or args.rate <= 0:
        ap.error("--seeds must be >= 1, --seconds >= 5 and --rate > 0")
    return args


def all_modes(rate: float) -> dict[str, Mode]:
    """``nonblocking``, ``ecmp`` and ``loom`` as ``patterns --plain`` has them (Loom told
    nothing), and ``loom-healthy``: ``loom`` on the unshaped fabric."""
    plain = modes_for("fat-tree", rate, plain=True)
    loom = plain["loom"]
    healthy = Mode(REFERENCE, dict(loom.env))
    return {
        DENOMINATOR: plain[DENOMINATOR],
        REFERENCE: healthy,
        "ecmp": plain["ecmp"],
        "loom": loom,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    graph = fat_tree(4, rate_mbps=args.rate)
    modes = all_modes(args.rate)
    names = [m for m in MODES if m in args.mode_list]
    seeds = list(range(1, args.seeds + 1))
    args.matrices = {c: matrix_for(graph, c) for c in args.case_list}
    if os.geteuid() != 0:
        print("needs root (Mininet, Open vSwitch)", file=sys.stderr)
        return 2
    facts = machine_facts()
    if (facts["wmem_default"] or 0) < WMEM_MIN:
        say("WARNING net.core.wmem_default is low: ovs-vswitchd drops packets (make setup)")
    leaked = sorted(k for k in os.environ if k.startswith("LOOM_"))
    if leaked:
        say(f"WARNING LOOM_* variables in the environment reach the controller: {leaked}")
    args.out.mkdir(parents=True, exist_ok=True)
    case_info: dict[str, dict[str, Any]] = {}
    for c in args.case_list:
        link = slow_link(graph, c)
        case_info[c] = {
            "slow_link": link_labels(graph, link),
            "matrix": [list(p) for p in args.matrices[c]],
            "cut": cut(
                shaped(graph, link, SLOW_SHARE), args.matrices[c], region(graph, c, link), link
            ),
        }
    cmd = [sys.executable, "-m", "mininet_scenarios.bench.graylink"]
    doc: dict[str, Any] = {
        "benchmark": "graylink",
        "command": shlex.join([*cmd, *(sys.argv[1:] if argv is None else argv)]),
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "ended": None,
        "fabric": graph.graph["name"],
        "link_rate_mbps": args.rate,
        "slow_share": SLOW_SHARE,
        "plain": True,
        "seconds": args.seconds,
        "interval_s": INTERVAL_S,
        "poll_s": POLL_S,
        "drain_s": args.drain,
        "seeds": seeds,
        "cases": args.case_list,
        "modes": names,
        "mode_env": {n: modes[n].env for n in names},
        "environment_loom_vars": leaked,
        "case_info": case_info,
        "versions": {"loom": loom_version(), **facts},
        "runs": [],
    }
    plan = [(c, s, m) for c in args.case_list for s in seeds for m in names]
    est = len(plan) * (35 + args.seconds + args.drain) / 60
    say(
        f"{graph.graph['name']} at {args.rate:g} Mbit/s, one link at {SLOW_SHARE:g}x: cases"
        f" {args.case_list}, modes {names}, seeds {seeds}: {len(plan)} runs of"
        f" {args.seconds:g} s, each on a fresh fabric, ~{est:.0f} min"
    )
    for c in args.case_list:
        info = case_info[c]
        say(
            f"{c}: slow {info['slow_link'][0]}, {len(info['matrix'])} flows; cut out"
            f" {info['cut']['out_mbps']:g} / in {info['cut']['in_mbps']:g} of healthy"
            f" {info['cut']['healthy_mbps']:g} Mbit/s"
        )
    t0 = time.monotonic()
    spent: list[float] = []
    try:
        for done, (case, seed, name) in enumerate(plan, start=1):
            link = slow_link(graph, case)
            fabric = graph if name == REFERENCE else shaped(graph, link, SLOW_SHARE)
            say(f"{case} seed {seed} {name}: starting {fabric.graph['name']} ...")
            t1 = time.monotonic()
            try:
                rec = measure(modes[name], fabric, case, seed, args)
            except Exception as exc:  # one broken run must not lose the others
                rec = {"mode": name, "case": case, "seed": seed, "link_rate_mbps": args.rate}
                rec["error"] = f"{type(exc).__name__}: {exc}"
            doc["runs"].append(rec)
            report(doc, args.out)  # sets the ratios
            _save(doc, args.out)
            spent.append(time.monotonic() - t1)
            left = (len(plan) - done) * sum(spent) / len(spent) / 60
            say(f"{progress_line(rec)}  [{done}/{len(plan)}, ~{left:.0f} min left]")
    finally:
        doc["ended"] = dt.datetime.now().astimezone().isoformat(timespec="seconds")
        doc["wall_s"] = round(time.monotonic() - t0, 1)
        table, png = report(doc, args.out)
        _save(doc, args.out)
        print()
        print(table, flush=True)
        say(
            f"results: {args.out / 'results.json'}, {args.out / 'table.txt'}"
            + (f", figure: {png}" if png else "")
        )
        say(f"wall time {doc['wall_s'] / 60:.1f} min")
    return 1 if any(r.get("error") for r in doc["runs"]) else 0


if __name__ == "__main__":
    sys.exit(main())
