"""Failures to inject into a running Loom stack, and waiting for it to recover: a switch
losing power, a controller killed and restarted on the same ports, or frozen (SIGSTOP: a
process that holds its sockets but answers nothing, as a hung or starved one does). Every
process started here is stopped by its PID.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from mininet_scenarios.harness.metrics import sample, scrape


def set_switch(net: Any, switch: str, up: bool) -> list[str]:
    """Every port of ``switch`` down (or up), both link ends, with ``ip link``: the switch is
    gone for its neighbours as if it had lost power, and its own PortStatus messages report
    every port down."""
    touched = []
    for peer in sorted(set(net.graph.neighbors(switch))):
        touched += net.set_link(switch, peer, up)
    return touched


def signal_controllers(controllers: Sequence[Any], signum: int) -> list[int]:
    """``signum`` to each controller's whole process group (a :class:`ChildProcess` runs in a
    session of its own, so its children get it too); the PIDs of those signalled."""
    sent = []
    for ctl in controllers:
        pid = ctl.pid
        if pid is None:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signum)
            sent.append(pid)
    return sent


@contextlib.contextmanager
def frozen(controllers: Sequence[Any]) -> Iterator[list[int]]:
    """SIGSTOP the controllers for the block, SIGCONT after it (even on error): they keep
    their sockets open, so switches see a peer that is there and answers nothing."""
    pids = signal_controllers(controllers, signal.SIGSTOP)
    try:
        yield pids
    finally:
        signal_controllers(controllers, signal.SIGCONT)


def set_backoff(bridges: Iterable[str], max_backoff_ms: int = 1000) -> None:
    """OVS retries a lost controller with exponential backoff up to 8 s by default; cap it,
    so a restarted controller is found again within a second (on our bridges only)."""
    args: list[str] = []
    for br in bridges:
        args += ["--", "set", "controller", br, f"max_backoff={max_backoff_ms}"]
    if args:
        subprocess.run(["ovs-vsctl", *args], check=True, capture_output=True, timeout=30)


def wait_health(
    api: Any, timeout: float, *, switches: int = 0, links: int = 0, hosts: int = 0
) -> float | None:
    """Seconds until the controller reports at least these counts (None: timed out).
    Polls every 50 ms and survives a controller that is not listening yet."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        with contextlib.suppress(Exception):
            h = api.health()
            if h["switches"] >= switches and h["links"] >= links and h["hosts"] >= hosts:
                return time.monotonic() - t0
        time.sleep(0.05)
    return None


@dataclass
class Restart:
    """Timeline of a controller restart, seconds after the signal: ``dead`` when the old
    process was reaped, ``listening`` when the new one listened, and (from the REST API)
    when it saw every switch, every host and every link again."""

    signal: str
    dead: float
    listening: float
    switches: float | None
    hosts: float | None
    links: float | None
    arp_packet_ins_when_hosts_back: float | None
    hosts_read_back: float | None
    old_pid: int
    new_pid: int

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in vars(self).items()}


def restart_controller(
    stack: Any,
    how: str = "TERM",
    down_seconds: float = 3.0,
    *,
    n_switches: int,
    n_hosts: int,
    n_links: int,
    timeout: float = 60.0,
) -> Restart:
    """Stop the stack's ryu-manager with SIGTERM or SIGKILL, start a new one on the same
    OpenFlow, REST and metrics ports ``down_seconds`` after the signal, and follow it back."""
    ctl = stack.ctl
    old_pid = ctl.pid
    assert old_pid is not None, "controller not running"
    t0 = time.monotonic()
    # To its process group, as every stop of a ChildProcess; SIGKILL after 10 s if TERM.
    ctl.stop(signal.SIGKILL if how == "KILL" else signal.SIGTERM, grace=10.0)
    dead = time.monotonic() - t0
    time.sleep(max(0.0, down_seconds - dead))
    ctl.start()
    listening = time.monotonic() - t0
    new_pid = ctl.pid
    switches = hosts = links = arp = read_back = None
    deadline = t0 + listening + timeout
    while time.monotonic() < deadline and (switches is None or hosts is None or links is None):
        try:
            h = stack.api.health()
        except Exception:
            time.sleep(0.05)
            continue
        now = time.monotonic() - t0
        if switches is None and h["switches"] >= n_switches:
            switches = now
        if hosts is None and h["hosts"] >= n_hosts:
            hosts = now
            with contextlib.suppress(Exception):
                metrics = scrape(stack.metrics_url)
                arp = sample(metrics, "loom_packet_in_total", kind="arp")
                read_back = sample(metrics, "loom_hosts_recovered_total")
        if links is None and h["links"] >= n_links:
            links = now
        time.sleep(0.05)
    return Restart(how, dead, listening, switches, hosts, links, arp, read_back, old_pid, new_pid)
