"""A private Open vSwitch with no datapath of the machine's: its own ovsdb-server and
``ovs-vswitchd --enable-dummy --disable-system`` in a temporary run directory, bridges of
``datapath_type=dummy`` linked by patch ports, hosts as ``type=dummy`` interfaces, as
Open vSwitch's own test suite runs it. Real OpenFlow switches, control plane only: they
connect to a controller over TCP, hold its rules and groups and answer ``ofproto/trace``,
while no packet touches a kernel interface, so a fabric of thousands of switches fits on a
laptop and the controller is measured against the switch implementation it targets.

Nothing of the machine's Open vSwitch is touched: every ``ovs-vsctl`` call names the private
database socket, every ``ovs-ofctl`` call a bridge's socket in the private run directory,
and ``OVS_RUNDIR``, ``OVS_DBDIR``, ``OVS_LOGDIR``, ``OVS_PKGDATADIR`` and
``OVS_SYSCONFDIR`` of the daemons and tools point there too.

* :class:`DummyOvs`: both daemons for a ``with`` block (stopped by PID, directory removed);
  ``appctl`` speaks unixctl JSON-RPC over kept connections, pipelined (thousands of frames
  and traces without a process each, while the switch's main loop is busy);
* :func:`build` / :func:`attach`: a topology graph (``topologies``) as bridges in one raw
  database transaction, datapath ids shuffled (random 48-bit, as derived from MACs) or as
  the graph numbers them; then the controller set on every bridge at once;
* :func:`traces`: ``ofproto/trace`` from hosts' ports, patch ports followed across bridges,
  the final datapath actions parsed into deliveries (port, destination MAC, VLAN tags);
* :meth:`DummyOvs.mgmt_socket`: where a bridge takes OpenFlow connections of its own
  (``ovs-ofctl`` and ``bench.real_switches_report.TableCounter`` use it).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import zlib
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import networkx as nx

from mininet_scenarios.harness.processes import ChildProcess, ProcessError

PKGDATADIR = Path(os.environ.get("OVS_PKGDATADIR", "/usr/share/openvswitch"))
CTL_CONNECTIONS = 8  # unixctl connections for pipelined commands
STATS_MS = 3_600_000  # ms between interface statistics in the database
# What the switch logs when it loses its controller (rconn and vconn messages).
DROP_PATTERNS = ("connection dropped", "inactivity probe", "disconnecting", "connection closed")


class OvsError(RuntimeError):
    """A private daemon or tool failed; the message says which and why."""


# --------------------------------------------------------------------------- daemons


class JsonRpc:
    """One kept JSON-RPC connection over a unix socket: ``ovs-appctl``'s unixctl protocol,
    and the database's own (``transact``)."""

    def __init__(self, path: Path, timeout: float = 600.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.buf = ""
        self.next_id = 0
        self.decoder = json.JSONDecoder()

    def call_many(self, method: str, calls: Sequence[Sequence[Any]], window: int = 64) -> list[Any]:
        """``method`` once per parameter list, up to ``window`` requests in flight (the
        server answers several per turn of its main loop, which a busy switch makes long)."""
        results: list[Any] = []
        first = self.next_id + 1
        sent = 0
        while len(results) < len(calls):
            while sent < len(calls) and sent - len(results) < window:
                self.next_id += 1
                req = {"method": method, "params": list(calls[sent]), "id": self.next_id}
                self.sock.sendall(json.dumps(req).encode())
                sent += 1
            results.append(self._reply(method, first + len(results), calls[len(results)]))
        return results

    def _reply(self, method: str, want: int, params: Sequence[Any]) -> Any:
        while True:
            text = self.buf.lstrip()
            try:
                reply, end = self.decoder.raw_decode(text)
            except ValueError:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    raise OvsError(f"{method}: connection closed") from None
                self.buf += chunk.decode(errors="replace")
                continue
            self.buf = text[end:]
            if reply.get("method") == "echo":  # the server's keepalive
                echo = {"result": reply.get("params", []), "error": None, "id": reply["id"]}
                self.sock.sendall(json.dumps(echo).encode())
                continue
            if reply.get("id") != want:
                continue
            if reply.get("error") is not None:
                what = " ".join(str(p) for p in params)[:200]
                raise OvsError(f"{method} {what}: {reply['error']}")
            return reply.get("result")

    def close(self) -> None:
        self.sock.close()


class DummyOvs:
    """``with DummyOvs() as ovs:`` a private ovsdb-server and ovs-vswitchd.

    The run directory (a new temporary one under ``parent``) holds the database, sockets,
    pcap files and logs; ``keep_logs`` copies the two daemons' logs there before it is removed.
    """

    def __init__(self, parent: Path | None = None, keep_logs: Path | None = None) -> None:
        self.parent, self.keep_logs = parent, keep_logs
        self.dir = Path()
        self.ovsdb: ChildProcess | None = None
        self.vswitchd: ChildProcess | None = None
        self._ctls: list[JsonRpc] = []
        self._db: JsonRpc | None = None

    @property
    def db_sock(self) -> Path:
        return self.dir / "db.sock"

    @property
    def vswitchd_log(self) -> Path:
        return self.dir / "ovs-vswitchd.log"

    def env(self) -> dict[str, str]:
        private = str(self.dir)
        names = ("OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_PKGDATADIR", "OVS_SYSCONFDIR")
        return {**os.environ, **dict.fromkeys(names, private)}

    def start(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="loom-dummy-ovs-", dir=self.parent))
        try:
            self._run(["ovsdb-tool", "create", str(self.dir / "conf.db"),
                       str(PKGDATADIR / "vswitch.ovsschema")])  # fmt: skip
            self.ovsdb = self._daemon(
                "ovsdb-server",
                [str(self.dir / "conf.db"), f"--remote=punix:{self.db_sock}"],
                self.db_sock,
            )
            self.vsctl("--no-wait", "init")
            self.vswitchd = self._daemon(
                "ovs-vswitchd",
                [f"unix:{self.db_sock}", "--enable-dummy", "--disable-system", "-vfile:info"],
                self.dir / "ovs-vswitchd.ctl",
            )
        except BaseException:
            self.stop()
            raise

    def _daemon(self, name: str, args: list[str], ready: Path) -> ChildProcess:
        argv = [name, *args, f"--unixctl={self.dir / name}.ctl",
                f"--log-file={self.dir / name}.log", "-vconsole:off"]  # fmt: skip
        child = ChildProcess(
            argv,
            self.dir / f"{name}.out",
            cwd=self.dir,
            env=self.env(),
            ready=lambda pid: ready.exists(),
            waiting_for=f"{ready.name} to appear",
            start_timeout=30.0,
        )
        child.start()
        return child

    def stop(self) -> None:
        for conn in [*self._ctls, self._db]:
            if conn is not None:
                conn.close()
        self._ctls, self._db = [], None
        for child in (self.vswitchd, self.ovsdb):
            if child is not None:
                child.stop()
        self.vswitchd = self.ovsdb = None
        if self.dir != Path() and self.dir.exists():
            if self.keep_logs is not None:
                self.keep_logs.mkdir(parents=True, exist_ok=True)
                for log in self.dir.glob("*.log"):
                    shutil.copy(log, self.keep_logs / log.name)
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------- tools
    def _run(self, argv: Sequence[str], timeout: float = 300.0) -> str:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, env=self.env(), timeout=timeout
        )
        if proc.returncode:
            raise OvsError(f"{argv[0]} {argv[1]}: exit {proc.returncode}: {proc.stderr[-2000:]}")
        return proc.stdout

    def vsctl(self, *args: str, timeout: float = 300.0) -> str:
        return self._run(["ovs-vsctl", f"--db=unix:{self.db_sock}", *args], timeout)

    def mgmt_socket(self, bridge: str) -> Path:
        """A bridge's own OpenFlow socket: connections there bypass the controller."""
        return self.dir / f"{bridge}.mgmt"

    def ofctl(self, command: str, bridge: str, *args: str) -> str:
        target = f"unix:{self.mgmt_socket(bridge)}"
        return self._run(["ovs-ofctl", "-O", "OpenFlow13", command, target, *args])

    def appctl(self, method: str, *params: str) -> str:
        """An ``ovs-appctl`` command of the private ovs-vswitchd."""
        return self.appctl_many(method, [params])[0]

    def appctl_many(
        self, method: str, calls: Sequence[Sequence[str]], conns: int = CTL_CONNECTIONS
    ) -> list[str]:
        """``method`` once per parameter list, pipelined over ``conns`` connections (a busy
        switch takes about one request per connection per turn of its main loop); calls
        with the same first parameter (an interface) keep their order."""
        n = max(1, min(conns, len(calls) // 16))
        while len(self._ctls) < n:
            self._ctls.append(JsonRpc(self.dir / "ovs-vswitchd.ctl"))
        lanes: list[list[int]] = [[] for _ in range(n)]
        for i, params in enumerate(calls):
            lanes[zlib.crc32(str(params[0] if params else "").encode()) % n].append(i)

        def run(lane: int) -> list[Any]:
            return self._ctls[lane].call_many(method, [calls[i] for i in lanes[lane]])

        out: list[str] = [""] * len(calls)
        with ThreadPoolExecutor(n) as pool:
            for lane, results in enumerate(pool.map(run, range(n))):
                for i, r in zip(lanes[lane], results, strict=True):
                    out[i] = str(r or "")
        return out

    def transact(self, ops: list[dict[str, Any]], wait: float = 600.0) -> None:
        """One database transaction of raw OVSDB operations (``ovs-vsctl`` grows with the
        database on every command: thousands of ports would take minutes), then wait until
        ovs-vswitchd has applied it."""
        if self._db is None:
            self._db = JsonRpc(self.db_sock)
        bump = {"op": "mutate", "table": "Open_vSwitch", "where": [],
                "mutations": [["next_cfg", "+=", 1]]}  # fmt: skip
        result = self._db.call_many("transact", [["Open_vSwitch", *ops, bump]])[0]
        errors = [r for r in result if isinstance(r, dict) and "error" in r]
        if errors or len(result) < len(ops) + 1:
            raise OvsError(f"transaction refused: {errors[:3]}")
        select = {"op": "select", "table": "Open_vSwitch", "where": [],
                  "columns": ["next_cfg", "cur_cfg"]}  # fmt: skip
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            row = self._db.call_many("transact", [["Open_vSwitch", select]])[0][0]["rows"][0]
            if row["cur_cfg"] >= row["next_cfg"]:
                return
            time.sleep(0.05)
        raise OvsError(f"ovs-vswitchd did not apply a transaction within {wait:g} s")

    def pid(self) -> int:
        if self.vswitchd is None or self.vswitchd.pid is None:
            raise OvsError("ovs-vswitchd is not running")
        return self.vswitchd.pid

    def check_alive(self) -> None:
        for child in (self.ovsdb, self.vswitchd):
            if child is not None:
                try:
                    child.check_alive()
                except ProcessError as exc:
                    raise OvsError(str(exc)) from None

    def log_lines(self, patterns: Iterable[str] = DROP_PATTERNS) -> list[str]:
        """Lines of ovs-vswitchd's log that contain any of ``patterns``."""
        log, pats = self.vswitchd_log, tuple(patterns)
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        return [line for line in lines if any(p in line for p in pats)]


# --------------------------------------------------------------------------- fabric


@dataclass(frozen=True)
class HostPort:
    """A host: a dummy interface (named as the host) on its edge bridge."""

    name: str
    bridge: str
    ofport: int
    mac: str
    ip: str


@dataclass
class OvsFabric:
    """What :func:`build` made: bridges with their datapath ids, hosts, and every link
    once as ``((bridge, port), (bridge, port))``."""

    dpids: dict[str, int]
    roles: dict[str, str]
    hosts: dict[str, HostPort]
    links: list[tuple[tuple[str, int], tuple[str, int]]]
    port_names: dict[tuple[str, int], str] = field(default_factory=dict)
    pcap_dir: Path | None = None

    def pcap(self, host: str) -> Path | None:
        return None if self.pcap_dir is None else self.pcap_dir / f"{host}.pcap"


def shuffled_dpids(names: Sequence[str], seed: int) -> dict[str, int]:
    """A random, distinct, non-zero 48-bit datapath id per bridge (as OVS derives one from
    a MAC address): no order, no small numbers a controller might lean on."""
    rng, taken, out = random.Random(seed), set(), {}
    for name in names:
        dpid = 0
        while dpid == 0 or dpid in taken:
            dpid = rng.getrandbits(48)
        taken.add(dpid)
        out[name] = dpid
    return out


def _map(items: dict[str, Any]) -> list[Any]:
    return ["map", [[k, str(v)] for k, v in items.items()]]


class _Rows:
    """OVSDB insert operations for bridges, ports and interfaces, by named UUID."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.ports: dict[str, list[list[str]]] = {}

    def insert(self, table: str, row: dict[str, Any]) -> list[str]:
        name = f"r{len(self.ops)}"
        self.ops.append({"op": "insert", "table": table, "row": row, "uuid-name": name})
        return ["named-uuid", name]

    def port(self, bridge: str, name: str, **iface: Any) -> None:
        i = self.insert("Interface", {"name": name, **iface})
        self.ports.setdefault(bridge, []).append(
            self.insert("Port", {"name": name, "interfaces": i})
        )


def build(
    ovs: DummyOvs, graph: nx.MultiGraph, seed: int | None = 1, capture: Iterable[str] = ()
) -> OvsFabric:
    """Bridges for the graph's switches (``seed`` None: the graph's datapath ids), a patch
    pair per link and a dummy interface per host (the hosts in ``capture``: what leaves
    theirs is written to a pcap file), in one transaction. No controller yet: :func:`attach`
    sets it on every bridge at once."""
    nodes = graph.nodes
    switches = sorted(n for n in nodes if nodes[n]["kind"] == "switch")
    if seed is None:
        dpids = {s: int(nodes[s]["dpid"]) for s in switches}
    else:
        dpids = shuffled_dpids(switches, seed)
    fab = OvsFabric(dpids, {s: str(nodes[s].get("role", "")) for s in switches}, {}, [])
    captured = set(capture)
    if captured:
        fab.pcap_dir = ovs.dir / "pcap"
        fab.pcap_dir.mkdir()
    rows = _Rows()
    for sw in switches:
        rows.port(sw, sw, type="internal")
    for a, b, d in graph.edges(data=True):
        pa, pb = d["ports"][a], d["ports"][b]
        if "host" in (nodes[a]["kind"], nodes[b]["kind"]):
            host, sw = (a, b) if nodes[a]["kind"] == "host" else (b, a)
            port = d["ports"][sw]
            fab.hosts[host] = HostPort(host, sw, port, nodes[host]["mac"], nodes[host]["ip"])
            fab.port_names[(sw, port)] = host
            pcap = {"tx_pcap": fab.pcap(host)} if host in captured else {}
            rows.port(sw, host, type="dummy", ofport_request=port, options=_map(pcap))
            continue
        fab.links.append(((a, pa), (b, pb)))
        for (me, mine), (peer, theirs) in (((a, pa), (b, pb)), ((b, pb), (a, pa))):
            name = fab.port_names[(me, mine)] = f"{me}-{mine}"
            peer_name = f"{peer}-{theirs}"
            rows.port(
                me, name, type="patch", ofport_request=mine, options=_map({"peer": peer_name})
            )
    bridges = []
    for sw in switches:
        row = {
            "name": sw,
            "datapath_type": "dummy",
            "fail_mode": "secure",
            "protocols": ["set", ["OpenFlow13"]],
            "other_config": _map({"datapath-id": f"{dpids[sw]:016x}", "disable-in-band": "true"}),
            "ports": ["set", rows.ports[sw]],
        }
        bridges.append(rows.insert("Bridge", row))
    add = {"op": "mutate", "table": "Open_vSwitch", "where": [],
           "mutations": [["bridges", "insert", ["set", bridges]]]}  # fmt: skip
    # Interface statistics written to the database every 5 s (the default) for thousands
    # of interfaces keep ovsdb-server busy on a core the controller needs: once an hour.
    quiet = {"op": "update", "table": "Open_vSwitch", "where": [],
             "row": {"other_config": _map({"stats-update-interval": STATS_MS})}}  # fmt: skip
    ovs.transact([*rows.ops, add, quiet])
    return fab


def attach(ovs: DummyOvs, fab: OvsFabric, port: int) -> None:
    """Point every bridge at ``tcp:127.0.0.1:port``, all in one transaction."""
    rows = _Rows()
    for sw in fab.dpids:
        ctl = rows.insert("Controller", {"target": f"tcp:127.0.0.1:{port}"})
        rows.ops.append({"op": "update", "table": "Bridge", "where": [["name", "==", sw]],
                         "row": {"controller": ctl}})  # fmt: skip
    ovs.transact(rows.ops)


def cut(ovs: DummyOvs, fab: OvsFabric, end: tuple[str, int]) -> str:
    """Delete one end of a patch link: its bridge reports the port gone (PortStatus),
    while the far end stays up with no peer, as a switch whose neighbour died sees it."""
    name = fab.port_names[end]
    ovs.vsctl("del-port", end[0], name)
    return name


def receive(ovs: DummyOvs, frames: Sequence[tuple[str, bytes]]) -> None:
    """Frames arriving at dummy interfaces from their hosts, as if the hosts sent them:
    ``(interface, frame)`` each, in order per interface."""
    ovs.appctl_many("netdev-dummy/receive", [[iface, f.hex()] for iface, f in frames])


def read_pcap(path: Path) -> list[bytes]:
    """The frames of a pcap file (what left a dummy interface); [] if none yet."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if len(data) < 24:
        return []
    endian = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    frames, off = [], 24
    while off + 16 <= len(data):
        caplen = struct.unpack_from(f"{endian}I", data, off + 8)[0]
        if off + 16 + caplen > len(data):
            break  # being written
        frames.append(data[off + 16 : off + 16 + caplen])
        off += 16 + caplen
    return frames


# --------------------------------------------------------------------------- traces


@dataclass(frozen=True)
class Delivery:
    """A packet leaving the datapath: by datapath port, with this MAC and VLAN tags."""

    odp_port: int
    eth_dst: str
    vlans: int


@dataclass(frozen=True)
class Trace:
    bridges: tuple[str, ...]  # in the order the packet went through them
    deliveries: tuple[Delivery, ...]
    to_controller: bool
    recirculated: bool
    actions: str


_BRIDGE_RE = re.compile(r'^\s*bridge\("([^"]+)"\)', re.M)
_SET_DST_RE = re.compile(r"^set\(eth\((?:[^)]*?,)?dst=([0-9a-f:]{17})")


def split_actions(text: str) -> list[str]:
    """Top-level comma-separated datapath actions (commas inside parentheses stay)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    return [*out, tail] if tail else out


def walk_actions(text: str, eth_dst: str, vlans: int = 0) -> tuple[list[Delivery], bool, bool]:
    """Deliveries of a datapath action list, whether any copy goes to the controller
    (``userspace``) and whether it recirculates; ``clone(...)`` is followed with a copy of
    the packet's state."""
    outs: list[Delivery] = []
    ctl = recirc = False
    for act in split_actions(text):
        if act.isdigit():
            outs.append(Delivery(int(act), eth_dst, vlans))
        elif m := _SET_DST_RE.match(act):
            eth_dst = m.group(1)
        elif act.startswith("push_vlan("):
            vlans += 1
        elif act == "pop_vlan":
            vlans = max(0, vlans - 1)
        elif act.startswith("userspace("):
            ctl = True
        elif act.startswith(("recirc(", "ct(")):
            recirc = True
        elif act.startswith("clone("):
            inner, c, r = walk_actions(act[6:-1], eth_dst, vlans)
            outs += inner
            ctl, recirc = ctl or c, recirc or r
    return outs, ctl, recirc


def traces(ovs: DummyOvs, asked: Sequence[tuple[str, str, str]]) -> list[Trace]:
    """``ofproto/trace`` of each ``(bridge, flow, eth_dst)``: ``flow`` entering ``bridge``,
    its ``dl_dst`` being ``eth_dst``. Give each flow a non-zero ``dp_hash``: select groups
    then pick their bucket as the datapath would for that hash, where a trace without one
    stops at a recirculation."""
    out = []
    texts = ovs.appctl_many("ofproto/trace", [[bridge, flow] for bridge, flow, _ in asked])
    for text, (_, _, eth_dst) in zip(texts, asked, strict=True):
        found = re.findall(r"^Datapath actions: (.*)$", text, re.M)
        actions = found[-1].strip() if found else "drop"
        outs, ctl, recirc = walk_actions(actions, eth_dst)
        out.append(Trace(tuple(_BRIDGE_RE.findall(text)), tuple(outs), ctl, recirc, actions))
    return out


def odp_ports(ovs: DummyOvs) -> dict[int, tuple[str, str]]:
    """Datapath port number -> (bridge, interface), from ``dpif/show``."""
    out: dict[int, tuple[str, str]] = {}
    bridge = ""
    for line in ovs.appctl("dpif/show").splitlines():
        if re.match(r"^  \S+:$", line):
            bridge = line.strip()[:-1]
        elif m := re.match(r"^\s{4}(\S+) \d+/(\d+):", line):
            out[int(m.group(2))] = (bridge, m.group(1))
    return out
