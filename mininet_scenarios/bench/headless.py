"""Headless-operation benchmark (``docs/benchmarks.md``, "Headless operation"): does traffic
between hosts that already know each other survive while no controller answers ARP?

    python -m mininet_scenarios.bench.headless [--out results/headless]
        [--scenarios restart,sigstop,hog,headless,quorum] [--headless-seconds 300]
        [--stop-seconds 60] [--quorum-seconds 60] [--hog-seconds 30] [--quick]

Loom answers every ARP itself. Linux re-validates a neighbour entry it keeps using with
unicast requests to the address it holds (REACHABLE -> STALE -> DELAY -> PROBE); if none is
answered the entry fails and the host stops sending to a peer it knew. UDP never confirms an
entry; TCP's ACKs confirm the sender's but not the receiver's. So whenever no controller
answers, traffic between hosts that talked before is lost unless the switches answer.

What runs, on a *plain* k=4 fat-tree (Loom started as docs/operator.md says, no ``LOOM_*`` hint;
links unshaped: the outage is measured, not a rate; Open vSwitch's own reconnect backoff):

* eight host pairs in different pods, each host in one pair, that ping each other first;
  half of them with Linux's default neighbour timers and half with shortened ones
  (:mod:`mininet_scenarios.harness.neighbours`), side by side through the same outage;
  per timers mode, two pairs carry a UDP stream of 1,000 datagrams/s and two a paced TCP
  connection (:mod:`mininet_scenarios.workloads.headless`);
* scenarios, each with fresh streams and connections: ``restart`` (SIGKILL, a new controller
  ``--restart-down`` s later on the same ports); ``sigstop`` (SIGSTOP for ``--sigstop-seconds``,
  then SIGCONT); ``hog`` (busy processes at nice -20 pinned to the one CPU the controller is
  pinned to, for ``--hog-seconds``); ``headless`` (every controller gone: SIGSTOP for
  ``--stop-seconds``, then SIGKILL, ``--headless-seconds`` in all, then a new one); and, on a
  second fabric run by three instances on a three-member etcd, ``quorum`` (two members
  killed for ``--quorum-seconds``: every instance fences itself);
* per scenario and timers mode: datagrams lost, the largest gap, the longest TCP stall (no
  byte received), every neighbour state the hosts' entries went through and how long they
  were unusable, the seconds until every pair carried traffic again, ovs-vswitchd's busiest
  thread and the machine's CPU idle. Targets: 0 datagrams lost and no TCP stall > 1 s.

Results go to ``--out``: ``results.json`` (rewritten after every scenario), ``table.txt`` and
``headless.png`` (:mod:`mininet_scenarios.bench.headless_report`). Wrap the command in
``flock /tmp/loom-emulation.lock`` where other emulations may run (``make bench-headless``
does).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mininet_scenarios.bench.headless_report import plot, table
from mininet_scenarios.harness import faults
from mininet_scenarios.harness.cpu import cpu_idle_sampler
from mininet_scenarios.harness.hog import CpuHog
from mininet_scenarios.harness.neighbours import LOST
from mininet_scenarios.workloads.flood import process_cpu_seconds
from mininet_scenarios.workloads.headless import TARGETS, Pair, Traffic, describe, set_pair_timers

SCENARIOS = ("restart", "sigstop", "hog", "headless", "quorum")
# Every pair crosses pods; every host is in one pair, so each has the timers of its pair.
PAIRS = [
    Pair("h1", "h9", "udp", "shortened"),
    Pair("h5", "h13", "udp", "shortened"),
    Pair("h2", "h10", "tcp", "shortened"),
    Pair("h6", "h14", "tcp", "shortened"),
    Pair("h3", "h11", "udp", "default"),
    Pair("h7", "h15", "udp", "default"),
    Pair("h4", "h12", "tcp", "default"),
    Pair("h8", "h16", "tcp", "default"),
]


def say(text: str) -> None:
    print(f"[headless] {text}", flush=True)


def write_json(path: Path, doc: Any) -> None:
    """Replace ``path`` at once: a reader never sees half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)


def hold(seconds: float, label: str, traffic: Traffic, every: float = 15.0) -> None:
    """Sleep ``seconds``, saying every ``every`` s how many hosts hold no usable entry."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(every, left))
        now = time.monotonic()
        lost = [
            f"{h}->{p}"
            for h, p in traffic.watch.keys
            if traffic.watch.state_at((h, p), now) in LOST
        ]
        say(
            f"    {label}: {max(0.0, end - now):5.0f} s to go; entries unusable now:"
            f" {', '.join(lost) if lost else 'none'}"
        )


# --------------------------------------------------------------------------- scenarios


def run_scenario(
    net: Any,
    name: str,
    fault: Callable[[Traffic], Any],
    args: argparse.Namespace,
    port_base: int,
) -> dict[str, Any]:
    """Fresh traffic on :data:`PAIRS`, ``fault(traffic)`` after ``--lead`` seconds; the
    results from the fault until every pair flows again plus ``--tail`` seconds."""
    out = args.out / "runs" / "streams"
    with cpu_idle_sampler() as cpu, Traffic(net, PAIRS, out, port_base=port_base) as traffic:
        flowing = traffic.wait_flowing(20.0)
        if flowing is None:
            say(f"  {name}: WARNING: not every pair flows before the fault")
        time.sleep(args.lead)
        t_fault = time.monotonic()
        say(f"  {name}: fault on")
        detail = fault(traffic)
        t_over = time.monotonic()
        say(f"  {name}: fault over after {t_over - t_fault:.1f} s; waiting for traffic ...")
        recovered = traffic.wait_flowing(args.recover)
        say(
            f"  {name}: every pair flows again after "
            + ("-" if recovered is None else f"{recovered:.1f} s")
        )
        time.sleep(args.tail)
        t_end = time.monotonic()
    res = traffic.results(t_fault, t_end)
    res["baseline"] = traffic.results(traffic.started + 0.5, t_fault)["by_timers"]
    res.update(
        scenario=name,
        fault_s=round(t_over - t_fault, 2),
        flowing_again_after_s=None if recovered is None else round(recovered, 2),
        detail=detail,
        cpu_idle_mean=None if cpu.mean is None else round(cpu.mean, 1),
    )
    for line in describe(res).splitlines():
        say(f"  {name}: {line}")
    return res


def restart_fault(stack: Any, args: argparse.Namespace) -> Callable[[Traffic], Any]:
    def fault(traffic: Traffic) -> dict[str, Any]:
        net = stack.net
        known = int(stack.api.health()["hosts"])
        r = faults.restart_controller(
            stack,
            "KILL",
            args.restart_down,
            n_switches=len(net.switch_names),
            n_hosts=known,
            n_links=_n_links(stack.graph),
            timeout=60.0,
        )
        return {**r.as_dict(), "hosts_known": known}

    return fault


def sigstop_fault(stack: Any, args: argparse.Namespace) -> Callable[[Traffic], Any]:
    def fault(traffic: Traffic) -> dict[str, Any]:
        with faults.frozen([stack.ctl]) as pids:
            hold(args.sigstop_seconds, "SIGSTOPped", traffic)
        return {"seconds": args.sigstop_seconds, "pids": pids}

    return fault


def hog_fault(stack: Any, args: argparse.Namespace) -> Callable[[Traffic], Any]:
    def fault(traffic: Traffic) -> dict[str, Any]:
        pid = stack.ctl.pid
        c0, t0 = process_cpu_seconds(pid), time.monotonic()
        with CpuHog([pid], workers=args.hog_workers, nice=args.hog_nice) as hog:
            say(
                f"    {hog.workers} busy processes at nice {hog.nice} on CPU {hog.cpu}: the"
                f" controller's share about {100 * hog.controller_share:.2f} %"
            )
            hold(args.hog_seconds, "starved", traffic)
        used = process_cpu_seconds(pid) - c0
        return {
            "seconds": args.hog_seconds,
            "cpu": hog.cpu,
            "workers": hog.workers,
            "nice": hog.nice,
            "controller_share_expected_pct": round(100 * hog.controller_share, 2),
            "controller_cpu_pct": round(100 * used / (time.monotonic() - t0), 2),
        }

    return fault


def headless_fault(stack: Any, args: argparse.Namespace) -> Callable[[Traffic], Any]:
    def fault(traffic: Traffic) -> dict[str, Any]:
        ctl = stack.ctl
        t0 = time.monotonic()
        faults.signal_controllers([ctl], signal.SIGSTOP)
        hold(args.stop_seconds, "SIGSTOPped", traffic)
        ctl.stop(signal.SIGKILL, grace=0.0)
        killed = time.monotonic() - t0
        say(f"    SIGKILLed after {killed:.0f} s")
        hold(args.headless_seconds - killed, "no controller", traffic)
        ctl.start()
        listening = time.monotonic() - t0
        back = faults.wait_health(
            stack.api, 60.0, switches=len(stack.net.switch_names), links=_n_links(stack.graph)
        )
        say(
            "    a new controller listens; every switch and link back after "
            + ("-" if back is None else f"{back:.1f} s")
        )
        return {
            "stopped_s": args.stop_seconds,
            "killed_at_s": round(killed, 2),
            "headless_s": round(listening, 2),
            "switches_back_after_start_s": None if back is None else round(back, 2),
        }

    return fault


def quorum_fault(cluster: Any, args: argparse.Namespace) -> Callable[[Traffic], Any]:
    def fault(traffic: Traffic) -> dict[str, Any]:
        cluster.etcd.kill(2)
        cluster.etcd.kill(3)
        try:
            hold(args.quorum_seconds, "no etcd quorum", traffic)
        finally:
            cluster.etcd.restart(2)
            cluster.etcd.restart(3)
        return {"seconds": args.quorum_seconds, "members_killed": [2, 3]}

    return fault


def _n_links(graph: Any) -> int:
    kinds = graph.nodes
    return 2 * sum(1 for a, b in graph.edges() if kinds[a]["kind"] == kinds[b]["kind"] == "switch")


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m mininet_scenarios.bench.headless",
        description=(__doc__ or "").splitlines()[0],
    )
    ap.add_argument("--out", type=Path, default=Path("results/headless"))
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--headless-seconds", type=float, default=300.0, help="(a) in all")
    ap.add_argument("--stop-seconds", type=float, default=60.0, help="(a) SIGSTOP before KILL")
    ap.add_argument("--restart-down", type=float, default=5.0, help="(b) s before the new one")
    ap.add_argument("--quorum-seconds", type=float, default=60.0, help="(c)")
    ap.add_argument("--hog-seconds", type=float, default=30.0, help="(d)")
    ap.add_argument("--hog-workers", type=int, default=4)
    ap.add_argument("--hog-nice", type=int, default=-20)
    ap.add_argument("--sigstop-seconds", type=float, default=10.0, help="(d)")
    ap.add_argument("--lead", type=float, default=5.0, help="traffic before each fault, s")
    ap.add_argument("--tail", type=float, default=3.0, help="after every pair flows again")
    ap.add_argument("--recover", type=float, default=150.0, help="to wait for traffic, s")
    ap.add_argument("--etcd-port", type=int, default=30379)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a check that everything runs (~8 min): headless 60 s (SIGSTOP 20 s), quorum"
        " lost 30 s; figures are not for reporting",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.headless_seconds, args.stop_seconds, args.quorum_seconds = 60.0, 20.0, 30.0
        args.recover = 60.0
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    bad = sorted(set(args.scenarios) - set(SCENARIOS))
    if bad:
        ap.error(f"unknown scenarios {bad}; use {','.join(SCENARIOS)}")
    if args.stop_seconds > args.headless_seconds:
        ap.error("--stop-seconds is part of --headless-seconds")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from mininet_scenarios.bench.patterns_report import loom_version, machine_facts
    from mininet_scenarios.harness.cluster import LoomCluster
    from mininet_scenarios.harness.stack import LoomStack
    from topologies import fat_tree

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "benchmark": "headless",
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join(
            ["python -m mininet_scenarios.bench.headless", *(argv or sys.argv[1:])]
        ),
        "config": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k != "scenarios"
        }
        | {"pairs": [vars(p) for p in PAIRS], "scenarios": args.scenarios},
        "targets": TARGETS,
        "loom": loom_version(),
        "machine": machine_facts(),
        "scenarios": {},
    }
    t_all = time.monotonic()
    single = [s for s in args.scenarios if s != "quorum"]
    port_base = 9600
    if single:
        say("starting Loom (one controller, as docs/operator.md says) on a plain k=4 fat-tree ...")
        with LoomStack(fat_tree(4), out / "runs" / "one", shape=False) as stack:
            timers = set_pair_timers(stack.net, PAIRS)
            doc["timers"] = timers
            say(f"discovered in {stack.discovery_seconds:.1f} s; timers {_timers_line(timers)}")
            makers = {
                "restart": restart_fault,
                "sigstop": sigstop_fault,
                "hog": hog_fault,
                "headless": headless_fault,
            }
            for name in single:
                port_base += 10
                say(f"{name} ...")
                _run_into(doc, name, stack.net, makers[name](stack, args), args, port_base)
                write_json(out / "results.json", doc)
    if "quorum" in args.scenarios:
        say("starting three Loom instances on a three-member etcd (about a minute) ...")
        graph = fat_tree(4)
        with LoomCluster(
            graph, out / "runs" / "cluster", shape=False, etcd_base_port=args.etcd_port
        ) as cluster:
            set_pair_timers(cluster.net, PAIRS)
            say(f"cluster up: switches shared {cluster.shares()}")
            port_base += 10
            _run_into(doc, "quorum", cluster.net, quorum_fault(cluster, args), args, port_base)
            write_json(out / "results.json", doc)
    doc["wall_s"] = round(time.monotonic() - t_all, 1)
    write_json(out / "results.json", doc)
    text = table(doc)
    print(text, flush=True)
    (out / "table.txt").write_text(text + "\n")
    png = plot(doc, out / "headless.png")
    say(f"results: {out / 'results.json'}, figure: {png}, {doc['wall_s']:.0f} s in all")
    return 0


def _run_into(
    doc: dict[str, Any],
    name: str,
    net: Any,
    fault: Callable[[Traffic], Any],
    args: argparse.Namespace,
    port_base: int,
) -> None:
    """Run one scenario into ``doc``; a failure is recorded and the others still run."""
    t0 = time.monotonic()
    try:
        doc["scenarios"][name] = run_scenario(net, name, fault, args, port_base)
    except Exception as exc:
        doc["scenarios"][name] = {"scenario": name, "error": f"{type(exc).__name__}: {exc}"}
        say(f"{name} FAILED: {type(exc).__name__}: {exc}")
    doc["scenarios"][name]["wall_s"] = round(time.monotonic() - t0, 1)


def _timers_line(timers: dict[str, dict[str, int]]) -> str:
    seen = {json.dumps(v, sort_keys=True) for v in timers.values()}
    return "; ".join(sorted(seen))


if __name__ == "__main__":
    sys.exit(main())
