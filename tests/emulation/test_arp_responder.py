"""Real Linux hosts re-validate their neighbours while the controller is stopped, and the
Open vSwitch switches answer them (``controller.responder``).

A small leaf-spine of userspace OVS, started as a user would. Every host has talked to
its peers; the controller is then frozen (SIGSTOP), each host's entries are made STALE
and used again, so the kernel sends its unicast probes (DELAY -> PROBE). Only the
switches can answer: each entry must come back REACHABLE with the peer's Loom address,
and pings go through. With the controller answering alone, the entries fail.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator

import pytest

from mininet_scenarios.harness import faults
from mininet_scenarios.harness.stack import LoomStack
from topologies import leaf_spine
from topologies.graph import prefixed

pytestmark = pytest.mark.emulation
PREFIX = "ar"
PAIRS = [("h1", "h2"), ("h1", "h4"), ("h3", "h2"), ("h4", "h1")]  # one leaf, across leaves


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomStack]:
    graph = prefixed(leaf_spine(leaves=2, spines=2, hosts_per_leaf=2), PREFIX)
    run_dir = tmp_path_factory.mktemp("loom-arp-responder")
    with LoomStack(graph, run_dir, shape=False) as s:
        ping = s.net.pingall(timeout=2.0)
        assert ping.loss_pct == 0.0, ping.failed[:10]
        yield s


def neighbour(stack: LoomStack, src: str, dst: str) -> tuple[str, str]:
    """(link-layer address, state) of ``src``'s entry for ``dst``."""
    host, ip = stack.net.host(PREFIX + src), stack.graph.nodes[PREFIX + dst]["ip"]
    line = host.cmd(f"ip neigh show {ip} dev {host.defaultIntf()}").strip()
    found = re.search(r"lladdr (\S+) .*?(\w+)$", line)
    return (found.group(1), found.group(2)) if found else ("", line)


def test_hosts_revalidate_their_peers_with_the_controller_stopped(stack: LoomStack) -> None:
    net = stack.net
    before = {}
    for src, dst in PAIRS:
        host = net.host(PREFIX + src)
        dev = host.defaultIntf()
        host.cmd(f"sysctl -qw net.ipv4.neigh.{dev}.delay_first_probe_time=1")
        before[(src, dst)] = neighbour(stack, src, dst)[0]
        assert before[(src, dst)].startswith("0a:"), before  # a Loom address, from Loom
    assert stack.ctl is not None and stack.ctl.pid is not None
    pid = stack.ctl.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        for src, dst in PAIRS:
            host, ip = net.host(PREFIX + src), stack.graph.nodes[PREFIX + dst]["ip"]
            mac = before[(src, dst)]
            host.cmd(f"ip neigh replace {ip} lladdr {mac} nud stale dev {host.defaultIntf()}")
        # each use of a STALE entry: DELAY (1 s), then unicast probes every second, three
        # at most; unanswered, the entry FAILs and the pings with it
        results = {}
        for src, dst in PAIRS:
            ip = stack.graph.nodes[PREFIX + dst]["ip"]
            out = net.host(PREFIX + src).cmd(f"ping -c 12 -i 0.5 -W 1 {ip}")
            results[(src, dst)] = (out, neighbour(stack, src, dst))
    finally:
        os.kill(pid, signal.SIGCONT)
    for (src, dst), (out, (mac, state)) in results.items():
        assert " 0% packet loss" in out, f"{src} -> {dst}: {state}\n{out}"
        assert state == "REACHABLE", f"{src} -> {dst}: {state}"
        assert mac == before[(src, dst)], f"{src} -> {dst}: {mac}"
    # the switches, which dropped the frozen controller, come back to it
    assert faults.wait_health(stack.api, 30.0, switches=4, hosts=4) is not None
