"""``make demo`` end to end with short durations: it exits 0, every step's check passed, and
``summary.json`` holds the story's figures (placement, busbw, a dropped attack, plots)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mininet_scenarios.harness.processes import REPO_ROOT

pytestmark = pytest.mark.emulation


def test_demo_runs_the_whole_story(tmp_path: Path) -> None:
    run_dir = tmp_path / "demo"
    cmd = [sys.executable, "-m", "mininet_scenarios.demo", "--run-dir", str(run_dir),
           "--seconds", "6", "--mib", "1", "--iters", "2"]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=480, check=False
    )
    print(proc.stdout[-6000:])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["checks"] and all(c["ok"] for c in s["checks"]), s["checks"]
    assert (s["switches"], s["links"]) == (20, 64)
    assert s["pingall_same_tenant"] == "112/112" and s["pingall_cross_tenant_leaks"] == 0
    col = s["collision"]
    assert col["apart_after_s"] is not None and col["apart_after_s"] <= 1.5, col
    assert col["loom_flows_placed_total"] >= 2, col
    assert all(f["steady_mbps"] > 0.75 * 10 for f in col["flows"].values()), col
    job = s["collective"]
    assert job["busbw_alone_mbps"] > 0 and job["busbw_under_bulk_mbps"] > 0
    atk = s["attack"]
    assert atk["attack_frames_sent"] > 0 and atk["attack_frames_received"] == 0
    assert set(s["plots"]) == {"collision", "classes"}
    for path in s["plots"].values():
        assert Path(path).read_bytes()[:4] == b"\x89PNG"
    assert "everything stopped and removed" in proc.stdout
