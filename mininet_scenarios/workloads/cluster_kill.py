"""An instance of a Loom cluster killed under traffic, measured: the step the cluster
benchmark repeats (``mininet_scenarios.bench.cluster``) and the cluster demo shows once.

A 1,000 datagram/s UDP stream from h1 to h16 and a gloo all-reduce on h2, h6, h10, h14
(registered through the API of the instance about to die) run while the master of h1's
edge switch is SIGKILLed; :func:`kill_once` reports the time until every switch has a
master again, the stream's loss and gaps, the all-reduce, the job and the rules that
changed, then starts the instance again (:func:`rejoin`).
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path
from typing import Any

from mininet_scenarios.harness.client import LoomApiError
from mininet_scenarios.harness.cluster import LoomCluster
from mininet_scenarios.harness.rules import compare_rules, rule_snapshot
from mininet_scenarios.workloads.collectives.runner import job_request, run_collective
from mininet_scenarios.workloads.streams import Stream, gap_in

SRC, DST = "h1", "h16"
RING = ["h2", "h6", "h10", "h14"]  # one host per pod, none of the stream's
JOB = "cluster-ring"


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


TENANT = "bench"


def one_tenant_policy(graph: Any, path: Path) -> Path:
    """A policy with every host of ``graph`` in one tenant (unassigned hosts denied): the
    policy whose survival a kill checks."""
    hosts = sorted(
        (str(d["ip"]) for _, d in graph.nodes(data=True) if d["kind"] == "host"),
        key=lambda ip: tuple(int(x) for x in ip.split(".")),
    )
    lines = ["version: 1", "fabric: {unassigned_hosts: deny}", "tenants:"]
    lines += [f"  - name: {TENANT}", "    hosts:"]
    lines += [f"      - {{ip: {ip}}}" for ip in hosts]
    path.write_text("\n".join(lines) + "\n")
    return path


def _policy(inst: Any) -> tuple[bool, tuple[str, ...]]:
    doc = inst.api.get("/loom/v1/policy")
    return bool(doc.get("in_force")), tuple(sorted(t["name"] for t in doc.get("tenants", [])))


def _edge_of(cluster: LoomCluster, host: str) -> str:
    graph = cluster.graph
    switch = next(iter(graph.neighbors(host)))
    return f"{int(graph.nodes[switch]['dpid']):016x}"


def kill_once(
    cluster: LoomCluster, args: argparse.Namespace, run_dir: Path, n: int, prefix: str = ""
) -> dict[str, Any]:
    """One kill of the instance mastering the stream's first switch; see the module doc."""
    net = cluster.net
    src, dst, ring = prefix + SRC, prefix + DST, [prefix + h for h in RING]
    masters = cluster.masters()
    victim = masters[_edge_of(cluster, src)]
    ips = [net.graph.nodes[h]["ip"] for h in ring]
    policy_before = _policy(cluster.instance(victim))
    cluster.instance(victim).api.request(
        "POST", "/loom/v1/jobs", job_request(JOB, TENANT, ips, "all_reduce")
    )
    done: dict[str, Any] = {}

    def collective() -> None:
        try:
            res = run_collective(
                net,
                ring,
                "all_reduce",
                args.mib,
                args.iters,
                warmup=1,
                port=29500 + n,
                out_dir=run_dir / f"collective-{n}",
                timeout=args.timeout,
            )
            done["busbw_mbps"] = round(res.busbw, 1)
        except Exception as exc:  # reported, not raised: the other figures still count
            done["error"] = f"{type(exc).__name__}: {exc}"[:300]

    stream = Stream(net, src, dst, run_dir / "streams", args.stream_rate, 9300 + n, 41000 + n)
    with stream:
        worker = threading.Thread(target=collective, daemon=True)
        worker.start()
        time.sleep(args.lead)
        before = rule_snapshot(net.switch_names)
        t_kill = cluster.kill(victim)
        remaster = cluster.wait_mastered(args.timeout, without=victim)
        time.sleep(args.settle)
        t_end = time.monotonic()
        worker.join(args.timeout)
    trace = stream.trace
    assert trace is not None
    after = rule_snapshot(net.switch_names)
    diff = compare_rules(before, after).summary()
    gap, base = gap_in(trace, t_kill, t_end), gap_in(trace, stream.started + 0.5, t_kill - 0.05)
    survivor = next(i for i in cluster.live())
    policies = {_policy(i) for i in cluster.live()}
    try:
        job = survivor.api.get(f"/loom/v1/jobs/{JOB}")
        job_ok = job.get("name") == JOB
        survivor.api.request("DELETE", f"/loom/v1/jobs/{JOB}")
    except LoomApiError:
        job_ok = False
    result = {
        "victim": victim,
        "victim_switches": sum(1 for m in masters.values() if m == victim),
        "remaster_s": round(remaster, 3),
        "stream": {"sent": trace.sent_count, "received": len(trace.seq), "lost": trace.lost},
        "gap": gap.as_dict(),
        "baseline": base.as_dict(),
        "collective": {"completed": "busbw_mbps" in done, **done},
        "job_intact": job_ok,
        "policy_intact": policies == {policy_before},
        "rules": {
            "rewritten": _changed(diff, pins=False),
            "pins_removed": _changed(diff, pins=True),
            "added": diff["added"],
            "of": diff["flows_before"],
            "by_kind": diff["by_kind"],
            "examples": diff["examples"],
        },
    }
    say(
        f"  kill {n}: {victim} -> every switch mastered again in {remaster * 1e3:.0f} ms;"
        f" stream lost {trace.lost}, gap {gap.gap_ms:.1f} ms (before: {base.gap_ms:.1f});"
        f" all-reduce {'completed' if 'busbw_mbps' in done else done.get('error')};"
        f" job {'intact' if job_ok else 'LOST'},"
        f" policy {'intact' if result['policy_intact'] else 'CHANGED'};"
        f" rules rewritten {result['rules']['rewritten']}"
        f" (flow pins removed {result['rules']['pins_removed']})"
    )
    rejoin(cluster, victim, args.timeout)
    return result


def _changed(diff: dict[str, Any], pins: bool) -> int:
    """Rules removed or replaced between the dumps: flows' pins (``pins``), which come and
    go with the flows themselves, or everything else (routes, failover, hosts, jobs,
    tenants), which a take-over must leave as it was."""
    by_kind = diff["by_kind"]
    return sum(
        n
        for what in ("removed", "readded")
        for kind, n in by_kind.get(what, {}).items()
        if (kind == "flow") == pins
    )


def rejoin(cluster: LoomCluster, name: str, timeout: float) -> float:
    """Start a killed instance again; seconds until it holds its share of the switches."""
    started = time.monotonic()
    cluster.instance(name).start()
    cluster.wait_balanced(timeout * 4)
    return time.monotonic() - started
