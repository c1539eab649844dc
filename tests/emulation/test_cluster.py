"""Three Loom instances on a three-member etcd share a k=4 fat-tree of real Open vSwitch
switches: every switch is connected to every instance and mastered by one.

An instance is SIGKILLed under a 1,000 datagram/s UDP stream and a gloo all-reduce whose job
it registered: its switches get new masters, no datagram is lost, the all-reduce completes
and the job stays. An etcd member dies: nothing changes. Two die: the fabric keeps
forwarding and Loom refuses changes with a clear error until the quorum returns. Bounds are
CI-safe; ``make bench-cluster`` measures the same over ten kills (docs/benchmarks.md §6).
Node names carry a ``c`` prefix and etcd its own ports, so a demo can run alongside.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mininet_scenarios.harness.client import LabClient, LoomApiError
from mininet_scenarios.harness.cluster import LoomCluster
from mininet_scenarios.harness.rules import compare_rules, rule_snapshot
from mininet_scenarios.workloads.cluster_kill import TENANT, kill_once, one_tenant_policy
from mininet_scenarios.workloads.collectives.runner import job_request
from mininet_scenarios.workloads.streams import Stream, gap_in
from topologies import fat_tree
from topologies.graph import prefixed

pytestmark = pytest.mark.emulation
PREFIX = "c"
ETCD_PORT = 24379


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomCluster]:
    run_dir = tmp_path_factory.mktemp("cluster")
    graph = prefixed(fat_tree(4), PREFIX)
    env = {"LOOM_POLICY": str(one_tenant_policy(graph, run_dir / "policy.yaml"))}
    with LoomCluster(graph, run_dir, env=env, shape=False, etcd_base_port=ETCD_PORT) as c:
        assert c.net.pingall(timeout=2.0).loss_pct == 0.0
        yield c


def test_every_switch_has_one_master_and_they_are_shared_evenly(cluster: LoomCluster) -> None:
    shares = cluster.shares()
    assert sorted(shares.values()) == [6, 7, 7]
    views = [inst.cluster() for inst in cluster.live()]
    assert all(v["masters"] == views[0]["masters"] for v in views)  # one store, one answer
    mine = [d for v in views for d in v["mine"]]
    assert sorted(mine) == sorted(views[0]["masters"])  # each switch answered one of them


def test_an_instance_killed_under_traffic_costs_no_datagram(
    cluster: LoomCluster, tmp_path: Path
) -> None:
    args = argparse.Namespace(
        stream_rate=1000.0, mib=4.0, iters=4, lead=1.0, settle=2.0, timeout=120.0
    )
    res = kill_once(cluster, args, tmp_path, 0, PREFIX)
    print("kill:", res)
    assert res["stream"]["lost"] == 0
    assert res["stream"]["received"] > 1000
    assert res["remaster_s"] < 3.0  # CI-safe: the benchmark reports it against 1 s
    assert res["collective"]["completed"], res["collective"]
    assert res["job_intact"]  # registered on the instance that died
    assert res["policy_intact"]
    # Routes, failover groups, host delivery and the job's rules stay as they were; only
    # flows' pins may come and go (with their flows; and each instance places new flows
    # from its own counter readings).
    assert res["rules"]["rewritten"] == 0, res["rules"]
    assert sorted(cluster.shares().values()) == [6, 7, 7]  # the killed one is back


def test_an_etcd_member_dying_changes_nothing(cluster: LoomCluster, tmp_path: Path) -> None:
    net = cluster.net
    masters = cluster.masters()
    before = rule_snapshot(net.switch_names)
    cluster.etcd.kill(1)
    try:
        time.sleep(3.0)
        assert cluster.masters() == masters
        diff = compare_rules(before, rule_snapshot(net.switch_names)).summary()
        # Only flows' pins come and go (the last test's flows ending): nothing else moves.
        assert set(diff["by_kind"].get("removed", {})) <= {"flow"}, diff
        assert diff["readded"] == 0, diff
        api = cluster.live()[0].api
        ips = [net.graph.nodes[f"{PREFIX}h{i}"]["ip"] for i in (3, 7)]
        assert api.request("POST", "/loom/v1/jobs", job_request("two", TENANT, ips, "all_reduce"))
        api.request("DELETE", "/loom/v1/jobs/two")
    finally:
        cluster.etcd.restart(1)


def wait_for_job(api: LabClient, name: str, deadline: float) -> None:
    """A job stored by a try whose answer was lost is applied here from the store's
    watch, a moment later: it must show before ``deadline``."""
    while True:
        try:
            found = api.request("GET", f"/loom/v1/jobs/{name}")
        except LoomApiError as err:
            if err.status != 404 or time.monotonic() >= deadline:
                raise
            time.sleep(0.2)
            continue
        assert found["name"] == name
        return


def test_without_quorum_the_fabric_forwards_and_changes_are_refused(
    cluster: LoomCluster, tmp_path: Path
) -> None:
    net = cluster.net
    api = cluster.live()[0].api
    ips = [net.graph.nodes[f"{PREFIX}h{i}"]["ip"] for i in (4, 8)]
    body = job_request("late", TENANT, ips, "all_reduce")
    stream = Stream(net, f"{PREFIX}h5", f"{PREFIX}h12", tmp_path, 1000.0, 9400, 43000)
    with stream:
        time.sleep(1.0)
        t_cut = time.monotonic()
        cluster.etcd.kill(2)
        cluster.etcd.kill(3)
        try:
            time.sleep(3.0)  # beyond every lease's margin: the masters are fenced
            with pytest.raises(LoomApiError) as refused:
                api.request("POST", "/loom/v1/jobs", body)
            assert refused.value.status == 503
            assert "no quorum" in refused.value.body["error"]
            time.sleep(1.0)
        finally:
            cluster.etcd.restart(2)
            cluster.etcd.restart(3)
        t_back = time.monotonic()
        deadline = t_back + 20.0
        while True:  # changes accepted again once the store answers
            try:
                api.request("POST", "/loom/v1/jobs", body)
                break
            except LoomApiError as err:
                if err.status == 409:  # an earlier try was stored, its answer lost: taken
                    wait_for_job(api, "late", deadline)
                    break
                assert time.monotonic() < deadline, "changes still refused 20 s after quorum"
                time.sleep(0.5)
            except OSError:
                assert time.monotonic() < deadline, "changes still refused 20 s after quorum"
                time.sleep(0.5)
        time.sleep(1.0)
    trace = stream.trace
    assert trace is not None
    assert trace.lost == 0
    print("quorum lost:", gap_in(trace, t_cut, t_back).as_dict())
    api.request("DELETE", "/loom/v1/jobs/late")
    cluster.wait_balanced(30.0)
