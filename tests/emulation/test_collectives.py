"""A real gloo job on real switches: 4 ranks (one per pod) on a k=4 fat-tree at 10 Mbit/s
with the DSCP queue classes on every port, registered with Loom.

What must hold: the collective completes with the right result at a plausible busbw; its
packets leave every switch on its paths in the collective class (HTB class counters), while
the bulk class stays near empty; the ring runs the way it was registered (gloo's all-reduce
sends rank i -> i-1); Loom counted the job's bytes; after DELETE the job is gone.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mininet_scenarios.harness.client import LoomApiError
from mininet_scenarios.harness.shaping import DEFAULT_CLASSES, class_counters
from mininet_scenarios.harness.stack import LoomStack
from mininet_scenarios.workloads.collectives.model import wire_bytes_per_rank
from mininet_scenarios.workloads.collectives.runner import CollectiveResult, run_collective
from topologies import fat_tree

pytestmark = pytest.mark.emulation
RATE = 10.0
POLL = 0.5
HOSTS = ["h1", "h6", "h11", "h16"]  # one per pod: every ring hop crosses the core
MIB = 2.0
ITERS, WARMUP = 2, 1


def _torch_or_skip() -> None:
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        if os.environ.get("LOOM_REQUIRE_EMULATION"):
            pytest.fail("torch is not installed in this venv (make torch)")
        pytest.skip("torch is not installed (make torch)")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomStack]:
    _torch_or_skip()
    run_dir = tmp_path_factory.mktemp("loom-collectives")
    env = {"LOOM_LINK_CAPACITY_MBPS": str(RATE), "LOOM_POLL_INTERVAL": str(POLL)}
    graph = fat_tree(4, rate_mbps=RATE)
    with LoomStack(graph, run_dir, env=env, queue_classes=DEFAULT_CLASSES) as st:
        # a second round forgives a ping lost to a busy machine, not a missing route
        ping = st.net.pingall(timeout=2.0)
        if ping.loss_pct:
            ping = st.net.pingall(timeout=3.0)
        assert ping.loss_pct == 0.0, ping.failed
        yield st


Snapshot = dict[tuple[str, str], dict[str, int]]


def egress_ports(st: LoomStack, job: dict[str, Any]) -> list[tuple[str, str]]:
    """``(switch, interface)`` of every switch egress the job's paths use, including the
    last switch's port facing the receiving host."""
    g, ip_host = st.graph, {st.graph.nodes[h]["ip"]: h for h in HOSTS}
    out = set()
    for path in job["paths"]:
        hops = [*path["switches"], ip_host[path["dst"]]]
        for u, v in itertools.pairwise(hops):
            for intf_u, _intf_v in st.net.links_between(u, v):
                out.add((u, intf_u))
        assert g.nodes[hops[0]]["kind"] == "switch"
    return sorted(out)


def snapshot(st: LoomStack, ports: list[tuple[str, str]]) -> Snapshot:
    return {
        (sw, intf): {k: c.bytes for k, c in class_counters(st.net.runner(sw), intf).items()}
        for sw, intf in ports
    }


def run_registered(st: LoomStack, op: str, name: str) -> tuple[CollectiveResult, Snapshot]:
    """Run ``op`` registered with Loom; the class bytes each egress on its paths sent."""
    # Every port of the fabric, so the snapshot before the run covers the paths Loom picks.
    ports = [
        (sw, st.net.intf(sw, d["ports"][sw]))
        for a, b, d in st.graph.edges(data=True)
        for sw in (a, b)
        if st.graph.nodes[sw]["kind"] == "switch"
    ]
    before = snapshot(st, ports)
    res = run_collective(
        st, HOSTS, op, MIB, ITERS, warmup=WARMUP, register=st.api, job_name=name, tenant="test"
    )
    assert res.job is not None
    used = egress_ports(st, res.job)
    after = snapshot(st, used)
    delta = {p: {k: after[p][k] - before[p].get(k, 0) for k in after[p]} for p in used}
    return res, delta


def check_classes(res: CollectiveResult, delta: Snapshot, per_hop_bytes: float) -> None:
    for (sw, intf), d in delta.items():
        # every hop carried at least its share of the job, all of it in the collective class
        assert d["collective"] >= 0.9 * per_hop_bytes, f"{sw} {intf}: {d}"
        assert d["bulk"] <= 0.02 * d["collective"] + 20_000, f"{sw} {intf}: {d}"


def test_ring_all_reduce_runs_in_the_collective_class(stack: LoomStack, tmp_path: Path) -> None:
    res, delta = run_registered(stack, "all_reduce", "t-ring")
    n = len(HOSTS)
    assert res.check_ok, "the all-reduce computed a wrong sum"
    assert res.ring_direction == "backward", res.tcp_sent  # gloo: rank i -> i-1
    # a sanity bound, not the benchmark: 2 MiB iterations on 2 cores, other emulations maybe
    assert 0.3 <= res.busbw_over_link <= 1.0, res.summary()
    # each ring hop carries one rank's share, warm-up included
    per_rank = wire_bytes_per_rank("all_reduce", n, res.bytes) * (ITERS + WARMUP)
    assert len(delta) >= n
    check_classes(res, delta, per_rank)
    job = res.job
    assert job is not None and job["status"] == "active"
    assert job["ring_direction"] == "backward"
    assert 0.9 * n * per_rank <= job["bytes"] <= 1.3 * n * per_rank, job["bytes"]
    assert res.job_deleted is True
    with pytest.raises(LoomApiError) as err:
        stack.api.request("GET", "/loom/v1/jobs/t-ring")
    assert err.value.status == 404


def test_all_to_all_runs_in_the_collective_class(stack: LoomStack) -> None:
    res, delta = run_registered(stack, "all_to_all", "t-a2a")
    n = len(HOSTS)
    assert res.check_ok, "the all-to-all delivered wrong data"
    assert 0.2 <= res.busbw_over_link <= 1.0, res.summary()
    per_pair = res.bytes / n * (ITERS + WARMUP)
    check_classes(res, delta, per_pair)
    assert res.job_deleted is True
    assert res.job is not None
    assert res.job["bytes"] >= 0.9 * n * (n - 1) * per_pair
