"""A job registered by its launcher, with no manual step, on real switches: four
``loom-run`` processes (one per node: its management side in the root namespace, its
command in the node's Mininet host) meet through a TCPStore, ask Loom for the rank order,
register the job with a lease and run a real gloo all-reduce with the rank Loom advised.

What must hold: while the ranks run, Loom holds the job, active, in its advised order (not
the order the nodes were started in); the collective completes with the right result; when
the command ends the job is gone; and a launcher killed with SIGKILL leaves a job that
expires with its lease, rules and all.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mininet_scenarios.harness.client import LoomApiError
from mininet_scenarios.harness.processes import REPO_ROOT
from mininet_scenarios.harness.stack import LoomStack
from mininet_scenarios.workloads.collectives.hosts import host_intf, prepare_rank_hosts
from tests.emulation.test_collectives import _torch_or_skip
from topologies import fat_tree

pytestmark = pytest.mark.emulation
NODES = ["h16", "h1", "h11", "h6"]  # started in this order; one per pod
LOOM_RUN = str(Path(sys.executable).with_name("loom-run"))
WORKER = "mininet_scenarios.workloads.collectives.worker"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomStack]:
    _torch_or_skip()
    run_dir = tmp_path_factory.mktemp("loom-launcher")
    with LoomStack(fat_tree(4, rate_mbps=10.0), run_dir) as st:  # as a user runs it: no hints
        ping = st.net.pingall(timeout=2.0)
        if ping.loss_pct:
            ping = st.net.pingall(timeout=3.0)
        assert ping.loss_pct == 0.0, ping.failed
        yield st


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (``/proc``'s children lists)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                out += [int(child), *descendants(int(child))]
    return out


def launch(
    st: LoomStack, out: Path, job: str, rdzv: int, command: list[str]
) -> list[subprocess.Popen[bytes]]:
    """One loom-run per node, in the root namespace; its command enters the node's host."""
    procs = []
    for rank, h in enumerate(NODES):
        host = st.net.host(h)
        inside = ["mnexec", "-a", str(host.pid), "env", f"PYTHONPATH={REPO_ROOT}", *command]
        argv = [
            LOOM_RUN, "--tenant", "bench", "--job", job, "--api", st.api.base_url,
            "--nnodes", str(len(NODES)), "--node-rank", str(rank),
            "--rdzv-endpoint", f"127.0.0.1:{rdzv}", "--address", str(host.IP()),
            "--ring-direction", "backward", "--lease", "4", "--strict", "--",
            *[a.replace("{host}", h) for a in inside],
        ]  # fmt: skip
        log = (out / f"launcher-{h}.txt").open("wb")
        procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
    return procs


def test_the_launcher_registers_the_job_before_the_first_collective(
    stack: LoomStack, tmp_path: Path
) -> None:
    prepare_rank_hosts(stack.net, NODES)
    intf = {h: host_intf(stack.net, h) for h in NODES}
    # each node's command: the gloo rank Loom's order gives it (its interface named by host)
    script = (
        "import os,subprocess,sys; r=os.environ['LOOM_RANK']; h=sys.argv[1];"
        f"sys.exit(subprocess.call([sys.executable,'-m','{WORKER}','--rank',r,"
        "'--world',os.environ['LOOM_WORLD_SIZE'],'--master',os.environ['LOOM_MASTER'],"
        "'--op','all_reduce','--mib','2','--iters','2','--warmup','1',"
        f"'--ifname',h+'-eth0','--out','{tmp_path}/rank'+r+'.json']))"
    )
    assert all(intf[h] == f"{h}-eth0" for h in NODES)
    procs = launch(stack, tmp_path, "launched", 29600, [sys.executable, "-c", script, "{host}"])
    seen = None
    deadline = time.monotonic() + 240
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        with contextlib.suppress(LoomApiError):
            seen = seen or stack.api.request("GET", "/loom/v1/jobs/launched")
        time.sleep(0.5)
    codes = [p.wait(timeout=30) for p in procs]
    logs = "\n".join(
        (tmp_path / f"launcher-{h}.txt").read_text(errors="replace")[-600:] for h in NODES
    )
    assert codes == [0, 0, 0, 0], logs
    assert seen is not None and seen["status"] == "active", seen
    ips = {str(stack.net.host(h).IP()): h for h in NODES}
    advised = stack.api.request("GET", "/loom/v1/order?hosts=" + ",".join(ips))["hosts"]
    assert seen["hosts"] == advised  # registered in Loom's order
    assert [ips[ip] for ip in seen["hosts"]] != NODES  # ... not the order nodes started in
    docs = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)]
    assert all(d["check_ok"] for d in docs)
    with pytest.raises(LoomApiError) as gone:
        stack.api.request("GET", "/loom/v1/jobs/launched")
    assert gone.value.status == 404


def test_a_killed_launcher_leaves_a_job_that_expires(stack: LoomStack, tmp_path: Path) -> None:
    procs = launch(stack, tmp_path, "crashed", 29700, ["sleep", "60"])
    orphans: list[int] = []
    try:
        deadline = time.monotonic() + 60
        job = None
        while job is None and time.monotonic() < deadline:
            try:
                job = stack.api.request("GET", "/loom/v1/jobs/crashed")
            except LoomApiError:
                time.sleep(0.5)
        assert job is not None and job["lease_seconds"] == 4
        orphans = [c for p in procs for c in descendants(p.pid)]
        for p in procs:  # the launchers die; their commands go on, nobody renews
            os.kill(p.pid, signal.SIGKILL)
        time.sleep(2.0)
        assert stack.api.request("GET", "/loom/v1/jobs/crashed")["status"] == "active"
        time.sleep(4.0)
        with pytest.raises(LoomApiError) as gone:
            stack.api.request("GET", "/loom/v1/jobs/crashed")
        assert gone.value.status == 404
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for pid in orphans:  # only what this test started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
