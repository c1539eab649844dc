"""The shared part of ``make demo``: the :class:`Demo` every step runs on, pure helpers
(the tenant split, the colliding pair, when both uplinks are busy) that are tested
without a fabric, and the first two steps:

* :func:`step_discovery`: discovery time and a pingall that follows the tenants.
* :func:`step_collision`: two elephants hashing would put on one uplink, placed apart by
  Loom at their first packet.

Step 3 is :mod:`mininet_scenarios.demo.jobs`, step 4 :mod:`mininet_scenarios.demo.attack`.
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx

from mininet_scenarios.harness.client import LoomApiError
from mininet_scenarios.workloads.iperf import iperf3_flows

if TYPE_CHECKING:
    from mininet_scenarios.harness.prometheus import PrometheusProcess
    from mininet_scenarios.harness.stack import LoomStack

CPORT = 40000  # both elephants' client port: equal ports, so only addresses are hashed


def say(text: str) -> None:
    print(f"[loom demo] {text}", flush=True)


# --------------------------------------------------------------------------- pure helpers


def tenants_of(
    graph: nx.MultiGraph, names: Sequence[str] = ("research", "production")
) -> dict[str, list[str]]:
    """The hosts split into ``len(names)`` tenants by pod: the first pods to the first name."""
    hosts = sorted(
        (n for n, d in graph.nodes(data=True) if d["kind"] == "host"),
        key=lambda h: graph.nodes[h]["index"],
    )
    pods = sorted({graph.nodes[h]["group"] for h in hosts})
    per = max(1, len(pods) // len(names))
    out: dict[str, list[str]] = {n: [] for n in names}
    for h in hosts:
        i = min(len(names) - 1, pods.index(graph.nodes[h]["group"]) // per)
        out[names[i]].append(h)
    return out


def policy_yaml(graph: nx.MultiGraph, tenants: dict[str, list[str]]) -> str:
    lines = ["version: 1", "tenants:"]
    for name, members in tenants.items():
        lines += [f"  - name: {name}", "    hosts:"]
        for h in members:
            d = graph.nodes[h]
            lines.append(f'      - {{mac: "{d["mac"]}", ip: {d["ip"]}}}')
    return "\n".join(lines) + "\n"


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _addr(graph: nx.MultiGraph, h: str) -> bytes:
    d = graph.nodes[h]
    return bytes.fromhex(d["mac"].replace(":", "")) + ipaddress.IPv4Address(d["ip"]).packed


def colliding_pair(
    graph: nx.MultiGraph, allowed: Sequence[str] | None = None
) -> tuple[tuple[str, str], tuple[str, str]]:
    """Two flows from hosts on one edge switch to two hosts in another pod whose MAC and IP
    pairs XOR to the same value: with equal ports, Open vSwitch's select group (which
    hashes source XOR destination) sends both up the same uplink."""
    hosts = sorted(
        allowed or (n for n, d in graph.nodes(data=True) if d["kind"] == "host"),
        key=lambda h: graph.nodes[h]["index"],
    )
    by_edge: dict[str, list[str]] = {}
    for h in hosts:
        by_edge.setdefault(graph.nodes[h]["switch"], []).append(h)
    for senders in by_edge.values():
        for s1, s2 in itertools.combinations(senders, 2):
            pod = graph.nodes[s1]["group"]
            far = [h for h in hosts if graph.nodes[h]["group"] != pod]
            for d1, d2 in itertools.permutations(far, 2):
                x1 = _xor(_addr(graph, s1), _addr(graph, d1))
                if x1 == _xor(_addr(graph, s2), _addr(graph, d2)):
                    return (s1, d1), (s2, d2)
    raise ValueError("no pair of flows hashes onto one uplink")


def uplinks(graph: nx.MultiGraph, edge: str) -> dict[int, str]:
    """``port -> aggregation switch`` for an edge switch's uplinks."""
    out = {}
    for _, other, d in graph.edges(edge, data=True):
        if graph.nodes[other]["kind"] == "switch":
            out[int(d["ports"][edge])] = other
    return dict(sorted(out.items()))


def traffic_start(samples: Sequence[tuple[float, float, float]], rate: float) -> float:
    """When the uplinks first carry a third of ``rate`` together (iperf3 has started)."""
    return next((t for t, a, b in samples if a + b > rate / 3), 0.0)


def both_busy_time(
    samples: Sequence[tuple[float, float, float]], rate: float, share: float = 0.6
) -> float | None:
    """When both uplinks first carry more than ``share`` of ``rate`` (the two flows run
    apart); ``samples`` are ``(t, Mbit/s on uplink A, Mbit/s on uplink B)``."""
    return next((t for t, a, b in samples if a > share * rate and b > share * rate), None)


ABSENT = "absent"


def transitions(states: Sequence[Any]) -> list[list[str] | None]:
    """A flow's path as ``GET /loom/v1/flows`` showed it poll after poll, reduced to its
    changes: ``None`` while hashed by ECMP, a switch list once pinned. Polls where the flow
    was not listed are skipped, and so is the unpinning after the last pinned path (the
    flow ended)."""
    out: list[list[str] | None] = []
    for state in states:
        if state == ABSENT:
            continue
        value = list(state) if state is not None else None
        if not out or out[-1] != value:
            out.append(value)
    while len(out) > 1 and out[-1] is None and any(x is not None for x in out):
        out.pop()
    return out


def split_series(
    series: Sequence[float], interval: float, at: float
) -> tuple[list[float], list[float]]:
    """A flow's per-interval rates before ``at`` seconds (without the first interval, slow
    start) and after it (without the next two, while the moved flow ramps up)."""
    cut = int(at / interval)
    pre = list(series[1:cut]) or list(series[:1])
    post = list(series[cut + 2 :]) or list(series[-1:])
    return pre, post


# --------------------------------------------------------------------------- the live demo


@dataclass
class Demo:
    stack: LoomStack
    prom: PrometheusProcess
    rate: float
    tenants: dict[str, list[str]]
    summary: dict[str, Any] = field(default_factory=dict)
    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    marks: dict[str, float] = field(default_factory=dict)  # wall-clock times for the plots

    def check(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append((name, ok, detail))
        say(f"check {'PASSED' if ok else 'FAILED'}: {name} ({detail})")
        return ok

    def ip(self, h: str) -> str:
        return str(self.stack.graph.nodes[h]["ip"])

    def mac(self, h: str) -> str:
        return str(self.stack.graph.nodes[h]["mac"])

    def addresses(self) -> dict[str, str]:
        """``host -> Loom address`` of every host Loom knows (``GET /loom/v1/topology``):
        what its tenant peers learn by ARP and send to (a frame to a host's real MAC is
        routed nowhere)."""
        names = {self.mac(h): h for h in self.stack.net.host_names}
        return {
            names[host["mac"]]: str(host["address"])
            for host in self.stack.api.topology()["hosts"]
            if host["mac"] in names and host.get("address")
        }

    def address(self, h: str) -> str:
        """``h``'s Loom address (see :meth:`addresses`)."""
        address = self.addresses().get(h)
        if address is None:
            raise LookupError(f"Loom does not know {h} ({self.mac(h)})")
        return address

    def tenant(self, h: str) -> str | None:
        return next((t for t, m in self.tenants.items() if h in m), None)

    def metric(self, expr: str) -> dict[str, float]:
        """An instant Prometheus query: ``joined label values -> value``."""
        return {
            ",".join(v for k, v in sorted(r["metric"].items()) if k != "__name__") or "": float(
                r["value"][1]
            )
            for r in self.prom.query(expr)
        }


def step_discovery(demo: Demo) -> None:
    st = demo.stack
    topo = st.api.topology()
    demo.summary["discovery_s"] = round(st.discovery_seconds, 1)
    demo.summary["switches"], demo.summary["links"] = len(topo["switches"]), len(topo["links"])
    say(
        f"Loom learned {len(topo['switches'])} switches and {len(topo['links'])} directed links"
        f" by signed LLDP in {st.discovery_seconds:.1f} s, with no topology file"
    )
    say("pingall: every ordered host pair; the policy allows only pairs within a tenant ...")
    ping = st.net.pingall(timeout=2.0)
    leaked, missing = [], []
    for (src, dst), r in ping.pairs.items():
        same = demo.tenant(src) == demo.tenant(dst)
        if r.ok and not same:
            leaked.append((src, dst))
        elif same and not r.ok:
            missing.append((src, dst))
    for src, dst in list(missing):  # one lost ping on a busy machine is no failure: retry
        if "0 received" not in st.net.host(src).cmd(f"ping -n -q -c3 -i0.2 -W1 {demo.ip(dst)}"):
            missing.remove((src, dst))
    same_pairs = sum(1 for s, d in ping.pairs if demo.tenant(s) == demo.tenant(d))
    answered = same_pairs - len(missing)
    demo.summary["pingall_same_tenant"] = f"{answered}/{same_pairs}"
    demo.summary["pingall_cross_tenant_leaks"] = len(leaked)
    say(
        f"pingall in {ping.seconds:.1f} s: {answered}/{same_pairs} same-tenant pairs answered,"
        f" {len(leaked)}/{len(ping.pairs) - same_pairs} cross-tenant pairs answered"
    )
    demo.check("pingall within tenants", not missing, f"{len(missing)} lost: {missing[:4]}")
    demo.check("no pingall across tenants", not leaked, f"{len(leaked)} leaked: {leaked[:4]}")


def _flows_view(demo: Demo, keys: dict[str, tuple[str, str]], raw: list[Any]) -> dict[str, Any]:
    """``label -> path (or None)`` for our flows in ``GET /loom/v1/flows``; the whole
    answer is appended to ``raw``."""
    try:
        body = demo.stack.api.get("/loom/v1/flows")
    except (OSError, LoomApiError):
        return {}
    raw.append(body)
    out: dict[str, Any] = {}
    for f in body["flows"]:
        for label, (src, dst) in keys.items():
            # the data stream (the client port we chose), not iperf3's control connection
            if f["flow"].startswith(f"tcp:{demo.ip(src)}:{CPORT}->{demo.ip(dst)}:"):
                out[label] = f["path"]
    return out


def step_collision(demo: Demo, seconds: float) -> None:
    """Two elephants that ECMP hashing alone puts on one uplink: Loom pins each at its
    first packet onto the least-loaded path, so they never share one."""
    st, rate = demo.stack, demo.rate
    a, b = colliding_pair(st.graph, demo.tenants["research"])
    edge = st.graph.nodes[a[0]]["switch"]
    ports = list(uplinks(st.graph, edge))[:2]
    names = uplinks(st.graph, edge)
    keys = {f"{a[0]}->{a[1]}": a, f"{b[0]}->{b[1]}": b}
    say(
        f"two {seconds:g} s iperf3 elephants {a[0]}->{a[1]} and {b[0]}->{b[1]}, same client port:"
        f" their addresses XOR alike, so {edge}'s ECMP hash alone would put both on one uplink;"
        " Loom pins each flow at its first packet onto the least-loaded path"
    )
    reroutes0 = sum(demo.metric("sum by (reason) (loom_reroutes_total)").values())
    samples, paths, raw, run = _sample_uplinks(demo, edge, ports, keys, [a, b], seconds)
    write_json(st.run_dir / "flows-during-collision.json", raw)
    start = traffic_start(samples, rate)
    apart = both_busy_time(samples, rate)
    if apart is not None:
        demo.marks["apart"] = demo.marks["collision_start"] + apart
    print(f"  {'t (s)':>6}  " + "  ".join(f"{edge}->{names[p]:<6}" for p in ports))
    for i, (t, x, y) in enumerate(s for s in samples if s[0] >= start - 0.5):
        if i < 10 or t == apart or i % 4 == 0:
            note = "  <- both uplinks busy" if t == apart else ""
            print(f"  {t:6.2f}  {x:10.2f}  {y:10.2f}   Mbit/s{note}")
    history = {label: transitions([v.get(label, ABSENT) for _, v in paths]) for label in keys}
    for label, states in history.items():
        told = [" ".join(x) if x else "hashed by ECMP (not pinned)" for x in states]
        print(f"  GET /loom/v1/flows {label}: " + "  ->  ".join(told or ["not seen"]))
    rows = {}
    for f, label in zip(run.flows, keys, strict=True):
        _, steady = split_series(f.series, 0.25, 1.0)  # after the first second
        rows[label] = {
            "steady_mbps": round(statistics.fmean(steady), 2) if steady else None,
            "mean_mbps": round(f.mbps, 2),
        }
        say(f"{label}: {rows[label]['steady_mbps']} Mbit/s after its first second")
    time.sleep(2.5)  # two scrapes, so Prometheus has the last counters
    reroutes = demo.metric("sum by (reason) (loom_reroutes_total)")
    placed = demo.metric("loom_flows_placed_total")
    delta = sum(reroutes.values()) - reroutes0
    after = round(apart - start, 2) if apart is not None else None
    demo.summary["collision"] = {
        "flows": rows,
        "apart_after_s": after,
        "uplink": f"{edge}->{names[ports[0]]}/{names[ports[1]]}",
        "paths": history,
        "loom_reroutes_total": reroutes,
        "loom_flows_placed_total": sum(placed.values()),
    }
    say(f"loom_reroutes_total by reason: {reroutes} (+{delta:g} during this step)")
    demo.check(
        "placed apart from the first packet",
        after is not None
        and after <= 1.5
        and all(states and states[0] is not None for states in history.values()),
        f"both uplinks busy {after} s after traffic started; first paths"
        f" {[states[0] if states else None for states in history.values()]}",
    )
    demo.check(
        "both elephants near link rate",
        all((r["steady_mbps"] or 0) > 0.75 * rate for r in rows.values()),
        f"{[r['steady_mbps'] for r in rows.values()]}",
    )


def _sample_uplinks(
    demo: Demo,
    edge: str,
    ports: list[int],
    keys: dict[str, tuple[str, str]],
    pairs: list[tuple[str, str]],
    seconds: float,
) -> tuple[list[tuple[float, float, float]], list[tuple[float, dict[str, Any]]], list[Any], Any]:
    """Run the iperf3 pairs while the edge's two uplinks and the flows API are sampled
    every 0.25 s."""
    st = demo.stack
    samples: list[tuple[float, float, float]] = []
    paths: list[tuple[float, dict[str, Any]]] = []
    raw: list[Any] = []
    stop = threading.Event()

    def sample() -> None:
        last: tuple[float, dict[int, Any]] | None = None
        while not stop.is_set():
            now, c = time.monotonic(), st.net.port_counters(edge)
            if last is not None:
                dt = now - last[0]
                r = [8 * (c[p].tx_bytes - last[1][p].tx_bytes) / dt / 1e6 for p in ports]
                samples.append((now - t0, r[0], r[1]))
            last = (now, c)
            paths.append((now - t0, _flows_view(demo, keys, raw)))
            time.sleep(0.25)

    t0 = time.monotonic()
    demo.marks["collision_start"] = time.time()
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        run = iperf3_flows(
            st.net, pairs, seconds=seconds, interval=0.25, extra_args=("--cport", str(CPORT))
        )
    finally:
        stop.set()
        thread.join()
    demo.marks["collision_end"] = time.time()
    return samples, paths, raw, run


def write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=1, default=str))
