"""Our own helper processes inside Mininet hosts: started with this interpreter in the
host's namespace, they report by printing one JSON object per line, and are stopped by
their PID (never by name: other people's processes share the machine).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]


class StopFlag:
    """Set by SIGTERM/SIGINT, so a child's loop ends cleanly and still reports."""

    def __init__(self, *signums: int) -> None:
        self.raised = False
        for signum in signums or (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._set)

    def _set(self, signum: int, frame: object) -> None:
        self.raised = True


def start_child(host: Any, module: str, *args: str) -> subprocess.Popen[bytes]:
    """``python -m <module> <args>`` inside a Mininet host (its namespace, our interpreter)."""
    cmd = [sys.executable, "-m", module, *args]
    return host.popen(  # type: ignore[no-any-return]
        cmd, cwd=str(REPO_ROOT), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    )


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
