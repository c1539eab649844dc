"""Is the controller still responsive while hosts flood it? Hostile frames that each
cost the controller a packet-in if nothing stopped them (ARP requests for absent addresses,
TCP SYNs and UDP datagrams opening new flows), REST latency sampled meanwhile, pings across
other pods, and the controller's CPU.

The flooder runs in a host as ``python -m mininet_scenarios.workloads.flood INTF SPEC_JSON``; its
frames are built before the clock starts, so building costs nothing during the flood.
"""

from __future__ import annotations

import errno
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mininet_scenarios.harness.host_procs import (
    StopFlag,
    finish_child,
    popen_in_host,
    read_report,
    start_child,
    stop_child,
)

MODULE = "mininet_scenarios.workloads.flood"


# --------------------------------------------------------------------------- child side


def build_flood(spec: Mapping[str, Any], n: int) -> tuple[list[bytes], list[str]]:
    """``n`` hostile frames from the flooder's own MAC/IP: ARP requests for random absent
    addresses (each one makes the controller probe every edge port) and TCP SYNs and UDP
    datagrams to ``dst`` with random ports (each one a new flow the controller is asked to
    track), shuffled by ``seed``. Returns the frames and their kinds."""
    from mininet_scenarios.workloads import frames as fr

    rng = random.Random(spec.get("seed", 1))
    mix = dict(spec.get("mix", {"arp": 1, "tcp": 1, "udp": 1}))
    kinds = [k for k, w in mix.items() for _ in range(int(w))]
    smac, sip, dmac, dip = spec["src_mac"], spec["src_ip"], spec["dst_mac"], spec["dst_ip"]
    out, labels = [], []
    for _ in range(n):
        kind = rng.choice(kinds)
        if kind == "arp":
            target = f"10.250.{rng.randrange(256)}.{rng.randrange(1, 255)}"
            frame = fr.arp_frame(smac, fr.BROADCAST, 1, smac, sip, "00:00:00:00:00:00", target)
        else:
            sport, dport = rng.randrange(1024, 65536), rng.randrange(1, 65536)
            if kind == "tcp":
                seg = fr.tcp(sip, dip, sport, dport, b"", fr.TCP_SYN, rng.randrange(1 << 32))
                packet = fr.ipv4(sip, dip, 6, seg, ident=rng.randrange(1 << 16))
            else:
                dgram = fr.udp(sip, dip, sport, dport, b"flood")
                packet = fr.ipv4(sip, dip, 17, dgram, ident=rng.randrange(1 << 16))
            frame = fr.ethernet(dmac, smac, fr.ETH_IPV4, packet)
        out.append(frame)
        labels.append(kind)
    return out, labels


def _flood(intf: str, spec_json: str) -> None:
    """Send the frames of :func:`build_flood` at ``rate`` frames/s for ``seconds`` (built
    before the clock starts, so building costs nothing during the flood). A full egress
    queue (ENOBUFS: the host link is shaped) is waited out, and counted."""
    spec = json.loads(spec_json)
    rate, seconds = float(spec["rate"]), float(spec["seconds"])
    frames, kinds = build_flood(spec, max(1, int(rate * seconds)))
    stop = StopFlag()
    by_kind: dict[str, int] = {}
    blocked = 0
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
        sock.bind((intf, 0))
        print(json.dumps({"ready": len(frames)}), flush=True)
        start = time.monotonic()
        i = 0
        while i < len(frames) and not stop.raised:
            now = time.monotonic()
            if now - start > seconds + 5:
                break
            due = min(len(frames), int((now - start) * rate) + 1)
            while i < due:
                try:
                    sock.send(frames[i])
                except OSError as exc:
                    if exc.errno != errno.ENOBUFS:
                        raise
                    blocked += 1
                    time.sleep(0.0005)
                    continue
                by_kind[kinds[i]] = by_kind.get(kinds[i], 0) + 1
                i += 1
            time.sleep(0.002)
        elapsed = time.monotonic() - start
    print(
        json.dumps({"sent": i, "seconds": elapsed, "by_kind": by_kind, "enobufs": blocked}),
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """``INTF SPEC_JSON``: flood from ``INTF`` as :func:`build_flood` describes."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit(main.__doc__)
    _flood(args[0], args[1])


# --------------------------------------------------------------------------- parent side


def process_cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ApiLatency:
    """Samples ``GET /loom/v1/health`` every ``interval`` seconds in a thread; a failed or
    timed-out call is recorded as ``None`` (and counts as a miss, not as a latency)."""

    def __init__(self, base_url: str, interval: float = 0.1, timeout: float = 2.0) -> None:
        from mininet_scenarios.harness.client import LabClient

        self.client = LabClient(base_url, timeout=timeout)
        self.interval = interval
        self.samples: list[tuple[float, float | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="api-latency", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                self.client.health()
                latency: float | None = time.monotonic() - t0
            except Exception:
                latency = None
            self.samples.append((t0, latency))
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))

    def window(self, start: float, end: float) -> tuple[list[float], int]:
        """Latencies of calls started in [start, end] and how many failed."""
        inside = [lat for t, lat in self.samples if start <= t <= end]
        return [x for x in inside if x is not None], sum(1 for x in inside if x is None)

    def __enter__(self) -> ApiLatency:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


class Flood:
    """Hosts flooding hostile frames (see :func:`build_flood`) at ``rate`` frames/s each for
    ``seconds``; ``targets`` maps each flooding host to the host its TCP/UDP frames address
    (on the same edge switch, so the flood loads the controller, not the fabric's links).
    The frames go to the MAC the flooder's kernel learned for its target (under Loom, the
    target's Loom address), so they are delivered flows, not route misses."""

    def __init__(
        self,
        net: Any,
        targets: Mapping[str, str],
        rate: float,
        seconds: float,
        mix: Mapping[str, int] | None = None,
        seed: int = 1,
    ) -> None:
        self.net, self.targets = net, dict(targets)
        self.rate, self.seconds = rate, seconds
        self.mix = dict(mix or {"arp": 1, "tcp": 1, "udp": 1})
        self.seed = seed
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.results: dict[str, dict[str, Any]] = {}

    def start(self) -> Flood:
        g = self.net.graph
        for i, (src, dst) in enumerate(sorted(self.targets.items())):
            host = self.net.host(src)
            spec = {
                "src_mac": g.nodes[src]["mac"],
                "src_ip": g.nodes[src]["ip"],
                "dst_mac": self.net.neighbour_mac(src, dst),
                "dst_ip": g.nodes[dst]["ip"],
                "rate": self.rate,
                "seconds": self.seconds,
                "mix": self.mix,
                "seed": self.seed * 1000 + i,
            }
            self.procs[src] = start_child(host, MODULE, host.intfNames()[0], json.dumps(spec))
        for proc in self.procs.values():
            read_report(proc, timeout=60)  # frames built, socket bound
        return self

    def wait(self) -> dict[str, dict[str, Any]]:
        for src, proc in self.procs.items():
            try:
                self.results[src] = read_report(proc, timeout=self.seconds + 30)
            finally:
                stop_child(proc)
        self.procs.clear()
        return self.results

    @property
    def sent(self) -> int:
        return sum(int(r.get("sent", 0)) for r in self.results.values())

    def close(self) -> None:
        for proc in self.procs.values():
            stop_child(proc)
        self.procs.clear()


@dataclass
class PingRun:
    src: str
    dst: str
    proc: subprocess.Popen[bytes]


def start_pings(
    net: Any, pairs: Sequence[tuple[str, str]], seconds: float, interval: float = 0.2
) -> list[PingRun]:
    """One ``ping`` per pair, in the background, for ``seconds``."""
    runs = []
    for src, dst in pairs:
        ip = net.graph.nodes[dst]["ip"]
        cmd = ["ping", "-n", "-q", "-i", f"{interval:g}", "-W", "1", "-w", f"{seconds:g}", ip]
        proc = popen_in_host(net.host(src), cmd)
        runs.append(PingRun(src, dst, proc))
    return runs


def finish_pings(runs: Sequence[PingRun], timeout: float = 60.0) -> dict[str, Any]:
    """Loss and RTTs per pair of :func:`start_pings`."""
    from mininet_scenarios.workloads.ping import parse_ping

    out = {}
    for run in runs:
        text, _ = finish_child(run.proc, timeout)
        stats = parse_ping(text.decode(errors="replace"))
        out[f"{run.src}->{run.dst}"] = {
            "sent": stats.sent,
            "received": stats.received,
            "loss_pct": round(stats.loss_pct, 2),
            "rtt_avg_ms": stats.rtt_avg_ms,
            "rtt_max_ms": stats.rtt_max_ms,
        }
    return out


if __name__ == "__main__":
    main()
