"""Hosts that know each other keep talking while no controller can answer ARP.

Loom answers ARP for its hosts. A Linux host re-validates a neighbour entry it has used for
a while with unicast ARP requests to the address it holds (STALE -> DELAY -> PROBE); if
none is answered, the entry fails and the host stops sending to a peer it knew. So every
moment no controller answers (frozen, restarting, fenced without an etcd quorum, starved of
CPU) costs traffic unless the switches themselves answer those re-probes.

Each test runs a 1,000 datagram/s UDP stream and a paced TCP connection between two other
hosts, in different pods, that pinged each other first, with *shortened* neighbour timers
(an entry re-probes within about two seconds, :data:`~mininet_scenarios.harness.neighbours.
SHORTENED`), through one outage of well under a minute, and asserts that no datagram is lost
(exactly 0) and, where the TCP connection is what the test is about, that it never stalls
for a second. The UDP pair and the TCP pair are different hosts: TCP's ACKs confirm the
sender's entry, so a UDP stream sharing a host pair with a TCP connection would not need ARP.

No neighbour entry is pinned (``test_resilience.py`` pins them to measure forwarding alone).
The figures, and every neighbour state the hosts went through, are printed and saved in each
run directory's ``figures.json``; ``make bench-headless`` measures the same with Linux's
default timers beside the shortened ones, and longer outages (docs/benchmarks.md, "Headless
operation"). Node names carry an ``n`` prefix (``nq`` for the cluster) and etcd its own
client ports, so other emulations may run alongside.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mininet_scenarios.harness import faults
from mininet_scenarios.harness.cluster import LoomCluster
from mininet_scenarios.harness.hog import CpuHog
from mininet_scenarios.harness.stack import LoomStack, expected_links
from mininet_scenarios.workloads.flood import process_cpu_seconds
from mininet_scenarios.workloads.headless import Pair, Traffic, describe, set_pair_timers
from topologies import fat_tree
from topologies.graph import prefixed

pytestmark = pytest.mark.emulation
PREFIX = "n"
CLUSTER_PREFIX = "nq"
ETCD_PORT = 30379  # members on 30379, 31379, 32379: below the ephemeral range, unused elsewhere
OUTAGE_S = 20.0  # ten re-probe cycles of a shortened entry
LEAD_S = 3.0  # traffic before the fault: every shortened entry has gone stale once
RECOVER_S = 30.0  # to wait for traffic after the fault (a failed TCP backs off for long)
STALL_BOUND_S = 1.0  # the target itself: no TCP connection silent for a second
RESTART_DOWN_S = 5.0
HOG_WORKERS, HOG_NICE = 4, -20  # about 0.3 % of its CPU left to the controller


def pairs(prefix: str) -> list[Pair]:
    return [
        Pair(f"{prefix}h1", f"{prefix}h16", "udp"),  # pod 0 -> pod 3
        Pair(f"{prefix}h5", f"{prefix}h12", "tcp"),  # pod 1 -> pod 2
    ]


def record(run_dir: Path, name: str, value: Any) -> None:
    """Keep what a run measured next to its logs, and show it with ``pytest -s``."""
    path = run_dir / "figures.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[name] = value
    path.write_text(json.dumps(data, indent=1))
    print(f"\n[headless] {name}: {json.dumps(value)}")


def through(net: Any, prefix: str, out: Path, port_base: int, fault: Callable[[], Any]) -> Any:
    """Traffic on the pairs, ``fault()`` in the middle; the results from the fault on."""
    with Traffic(net, pairs(prefix), out / f"streams-{port_base}", port_base=port_base) as traffic:
        assert traffic.wait_flowing(15.0) is not None, "traffic never flowed"
        time.sleep(LEAD_S)
        t_fault = time.monotonic()
        detail = fault()
        t_over = time.monotonic()
        recovered = traffic.wait_flowing(RECOVER_S)
        time.sleep(1.0)
        t_end = time.monotonic()
    res = traffic.results(t_fault, t_end)
    res.update(
        fault_s=round(t_over - t_fault, 2),
        flowing_again_after_s=None if recovered is None else round(recovered, 2),
        detail=detail,
    )
    return res


def row(res: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(r for r in res["pairs"] if r["kind"] == kind)


def assert_no_loss(res: dict[str, Any]) -> None:
    udp = row(res, "udp")
    assert "lost" in udp, udp
    assert udp["lost"] == 0, f"{describe(res)}\n{json.dumps(udp)}"


def assert_no_stall(res: dict[str, Any]) -> None:
    tcp = row(res, "tcp")
    assert "longest_stall_s" in tcp and not tcp["errors"], tcp
    assert tcp["longest_stall_s"] < STALL_BOUND_S, f"{describe(res)}\n{json.dumps(tcp)}"


# --------------------------------------------------------------------------- one controller


class TestOneController:
    @pytest.fixture(scope="class")
    def loom(self, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomStack]:
        """A plain fabric (Loom started as docs/operator.md says); the pairs' hosts shortened."""
        run_dir = tmp_path_factory.mktemp("loom-headless")
        with LoomStack(prefixed(fat_tree(4), PREFIX), run_dir, shape=False) as stack:
            set_pair_timers(stack.net, pairs(PREFIX))
            yield stack

    def test_frozen_controller_costs_no_datagram_and_no_stall(self, loom: LoomStack) -> None:
        """SIGSTOP: the controller keeps its sockets and answers nothing for 20 s."""

        def freeze() -> None:
            with faults.frozen([loom.ctl]):
                time.sleep(OUTAGE_S)

        res = through(loom.net, PREFIX, loom.run_dir, 9600, freeze)
        record(loom.run_dir, "frozen", res)
        assert loom.ctl is not None and loom.ctl.alive(), loom.controller_log()[-2000:]
        assert_no_loss(res)
        assert_no_stall(res)

    def test_restarted_controller_costs_no_datagram(self, loom: LoomStack) -> None:
        """SIGKILL, and a new controller on the same ports 5 s later (a supervisor noticing
        the crash and starting it again); switches reconnect with Open vSwitch's own backoff,
        hosts keep their entries as Linux keeps them. About 8 s without an answer in all:
        longer than a shortened entry can wait (at most 1.5 + 1 + 3 s)."""
        net = loom.net

        def restart() -> dict[str, Any]:
            known = int(loom.api.health()["hosts"])  # only hosts that ever sent are known
            r = faults.restart_controller(
                loom,
                "KILL",
                RESTART_DOWN_S,
                n_switches=len(net.switch_names),
                n_hosts=known,
                n_links=expected_links(loom.graph),
                timeout=30.0,
            )
            return {**r.as_dict(), "hosts_known": known}

        res = through(net, PREFIX, loom.run_dir, 9610, restart)
        record(loom.run_dir, "restart", res)
        assert res["detail"]["new_pid"] != res["detail"]["old_pid"]
        assert_no_loss(res)

    def test_starved_controller_costs_no_datagram(self, loom: LoomStack) -> None:
        """Busy processes at nice -20 share the one CPU the controller is pinned to for
        20 s: it runs, but with about 0.3 % of that CPU (it needs about 3 % with this
        traffic), so it answers late."""
        assert loom.ctl is not None and loom.ctl.pid is not None
        pid = loom.ctl.pid

        def starve() -> dict[str, Any]:
            used = process_cpu_seconds(pid)
            with CpuHog([pid], workers=HOG_WORKERS, nice=HOG_NICE) as hog:
                time.sleep(OUTAGE_S)
            return {
                "cpu": hog.cpu,
                "controller_share_expected_pct": round(100 * hog.controller_share, 2),
                "controller_cpu_pct": round(100 * (process_cpu_seconds(pid) - used) / OUTAGE_S, 2),
            }

        res = through(loom.net, PREFIX, loom.run_dir, 9620, starve)
        record(loom.run_dir, "starved", res)
        assert_no_loss(res)


# --------------------------------------------------------------------------- cluster


class TestCluster:
    @pytest.fixture(scope="class")
    def cluster(self, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomCluster]:
        run_dir = tmp_path_factory.mktemp("cluster-headless")
        graph = prefixed(fat_tree(4), CLUSTER_PREFIX)
        with LoomCluster(graph, run_dir, shape=False, etcd_base_port=ETCD_PORT) as c:
            set_pair_timers(c.net, pairs(CLUSTER_PREFIX))
            yield c

    def test_quorum_lost_costs_no_datagram(self, cluster: LoomCluster) -> None:
        """Two of three etcd members killed for 20 s: every instance fences itself (it may
        no longer write to switches), and the fabric must keep carrying traffic."""

        def lose_quorum() -> None:
            cluster.etcd.kill(2)
            cluster.etcd.kill(3)
            try:
                time.sleep(OUTAGE_S)
            finally:
                cluster.etcd.restart(2)
                cluster.etcd.restart(3)

        res = through(cluster.net, CLUSTER_PREFIX, cluster.run_dir, 9630, lose_quorum)
        record(cluster.run_dir, "quorum_lost", res)
        assert all(i.alive() for i in cluster.instances)
        assert_no_loss(res)
