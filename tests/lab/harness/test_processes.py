"""The one lifecycle of the lab's host-side child processes, with real (harmless) children:
no root, no network. Every child here runs this interpreter and sleeps."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from mininet_scenarios.harness.processes import (
    ChildProcess,
    ProcessError,
    alive,
    free_port,
    listening_on,
    pid_listens_on,
)

# A child that says it started, starts a grandchild in its process group and sleeps.
FAMILY = (
    "import os, subprocess, sys, time;"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
    "print('child started', os.getpid(), flush=True); time.sleep(60)"
)
# A child that ignores SIGTERM once it has said so.
STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
    "print('ignoring TERM', flush=True); time.sleep(60)"
)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def in_session(sid: int) -> list[int]:
    """Live processes whose session is ``sid`` (a child's own session is its PID)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and fields[3] == str(sid):
            found.append(int(entry))
    return found


def says(log: Path, text: str) -> bool:
    return log.exists() and text in log.read_text()


def wait_until(check: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_child_that_is_never_ready_is_stopped_and_its_log_tail_is_in_the_error(
    tmp_path: Path,
) -> None:
    log = tmp_path / "child.txt"
    child = ChildProcess(
        python(FAMILY),
        log,
        name="sleeper",
        ready=lambda pid: False,
        waiting_for="listening on 1",
        start_timeout=1.0,
    )
    with pytest.raises(ProcessError) as info:
        child.start()
    message = str(info.value)
    assert "sleeper was not listening on 1 within 1 s" in message
    assert "child started" in message  # the log tail
    assert child.proc is None
    assert not child.alive()


def test_a_child_that_dies_first_reports_its_exit_code_and_log(tmp_path: Path) -> None:
    child = ChildProcess(
        python("import sys; print('bad config line 3', flush=True); sys.exit(3)"),
        tmp_path / "child.txt",
        name="dier",
        ready=lambda pid: False,
    )
    with pytest.raises(ProcessError, match="dier exited with code 3 before ready") as info, child:
        pass
    assert "bad config line 3" in str(info.value)


def test_ctrl_c_in_the_ready_check_stops_the_child_and_its_whole_session(
    tmp_path: Path,
) -> None:
    log = tmp_path / "child.txt"
    seen: list[int] = []

    def ready(pid: int) -> bool:
        if says(log, "child started"):
            seen.append(pid)
            wait_until(lambda: len(in_session(pid)) >= 2)  # the grandchild runs too
            raise KeyboardInterrupt
        return False

    child = ChildProcess(python(FAMILY), log, ready=ready, poll_interval=0.02)
    with pytest.raises(KeyboardInterrupt), child:
        pytest.fail("the with-block must not be entered")
    assert seen, "the ready check never saw the child start"
    assert in_session(seen[0]) == []
    assert not alive(seen[0])
    assert child.proc is None


def test_a_child_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    log = tmp_path / "child.txt"
    child = ChildProcess(
        python(STUBBORN), log, ready=lambda pid: says(log, "ignoring TERM"), stop_timeout=0.5
    )
    child.start()
    pid = child.pid
    assert pid is not None and child.alive()
    t0 = time.monotonic()
    code = child.stop()
    assert code == -signal.SIGKILL
    assert 0.4 < time.monotonic() - t0 < 5.0
    assert in_session(pid) == []


def test_stop_terms_the_process_group_and_start_may_follow(tmp_path: Path) -> None:
    log = tmp_path / "child.txt"
    child = ChildProcess(python(FAMILY), log, ready=lambda pid: says(log, f"child started {pid}"))
    with child:
        first = child.pid
        assert first is not None
        wait_until(lambda: len(in_session(first)) >= 2)
    assert in_session(first) == []
    assert child.stop() is None  # already stopped
    child.start()
    try:
        assert child.pid is not None and child.pid != first and child.alive()
    finally:
        assert child.stop() == -signal.SIGTERM
    assert log.read_text().count("child started") == 2  # the log is appended to


def test_check_alive_raises_with_the_log_once_the_child_died(tmp_path: Path) -> None:
    log = tmp_path / "child.txt"
    child = ChildProcess(python("print('bye', flush=True)"), log, name="brief")
    with child:
        wait_until(lambda: not child.alive())
        with pytest.raises(ProcessError, match=r"brief died \(exit 0\):\nbye"):
            child.check_alive()


def test_listening_on_waits_for_the_childs_own_socket(tmp_path: Path) -> None:
    port = free_port()
    code = (
        "import socket, time; time.sleep(0.3); s = socket.socket();"
        f"s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(60)"
    )
    with ChildProcess(python(code), tmp_path / "child.txt", ready=listening_on(port)) as child:
        assert child.pid is not None and pid_listens_on(child.pid, port)
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    assert not pid_listens_on(os.getpid(), port)
