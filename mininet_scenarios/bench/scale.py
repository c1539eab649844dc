"""Controller scale benchmark (``docs/benchmarks.md`` §7): the core alone on generated
fat-trees and dragonflies, over a fast fake wire (:mod:`~mininet_scenarios.bench.scale_wire`).

    python -m mininet_scenarios.bench.scale [--fabrics fat_tree:k=4,fat_tree:k=8,...]
        [--out results/scale] [--budget 600] [--quick]

No Ryu, no sockets, no Mininet: ``controller.conductor.Conductor`` configured as the app
configures it with no ``LOOM_*`` variable and no policy file, fed the events a fabric of
that size sends, in simulated time (0.1 s ticks, as the app). What is measured per size,
each in a subprocess of its own so peak RSS is that size's:

1. bring-up from cold: every switch connects, is read back (empty), discovered by LLDP;
   once every link is seen every host ARPs once; settled when every host is learned
   and no rule was sent for 3 simulated seconds. Core time (the sum of core calls, the
   wire's own work excluded) up to the last rule sent, wall and simulated time;
2. the largest single core call of the bring-up, and its kind;
3. a full recompute on the settled fabric (``Conductor.recompute``): time and messages;
4. one link cut and restored (aggregation-core on fat-trees, a global link on
   dragonflies): each PortStatus call, the next tick, the core time and largest call
   until every switch's routes are planned again (the planning left after a call runs
   in slices, each a call of its own, as the shim runs them), the switches that got rules;
   with ``--walk`` (the default up to ``WALK_UP_TO`` switches) ~200 host pairs, most of
   them across that link, walked through the switches' rules after every call that
   changed them (:mod:`~mininet_scenarios.bench.scale_walk`): looped, lost, delivered;
5. a switch lost (an aggregation switch, a router) and back, empty, until settled;
6. a host moved to a new port of another edge switch: PortStatus down, the new port up,
   its ARP from there;
7. a 16-rank all-reduce job created and deleted;
8. rules per switch by tier; 9. 10 simulated seconds of steady state (polls, LLDP):
   messages and bytes per second both ways; 10. peak RSS and Python's garbage collector.

``--budget`` bounds each size's core time and wall time alike: a size that runs out
stops where it is and says how far it got (``"settled": false`` if during bring-up);
larger sizes of the same family are then skipped. Results: ``results.json`` (rewritten
after every size), ``table.txt`` and ``scale.png``
(:mod:`~mininet_scenarios.bench.scale_report`). No emulation: no lock is needed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from controller import heap
from controller.conductor import Conductor, FabricConfig
from controller.jobspec import JobSpec
from controller.settings import Settings
from mininet_scenarios.bench.scale_report import TARGETS, report
from mininet_scenarios.bench.scale_walk import RerouteWalk
from mininet_scenarios.bench.scale_wire import Tally, Wire
from topologies import by_name, shuffle_ids

FAT_TREES = [f"fat_tree:k={k}" for k in (4, 8, 16, 24, 32, 48)]
DRAGONFLIES = ["dragonfly:a=4,p=2,h=2,g=9", "dragonfly:a=8,p=4,h=4,g=33"]
DRAGONFLIES += ["dragonfly:a=16,p=8,h=4,g=64"]  # 1,024 routers, 8,192 hosts
DEFAULT_FABRICS = FAT_TREES + DRAGONFLIES
QUICK_FABRICS = FAT_TREES[:2]
QUIET_S = 3.0  # simulated seconds without a rule message: settled
STEADY_S = 10.0
SETTLE_LIMIT_S = 600.0  # simulated: a bring-up that takes longer is stuck, not slow
PROGRESS_EVERY_S = 5.0  # wall
JOB_RANKS = 16
# switches: the reroute walk by default (its own time: k=32 12 s; k=48 45 s, and its
# indexes, in this process, would count in the size's peak RSS: --walk for it)
WALK_UP_TO = 1500


class OverBudget(Exception):
    """A size ran out of time (or a bring-up of simulated time): stop it there."""


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def core_config(cluster: bool = False) -> FabricConfig:
    """What ``controller/app.py`` builds with no ``LOOM_*`` variable and no policy file
    (``cluster``: with ``LOOM_CLUSTER`` set, as one instance of a cluster plans; the
    store itself plays no part here)."""
    env = {"LOOM_CLUSTER": "etcd://127.0.0.1:2379"} if cluster else {}
    return Settings.from_env(env).fabric


class Watch:
    """Called after every core call: stops a size over budget, prints progress."""

    def __init__(self, wire: Wire, label: str, budget: float) -> None:
        self.wire, self.label, self.budget = wire, label, budget
        self.started = self.shown = time.perf_counter()
        self.phase = "settle"
        self.walk, self.walked_s = True, 0.0  # walks during a reroute, and their time

    def wall(self) -> float:
        """Wall time of the size, its walks left out (they are the bench's, not the core's)."""
        return time.perf_counter() - self.started - self.walked_s

    def exclude(self, seconds: float) -> None:
        self.walked_s += seconds

    def __call__(self) -> None:
        now = time.perf_counter()
        core = self.wire.total.core_s
        if core > self.budget or self.wall() > self.budget:
            raise OverBudget(f"budget of {self.budget:g} s spent (core {core:.1f} s)")
        if now - self.shown >= PROGRESS_EVERY_S:
            self.shown = now
            say(f"  {self.label} {self.phase}: {self.progress_line()}")

    def progress(self) -> dict[str, Any]:
        w = self.wire
        return {
            "sim_s": w.now,
            "links_seen": w.links_seen(),
            "links_expected": len(w.expected_links),
            "hosts_learned": len(w.hosts) - len(w.missing_hosts()),
            "hosts": len(w.hosts),
            "rules_installed": w.rules_installed,
            "core_s": round(w.total.core_s, 3),
            "wall_s": round(self.wall(), 3),
        }

    def progress_line(self) -> str:
        p = self.progress()
        return (
            f"sim {p['sim_s']:.1f} s, links {p['links_seen']}/{p['links_expected']}, hosts"
            f" {p['hosts_learned']}/{p['hosts']}, rules {p['rules_installed']}, core"
            f" {p['core_s']:.1f} s, wall {p['wall_s']:.1f} s"
        )


class GcMeter:
    """Python's collector, through ``gc.callbacks``: passes per generation, time, and the
    part of it spent inside core calls (which core time therefore includes)."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.passes = [0, 0, 0]
        self.seconds = self.in_core = self.longest = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        spent = time.perf_counter() - self._started
        self.passes[info["generation"]] += 1
        self.seconds += spent
        self.longest = max(self.longest, spent)
        if self.wire.in_core:
            self.in_core += spent

    def as_dict(self) -> dict[str, Any]:
        return {
            "passes_by_generation": self.passes,
            "s": self.seconds,
            "in_core_s": self.in_core,
            "longest_s": self.longest,
        }


def live_links(wire: Wire) -> int:
    """Directed links the core should see now: both ends connected, the cable in."""
    return sum(
        1
        for a, b in wire.expected_links
        if a not in wire.down and a[0] in wire.connected and b[0] in wire.connected
    )


def phase_tally(wire: Wire) -> Tally:
    wire.tally = Tally()
    return wire.tally


def settle(wire: Wire, watch: Watch, cold: bool = False) -> dict[str, Any]:
    """Tick until every live link is seen, hosts the core lost have ARPed (once each)
    and been learned, and no rule was sent for ``QUIET_S`` simulated seconds; ``cold``:
    connect every switch first (in the same tally)."""
    tally, sim0, core0, wall0 = phase_tally(wire), wire.now, wire.total.core_s, time.perf_counter()
    marks: dict[str, float] = {}
    asked: set[str] = set()
    try:
        if cold:
            wire.connect_all()
        while True:
            if "discovered" not in marks and wire.links_seen() >= live_links(wire):
                marks["discovered"] = wire.now - sim0
            if "discovered" in marks:
                missing = [h for h in wire.missing_hosts() if wire.where[h][0] in wire.connected]
                if set(missing) - asked:
                    wire.announce([h for h in missing if h not in asked])
                    asked.update(missing)
                    continue
                if not missing:
                    marks.setdefault("hosts", wire.now - sim0)
                    if wire.now - wire.last_rule_at >= QUIET_S:
                        break
            if wire.now - sim0 > SETTLE_LIMIT_S:
                raise OverBudget(f"not settled after {SETTLE_LIMIT_S:g} simulated seconds")
            wire.step()
    except OverBudget as stop:
        progress = watch.progress()
        return {
            "settled": False,
            "reason": str(stop),
            "progress": progress,
            **marks,
            "tally": tally.as_dict(),
        }
    last_rule = wire.last_rule_at >= sim0
    return {
        "settled": True,
        "sim_s": (wire.last_rule_at if last_rule else sim0) - sim0,
        "core_s": max(0.0, wire.core_at_last_rule - core0) if last_rule else 0.0,
        "wall_s": max(0.0, wire.wall_at_last_rule - wall0) if last_rule else 0.0,
        "detected_sim_s": wire.now - sim0,
        "detected_core_s": tally.core_s,
        "detected_wall_s": time.perf_counter() - wall0,
        "discovered_sim_s": marks.get("discovered"),
        "hosts_sim_s": marks.get("hosts"),
        "hosts_announced": len(asked),
        "rules_installed": wire.rules_installed,
        "tally": tally.as_dict(),
    }


def rules_by_tier(wire: Wire) -> dict[str, Any]:
    """Flows, groups and meters per switch, by graph role, and whether the switches hold
    exactly what the core believes it installed."""
    tiers: dict[str, dict[str, Any]] = {}
    for dpid in sorted(wire.connected):
        role, table = wire.roles[dpid], wire.tables[dpid]
        tier = tiers.setdefault(role, {"switches": 0, "flows": [], "groups": [], "meters": []})
        tier["switches"] += 1
        tier["flows"].append(len(table.flows))
        tier["groups"].append(len(table.groups))
        tier["meters"].append(len(table.meters))
        by_table = tier.setdefault("flows_max_by_table", {})
        counts: dict[int, int] = {}
        for table_id, _, _ in table.flows:
            counts[table_id] = counts.get(table_id, 0) + 1
        for table_id, n in counts.items():
            by_table[str(table_id)] = max(by_table.get(str(table_id), 0), n)
    out: dict[str, Any] = {}
    for role, tier in tiers.items():
        out[role] = {"switches": tier["switches"], "flows_max_by_table": tier["flows_max_by_table"]}
        for what in ("flows", "groups", "meters"):
            values = tier[what]
            out[role][f"{what}_max"] = max(values)
            out[role][f"{what}_mean"] = round(sum(values) / len(values), 1)
    return {
        "tiers": out,
        "flows_max": max((t["flows_max"] for t in out.values()), default=0),
        "groups_max": max((t["groups_max"] for t in out.values()), default=0),
        "mismatched_switches": len(wire.mismatches()),
        "flows_deleted_with_their_group": sum(t.cascaded for t in wire.tables.values()),
        "modifies_of_missing_flows": sum(t.lost_modifies for t in wire.tables.values()),
    }


def steady(wire: Wire, watch: Watch) -> dict[str, Any]:
    """``STEADY_S`` simulated seconds on the settled fabric: the control plane's own load."""
    tally = phase_tally(wire)
    end = wire.now + STEADY_S
    while wire.now < end - 1e-9:
        wire.step()
    per_s = {
        "messages_out": {k: v / STEADY_S for k, v in tally.out_msgs.items()},
        "bytes_out": {k: v / STEADY_S for k, v in tally.out_bytes.items()},
        "messages_in": {k: v / STEADY_S for k, v in tally.in_msgs.items()},
        "bytes_in": {k: v / STEADY_S for k, v in tally.in_bytes.items()},
    }
    totals = {f"{k}_total": sum(v.values()) for k, v in per_s.items()}
    return {
        "per_s": per_s,
        **totals,
        "core_s_per_s": tally.core_s / STEADY_S,
        "tally": tally.as_dict(),
    }


def recompute(wire: Wire, watch: Watch) -> dict[str, Any]:
    tally = phase_tally(wire)
    call = wire.run("recompute", wire.fabric.recompute, wire.now)
    wire.finish()
    return {"call": call.as_dict(), "tally": tally.as_dict()}


def pick_link(wire: Wire) -> tuple[int, int]:
    """An aggregation-core link on a fat-tree, a global link on a dragonfly (the first
    in port order), else any inter-switch link: a port reference at one end."""
    graph = wire.graph
    for a, b, data in sorted(graph.edges(data=True), key=lambda e: (e[0], e[1])):
        roles = {graph.nodes[a].get("role"), graph.nodes[b].get("role")}
        if roles == {"agg", "core"} or data.get("scope") == "global":
            return (int(graph.nodes[a]["dpid"]), int(data["ports"][a]))
    return min(wire.peer)


def link(wire: Wire, watch: Watch) -> dict[str, Any]:
    ref = pick_link(wire)
    walk = RerouteWalk(wire, ref, spent=watch.exclude) if watch.walk else None
    tally = phase_tally(wire)
    if walk is not None:
        walk.start()
    ends = wire.set_link(ref, False)
    tick = wire.step()
    down = {
        "link": [wire.names[ref[0]], wire.names[wire.peer[ref][0]]],
        "ends": [c.as_dict() for c in ends],
        "link_down_s": sum(c.seconds for c in ends),
        "next_tick": tick.as_dict(),
        "tally": tally.as_dict(),
    }
    for _ in range(20):  # 2 s down: nothing more should happen
        wire.step()
    down["walk"] = walk.stop("2 s later") if walk is not None else None
    tally = phase_tally(wire)
    ends = wire.set_link(ref, True)
    up = {
        "ends": [c.as_dict() for c in ends],
        "tally": tally.as_dict(),
        "settle": settle(wire, watch),
    }
    return {"switches": len(wire.connected), "down": down, "up": up}


def switch(wire: Wire, watch: Watch) -> dict[str, Any]:
    roles = ("agg", "router")
    dpid = next((d for d in sorted(wire.roles) if wire.roles[d] in roles), min(wire.roles))
    tally = phase_tally(wire)
    call = wire.disconnect(dpid)
    tick = wire.step()
    down = {"switch": wire.names[dpid], "call": call.as_dict(), "next_tick": tick.as_dict()}
    down["tally"] = tally.as_dict()
    for _ in range(20):
        wire.step()
    tally = phase_tally(wire)
    calls = wire.connect([dpid])
    back = {
        "switch_up": calls[0].as_dict(),
        "switch_state_s": tally.calls["switch_state"].total
        if "switch_state" in tally.calls
        else None,
        "tally": tally.as_dict(),
        "settle": settle(wire, watch),
    }
    return {"down": down, "back": back}


def host_move(wire: Wire, watch: Watch) -> dict[str, Any]:
    """The first host moves to a new port on the last host's switch (another pod or group)."""
    host, far = wire.hosts[0], wire.hosts[-1]
    ask = str(wire.graph.nodes[wire.hosts[1]]["ip"])
    tally = phase_tally(wire)
    calls = wire.move_host(host, wire.where[far][0], ask)
    return {
        "host": host,
        "to": wire.names[wire.where[far][0]],
        "calls": [c.as_dict() for c in calls],
        "host_move_s": sum(c.seconds for c in calls),
        "learned": host not in wire.missing_hosts(),
        "tally": tally.as_dict(),
    }


def job_hosts(wire: Wire, n: int) -> list[str]:
    """``n`` hosts spread over pods (groups): one per group in turn."""
    by_group: dict[Any, list[str]] = {}
    for h in wire.hosts:
        by_group.setdefault(wire.graph.nodes[h].get("group"), []).append(h)
    columns = list(by_group.values())
    spread = [col[i] for i in range(max(map(len, columns))) for col in columns if i < len(col)]
    return spread[:n]


def job(wire: Wire, watch: Watch) -> dict[str, Any]:
    hosts = job_hosts(wire, JOB_RANKS)
    spec = JobSpec("scale-bench", "default", tuple(str(wire.graph.nodes[h]["ip"]) for h in hosts))
    tally = phase_tally(wire)
    create = wire.run("create_job", wire.fabric.create_job, wire.now, spec)
    created = {"ranks": len(hosts), "call": create.as_dict(), "tally": tally.as_dict()}
    tally = phase_tally(wire)
    delete = wire.run("delete_job", wire.fabric.delete_job, spec.name)
    return {"create": created, "delete": {"call": delete.as_dict(), "tally": tally.as_dict()}}


PHASES: list[tuple[str, Callable[[Wire, Watch], dict[str, Any]]]] = [
    ("rules", lambda wire, watch: rules_by_tier(wire)),
    ("steady", steady),
    ("recompute", recompute),
    ("link", link),
    ("switch", switch),
    ("host_move", host_move),
    ("job", job),
]


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run_size(
    spec: str, budget: float, cluster: bool = False, ids: str = "shuffled", walk: bool = True
) -> dict[str, Any]:
    """Every phase on one fabric, in this process; stops at the budget."""
    graph = by_name(spec)
    if ids == "shuffled":
        shuffle_ids(graph, spec)
    fabric = Conductor(core_config(cluster), timer=time.perf_counter)
    wire = Wire(graph, fabric)
    doc: dict[str, Any] = {
        "spec": spec,
        "name": graph.graph.get("name", spec),
        "family": graph.graph.get("kind", spec.partition(":")[0]),
        "switches": len(wire.tables),
        "ids": ids,
        "hosts": len(wire.hosts),
        "links": len(wire.expected_links) // 2,
        "budget_s": budget,
        "rss_before_mib": rss_mib(),
    }
    heap.start()  # as the app does once started: what exists before the first switch
    meter = GcMeter(wire)
    watch = Watch(wire, str(doc["name"]), budget)
    wire.watch, watch.walk = watch, walk
    gc.callbacks.append(meter)
    say(f"{doc['name']}: {doc['switches']} switches, {doc['hosts']} hosts, {doc['links']} links")
    try:
        doc["settle"] = settle(wire, watch, cold=True)
        if not doc["settle"]["settled"]:
            doc["stopped"] = {"phase": "settle", "reason": doc["settle"]["reason"]}
        else:
            doc["rss_settled_mib"] = rss_mib()
            for name, run in PHASES:
                watch.phase = name
                doc[name] = run(wire, watch)
                say(f"  {doc['name']} {name} done: core {wire.total.core_s:.1f} s")
    except OverBudget as stop:
        doc["stopped"] = {"phase": watch.phase, "reason": str(stop), "progress": watch.progress()}
        if watch.phase == "settle":
            doc["settle"] = {"settled": False, "reason": str(stop), "progress": watch.progress()}
    finally:
        gc.callbacks.remove(meter)
    doc.update(
        core_total_s=wire.total.core_s,
        wall_total_s=watch.wall(),
        rss_mib=rss_mib(),
        gc=meter.as_dict(),
        events=dict(wire.view.events),
    )
    return doc


def run_child(
    spec: str, budget: float, cluster: bool = False, ids: str = "shuffled", walk: bool = True
) -> dict[str, Any]:
    """``run_size`` in a subprocess of its own (its peak RSS is that size's alone)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "size.json"
        cmd = [sys.executable, "-m", "mininet_scenarios.bench.scale", "--one", spec]
        cmd += ["--budget", str(budget), "--child-out", str(out)]
        cmd += ["--cluster"] if cluster else []
        cmd += ["--ids", ids, "--walk" if walk else "--no-walk"]
        limit = 3 * budget + 300  # a single core call can outlast the budget
        try:
            proc = subprocess.run(cmd, timeout=limit, check=False)
        except subprocess.TimeoutExpired:
            return {"spec": spec, "error": f"killed after {limit:g} s"}
        if proc.returncode != 0 or not out.exists():
            return {"spec": spec, "error": f"exit status {proc.returncode}"}
        result: dict[str, Any] = json.loads(out.read_text())
        return result


def size_of(spec: str) -> tuple[str, int]:
    graph = by_name(spec)
    kind = str(graph.graph.get("kind", spec))
    return kind, sum(1 for _, d in graph.nodes(data=True) if d["kind"] == "switch")


def write_json(path: Path, doc: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    tmp.replace(path)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m mininet_scenarios.bench.scale",
        description=(__doc__ or "").splitlines()[0],
    )
    ap.add_argument("--fabrics", default=",".join(DEFAULT_FABRICS), help="fabric specs")
    ap.add_argument("--out", type=Path, default=Path("results/scale"))
    ap.add_argument("--budget", type=float, default=600.0, help="core and wall s per size")
    ap.add_argument("--quick", action="store_true", help="fat_tree k=4 and k=8 only")
    ap.add_argument("--keep-going", action="store_true", help="run sizes after one that failed")
    ap.add_argument(
        "--cluster",
        action="store_true",
        help="the core as a cluster instance plans (fresh detours)",
    )
    ap.add_argument(
        "--ids",
        choices=("shuffled", "consecutive"),
        default="shuffled",
        help="datapath ids: random as real switches' (default) or numbered by position",
    )
    ap.add_argument(
        "--walk",
        action=argparse.BooleanOptionalAction,
        help=f"walk host pairs through every slice of the link phase's reroute (default: on"
        f" up to {WALK_UP_TO:,} switches)",
    )
    ap.add_argument("--one", help=argparse.SUPPRESS)  # the child: one size, in this process
    ap.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.fabrics = QUICK_FABRICS if args.quick else split_specs(args.fabrics)
    return args


def split_specs(text: str) -> list[str]:
    """Conductor specs separated by ``;`` or by commas before a generator name (a spec's own
    arguments contain commas: ``fat_tree:k=4,dragonfly:a=4,p=2,h=2,g=9``)."""
    specs: list[str] = []
    for part in text.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        continues = "=" in part or part[:1].isdigit()
        if ":" in part or not specs or not continues:
            specs.append(part)
        else:
            specs[-1] += "," + part
    return specs


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.one:
        write_json(
            args.child_out or Path("size.json"),
            run_size(args.one, args.budget, args.cluster, args.ids, args.walk is not False),
        )
        return 0
    from mininet_scenarios.bench.patterns_report import loom_version

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "benchmark": "scale",
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join(["python -m mininet_scenarios.bench.scale", *(argv or sys.argv[1:])]),
        "budget_s": args.budget,
        "ids": args.ids,
        "config": repr(core_config(args.cluster)),
        "targets": TARGETS,
        "loom": loom_version(),
        "python": sys.version.split()[0],
        "sizes": [],
    }
    failed: dict[str, int] = {}  # family -> switches of the smallest size that failed
    for spec in args.fabrics:
        family, n = size_of(spec)
        if not args.keep_going and family in failed and n >= failed[family]:
            say(f"{spec}: skipped (a {family} of {failed[family]} switches did not finish)")
            doc["sizes"].append({"spec": spec, "switches": n, "skipped": True})
            continue
        say(f"== {spec}")
        walk = n <= WALK_UP_TO if args.walk is None else args.walk
        result = run_child(spec, args.budget, args.cluster, args.ids, walk)
        result.setdefault("switches", n)
        if "error" in result or not result.get("settle", {}).get("settled"):
            failed[family] = min(n, failed.get(family, n))
        doc["sizes"].append(result)
        write_json(out / "results.json", doc)
        report(doc, out)
    text, png = report(doc, out)
    print(text)
    say(f"results: {out / 'results.json'}, {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
