"""Real-switch scale benchmark: Loom, started as a user starts it, against a k-ary fat-tree
of real Open vSwitch bridges, control plane only (:mod:`~mininet_scenarios.harness.dummy_ovs`).

    python -m mininet_scenarios.bench.real_switches [--k 8 16] [--out results/real-switches]
        [--consecutive-ids] [--seed 1] [--pairs 200] [--budget 600] [--profile]

``bench.scale`` measures the core over a fake wire; this runs ``ryu-manager
controller/app.py`` (no ``LOOM_*`` variable: only its OpenFlow and REST ports) against
ovs-vswitchd itself, so what Ryu, the sockets, the encoders and the switch's own handling
add is in the figures, and the rules are checked where they are executed. Per size:

1. bring-up: the fabric is built first, the controller started, then every bridge is
   pointed at it in one transaction (t = 0); seconds until REST shows every switch and
   every link (both directions);
2. hosts: each host ARPs for another (a seeded choice) from its dummy interface, again every
   ``--arp-every`` s until Loom's topology lists it: seconds from a host's first ARP until
   it is listed (p50, p95, max), until all are, and how many rounds it took;
3. settled: the flows and groups every bridge holds, polled over OpenFlow (the resolution,
   the mean time between polls, is reported), until they stay unchanged ``--quiet`` s while
   REST lists every link and host; rules and groups per switch (max, mean, by tier, the
   fullest switch);
4. the controller's CPU seconds (utime + stime) and peak RSS (VmHWM), ovs-vswitchd's and
   ovsdb-server's CPU (a busy emulator shows there) and the rest of the machine's; the
   OpenFlow bytes the controller has received but not read (a controller falling behind
   shows there first); p50/p95 of ``GET /loom/v1/health`` during bring-up and at rest;
   links that ever went away in REST (before the cut), the controller log's removals and
   disconnections, and every controller connection ovs-vswitchd dropped;
5. correctness: ``--pairs`` seeded host pairs; each source ARPs for its destination and
   the address Loom answers with (read from the pcap of the source's port, checked against
   REST) is the destination MAC of a UDP packet traced with ``ofproto/trace`` from the
   source's port, patch ports followed: it must leave by the destination's port, untagged,
   with the destination's real MAC restored;
6. a link down: the aggregation-core link most sampled paths cross loses its aggregation
   end (the port is deleted: that bridge sends PortStatus, the core's end stays up with no
   peer, as beside a dead neighbour; ``--cut-both`` deletes both ends); every sampled pair
   is traced again and again until all arrive right: the wrong ones per poll over time.

Results: ``results.json`` (rewritten after every size), ``table.txt`` and
``real_switches.png`` (:mod:`~mininet_scenarios.bench.real_switches_report`); each size's
controller and ovs-vswitchd logs under ``runs/k<k>/``. Everything started is stopped and
the private run directory removed, on error and Ctrl-C too. Wrap the command in ``flock
/tmp/loom-emulation.lock`` where other emulations run (``make bench-real`` does).
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mininet_scenarios.bench import real_switches_parts as parts
from mininet_scenarios.bench import real_switches_report as rep
from mininet_scenarios.bench.headless import write_json
from mininet_scenarios.bench.real_switches_parts import Flow
from mininet_scenarios.harness import dummy_ovs as dov
from mininet_scenarios.harness.client import LabClient
from mininet_scenarios.harness.controller import ControllerProcess
from mininet_scenarios.harness.processes import ChildProcess, free_port
from mininet_scenarios.workloads.flood import process_cpu_seconds
from topologies import fat_tree

PROGRESS_EVERY_S = 5.0


class OverBudget(Exception):
    """A size ran out of its time budget: stop it where it is."""


@dataclass
class Options:
    seed: int = 1
    consecutive_ids: bool = False
    pairs: int = 200
    arp_every: float = 2.0  # s between ARP rounds for hosts not yet learned
    quiet: float = 5.0  # s without a table change: settled
    budget: float = 600.0  # s per size, wall
    recover: float = 60.0  # s to wait for every pair to trace right after the cut
    rest_window: float = 10.0  # s of REST sampling at rest
    sample_every: float = 0.5  # s between the watcher's samples
    settle_limit: float = 180.0  # s to wait for settled tables after every host is learned
    cut_both: bool = False
    profile: bool = False
    out: Path = field(default_factory=lambda: Path("results/real-switches"))


def say(text: str) -> None:
    print(f"[real] {text}", flush=True)


# --------------------------------------------------------------------------- one size


class Size:
    """One fabric size from build to teardown; figures go into ``res`` as they come."""

    def __init__(self, k: int, opt: Options) -> None:
        self.k, self.opt = k, opt
        self.graph = fat_tree(k)
        self.run = opt.out / "runs" / f"k{k}"
        self.rng = random.Random(opt.seed * 1000 + k)
        self.res: dict[str, Any] = {"k": k}
        names = sorted(n for n, d in self.graph.nodes(data=True) if d["kind"] == "host")
        self.pairs: list[tuple[str, str]] = []
        while len(self.pairs) < min(opt.pairs, len(names) * (len(names) - 1)):
            pair = tuple(self.rng.sample(names, 2))
            if pair not in self.pairs:
                self.pairs.append((pair[0], pair[1]))
        self.deadline = self.t0 = self.shown = 0.0
        self.cpu0 = (0.0, 0.0)  # the controller's and ovs-vswitchd's CPU seconds at t = 0
        self.profiler: ChildProcess | None = None

    # ------------------------------------------------------------- helpers
    def rel(self, t: float | None) -> float | None:
        return None if t is None else round(t - self.t0, 2)

    def check(self, watch: rep.Watch, ctl: ControllerProcess, ovs: dov.DummyOvs) -> None:
        ctl.check_alive()
        ovs.check_alive()
        if watch.error:
            raise RuntimeError(f"watcher failed: {watch.error}")
        if time.monotonic() > self.deadline:
            raise OverBudget(f"k={self.k}: budget of {self.opt.budget:g} s spent")

    def progress(self, watch: rep.Watch, phase: str, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.shown < PROGRESS_EVERY_S:
            return
        self.shown = now
        s, n = watch.latest, self.res
        span = s["t"] - self.t0 if s and s["t"] > self.t0 else 0.0
        ctl_pct = 100 * (s["ctl_cpu_s"] - self.cpu0[0]) / span if span else None
        ovs_pct = 100 * (s["ovs_cpu_s"] - self.cpu0[1]) / span if span else None
        say(
            f"k={self.k} +{now - self.t0:6.1f} s {phase}: switches {s.get('switches')}/"
            f"{n['switches']}, links {s.get('links')}/{2 * n['links']}, hosts "
            f"{s.get('hosts')}/{n['hosts']}, flows {s.get('flows')}, groups {s.get('groups')},"
            f" CPU controller {_pct(ctl_pct)} ovs-vswitchd {_pct(ovs_pct)} (mean since t=0),"
            f" OpenFlow unread {s.get('ofp_unread_kib')} KiB"
        )

    def wait(
        self, watch: rep.Watch, ctl: Any, ovs: Any, phase: str, done: Callable[[], bool]
    ) -> None:
        while not done():
            self.check(watch, ctl, ovs)
            self.progress(watch, phase)
            time.sleep(0.1)

    # ------------------------------------------------------------- phases
    def go(self) -> dict[str, Any]:
        opt = self.opt
        if self.run.exists():
            shutil.rmtree(self.run)
        self.run.mkdir(parents=True)
        self.deadline = time.monotonic() + opt.budget
        with dov.DummyOvs(keep_logs=self.run) as ovs:
            t = time.monotonic()
            seed = None if opt.consecutive_ids else opt.seed
            fab = dov.build(ovs, self.graph, seed, capture={a for a, _ in self.pairs})
            self.res.update(
                switches=len(fab.dpids),
                links=len(fab.links),
                hosts=len(fab.hosts),
                dpids="consecutive" if opt.consecutive_ids else f"shuffled (seed {opt.seed})",
                build_s=round(time.monotonic() - t, 2),
            )
            n = (len(fab.dpids), len(fab.links), len(fab.hosts), self.res["build_s"])
            say(f"k={self.k}: %d bridges, %d links, %d hosts built in %.1f s" % n)
            counter = rep.TableCounter(ovs, fab.dpids)
            ofp, api = free_port(), free_port()
            try:
                with (
                    ControllerProcess(
                        "controller/app.py", ofp, log_path=self.run / "ryu.txt", wsapi_port=api
                    ) as ctl,
                    rep.Watch(
                        f"http://127.0.0.1:{api}", ctl.pid or 0, ovs.pid(), counter,
                        opt.sample_every, ofp,
                    ) as watch,
                ):  # fmt: skip
                    try:
                        self.phases(ovs, fab, ctl, watch, ofp)
                    finally:  # what a failed or stopped size got to, its switches still up
                        self.partial(ovs, watch, ofp)
            finally:
                counter.close()
        return self.res

    def partial(self, ovs: dov.DummyOvs, w: rep.Watch, ofp: int) -> None:
        try:
            if self.profiler is not None and self.profiler.proc is not None:
                self.res["profile"] = parts.stop_profiler(self.profiler, self.run)
            if "timeline" not in self.res:
                self.res["logs"] = rep.logs(self.run / "ryu.txt", ovs, ofp)
                self.res["timeline"] = self.timeline(w)
        except Exception as exc:  # a dead switch: keep the error that killed it
            self.res["partial_error"] = f"{type(exc).__name__}: {exc}"

    def phases(
        self, ovs: dov.DummyOvs, fab: dov.OvsFabric, ctl: ControllerProcess, w: rep.Watch, ofp: int
    ) -> None:
        opt, res = self.opt, self.res
        self.profiler = parts.start_profiler(ctl.pid, self.run) if opt.profile else None
        self.cpu0 = (process_cpu_seconds(ctl.pid or 0), process_cpu_seconds(ovs.pid()))
        busy0 = rep.machine_busy_seconds()
        db_pid = ovs.ovsdb.pid if ovs.ovsdb and ovs.ovsdb.pid else 0
        db0 = process_cpu_seconds(db_pid)
        self.t0 = time.monotonic()
        dov.attach(ovs, fab, ofp)
        res["attach_s"] = round(time.monotonic() - self.t0, 3)
        want_links = 2 * len(fab.links)
        t_sw = t_links = None

        def all_up() -> bool:
            nonlocal t_sw, t_links
            s = w.latest
            if t_sw is None and s.get("switches") == len(fab.dpids):
                t_sw = s["t"]
            if t_links is None and (s.get("links") or 0) >= want_links:
                t_links = s["t"]
            return t_sw is not None and t_links is not None

        self.wait(w, ctl, ovs, "bring-up", all_up)
        res["switches_connected_s"], res["links_learned_s"] = self.rel(t_sw), self.rel(t_links)
        self.progress(w, "every switch and link learned", force=True)
        res["arp"] = self.learn_hosts(ovs, fab, ctl, w)
        self.progress(w, "every host learned", force=True)
        t_settled = self.settle(w, ctl, ovs, want_links, len(fab.hosts))
        res["tables_resolution_s"] = w.resolution()
        if self.profiler is not None:
            res["profile"] = parts.stop_profiler(self.profiler, self.run)
        res["tables"] = rep.tables(fab, w.tables)
        s = w.latest
        res["cpu_at_settled"] = {
            "controller_s": round(s["ctl_cpu_s"] - self.cpu0[0], 2),
            "ovs_vswitchd_s": round(s["ovs_cpu_s"] - self.cpu0[1], 2),
        }
        say(f"k={self.k}: settled at {res['settled_s']} s; REST at rest for {opt.rest_window:g} s")
        time.sleep(opt.rest_window)
        up, up_fail = w.latencies(self.t0, t_settled)
        rest, rest_fail = w.latencies(t_settled, time.monotonic())
        res["rest_ms"] = {
            "bring_up": rep.stats([1e3 * x for x in up]) | {"failed": up_fail},
            "at_rest": rep.stats([1e3 * x for x in rest]) | {"failed": rest_fail},
        }
        res["link_drops_before_cut"] = [
            {"t": self.rel(d["t"]), "from": d["from"], "to": d["to"]} for d in w.link_drops
        ]
        res["correctness"] = self.correctness(ovs, fab, ctl, w)
        s = w.latest
        res["controller"] = {
            "cpu_s": round(s["ctl_cpu_s"] - self.cpu0[0], 2),
            "cpu_s_with_start": round(s["ctl_cpu_s"], 2),
            "peak_rss_mib": rep.peak_rss_mib(ctl.pid or 0),
        }
        res["ovs_vswitchd"] = {"cpu_s": round(s["ovs_cpu_s"] - self.cpu0[1], 2)}
        res["ovsdb_server_cpu_s"] = round(process_cpu_seconds(db_pid) - db0, 2)
        ours = res["controller"]["cpu_s"] + res["ovs_vswitchd"]["cpu_s"] + res["ovsdb_server_cpu_s"]
        others = s["busy_cpu_s"] - busy0 - ours
        res["other_processes_cpu_s"] = round(others, 1)  # this bench and whatever else ran
        res["wall_to_end_s"] = self.rel(time.monotonic())
        res["ofp_backlog_kib_max"] = {
            side: max((x[f"ofp_{side}_kib"] for x in w.samples), default=None)
            for side in ("unread", "unsent")
        }
        res["ovs_connected"] = min(x["ofp_connections"] for x in w.samples if x["t"] >= t_settled)
        res["logs"] = rep.logs(self.run / "ryu.txt", ovs, ofp)
        res["timeline"] = self.timeline(w)

    def timeline(self, w: rep.Watch) -> list[dict[str, Any]]:
        return [
            {
                **{k: v for k, v in x.items() if k not in ("t", "rest_s")},
                "t": self.rel(x["t"]),
                "rest_ms": None if x["rest_s"] is None else round(1e3 * x["rest_s"], 1),
            }
            for x in w.samples
            if x["t"] >= self.t0
        ]

    def settle(self, w: rep.Watch, ctl: Any, ovs: Any, links: int, hosts: int) -> float:
        """Until the tables stayed unchanged for ``--quiet`` s while REST listed every link
        and host throughout, for at most ``--settle-limit`` s; returns when they last changed
        (or the limit, with ``settled_s`` None)."""
        whole_since = time.monotonic()
        limit = time.monotonic() + self.opt.settle_limit
        while time.monotonic() < limit:
            self.check(w, ctl, ovs)
            self.progress(w, "settling")
            s = w.latest
            if s.get("links") != links or s.get("hosts") != hosts:
                whole_since = time.monotonic()
            if time.monotonic() - max(w.last_change, whole_since) >= self.opt.quiet:
                self.res["settled_s"] = self.rel(w.last_change)
                return w.last_change
            time.sleep(0.1)
        self.res["settled_s"] = None
        self.res["not_settled_after_s"] = self.rel(time.monotonic())
        say(f"k={self.k}: NOT settled within {self.opt.settle_limit:g} s; measuring it as it is")
        return time.monotonic()

    def learn_hosts(
        self, ovs: dov.DummyOvs, fab: dov.OvsFabric, ctl: ControllerProcess, w: rep.Watch
    ) -> dict[str, Any]:
        """ARP from every host not yet listed, every ``arp_every`` s, until all are."""
        client = LabClient(w.client.base_url, timeout=30.0)
        hosts = sorted(fab.hosts.values(), key=lambda h: h.name)
        ips = [h.ip for h in hosts]
        target = {h.name: self.rng.choice([ip for ip in ips if ip != h.ip]) for h in hosts}
        by_mac = {h.mac: h.name for h in hosts}
        first: dict[str, float] = {}
        learned: dict[str, float] = {}
        per_round: list[int] = []
        topo_s: list[float] = []
        t_start = t_topo = time.monotonic()
        while len(learned) < len(hosts):
            todo = [h for h in hosts if h.name not in learned]
            t_round = time.monotonic()
            for i in range(0, len(todo), 256):  # a busy switch takes these slowly
                chunk = todo[i : i + 256]
                first.update({h.name: time.monotonic() for h in chunk if h.name not in first})
                dov.receive(ovs, [(h.name, parts.arp_request(h, target[h.name])) for h in chunk])
                self.check(w, ctl, ovs)
                self.progress(w, f"ARP round {len(per_round) + 1}, sending")
            self.res.setdefault("arp_send_s", []).append(round(time.monotonic() - t_round, 2))
            per_round.append(len(todo))
            looked = False  # (sending a round may take longer than a round: look once)
            while not looked or (
                time.monotonic() - t_round < self.opt.arp_every and len(learned) < len(hosts)
            ):
                looked = True
                self.check(w, ctl, ovs)
                self.progress(w, f"ARP round {len(per_round)}")
                time.sleep(0.1)
                # The topology (every host and link) only when the watcher's cheap health
                # count says more hosts are known, at most once a second: at k=16 each GET
                # costs the controller tens of milliseconds.
                if (w.latest.get("hosts") or 0) <= len(learned) or time.monotonic() - t_topo < 1:
                    continue
                t_topo = time.monotonic()
                listed = client.topology()["hosts"]
                topo_s.append(time.monotonic() - t_topo)
                for x in listed:
                    name = by_mac.get(x["mac"])
                    if name is not None and name not in learned:
                        learned[name] = t_topo
        delays = [learned[n] - first[n] for n in learned]
        listed = (s["t"] for s in w.samples if (s.get("hosts") or 0) >= len(hosts))
        listed_all = min(next(listed, max(learned.values())), max(learned.values()))
        return {
            "started_s": self.rel(t_start),
            "all_learned_after_s": round(listed_all - t_start, 2),
            "delay_s": rep.stats(delays, 3),
            "rounds": len(per_round),
            "arps_per_round": per_round,
            "topology_get_s": rep.stats(topo_s, 3),
        }

    # ------------------------------------------------------------- correctness
    def correctness(
        self, ovs: dov.DummyOvs, fab: dov.OvsFabric, ctl: ControllerProcess, w: rep.Watch
    ) -> dict[str, Any]:
        pairs = [(fab.hosts[a], fab.hosts[b]) for a, b in self.pairs]
        links = w.latest.get("links")
        handed = self.arp_answers(ovs, fab, pairs, w, ctl)
        listed = {x["mac"]: x["address"] for x in LabClient(w.client.base_url).topology()["hosts"]}
        flows: list[Flow] = []
        for a, b in pairs:
            mac = handed.get((a.name, b.name)) or listed.get(b.mac) or b.mac
            dp_hash = self.rng.getrandbits(32) | 1
            sport, dport = self.rng.randrange(1024, 65536), self.rng.randrange(1, 65536)
            flow = (
                f"udp,in_port={a.ofport},dp_hash={dp_hash:#x},dl_src={a.mac},dl_dst={mac},"
                f"nw_src={a.ip},nw_dst={b.ip},nw_ttl=64,udp_src={sport},udp_dst={dport}"
            )
            flows.append((a, b, flow, mac))
        odp = dov.odp_ports(ovs)
        first = parts.judge(ovs, odp, flows)
        wrong = [
            (f[0].name, f[1].name, v, f[3], br)
            for f, (v, br) in zip(flows, first, strict=True)
            if v
        ]
        out: dict[str, Any] = {
            "pairs": len(pairs),
            "rest_links_when_traced": links,
            "answered_by_arp": len(handed),
            "arp_vs_rest_mismatch": sum(
                1 for (a, b), m in handed.items() if listed.get(fab.hosts[b].mac) != m
            ),
            "traced_right": len(pairs) - len(wrong),
            "wrong": [
                {"src": s, "dst": d, "why": v, "dl_dst": m, "bridges": list(br)}
                for s, d, v, m, br in wrong[:20]
            ],
            "reasons": dict(Counter(v for _, _, v, _, _ in wrong)),
        }
        say(f"k={self.k}: {out['traced_right']}/{len(pairs)} sampled pairs traced right")
        wrong_flows = [(f[0].bridge, f[2]) for f, (v, _) in zip(flows, first, strict=True) if v]
        if wrong_flows:  # the switches' own account of the first few, rule by rule
            texts = ovs.appctl_many("ofproto/trace", [list(f) for f in wrong_flows[:5]])
            (self.run / "wrong_traces.txt").write_text("\n\n".join(texts))
        for s, d, v, m, br in wrong[:5]:
            say(f"  {s} -> {d} ({m}): {v}, through {' '.join(br)}")
        out["link_down"] = self.cut_and_trace(ovs, fab, flows, [p for _, p in first], ctl, w)
        return out

    def arp_answers(
        self,
        ovs: dov.DummyOvs,
        fab: dov.OvsFabric,
        pairs: list[tuple[dov.HostPort, dov.HostPort]],
        w: rep.Watch,
        ctl: ControllerProcess,
    ) -> dict[tuple[str, str], str]:
        """Each source ARPs for its destination; the address in Loom's reply, read from the
        pcap of the source's port (asked again every ``arp_every`` s, for up to 20 s)."""
        got: dict[tuple[str, str], str] = {}
        end = time.monotonic() + 20.0
        while len(got) < len(pairs) and time.monotonic() < end:
            todo = [
                (a.name, parts.arp_request(a, b.ip))
                for a, b in pairs
                if (a.name, b.name) not in got
            ]
            dov.receive(ovs, todo)
            until = time.monotonic() + self.opt.arp_every
            while len(got) < len(pairs) and time.monotonic() < until:
                self.check(w, ctl, ovs)
                time.sleep(0.3)
                got.update(rep.read_answers(fab, pairs))
        return got

    def cut_and_trace(
        self,
        ovs: dov.DummyOvs,
        fab: dov.OvsFabric,
        flows: list[Flow],
        paths: list[tuple[str, ...]],
        ctl: ControllerProcess,
        w: rep.Watch,
    ) -> dict[str, Any]:
        link, users = rep.busiest_uplink(fab, paths)
        (agg, agg_port), (core, core_port) = link
        ends = [(agg, agg_port), (core, core_port)] if self.opt.cut_both else [(agg, agg_port)]
        links_before = w.latest.get("links")
        say(f"k={self.k}: cutting {agg}:{agg_port} - {core}:{core_port} ({users} sampled paths)")
        odp = dov.odp_ports(ovs)  # (before: a port deleted renumbers no other)
        t_cut = time.monotonic()
        for end in ends:
            dov.cut(ovs, fab, end)
        cut_s = round(time.monotonic() - t_cut, 3)
        polls: list[dict[str, Any]] = []
        right_after = None
        while True:
            self.check(w, ctl, ovs)
            t = time.monotonic()
            verdicts = parts.judge(ovs, odp, flows)
            reasons = Counter(v for v, _ in verdicts if v)
            polls.append(
                {
                    "t": round(t - t_cut, 3),
                    "took_s": round(time.monotonic() - t, 3),
                    "wrong": sum(reasons.values()),
                    "reasons": dict(reasons),
                    "examples": [
                        [f[0].name, f[1].name, v, " ".join(path)]
                        for f, (v, path) in zip(flows, verdicts, strict=True)
                        if v
                    ][:3],
                }
            )
            if not reasons:
                right_after = round(time.monotonic() - t_cut, 3)
                break
            if time.monotonic() - t_cut > self.opt.recover:
                break
        before = links_before or 0  # REST's count once both directions of the link went:
        gone = [x["t"] for x in w.samples if x["t"] > t_cut and (x["links"] or 1e9) <= before - 2]
        worst = max((p["wrong"] for p in polls), default=0)
        after = "-" if right_after is None else right_after
        say(f"k={self.k}: every sampled pair right again after {after} s (worst poll: {worst})")
        return {
            "link": f"{agg}:{agg_port} - {core}:{core_port}",
            "ends_deleted": [f"{b}:{p}" for b, p in ends],
            "cut_took_s": cut_s,
            "sampled_paths_over_it": users,
            "right_again_after_s": right_after,
            "worst_poll_wrong": worst,
            "polls": polls,
            "rest_links_dropped_at_s": self.rel(gone[0]) if gone else None,
            "cut_at_s": self.rel(t_cut),
        }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f} %"


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> tuple[list[int], Options]:
    ap = argparse.ArgumentParser(
        prog="python -m mininet_scenarios.bench.real_switches",
        description=(__doc__ or "").splitlines()[0],
    )
    ap.add_argument("--k", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--out", type=Path, default=Path("results/real-switches"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--consecutive-ids", action="store_true", help="dpids 1, 2, ...")
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--arp-every", type=float, default=2.0)
    ap.add_argument("--quiet", type=float, default=5.0, help="s of unchanged tables: settled")
    ap.add_argument("--budget", type=float, default=600.0, help="s per size, wall")
    ap.add_argument("--recover", type=float, default=60.0, help="s to wait after the cut")
    ap.add_argument("--rest-window", type=float, default=10.0)
    ap.add_argument("--settle-limit", type=float, default=180.0)
    ap.add_argument("--cut-both", action="store_true", help="delete both ends of the link")
    ap.add_argument("--profile", action="store_true", help="py-spy on the controller")
    a = vars(ap.parse_args(argv))  # every option but --k is a field of Options
    sizes = a.pop("k")
    if any(k % 2 or not 4 <= k <= 64 for k in sizes):
        ap.error("--k: even numbers from 4 to 64")
    return sizes, Options(**a)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM as Ctrl-C: everything started is stopped on the way out


def main(argv: Sequence[str] | None = None) -> int:
    sizes, opt = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even where started ignoring it
    from mininet_scenarios.bench.patterns_report import loom_version, machine_facts

    opt.out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "benchmark": "real_switches",
        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join(
            ["python -m mininet_scenarios.bench.real_switches", *(argv or sys.argv[1:])]
        ),
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(opt).items()},
        "loom": loom_version(),
        "machine": machine_facts(),
        "sizes": {},
    }
    failed = False
    for k in sorted(sizes):
        if failed:
            doc["sizes"][str(k)] = {"k": k, "skipped": "a smaller size failed"}
            continue
        say(f"k={k}: building the fabric ...")
        t = time.monotonic()
        size = Size(k, opt)
        try:
            size.go()
        except Exception as exc:  # recorded; what it started is stopped already
            size.res["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            say(f"k={k} FAILED: {size.res['error'][:500]}")
            failed = True
        size.res["wall_s"] = round(time.monotonic() - t, 1)
        doc["sizes"][str(k)] = size.res
        write_json(opt.out / "results.json", doc)
    text = rep.table(doc)
    print(text, flush=True)
    (opt.out / "table.txt").write_text(text + "\n")
    png = rep.plot(doc, opt.out / "real_switches.png")
    say(f"results: {opt.out / 'results.json'}, figure: {png}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
