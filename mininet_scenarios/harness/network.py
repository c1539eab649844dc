"""``FabricNet``: a Loom topology graph as a running Mininet network, and nothing left after.

Design choices, each measured (see ``docs/environment.md``: OVS userspace, shaping without netem):

* Switches are ``OVSSwitch(datapath='user')`` (no OVS kernel module), OpenFlow 1.3,
  ``fail_mode=secure`` (no forwarding without the controller), in-band control off, dpid and
  port numbers exactly as in the graph, so what the controller sees matches the graph.
* Hosts get the graph's MAC and IP in one /8, IPv6 off (no RS/ND reaching the controller) and
  TX checksum offload off (TCP fails on the userspace datapath otherwise).
* GPU servers: when host nodes carry a ``server`` attribute (``rail_optimized``), each server
  is one Mininet host with one interface per NIC (``s1-eth0``...), each NIC in its rail's
  /16 and with the ARP and reverse-path sysctls of a multi-NIC server; the graph's NIC
  names still address them (see :mod:`~mininet_scenarios.harness.servers`).
* Plain veth links; shaping is :mod:`~mininet_scenarios.harness.shaping` (one HTB tree per link
  end).
* Cleanup is exact: on exit (normal, exception, Ctrl-C, SIGTERM) the network is stopped and then
  checked for leftovers *by the names and PIDs we created*; nothing is found by pattern, because
  other emulations may run their own networks at the same time (so never ``mn -c``).

Link failure: ``ip link set <switch-side veth> down`` makes the userspace datapath (netdev-linux
watches rtnetlink) send ``OFPT_PORT_STATUS`` MODIFY with ``config=PORT_DOWN state=LINK_DOWN``
within milliseconds; ``ovs-ofctl mod-port ... down`` does the same, and downing only the peer
gives ``state=LINK_DOWN``. :meth:`FabricNet.set_link` downs both ends with ``ip link``.
(To watch, ``ovs-ofctl -O OpenFlow13 monitor BR 128``: without a miss-len, OVS sends no async
messages to a monitor connection.)
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import networkx as nx
from mininet.link import Link
from mininet.net import Mininet
from mininet.node import Host, Node, OVSSwitch, RemoteController

from mininet_scenarios import emulation_logger
from mininet_scenarios.harness.ovs import (
    OFCTL,
    OWNER_KEY,
    Counters,
    FabricError,
    connected_bridges,
    live_owners,
    node_shells,
    ovs_bridges,
    ovs_ports,
    parse_dump_ports,
    root_interfaces,
    sh,
)
from mininet_scenarios.harness.processes import alive, kill_pids, pids_in_netns
from mininet_scenarios.harness.reachability import PingAll, neighbour_mac, pingall
from mininet_scenarios.harness.servers import (
    NicPort,
    add_link,
    configure_nics,
    nic_ports,
    servers_of,
)
from mininet_scenarios.harness.shaping import QueueClass, root_run, shape_interface
from topologies.graph import host_list, validate

log = emulation_logger()

CONTROLLER_NODE = "loomctl"
IPV6_OFF = (
    "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"
    " net.ipv6.conf.lo.disable_ipv6=1"
)
# Ports a host's kernel picks for connections nobody pinned: above every port a workload
# pins (client ports from 20000, gloo's 40960-49151), so an iperf3 control connection can
# never take the port its own data stream is pinned to ("Address already in use").
EPHEMERAL_PORTS = (61000, 65535)
EPHEMERAL = "sysctl -qw net.ipv4.ip_local_port_range='{} {}'".format(*EPHEMERAL_PORTS)


class FabricTerminated(SystemExit):
    """Raised from the SIGTERM handler so ``with`` blocks unwind and clean up (exit code 143)."""

    def __init__(self) -> None:
        super().__init__(128 + signal.SIGTERM)


@dataclass
class Leftovers:
    """What was still there after ``net.stop()`` (and was then removed by name or PID)."""

    bridges: list[str] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.bridges or self.interfaces or self.pids)


class _RemoteController(RemoteController):  # type: ignore[misc]
    """Mininet's RemoteController without the telnet probe (it would look like a switch)."""

    def checkListening(self) -> None:
        return None


_ACTIVE_NAMES: set[str] = set()  # node names of the FabricNets running in this process


class FabricNet:
    """``with FabricNet(graph, controller=("127.0.0.1", 6653)) as fnet:`` -> running fabric.

    ``shape``: HTB at every link end at the edge's ``rate_mbps``; ``queue_classes``: DSCP
    classes per port (e.g. :data:`mininet_scenarios.harness.shaping.DEFAULT_CLASSES`);
    ``queue_packets``: leaf queue limit (default: the kernel's 1000 packets), or
    ``queue_bytes`` in bytes. ``host_queues``: ``bounded`` (the default) gives a host's own
    interface the same limit as a switch port; ``kernel`` leaves it the kernel's 1000
    packets, as a server's NIC queue is (TCP on a real host does not lose segments to its
    own queue: small queues there measure the emulation, see docs/benchmarks.md §2).
    ``protocol``: ``ssl`` for controller targets over TLS (:mod:`.tls` sets up OVS).
    ``run_dir`` holds workload outputs (default ``/tmp/loom-run-<pid>/``). After exit,
    ``leftovers`` says what ``net.stop()`` missed and was removed, and ``timings`` how long.
    """

    def __init__(
        self,
        graph: nx.MultiGraph,
        controller: tuple[str, int] = ("127.0.0.1", 6653),
        run_dir: str | Path | None = None,
        shape: bool = True,
        queue_classes: Sequence[QueueClass] | None = None,
        *,
        queue_packets: int | None = None,
        queue_bytes: int | None = None,
        controllers: Sequence[tuple[str, int]] = (),
        host_queues: str = "bounded",
        protocol: str = "tcp",
    ) -> None:
        validate(graph)
        if host_queues not in ("bounded", "kernel") or protocol not in ("tcp", "ssl"):
            raise FabricError(f"want bounded or kernel, tcp or ssl: {host_queues!r} {protocol!r}")
        self.host_queues, self.protocol = host_queues, protocol
        if CONTROLLER_NODE in graph:
            raise FabricError(f"node name {CONTROLLER_NODE!r} is reserved for the controller")
        self.graph = graph
        self.controller = controller
        self.controllers = tuple(controllers)  # every target, for a cluster (else just one)
        default_dir = Path(tempfile.gettempdir()) / f"loom-run-{os.getpid()}"
        self.run_dir = Path(run_dir) if run_dir is not None else default_dir
        self.shape = shape
        self.queue_classes = tuple(queue_classes) if queue_classes else None
        self.queue_packets = queue_packets
        self.queue_bytes = queue_bytes
        self.net: Mininet | None = None
        self.host_names = host_list(graph)
        self.switch_names = [n for n, d in graph.nodes(data=True) if d["kind"] == "switch"]
        # GPU servers: NIC (graph host) -> its port on its server; server -> NICs in order.
        self.nics: dict[str, NicPort] = nic_ports(graph, reserved=(CONTROLLER_NODE,))
        self.servers = servers_of(self.nics)
        # The Mininet hosts (namespaces): each server once, every other host itself.
        self.mn_host_names = list(
            dict.fromkeys(self.nics[h].server if h in self.nics else h for h in self.host_names)
        )
        # Every interface we create, by owner: switch-side veths live in the root namespace.
        self.intf_names = {
            (n, d["ports"][n]): self.nics[n].intf if n in self.nics else f"{n}-eth{d['ports'][n]}"
            for a, b, d in graph.edges(data=True)
            for n in (a, b)
        }
        self._names = {*graph.nodes, *self.servers}  # every node name this fabric owns
        self.leftovers = Leftovers()
        self.timings: dict[str, float] = {}
        self._shells: dict[str, int] = {}
        self._netns: dict[str, tuple[int, os.stat_result]] = {}
        self._old_handlers: dict[int, Any] = {}
        self._claimed = False  # names checked free: from now on, leftovers are ours
        self._registered = False  # our names are in _ACTIVE_NAMES

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> FabricNet:
        self._install_handlers()
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _install_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def on_term(signum: int, frame: FrameType | None) -> None:
            raise FabricTerminated()

        self._old_handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, on_term)

    def start(self) -> None:
        """Build and start the network (``__enter__`` does this inside a cleanup guard)."""
        g = self.graph
        self.run_dir.mkdir(parents=True, exist_ok=True)
        links = g.number_of_edges()
        log.info(
            "fabric %s: building %d switches, %d hosts, %d links",
            g.graph.get("name", "?"),
            len(self.switch_names),
            len(self.host_names),
            links,
        )
        t0 = time.monotonic()
        clash = _ACTIVE_NAMES & self._names
        if clash:
            # Another fabric of this process owns these names: its shells would look stale.
            raise FabricError(
                f"node names already used by a running FabricNet: {sorted(clash)[:5]}"
            )
        self._remove_stale()
        _ACTIVE_NAMES.update(self._names)
        self._registered = True
        # Build inside the caller's try: addLink creates veth pairs at once.
        self.net = net = Mininet(
            topo=None,
            switch=OVSSwitch,
            host=Host,
            controller=None,
            link=Link,
            build=False,
            autoSetMacs=False,
        )
        ip, port = self.controller
        ctl = dict(controller=_RemoteController, ip=ip, port=port, protocol=self.protocol)
        self._track(net.addController(CONTROLLER_NODE, **ctl))
        for name in self.mn_host_names:
            if name in self.servers:  # its NICs' addresses go on their interfaces below
                host = self._track(net.addHost(name, ip=None, mac=None))
            else:
                d = g.nodes[name]
                host = self._track(net.addHost(name, ip=f"{d['ip']}/8", mac=d["mac"]))
            # Before the link exists, so the new interface inherits "default" = off too.
            host.cmd(f"{IPV6_OFF}; {EPHEMERAL}")
            fd = os.open(f"/proc/{host.pid}/ns/net", os.O_RDONLY)
            self._netns[name] = (fd, os.fstat(fd))
        for name in self.switch_names:
            self._track(
                net.addSwitch(
                    name,
                    cls=OVSSwitch,
                    dpid=f"{int(g.nodes[name]['dpid']):016x}",
                    datapath="user",
                    protocols="OpenFlow13",
                    failMode="secure",
                    inband=False,
                    batch=True,
                )
            )
        for a, b, d in g.edges(data=True):
            if g.nodes[b]["kind"] == "host":
                a, b = b, a  # create the pair from the host's namespace
            add_link(net, a, b, d["ports"], self.nics)
        net.build()
        net.start()
        self._tag_bridges()
        self._connect_all()
        self._prepare_interfaces()
        self.timings["build_start"] = time.monotonic() - t0
        if self.shape:
            t1 = time.monotonic()
            self.shape_all(self.queue_classes)
            self.timings["shape"] = time.monotonic() - t1
        log.info(
            "fabric: up in %.1f s (%s)",
            time.monotonic() - t0,
            ", ".join(f"{k} {v:.1f} s" for k, v in self.timings.items()),
        )

    def _track(self, node: Node) -> Node:
        self._shells[node.name] = node.pid
        return node

    def _prepare_interfaces(self) -> None:
        for server, names in self.servers.items():
            host = self.server(server)
            configure_nics(host.cmd, server, [self.nics[n].intf for n in names])
        for name in self.mn_host_names:
            host = self._mn()[name]
            for intf in host.intfNames():
                if intf != "lo":
                    host.cmd(f"ethtool -K {intf} tx off >/dev/null 2>&1")
        for (node, _port), intf in self.intf_names.items():
            if node in self.switch_names:
                path = Path(f"/proc/sys/net/ipv6/conf/{intf}/disable_ipv6")
                with contextlib.suppress(OSError):
                    path.write_text("1")

    def shape_all(self, classes: Sequence[QueueClass] | None = None) -> None:
        """(Re)shape every link end at its edge's rate, with ``classes`` if given."""
        ends = [
            (n, d["ports"][n], d["rate_mbps"])
            for a, b, d in self.graph.edges(data=True)
            for n in (a, b)
        ]
        log.info(
            "fabric: shaping %d link ends%s",
            len(ends),
            f" with {len(classes)} classes" if classes else "",
        )
        for node, port, rate in ends:
            kernel = self.host_queues == "kernel" and self.graph.nodes[node]["kind"] == "host"
            shape_interface(
                self.runner(node),
                self.intf(node, port),
                rate,
                classes,
                None if kernel else self.queue_packets,
                None if kernel else self.queue_bytes,
            )
        self.queue_classes = tuple(classes) if classes else None

    def stop(self) -> None:
        """Stop the network and remove, by exact name/PID, anything it left behind."""
        caught: list[int] = []

        def hold(signum: int, frame: FrameType | None) -> None:
            caught.append(signum)  # finish cleaning up first; re-raised below

        main = threading.current_thread() is threading.main_thread()
        if self.net is None and not self._claimed:  # never started, or already stopped
            if main:
                for signum, old in self._old_handlers.items():
                    signal.signal(signum, old)
            self._old_handlers.clear()
            return
        saved = {}
        if main:
            for sig in (signal.SIGINT, signal.SIGTERM):
                saved[sig] = signal.signal(sig, hold)
        t0 = time.monotonic()
        try:
            self._teardown()
        finally:
            if self._registered:
                _ACTIVE_NAMES.difference_update(self._names)
                self._registered = False
            self.timings["stop"] = time.monotonic() - t0
            if main:
                for sig, handler in saved.items():
                    signal.signal(sig, handler)
                for signum, old in self._old_handlers.items():
                    signal.signal(signum, old)
                self._old_handlers.clear()
        log.info(
            "fabric: stopped in %.1f s%s",
            self.timings["stop"],
            f"; removed leftovers {self.leftovers}" if self.leftovers else ", nothing left",
        )
        if signal.SIGTERM in caught:
            raise FabricTerminated()
        if signal.SIGINT in caught:
            raise KeyboardInterrupt

    def _teardown(self) -> None:
        net, self.net = self.net, None
        if net is not None:
            for node in net.values():
                self._unstick(node)
            # Workloads in host namespaces first, while the namespaces are surely ours.
            for name, (_fd, st) in self._netns.items():
                kill_pids(pids_in_netns(st, exclude=[self._shells.get(name, -1)]))
            try:
                net.stop()
            except Exception:
                log.exception("fabric: net.stop() failed; removing what is left by name")
            for ctl in net.controllers:
                ctl.terminate()  # RemoteController.stop() leaves its shell running
        self._verify_clean()

    @staticmethod
    def _unstick(node: Node) -> None:
        """A signal can land while a node shell runs a command; get its prompt back or kill it."""
        if node.shell is None or not node.waiting:
            return
        with contextlib.suppress(Exception):
            node.sendInt()
            deadline = time.monotonic() + 2.0
            while node.waiting and time.monotonic() < deadline:
                node.monitor(timeoutms=100)
        if node.waiting:
            log.warning("fabric: %s does not answer; killing its shell", node.name)
            node.terminate()
            node.waiting = False

    def _verify_clean(self) -> None:
        if not self._claimed:
            return  # we never got to create anything; the names may be another run's
        self._claimed = False
        names = set(self.intf_names.values()) | set(self.switch_names)
        bridges = sorted(ovs_bridges().intersection(self.switch_names))
        if bridges:
            sh(["ovs-vsctl", *[a for b in bridges for a in ("--", "--if-exists", "del-br", b)]])
        intfs = sorted(root_interfaces().intersection(names))
        for intf in intfs:
            sh(["ip", "link", "del", intf], check=False)
        pids = [pid for pid in self._shells.values() if alive(pid)]
        # Shells of nodes a signal interrupted before Mininet registered them: ours by parent.
        pids += [
            pid
            for pid, (_n, ppid) in node_shells(self._node_names()).items()
            if ppid == os.getpid()
        ]
        for _fd, st in self._netns.values():
            pids += pids_in_netns(st)
        kill_pids(sorted(set(pids)), grace=0.5)
        for fd, _st in self._netns.values():
            os.close(fd)
        self._netns.clear()
        self._shells.clear()
        self.leftovers = Leftovers(bridges, intfs, sorted(set(pids)))
        still = ovs_bridges().intersection(self.switch_names)
        still |= root_interfaces().intersection(names)
        if still:
            raise FabricError(f"could not remove {sorted(still)}")

    def _remove_stale(self) -> None:
        """Remove leftovers of an earlier crashed run that carry exactly the names we need.

        A name is stale only if no live process owns it: neither a Mininet node shell
        (``bash ... mininet:<name>``) nor the process recorded in a bridge's
        ``external_ids:loom-pid``. Names owned by a live network (another emulation running at
        the same time) are never touched; we refuse to start instead.
        """
        # Not the controller node's name: every FabricNet has one, and it owns nothing.
        live = live_owners({*self.switch_names, *self.host_names, *self.servers}, me=os.getpid())
        if live:
            raise FabricError(
                "node names in use by a running network (not removed): "
                + ", ".join(f"{n} (pid {p})" for n, p in sorted(live.items())[:10])
                + ("..." if len(live) > 10 else "")
            )
        self._claimed = True
        mine = [
            pid
            for pid, (_n, ppid) in node_shells(self._node_names()).items()
            if ppid == os.getpid()
        ]
        if mine:
            log.warning("fabric: killing stale node shells of this process: %s", mine)
            kill_pids(mine)
        bridges = sorted(ovs_bridges().intersection(self.switch_names))
        ports = sorted(ovs_ports().intersection(self.intf_names.values()) - set(bridges))
        names = set(self.intf_names.values()) | set(self.switch_names)
        if bridges or ports:
            log.warning("fabric: removing stale OVS bridges %s and ports %s", bridges, ports)
            args = [a for b in bridges for a in ("--", "--if-exists", "del-br", b)]
            args += [a for p in ports for a in ("--", "--if-exists", "del-port", p)]
            sh(["ovs-vsctl", *args])
        intfs = sorted(root_interfaces().intersection(names))
        if intfs:
            log.warning("fabric: removing stale interfaces %s", intfs)
            for intf in intfs:
                sh(["ip", "link", "del", intf], check=False)

    def _node_names(self) -> set[str]:
        return {*self.switch_names, *self.host_names, *self.servers, CONTROLLER_NODE}

    def _connect_all(self) -> None:
        """A cluster: every switch keeps a connection to every controller target."""
        if not self.controllers:
            return
        targets = [f"{self.protocol}:{ip}:{port}" for ip, port in self.controllers]
        args = [a for b in self.switch_names for a in ("--", "set-controller", b, *targets)]
        sh(["ovs-vsctl", *args])

    def _tag_bridges(self) -> None:
        """Record our PID on our bridges, so a later run can tell stale from live."""
        args = [
            a
            for b in self.switch_names
            for a in ("--", "set", "Bridge", b, f"external_ids:{OWNER_KEY}={os.getpid()}")
        ]
        sh(["ovs-vsctl", *args])

    # ----------------------------------------------------------------- access

    def _mn(self) -> Mininet:
        if self.net is None:
            raise FabricError("the fabric is not running")
        return self.net

    def host(self, name: str) -> Host:
        """The Mininet host of graph host ``name``; for a NIC of a server, its server (a
        command run there leaves by the NIC of its destination's rail: bind to
        ``nics[name].intf`` or its IP to send by this NIC). A server's name works too."""
        nic = self.nics.get(name)
        return self._mn()[nic.server if nic is not None else name]

    def server(self, name: str) -> Host:
        """The Mininet host of server ``name`` (its NICs: ``servers[name]``)."""
        if name not in self.servers:
            raise FabricError(f"no server {name!r} in the graph")
        return self._mn()[name]

    def nic(self, name: str) -> NicPort:
        """Graph host ``name`` as a NIC: its server, interface and IP."""
        try:
            return self.nics[name]
        except KeyError:
            raise FabricError(f"{name} is not a NIC of a server") from None

    def switch(self, name: str) -> OVSSwitch:
        return self._mn()[name]

    def intf(self, node: str, port: int) -> str:
        """Interface name of ``node``'s ``port`` (``<node>-eth<port>``)."""
        try:
            return self.intf_names[(node, port)]
        except KeyError:
            raise FabricError(f"{node} has no port {port} in the graph") from None

    def runner(self, node: str) -> Any:
        """A ``run(cmd) -> output`` for ``node``'s namespace (switch ports: the root one)."""
        if self.graph.nodes[node]["kind"] == "host":
            return self.host(node).cmd
        return root_run

    def links_between(self, a: str, b: str) -> list[tuple[str, str]]:
        """``(intf at a, intf at b)`` for every link between ``a`` and ``b``."""
        data = self.graph.get_edge_data(a, b) or {}
        return [(self.intf(a, d["ports"][a]), self.intf(b, d["ports"][b])) for d in data.values()]

    # ----------------------------------------------------------------- control

    def wait_connected(self, timeout: float = 30.0) -> bool:
        """True once every switch reports a connected controller; False after ``timeout``.

        Reads ``Controller.is_connected`` from OVSDB, which ovs-vswitchd refreshes on its
        periodic status update: it lags the real OpenFlow connection by 0-4 s.
        """
        deadline = time.monotonic() + timeout
        t0 = time.monotonic()
        next_note = t0 + 5.0
        while True:
            missing = sorted(set(self.switch_names) - connected_bridges())
            if not missing:
                self.timings["connect"] = time.monotonic() - t0
                log.info(
                    "fabric: %d switches connected after %.1f s",
                    len(self.switch_names),
                    self.timings["connect"],
                )
                return True
            now = time.monotonic()
            if now > deadline:
                log.warning("fabric: not connected after %.0f s: %s", timeout, missing)
                return False
            if now > next_note:
                log.info("fabric: waiting for %d switches: %s", len(missing), missing[:8])
                next_note = now + 5.0
            time.sleep(0.25)

    def set_link(self, a: str, b: str, up: bool) -> list[str]:
        """Bring both ends of every link between ``a`` and ``b`` up or down (``ip link``).

        The switch side going down makes OVS send PortStatus; returns the interfaces touched.
        """
        pairs = self.links_between(a, b)
        if not pairs:
            raise FabricError(f"no link between {a} and {b}")
        state = "up" if up else "down"
        touched = []
        for intf_a, intf_b in pairs:
            for node, intf in ((a, intf_a), (b, intf_b)):
                out = self.runner(node)(f"ip link set dev {intf} {state}")
                if out.strip():
                    raise FabricError(f"{node}: ip link set {intf} {state}: {out.strip()}")
                touched.append(intf)
        return touched

    def pingall(self, timeout: float = 1.0, parallel: int = 4) -> PingAll:
        """Every ordered host pair once; see :func:`.reachability.pingall`."""
        return pingall(self, timeout=timeout, parallel=parallel)

    def neighbour_mac(self, src: str, dst: str, tries: int = 3) -> str:
        """The MAC ``src``'s kernel sends to for ``dst`` (under Loom: ``dst``'s Loom
        address); see :func:`.reachability.neighbour_mac`."""
        return neighbour_mac(self, src, dst, tries=tries)

    # ----------------------------------------------------------------- reading

    def port_counters(self, switch: str) -> dict[int, Counters]:
        return parse_dump_ports(sh([*OFCTL, "dump-ports", switch]))

    def dump_flows(self, switch: str) -> str:
        return sh([*OFCTL, "dump-flows", switch])

    def dump_groups(self, switch: str) -> str:
        return sh([*OFCTL, "dump-groups", switch])

    def show(self, switch: str) -> str:
        return sh([*OFCTL, "show", switch])
