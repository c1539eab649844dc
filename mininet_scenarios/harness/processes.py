"""The lab's host-side child processes, and the process helpers the harness shares.

:class:`ChildProcess` is the one lifecycle of every long-lived process the lab starts outside
the emulated hosts (the controller under ryu-manager or osken-manager, Faucet, Prometheus):

* its own session (``start_new_session``): a Ctrl-C at the terminal reaches us alone, and
  we stop the child when we are done with it (the controller after the switches, so it never
  sees a half-torn-down fabric as a failure);
* a ready check, polled until ``start_timeout``: a callable given the child's PID, such as
  :func:`listening_on` (the child *itself* owns a socket listening on the port: a probe
  connection would look like a switch to a controller, and another process already on the
  port would fool it) or :func:`http_ok` (a URL answers 200);
* stop: SIGTERM to the whole process group, SIGKILL to what is left after ``stop_timeout``,
  and the child reaped;
* an error carrying the tail of the child's log when it dies or is not ready in time;
* stopped on *any* exception while it starts (``BaseException``: Ctrl-C too), whether
  through ``with`` or :meth:`ChildProcess.start`.

Everything else the harness stops it finds and kills by PID (:func:`kill_pids`), never by
name: other emulations may run on the same machine at the same time.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Self

REPO_ROOT = Path(__file__).resolve().parents[2]
LOG_TAIL_LINES = 40

Ready = Callable[[int], bool]  # given the child's PID: is it ready?


class ProcessError(RuntimeError):
    """A child process died or was not ready in time; the message carries its log tail."""


# --------------------------------------------------------------------------- helpers


PORTS_FROM = 20000  # free ports are picked from here up to the kernel's ephemeral range
FIXED_PORTS = frozenset({20000, 29500, 30000})  # ports the lab's programs take by number


def free_port() -> int:
    """A TCP port nobody listens on right now, below the kernel's ephemeral range: there
    no outgoing connection takes it as its own port before the program it is for binds
    it (a port the kernel picked from its range could be, and that program would start
    without its listener). Ports the lab's etcd members take by number (``…379``,
    ``…380``) and ``FIXED_PORTS`` are never picked."""
    low = _ephemeral_low()
    for _ in range(200):
        port = secrets.randbelow(low - PORTS_FROM) + PORTS_FROM
        if port in FIXED_PORTS or port % 1000 in (379, 380):
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError(f"no free TCP port from {PORTS_FROM} to {low - 1}")


def _ephemeral_low() -> int:
    """Where the kernel's range of ports for outgoing connections starts."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return max(low, PORTS_FROM + 1000)


def tcp_sockets() -> Iterator[list[str]]:
    """Every TCP socket of the machine, IPv4 and IPv6, as the kernel lists it in
    ``/proc/net/tcp*``: split fields (1 local address, 2 remote, 3 state, 4 tx:rx queue,
    9 inode)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        yield from (line.split() for line in lines)


def socket_port(address: str) -> int:
    """The port of an address as ``/proc/net/tcp`` writes it (``ADDR:PORT`` in hex)."""
    return int(address.rsplit(":", 1)[1], 16)


def _listening_inodes(port: int) -> set[str]:
    return {f[9] for f in tcp_sockets() if f[3] == "0A" and socket_port(f[1]) == port}


def pid_listens_on(pid: int, port: int) -> bool:
    """Does process ``pid`` own a TCP socket listening on ``port``?"""
    inodes = _listening_inodes(port)
    if not inodes:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


def listening_on(port: int) -> Ready:
    """Ready check: the child itself listens on TCP ``port``."""
    return lambda pid: pid_listens_on(pid, port)


def http_ok(url: str, timeout: float = 1.0) -> Ready:
    """Ready check: ``url`` answers HTTP 200."""

    import urllib.request  # here: children in the hosts import this module's neighbours

    def check(pid: int) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    return check


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file (or why there are none)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc})"


def alive(pid: int) -> bool:
    """Is ``pid`` running (and not a zombie)?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill_pids(pids: Sequence[int], grace: float = 1.0) -> None:
    """SIGTERM, then SIGKILL whatever still runs after ``grace`` seconds."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    running = list(pids)
    while running and time.monotonic() < deadline:
        time.sleep(0.05)
        running = [p for p in running if alive(p)]
    for pid in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def pids_in_netns(ns_stat: os.stat_result, exclude: Sequence[int] = ()) -> list[int]:
    """PIDs whose network namespace is the one ``ns_stat`` describes."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        try:
            st = os.stat(f"/proc/{entry}/ns/net")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (ns_stat.st_dev, ns_stat.st_ino):
            pids.append(int(entry))
    return pids


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes in process group ``pgid``."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[0] != "Z" and fields[2] == str(pgid):
            members.append(int(entry))
    return members


# --------------------------------------------------------------------------- lifecycle


def _leader_running(proc: subprocess.Popen[bytes]) -> bool:
    """Has the child not exited yet? Leaves an exited child unreaped (its PID, and so its
    process group ID, cannot be reused until :meth:`ChildProcess.stop` reaps it)."""
    if proc.returncode is not None:
        return False
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        return False


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """A second Ctrl-C while a child stops is held until it is stopped, then raised."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


class ChildProcess:
    """``with ChildProcess(argv, log_path, ready=listening_on(port)) as child:`` ...

    Starts ``argv`` (``command()``) in its own session with stdout and stderr appended to
    ``log_path``, in ``cwd`` (default: the repository root) with ``environment()`` (default:
    ours, updated with ``env``), and polls ``ready`` (None: ready once started) every
    ``poll_interval`` until ``start_timeout``. A child that exits first, or is not ready in
    time, is stopped and raises ``error`` (a :class:`ProcessError`) with its log tail; so
    does any other exception on the way, Ctrl-C included. ``stop()`` sends SIGTERM to the
    process group, SIGKILL after ``stop_timeout``, and reaps; ``start()`` may follow again.

    Subclasses set ``error`` and override :meth:`command`, :meth:`environment`,
    :meth:`prepare` (before every start: write a config, say) or :meth:`log_tail`.
    """

    error: type[ProcessError] = ProcessError

    def __init__(
        self,
        argv: Sequence[str],
        log_path: str | Path,
        *,
        name: str | None = None,
        cwd: str | Path = REPO_ROOT,
        env: Mapping[str, str] | None = None,
        ready: Ready | None = None,
        waiting_for: str = "ready",
        start_timeout: float = 30.0,
        stop_timeout: float = 5.0,
        poll_interval: float = 0.1,
    ) -> None:
        self.argv = [str(a) for a in argv]
        self.log_path = Path(log_path)
        self.name = name or (Path(self.argv[0]).name if self.argv else "child")
        self.cwd = Path(cwd)
        self.env = dict(env or {})
        self.ready = ready
        self.waiting_for = waiting_for  # for messages: "exited before <waiting_for>"
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.poll_interval = poll_interval
        self.proc: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------- to override

    def command(self) -> list[str]:
        return list(self.argv)

    def environment(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def prepare(self) -> None:
        """Called before every start, inside the cleanup guard."""

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return tail(self.log_path, lines)

    # ------------------------------------------------------------- lifecycle

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def start(self) -> None:
        """Start and wait until ready; on any exception (Ctrl-C too) stop the child first."""
        if self.proc is not None:
            raise self.error(f"{self.name} is already running (pid {self.proc.pid})")
        try:
            self.prepare()
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    self.command(),
                    cwd=self.cwd,
                    env=self.environment(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self._wait_ready(self.proc)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            if not _leader_running(proc):
                code = self.stop()
                raise self.error(
                    f"{self.name} exited with code {code} before {self.waiting_for};"
                    f" log {self.log_path}:\n{self.log_tail()}"
                )
            if self.ready is None or self.ready(proc.pid):
                return
            if time.monotonic() > deadline:
                self.stop()
                raise self.error(
                    f"{self.name} was not {self.waiting_for} within {self.start_timeout:g} s;"
                    f" log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(self.poll_interval)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        """Raise ``error`` with the log tail if the child has died."""
        if self.proc is not None and self.proc.poll() is not None:
            raise self.error(f"{self.name} died (exit {self.proc.returncode}):\n{self.log_tail()}")

    def stop(self, signum: int = signal.SIGTERM, grace: float | None = None) -> int | None:
        """``signum`` (default SIGTERM) to the process group, SIGKILL to whatever is left
        after ``grace`` seconds (default ``stop_timeout``), then reap. Returns the child's
        exit code (negative: the signal that ended it), None if it was not started."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        grace = self.stop_timeout if grace is None else grace
        pgid = proc.pid  # its own session: the group is the child's PID
        with _sigint_deferred():
            # While the child is not reaped its PID cannot be reused; once it is, a group
            # member that lives on keeps the group ID taken, so signalling it is safe.
            if _leader_running(proc) or group_members(pgid):
                _signal_group(pgid, signum)
                deadline = time.monotonic() + grace
                delay = 0.0005
                while _leader_running(proc) or group_members(pgid):
                    if time.monotonic() > deadline:
                        _signal_group(pgid, signal.SIGKILL)
                        break
                    time.sleep(delay)
                    delay = min(delay * 2, 0.05)
            return proc.wait()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
