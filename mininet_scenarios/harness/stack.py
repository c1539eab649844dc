"""The whole emulated stack in one ``with``: Loom's controller, the fabric, discovery.

``LoomStack(graph)`` starts ``ryu-manager controller/app.py`` on free ports, builds the
fabric with ``FabricNet`` pointed at it, and waits until the controller has discovered
every switch and link, recording how long that took. Tests, the demo and the benchmarks
all start Loom this way, so they measure the same thing. ``tls`` (a CA and certificates,
``make pki``): OpenFlow over TLS with certificates both ways instead of plain TCP.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import networkx as nx

from mininet_scenarios import emulation_logger
from mininet_scenarios.harness.client import LabClient
from mininet_scenarios.harness.controller import ControllerProcess
from mininet_scenarios.harness.network import FabricNet
from mininet_scenarios.harness.pki import Pki
from mininet_scenarios.harness.processes import free_port
from mininet_scenarios.harness.shaping import QueueClass
from mininet_scenarios.harness.tls import OvsSsl
from topologies.graph import switch_graph

log = emulation_logger()
LOOM_APP = "controller/app.py"


def expected_links(graph: nx.MultiGraph) -> int:
    """Directed switch-to-switch links the controller should discover."""
    return 2 * int(switch_graph(graph).number_of_edges())


class LoomStack:
    def __init__(
        self,
        graph: nx.MultiGraph,
        run_dir: Path,
        *,
        env: Mapping[str, str] | None = None,
        shape: bool = True,
        queue_classes: Sequence[QueueClass] | None = None,
        discovery_timeout: float = 90.0,
        app: str = LOOM_APP,
        queue_packets: int | None = None,
        queue_bytes: int | None = None,
        host_queues: str = "bounded",
        tls: Pki | None = None,
    ) -> None:
        self.graph = graph
        self.tls = tls
        self.host_queues = host_queues  # see FabricNet
        self.run_dir = Path(run_dir)
        self.env = dict(env or {})
        self.shape = shape
        self.queue_classes = queue_classes
        self.discovery_timeout = discovery_timeout
        self.app = app
        self.queue_packets = queue_packets  # per-port queue limit (kernel default: 1000)
        self.queue_bytes = queue_bytes  # or in bytes
        self.ofp_port = free_port()
        self.api_port = free_port()
        self.metrics_port = int(self.env.setdefault("LOOM_METRICS_PORT", str(free_port())))
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        self.api = LabClient(f"http://127.0.0.1:{self.api_port}")
        self.discovery_seconds = float("nan")
        self._stack = contextlib.ExitStack()
        self.ctl: ControllerProcess | None = None
        self.fnet: FabricNet | None = None

    def __enter__(self) -> LoomStack:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.ctl = self._stack.enter_context(
                ControllerProcess(
                    self.app,
                    ofp_port=self.ofp_port,
                    wsapi_port=self.api_port,
                    env=self.env,
                    log_path=self.run_dir / "controller.txt",
                    tls=self.tls,
                )
            )
            if self.tls is not None:  # OVS-wide: set before the bridges, restored after them
                self._stack.enter_context(OvsSsl(self.tls))
            started = time.monotonic()
            self.fnet = self._stack.enter_context(
                FabricNet(
                    self.graph,
                    controller=("127.0.0.1", self.ofp_port),
                    run_dir=self.run_dir,
                    shape=self.shape,
                    queue_classes=self.queue_classes,
                    queue_packets=self.queue_packets,
                    queue_bytes=self.queue_bytes,
                    host_queues=self.host_queues,
                    protocol="tcp" if self.tls is None else "ssl",
                )
            )
            n_switches = sum(1 for _, d in self.graph.nodes(data=True) if d["kind"] == "switch")
            self.api.wait_for(n_switches, expected_links(self.graph), self.discovery_timeout)
            self.discovery_seconds = time.monotonic() - started
            log.info(
                "loom: discovered %d switches and %d links in %.1f s",
                n_switches,
                expected_links(self.graph),
                self.discovery_seconds,
            )
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stack.close()

    @property
    def net(self) -> FabricNet:
        assert self.fnet is not None, "LoomStack used outside its with-block"
        return self.fnet

    def controller_log(self) -> str:
        path = self.run_dir / "controller.txt"
        return path.read_text(errors="replace") if path.exists() else ""
