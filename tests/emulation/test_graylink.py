"""A gray link on real switches, met as a user meets one: a plain leaf-spine (no class
tree, the kernel's queues), the controller started as the README says with no ``LOOM_*``
hint, one leaf-spine cable shaped to a quarter of the others both ways while its ports
report the same speed. Two TCP flows leave the leaf together; the one on the slow cable is
held at a quarter rate. Loom must find the cable from its own readings (the LLDP frames it
sends wait in the slow port's queue), move the flow off, find it degraded, say so in the
API, the metrics and the log, and mark nothing else."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mininet_scenarios.bench.graylink import shaped
from mininet_scenarios.bench.graylink_report import link_label, marked_links
from mininet_scenarios.harness.metrics import sample, scrape
from mininet_scenarios.harness.stack import LoomStack
from mininet_scenarios.workloads.iperf import iperf3_flows
from topologies import leaf_spine

pytestmark = pytest.mark.emulation
RATE = 4.0  # Mbit/s on every link but the slow one
SLOW = ("leaf1", "spine1")
SECONDS = 25  # the flows' length: found in about 8 s on an idle machine
CPORT = 47100  # the flows' client ports: CPORT, CPORT + 1


@pytest.fixture(scope="module")
def gray(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomStack]:
    graph = shaped(leaf_spine(2, 2, 2, rate_mbps=RATE), SLOW, 0.25)
    with LoomStack(graph, tmp_path_factory.mktemp("loom-graylink")) as stack:
        assert stack.net.pingall(timeout=2.0).loss_pct == 0.0
        yield stack


def _slow_labels(stack: LoomStack) -> set[str]:
    a, b = SLOW
    ports = next(iter(stack.net.graph[a][b].values()))["ports"]
    return {f"{a}:{ports[a]}->{b}:{ports[b]}", f"{b}:{ports[b]}->{a}:{ports[a]}"}


def _data(flow: dict[str, Any]) -> bool:
    """One of the measured flows (not iperf3's control connection: a mouse may take the
    slow cable, which has room for it)."""
    return any(f":{CPORT + i}->" in flow["flow"] for i in range(2))


def _climbs(path: list[str], alias: dict[str, str]) -> bool:
    """Whether a flow's pinned path goes up the slow cable (the way its data goes)."""
    names = [alias.get(x, x) for x in path]
    return any((u, v) == SLOW for u, v in itertools.pairwise(names))


def _watch(stack: LoomStack, names: dict[int, str], out: list[dict[str, Any]]) -> threading.Event:
    """Poll the topology every half second into ``out`` until the event is set."""
    stop = threading.Event()
    alias = {f"{dpid:016x}": n for dpid, n in names.items()}

    def loop() -> None:
        while not stop.wait(0.5):
            try:
                topo = stack.api.get("/loom/v1/topology")
                flows = stack.api.get("/loom/v1/flows").get("flows", [])
            except Exception as exc:  # a poll lost under load, not the run
                out.append({"error": repr(exc)})
                continue
            transits = {
                link_label(x["src"], x["dst"], names): x["lldp_transit_s"]
                for x in topo["links"]
                if x["lldp_transit_s"] is not None
            }
            up = [f["flow"] for f in flows if _data(f) and _climbs(f.get("path") or [], alias)]
            out.append({"marks": marked_links(topo, names), "transit": transits, "on_slow": up})

    threading.Thread(target=loop, name="graylink-watch", daemon=True).start()
    return stop


def test_a_slow_cable_is_found_from_its_queue_avoided_and_said(gray: LoomStack) -> None:
    names = {int(d["dpid"]): n for n, d in gray.net.graph.nodes(data=True) if d["kind"] == "switch"}
    slow, polls = _slow_labels(gray), list[dict[str, Any]]()
    stop = _watch(gray, names, polls)
    try:
        run = iperf3_flows(gray.net, [("h1", "h3"), ("h2", "h4")], SECONDS, cport_base=CPORT)
    finally:
        stop.set()
    seen = [p for p in polls if "marks" in p]
    marked = {label: src for p in seen for label, src in p["marks"].items()}
    assert seen, f"no poll answered: {polls[-3:]}"
    assert "degraded" in {marked.get(label) for label in slow}, (marked, seen[-1])
    assert set(marked) <= slow, f"healthy directions marked: {set(marked) - slow}"
    # the slow cable's frames waited where no other link's did
    up = max(p["transit"].get(label, 0.0) for p in seen for label in slow)
    others = max(v for p in seen for label, v in p["transit"].items() if label not in slow)
    assert up > 2 * others and up > 0.05, (up, others)
    # a flow was sent up it first (else nothing could be found), and neither is by the end
    crossed = [p["on_slow"] for p in seen]
    assert any(crossed) and not any(crossed[-4:]), [(i, c) for i, c in enumerate(crossed)]
    assert len(run.flows) == 2 and all(f.mbps > 0 for f in run.flows), run.flows
    metrics = scrape(gray.metrics_url)
    assert sample(metrics, "loom_degraded_link_verdicts_total", verdict="degraded") >= 1
    assert sample(metrics, "loom_link_capacity_bits_per_second", source="degraded") > 0
    assert "degraded: carries" in gray.controller_log()
