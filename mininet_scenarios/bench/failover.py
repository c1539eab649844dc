"""Failover benchmark (``docs/benchmarks.md`` §4 Failover): traffic gaps and controller
reaction on a k=4 fat-tree, fast failover on vs off, plus a controller restart and a
packet-in flood.

    python -m mininet_scenarios.bench.failover [--out results/failover] [--modes on,off]
        [--phases gap,reroute,restart,flood] [--pairs 3] [--stream-rate 1000] [--quick]

What is measured, and why this way:

* **Link-down gap.** A 1000 datagram/s UDP stream (:mod:`~mininet_scenarios.workloads.streams`)
  runs between hosts in different pods; the fabric links it crosses are read from port counters
  (select groups hash, so the graph cannot say), and each one in turn is taken down with
  ``ip link`` (both ends) and restored. The gap is the receiver's longest silence (kernel
  arrival timestamps) around the cut; the sender-side outage is reported beside it. Both
  modes run the same pairs with the same source ports, so the same flows cross the same
  links. With fast failover ``off`` the controller still reroutes on PortStatus, so that
  gap is the end-to-end reroute: port down, PortStatus, recomputation, rules in force.
* **Reroute latency.** Link downs/ups on an idle fabric; the controller times each
  PortStatus-triggered recomputation from the PortStatus to the barrier replies of every
  switch it modified (``loom_reroute_latency_seconds``). Reported: p50/p95 as Prometheus'
  ``histogram_quantile`` computes them from the bucket deltas, and the exact mean per cut
  from _sum/_count; beside it, the time until the rules were sent
  (``loom_event_handling_seconds{event="port_status"}``).
* **Controller restart** (``on`` only): SIGTERM, then SIGKILL, of ryu-manager while a stream
  runs; a new one starts on the same ports ``--restart-down`` seconds later (OVS reconnect
  backoff capped at 1 s on our bridges). Reported: the stream's gap, when switches, hosts
  and links were back, and ``dump-flows`` before vs after (without counters; a rule whose
  age did not grow was deleted and re-added), then pingall.
* **Packet-in flood** (``on`` only, :mod:`~mininet_scenarios.workloads.flood`): hosts send ARP
  requests for absent addresses and TCP SYNs/UDP datagrams with random ports at ``--flood-rate``
  frames/s each to a neighbour on their own edge switch; meanwhile ``GET /loom/v1/health``
  is timed every 100 ms and hosts in other pods ping each other. Reported: API p50/p95
  before and during the flood, ping loss, packet-ins counted against frames sent, CPU.

Results go to ``--out``: ``results.json`` (rewritten after every phase), ``table.txt`` and
``failover.png`` (:mod:`mininet_scenarios.bench.failover_report`). Wrap the command in
``flock /tmp/loom-emulation.lock`` where other emulations may run at the same time
(``make bench-failover`` does).
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

from mininet_scenarios.bench.failover_report import TARGETS, fmt, plot, table
from mininet_scenarios.harness import faults
from mininet_scenarios.harness import metrics as prom
from mininet_scenarios.harness.rules import compare_rules, rule_snapshot
from mininet_scenarios.workloads.flood import (
    ApiLatency,
    Flood,
    finish_pings,
    process_cpu_seconds,
    start_pings,
)
from mininet_scenarios.workloads.streams import Stream, arrival_series, gap_in, stream_path

PAIRS = [("h1", "h16"), ("h6", "h11"), ("h12", "h3"), ("h15", "h8")]
# Two edge-aggregation and two aggregation-core links per pair of pods, spread over pods.
REROUTE_LINKS = [
    ("e0_0", "a0_0"),
    ("a0_0", "c1"),
    ("e1_1", "a1_1"),
    ("a1_1", "c4"),
    ("e2_0", "a2_1"),
    ("a2_0", "c2"),
    ("e3_1", "a3_0"),
    ("a3_1", "c3"),
]
FLOODERS = {"h1": "h2", "h3": "h4"}  # pod 0; each floods a neighbour on its own edge switch
PING_PAIRS = [("h5", "h9"), ("h10", "h14"), ("h16", "h7"), ("h13", "h6")]  # pods 1-3
HANDLING = "loom_event_handling_seconds"
REROUTE = "loom_reroute_latency_seconds"


def write_json(path: Path, doc: Any) -> None:
    """Replace ``path`` at once: a reader never sees half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)


def say(text: str) -> None:
    print(f"[failover] {text}", flush=True)


def _ms(x: float | None) -> float | None:
    return None if x is None else round(x * 1e3, 2)


def _role(graph: Any, node: str) -> str:
    return str(graph.nodes[node].get("role", "?"))


# --------------------------------------------------------------------------- phases


def gap_phase(stack: Any, args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    """Each pair's stream; each fabric link it crosses taken down and restored in turn."""
    net, g = stack.net, stack.graph
    n_links = _n_links(g)
    events: list[dict[str, Any]] = []
    streams: list[dict[str, Any]] = []
    for i, (src, dst) in enumerate(PAIRS[: args.pairs]):
        stream = Stream(
            net, src, dst, run_dir / "streams", args.stream_rate, port=9300 + i, sport=41000 + i
        )
        marks: list[dict[str, Any]] = []
        with stream:
            time.sleep(1.5)  # ARP answered, flow tracked: steady state before the first cut
            for pos in range(args.cuts):
                path = stream_path(net, src, dst, args.stream_rate)
                if pos >= len(path):
                    break
                u, up, v, vp = path[pos]
                time.sleep(args.pre)
                t_down = time.monotonic()
                net.set_link(u, v, False)
                t_set = time.monotonic()
                time.sleep(args.hold)
                t_up = time.monotonic()
                net.set_link(u, v, True)
                back = faults.wait_health(stack.api, 30, links=n_links)
                time.sleep(args.settle)
                marks.append(
                    {
                        "pair": f"{src}->{dst}",
                        "link": f"{u}:{up}->{v}:{vp}",
                        "position": f"{_role(g, u)}->{_role(g, v)}",
                        "path": [f"{a}:{p}->{b}" for a, p, b, _ in path],
                        "t_down": t_down,
                        "t_up": t_up,
                        "t_next": time.monotonic(),
                        "ip_link_ms": round((t_set - t_down) * 1e3, 1),
                        "rediscovered_s": None if back is None else round(back, 2),
                    }
                )
        trace = stream.trace
        assert trace is not None
        first = marks[0]["t_down"] if marks else time.monotonic()
        base = gap_in(trace, stream.started + 0.5, first - 0.05)
        streams.append(
            {
                "pair": f"{src}->{dst}",
                "sent": trace.sent_count,
                "received": len(trace.seq),
                "lost": trace.lost,
                "baseline": base.as_dict(),
            }
        )
        for m in marks:
            down = gap_in(trace, m["t_down"], m["t_up"])
            restore = gap_in(trace, m["t_up"], m["t_next"])
            ev = {k: v for k, v in m.items() if not k.startswith("t_")}
            ev.update(down=down.as_dict(), restore=restore.as_dict())
            ev["series"] = arrival_series(trace, m["t_down"] - 0.2, m["t_down"] + 0.8)
            events.append(ev)
            say(
                f"  {ev['pair']} {ev['position']:<10} {ev['link']:<18} gap {down.gap_ms:7.1f} ms"
                f" (outage {down.outage_ms:6.1f} ms, {down.lost} lost); restore gap"
                f" {restore.gap_ms:6.1f} ms; baseline max gap {base.gap_ms:.1f} ms"
            )
    gaps = [e["down"]["gap_ms"] for e in events]
    outages = [e["down"]["outage_ms"] for e in events]
    restores = [e["restore"]["gap_ms"] for e in events]
    by_pos: dict[str, list[float]] = {}
    for e in events:
        by_pos.setdefault(e["position"], []).append(e["down"]["gap_ms"])
    return {
        "events": events,
        "streams": streams,
        "summary": {
            "events": len(events),
            "gap_max_ms": max(gaps, default=None),
            "gap_median_ms": prom.median(gaps),
            "outage_max_ms": max(outages, default=None),
            "outage_median_ms": prom.median(outages),
            "lost_total": sum(e["down"]["lost"] for e in events),
            "restore_gap_max_ms": max(restores, default=None),
            "restore_gap_median_ms": prom.median(restores),
            "baseline_gap_max_ms": max((s["baseline"]["gap_ms"] for s in streams), default=None),
            "by_position": {
                p: {"max_ms": max(v), "median_ms": prom.median(v), "n": len(v)}
                for p, v in sorted(by_pos.items())
            },
        },
    }


def _n_links(graph: Any) -> int:
    """Directed switch-to-switch links the controller should know."""
    kinds = graph.nodes
    return 2 * sum(1 for a, b in graph.edges() if kinds[a]["kind"] == kinds[b]["kind"] == "switch")


def reroute_phase(stack: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Link downs/ups on an idle fabric, timed by the controller up to the barrier replies."""
    net, g = stack.net, stack.graph
    events = []
    down_all: list[tuple[float, float]] = []
    up_all: list[tuple[float, float]] = []
    sent_all: list[tuple[float, float]] = []
    for a, b in REROUTE_LINKS[: args.reroute_links]:
        before = prom.scrape(stack.metrics_url)
        net.set_link(a, b, False)
        time.sleep(args.reroute_wait)
        mid = prom.scrape(stack.metrics_url)
        net.set_link(a, b, True)
        back = faults.wait_health(stack.api, 30, links=_n_links(g))
        time.sleep(1.0)
        after = prom.scrape(stack.metrics_url)
        down_b, down_sum, down_n = prom.histogram_delta(before, mid, REROUTE)
        up_b, up_sum, up_n = prom.histogram_delta(mid, after, REROUTE)
        sent_b, sent_sum, sent_n = prom.histogram_delta(before, mid, HANDLING, event="port_status")
        down_all = prom.add_buckets(down_all, down_b)
        up_all = prom.add_buckets(up_all, up_b)
        sent_all = prom.add_buckets(sent_all, sent_b)
        ev: dict[str, Any] = {
            "link": f"{a}-{b}",
            "position": f"{_role(g, a)}-{_role(g, b)}",
            "port_status_events": int(sent_n),
            "reroutes": int(down_n),
            "reroute_mean_ms": _ms(down_sum / down_n) if down_n else None,
            "handling_mean_ms": _ms(sent_sum / sent_n) if sent_n else None,
            "up_reroutes": int(up_n),
            "up_reroute_mean_ms": _ms(up_sum / up_n) if up_n else None,
            "rediscovered_s": None if back is None else round(back, 2),
        }
        events.append(ev)
        say(
            f"  {ev['link']:<12} {ev['port_status_events']} PortStatus -> {ev['reroutes']}"
            f" reroutes, in force after {fmt(ev['reroute_mean_ms'], ' ms')} (mean), sent after"
            f" {fmt(ev['handling_mean_ms'], ' ms')}; link up: {ev['up_reroutes']} reroutes,"
            f" {fmt(ev['up_reroute_mean_ms'], ' ms')}"
        )
    means = [e["reroute_mean_ms"] for e in events if e["reroute_mean_ms"] is not None]
    return {
        "events": events,
        "summary": {
            "reroutes_down": int(down_all[-1][1]) if down_all else 0,
            "reroute_p50_ms": _ms(prom.bucket_quantile(0.5, down_all)),
            "reroute_p95_ms": _ms(prom.bucket_quantile(0.95, down_all)),
            "reroute_event_mean_max_ms": max(means, default=None),
            "reroute_up_p50_ms": _ms(prom.bucket_quantile(0.5, up_all)),
            "reroute_up_p95_ms": _ms(prom.bucket_quantile(0.95, up_all)),
            "handling_p50_ms": _ms(prom.bucket_quantile(0.5, sent_all)),
            "handling_p95_ms": _ms(prom.bucket_quantile(0.95, sent_all)),
            "buckets_down": [[le, c] for le, c in down_all],
        },
    }


def restart_phase(stack: Any, args: argparse.Namespace, how: str, run_dir: Path) -> dict[str, Any]:
    """Restart the controller under a running stream; compare the rules before and after."""
    net = stack.net
    src, dst = PAIRS[0]
    stream = Stream(net, src, dst, run_dir / "streams", args.stream_rate, 9400, 42000)
    with stream:
        time.sleep(2.0)
        before = rule_snapshot(net.switch_names)
        t_sig = time.monotonic()
        restart = faults.restart_controller(
            stack,
            how,
            args.restart_down,
            n_switches=len(net.switch_names),
            n_hosts=len(net.host_names),
            n_links=_n_links(stack.graph),
        )
        say(
            f"  {how}: new controller listening after {restart.listening:.2f} s; switches"
            f" back at {fmt(restart.switches, ' s')}, hosts {fmt(restart.hosts, ' s')},"
            f" links {fmt(restart.links, ' s')}; settling ..."
        )
        time.sleep(args.restart_settle)
        t_end = time.monotonic()
        time.sleep(0.5)
    trace = stream.trace
    assert trace is not None
    after = rule_snapshot(net.switch_names)
    diff = compare_rules(before, after)
    gap = gap_in(trace, t_sig, t_end)
    base = gap_in(trace, stream.started + 0.5, t_sig - 0.05)
    ping = net.pingall(timeout=2.0)
    result = {
        "signal": how,
        "down_seconds": args.restart_down,
        "timeline_s": restart.as_dict(),
        "gap": gap.as_dict(),
        "baseline": base.as_dict(),
        "stream": {"sent": trace.sent_count, "received": len(trace.seq), "lost": trace.lost},
        "rules": diff.summary(),
        "pingall_loss_pct": ping.loss_pct,
        "pingall_failed": [list(p) for p in ping.failed[:10]],
    }
    say(
        f"  {how}: stream gap {gap.gap_ms:.1f} ms ({gap.lost} lost, baseline"
        f" {base.gap_ms:.1f} ms); rules:"
        f" {diff.summary()['removed']} removed, {diff.summary()['added']} added,"
        f" {diff.summary()['readded']} re-added of {diff.flows_before};"
        f" pingall {ping.loss_pct:.1f} % loss"
    )
    return result


def flood_phase(stack: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Flood the controller from pod 0; time the REST API and ping across other pods."""
    net = stack.net
    flooders = dict(list(FLOODERS.items())[: args.flooders])
    ctl_pid = stack.ctl.proc.pid
    with ApiLatency(stack.api.base_url, interval=0.1, timeout=2.0) as api:
        t_b0 = time.monotonic()
        time.sleep(args.flood_baseline)
        before = prom.scrape(stack.metrics_url)
        cpu0 = process_cpu_seconds(ctl_pid)
        flood = Flood(net, flooders, args.flood_rate, args.flood_seconds)
        pings = start_pings(net, PING_PAIRS, args.flood_seconds + 2)
        t_f0 = time.monotonic()
        try:
            flood.start()
            t_f0 = time.monotonic()
            sent = flood.wait()
        finally:
            flood.close()
        t_f1 = time.monotonic()
        after = prom.scrape(stack.metrics_url)
        cpu1 = process_cpu_seconds(ctl_pid)
        time.sleep(1.0)
    ping = finish_pings(pings)
    base_lat, base_fail = api.window(t_b0, t_f0)
    flood_lat, flood_fail = api.window(t_f0, t_f1)
    secs = t_f1 - t_f0
    kinds = ("arp", "flow", "route_miss", "undecodable", "lldp")
    seen = {
        k: prom.sample(after, "loom_packet_in_total", kind=k)
        - prom.sample(before, "loom_packet_in_total", kind=k)
        for k in kinds
    }
    hostile = sum(v for k, v in seen.items() if k != "lldp")
    total_sent = sum(int(r.get("sent", 0)) for r in sent.values())
    by_kind: dict[str, int] = {}
    for r in sent.values():
        for k, v in r.get("by_kind", {}).items():
            by_kind[k] = by_kind.get(k, 0) + int(v)
    pin_b, _s, _n = prom.histogram_delta(before, after, HANDLING, event="packet_in")
    paused = prom.sample(after, "loom_flow_tracking_paused_total") - prom.sample(
        before, "loom_flow_tracking_paused_total"
    )
    alive = stack.ctl.alive()
    post = net.pingall(timeout=2.0)
    result = {
        "flooders": flooders,
        "rate_per_flooder": args.flood_rate,
        "seconds": round(secs, 2),
        "sent": total_sent,
        "sent_by_kind": by_kind,
        "sent_rate_pps": round(total_sent / secs, 1) if secs else None,
        "flooder_reports": sent,
        "packet_in_seen": {k: int(v) for k, v in seen.items()},
        "packet_in_rate_pps": round(hostile / secs, 1) if secs else None,
        "packet_in_ratio": round(hostile / total_sent, 5) if total_sent else None,
        "flow_tracking_paused": int(paused),
        "packet_in_handling_p50_ms": _ms(prom.bucket_quantile(0.5, pin_b)),
        "packet_in_handling_p95_ms": _ms(prom.bucket_quantile(0.95, pin_b)),
        "api_baseline": _lat(base_lat, base_fail),
        "api_flood": _lat(flood_lat, flood_fail),
        "api_flood_samples_ms": [round(x * 1e3, 2) for x in flood_lat],
        "api_baseline_samples_ms": [round(x * 1e3, 2) for x in base_lat],
        "controller_cpu_pct": round(100 * (cpu1 - cpu0) / secs, 1) if secs else None,
        "controller_alive": alive,
        "pings": ping,
        "pingall_after_loss_pct": post.loss_pct,
    }
    say(
        f"  sent {total_sent} frames in {secs:.1f} s ({result['sent_rate_pps']} /s); controller"
        f" saw {int(hostile)} packet-ins ({result['packet_in_rate_pps']} /s, ratio"
        f" {result['packet_in_ratio']}) {result['packet_in_seen']}; API p95"
        f" {result['api_baseline']['p95_ms']} -> {result['api_flood']['p95_ms']} ms; pings"
        f" {[v['loss_pct'] for v in ping.values()]} % loss; controller"
        f" {'alive' if alive else 'DEAD'}, CPU {result['controller_cpu_pct']} %"
    )
    return result


def _lat(values: Sequence[float], failed: int) -> dict[str, Any]:
    return {
        "n": len(values),
        "failed": failed,
        "p50_ms": _ms(prom.percentile(values, 0.5)),
        "p95_ms": _ms(prom.percentile(values, 0.95)),
        "max_ms": _ms(max(values, default=None)),
    }


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m mininet_scenarios.bench.failover",
        description=(__doc__ or "").splitlines()[0],
    )
    ap.add_argument("--out", type=Path, default=Path("results/failover"))
    ap.add_argument("--modes", default="on,off", help="fast failover on and/or off")
    ap.add_argument("--phases", default="gap,reroute,restart,flood")
    ap.add_argument("--rate", type=float, default=10.0, help="link rate, Mbit/s")
    ap.add_argument("--queue-packets", type=int, default=100)
    ap.add_argument("--pairs", type=int, default=3, help=f"streams, 1..{len(PAIRS)}")
    ap.add_argument("--stream-rate", type=float, default=1000.0, help="datagrams/s")
    ap.add_argument("--pre", type=float, default=1.0, help="quiet seconds before a cut")
    ap.add_argument("--hold", type=float, default=2.5, help="seconds a link stays down")
    ap.add_argument("--settle", type=float, default=1.5, help="seconds after rediscovery")
    ap.add_argument("--reroute-links", type=int, default=len(REROUTE_LINKS))
    ap.add_argument("--reroute-wait", type=float, default=1.5)
    ap.add_argument("--restart-down", type=float, default=3.0, help="controller down, s")
    ap.add_argument("--restart-settle", type=float, default=8.0, help="after links are back")
    ap.add_argument("--flood-rate", type=float, default=3000.0, help="frames/s per flooder")
    ap.add_argument("--flood-seconds", type=float, default=10.0)
    ap.add_argument("--flood-baseline", type=float, default=4.0)
    ap.add_argument("--flooders", type=int, default=2, help=f"1..{len(FLOODERS)}")
    ap.add_argument("--cuts", type=int, default=4, help="links cut per stream, 1..4")
    ap.add_argument("--restarts", default="TERM,KILL", help="signals to restart with")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a check that everything runs (~4 min): one stream, two cuts, two reroute"
        " links, one SIGKILL restart, a 4 s flood; figures are not for reporting",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.pairs, args.cuts, args.reroute_links, args.restarts = 1, 2, 2, "KILL"
        args.flood_seconds, args.flood_baseline, args.restart_settle = 4.0, 2.0, 6.0
    args.restarts = [x.strip().upper() for x in args.restarts.split(",") if x.strip()]
    if not set(args.restarts) <= {"TERM", "KILL"}:
        ap.error(f"unknown restart signals {args.restarts}; use TERM, KILL")
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    args.phases = {p.strip() for p in args.phases.split(",") if p.strip()}
    bad = [m for m in args.modes if m not in ("on", "off")]
    if bad:
        ap.error(f"unknown modes {bad}; use on, off")
    bad = sorted(args.phases - {"gap", "reroute", "restart", "flood"})
    if bad:
        ap.error(f"unknown phases {bad}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from mininet_scenarios.bench.patterns_report import loom_version, machine_facts
    from mininet_scenarios.harness.cpu import cpu_idle_sampler
    from mininet_scenarios.harness.stack import LoomStack
    from topologies import fat_tree

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    graph = fat_tree(4, rate_mbps=args.rate)
    doc: dict[str, Any] = {
        "benchmark": "failover",
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join(
            ["python -m mininet_scenarios.bench.failover", *(argv or sys.argv[1:])]
        ),
        "config": {
            "rate_mbps": args.rate,
            "queue_packets": args.queue_packets,
            "stream_rate_pps": args.stream_rate,
            "pairs": [list(p) for p in PAIRS[: args.pairs]],
            "cuts_per_pair": args.cuts,
            "reroute_links": [list(x) for x in REROUTE_LINKS[: args.reroute_links]],
            "restarts": args.restarts,
            "quick": args.quick,
            "hold_s": args.hold,
            "restart_down_s": args.restart_down,
            "flood_rate_per_flooder": args.flood_rate,
            "flood_seconds": args.flood_seconds,
        },
        "targets": TARGETS,
        "loom": loom_version(),
        "machine": machine_facts(),
        "modes": {},
    }
    t_all = time.monotonic()
    for mode in args.modes:
        t_mode = time.monotonic()
        res: dict[str, Any] = {}
        doc["modes"][mode] = res
        run_dir = out / "runs" / f"ff-{mode}"
        env = {"LOOM_FAST_FAILOVER": mode, "LOOM_LINK_CAPACITY_MBPS": f"{args.rate:g}"}
        say(f"ff {mode}: starting Loom on a k=4 fat-tree ...")
        with LoomStack(graph, run_dir, env=env, queue_packets=args.queue_packets) as stack:
            faults.set_backoff(stack.net.switch_names)
            res["discovery_s"] = round(stack.discovery_seconds, 1)
            ping = stack.net.pingall(timeout=2.0)
            res["pingall_loss_pct"] = ping.loss_pct
            say(
                f"ff {mode}: discovered in {stack.discovery_seconds:.1f} s; pingall"
                f" {ping.loss_pct:.1f} % loss"
            )
            phases = [p for p in ("gap", "reroute", "restart", "flood") if p in args.phases]
            for phase in phases:
                if phase in ("restart", "flood") and mode != "on":
                    continue
                t0 = time.monotonic()
                say(f"ff {mode}: {phase} ...")
                with cpu_idle_sampler() as cpu:
                    try:
                        if phase == "gap":
                            res["gap"] = gap_phase(stack, args, run_dir)
                        elif phase == "reroute":
                            res["reroute"] = reroute_phase(stack, args)
                        elif phase == "restart":
                            res["restart"] = [
                                restart_phase(stack, args, how, run_dir) for how in args.restarts
                            ]
                        else:
                            res["flood"] = flood_phase(stack, args)
                    except Exception as exc:  # keep what the other phases measured
                        res.setdefault("errors", {})[phase] = f"{type(exc).__name__}: {exc}"
                        say(f"ff {mode}: {phase} FAILED: {type(exc).__name__}: {exc}")
                res.setdefault("phase_seconds", {})[phase] = round(time.monotonic() - t0, 1)
                res.setdefault("cpu_idle_mean", {})[phase] = (
                    None if cpu.mean is None else round(cpu.mean, 1)
                )
                write_json(out / "results.json", doc)
            log = stack.controller_log()
            res["controller_tracebacks"] = log.count("Traceback")
            res["controller_errors"] = [
                ln for ln in log.splitlines() if " error type=" in ln or "ERROR" in ln
            ][:20]
        res["wall_s"] = round(time.monotonic() - t_mode, 1)
        write_json(out / "results.json", doc)
        say(f"ff {mode}: done in {res['wall_s']:.0f} s")
    doc["wall_s"] = round(time.monotonic() - t_all, 1)
    write_json(out / "results.json", doc)
    text = table(doc)
    print(text, flush=True)
    png = plot(doc, out / "failover.png")
    (out / "table.txt").write_text(text + "\n")
    say(f"results: {out / 'results.json'}, figure: {png}, {doc['wall_s']:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
