"""What the machine holds right now: OVS bridges and ports, root interfaces, Mininet node
shells and who owns them. Read by ``FabricNet`` before building (stale names from a run
that died) and after tearing down (nothing of ours may be left); never by pattern, only
for the names asked about. Also the OpenFlow port counters of a switch
(:func:`parse_dump_ports`, read by ``FabricNet.port_counters``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mininet_scenarios.harness.processes import alive

OFCTL = ("ovs-ofctl", "-O", "OpenFlow13")
OWNER_KEY = "loom-pid"  # external_ids key of a bridge: the PID of the process that made it


class FabricError(RuntimeError):
    """The fabric could not be built, or leftovers could not be removed."""


def sh(cmd: Sequence[str], check: bool = True, timeout: float = 30.0) -> str:
    """Run a root-namespace command (argv, no shell); return stdout, raise on failure."""
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode:
        raise FabricError(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def root_interfaces() -> set[str]:
    return set(os.listdir("/sys/class/net"))


def ovs_bridges() -> set[str]:
    return set(sh(["ovs-vsctl", "list-br"]).split())


def ovs_ports() -> set[str]:
    out = sh(["ovs-vsctl", "--bare", "--columns=name", "list", "Port"])
    return set(out.split())


def _json_cell(cell: Any) -> Any:
    """Decode one ovs-vsctl JSON cell: ["uuid", x] -> x, ["set", [...]] -> [...]."""
    if isinstance(cell, list) and len(cell) == 2 and cell[0] in ("uuid", "set", "map"):
        if cell[0] == "set":
            return [_json_cell(c) for c in cell[1]]
        return cell[1]
    return cell


def connected_bridges() -> set[str]:
    """Bridges with at least one controller reporting ``is_connected=true``."""

    def table(name: str, columns: str) -> list[list[Any]]:
        out = sh(["ovs-vsctl", "-f", "json", f"--columns={columns}", "list", name])
        return [[_json_cell(c) for c in row] for row in json.loads(out)["data"]]

    up = {uuid for uuid, conn in table("Controller", "_uuid,is_connected") if conn is True}
    result = set()
    for name, ctls in table("Bridge", "name,controller"):
        ids = ctls if isinstance(ctls, list) else [ctls]
        if up.intersection(ids):
            result.add(name)
    return result


def node_shells(names: set[str]) -> dict[int, tuple[str, int]]:
    """``pid -> (name, parent pid)`` of Mininet node shells (``bash ... mininet:<name>``)."""
    shells = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        for arg in argv:
            name = arg[8:].decode(errors="replace")
            if arg.startswith(b"mininet:") and name in names:
                shells[int(entry)] = (name, ppid)
    return shells


def live_owners(names: set[str], me: int) -> dict[str, int]:
    """``name -> pid`` for names that a live process other than ``me`` (or its children) owns:
    a Mininet node shell, or the PID recorded in a bridge's ``external_ids:loom-pid``."""
    shells = node_shells(names).items()
    owners = {name: pid for pid, (name, ppid) in shells if me not in (pid, ppid)}
    out = sh(["ovs-vsctl", "-f", "json", "--columns=name,external_ids", "list", "Bridge"])
    for name, ext in json.loads(out)["data"]:
        pid = dict(_json_cell(ext) or []).get(OWNER_KEY, "")
        if name in names and pid.isdigit() and int(pid) != me and alive(int(pid)):
            owners.setdefault(name, int(pid))
    return owners


@dataclass(frozen=True)
class Counters:
    """OpenFlow port counters (``ovs-ofctl dump-ports``); unknown values read as 0."""

    rx_bytes: int
    tx_bytes: int
    rx_packets: int
    tx_packets: int
    rx_dropped: int
    tx_dropped: int


_PORT_RE = re.compile(
    r"port\s+(\S+): rx pkts=(\S+), bytes=(\S+), drop=(\S+),.*?\n\s+"
    r"tx pkts=(\S+), bytes=(\S+), drop=(\S+),",
    re.DOTALL,
)


def parse_dump_ports(text: str) -> dict[int, Counters]:
    def num(s: str) -> int:
        s = s.rstrip(",")
        return int(s) if s.isdigit() else 0

    out = {}
    for m in _PORT_RE.finditer(text):
        port = m.group(1).rstrip(":")
        if not port.isdigit():
            continue  # LOCAL
        rxp, rxb, rxd, txp, txb, txd = (num(m.group(i)) for i in range(2, 8))
        out[int(port)] = Counters(rxb, txb, rxp, txp, rxd, txd)
    return out
