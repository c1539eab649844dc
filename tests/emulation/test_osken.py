"""The same ``controller/app.py`` under ``osken-manager`` (os-ken, OpenStack's fork of Ryu):
the compat import picks os-ken, and a leaf-spine fabric is routed end to end."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from mininet_scenarios.controller_proc import REPO_ROOT, free_port
from mininet_scenarios.fabric_net import FabricNet
from topologies import leaf_spine

pytestmark = pytest.mark.emulation
OSKEN_MANAGER = REPO_ROOT / ".venv-osken" / "bin" / "osken-manager"


@pytest.mark.skipif(
    not OSKEN_MANAGER.exists() and not os.environ.get("LOOM_REQUIRE_EMULATION"),
    reason="no .venv-osken (make osken-venv)",
)
def test_app_routes_a_fabric_under_osken_manager(run_dir: Path) -> None:
    port = free_port()
    log_path = run_dir / "osken.txt"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [str(OSKEN_MANAGER), "--ofp-tcp-listen-port", str(port), "controller/app.py"],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        graph = leaf_spine(leaves=3, spines=2, hosts_per_leaf=2)
        with FabricNet(graph, controller=("127.0.0.1", port), run_dir=run_dir) as fnet:
            assert fnet.wait_connected(30), log_path.read_text()[-2000:]
            deadline = time.monotonic() + 20
            while "FabricApp" not in log_path.read_text() and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(2.5)  # LLDP rounds: every link seen in both directions
            result = fnet.pingall(timeout=2.0)
            assert result.loss_pct == 0.0, (result.failed[:10], log_path.read_text()[-2000:])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    text = log_path.read_text()
    assert "os_ken.controller.ofp_handler" in text and "ryu" not in text.replace("ryu-manager", "")
