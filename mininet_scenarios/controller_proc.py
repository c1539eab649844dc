"""Run a Ryu application as a child process for the lifetime of a ``with`` block.

Why a subprocess and not an in-process Ryu: ryu-manager monkey-patches the interpreter with
eventlet, which would break Mininet's blocking pty I/O in the same process.

Readiness is judged by the listening socket belonging to *our* process (its inode appears
under ``/proc/<pid>/fd``), not by connecting to the port: a probe connection would look like
a switch to the controller, and another controller already on the port would fool a probe.

The process helpers the harness shares (``alive``, ``kill_pids``, ``pids_in_netns``) live
here too: everything the harness stops, it finds and kills by PID, never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

REPO_ROOT = Path(__file__).resolve().parents[1]
LOG_TAIL_LINES = 40


class ControllerError(RuntimeError):
    """The controller died or did not listen in time; the message carries its log tail."""


def free_port() -> int:
    """A TCP port nobody listens on right now (the kernel's pick; racy but good in practice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ryu_manager_path() -> Path:
    """``ryu-manager`` of the interpreter running us (the venv's), else the one on PATH."""
    candidate = Path(sys.executable).parent / "ryu-manager"
    return candidate if candidate.exists() else Path("ryu-manager")


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


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


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc})"


# Process helpers shared by the harness: everything is found and killed by PID.


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


def alive(pid: int) -> bool:
    """Is ``pid`` running (and not a zombie)?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class ControllerProcess:
    """``with ControllerProcess("controller/app.py", ofp_port=free_port()) as ctl:`` ...

    Starts ``ryu-manager --ofp-tcp-listen-port PORT [--wsapi-port N] [extra_args] APP`` from
    the repository root, waits until it listens, and on exit sends SIGTERM, then SIGKILL after
    ``stop_timeout`` seconds, and reaps it. ``app`` is a path relative to the repository root
    or a module name such as ``ryu.app.simple_switch_13``.
    """

    def __init__(
        self,
        app: str = "controller/app.py",
        ofp_port: int = 6653,
        env: Mapping[str, str] | None = None,
        log_path: str | Path | None = None,
        extra_args: Sequence[str] = (),
        *,
        wsapi_port: int | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 5.0,
    ) -> None:
        self.app = app
        self.ofp_port = ofp_port
        self.wsapi_port = wsapi_port
        self.env = dict(env or {})
        if log_path is None:
            run_dir = Path(tempfile.gettempdir()) / f"loom-run-{os.getpid()}"
            log_path = run_dir / f"ryu-{ofp_port}.txt"
        self.log_path = Path(log_path)
        self.extra_args = tuple(extra_args)
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.ofp_port)

    def command(self) -> list[str]:
        cmd = [str(ryu_manager_path()), "--ofp-tcp-listen-port", str(self.ofp_port)]
        if self.wsapi_port is not None:
            cmd += ["--wsapi-port", str(self.wsapi_port)]
        return [*cmd, *self.extra_args, self.app]

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        with open(self.log_path, "ab") as log:
            # Own session: a Ctrl-C at the terminal reaches us, and we stop the controller
            # only after the switches, so it never sees a half-torn-down fabric as a failure.
            self.proc = subprocess.Popen(
                self.command(),
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.proc = None
                raise ControllerError(
                    f"ryu-manager exited with code {code} before listening on {self.ofp_port};"
                    f" log {self.log_path}:\n{tail(self.log_path)}"
                )
            if pid_listens_on(self.proc.pid, self.ofp_port):
                return
            if time.monotonic() > deadline:
                self.stop()
                raise ControllerError(
                    f"ryu-manager did not listen on {self.ofp_port} within"
                    f" {self.start_timeout:.0f} s; log {self.log_path}:\n{tail(self.log_path)}"
                )
            time.sleep(0.1)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int | None:
        """Terminate and reap; returns the exit code (None if never started)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return tail(self.log_path, lines)

    def __enter__(self) -> ControllerProcess:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
