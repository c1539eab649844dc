"""Processes inside the emulated hosts: the one way the lab starts, waits for and stops them.

Two kinds, both started in the host's network namespace and stopped by PID (never by name:
other emulations may run on the same machine at the same time); whatever is still running in
a host when its fabric stops, ``FabricNet`` kills with the namespace:

* **Children** (:func:`popen_in_host`, :func:`start_child` for ``python -m MODULE`` with this
  interpreter): Mininet's ``host.popen``, their stdin/stdout/stderr pipes ours. Our own helper
  processes report by printing one JSON object per line (:func:`read_report`) and stop cleanly
  on SIGTERM (:class:`StopFlag`, :func:`stop_child`); :func:`finish_child` waits for one to end
  and :func:`run_child` runs one to its end.
* **Shell jobs** (:func:`start_job`): a shell command line (redirections to files, a subshell
  waiting for a start file) run in the background by the host's own shell; its PID, checked
  with :func:`~mininet_scenarios.harness.processes.alive` and stopped with
  :func:`~mininet_scenarios.harness.processes.kill_pids`. iperf3 servers and clients and the
  gloo ranks run this way.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from mininet_scenarios.harness.processes import REPO_ROOT

Stream = int | IO[Any] | None  # what Popen takes for stdin/stdout/stderr


class HostProcessError(RuntimeError):
    """A process could not be started in a host."""


class StopFlag:
    """Set by SIGTERM/SIGINT, so a child's loop ends cleanly and still reports."""

    def __init__(self, *signums: int) -> None:
        self.raised = False
        for signum in signums or (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._set)

    def _set(self, signum: int, frame: object) -> None:
        self.raised = True


# --------------------------------------------------------------------------- children


def popen_in_host(
    host: Any,
    argv: Sequence[str],
    *,
    stdin: Stream = subprocess.DEVNULL,
    stdout: Stream = subprocess.PIPE,
    stderr: Stream = subprocess.PIPE,
    cwd: str | Path = REPO_ROOT,
) -> subprocess.Popen[bytes]:
    """``argv`` inside a Mininet host (its namespace; Mininet's ``mnexec`` puts it in a
    session of its own), from ``cwd`` (default: the repository root)."""
    return host.popen(  # type: ignore[no-any-return]
        list(argv), cwd=str(cwd), stdin=stdin, stdout=stdout, stderr=stderr
    )


def start_child(
    host: Any, module: str, *args: str, stdin: Stream = subprocess.DEVNULL
) -> subprocess.Popen[bytes]:
    """``python -m <module> <args>`` inside a Mininet host (its namespace, our interpreter)."""
    return popen_in_host(host, [sys.executable, "-m", module, *args], stdin=stdin)


def read_report(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> dict[str, Any]:
    """The next JSON line a child prints, or an error with what it said instead."""
    assert proc.stdout is not None
    stdout = proc.stdout
    result: list[bytes] = []
    reader = threading.Thread(target=lambda: result.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not result or not result[0]:
        err = b""
        if proc.poll() is not None and proc.stderr is not None:
            err = proc.stderr.read() or b""
        raise RuntimeError(f"child {proc.args!r} said nothing: {err.decode(errors='replace')}")
    return dict(json.loads(result[0]))


def stop_child(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM (the child reports and exits), SIGKILL if it does not within ``timeout``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def finish_child(
    proc: subprocess.Popen[bytes], timeout: float, input: bytes | None = None
) -> tuple[bytes, bytes]:
    """Wait for a child to end (after writing ``input`` to its stdin, if given); its stdout
    and stderr. Still running after ``timeout`` seconds, it is killed (SIGKILL) and what it
    wrote until then is returned: ``proc.returncode`` tells which."""
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return out or b"", err or b""


def run_child(
    host: Any, module: str, *args: str, timeout: float, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``python -m <module> <args>`` in a host, to its end: :func:`start_child`, then
    :func:`finish_child` (``input`` on its stdin)."""
    stdin = subprocess.PIPE if input is not None else subprocess.DEVNULL
    proc = start_child(host, module, *args, stdin=stdin)
    out, err = finish_child(proc, timeout, input)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


# --------------------------------------------------------------------------- shell jobs


def start_job(host: Any, cmd: str) -> int:
    """``cmd`` (a shell command line) as a background job of ``host``'s shell; its PID.

    For a PID that is the command itself, ``cmd`` should be one simple command (the shell
    execs it in the job) or ``( exec ... )``/a subshell that execs its last command."""
    out = host.cmd(f"{cmd} & echo __pid=$!")
    m = re.search(r"__pid=(\d+)", out)
    if not m:
        raise HostProcessError(f"{host.name}: could not start {cmd!r}: {out.strip()}")
    return int(m.group(1))
