"""Pieces of the real-switch bench (:mod:`~mininet_scenarios.bench.real_switches`): the
ARP frames its hosts send, the traces it judges, the profiler it can attach."""

from __future__ import annotations

import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mininet_scenarios.bench import real_switches_report as rep
from mininet_scenarios.harness import dummy_ovs as dov
from mininet_scenarios.harness.processes import ChildProcess
from mininet_scenarios.workloads import frames as fr

Flow = tuple[dov.HostPort, dov.HostPort, str, str]  # source, destination, flow, dl_dst
ZERO_MAC = "00:00:00:00:00:00"


def arp_request(h: dov.HostPort, ip: str) -> bytes:
    """A host's broadcast ARP request for ``ip``."""
    return fr.arp_frame(h.mac, fr.BROADCAST, 1, h.mac, h.ip, ZERO_MAC, ip)


def judge(
    ovs: dov.DummyOvs, odp: dict[int, tuple[str, str]], flows: Sequence[Flow]
) -> list[tuple[str, tuple[str, ...]]]:
    """Per flow: "" if the packet from its source arrives right at its destination, else
    why not; and the bridges it went through."""
    got = dov.traces(ovs, [(a.bridge, flow, mac) for a, _, flow, mac in flows])
    return [(rep.verdict(tr, f[1], odp), tr.bridges) for tr, f in zip(got, flows, strict=True)]


def start_profiler(pid: int | None, run: Path) -> ChildProcess | None:
    """py-spy recording the controller ``pid`` into ``run`` (None without py-spy)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if pid is None:
        return None
    if not Path(spy).exists():
        print("[real] --profile: py-spy is not installed (pip install py-spy): no profile")
        return None
    argv = [spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "50",
            "--nonblocking", "-o", str(run / "py-spy.txt")]  # fmt: skip
    child = ChildProcess(argv, run / "py-spy.log", stop_timeout=30.0)
    child.start()
    return child


def stop_profiler(child: ChildProcess, run: Path) -> dict[str, Any]:
    child.stop(signal.SIGINT, grace=30.0)  # py-spy writes its stacks on SIGINT
    return rep.profile_summary(run / "py-spy.txt")
