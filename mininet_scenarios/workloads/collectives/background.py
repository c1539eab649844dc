"""Background bulk traffic for the protection scenario: long iperf3 TCP flows, unmarked.

:func:`cross_pod_background` chooses the pairs (every host sends one flow into another pod
and receives one, so every host link and the core carry bulk traffic, never between two
hosts that exchange the job's data); :func:`start_background` and :func:`stop_background`
run them around a collective.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx

from mininet_scenarios import emulation_logger
from mininet_scenarios.harness.processes import alive, kill_pids
from mininet_scenarios.workloads.collectives.hosts import CollectiveError, start_in_host
from mininet_scenarios.workloads.collectives.model import topology_order

if TYPE_CHECKING:
    from mininet_scenarios.harness.network import FabricNet

log = emulation_logger()

BACKGROUND_PORT = 5301
BACKGROUND_CPORT = 30000  # below GLOO_PORTS: the host's NIC filter leaves these in bulk


@dataclass
class BackgroundFlow:
    """One bulk flow as reported: ``mbps`` is the sender's mean over its run (None: no
    output)."""

    src: str
    dst: str
    mbps: float | None


@dataclass
class Bulk:
    """A running bulk flow: its iperf3 server and client PIDs and the client's JSON file."""

    src: str
    dst: str
    port: int
    cport: int
    json: Path
    server_pid: int = 0
    client_pid: int = 0


def _listening(fnet: FabricNet, host: str, ports: set[int]) -> bool:
    out = fnet.host(host).cmd("ss -ltnH")
    return ports <= {int(m.group(1)) for m in re.finditer(r":(\d+)\s", out)}


def client_command(flow: Bulk, ip: str, seconds: float, mss: int | None = None) -> str:
    """The iperf3 client of ``flow`` to ``ip``: JSON report, TCP segments of ``mss`` bytes."""
    return (
        f"iperf3 -c {ip} -p {flow.port} --cport {flow.cport} -t {int(seconds)} -i 1 -J"
        + (f" -M {mss}" if mss else "")
        + f" > {flow.json} 2>&1"
    )


def start_background(
    fnet: FabricNet,
    pairs: Sequence[tuple[str, str]],
    seconds: float,
    out_dir: Path,
    mss: int | None = None,
) -> list[Bulk]:
    """One long bulk (unmarked) iperf3 TCP flow per pair, running up to ``seconds``; stop
    them with :func:`stop_background`. Client ports are fixed (``BACKGROUND_CPORT + i``),
    so ECMP hashes the same flows the same way in every mode compared. ``mss``: the flows'
    TCP segment size (None: as the link MTU allows)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    flows: list[Bulk] = []
    next_port: dict[str, int] = {}
    for i, (src, dst) in enumerate(pairs):
        port = next_port.get(dst, BACKGROUND_PORT)
        next_port[dst] = port + 1
        flows.append(
            Bulk(src, dst, port, BACKGROUND_CPORT + i, out_dir / f"bulk-{src}-{dst}-{port}.json")
        )
    try:
        for f in flows:
            f.server_pid = start_in_host(fnet, f.dst, f"iperf3 -s -1 -p {f.port} > /dev/null 2>&1")
        deadline = time.monotonic() + 10
        for dst in {f.dst for f in flows}:
            ports = {f.port for f in flows if f.dst == dst}
            while not _listening(fnet, dst, ports):
                if time.monotonic() > deadline:
                    raise CollectiveError(f"iperf3 servers on {dst} did not listen on {ports}")
                time.sleep(0.05)
        for f in flows:
            ip = fnet.graph.nodes[f.dst]["ip"]
            f.client_pid = start_in_host(fnet, f.src, client_command(f, ip, seconds, mss))
    except BaseException:
        stop_background(flows)
        raise
    log.info("collective: %d background bulk flows started", len(flows))
    return flows


def stop_background(flows: Sequence[Bulk]) -> list[BackgroundFlow]:
    """SIGTERM the clients (iperf3 then writes its JSON), then the servers; per-flow Mbit/s."""
    kill_pids([f.client_pid for f in flows if f.client_pid and alive(f.client_pid)], grace=3.0)
    kill_pids([f.server_pid for f in flows if f.server_pid and alive(f.server_pid)], grace=1.0)
    out = []
    for f in flows:
        mbps = None
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            text = f.json.read_text()
            doc = json.loads(text[text.find("{") :])
            iv = [(i["sum"]["seconds"], i["sum"]["bytes"]) for i in doc.get("intervals", [])]
            secs = sum(s for s, _ in iv)
            mbps = 8 * sum(b for _, b in iv) / secs / 1e6 if secs > 0 else None
        out.append(BackgroundFlow(f.src, f.dst, mbps))
    return out


def cross_pod_background(
    graph: nx.MultiGraph,
    hosts: Sequence[str],
    avoid: Sequence[tuple[str, str]] = (),
    seed: int = 0,
) -> list[tuple[str, str]]:
    """One bulk flow from every host to a host in another pod (``group``), each host
    receiving exactly one: every host uplink and downlink and the core carry bulk traffic.

    ``avoid``: host pairs that must not carry a bulk flow in either direction, e.g. the
    job's own pairs. Loom identifies a job's traffic by host pair, so a bulk flow between
    two ranks that exchange collective data would be marked as the job's and compete with
    it inside the collective class. The first choice is "same position in the next pod";
    if that hits a pair to avoid, a seeded search finds another permutation."""
    group = {h: graph.nodes[h].get("group") for h in hosts}
    banned = {tuple(p) for p in avoid} | {(b, a) for a, b in avoid}

    def ok(pairs: Sequence[tuple[str, str]]) -> bool:
        return all(group[a] != group[b] and (a, b) not in banned for a, b in pairs)

    by_group: dict[Any, list[str]] = {}
    for h in topology_order(graph, hosts):
        by_group.setdefault(group[h], []).append(h)
    groups = list(by_group)
    first = []
    for gi, g in enumerate(groups):
        peers = by_group[groups[(gi + 1) % len(groups)]]
        first += [(h, peers[i % len(peers)]) for i, h in enumerate(by_group[g])]
    if ok(first) and len({b for _, b in first}) == len(first):
        return first
    rng = random.Random(seed)
    dsts = list(hosts)
    for _ in range(20000):
        rng.shuffle(dsts)
        pairs = list(zip(hosts, dsts, strict=True))
        if ok(pairs):
            return pairs
    raise ValueError("no bulk permutation across pods avoids the given pairs")
