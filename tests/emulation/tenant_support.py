"""Shared by the tenant emulation tests (attacks, reload, caps): the fabric, the policy
file, checks and the report.

Three tenants on a k=4 fat-tree at 10 Mbit/s: red h1-h6, blue h7-h11, green h12-h15; h16
is in no tenant. Node names carry a ``t`` prefix (``th1``, ``te1_1``...) so this fabric
never collides with a fat-tree another emulation runs at the same time; tests name hosts by
number through :func:`h`. Each test module builds its own fabric (``tenant_loom`` in
``conftest.py``) and records its figures with :class:`Report`, which writes
``results/tenants/<module>.json`` and prints them (``pytest -s``).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import networkx as nx

from mininet_scenarios.harness.client import LoomApiError
from mininet_scenarios.harness.stack import LoomStack
from topologies import fat_tree
from topologies.graph import prefixed

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS = REPO_ROOT / "results" / "tenants"
PREFIX = "t"
RATE = 10.0
BLUE_CAP = 3.0
TENANTS = {"red": range(1, 7), "blue": range(7, 12), "green": range(12, 16)}  # h16: none
MOVED = {"red": range(1, 7), "blue": range(7, 11), "green": range(11, 16)}  # h11 -> green


def h(i: int) -> str:
    """The node name of fat-tree host ``h<i>``."""
    return f"{PREFIX}h{i}"


def tenant_graph() -> nx.MultiGraph:
    return prefixed(fat_tree(4, rate_mbps=RATE), PREFIX)


# --------------------------------------------------------------------------- policy


def policy_yaml(
    graph: nx.MultiGraph, tenants: dict[str, range], caps: dict[str, float] | None = None
) -> str:
    lines = ["version: 1", "tenants:"]
    for name, members in tenants.items():
        lines += [f"  - name: {name}", "    hosts:"]
        for i in members:
            node = graph.nodes[h(i)]
            lines.append(f'      - {{mac: "{node["mac"]}", ip: {node["ip"]}}}')
        if caps and name in caps:
            lines.append(f"    bandwidth_mbps: {caps[name]:g}")
    return "\n".join(lines) + "\n"


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """:func:`write_atomically` for any bytes (a hostile file need not be text)."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def policy_path(stack: LoomStack) -> Path:
    return stack.run_dir / "policy.yaml"


def policy_status(stack: LoomStack) -> dict[str, Any]:
    return dict(stack.api.get("/loom/v1/policy"))


def wait_status(stack: LoomStack, key: str, above: int, timeout: float = 10.0) -> dict[str, Any]:
    """The policy status once ``status[key]`` exceeds ``above`` (the watcher polls every 1 s)."""
    deadline = time.monotonic() + timeout
    while True:
        status = policy_status(stack)
        if status[key] > above:
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"{key} stayed at {status[key]} for {timeout} s: {status}")
        time.sleep(0.1)


def ensure_policy(stack: LoomStack, text: str) -> None:
    """Put ``text`` in force (a no-op when it already is)."""
    path = policy_path(stack)
    status = policy_status(stack)
    if path.read_text() != text or not status["last_reload_ok"]:
        write_atomically(path, text)
        wait_status(stack, "reloads_ok", status["reloads_ok"])


@contextmanager
def tenant_stack(run_dir: Path) -> Iterator[LoomStack]:
    """Loom on the tenant fabric with :data:`TENANTS` in force from the start."""
    graph = tenant_graph()
    policy = run_dir / "policy.yaml"
    policy.write_text(policy_yaml(graph, TENANTS))
    with LoomStack(graph, run_dir, env={"LOOM_POLICY": str(policy)}) as stack:
        yield stack


# --------------------------------------------------------------------------- hosts


def host_addr(stack: LoomStack, i: int) -> tuple[str, str]:
    """(MAC, IP) of host ``h<i>``."""
    node = stack.graph.nodes[h(i)]
    return str(node["mac"]), str(node["ip"])


def host_ip(stack: LoomStack, i: int) -> str:
    return host_addr(stack, i)[1]


def loom_addresses(stack: LoomStack) -> dict[int, str]:
    """``i -> Loom address`` of every host ``h<i>`` Loom knows (``GET /loom/v1/topology``):
    the MAC its tenant peers learn by ARP and send to. A frame to a host's real MAC is
    routed nowhere."""
    number = {host_addr(stack, i)[0]: i for i in range(1, 17)}
    return {
        number[host["mac"]]: str(host["address"])
        for host in stack.api.topology()["hosts"]
        if host["mac"] in number and host.get("address")
    }


def loom_address(stack: LoomStack, i: int, timeout: float = 10.0) -> str:
    """``h<i>``'s Loom address; a host Loom has not heard from yet pings a tenant peer
    first (its ARP is how Loom learns it)."""
    deadline = time.monotonic() + timeout
    while True:
        address = loom_addresses(stack).get(i)
        if address is not None:
            return address
        if time.monotonic() > deadline:
            raise AssertionError(f"Loom does not know h{i} after {timeout:g} s")
        mine = next((m for m in TENANTS.values() if i in m), range(0))
        peer = next((j for j in mine if j != i), None)
        if peer is None:
            time.sleep(0.5)
        else:
            ping_once(stack, i, peer)


def tenant_of(tenants: dict[str, range], host: str) -> str | None:
    num = int(host.removeprefix(PREFIX)[1:])
    return next((t for t, members in tenants.items() if num in members), None)


def ping_ok(stack: LoomStack, src: int, dst: int, count: int = 2) -> bool:
    out = stack.net.host(h(src)).cmd(f"ping -n -q -c {count} -i 0.2 -W 1 {host_ip(stack, dst)}")
    m = re.search(r"(\d+) received", out)
    return bool(m and int(m.group(1)) > 0)


def ping_once(stack: LoomStack, src: int, dst: int, wait: float = 0.5) -> bool:
    """One echo request, ``wait`` seconds for the reply (a quick check between steps)."""
    out = stack.net.host(h(src)).cmd(f"ping -n -q -c 1 -W {wait:g} {host_ip(stack, dst)}")
    m = re.search(r"(\d+) received", out)
    return bool(m and int(m.group(1)) > 0)


def check_pingall(stack: LoomStack, tenants: dict[str, range], timeout: float = 1.0) -> int:
    """Every pair in one tenant answers, no other pair does; returns the answered count."""
    result = stack.net.pingall(timeout=timeout)
    leaked, missing = [], []
    for (src, dst), ping in result.pairs.items():
        mine = tenant_of(tenants, src)
        same = mine is not None and mine == tenant_of(tenants, dst)
        if ping.ok and not same:
            leaked.append((src, dst))
        elif same and not ping.ok:
            missing.append((src, dst))
    assert not leaked, f"cross-tenant pairs answered: {leaked}"
    # A single lost ping is no isolation failure: a missing pair gets three more tries.
    number = {h(i): i for i in range(1, 17)}
    recovered = [p for p in missing if ping_ok(stack, number[p[0]], number[p[1]], count=3)]
    assert recovered == missing, (
        f"intra-tenant pairs failed: {sorted(set(missing) - set(recovered))}"
    )
    return sum(1 for p in result.pairs.values() if p.ok) + len(recovered)


def scrape(stack: LoomStack) -> dict[tuple[str, str], float]:
    """``(sample name, sorted label values) -> value`` from the metrics endpoint."""
    with urllib.request.urlopen(stack.metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
        if m:
            labels = ",".join(sorted(re.findall(r'="([^"]*)"', m.group(2) or "")))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def poll_health(stack: LoomStack, stop: threading.Event, out: list[float]) -> None:
    """Time ``GET health`` every 100 ms until ``stop`` (inf: no answer)."""
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            stack.api.health()
        except (OSError, LoomApiError):
            out.append(float("inf"))
        else:
            out.append((time.monotonic() - t0) * 1e3)
        stop.wait(0.1)


# --------------------------------------------------------------------------- report


class Report(dict[str, Any]):
    """A module's figures: written to ``results/tenants/<name>.json`` and printed."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def save(self) -> Path:
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"{self.name}.json"
        path.write_text(json.dumps(self, indent=1) + "\n")
        print(f"\ntenant figures ({path}):\n{json.dumps(self, indent=1)}")
        return path
