"""The same ``controller/app.py`` under ``osken-manager`` (os-ken, OpenStack's fork of Ryu):
the compat import picks os-ken, and a leaf-spine fabric is routed end to end."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mininet_scenarios.harness.controller import ControllerProcess
from mininet_scenarios.harness.network import FabricNet
from mininet_scenarios.harness.processes import REPO_ROOT, free_port
from topologies import leaf_spine

pytestmark = pytest.mark.emulation
OSKEN_MANAGER = REPO_ROOT / ".venv-osken" / "bin" / "osken-manager"


@pytest.mark.skipif(
    not OSKEN_MANAGER.exists() and not os.environ.get("LOOM_REQUIRE_EMULATION"),
    reason="no .venv-osken (make osken-venv)",
)
def test_app_routes_a_fabric_under_osken_manager(run_dir: Path) -> None:
    log_path = run_dir / "osken.txt"
    ctl = ControllerProcess(
        "controller/app.py",
        ofp_port=free_port(),
        env={"PYTHONPATH": str(REPO_ROOT)},
        log_path=log_path,
        manager=OSKEN_MANAGER,
    )
    with ctl:
        graph = leaf_spine(leaves=3, spines=2, hosts_per_leaf=2)
        with FabricNet(graph, controller=ctl.address, run_dir=run_dir) as fnet:
            assert fnet.wait_connected(30), log_path.read_text()[-2000:]
            deadline = time.monotonic() + 20
            while "FabricApp" not in log_path.read_text() and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(2.5)  # LLDP rounds: every link seen in both directions
            result = fnet.pingall(timeout=2.0)
            assert result.loss_pct == 0.0, (result.failed[:10], log_path.read_text()[-2000:])
    text = log_path.read_text()
    assert "os_ken.controller.ofp_handler" in text and "ryu" not in text.replace("ryu-manager", "")
