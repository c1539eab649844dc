"""Hosts moved to another tenant together are reachable at once, on real switches.

A host's Loom address carries its tenant, so a policy reload that moves h5 and h6 from
red to blue gives both new addresses, while each holds the other's old one in its ARP
cache (they just pinged). Loom announces the new addresses to the new tenant's hosts, so
the moved pair reaches each other again within about a second instead of waiting for
their ARP entries to run out (gloo ranks on moved hosts took 15-95 s to connect before).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from mininet_scenarios.harness.stack import LoomStack
from tests.emulation.tenant_support import (
    TENANTS,
    ensure_policy,
    h,
    host_ip,
    loom_address,
    ping_ok,
    ping_once,
    policy_yaml,
    tenant_stack,
)

pytestmark = pytest.mark.emulation
MOVED_PAIR = {"red": range(1, 5), "blue": range(5, 12), "green": range(12, 16)}  # h5, h6


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomStack]:
    with tenant_stack(tmp_path_factory.mktemp("tenant-move")) as st:
        yield st


def neighbour(stack: LoomStack, src: int, dst: int) -> str:
    return str(stack.net.host(h(src)).cmd(f"ip neigh show {host_ip(stack, dst)}")).strip()


def test_hosts_moved_together_reach_each_other_at_once(stack: LoomStack) -> None:
    ensure_policy(stack, policy_yaml(stack.graph, TENANTS))
    assert ping_ok(stack, 5, 6) and ping_ok(stack, 6, 5)  # each caches the other's address
    old = loom_address(stack, 6)
    entry = neighbour(stack, 5, 6)
    assert old in entry
    intf = entry.split(" dev ")[1].split()[0]
    refresh = f"ip neigh replace {host_ip(stack, 6)} lladdr {old} dev {intf} nud reachable"
    # h5's entry for h6 updated just now, and Linux's locktime (1 s by default, in which a
    # new address in an ordinary ARP reply is ignored) stretched to 30 s on h5, so the
    # announcement always lands inside it (a reload within 1 s of a peer's last ARP
    # left it on the old address in CI, one run in three)
    stack.net.host(h(5)).cmd(f"sysctl -qw net.ipv4.neigh.{intf}.locktime=3000; {refresh}")
    ensure_policy(stack, policy_yaml(stack.graph, MOVED_PAIR))
    moved_at = time.monotonic()
    deadline = moved_at + 20.0
    while not ping_once(stack, 5, 6, wait=0.2):
        assert time.monotonic() < deadline, f"h5 cannot reach h6: {neighbour(stack, 5, 6)}"
    took = time.monotonic() - moved_at
    new = loom_address(stack, 6)
    assert new != old and new in neighbour(stack, 5, 6)
    assert took < 2.0, f"h6 reached after {took:.1f} s"
    assert not ping_once(stack, 1, 5)  # and red no longer reaches the moved host
