"""Cluster benchmark (``docs/benchmarks.md`` §6 Cluster): three Loom instances on a
three-member etcd share a k=4 fat-tree; the instance mastering the switches that carry a
UDP stream and a gloo all-reduce is killed, again and again.

    python -m mininet_scenarios.bench.cluster [--out results/cluster] [--kills 10]
        [--phases kills,load] [--stream-rate 1000] [--quick]

What is measured, and why this way:

* **Kills.** A 1,000 datagram/s UDP stream runs from h1 to h16 (other pods) and a real gloo
  all-reduce (``torch.distributed``) runs on h2, h6, h10, h14, registered as a job through
  the API of the instance about to die: the master of h1's edge switch, SIGKILLed one
  second into the all-reduce. Every instance is started with the same policy file (one
  tenant holding every host, unassigned hosts denied). Reported per kill: datagrams lost; the
  stream's largest gap beside its largest gap before the kill (its own jitter); the time
  from the kill until every switch has a master again (each survivor's
  ``GET /loom/v1/cluster`` polled every 20 ms: a switch counts once its role reply came);
  whether the all-reduce completed; whether the job is still registered and every
  survivor still enforces the policy it enforced before; and the rules
  removed or replaced on any switch (``dump-flows`` before the kill and after), apart
  from flows' pins, which come and go with the flows (counted apart, as are rules added).
  The killed instance is then started again, and the next kill waits until it has its
  share of the switches back.
* **Load.** The same fabric with 1, 2 and 3 instances: each instance's CPU seconds per second
  and packet-ins per second over ``--load-seconds`` with the stream running, and how many
  switches it masters. Every instance learns the whole fabric (it receives every packet-in,
  also as a slave), so what sharing saves is the writes, not the learning.

Results go to ``--out``: ``results.json``, ``table.txt`` and ``cluster.png``
(:mod:`mininet_scenarios.bench.cluster_report`). ``make bench-cluster`` runs it under the
emulation lock.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mininet_scenarios.bench.cluster_report import TARGETS, plot, summarize, table
from mininet_scenarios.harness import metrics as prom
from mininet_scenarios.harness.cluster import LoomCluster
from mininet_scenarios.workloads.cluster_kill import (
    DST,
    SRC,
    kill_once,
    one_tenant_policy,
    say,
)
from mininet_scenarios.workloads.flood import process_cpu_seconds
from mininet_scenarios.workloads.streams import Stream


def load_phase(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from topologies import fat_tree

    res: dict[str, Any] = {}
    for n in args.instances:
        run_dir = out / "runs" / f"load-{n}"
        say(f"load: {n} instance(s) ...")
        with LoomCluster(
            fat_tree(4), run_dir, instances=n, shape=False, etcd_base_port=args.etcd_port
        ) as cluster:
            cluster.net.pingall(timeout=2.0)
            with Stream(cluster.net, SRC, DST, run_dir / "streams", args.stream_rate):
                time.sleep(1.0)
                first = {i.name: _load_sample(i) for i in cluster.live()}
                time.sleep(args.load_seconds)
                last = {i.name: _load_sample(i) for i in cluster.live()}
            shares = cluster.shares()
            per = {}
            for name, (cpu0, pin0, t0) in first.items():
                cpu1, pin1, t1 = last[name]
                per[name] = {
                    "cpu_per_s": round((cpu1 - cpu0) / (t1 - t0), 3),
                    "packet_ins_per_s": round((pin1 - pin0) / (t1 - t0), 1),
                    "switches": shares.get(name, 0),
                }
            res[str(n)] = per
            say(f"load: {n} instance(s): {per}")
    return res


def _load_sample(inst: Any) -> tuple[float, float, float]:
    samples = prom.scrape(inst.metrics_url)
    packet_ins = sum(v for (name, _), v in samples.items() if name == "loom_packet_in_total")
    return process_cpu_seconds(int(inst.process.pid)), packet_ins, time.monotonic()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m mininet_scenarios.bench.cluster",
        description=(__doc__ or "").splitlines()[0],
    )
    ap.add_argument("--out", type=Path, default=Path("results/cluster"))
    ap.add_argument("--phases", default="kills,load")
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--stream-rate", type=float, default=1000.0, help="datagrams/s")
    ap.add_argument("--mib", type=float, default=8.0, help="all-reduce buffer per rank")
    ap.add_argument("--iters", type=int, default=4, help="timed all-reduce iterations")
    ap.add_argument("--lead", type=float, default=1.0, help="s of all-reduce before a kill")
    ap.add_argument("--settle", type=float, default=2.0, help="s after re-mastering")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--instances", default="1,2,3", help="load phase: cluster sizes")
    ap.add_argument("--load-seconds", type=float, default=20.0)
    ap.add_argument("--etcd-port", type=int, default=21379)
    ap.add_argument("--quick", action="store_true", help="2 kills, a 5 s load window")
    args = ap.parse_args(argv)
    if args.quick:
        args.kills, args.load_seconds = 2, 5.0
    args.phases = {p.strip() for p in args.phases.split(",") if p.strip()}
    if not args.phases <= {"kills", "load"}:
        ap.error(f"unknown phases {sorted(args.phases - {'kills', 'load'})}")
    args.instances = [int(x) for x in args.instances.split(",") if x.strip()]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from mininet_scenarios.bench.patterns_report import loom_version, machine_facts
    from topologies import fat_tree

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "benchmark": "cluster",
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join(["python -m mininet_scenarios.bench.cluster", *(argv or sys.argv[1:])]),
        "config": {k: v for k, v in vars(args).items() if k not in ("out", "phases")},
        "targets": TARGETS,
        "loom": loom_version(),
        "machine": machine_facts(),
    }
    if "kills" in args.phases:
        say(f"kills: three instances on a k=4 fat-tree, {args.kills} kills ...")
        graph, runs = fat_tree(4), out / "runs" / "kills"
        runs.mkdir(parents=True, exist_ok=True)
        policy = one_tenant_policy(graph, runs / "policy.yaml")
        env = {"LOOM_POLICY": str(policy)}
        with LoomCluster(
            graph, runs, env=env, shape=False, etcd_base_port=args.etcd_port
        ) as cluster:
            doc["shares"] = cluster.shares()
            say(f"kills: switches shared {doc['shares']}")
            doc["kills"] = [
                kill_once(cluster, args, out / "runs" / "kills", n) for n in range(args.kills)
            ]
        doc["summary"] = summarize(doc)
        _save(out, doc)
    if "load" in args.phases:
        doc["load"] = load_phase(args, out)
        _save(out, doc)
    print(table(doc))
    (out / "table.txt").write_text(table(doc) + "\n")
    say(f"wrote {out / 'results.json'}, {out / 'table.txt'}, {plot(doc, out / 'cluster.png')}")
    return 0


def _save(out: Path, doc: dict[str, Any]) -> None:
    (out / "results.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
