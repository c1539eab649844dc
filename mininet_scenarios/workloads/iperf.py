"""Concurrent iperf3 flows on a running :class:`~mininet_scenarios.harness.network.FabricNet`.

:func:`iperf3_flows`: one one-shot server per flow (an iperf3 server serves one test at a
time), clients released together by a start file, JSON output. The rate we report is the
*receiver's* over the middle 80 % of the intervals: the first 10 % hold slow start and
ramp-up, the last 10 % the drain, and the sender's view counts bytes still sitting in socket
buffers and HTB queues.

Servers and clients are shell jobs of the hosts
(:func:`~mininet_scenarios.harness.host_procs.start_job`), killed by PID afterwards, never by
name.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mininet_scenarios import emulation_logger
from mininet_scenarios.harness.host_procs import start_job
from mininet_scenarios.harness.processes import kill_pids

if TYPE_CHECKING:
    from mininet_scenarios.harness.network import FabricNet

log = emulation_logger()

_RUNS = itertools.count(1)


# --------------------------------------------------------------------------- iperf3


@dataclass
class FlowResult:
    """One iperf3 flow. ``mbps``: receiver rate over the middle 80 % of the intervals;
    ``whole_mbps``: over all of them, from the first byte to the last (what a transfer
    that lives from its first byte gets)."""

    sender: str
    receiver: str
    port: int
    mbps: float
    series: list[float]
    retransmits: int | None
    sender_mbps: float
    lost_pct: float | None = None
    tos: int | None = None
    error: str | None = None
    whole_mbps: float = 0.0


@dataclass
class IperfRun:
    flows: list[FlowResult]
    seconds: float
    outputs: Path

    @property
    def aggregate(self) -> float:
        """Sum of the flows' middle-80 % receiver rates, Mbit/s."""
        return sum(f.mbps for f in self.flows)

    @property
    def whole_aggregate(self) -> float:
        """Sum of the flows' whole-life receiver rates, Mbit/s."""
        return sum(f.whole_mbps for f in self.flows)


@dataclass
class _Flow:
    sender: str
    receiver: str
    port: int
    server_json: Path
    client_json: Path
    tos: int | None = None
    server_pid: int = 0
    client_pid: int = 0


def middle_mean(intervals: Sequence[tuple[float, float]], trim: float = 0.1) -> float:
    """Mbit/s over ``(seconds, bytes)`` intervals without the first and last ``trim`` share."""
    n = len(intervals)
    k = int(n * trim + 0.5)
    kept = intervals[k : n - k] if n - 2 * k > 0 else intervals
    secs = sum(s for s, _ in kept)
    return 8 * sum(b for _, b in kept) / secs / 1e6 if secs > 0 else 0.0


def _intervals(doc: dict[str, Any]) -> list[tuple[float, float]]:
    return [
        (float(i["sum"]["seconds"]), float(i["sum"]["bytes"]))
        for i in doc.get("intervals", [])
        if not i["sum"].get("omitted")
    ]


def _load(path: Path) -> dict[str, Any] | None:
    try:
        text = path.read_text()
        start = text.find("{")  # skip shell noise before the JSON, if any
        doc = json.loads(text[start:]) if start >= 0 else None
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _iperf_alive(pid: int) -> bool:
    """The client's subshell or the iperf3 it became. Its cmdline reads empty while it
    execs iperf3: still alive (reading that as gone made a run end after 3 s and kill the
    client, whose report then said "interrupt - the client has terminated")."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and (not cmdline or b"iperf3" in cmdline or b"bash" in cmdline)


def _listening(fnet: FabricNet, host: str, ports: set[int]) -> bool:
    out = fnet.host(host).cmd("ss -ltnH")
    found = {int(m.group(1)) for m in re.finditer(r":(\d+)\s", out)}
    return ports <= found


def iperf3_flows(
    fnet: FabricNet,
    pairs: Sequence[tuple[str, str] | tuple[str, str, int | None]],
    seconds: float,
    *,
    port_base: int = 5201,
    udp: bool = False,
    rate: str | None = None,
    interval: float = 0.5,
    omit: float = 0.0,
    tos: int | None = None,
    extra_args: Sequence[str] = (),
    out_dir: Path | None = None,
    cport_base: int | None = None,
) -> IperfRun:
    """Run one iperf3 flow per ``(sender, receiver[, tos])`` concurrently for ``seconds``.

    ``rate``: iperf3 ``-b`` (e.g. ``"5M"``; needed for UDP), ``tos``: IP TOS byte (DSCP << 2)
    for flows that do not give their own (so marked and unmarked flows can compete),
    ``omit``: seconds iperf3 leaves out at the start (``-O``), on top of the middle-80 % trim.
    ``cport_base``: flow i uses client port ``cport_base + i``, so switches hash the same
    flows the same way on every run (fresh namespaces otherwise pick ports at random).
    JSON outputs go to ``out_dir`` (default ``<run_dir>/iperf3-<time>``).
    """
    out_dir = out_dir or fnet.run_dir / f"iperf3-{time.strftime('%H%M%S')}-{next(_RUNS)}"
    out_dir.mkdir(parents=True, exist_ok=True)
    next_port: dict[str, int] = {}
    flows = []
    for pair in pairs:
        sender, receiver = pair[0], pair[1]
        port = next_port.get(receiver, port_base)
        next_port[receiver] = port + 1
        stem = out_dir / f"{sender}-{receiver}-{port}"
        flows.append(
            _Flow(
                sender,
                receiver,
                port,
                Path(f"{stem}.server.json"),
                Path(f"{stem}.client.json"),
                pair[2] if len(pair) > 2 else tos,
            )
        )
    go = out_dir / "go"
    go.unlink(missing_ok=True)  # a start file left by an earlier run would start clients early
    t0 = time.monotonic()
    try:
        for f in flows:
            f.server_pid = start_job(
                fnet.host(f.receiver),
                f"iperf3 -s -1 -J -i {interval:g} -p {f.port} > {f.server_json} 2>&1",
            )
        deadline = time.monotonic() + 10
        for receiver in {f.receiver for f in flows}:
            ports = {f.port for f in flows if f.receiver == receiver}
            while not _listening(fnet, receiver, ports):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"iperf3 servers on {receiver} did not listen: {ports}")
                time.sleep(0.05)
        opts = f"-t {seconds:g} -i {interval:g} -J"
        opts += f" -u -b {rate or '1M'}" if udp else (f" -b {rate}" if rate else "")
        opts += f" -O {omit:g}" if omit else ""
        opts += "".join(f" {a}" for a in extra_args)
        for i, f in enumerate(flows):
            ip = fnet.graph.nodes[f.receiver]["ip"]
            tos_opt = f" -S {f.tos}" if f.tos is not None else ""
            tos_opt += f" --cport {cport_base + i}" if cport_base is not None else ""
            # A subshell that waits for the start file, then execs iperf3 (same PID).
            f.client_pid = start_job(
                fnet.host(f.sender),
                f"(while [ ! -e {go} ]; do sleep 0.01; done;"
                f" exec iperf3 -c {ip} -p {f.port} {opts}{tos_opt} > {f.client_json} 2>&1)",
            )
        go.touch()
        log.info("iperf3: %d flows for %g s (%s)", len(flows), seconds, "udp" if udp else "tcp")
        deadline = time.monotonic() + seconds + omit + 15
        next_note = time.monotonic() + 10
        while any(_iperf_alive(f.client_pid) for f in flows):
            now = time.monotonic()
            if now > deadline:
                log.warning("iperf3: clients still running after %.0f s; killing", now - t0)
                break
            if now > next_note:
                log.info("iperf3: %.0f s of %g", now - t0, seconds)
                next_note = now + 10
            time.sleep(0.2)
        end = time.monotonic() + 3
        while any(_iperf_alive(f.server_pid) for f in flows) and time.monotonic() < end:
            time.sleep(0.1)
    finally:
        _kill([p for f in flows for p in (f.client_pid, f.server_pid) if p])
    results = [_result(f) for f in flows]
    run = IperfRun(results, time.monotonic() - t0, out_dir)
    log.info("iperf3: aggregate %.2f Mbit/s over %d flows", run.aggregate, len(results))
    return run


def _kill(pids: Sequence[int]) -> None:
    kill_pids([p for p in pids if _iperf_alive(p)], grace=1.0)


def _result(f: _Flow) -> FlowResult:
    client, server = _load(f.client_json), _load(f.server_json)
    if client is not None and server is None:
        server = client.get("server_output_json")
    error = next((d["error"] for d in (client, server) if d and d.get("error")), None)
    if client is None:
        error = error or f"no client output in {f.client_json}"
    recv = _intervals(server) if server else []
    sent = _intervals(client) if client else []
    series_src = recv or sent
    end = (client or {}).get("end", {})
    sum_sent = end.get("sum_sent") or end.get("sum") or {}
    lost = end.get("sum", {}).get("lost_percent") if "sum" in end else None
    return FlowResult(
        sender=f.sender,
        receiver=f.receiver,
        port=f.port,
        mbps=middle_mean(series_src),
        whole_mbps=middle_mean(series_src, trim=0.0),
        series=[8 * b / s / 1e6 if s > 0 else 0.0 for s, b in series_src],
        retransmits=sum_sent.get("retransmits"),
        sender_mbps=float(sum_sent.get("bits_per_second", 0.0)) / 1e6,
        lost_pct=lost,
        tos=f.tos,
        error=error,
    )
