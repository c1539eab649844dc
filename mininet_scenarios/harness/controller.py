"""Run a Ryu application (under ryu-manager, or os-ken's osken-manager) as a child process
for the lifetime of a ``with`` block.

Why a subprocess and not an in-process Ryu: ryu-manager monkey-patches the interpreter with
eventlet, which would break Mininet's blocking pty I/O in the same process.

The lifecycle is :class:`~mininet_scenarios.harness.processes.ChildProcess`: own session,
ready once *our* process listens on the OpenFlow port (its socket's inode appears under
``/proc/<pid>/fd``; a probe connection would look like a switch to the controller, and
another controller already on the port would fool a probe), stopped on any exception while
it starts, SIGTERM then SIGKILL to its process group on exit.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from mininet_scenarios.harness.pki import Pki
from mininet_scenarios.harness.processes import ChildProcess, ProcessError, listening_on
from mininet_scenarios.harness.tls import controller_args


class ControllerError(ProcessError):
    """The controller died or did not listen in time; the message carries its log tail."""


def ryu_manager_path() -> Path:
    """``ryu-manager`` of the interpreter running us (the venv's), else the one on PATH."""
    candidate = Path(sys.executable).parent / "ryu-manager"
    return candidate if candidate.exists() else Path("ryu-manager")


class ControllerProcess(ChildProcess):
    """``with ControllerProcess("controller/app.py", ofp_port=free_port()) as ctl:`` ...

    Starts ``MANAGER --ofp-tcp-listen-port PORT [--wsapi-port N] [extra_args] APP`` from the
    repository root (``manager``: default this venv's ``ryu-manager``; os-ken's
    ``osken-manager`` takes the same arguments), waits until it listens, and on exit sends
    SIGTERM, then SIGKILL after ``stop_timeout`` seconds, and reaps it. ``app`` is a path
    relative to the repository root or a module name such as ``ryu.app.simple_switch_13``.
    With ``tls`` (a :class:`~mininet_scenarios.harness.pki.Pki`) it listens for TLS only on
    PORT and requires switch certificates of its CA (:mod:`~mininet_scenarios.harness.tls`).
    """

    error = ControllerError

    def __init__(
        self,
        app: str = "controller/app.py",
        ofp_port: int = 6653,
        env: Mapping[str, str] | None = None,
        log_path: str | Path | None = None,
        extra_args: Sequence[str] = (),
        *,
        wsapi_port: int | None = None,
        manager: str | Path | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 5.0,
        tls: Pki | None = None,
    ) -> None:
        if log_path is None:
            run_dir = Path(tempfile.gettempdir()) / f"loom-run-{os.getpid()}"
            log_path = run_dir / f"ryu-{ofp_port}.txt"
        self.app = app
        self.ofp_port = ofp_port
        self.wsapi_port = wsapi_port
        self.tls = tls
        self.extra_args = tuple(extra_args)
        self.manager = Path(manager) if manager is not None else ryu_manager_path()
        super().__init__(
            (),
            log_path,
            name=self.manager.name,
            env={"PYTHONUNBUFFERED": "1", **(env or {})},
            ready=listening_on(ofp_port),
            waiting_for=f"listening on {ofp_port}",
            start_timeout=start_timeout,
            stop_timeout=stop_timeout,
        )

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.ofp_port)

    def command(self) -> list[str]:
        if self.tls is not None:
            cmd = [str(self.manager), *controller_args(self.tls, self.ofp_port)]
        else:
            cmd = [str(self.manager), "--ofp-tcp-listen-port", str(self.ofp_port)]
        if self.wsapi_port is not None:
            cmd += ["--wsapi-port", str(self.wsapi_port)]
        return [*cmd, *self.extra_args, self.app]
