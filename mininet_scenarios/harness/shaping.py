"""HTB shaping at the egress of a link end, optionally with DSCP traffic classes.

Why HTB and not Mininet's ``TCLink``: the userspace datapath needs one HTB tree per port that
we own completely (OVS's own ``linux-htb`` QoS would replace it, and ``tbf`` with a small
burst burns CPU). Why DSCP filters: OpenFlow ``set_queue`` does *not* steer packets into HTB
classes on the userspace datapath; a ``u32 match ip tos`` filter on the egress HTB does. So a
controller marks DSCP (``set_field ip_dscp``) and the tc tree here classifies on it, which is
also how RoCE AI fabrics classify traffic.

Tree built by :func:`shape_interface`::

    1:     htb qdisc, default -> the default class (or 1:1 without classes)
    1:1    parent class at the link rate
    1:<m>  one child per QueueClass (minor m, hex in tc's notation), prio, rate share, ceil

Every command runs through ``run(cmd) -> output`` so the same code shapes a host interface
(``host.cmd``, inside the host's network namespace) and a switch port (:func:`root_run`).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Runner = Callable[[str], str]

# HTB lets a class send `burst` bytes at full speed before the token bucket bites. Too small and
# the shaper undershoots whenever the (software, jittery) dequeue timer fires late; too large and
# short-term rates overshoot. Mininet uses 15 kB; above ~60 Mbit/s we allow 2 ms of line rate.
MIN_BURST = 15_000
BURST_SECONDS = 0.002
# Explicit quantum (bytes a class may send per DRR round while borrowing). Left to r2q the kernel
# warns "quantum ... is small/big" for classes under ~80 kbit/s or over ~16 Mbit/s.
MIN_QUANTUM = 1_600
MAX_QUANTUM = 200_000
ROOT_MINOR = 1


class ShapingError(RuntimeError):
    """A tc command failed; the message carries the command output."""


@dataclass(frozen=True)
class QueueClass:
    """One traffic class on every shaped port.

    ``rate_share`` is the guaranteed fraction of the link rate, ``ceil_share`` the fraction it
    may reach by borrowing what idle classes leave (1.0: an idle class lends everything). Lower
    ``prio`` is served first when borrowing. ``dscp_values`` containing 0 makes the class the
    default, which also catches non-IP and unmarked traffic.
    """

    name: str
    minor: int
    dscp_values: tuple[int, ...]
    prio: int
    rate_share: float
    ceil_share: float = 1.0


DEFAULT_CLASSES: tuple[QueueClass, ...] = (
    QueueClass("collective", 0x10, (26,), prio=0, rate_share=0.90),
    QueueClass("control", 0x20, (48,), prio=1, rate_share=0.05),
    QueueClass("bulk", 0x30, (0,), prio=2, rate_share=0.05),
)


@dataclass(frozen=True)
class ClassCounters:
    """What ``tc -s class show`` reports for one HTB class since it was created."""

    bytes: int
    packets: int
    dropped: int
    overlimits: int


def root_run(cmd: str) -> str:
    """Run ``cmd`` with sh in the root namespace; return stdout and stderr together."""
    proc = subprocess.run(cmd, shell=True, capture_output=True, text=True, check=False)
    return proc.stdout + proc.stderr


def burst_bytes(rate_mbps: float) -> int:
    return max(MIN_BURST, int(rate_mbps * 1e6 / 8 * BURST_SECONDS))


def quantum_bytes(rate_mbps: float) -> int:
    return min(MAX_QUANTUM, max(MIN_QUANTUM, int(rate_mbps * 1e6 / 8 / 10)))


def default_class(classes: Sequence[QueueClass]) -> QueueClass:
    """The class that carries DSCP 0 (or, failing that, the last one)."""
    for qc in classes:
        if 0 in qc.dscp_values:
            return qc
    return classes[-1]


def validate_classes(classes: Sequence[QueueClass]) -> None:
    if not classes:
        raise ValueError("queue classes: need at least one class")
    minors = [qc.minor for qc in classes]
    if len(set(minors)) != len(minors) or min(minors) <= ROOT_MINOR or max(minors) > 0xFFFF:
        raise ValueError(f"queue classes: minors must be unique and in 2..0xffff, got {minors}")
    names = [qc.name for qc in classes]
    if len(set(names)) != len(names):
        raise ValueError(f"queue classes: names repeat: {names}")
    dscps = [d for qc in classes for d in qc.dscp_values]
    if len(set(dscps)) != len(dscps) or any(not 0 <= d <= 63 for d in dscps):
        raise ValueError(f"queue classes: DSCP values must be unique and in 0..63, got {dscps}")
    total = sum(qc.rate_share for qc in classes)
    if total > 1.0 + 1e-9 or any(qc.rate_share <= 0 for qc in classes):
        raise ValueError(f"queue classes: rate shares must be positive and sum to <= 1 ({total})")
    if any(not qc.rate_share <= qc.ceil_share <= 1.0 for qc in classes):
        raise ValueError("queue classes: need rate_share <= ceil_share <= 1.0")


def _htb_class(
    intf: str, parent: str, minor: int, rate_mbps: float, ceil_mbps: float, prio: int | None = None
) -> str:
    burst = burst_bytes(ceil_mbps)
    prio_opt = f" prio {prio}" if prio is not None else ""
    return (
        f"tc class add dev {intf} parent {parent} classid 1:{minor:x} htb"
        f" rate {int(rate_mbps * 1e6)}bit ceil {int(ceil_mbps * 1e6)}bit{prio_opt}"
        f" burst {burst} cburst {burst} quantum {quantum_bytes(rate_mbps)}"
    )


def _leaf(intf: str, minor: int, queue_packets: int | None, queue_bytes: int | None) -> list[str]:
    if queue_bytes is not None:
        return [f"tc qdisc add dev {intf} parent 1:{minor:x} bfifo limit {queue_bytes}"]
    if queue_packets is None:
        return []  # the kernel's default leaf: pfifo of txqueuelen (1000) packets
    return [f"tc qdisc add dev {intf} parent 1:{minor:x} pfifo limit {queue_packets}"]


def shaping_commands(
    intf: str,
    rate_mbps: float,
    classes: Sequence[QueueClass] | None = None,
    queue_packets: int | None = None,
    queue_bytes: int | None = None,
) -> list[str]:
    """The tc commands (after deleting any old root qdisc) that build the tree described above."""
    if rate_mbps <= 0:
        raise ValueError(f"{intf}: rate must be positive, got {rate_mbps}")
    if queue_packets is not None and queue_packets < 1:
        raise ValueError(f"{intf}: queue_packets must be positive, got {queue_packets}")
    if queue_bytes is not None and queue_bytes < 1600:
        raise ValueError(f"{intf}: queue_bytes must be >= 1600 (one frame), got {queue_bytes}")
    if queue_bytes is not None and queue_packets is not None:
        raise ValueError(f"{intf}: give queue_packets or queue_bytes, not both")
    if not classes:
        return [
            f"tc qdisc add dev {intf} root handle 1: htb default {ROOT_MINOR:x}",
            _htb_class(intf, "1:", ROOT_MINOR, rate_mbps, rate_mbps),
            *_leaf(intf, ROOT_MINOR, queue_packets, queue_bytes),
        ]
    validate_classes(classes)
    fallback = default_class(classes)
    cmds = [
        f"tc qdisc add dev {intf} root handle 1: htb default {fallback.minor:x}",
        _htb_class(intf, "1:", ROOT_MINOR, rate_mbps, rate_mbps),
    ]
    for qc in classes:
        cmds.append(
            _htb_class(
                intf,
                f"1:{ROOT_MINOR:x}",
                qc.minor,
                rate_mbps * qc.rate_share,
                rate_mbps * qc.ceil_share,
                prio=qc.prio,
            )
        )
        cmds += _leaf(intf, qc.minor, queue_packets, queue_bytes)
    for qc in classes:
        if qc is fallback:
            continue  # the HTB default already catches these (and non-IP traffic)
        for dscp in qc.dscp_values:
            cmds.append(
                f"tc filter add dev {intf} parent 1: protocol ip prio 1 u32"
                f" match ip tos 0x{dscp << 2:02x} 0xfc flowid 1:{qc.minor:x}"
            )
    return cmds


def _run_checked(run: Runner, intf: str, cmds: list[str], prelude: str = "") -> None:
    """Run ``cmds`` as one ``&&`` chain in one shell call (one round trip per interface)."""
    out = run(f"{prelude}{' && '.join(cmds)}; echo __rc=$?")
    match = re.search(r"__rc=(\d+)", out)
    if not match or match.group(1) != "0":
        raise ShapingError(f"{intf}: tc failed: {out.strip()}")


def shape_interface(
    run: Runner,
    intf: str,
    rate_mbps: float,
    classes: Sequence[QueueClass] | None = None,
    queue_packets: int | None = None,
    queue_bytes: int | None = None,
) -> None:
    """Replace the egress qdisc of ``intf`` by an HTB tree at ``rate_mbps``.

    Runs in whatever namespace ``run`` executes in. Idempotent: the old root qdisc is removed
    first, so a port can be re-shaped (e.g. with classes) at any time.

    ``queue_packets`` bounds each leaf queue (a pfifo per class). The default leaves the
    kernel's pfifo of txqueuelen = 1000 packets: 1.2 s of queueing at 10 Mbit/s, and on a
    switch port those packets also count against ovs-vswitchd's one shared send buffer.
    ``queue_bytes`` bounds them in bytes instead (a bfifo), as a switch's buffer does: a
    packet limit holds six times fewer bytes of 1500-byte frames than of jumbo ones.
    """
    cmds = shaping_commands(intf, rate_mbps, classes, queue_packets, queue_bytes)
    _run_checked(run, intf, cmds, prelude=f"tc qdisc del dev {intf} root >/dev/null 2>&1; ")


_CLASS_RE = re.compile(
    r"^class htb 1:([0-9a-f]+) .*?\n\s*Sent (\d+) bytes (\d+) pkt "
    r"\(dropped (\d+), overlimits (\d+)",
    re.MULTILINE,
)


def parse_class_stats(text: str) -> dict[int, ClassCounters]:
    """``minor -> counters`` from ``tc -s class show`` output."""
    return {
        int(m.group(1), 16): ClassCounters(
            int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5))
        )
        for m in _CLASS_RE.finditer(text)
    }


def class_counters(
    run: Runner, intf: str, classes: Sequence[QueueClass] | None = None
) -> dict[str, ClassCounters]:
    """Byte/packet counters per class name; the parent class at the link rate is ``"link"``.

    Pass the same ``classes`` the interface was shaped with (default: :data:`DEFAULT_CLASSES`);
    minors not in the list are reported as ``"1:<minor>"``.
    """
    names = {qc.minor: qc.name for qc in (DEFAULT_CLASSES if classes is None else classes)}
    names[ROOT_MINOR] = "link"
    stats = parse_class_stats(run(f"tc -s class show dev {intf}"))
    return {names.get(minor, f"1:{minor:x}"): c for minor, c in sorted(stats.items())}
