"""The ``faucet`` baseline: Faucet, the production OpenFlow controller, on the same fabric.

Operators who do not run Loom would run something like this: Faucet with *stacking* on every
inter-switch link, configured from the same topology graph Loom and the emulation use.

What stacking does with a multi-path fabric: Faucet treats the switches as one distributed
L2 switch. It checks every stack link with LLDP beacons, picks one root (the configured
switch with the lowest ``stack.priority``), and forwards over a single tree: each switch
reaches the root along its shortest path (ties broken by name), floods go up to the root and
back down, and MACs are learned on the ports of that tree. Every other link of a fat-tree or
dragonfly carries no traffic until a tree link fails, when Faucet recomputes the tree once it
has declared the failed stack port down. That is the "production peer" column of the
benchmarks: what redundancy buys with a correct, well-tested L2 fabric, and what it does
*not* buy (no ECMP, no adaptive routing: the root's uplinks are the bisection).

Faucet pins its own framework (os-ken) and eventlet, so it lives in ``.venv-faucet``
(``make faucet-venv``), not in Loom's venv; :class:`FaucetProcess` runs it as a child
process like :class:`~mininet_scenarios.harness.controller.ControllerProcess` runs Ryu.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx
import yaml

from mininet_scenarios import emulation_logger
from mininet_scenarios.harness.controller import ControllerError
from mininet_scenarios.harness.processes import (
    LOG_TAIL_LINES,
    REPO_ROOT,
    ChildProcess,
    free_port,
    listening_on,
    tail,
)
from mininet_scenarios.harness.reachability import PingAll
from topologies.graph import link_ends, switch_graph, switches, validate

if TYPE_CHECKING:
    from mininet_scenarios.harness.network import FabricNet

log = emulation_logger()

FAUCET_VENV = REPO_ROOT / ".venv-faucet"
FAUCET_BIN = FAUCET_VENV / "bin" / "faucet"
CHECK_CONFIG_BIN = FAUCET_VENV / "bin" / "check_faucet_config"
VLAN_NAME = "fabric"
# Root choice: the highest tier wins (core/spine above aggregation above edge/leaf); roles
# not listed (dragonfly routers, custom fabrics) are tier 0, so the lowest dpid decides.
ROLE_TIERS = {"core": 2, "spine": 2, "agg": 1, "edge": 0, "leaf": 0}
STACK_STATE_UP = 3  # faucet.port.STACK_STATE_UP, as exported in ``port_stack_state``
# MAC learning timeout (s). Faucet's default (300) makes a quiet host's MAC expire mid-run
# and its traffic flood the whole tree until relearned; an hour outlasts any benchmark.
# Faucet requires arp/nd_neighbor_timeout < timeout / 2, which the defaults (30) satisfy.
LEARN_TIMEOUT = 3600
_METRIC_RE = re.compile(r"^(\w+)\{([^}]*)\}\s+([-+.\deE]+|NaN|[+-]Inf)$")
_LABEL_RE = re.compile(r'(\w+)="([^"]*)"')


class FaucetError(ControllerError):
    """Faucet died, did not listen, or the fabric did not come up; carries the log tail."""


# --------------------------------------------------------------------------- config


def stack_root(graph: nx.MultiGraph) -> str:
    """The switch Faucet should root its tree at: highest tier, then lowest dpid.

    On a fat-tree that is ``c1``, a core switch: a tree rooted at the core reaches every pod
    in two hops, which is the best a single tree can do there (an edge root would send all
    inter-pod traffic through one pod). On a leaf-spine it is the first spine.
    """
    names = list(switches(graph))
    if not names:
        raise ValueError("the graph has no switches")

    def key(name: str) -> tuple[int, int]:
        d = graph.nodes[name]
        return (-ROLE_TIERS.get(str(d.get("role")), 0), int(d["dpid"]))

    return min(names, key=key)


def faucet_config(
    graph: nx.MultiGraph,
    *,
    vlan: int = 100,
    root: str | None = None,
    lldp_interval: int | None = None,
) -> str:
    """Faucet YAML for ``graph``: one stacked L2 fabric on one VLAN.

    * one ``dps`` entry per switch (by dpid), ``dp_id`` = the graph's dpid, OVS hardware;
    * every host port a native-VLAN access port;
    * every switch-to-switch link a stack port on both ends (``stack: {dp, port}``);
    * one stack root, ``root`` or :func:`stack_root`, marked by ``stack: {priority: 1}``.

    Everything else is Faucet's default, as an operator would deploy it, except the MAC
    learning timeout (:data:`LEARN_TIMEOUT`). In particular stack links are checked by LLDP
    every 5 s and declared down after 3 missed beacons: a failed tree link is routed around
    10-15 s after it fails, whatever OpenFlow PortStatus said at once. ``lldp_interval``
    (seconds) tunes that, at a risk: at 1 s on a k=4 fat-tree here, Faucet (one eventlet
    thread for 20 switches) missed its own beacons and flapped stack ports hundreds of times
    a minute, so the baseline keeps Faucet's default.

    Output is deterministic (switches by dpid, ports by number), so a config can be diffed.
    """
    validate(graph)
    root = root or stack_root(graph)
    if graph.nodes.get(root, {}).get("kind") != "switch":
        raise ValueError(f"stack root {root!r} is not a switch of the graph")
    dps: dict[str, dict[str, Any]] = {}
    for name in sorted(switches(graph), key=lambda s: int(graph.nodes[s]["dpid"])):
        interfaces: dict[int, dict[str, Any]] = {}
        for end in link_ends(graph, name):
            if graph.nodes[end.peer]["kind"] == "host":
                interfaces[end.port] = {"description": end.peer, "native_vlan": VLAN_NAME}
            else:
                interfaces[end.port] = {
                    "description": f"{end.peer}:{end.peer_port}",
                    "stack": {"dp": end.peer, "port": end.peer_port},
                }
        dpid = int(graph.nodes[name]["dpid"])
        dp: dict[str, Any] = {"dp_id": dpid, "hardware": "Open vSwitch", "timeout": LEARN_TIMEOUT}
        if name == root:
            dp["stack"] = {"priority": 1}
        if lldp_interval is not None:
            dp["lldp_beacon"] = {"send_interval": int(lldp_interval)}
        dp["interfaces"] = interfaces
        dps[name] = dp
    doc = {
        "vlans": {VLAN_NAME: {"vid": vlan, "description": "every host of the fabric"}},
        "dps": dps,
    }
    header = (
        f"# Faucet config for {graph.graph.get('name', 'a fabric')}: generated by"
        f" mininet_scenarios.harness.faucet; stack root {root}\n"
    )
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def check_faucet_config(path: str | Path, timeout: float = 60.0) -> tuple[bool, str]:
    """Run Faucet's own ``check_faucet_config`` (from ``.venv-faucet``) on ``path``."""
    if not CHECK_CONFIG_BIN.exists():
        raise FaucetError(f"{CHECK_CONFIG_BIN} is missing: run `make faucet-venv`")
    proc = subprocess.run(
        [str(CHECK_CONFIG_BIN), str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- process


class FaucetProcess(ChildProcess):
    """``with FaucetProcess(graph, run_dir) as faucet: FabricNet(graph, faucet.address)``.

    Writes ``faucet.yaml`` into ``run_dir`` and starts Faucet's ``faucet`` console script
    from ``.venv-faucet``, which execs ``osken-manager faucet.faucet`` (found on PATH, so
    the venv's bin directory goes first). Faucet's settings come from environment variables:
    config, logs and the Prometheus endpoint (loopback, a free port) point into ``run_dir``
    or at us, and inherited ``FAUCET_*``/``GAUGE_*`` variables (an event socket, say) are
    dropped. The lifecycle is :class:`~mininet_scenarios.harness.processes.ChildProcess`:
    ready once our PID listens on the OpenFlow port; on exit SIGTERM to its process group,
    then SIGKILL after ``stop_timeout``, and reap.
    """

    error = FaucetError

    def __init__(
        self,
        graph: nx.MultiGraph,
        run_dir: str | Path,
        ofp_port: int | None = None,
        *,
        root: str | None = None,
        lldp_interval: int | None = None,
        start_timeout: float = 60.0,
        stop_timeout: float = 5.0,
    ) -> None:
        self.graph = graph
        self.run_dir = Path(run_dir).resolve()  # Faucet runs with cwd=run_dir
        self.ofp_port = ofp_port if ofp_port is not None else free_port()
        self.prometheus_port = free_port()
        self.root = root or stack_root(graph)
        self.lldp_interval = lldp_interval
        self.config_path = self.run_dir / "faucet.yaml"
        self.faucet_log_path = self.run_dir / "faucet-log.txt"  # FAUCET_LOG
        self.exception_log_path = self.run_dir / "faucet-exceptions.txt"
        self.stdout_path = self.run_dir / "faucet-stdout.txt"
        super().__init__(
            (),
            self.stdout_path,
            name="faucet",
            cwd=self.run_dir,
            ready=listening_on(self.ofp_port),
            waiting_for=f"listening on {self.ofp_port}",
            start_timeout=start_timeout,
            stop_timeout=stop_timeout,
        )

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.ofp_port)

    def command(self) -> list[str]:
        listen = [f"--ryu-ofp-tcp-listen-port={self.ofp_port}", "--ryu-ofp-listen-host=127.0.0.1"]
        return [str(FAUCET_BIN), *listen]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FAUCET_", "GAUGE_"))}
        env.update(
            PATH=f"{FAUCET_VENV / 'bin'}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
            PYTHONUNBUFFERED="1",
            FAUCET_CONFIG=str(self.config_path),
            FAUCET_LOG=str(self.faucet_log_path),
            FAUCET_EXCEPTION_LOG=str(self.exception_log_path),
            FAUCET_PROMETHEUS_ADDR="127.0.0.1",
            FAUCET_PROMETHEUS_PORT=str(self.prometheus_port),
        )
        env.pop("PYTHONPATH", None)  # Loom's tree must not shadow the Faucet venv's packages
        env.pop("VIRTUAL_ENV", None)
        return env

    def prepare(self) -> None:
        if not FAUCET_BIN.exists():
            raise FaucetError(f"{FAUCET_BIN} is missing: run `make faucet-venv`")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            faucet_config(self.graph, root=self.root, lldp_interval=self.lldp_interval)
        )

    def start(self) -> None:
        super().start()
        assert self.proc is not None
        log.info("faucet: listening on %d (pid %d)", self.ofp_port, self.proc.pid)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        parts = []
        for path in (self.stdout_path, self.faucet_log_path, self.exception_log_path):
            if path.exists() and path.stat().st_size:
                parts.append(f"--- {path}\n{tail(path, lines)}")
        return "\n".join(parts) or "(faucet wrote no log)"

    # ------------------------------------------------------------- state via Prometheus

    def metrics(self, name: str | None = None) -> list[tuple[dict[str, str], float]]:
        """Faucet's Prometheus samples (of metric ``name``) as ``(labels, value)``."""
        url = f"http://127.0.0.1:{self.prometheus_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=2.0) as resp:
                lines = resp.read().decode(errors="replace").splitlines()
        except OSError:
            return []  # not serving yet, or gone: callers poll
        matches = (_METRIC_RE.match(line) for line in lines)
        return [
            (dict(_LABEL_RE.findall(m.group(2))), float(m.group(3)))
            for m in matches
            if m and name in (None, m.group(1))
        ]

    def stack_ports(self) -> dict[tuple[str, int], int]:
        """``(dp name, port) -> stack state`` (3 = UP) for every stack port Faucet reports."""
        return {(x["dp_name"], int(x["port"])): int(v) for x, v in self.metrics("port_stack_state")}

    def stack_changes(self) -> int:
        """Stack port state changes so far, all ports summed. Read it before and after a
        measurement: a change means Faucet re-formed its tree meanwhile (a link failed, or
        LLDP beacons were late: under CPU contention its one eventlet thread can fall 15 s
        behind and drop the whole stack for a few seconds), so the figure is not steady-state.
        """
        return int(sum(v for _x, v in self.metrics("port_stack_state_change_count_total")))

    def root_hop_ports(self) -> dict[str, int]:
        """``dp name -> port towards the stack root`` (the tree, as Faucet computed it)."""
        return {x["dp_name"]: int(v) for x, v in self.metrics("dp_root_hop_port") if v > 0}


# --------------------------------------------------------------------------- readiness


@dataclass
class FaucetReady:
    """How long the fabric took to carry every host pair (``stack_seconds``: all stack
    ports UP, when a :class:`FaucetProcess` was given), and the last pingall."""

    seconds: float
    stack_seconds: float | None
    attempts: int
    pingall: PingAll


def faucet_ready(
    fnet: FabricNet,
    timeout: float = 90.0,
    *,
    faucet: FaucetProcess | None = None,
    ping_timeout: float = 1.0,
) -> FaucetReady:
    """Wait until every host reaches every other one; raise :class:`FaucetError` if not.

    Faucet brings a stack port UP only after LLDP beacons went both ways (it sends them every
    few seconds), and learns hosts from their first packets, so a fabric is usable several
    seconds after the switches connect. With ``faucet`` we first watch its ``port_stack_state``
    metrics until every stack port is UP (cheap), then repeat pingall until 0 % loss.
    """
    t0 = time.monotonic()
    deadline = t0 + timeout
    stack_seconds = None
    if faucet is not None:
        want = 2 * int(switch_graph(fnet.graph).number_of_edges())  # both ends of each link
        while True:
            faucet.check_alive()
            up = sum(1 for s in faucet.stack_ports().values() if s == STACK_STATE_UP)
            if up >= want:
                stack_seconds = time.monotonic() - t0
                log.info("faucet: %d stack ports up after %.1f s", up, stack_seconds)
                break
            if time.monotonic() > deadline:
                raise FaucetError(
                    f"only {up} of {want} stack ports UP after {timeout:.0f} s:\n"
                    + faucet.log_tail()
                )
            time.sleep(1.0)  # each scrape costs Faucet's one thread ~50 ms on a fat-tree
    attempts = 0
    while True:
        attempts += 1
        result = fnet.pingall(timeout=ping_timeout)
        if result.loss_pct == 0.0:
            ready = FaucetReady(time.monotonic() - t0, stack_seconds, attempts, result)
            log.info("faucet: every pair answers after %.1f s (%d tries)", ready.seconds, attempts)
            return ready
        if faucet is not None:
            faucet.check_alive()
        if time.monotonic() > deadline:
            raise FaucetError(
                f"{result.loss_pct:.1f} % pingall loss after {timeout:.0f} s"
                f" ({attempts} tries); failed pairs {result.failed[:10]}"
                + (f"\n{faucet.log_tail()}" if faucet is not None else "")
            )
        time.sleep(0.5)
