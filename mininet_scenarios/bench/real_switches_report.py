"""The real-switch benchmark's report: a table of every size's figures and a figure of the
bring-up timelines and the traces after the cut, pure functions of ``results.json`` (a saved
run is re-drawn by ``python -m mininet_scenarios.bench.real_switches_report DIR``); and
the readings (a sampling thread) and their analysis, which the benchmark and its test share.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import selectors
import socket
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from mininet_scenarios.bench.headless_report import fmt
from mininet_scenarios.bench.scale_report import dig
from mininet_scenarios.harness import dummy_ovs as dov
from mininet_scenarios.harness.client import LabClient
from mininet_scenarios.harness.metrics import percentile
from mininet_scenarios.harness.processes import socket_port, tcp_sockets
from mininet_scenarios.workloads.flood import process_cpu_seconds


def stats(values: Sequence[float], ndigits: int = 1) -> dict[str, Any]:
    """n, p50, p95, max and mean of a sample (None where it is empty)."""
    v = list(values)
    got = [percentile(v, 0.5), percentile(v, 0.95), max(v, default=None)]
    got.append(sum(v) / len(v) if v else None)
    out = {k: None if x is None else round(x, ndigits) for k, x in zip(STATS, got, strict=True)}
    return {"n": len(v), **out}


STATS = ("p50", "p95", "max", "mean")
ROWS: list[tuple[str, tuple[str, ...], str]] = [
    ("bridges / links / hosts", (), ""),
    ("fabric built in", ("build_s",), " s"),
    ("every switch connected", ("switches_connected_s",), " s"),
    ("every link learned", ("links_learned_s",), " s"),
    ("ARP started at", ("arp", "started_s"), " s"),
    ("every host learned after", ("arp", "all_learned_after_s"), " s"),
    ("  per host p50 / p95 / max", ("arp", "delay_s"), " s"),
    ("  ARP rounds", ("arp", "rounds"), ""),
    ("tables settled at", ("settled_s",), " s"),
    ("  poll resolution", ("tables_resolution_s",), " s"),
    ("flows per switch max / mean", ("tables", "flows"), ""),
    ("groups per switch max / mean", ("tables", "groups"), ""),
    ("fullest switch", ("tables", "fullest"), ""),
    ("controller CPU to settled", ("cpu_at_settled", "controller_s"), " s"),
    ("ovs-vswitchd CPU to settled", ("cpu_at_settled", "ovs_vswitchd_s"), " s"),
    ("controller CPU in all", ("controller", "cpu_s"), " s"),
    ("ovs-vswitchd CPU in all", ("ovs_vswitchd", "cpu_s"), " s"),
    ("ovsdb-server CPU in all", ("ovsdb_server_cpu_s",), " s"),
    ("other processes' CPU", ("other_processes_cpu_s",), " s"),
    ("controller peak RSS", ("controller", "peak_rss_mib"), " MiB"),
    ("REST health bring-up p50/p95", ("rest_ms", "bring_up"), " ms"),
    ("REST health at rest p50/p95", ("rest_ms", "at_rest"), " ms"),
    ("OpenFlow unread by ctl, max", ("ofp_backlog_kib_max", "unread"), " KiB"),
    ("OpenFlow unsent by OVS, max", ("ofp_backlog_kib_max", "unsent"), " KiB"),
    ("links dropped in REST", ("link_drops_before_cut",), ""),
    ("links removed (no LLDP)", ("logs", "links_removed_no_lldp", "count"), ""),
    ("switches disconnected", ("logs", "switches_disconnected", "count"), ""),
    ("connected after settled, min", ("ovs_connected",), ""),
    ("OVS controller conn. drops", ("logs", "ovs_connection_drops", "count"), ""),
    ("pairs traced right", ("correctness",), ""),
    ("link cut", ("correctness", "link_down", "link"), ""),
    ("  all pairs right again after", ("correctness", "link_down", "right_again_after_s"), " s"),
    ("  worst poll: pairs wrong", ("correctness", "link_down", "worst_poll_wrong"), ""),
]


def cell(size: dict[str, Any], label: str, path: tuple[str, ...], unit: str) -> str:
    if "error" in size and not path:
        return f"FAILED: {size['error'][:60]}"
    if not path:
        return f"{size.get('switches')} / {size.get('links')} / {size.get('hosts')}"
    v = dig(size, *path)
    if label.startswith("  per host"):
        return f"{fmt(dig(v, 'p50'))} / {fmt(dig(v, 'p95'))} / {fmt(dig(v, 'max'))}{unit}"
    if path[-1] in ("flows", "groups") and isinstance(v, dict):
        return f"{fmt(v.get('max'))} / {fmt(v.get('mean'))}"
    if path[-1] in ("bring_up", "at_rest") and isinstance(v, dict):
        return f"{fmt(v.get('p50'))} / {fmt(v.get('p95'))}{unit} ({v.get('failed')} failed)"
    if path[-1] == "fullest" and isinstance(v, dict):
        return f"{v['switch']} ({v['tier']}): {v['flows']} flows, {v['groups']} groups"
    if path[-1] == "link_drops_before_cut":
        return "-" if v is None else str(len(v))
    if path == ("correctness",) and isinstance(v, dict):
        return f"{v['traced_right']} / {v['pairs']}"
    return fmt(v, unit)


def table(doc: dict[str, Any]) -> str:
    sizes = list(doc.get("sizes", {}).values())
    head = f"{'k':<32}" + "".join(f"{s['k']:<40}" for s in sizes)
    lines = [head, "-" * len(head)]
    for label, path, unit in ROWS:
        lines.append(f"{label:<32}" + "".join(f"{cell(s, label, path, unit):<40}" for s in sizes))
    lines.append(
        "times from the moment every bridge was pointed at the controller; tables polled over"
        " OpenFlow (flow and group counts); datapath ids "
        + ", ".join(sorted({str(s.get("dpids")) for s in sizes}))
    )
    for s in sizes:
        reasons = dig(s, "correctness", "reasons")
        if reasons:
            lines.append(f"  k={s['k']}: wrong traces before the cut: {reasons}")
        polls = dig(s, "correctness", "link_down", "polls") or []
        if polls:
            seq = ", ".join(f"{p['t']:.1f} s: {p['wrong']}" for p in polls[:12])
            lines.append(f"  k={s['k']}: pairs wrong per poll after the cut: {seq}")
    return "\n".join(lines)


def plot(doc: dict[str, Any], path: Path) -> Path | None:
    """Per size: links, hosts and rules over time since t = 0 (fractions of their final
    value) and the CPU of controller and ovs-vswitchd; pairs wrong per poll after the cut."""
    sizes = [s for s in doc.get("sizes", {}).values() if s.get("timeline")]
    if not sizes:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(4, len(sizes), figsize=(6 * len(sizes), 14), squeeze=False)
    for col, s in enumerate(sizes):
        tl = s["timeline"]
        ts = [x["t"] for x in tl]
        ax = axes[0][col]
        for key, want, colour in (
            ("links", 2 * s["links"], "tab:blue"),
            ("hosts", s["hosts"], "tab:green"),
            ("flows", max((x["flows"] for x in tl), default=1) or 1, "tab:red"),
            ("groups", max((x["groups"] for x in tl), default=1) or 1, "tab:orange"),
        ):
            ax.plot(ts, [(x[key] or 0) / want for x in tl], label=key, color=colour)
        ax.set_title(f"k={s['k']}: learned and installed (fraction of final)")
        ax.set_xlabel("s since every bridge was pointed at Loom")
        ax.legend(loc="lower right", fontsize=8)
        ax = axes[1][col]
        for key, label, colour in (
            ("ctl_cpu_s", "controller", "tab:purple"),
            ("ovs_cpu_s", "ovs-vswitchd", "tab:gray"),
        ):
            pct = [0.0] + [
                100 * (b[key] - a[key]) / max(1e-9, b["t"] - a["t"])
                for a, b in itertools.pairwise(tl)
            ]
            ax.plot(ts, pct, label=label, color=colour)
        rest = [(x["t"], x["rest_ms"]) for x in tl if x["rest_ms"] is not None]
        ax2 = ax.twinx()
        ax2.plot([t for t, _ in rest], [v for _, v in rest], ".", ms=3, color="tab:cyan")
        ax2.set_ylabel("GET /health ms (dots)")
        ax.set_ylabel("CPU %")
        ax.set_title("CPU of each process, REST latency")
        ax.legend(loc="upper right", fontsize=8)
        ax = axes[2][col]
        for key, label, colour in (
            ("ofp_unread_kib", "received, not yet read by the controller", "tab:red"),
            ("ofp_unsent_kib", "queued by the switches' sockets", "tab:blue"),
        ):
            ax.plot(ts, [x.get(key) or 0 for x in tl], label=label, color=colour)
        ax.set_ylabel("KiB")
        ax.set_title("OpenFlow bytes waiting on the controller's connections")
        ax.legend(loc="upper right", fontsize=8)
        ax = axes[3][col]
        polls = dig(s, "correctness", "link_down", "polls") or []
        ax.step([p["t"] for p in polls], [p["wrong"] for p in polls], where="post")
        ax.set_title(f"after the cut: of {dig(s, 'correctness', 'pairs')} pairs, traced wrong")
        ax.set_xlabel("s since the port was deleted")
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- readings


def machine_busy_seconds() -> float:
    """CPU seconds every process of the machine spent so far (all CPUs, /proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float | None:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


# --------------------------------------------------------------------------- watcher


def ofp_sockets(port: int) -> tuple[int, float, float]:
    """The switches' OpenFlow connections to ``port`` (established), and the bytes waiting
    on them in KiB: received by the controller's sockets but not yet read by it, and queued
    by the switches' sockets but not yet taken (a controller that falls behind shows here
    before anywhere else)."""
    switches = unread = unsent = 0
    for f in tcp_sockets():
        if f[3] != "01":  # established
            continue
        tx, rx = (int(x, 16) for x in f[4].split(":"))
        if socket_port(f[1]) == port:
            unread += rx
        elif socket_port(f[2]) == port:
            switches += 1
            unsent += tx
    return switches, round(unread / 1024, 1), round(unsent / 1024, 1)


class Watch:
    """A thread sampling, every ``every`` s: ``GET /loom/v1/health`` (and its latency), the
    flows and groups of every bridge, the controller's and ovs-vswitchd's CPU seconds, and
    the OpenFlow bytes waiting on either side of the controller's connections."""

    def __init__(
        self,
        api: str,
        ctl_pid: int,
        ovs_pid: int,
        counter: TableCounter,
        every: float,
        ofp_port: int = 0,
    ) -> None:
        self.ofp_port = ofp_port
        self.client = LabClient(api, timeout=10.0)
        self.ctl_pid, self.ovs_pid, self.counter, self.every = ctl_pid, ovs_pid, counter, every
        self.samples: list[dict[str, Any]] = []
        self.tables: dict[str, tuple[int, int]] = {}
        self.last_change = time.monotonic()
        self.link_drops: list[dict[str, Any]] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="real-watch", daemon=True)

    @property
    def latest(self) -> dict[str, Any]:
        return self.samples[-1] if self.samples else {}

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                t = time.monotonic()
                self._sample(t)
                self._stop.wait(max(0.0, self.every - (time.monotonic() - t)))
        except Exception as exc:  # reported by the main thread, which stops the size
            self.error = f"{type(exc).__name__}: {exc}"

    def _sample(self, t: float) -> None:
        try:
            health: dict[str, Any] = self.client.health()
            latency: float | None = time.monotonic() - t
        except Exception:
            health, latency = {}, None
        counts = self.counter.counts(timeout=30.0)
        conns, unread, unsent = ofp_sockets(self.ofp_port)
        if len(counts) == len(self.counter.bridges) and counts != self.tables:
            self.tables, self.last_change = counts, time.monotonic()
        prev = self.latest.get("links")
        links = health.get("links")
        if prev is not None and links is not None and links < prev:
            self.link_drops.append({"t": t, "from": prev, "to": links})
        self.samples.append(
            {
                "t": t,
                "rest_s": latency,
                "switches": health.get("switches"),
                "links": links,
                "hosts": health.get("hosts"),
                "flows": sum(f for f, _ in counts.values()),
                "groups": sum(g for _, g in counts.values()),
                "ctl_cpu_s": process_cpu_seconds(self.ctl_pid),
                "ovs_cpu_s": process_cpu_seconds(self.ovs_pid),
                "busy_cpu_s": machine_busy_seconds(),
                "ofp_connections": conns,
                "ofp_unread_kib": unread,
                "ofp_unsent_kib": unsent,
            }
        )

    def latencies(self, start: float, end: float) -> tuple[list[float], int]:
        inside = [s["rest_s"] for s in self.samples if start <= s["t"] <= end]
        return [x for x in inside if x is not None], sum(1 for x in inside if x is None)

    def resolution(self) -> float | None:
        ts = [s["t"] for s in self.samples]
        return round((ts[-1] - ts[0]) / (len(ts) - 1), 3) if len(ts) > 1 else None

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


OFP13 = 4
HELLO, ECHO_REQUEST, ECHO_REPLY, MP_REQUEST, MP_REPLY = 0, 2, 3, 18, 19
MP_AGGREGATE, MP_GROUP_DESC = 2, 7
_ANY = 0xFFFFFFFF
_AGGREGATE_BODY = struct.pack("!B3xII4xQQHH4x", 0xFF, _ANY, _ANY, 0, 0, 1, 4)


class TableCounter:
    """Flows and groups each bridge holds, read over an OpenFlow 1.3 connection to its
    management socket (aggregate and group-description requests), every bridge at once."""

    def __init__(self, ovs: dov.DummyOvs, bridges: Iterable[str]) -> None:
        self.ovs, self.bridges = ovs, sorted(bridges)
        self.socks: dict[str, socket.socket] = {}
        self.xid = 0

    def _connect(self, bridge: str) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(self.ovs.mgmt_socket(bridge)))
        sock.sendall(struct.pack("!BBHI", OFP13, HELLO, 8, 0))
        sock.setblocking(False)
        self.socks[bridge] = sock
        return sock

    def _request(self, sock: socket.socket, mp_type: int, body: bytes) -> int:
        self.xid += 1
        msg = struct.pack("!HH4x", mp_type, 0) + body
        self._send(sock, struct.pack("!BBHI", OFP13, MP_REQUEST, 8 + len(msg), self.xid) + msg)
        return self.xid

    def counts(self, timeout: float = 60.0) -> dict[str, tuple[int, int]]:
        """``bridge -> (flows, groups)``; a bridge that does not answer is left out (one
        that closed a kept connection is asked again on a new one)."""
        out = self._poll(self.bridges, timeout)
        missing = [b for b in self.bridges if b not in out]
        if missing:
            out.update(self._poll(missing, timeout))
        return out

    def _poll(self, bridges: Sequence[str], timeout: float) -> dict[str, tuple[int, int]]:
        sel = selectors.DefaultSelector()
        want: dict[int, str] = {}
        state: dict[str, dict[str, Any]] = {}
        for b in bridges:
            try:
                sock = self.socks.get(b) or self._connect(b)
                want[self._request(sock, MP_AGGREGATE, _AGGREGATE_BODY)] = b
                want[self._request(sock, MP_GROUP_DESC, b"")] = b
            except OSError:
                self._drop(b)
                continue
            state[b] = {"buf": b"", "groups": 0, "flows": None, "done": False}
            sel.register(sock, selectors.EVENT_READ, b)
        deadline = time.monotonic() + timeout
        while want and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1.0):
                b = key.data
                try:
                    chunk = self.socks[b].recv(1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(key.fileobj)
                    self._drop(b)
                    continue
                state[b]["buf"] += chunk
                self._parse(b, state[b], want)
        sel.close()
        return {
            b: (st["flows"], st["groups"])
            for b, st in state.items()
            if st["flows"] is not None and st["done"]
        }

    def _parse(self, b: str, st: dict[str, Any], want: dict[int, str]) -> None:
        buf: bytes = st["buf"]
        while len(buf) >= 8:
            _, kind, length, xid = struct.unpack_from("!BBHI", buf)
            if len(buf) < length:
                break
            msg, buf = buf[:length], buf[length:]
            if kind == ECHO_REQUEST:
                self._send(self.socks[b], struct.pack("!BBHI", OFP13, ECHO_REPLY, length, xid)
                           + msg[8:])  # fmt: skip
            if kind != MP_REPLY or xid not in want:
                continue
            mp_type, flags = struct.unpack_from("!HH", msg, 8)
            if mp_type == MP_AGGREGATE:
                st["flows"] = struct.unpack_from("!I", msg, 32)[0]
                del want[xid]
            elif mp_type == MP_GROUP_DESC:
                off = 16
                while off + 2 <= len(msg):
                    st["groups"] += 1
                    off += max(8, struct.unpack_from("!H", msg, off)[0])
                if not flags & 1:  # the last part
                    del want[xid]
                    st["done"] = True
        st["buf"] = buf

    @staticmethod
    def _send(sock: socket.socket, data: bytes) -> None:
        sock.setblocking(True)
        try:
            sock.sendall(data)
        finally:
            sock.setblocking(False)

    def _drop(self, bridge: str) -> None:
        sock = self.socks.pop(bridge, None)
        if sock is not None:
            sock.close()

    def close(self) -> None:
        for b in list(self.socks):
            self._drop(b)


# --------------------------------------------------------------------------- analysis
# What a run's raw readings mean: tables per switch, ARP answers in a pcap, a trace's
# verdict, the link to cut, the logs' telling lines, py-spy's stacks.


def tables(fab: dov.OvsFabric, counts: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """Rules and groups per switch as the bridges hold them: overall and by tier."""
    out: dict[str, Any] = {}
    if not counts:
        return out
    fullest = max(counts, key=lambda b: (counts[b][0], b))
    out["flows"] = stats([f for f, _ in counts.values()], 1)
    out["groups"] = stats([g for _, g in counts.values()], 1)
    out["fullest"] = {
        "switch": fullest,
        "tier": fab.roles.get(fullest),
        "dpid": f"{fab.dpids[fullest]:016x}",
        "flows": counts[fullest][0],
        "groups": counts[fullest][1],
    }
    for role in sorted(set(fab.roles.values())):
        mine = [v for b, v in counts.items() if fab.roles.get(b) == role]
        out[f"by_tier_{role}"] = {
            "flows": stats([f for f, _ in mine], 1),
            "groups": stats([g for _, g in mine], 1),
        }
    return out


def read_answers(
    fab: dov.OvsFabric, pairs: Sequence[tuple[dov.HostPort, dov.HostPort]]
) -> dict[tuple[str, str], str]:
    """ARP replies found on the sources' ports: ``(src, dst) -> address`` of ``dst``."""
    want = {(a.name, b.ip): b.name for a, b in pairs}
    out: dict[tuple[str, str], str] = {}
    for src in {a.name for a, _ in pairs}:
        path = fab.pcap(src)
        for frame in dov.read_pcap(path) if path else []:
            if len(frame) < 42 or frame[12:14] != b"\x08\x06" or frame[20:22] != b"\x00\x02":
                continue
            spa = ".".join(str(b) for b in frame[28:32])
            dst = want.get((src, spa))
            if dst is not None:
                out[(src, dst)] = ":".join(f"{b:02x}" for b in frame[22:28])
    return out


def verdict(tr: dov.Trace, dst: dov.HostPort, odp: dict[int, tuple[str, str]]) -> str:
    if tr.recirculated:
        return "recirculated (trace incomplete)"
    if not tr.deliveries:
        return "sent to the controller only" if tr.to_controller else "dropped"
    if len(tr.deliveries) > 1:
        return f"delivered {len(tr.deliveries)} times"
    d = tr.deliveries[0]
    where = odp.get(d.odp_port)
    if where != (dst.bridge, dst.name):
        at = f"{where[0]}:{where[1]}" if where else f"datapath port {d.odp_port}"
        return f"ends at {at}"
    if d.vlans:
        return "VLAN-tagged at delivery"
    if d.eth_dst != dst.mac:
        return f"delivered with destination MAC {d.eth_dst}"
    return ""


def busiest_uplink(
    fab: dov.OvsFabric, paths: Sequence[Sequence[str]]
) -> tuple[tuple[tuple[str, int], tuple[str, int]], int]:
    """The aggregation-core link the most paths cross (either way): ``((agg, port), (core,
    port))`` and how many."""
    ups = {}
    for x, y in fab.links:
        if {fab.roles[x[0]], fab.roles[y[0]]} == {"agg", "core"}:
            agg, core = (x, y) if fab.roles[x[0]] == "agg" else (y, x)
            ups[frozenset((agg[0], core[0]))] = (agg, core)
    used: Counter[frozenset[str]] = Counter()
    for path in paths:
        for u, v in itertools.pairwise(path):
            key = frozenset((u, v))
            if key in ups:
                used[key] += 1
    key = max(sorted(ups, key=sorted), key=lambda x: used[x])
    return ups[key], used[key]


COVERAGE = (
    "rconn_overflow",
    "rconn_discarded",
    "rconn_queued",
    "ofproto_packet_out",
    "ofproto_recv_openflow",
    "ofproto_flush",
)


def logs(ryu_log: Path, ovs: dov.DummyOvs, ofp: int) -> dict[str, Any]:
    """What the controller and ovs-vswitchd logged that matters here: links removed for
    want of LLDP, switches lost, rejected messages, errors; controller connections dropped."""
    text = ryu_log.read_text(errors="replace").splitlines() if ryu_log.exists() else []
    kinds = {
        "links_removed_no_lldp": r"no LLDP for",
        "switches_disconnected": r"switch [0-9a-f]+ disconnected",
        "rejected": r"rejected",
        "errors": r"Traceback|ERROR|failed",
        "ports_changed": r"port [0-9a-f]+:\d+ (down|deleted)",
    }
    out: dict[str, Any] = {}
    for name, pattern in kinds.items():
        hits = [line for line in text if re.search(pattern, line)]
        out[name] = {"count": len(hits), "first": hits[:5]}
    target = f"127.0.0.1:{ofp}"
    drops = [line for line in ovs.log_lines() if target in line]
    slow = ovs.log_lines(("Unreasonably long",))
    out["ovs_connection_drops"] = {"count": len(drops), "first": drops[:5]}
    out["ovs_long_poll_intervals"] = {"count": len(slow), "first": slow[:3]}
    # ovs-vswitchd's own counters: messages to the controller dropped for a full queue
    # (rconn_overflow), packet-outs it executed, OpenFlow messages it queued.
    found = re.findall(r"^(\S+)\s.*total: (\d+)$", ovs.appctl("coverage/show"), re.M)
    out["ovs_coverage"] = {n: int(v) for n, v in found if n in COVERAGE}
    return out


def profile_summary(path: Path, top: int = 25) -> dict[str, Any]:
    """py-spy's collapsed stacks: the functions most samples were in (inclusive, counted
    once per stack) and the innermost frames (self)."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines() if path.exists() else []:
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n, frames = int(count), stack.split(";")
        total += n
        own[frames[-1]] += n
        for f in set(frames):
            inclusive[f] += n

    def share(c: Counter[str]) -> list[list[Any]]:
        return [[f, round(100 * n / total, 1)] for f, n in c.most_common(top)] if total else []

    return {"samples": total, "inclusive_pct": share(inclusive), "self_pct": share(own)}


def main(argv: list[str] | None = None) -> int:
    """Re-print the table and re-draw the figure of a saved run directory."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m mininet_scenarios.bench.real_switches_report DIR", file=sys.stderr)
        return 2
    out = Path(args[0])
    doc = json.loads((out / "results.json").read_text())
    print(table(doc))
    png = plot(doc, out / "real_switches.png")
    if png:
        print(f"figure: {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
