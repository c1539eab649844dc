"""``make cluster-demo`` end to end, on etcd over TLS with users as by default: it exits 0
and every check in ``summary.json`` passed (shares within one, a job seen everywhere, an
instance killed under traffic with no datagram lost, etcd members killed: nothing changes,
then changes refused without quorum while the fabric forwards)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mininet_scenarios.harness.processes import REPO_ROOT

pytestmark = pytest.mark.emulation


def test_cluster_demo_runs_every_step(tmp_path: Path) -> None:
    out = tmp_path / "cluster-demo"
    cmd = [sys.executable, "-m", "mininet_scenarios.demo.cluster", "--out", str(out),
           "--etcd-port", "17379", "--pki", str(tmp_path / "pki")]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=480, check=False
    )
    print(proc.stdout[-6000:])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    checks = summary["checks"]
    assert len(checks) == 12 and summary["failed"] == [], checks
    assert "no quorum" in checks["no quorum: changes refused"]["detail"]
    assert "etcds://" in proc.stdout and "as etcd user loom" in proc.stdout  # by default
