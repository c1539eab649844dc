"""Why a collective ran as fast as it did: CPU, ovs-vswitchd, HTB classes, port drops.

A figure alone does not say why it fell short, so every run records the CPU idle of the
machine, how much of the time ovs-vswitchd's main thread ran and how much it waited for a
core (the userspace datapath forwards every packet of every port on that one thread; it is
on the CPU 94-97 % of the time even at 6 Mbit/s links, so "busy" alone does not say it is
short of CPU, waiting does), per-class HTB bytes and drops over all link ends, OVS port
drops, and the packets ovs-vswitchd's receive sockets dropped: the userspace datapath reads
each port through an ``AF_PACKET`` socket whose buffer is ``net.core.rmem_default`` (212
KB: about a dozen 9000-byte frames), and what overflows it appears in no port or queue
counter, only in the socket's own drop count (``ss -0 -m``), in arrival order, whatever the
packet's class.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mininet_scenarios.harness.shaping import class_counters

if TYPE_CHECKING:
    from mininet_scenarios.harness.network import FabricNet

OVS_PIDFILE = Path("/var/run/openvswitch/ovs-vswitchd.pid")


def _ovs_main_thread() -> tuple[int, int] | None:
    """Nanoseconds ovs-vswitchd's main thread (where the userspace datapath forwards every
    packet of every non-DPDK port) has run and has waited runnable for a core (schedstat)."""
    try:
        pid = int(OVS_PIDFILE.read_text().strip())
        ran, waited = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return int(ran), int(waited)


@dataclass(frozen=True)
class CpuSample:
    """One 0.5 s sample: machine idle %, and ovs-vswitchd's main thread's % of that time on
    a core and waiting for one (None: ovs-vswitchd not readable)."""

    at: float  # wall time
    idle: float
    ovs_busy: float | None
    ovs_wait: float | None


@contextlib.contextmanager
def cpu_sampler() -> Iterator[list[CpuSample]]:
    """A :class:`CpuSample` every 0.5 s while the block runs."""
    samples: list[CpuSample] = []
    stop = threading.Event()

    def times() -> tuple[int, int]:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[3] + v[4], sum(v[:8])

    def loop() -> None:
        idle0, total0 = times()
        ovs0, t0 = _ovs_main_thread(), time.monotonic()
        while not stop.wait(0.5):
            idle1, total1 = times()
            ovs1, t1 = _ovs_main_thread(), time.monotonic()
            busy = wait = None
            if ovs0 is not None and ovs1 is not None and t1 > t0:
                busy = (ovs1[0] - ovs0[0]) / 1e7 / (t1 - t0)
                wait = (ovs1[1] - ovs0[1]) / 1e7 / (t1 - t0)
            if total1 > total0:
                idle = 100.0 * (idle1 - idle0) / (total1 - total0)
                samples.append(CpuSample(time.time(), idle, busy, wait))
            idle0, total0, ovs0, t0 = idle1, total1, ovs1, t1

    thread = threading.Thread(target=loop, name="collective-cpu", daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        stop.set()
        thread.join()


def class_snapshot(fnet: FabricNet) -> dict[str, dict[str, tuple[int, int]]]:
    """``interface -> class -> (bytes, dropped)`` for every shaped link end (switch ports
    and host interfaces); empty when the fabric has no queue classes."""
    if not fnet.queue_classes:
        return {}
    out = {}
    for (node, _port), intf in fnet.intf_names.items():
        stats = class_counters(fnet.runner(node), intf, fnet.queue_classes)
        out[intf] = {name: (c.bytes, c.dropped) for name, c in stats.items()}
    return out


def port_drops(fnet: FabricNet) -> dict[str, int]:
    """rx and tx drops summed over every switch port (OpenFlow port counters): packets the
    datapath lost outside the HTB queues, which the class counters cannot show."""
    total = {"rx_dropped": 0, "tx_dropped": 0}
    for sw in fnet.switch_names:
        for c in fnet.port_counters(sw).values():
            total["rx_dropped"] += c.rx_dropped
            total["tx_dropped"] += c.tx_dropped
    return total


_SS_SOCKET_RE = re.compile(r"\*:(\S+)\s.*?ovs-vswitchd.*?skmem:\([^)]*\bd(\d+)\)")


def parse_socket_drops(text: str) -> dict[str, int]:
    """``interface -> drops`` of ovs-vswitchd's packet sockets in ``ss -0 -m -p -H`` output."""
    return {m.group(1): int(m.group(2)) for m in _SS_SOCKET_RE.finditer(text)}


def socket_drops() -> dict[str, int]:
    """Packets ovs-vswitchd's receive socket of each port dropped (its buffer was full)."""
    try:
        proc = subprocess.run(
            ["ss", "-0", "-m", "-p", "-H"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_socket_drops(proc.stdout)


def class_delta(
    before: dict[str, dict[str, tuple[int, int]]], after: dict[str, dict[str, tuple[int, int]]]
) -> dict[str, dict[str, int]]:
    """Bytes and drops per class summed over all link ends between two snapshots, with
    the link end that dropped most collective-class packets and every link end that
    dropped any (``collective_drops_by_end``: where the loss is says what causes it, a
    sender's own interface, a receiver's downlink, or a fabric link)."""
    total: dict[str, dict[str, int]] = {}
    worst = ("", 0)
    by_end: dict[str, int] = {}
    for intf, classes in after.items():
        for name, (nbytes, dropped) in classes.items():
            b0, d0 = before.get(intf, {}).get(name, (0, 0))
            t = total.setdefault(name, {"bytes": 0, "dropped": 0})
            t["bytes"] += nbytes - b0
            t["dropped"] += dropped - d0
            if name == "collective" and dropped - d0 > worst[1]:
                worst = (intf, dropped - d0)
            if name == "collective" and dropped > d0:
                by_end[intf] = dropped - d0
    if by_end:
        total["collective_drops_by_end"] = dict(sorted(by_end.items()))
    if worst[0]:
        total["worst_collective_drops"] = {worst[0]: worst[1]}
    return total


def shared_links(
    before: dict[str, dict[str, tuple[int, int]]],
    after: dict[str, dict[str, tuple[int, int]]],
    min_bytes: int = 100_000,
) -> dict[str, dict[str, int]]:
    """``interface -> {collective, bulk, collective_dropped, bulk_dropped}`` for the link
    ends where both classes sent at least ``min_bytes``: the links a job shared with bulk
    traffic, where the HTB classes, not placement, decide who goes first."""
    out = {}
    for intf, classes in after.items():
        d = {
            name: (nbytes - before.get(intf, {}).get(name, (0, 0))[0], dropped)
            for name, (nbytes, dropped) in classes.items()
        }
        if all(d.get(c, (0, 0))[0] >= min_bytes for c in ("collective", "bulk")):
            out[intf] = {
                "collective": d["collective"][0],
                "bulk": d["bulk"][0],
                "collective_dropped": d["collective"][1]
                - before.get(intf, {}).get("collective", (0, 0))[1],
                "bulk_dropped": d["bulk"][1] - before.get(intf, {}).get("bulk", (0, 0))[1],
            }
    return out
