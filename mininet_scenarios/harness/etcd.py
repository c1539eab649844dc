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

``pki`` (the lab's CA, ``make pki``) puts clients and peers on TLS, each side showing a
certificate of the CA (``--client-cert-auth``, ``--peer-client-cert-auth``); ``auth`` then
makes users once the cluster has formed, with etcdctl (Debian's etcd-client): ``root``, and
``loom``, whose role may read and write Loom's prefix only, and turns authentication on.
Their passwords are random, in files of the data directory readable by us alone, and reach
etcdctl on its standard input, never on a command line. :meth:`EtcdCluster.access` and
:meth:`EtcdCluster.loom_env` say how a client (a Loom instance) gets in.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from controller.cluster.etcd import EtcdAccess, EtcdClient, StoreUnavailable
from mininet_scenarios.harness.pki import Pki
from mininet_scenarios.harness.processes import ChildProcess, ProcessError, listening_on, tail

MISSING = "etcd not found: install Debian's etcd-server (make setup does)"
MISSING_CTL = "etcdctl not found: install Debian's etcd-client (make setup does)"
READY_KEY = "/loom-harness/ready"  # outside Loom's prefix, and deleted once read back
PREFIX = "/loom/"  # Loom's keys: all the loom user may touch
USER = "loom"


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
    pki: Pki | None = None  # TLS for clients and peers, certificates of this CA both ways
    auth: bool = False  # users and authentication (needs pki: passwords never in the clear)
    token_ttl: int = 300  # seconds an unused auth token lives (etcd's default)
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
        return f"{'etcds' if self.pki else 'etcd'}://{hosts}{PREFIX.rstrip('/')}"

    @property
    def _scheme(self) -> str:
        return "https" if self.pki else "http"

    def endpoints(self) -> list[str]:
        return [f"{self._scheme}://127.0.0.1:{self.client_port(i)}" for i in self._numbers()]

    def password_file(self, user: str = USER) -> Path:
        assert self._dir is not None, "the cluster is not started"
        return self._dir / f"{user}.password"

    def access(self, user: str | None = USER) -> EtcdAccess:
        """How a client gets in: the client certificate with TLS, and ``user`` (its
        password read from its file) with auth; ``user=None``: the certificate alone."""
        if self.pki is None:
            return EtcdAccess()
        cert, key = str(self.pki.cert("etcd-client")), str(self.pki.key("etcd-client"))
        if not self.auth or user is None:
            return EtcdAccess(str(self.pki.ca_cert), cert, key)
        password = self.password_file(user).read_text().strip()
        return EtcdAccess(str(self.pki.ca_cert), cert, key, user, password)

    def loom_env(self) -> dict[str, str]:
        """The ``LOOM_*`` settings of an instance on this cluster (docs/settings.md)."""
        env = {"LOOM_CLUSTER": self.url}
        if self.pki is not None:
            env["LOOM_ETCD_CA"] = str(self.pki.ca_cert)
            env["LOOM_ETCD_CERT"] = str(self.pki.cert("etcd-client"))
            env["LOOM_ETCD_KEY"] = str(self.pki.key("etcd-client"))
        if self.auth:
            env["LOOM_ETCD_USER"] = USER
            env["LOOM_ETCD_PASSWORD_FILE"] = str(self.password_file())
        return env

    def _numbers(self) -> range:
        return range(1, self.members + 1)

    def _log(self, i: int) -> Path:
        assert self._dir is not None
        return self._dir / f"member{i}.log"

    def _argv(self, binary: str, i: int, state: str) -> list[str]:
        assert self._dir is not None
        client = f"{self._scheme}://127.0.0.1:{self.client_port(i)}"
        peer = f"{self._scheme}://127.0.0.1:{self.peer_port(i)}"
        cluster = ",".join(
            f"m{j}={self._scheme}://127.0.0.1:{self.peer_port(j)}" for j in self._numbers()
        )
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
            *self._tls_flags(),
        ]

    def _tls_flags(self) -> list[str]:
        if self.pki is None:
            return []
        pki, ca = self.pki, str(self.pki.ca_cert)
        ttl = [f"--auth-token-ttl={self.token_ttl}"] if self.auth else []
        return [
            *ttl,
            f"--cert-file={pki.cert('etcd-server')}",
            f"--key-file={pki.key('etcd-server')}",
            f"--trusted-ca-file={ca}",
            "--client-cert-auth",
            f"--peer-cert-file={pki.cert('etcd-peer')}",
            f"--peer-key-file={pki.key('etcd-peer')}",
            f"--peer-trusted-ca-file={ca}",
            "--peer-client-cert-auth",
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
        if self.auth and (self.pki is None or shutil.which("etcdctl") is None):
            raise EtcdError("auth needs pki (TLS)" if self.pki is None else MISSING_CTL)
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
            if self.auth:
                self._enable_auth(max(deadline - time.monotonic(), 5.0))
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_formed(self, deadline: float, timeout: float) -> None:
        access = self.access(user=None)  # users come after
        first = EtcdClient(self.endpoints()[:1], timeout=1.0, access=access)
        pending = [EtcdClient([e], timeout=1.0, access=access) for e in self.endpoints()]
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

    def _enable_auth(self, timeout: float) -> None:
        """root and loom with random passwords, loom's role on ``PREFIX``, then auth on."""
        for user in ("root", USER):
            path = self.password_file(user)
            path.touch(mode=0o600)
            path.write_text(secrets.token_urlsafe(18) + "\n")
        steps: list[tuple[list[str], Path | None]] = [
            (["user", "add", "root"], self.password_file("root")),
            (["user", "grant-role", "root", "root"], None),
            (["role", "add", USER], None),
            (["role", "grant-permission", USER, "readwrite", PREFIX, "--prefix=true"], None),
            (["user", "add", USER], self.password_file()),
            (["user", "grant-role", USER, USER], None),
            (["auth", "enable"], None),
        ]
        for args, secret in steps:
            self._etcdctl(args, secret, timeout)

    def _etcdctl(self, args: list[str], secret: Path | None, timeout: float) -> None:
        assert self.pki is not None
        binary = shutil.which("etcdctl") or "etcdctl"
        pki = self.pki
        argv = [
            binary,
            f"--endpoints={self.endpoints()[0]}",
            f"--cacert={pki.ca_cert}",
            f"--cert={pki.cert('etcd-client')}",
            f"--key={pki.key('etcd-client')}",
            *args,
        ]
        # etcdctl asks twice (the password, then to confirm it) and reads both from stdin.
        typed = secret.read_text() * 2 if secret is not None else ""
        done = subprocess.run(
            argv, input=typed, capture_output=True, text=True, timeout=timeout, check=False
        )
        if done.returncode != 0:
            words = " ".join(args[:2])
            raise EtcdError(f"etcdctl {words} failed: {done.stderr.strip()[-400:]}")

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
