"""A Loom cluster in one ``with``: a three-member etcd, several Loom instances, the fabric.

``LoomCluster(graph, run_dir)`` starts etcd (``EtcdCluster``), then ``instances`` times
``ryu-manager controller/app.py`` with ``LOOM_CLUSTER`` pointing at it (each on its own
OpenFlow, API and metrics ports, named ``loom-1``...), builds the fabric with every switch
connected to every instance, and waits until each instance has discovered the whole
fabric and every switch has a master. ``kill(i)`` is a SIGKILL, as a crash would be.
``etcd_pki`` puts etcd on TLS with that CA's certificates, and ``etcd_auth`` on users too
(see ``EtcdCluster``); the instances get the settings that reach it so.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import networkx as nx

from mininet_scenarios import emulation_logger
from mininet_scenarios.harness.client import LabClient, LoomApiError
from mininet_scenarios.harness.controller import ControllerProcess
from mininet_scenarios.harness.etcd import EtcdCluster
from mininet_scenarios.harness.network import FabricNet
from mininet_scenarios.harness.pki import Pki
from mininet_scenarios.harness.processes import free_port
from mininet_scenarios.harness.shaping import QueueClass
from mininet_scenarios.harness.stack import LOOM_APP, expected_links
from mininet_scenarios.harness.tls import OvsSsl

log = emulation_logger()


class Instance:
    """One Loom process of the cluster, and how to reach it."""

    def __init__(
        self,
        index: int,
        etcd: Mapping[str, str],
        run_dir: Path,
        env: Mapping[str, str],
        tls: Pki | None = None,
    ) -> None:
        self.index = index
        self.name = f"loom-{index}"
        self.ofp_port, self.api_port, self.metrics_port = free_port(), free_port(), free_port()
        self.env = {
            **env,
            **etcd,  # LOOM_CLUSTER, and LOOM_ETCD_* for a secured etcd
            "LOOM_CLUSTER_ID": self.name,
            "LOOM_METRICS_PORT": str(self.metrics_port),
        }
        self.api = LabClient(f"http://127.0.0.1:{self.api_port}", timeout=2.0)
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        self.process = ControllerProcess(
            LOOM_APP,
            ofp_port=self.ofp_port,
            wsapi_port=self.api_port,
            env=self.env,
            log_path=run_dir / f"controller-{self.name}.txt",
            tls=tls,
        )

    def start(self) -> None:
        self.process.start()

    def alive(self) -> bool:
        return self.process.alive()

    def cluster(self) -> dict[str, Any]:
        return dict(self.api.get("/loom/v1/cluster"))

    def log(self) -> str:
        path = self.process.log_path
        return path.read_text(errors="replace") if path.exists() else ""


class LoomCluster:
    def __init__(
        self,
        graph: nx.MultiGraph,
        run_dir: Path,
        *,
        instances: int = 3,
        env: Mapping[str, str] | None = None,
        shape: bool = True,
        queue_classes: Sequence[QueueClass] | None = None,
        etcd_base_port: int = 21379,
        discovery_timeout: float = 90.0,
        tls: Pki | None = None,
        etcd_pki: Pki | None = None,
        etcd_auth: bool = False,
    ) -> None:
        self.graph = graph
        self.tls = tls  # OpenFlow over TLS (see LoomStack)
        self.run_dir = Path(run_dir)
        self.etcd = EtcdCluster(
            base_port=etcd_base_port,
            data_dir=self.run_dir / "etcd",
            pki=etcd_pki,
            auth=etcd_auth,
        )
        self.env = dict(env or {})
        self.n_instances = instances
        self.shape = shape
        self.queue_classes = queue_classes
        self.discovery_timeout = discovery_timeout
        self.instances: list[Instance] = []
        self.switches = sum(1 for _, d in graph.nodes(data=True) if d["kind"] == "switch")
        self._stack = contextlib.ExitStack()
        self.fnet: FabricNet | None = None

    def __enter__(self) -> LoomCluster:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # A fresh store each time: a run's data dir left over would bring back its jobs.
        shutil.rmtree(self.run_dir / "etcd", ignore_errors=True)
        try:
            self._stack.enter_context(self.etcd)
            for i in range(1, self.n_instances + 1):
                inst = Instance(i, self.etcd.loom_env(), self.run_dir, self.env, self.tls)
                self._stack.callback(inst.process.stop)
                inst.start()
                self.instances.append(inst)
            if self.tls is not None:
                self._stack.enter_context(OvsSsl(self.tls))
            self.fnet = self._stack.enter_context(
                FabricNet(
                    self.graph,
                    controller=("127.0.0.1", self.instances[0].ofp_port),
                    controllers=[("127.0.0.1", i.ofp_port) for i in self.instances],
                    run_dir=self.run_dir,
                    shape=self.shape,
                    queue_classes=self.queue_classes,
                    protocol="tcp" if self.tls is None else "ssl",
                )
            )
            started = time.monotonic()
            for inst in self.instances:
                inst.api.wait_for(self.switches, expected_links(self.graph), self.discovery_timeout)
            self.wait_balanced(self.discovery_timeout)
            log.info(
                "cluster: %d instances share %d switches after %.1f s: %s",
                len(self.instances),
                self.switches,
                time.monotonic() - started,
                self.shares(),
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
        assert self.fnet is not None, "LoomCluster used outside its with-block"
        return self.fnet

    def live(self) -> list[Instance]:
        return [i for i in self.instances if i.alive()]

    def view(self) -> dict[str, Any]:
        """``GET /loom/v1/cluster`` from the first live instance that answers."""
        for inst in self.live():
            with contextlib.suppress(OSError, LoomApiError):
                return inst.cluster()
        raise RuntimeError("no Loom instance answers")

    def masters(self) -> dict[str, str]:
        """dpid (16 hex digits) -> the instance that masters it, as the store says."""
        return dict(self.view()["masters"])

    def mastered_by_switches(self) -> dict[str, str]:
        """dpid -> instance, as each instance says it is master (its switch replied)."""
        out: dict[str, str] = {}
        for inst in self.live():
            with contextlib.suppress(OSError, LoomApiError):
                for dpid in inst.cluster()["mine"]:
                    out[dpid] = inst.name
        return out

    def shares(self) -> dict[str, int]:
        counts = {i.name: 0 for i in self.live()}
        for name in self.masters().values():
            counts[name] = counts.get(name, 0) + 1
        return counts

    def wait_mastered(self, timeout: float, without: str | None = None) -> float:
        """Seconds until every switch is mastered (by a live instance other than
        ``without``) both in the store and by the instance's own word."""
        started = time.monotonic()
        while True:
            with contextlib.suppress(OSError, LoomApiError, RuntimeError, KeyError):
                mine = self.mastered_by_switches()
                if len(mine) == self.switches and without not in mine.values():
                    return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"switches not all mastered after {timeout:g} s")
            time.sleep(0.02)

    def wait_balanced(self, timeout: float) -> float:
        """Seconds until every live instance masters its share (within one of even) and
        every switch is mastered (an instance just started answers with an empty view
        at first: its shares are not taken for balanced ones)."""
        started = time.monotonic()
        while True:
            with contextlib.suppress(OSError, LoomApiError, RuntimeError, KeyError):
                shares = self.shares()
                whole = sum(shares.values()) == self.switches and len(shares) == len(self.live())
                if whole and max(shares.values()) - min(shares.values()) <= 1:
                    self.wait_mastered(timeout)
                    return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"switches not shared evenly after {timeout:g} s")
            time.sleep(0.1)

    def instance(self, name: str) -> Instance:
        return next(i for i in self.instances if i.name == name)

    def kill(self, name: str) -> float:
        """SIGKILL an instance's whole process group; the monotonic time it was sent."""
        inst = self.instance(name)
        sent = time.monotonic()
        inst.process.stop(signal.SIGKILL, grace=0.0)
        return sent
