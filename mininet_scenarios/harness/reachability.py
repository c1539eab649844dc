"""Can every host reach every other one? :func:`pingall`, the harness's own check that a
fabric carries traffic (``FabricNet.pingall``, Faucet's readiness, every benchmark's warm-up).

Every ordered host pair, one ping each with a short deadline; all hosts at once and a few
destinations in parallel per host (a k=4 fat-tree has 240 pairs). On a graph of GPU servers
(:mod:`.servers`) a NIC pings, bound to its interface, every NIC of the other servers on its
rail (its subnet): traffic to another rail leaves by that rail's NIC, so these pairs cover
every path, and pings between NICs of one server would never leave it.

:func:`neighbour_mac`: the Ethernet address a host's kernel sends to for a peer. Under Loom
that is the peer's Loom address (Loom's ARP replies carry it; a frame to the peer's real MAC
is routed nowhere), under a learning controller the real MAC; crafted frames and static
neighbour entries that must be delivered use it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mininet_scenarios import emulation_logger
from mininet_scenarios.harness.servers import rail_pairs

if TYPE_CHECKING:
    from mininet_scenarios.harness.network import FabricNet

log = emulation_logger()

RTT_RE = re.compile(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")
LLADDR_RE = re.compile(r"\blladdr ((?:[0-9a-f]{2}:){5}[0-9a-f]{2})\b")


@dataclass(frozen=True)
class PingResult:
    src: str
    dst: str
    ok: bool
    rtt_ms: float | None


@dataclass
class PingAll:
    """``loss_pct`` over all ordered pairs; ``pairs[(src, dst)]`` for each one."""

    loss_pct: float
    pairs: dict[tuple[str, str], PingResult]
    seconds: float

    @property
    def failed(self) -> list[tuple[str, str]]:
        return [k for k, r in self.pairs.items() if not r.ok]


def pingall(fnet: FabricNet, timeout: float = 1.0, parallel: int = 4) -> PingAll:
    """Ping every ordered host pair once (``-W timeout``; on servers, the pairs of
    :func:`.servers.rail_pairs`); ``parallel`` pings per Mininet host at once."""
    names = fnet.host_names
    ips = {h: str(fnet.graph.nodes[h]["ip"]) for h in names}
    by_ip = {ip: h for h, ip in ips.items()}
    wanted = rail_pairs(fnet.nics, ips)
    t0 = time.monotonic()
    # Per Mininet host: "src,device,ip" for each ping (device: a NIC's interface, else none).
    jobs: dict[str, list[str]] = {}
    for src, dst in wanted:
        nic = fnet.nics.get(src)
        owner = nic.server if nic is not None else src
        jobs.setdefault(owner, []).append(f"{src},{nic.intf if nic else ''},{ips[dst]}")
    hosts = [fnet.host(owner) for owner in jobs]
    for host in hosts:
        # Each job prints "@@ <src> <ip> <last line of ping>"; `wait` after every `parallel`.
        job = (
            f"{{ r=$(ping -n -q -c1 -W {timeout:g} ${{dev:+-I $dev}} $ip 2>&1 | tail -n1);"
            f' echo "@@ $src $ip $r"; }} &'
            f" n=$((n+1)); [ $((n % {max(1, parallel)})) -eq 0 ] && wait;"
        )
        split = "src=${p%%,*}; rest=${p#*,}; dev=${rest%%,*}; ip=${rest#*,};"
        host.sendCmd(f"n=0; for p in {' '.join(jobs[host.name])}; do {split} {job} done; wait")
    pairs: dict[tuple[str, str], PingResult] = {}
    for host in hosts:
        out = host.waitOutput()
        for line in out.splitlines():
            parts = line.strip().split(" ", 3)
            if len(parts) < 3 or parts[0] != "@@" or parts[2] not in by_ip:
                continue
            m = RTT_RE.search(parts[3] if len(parts) > 3 else "")
            src, dst = parts[1], by_ip[parts[2]]
            pairs[(src, dst)] = PingResult(
                src, dst, m is not None, float(m.group(2)) if m else None
            )
    for src, dst in wanted:  # a pair with no output line counts as lost
        if (src, dst) not in pairs:
            pairs[(src, dst)] = PingResult(src, dst, False, None)
    lost = sum(1 for r in pairs.values() if not r.ok)
    result = PingAll(100.0 * lost / len(pairs) if pairs else 0.0, pairs, time.monotonic() - t0)
    log.info(
        "pingall: %d/%d pairs answered (%.1f %% loss) in %.1f s",
        len(pairs) - lost,
        len(pairs),
        result.loss_pct,
        result.seconds,
    )
    return result


def neighbour_mac(fnet: FabricNet, src: str, dst: str, tries: int = 3) -> str:
    """The MAC ``src``'s kernel uses for ``dst``: its neighbour entry, after a ping (1 s
    deadline, up to ``tries``) while it has none. Raises ``RuntimeError`` when ``src``
    learns none (``dst`` unreachable, or in another tenant)."""
    host = fnet.host(src)
    ip = fnet.graph.nodes[dst]["ip"]
    nic = fnet.nics.get(src)  # a server's NIC: its own interface, pinging from it
    dev = nic.intf if nic is not None else host.defaultIntf()
    show = f"ip neigh show {ip} dev {dev}"
    for attempt in range(tries + 1):
        out = host.cmd(show)
        m = LLADDR_RE.search(out)
        if m:
            return m.group(1)
        if attempt < tries:
            host.cmd(f"ping -n -q -c1 -W1 {f'-I {dev} ' if nic is not None else ''}{ip}")
    raise RuntimeError(f"{src} learned no address for {dst} ({ip}): {out.strip()!r}")
