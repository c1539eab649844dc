"""Step 3 of ``make demo``: a real gloo all-reduce registered with Loom as a job
(``POST /loom/v1/jobs``), measured alone and then under bulk iperf3 traffic on the same
host links. The job's traffic is DSCP-marked collective at the ingress edge, so every
egress HTB serves it ahead of bulk.

The ranks are :mod:`~mininet_scenarios.workloads.collectives.worker` processes started in the
hosts.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import networkx as nx

from mininet_scenarios.demo.story import Demo, say
from mininet_scenarios.harness.client import LoomApiError
from mininet_scenarios.harness.processes import REPO_ROOT, alive, kill_pids
from mininet_scenarios.workloads.collectives.hosts import prepare_rank_hosts, start_in_host
from mininet_scenarios.workloads.collectives.runner import WORKER

GLOO_PORTS = (40960, 49151)  # one u32 mask (0xe000) matches this range
HOST_FILTER_PRIO = 7
BULK_PORT, BULK_CPORT = 5301, 30000
JOB = "demo-allreduce"


def spread_ranks(graph: nx.MultiGraph, hosts: Sequence[str], n: int) -> list[str]:
    """``n`` ranks, one per edge switch first (in host order), from ``hosts``."""
    seen: set[str] = set()
    first: list[str] = []
    rest: list[str] = []
    for h in hosts:
        edge = graph.nodes[h]["switch"]
        (rest if edge in seen else first).append(h)
        seen.add(edge)
    ranks = (first + rest)[:n]
    if len(ranks) < 2:
        raise ValueError("need at least two ranks")
    return ranks


def bulk_pairs(
    graph: nx.MultiGraph, ranks: Sequence[str], others: Sequence[str]
) -> list[tuple[str, str]]:
    """Bulk flows that load every rank's link both ways: each rank sends to and receives from
    a non-rank host in another pod. Never between two ranks: Loom knows a job by host pair,
    so such a flow would ride in the collective class."""
    pairs = []
    for r in ranks:
        far = [o for o in others if graph.nodes[o]["group"] != graph.nodes[r]["group"]]
        if not far:
            continue
        k = ranks.index(r)
        pairs += [(r, far[k % len(far)]), (far[(k + 1) % len(far)], r)]
    return pairs


def busbw_mbps(nbytes: float, n: int, seconds: float) -> float:
    """All-reduce bus bandwidth (nccl-tests): algbw * 2(n-1)/n, in Mbit/s."""
    return 8 * nbytes / seconds / 1e6 * 2 * (n - 1) / n if seconds > 0 else 0.0


def iteration_seconds(rank_seconds: Sequence[Sequence[float]]) -> list[float]:
    """Per timed iteration, the slowest rank's time (a barrier precedes each one)."""
    return [max(col) for col in zip(*rank_seconds, strict=True)]


# --------------------------------------------------------------------------- live


def _register(demo: Demo, name: str, ranks: Sequence[str]) -> dict[str, Any]:
    api = demo.stack.api
    body = {
        "name": name,
        "tenant": demo.tenant(ranks[0]),
        "hosts": [demo.ip(h) for h in ranks],
        "pattern": "all_reduce",
        "ring_direction": "backward",
        "traffic_class": "collective",
    }
    with contextlib.suppress(LoomApiError):
        api.request("DELETE", f"/loom/v1/jobs/{name}")
    say(f"POST /loom/v1/jobs {json.dumps(body)}")
    job = dict(api.request("POST", "/loom/v1/jobs", body))
    deadline = time.monotonic() + 30
    while job.get("status") != "active":
        if time.monotonic() > deadline:
            raise RuntimeError(f"job {name} not active after 30 s: {job}")
        for i, h in enumerate(ranks):  # let Loom learn every rank
            nxt = demo.ip(ranks[(i + 1) % len(ranks)])
            demo.stack.net.host(h).cmd(f"ping -n -q -c1 -W1 {nxt} >/dev/null 2>&1")
        job = dict(api.request("GET", f"/loom/v1/jobs/{name}"))
    return job


def _all_reduce(
    demo: Demo, ranks: Sequence[str], mib: float, iters: int, tag: str, port: int
) -> tuple[float, tuple[float, float]]:
    """Run one gloo all-reduce on ``ranks``; its median busbw in Mbit/s and the wall-clock
    window of its timed iterations."""
    out_dir = demo.stack.run_dir / f"allreduce-{tag}"
    out_dir.mkdir(parents=True, exist_ok=True)
    outs = [out_dir / f"rank{r}.json" for r in range(len(ranks))]
    for p in outs:
        p.unlink(missing_ok=True)
    pids = []
    t0 = time.monotonic()
    try:
        for r, h in enumerate(ranks):
            pids.append(
                start_in_host(
                    demo.stack.net,
                    h,
                    f"env PYTHONPATH={REPO_ROOT} {sys.executable} -m {WORKER}"
                    f" --rank {r} --world {len(ranks)} --master {demo.ip(ranks[0])} --port {port}"
                    f" --op all_reduce --mib {mib:g} --iters {iters} --warmup 1 --ifname {h}-eth0"
                    f" --out {outs[r]} --timeout 300 > {out_dir / f'rank{r}.txt'} 2>&1",
                )
            )
        note = t0 + 10
        while not all(p.exists() for p in outs):
            if time.monotonic() - t0 > 300 or not any(alive(p) for p in pids):
                time.sleep(0.5)
                if not all(p.exists() for p in outs):
                    raise RuntimeError(f"all-reduce {tag} failed; see {out_dir}")
            if time.monotonic() > note:
                say(
                    f"  ... all-reduce {tag}: {time.monotonic() - t0:.0f} s, "
                    f"{sum(p.exists() for p in outs)}/{len(outs)} ranks done"
                )
                note += 10
            time.sleep(0.25)
    finally:
        kill_pids([p for p in pids if alive(p)])
    docs = [json.loads(p.read_text()) for p in outs]
    if not all(d.get("check_ok") for d in docs):
        raise RuntimeError(f"all-reduce {tag}: wrong result on some rank")
    seconds = statistics.median(iteration_seconds([d["seconds"] for d in docs]))
    window = (min(d["timed_start"] for d in docs), max(d["timed_end"] for d in docs))
    return busbw_mbps(docs[0]["bytes"], len(ranks), seconds), window


def _bulk(demo: Demo, pairs: Sequence[tuple[str, str]], seconds: float) -> list[int]:
    """Long unmarked iperf3 TCP flows (servers first, then clients); their PIDs."""
    pids: list[int] = []
    port: dict[str, int] = {}
    ports: list[int] = []
    for _src, dst in pairs:
        port[dst] = port.get(dst, BULK_PORT - 1) + 1
        ports.append(port[dst])
        server = f"iperf3 -s -1 -p {port[dst]} >/dev/null 2>&1"
        pids.append(start_in_host(demo.stack.net, dst, server))
    time.sleep(0.5)
    for i, ((src, dst), p) in enumerate(zip(pairs, ports, strict=True)):
        pids.append(
            start_in_host(
                demo.stack.net,
                src,
                f"iperf3 -c {demo.ip(dst)} -p {p} --cport"
                f" {BULK_CPORT + i} -t {int(seconds)} >/dev/null 2>&1",
            )
        )
    return pids


def step_collective(demo: Demo, n: int, mib: float, iters: int) -> None:
    research = demo.tenants["research"]
    ranks = spread_ranks(demo.stack.graph, research, n)
    others = [h for h in research if h not in ranks]
    prepare_rank_hosts(demo.stack.net, ranks)  # gloo in the collective class at the NIC
    job = _register(demo, JOB, ranks)
    name = {demo.ip(h): h for h in ranks}
    say(
        f"job {job['status']}: ring hops placed before the first byte (max link utilization"
        f" {job.get('max_link_utilization')}), DSCP-marked collective at the ingress edge:"
    )
    for p in job.get("paths", []):
        print(f"  {name[p['src']]} -> {name[p['dst']]}: {' '.join(p['switches'])}")
    say(f"gloo all-reduce of {mib:g} MiB on {n} ranks {ranks}, alone ...")
    idle, window = _all_reduce(demo, ranks, mib, iters, "alone", 29500)
    demo.marks["collective_alone_start"], demo.marks["collective_alone_end"] = window
    pairs = bulk_pairs(demo.stack.graph, ranks, others)
    say(
        f"busbw alone: {idle:.2f} Mbit/s; now with {len(pairs)} bulk iperf3 flows on the same"
        f" host links: {pairs}"
    )
    pids = _bulk(demo, pairs, 600)
    try:
        time.sleep(2.0)
        loaded, window = _all_reduce(demo, ranks, mib, iters, "under-bulk", 29501)
        demo.marks["collective_bulk_start"], demo.marks["collective_bulk_end"] = window
        time.sleep(2.5)  # two scrapes: Prometheus has the whole window
    finally:
        kill_pids([p for p in pids if alive(p)])
    job = dict(demo.stack.api.get(f"/loom/v1/jobs/{JOB}"))
    ratio = loaded / idle if idle else 0.0
    bulk = demo.prom.query_range("sum(loom_elephant_flow_bits_per_second) or vector(0)",
                                 window[0], window[1], 1.0)  # fmt: skip
    values = [float(v) / 1e6 for item in bulk for _, v in item["values"]]
    bulk_mbps = statistics.fmean(values) if values else 0.0
    demo.summary["collective"] = {
        "ranks": ranks,
        "mib": mib,
        "busbw_alone_mbps": round(idle, 2),
        "busbw_under_bulk_mbps": round(loaded, 2),
        "kept": round(ratio, 2),
        "bulk_flows": len(pairs),
        "bulk_mbps_meanwhile": round(bulk_mbps, 2),
        "job_bytes": job.get("bytes"),
    }
    say(
        f"busbw under bulk: {loaded:.2f} Mbit/s = {ratio:.0%} of alone (link {demo.rate:g});"
        f" the bulk flows still carried {bulk_mbps:.1f} Mbit/s in all meanwhile (Prometheus)"
    )
    demo.check("collective ahead of bulk", ratio > 0.6, f"kept {ratio:.0%} of its busbw")
