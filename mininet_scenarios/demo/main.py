"""``make demo``: what Loom is for, shown on an emulated k=4 fat-tree in a few minutes.

Starts a real Prometheus server (loopback), Loom's controller with a two-tenant policy, and a
20-switch fat-tree of userspace Open vSwitch switches whose ports carry HTB queues per DSCP
class (collective ahead of control ahead of bulk). Then tells a story, one step at a time:

1. discovery with no topology file, and a pingall that follows the tenants;
2. two elephants ECMP hashing would put on one uplink, placed apart by Loom at their
   first packet (rates, paths, metric);
3. a real gloo all-reduce registered through ``POST /loom/v1/jobs``, alone and under bulk;
4. one tenant attacking another with crafted frames: the victim receives none;
5. plots drawn from Prometheus; 6. a summary table, also in ``summary.json``.

Exits non-zero if a step's check fails. ``--keep`` leaves everything up in Mininet's CLI
(exit the CLI to clean up); without it, or on Ctrl-C or an error, everything the demo
started (controller, Prometheus, Mininet hosts, OVS bridges) is stopped and removed.
"""

from __future__ import annotations

import argparse
import shutil
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mininet_scenarios.demo.attack import step_attack
from mininet_scenarios.demo.jobs import JOB, step_collective
from mininet_scenarios.demo.plots import plot_classes, plot_collision
from mininet_scenarios.demo.story import (
    Demo,
    colliding_pair,
    policy_yaml,
    say,
    step_collision,
    step_discovery,
    tenants_of,
    uplinks,
    write_json,
)
from mininet_scenarios.harness.pki import ensure
from mininet_scenarios.harness.prometheus import PrometheusProcess
from mininet_scenarios.harness.shaping import DEFAULT_CLASSES
from mininet_scenarios.harness.stack import LoomStack
from topologies import fat_tree

STEPS = 6
PKI_DIR = Path("pki")


def table(rows: list[list[Any]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [line.format(*header), line.format(*("-" * w for w in widths))]
    out += [line.format(*map(str, r)) for r in rows]
    return "\n".join(out)


def banner(n: int, title: str) -> None:
    print(f"\n=== step {n}/{STEPS}: {title} ===", flush=True)


def guarded(demo: Demo, name: str, fn: Callable[[], None]) -> None:
    """Run a step; an error fails its check and the story goes on (Ctrl-C does not)."""
    started = time.monotonic()
    try:
        fn()
    except Exception as exc:
        traceback.print_exc()
        demo.check(name, False, f"{type(exc).__name__}: {exc}")
    demo.summary.setdefault("step_seconds", {})[name] = round(time.monotonic() - started, 1)


def render_plots(demo: Demo, run_dir: Path) -> None:
    plots: dict[str, str] = {}
    m, graph = demo.marks, demo.stack.graph
    if "collision_start" in m:
        a, _ = colliding_pair(graph, demo.tenants["research"])
        edge = graph.nodes[a[0]]["switch"]
        path, series = plot_collision(
            demo.prom,
            run_dir / "collision.png",
            edge,
            list(uplinks(graph, edge).values()),
            (m["collision_start"], m["collision_end"]),
            m.get("apart"),
            demo.rate,
        )
        plots["collision"] = str(path)
        demo.check("Prometheus recorded the uplinks", len(series) == 2, f"{len(series)} series")
    if "collective_bulk_end" in m:
        phases = {
            "alone": (m["collective_alone_start"], m["collective_alone_end"]),
            "under bulk": (m["collective_bulk_start"], m["collective_bulk_end"]),
        }
        path, series = plot_classes(demo.prom, run_dir / "classes.png", JOB, phases)
        plots["classes"] = str(path)
        peak = {s.label: round(s.peak, 2) for s in series}
        say(f"peaks in the class plot (Mbit/s): {peak}")
    for name, path_s in plots.items():
        say(f"plot {name}: {path_s}")
    demo.summary["plots"] = plots


def summary_rows(s: dict[str, Any]) -> list[list[Any]]:
    rows: list[list[Any]] = [
        [
            "discovery (switches, directed links)",
            f"{s.get('discovery_s')} s ({s.get('switches')}, {s.get('links')})",
        ],
        ["pingall: same-tenant pairs answered", s.get("pingall_same_tenant")],
        ["pingall: cross-tenant pairs answered", s.get("pingall_cross_tenant_leaks")],
    ]
    col = s.get("collision")
    if col:
        for label, f in col["flows"].items():
            rows.append([f"elephant {label}: after its first second", f"{f['steady_mbps']} Mbit/s"])
        rows.append(["both uplinks busy after", f"{col['apart_after_s']} s"])
        rows.append(["loom_flows_placed_total", col["loom_flows_placed_total"]])
        rows.append(["loom_reroutes_total", col["loom_reroutes_total"]])
    job = s.get("collective")
    if job:
        rows += [
            [
                f"all-reduce busbw alone ({len(job['ranks'])} ranks, {job['mib']:g} MiB)",
                f"{job['busbw_alone_mbps']} Mbit/s",
            ],
            [
                f"all-reduce busbw under {job['bulk_flows']} bulk flows",
                f"{job['busbw_under_bulk_mbps']} Mbit/s ({job['kept']:.0%} kept)",
            ],
            ["bulk flows' total meanwhile", f"{job['bulk_mbps_meanwhile']} Mbit/s"],
        ]
    atk = s.get("attack")
    if atk:
        rows += [
            [
                f"attack frames {atk['attacker']} -> {atk['victim']} received",
                f"{atk['attack_frames_received']} of {atk['attack_frames_sent']}",
            ],
            ["same-tenant crafted frames received", atk["same_tenant_received"]],
            ["loom_isolation_drops_total, + in attack", atk["loom_isolation_drops_total_delta"]],
        ]
    rows.append(["total run time", f"{s.get('total_s')} s"])
    return rows


def run(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    for old in ("summary.json", "collision.png", "classes.png"):
        (run_dir / old).unlink(missing_ok=True)
    for stale in [run_dir / "prometheus", *run_dir.glob("iperf3-*"), *run_dir.glob("allreduce-*")]:
        shutil.rmtree(stale, ignore_errors=True)  # a previous run's outputs
    graph = fat_tree(4, rate_mbps=args.rate)
    tenants = tenants_of(graph)
    policy = run_dir / "policy.yaml"
    policy.write_text(policy_yaml(graph, tenants))
    env = {"LOOM_POLICY": str(policy.resolve())}  # what a user sets: Loom learns the rest
    if args.tell_rate:
        env["LOOM_LINK_CAPACITY_MBPS"] = f"{args.rate:g}"
    tls = ensure(PKI_DIR) if args.tls else None  # make pki: kept if already there
    stack = LoomStack(graph, run_dir, env=env, queue_classes=DEFAULT_CLASSES, tls=tls)
    target = stack.metrics_url.split("//")[1].split("/")[0]
    summary: dict[str, Any] = {
        "fabric": graph.graph["name"],
        "link_rate_mbps": args.rate,
        "tenants": tenants,
        "openflow": "tls" if tls else "tcp",
    }
    demo: Demo | None = None
    if tls is not None:
        say(f"OpenFlow over TLS: CA and certificates in {tls.root}; switches without one refused")
    say(f"tenants from {policy}: " + "; ".join(f"{t}: {', '.join(m)}" for t, m in tenants.items()))
    try:
        with PrometheusProcess([target], run_dir, scrape_interval=1.0) as prom:
            say(f"Prometheus up at {prom.url} scraping Loom's metrics at {stack.metrics_url}")
            say(
                f"starting Loom and {graph.graph['name']} (20 switches, 16 hosts) at"
                f" {args.rate:g} Mbit/s, DSCP classes collective/control/bulk on every port ..."
            )
            with stack:
                demo = Demo(stack, prom, args.rate, tenants, summary)
                say(f"REST API at {stack.api.base_url}/loom/v1/health")
                banner(1, "discovery and pingall")
                guarded(demo, "discovery", lambda: step_discovery(demo))
                banner(2, "two elephants ECMP would collide, placed apart at their first packet")
                guarded(demo, "collision", lambda: step_collision(demo, args.seconds))
                banner(3, "a collective job ahead of bulk traffic")
                guarded(
                    demo,
                    "collective",
                    lambda: step_collective(demo, args.ranks, args.mib, args.iters),
                )
                banner(4, "a tenant attack, dropped at the edge")
                guarded(demo, "attack", lambda: step_attack(demo))
                banner(5, "plots from Prometheus")
                time.sleep(2.0)  # the last scrape
                guarded(demo, "plots", lambda: render_plots(demo, run_dir))
                summary["total_s"] = round(time.monotonic() - t0, 1)
                banner(6, "summary")
                finish(demo, run_dir)
                if args.keep:
                    keep(demo)
    except KeyboardInterrupt:
        say("interrupted: everything the demo started is stopped and removed")
        return 130
    if demo is None:
        return 1
    failed = [name for name, ok, _ in demo.checks if not ok]
    say(
        f"everything stopped and removed; {len(demo.checks) - len(failed)}/{len(demo.checks)}"
        f" checks passed{'; FAILED: ' + ', '.join(failed) if failed else ''}"
    )
    return 1 if failed else 0


def finish(demo: Demo, run_dir: Path) -> None:
    demo.summary["checks"] = [{"check": n, "ok": ok, "detail": d} for n, ok, d in demo.checks]
    print(table(summary_rows(demo.summary), ["figure", "value"]))
    write_json(run_dir / "summary.json", demo.summary)
    say(f"summary saved to {run_dir / 'summary.json'}")


def keep(demo: Demo) -> None:
    from mininet_scenarios.workloads.mininet_cli import loom_cli

    say(f"Prometheus UI: {demo.prom.url}/graph  (try loom_link_utilization_ratio)")
    say(f"Loom REST API: {demo.stack.api.base_url}/loom/v1/topology, /flows, /jobs, /policy")
    say("Mininet CLI: e.g. 'iperf h1 h5', 'h9 ping -c1 h1' (another tenant: dropped)")
    say("leave it with exit (or Ctrl-D): everything is then stopped and removed")
    loom_cli(demo.stack.net)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="loom-demo", description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=10.0, help="link rate, Mbit/s (default 10)")
    p.add_argument(
        "--seconds",
        type=float,
        default=10.0,
        help="duration of the two colliding elephants (default 10)",
    )
    p.add_argument(
        "--tell-rate",
        action="store_true",
        help="tell Loom the link rate (LOOM_LINK_CAPACITY_MBPS) instead of letting it learn it",
    )
    p.add_argument("--ranks", type=int, default=4, help="all-reduce ranks, 2-6 (default 4)")
    p.add_argument("--mib", type=float, default=2.0, help="all-reduce buffer, MiB (default 2)")
    p.add_argument("--iters", type=int, default=3, help="timed all-reduce iterations (default 3)")
    p.add_argument("--run-dir", default="results/demo", help="where logs, plots, summary go")
    p.add_argument(
        "--tls",
        action="store_true",
        help="OpenFlow over TLS, certificates both ways (made in pki/ if missing)",
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep everything running in Mininet's CLI; clean up when it exits",
    )
    args = p.parse_args(argv)
    if not 2 <= args.ranks <= 6 or args.seconds < 4 or args.iters < 1 or args.mib <= 0:
        p.error("need 2 <= --ranks <= 6, --seconds >= 4, --iters >= 1, --mib > 0")
    return run(args)
