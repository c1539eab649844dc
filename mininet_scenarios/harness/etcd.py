"""A local etcd cluster of N members on loopback, for tests, demos and benchmarks.

``with EtcdCluster(members=3) as etcd:`` starts Debian's ``etcd`` once per member, each a
:class:`~mininet_scenarios.harness.processes.ChildProcess` (its own session, its log in the
data directory, stopped by process group), and returns once a write on member 1 reads
back on every member: the cluster has a leader and every member follows it. ``kill`` and
``restart`` take single members down and back up, to exercise a quorum lost and regained.

Member ``i`` (1-based) listens for clients on ``base_port + (i - 1) * 1000`` and for its
peers on the port after it, so several clusters (a demo on the defaults and the tests on
their own ports) can run side by side. A port already taken fails the start, naming the
port, rather than let a member join someone else's cluster.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from controller.cluster.etcd import EtcdClient, StoreUnavailable
from mininet_scenarios.harness.processes import ChildProcess, ProcessError, listening_on, tail

MISSING = "etcd not found: install Debian's etcd-server (make setup does)"
READY_KEY = "/loom-harness/ready"  # outside Loom's prefix, and deleted once read back


class EtcdError(ProcessError):
    """A member did not start, died, or the cluster did not form in time."""


class _Member(ChildProcess):
    error = EtcdError


def _check_free(port: int, what: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as etcd binds
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise EtcdError(f"port {port} ({what}) is already in use: {exc.strerror}") from None


@dataclass
class EtcdCluster:
    members: int = 3
    base_port: int = 21379
    heartbeat_ms: int = 100
    election_ms: int = 500
    data_dir: Path | None = None  # None: a fresh temporary directory, removed on stop
    _children: dict[int, ChildProcess] = field(default_factory=dict, init=False, repr=False)
    _dir: Path | None = field(default=None, init=False, repr=False)
    _temporary: bool = field(default=False, init=False, repr=False)
    _token: str = field(default="", init=False, repr=False)

    # ------------------------------------------------------------- addresses

    def client_port(self, i: int) -> int:
        return self.base_port + (i - 1) * 1000

    def peer_port(self, i: int) -> int:
        return self.client_port(i) + 1

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{self.client_port(i)}" for i in self._numbers())
        return f"etcd://{hosts}/loom"

    def endpoints(self) -> list[str]:
        return [f"http://127.0.0.1:{self.client_port(i)}" for i in self._numbers()]

    def _numbers(self) -> range:
        return range(1, self.members + 1)

    def _log(self, i: int) -> Path:
        assert self._dir is not None
        return self._dir / f"member{i}.log"

    def _argv(self, binary: str, i: int, state: str) -> list[str]:
        assert self._dir is not None
        client = f"http://127.0.0.1:{self.client_port(i)}"
        peer = f"http://127.0.0.1:{self.peer_port(i)}"
        cluster = ",".join(f"m{j}=http://127.0.0.1:{self.peer_port(j)}" for j in self._numbers())
        return [
            binary,
            f"--name=m{i}",
            f"--data-dir={self._dir / f'member{i}'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster={cluster}",
            f"--initial-cluster-token={self._token}",
            f"--initial-cluster-state={state}",
            f"--heartbeat-interval={self.heartbeat_ms}",
            f"--election-timeout={self.election_ms}",
            "--logger=zap",
            "--log-level=warn",
        ]

    def _check_ports(self, i: int) -> None:
        _check_free(self.client_port(i), f"etcd member {i}'s client port")
        _check_free(self.peer_port(i), f"etcd member {i}'s peer port")

    # ------------------------------------------------------------- lifecycle

    def _spawn(self, i: int, state: str, timeout: float) -> None:
        binary = shutil.which("etcd")
        if binary is None:
            raise EtcdError(MISSING)
        self._check_ports(i)
        child = _Member(
            self._argv(binary, i, state),
            self._log(i),
            name=f"etcd member {i}",
            ready=listening_on(self.client_port(i)),
            waiting_for=f"listening on port {self.client_port(i)}",
            start_timeout=max(timeout, 0.1),
            stop_timeout=2.0,
        )
        child.start()
        self._children[i] = child

    def start(self, timeout: float = 15.0) -> Self:
        """Start every member and wait until a write on member 1 reads back on all."""
        if self._dir is not None:
            raise EtcdError(f"etcd cluster on port {self.base_port} is already started")
        if shutil.which("etcd") is None:
            raise EtcdError(MISSING)
        for i in self._numbers():
            self._check_ports(i)
        deadline = time.monotonic() + timeout
        if self.data_dir is None:
            self._dir, self._temporary = Path(tempfile.mkdtemp(prefix="loom-etcd-")), True
        else:
            self._dir, self._temporary = self.data_dir, False
            self._dir.mkdir(parents=True, exist_ok=True)
        self._token = f"loom-{os.getpid()}-{time.monotonic_ns()}"
        try:
            for i in self._numbers():
                self._spawn(i, "new", deadline - time.monotonic())
            self._wait_formed(deadline, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_formed(self, deadline: float, timeout: float) -> None:
        first = EtcdClient(self.endpoints()[:1], timeout=1.0)
        pending = [EtcdClient([endpoint], timeout=1.0) for endpoint in self.endpoints()]
        written = False
        while time.monotonic() < deadline:
            for child in self._children.values():
                child.check_alive()
            with contextlib.suppress(StoreUnavailable):
                if not written:
                    first.put(READY_KEY, self._token.encode())
                    written = True
                pending = [r for r in pending if not _reads(r, self._token.encode())]
                if not pending:
                    first.delete(READY_KEY)
                    return
            time.sleep(0.05)
        logs = "\n".join(f"--- {self._log(i)}:\n{tail(self._log(i), 10)}" for i in self._numbers())
        raise EtcdError(f"etcd cluster did not form within {timeout:g} s\n{logs}")

    def stop(self) -> None:
        """Stop the members this cluster started and remove its temporary directory."""
        children, self._children = self._children, {}
        for child in children.values():
            child.stop(grace=2.0)
        if self._temporary and self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir, self._temporary = None, False

    def kill(self, i: int) -> None:
        """SIGKILL member ``i`` (1-based): a crash, with no goodbye to its peers."""
        if i not in self._children:
            raise EtcdError(f"etcd member {i} is not running")
        self._children.pop(i).stop(signal.SIGKILL, grace=1.0)

    def restart(self, i: int) -> None:
        """Start member ``i`` again on its existing data directory."""
        if self._dir is None or i in self._children or i not in self._numbers():
            raise EtcdError(f"etcd member {i} is running, unknown, or its cluster is stopped")
        self._spawn(i, "existing", 15.0)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _reads(client: EtcdClient, value: bytes) -> bool:
    kv = client.get(READY_KEY)
    return kv is not None and kv.value == value
