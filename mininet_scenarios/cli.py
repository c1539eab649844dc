"""``loom-scenario SPEC``: a Loom topology as a running Mininet network, for people.

Examples::

    loom-scenario fat_tree:k=4 --start-controller --cmd pingall
    loom-scenario leaf_spine:leaves=4,spines=2 --controller 127.0.0.1:6653 --cli
    loom-scenario lab.yaml --rate 5 --queues --cmd "h1 ping -c1 h2" --cmd "iperf h1 h4"
    loom-scenario rail_optimized:servers=4,nics=4,spines=2 --start-controller

A fabric of GPU servers (``rail_optimized``) is built with one namespace per server and an
interface per NIC (``mininet_scenarios.harness.servers``), and a started controller is told
the servers (``--policy`` overrides).

Builds ``topologies.by_name(SPEC)``, optionally starts the controller (a ryu-manager child),
starts the fabric, waits for the switches to connect, then opens Mininet's CLI or runs the
given CLI commands, and cleans up on every path (Ctrl-C and SIGTERM included). Exit code:
0 on success, 1 if switches did not connect, 2 for bad arguments, 143 after SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from types import FrameType

import networkx as nx

from mininet_scenarios import emulation_logger
from mininet_scenarios.harness.servers import servers_yaml

log = emulation_logger()


def _parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host or "127.0.0.1", int(port)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="loom-scenario",
        description="Run a Loom topology in Mininet (userspace Open vSwitch, OpenFlow 1.3).",
    )
    p.add_argument(
        "spec",
        help='topology: "fat_tree:k=4", "dragonfly:a=4,p=2,h=2,g=5", '
        '"leaf_spine:leaves=4,spines=2" or a .yaml path',
    )
    p.add_argument(
        "--rate",
        type=float,
        metavar="MBPS",
        help="set every link to this rate (Mbit/s) before shaping",
    )
    ctl = p.add_mutually_exclusive_group()
    ctl.add_argument(
        "--controller",
        type=_parse_address,
        metavar="HOST:PORT",
        help="a running controller (default 127.0.0.1:6653)",
    )
    ctl.add_argument(
        "--start-controller",
        action="store_true",
        help="start ryu-manager with --app on a free port for this run",
    )
    p.add_argument(
        "--app",
        default="controller/app.py",
        help="Ryu app for --start-controller (path or module name)",
    )
    p.add_argument(
        "--policy",
        type=Path,
        metavar="FILE",
        help="tenant policy for --start-controller (LOOM_POLICY); by default a fabric of "
        "GPU servers (rail_optimized) gets one that declares its servers",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--cli", action="store_true", help="open the Mininet CLI (the default)")
    mode.add_argument(
        "--cmd",
        action="append",
        metavar="LINE",
        default=[],
        help='a Mininet CLI command, e.g. "pingall"; repeatable; then exit',
    )
    p.add_argument("--run-dir", type=Path, help="outputs and logs (default /tmp/loom-run-PID)")
    p.add_argument("--no-shape", action="store_true", help="do not shape links with HTB")
    p.add_argument(
        "--queues",
        action="store_true",
        help="HTB with the default DSCP classes (collective/control/bulk)",
    )
    p.add_argument(
        "--queue-packets",
        type=int,
        metavar="N",
        help="limit each HTB leaf queue to N packets (default: 1000, the kernel's)",
    )
    p.add_argument(
        "--connect-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds to wait for all switches to connect (default 60)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="only warnings")
    return p


def load_graph(spec: str) -> nx.MultiGraph:
    """``topologies.by_name(spec)``, imported lazily (it pulls in every generator)."""
    from topologies import by_name

    return by_name(spec)


def set_rate(g: nx.MultiGraph, rate_mbps: float) -> None:
    for _a, _b, d in g.edges(data=True):
        d["rate_mbps"] = float(rate_mbps)


def controller_env(
    policy: Path | None, graph: nx.MultiGraph, run_dir: Path, inherited: Mapping[str, str]
) -> dict[str, str]:
    """``LOOM_POLICY`` for a started controller: ``policy`` if given; else, for a fabric
    of GPU servers and no policy in ``inherited`` (the environment), one that declares
    the servers and lets every host in, so Loom reports servers and rails and answers
    rail-aware orders as it would with a user's policy."""
    if policy is not None:
        return {"LOOM_POLICY": str(policy.resolve())}
    block = servers_yaml(graph)
    if not block or inherited.get("LOOM_POLICY"):
        return {}
    path = run_dir / "policy.yaml"
    path.write_text("version: 1\nfabric: {unassigned_hosts: allow}\n" + block)
    log.info("the GPU servers are declared to the controller in %s", path)
    return {"LOOM_POLICY": str(path)}


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    from mininet_scenarios.harness.network import FabricTerminated

    raise FabricTerminated()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Progress lines on stderr. Not basicConfig: a root handler would print Mininet's own
    # output (it has its own handler and propagates) a second time.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    log.addHandler(handler)
    log.setLevel(logging.WARNING if args.quiet else logging.INFO)
    try:
        return _main(args)
    finally:
        log.removeHandler(handler)


def _main(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        print("loom-scenario: needs root (Mininet, Open vSwitch)", file=sys.stderr)
        return 2
    try:
        graph = load_graph(args.spec)
    except (ValueError, OSError) as exc:
        print(f"loom-scenario: {exc}", file=sys.stderr)
        return 2
    if args.rate is not None:
        if args.rate <= 0:
            print("loom-scenario: --rate must be positive", file=sys.stderr)
            return 2
        set_rate(graph, args.rate)
    run_dir = args.run_dir or Path(tempfile.gettempdir()) / f"loom-run-{os.getpid()}"
    run_dir.mkdir(parents=True, exist_ok=True)
    # SIGTERM unwinds like an exception from here on, so every context below cleans up.
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _run(args, graph, run_dir)
    except KeyboardInterrupt:
        log.warning("interrupted; cleaned up")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace, graph: nx.MultiGraph, run_dir: Path) -> int:
    from mininet_scenarios.harness.controller import ControllerProcess
    from mininet_scenarios.harness.network import FabricNet
    from mininet_scenarios.harness.processes import free_port
    from mininet_scenarios.harness.shaping import DEFAULT_CLASSES
    from mininet_scenarios.workloads.mininet_cli import loom_cli

    with ExitStack() as stack:
        address = args.controller or ("127.0.0.1", 6653)
        if args.start_controller:
            port = free_port()
            env = controller_env(args.policy, graph, run_dir, os.environ)
            log_path = run_dir / "controller.txt"
            ctl = ControllerProcess(args.app, ofp_port=port, env=env, log_path=log_path)
            log.info("starting controller %s on port %d (log %s)", args.app, port, ctl.log_path)
            stack.enter_context(ctl)
            address = ctl.address
        fnet = stack.enter_context(
            FabricNet(
                graph,
                controller=address,
                run_dir=run_dir,
                shape=not args.no_shape,
                queue_classes=DEFAULT_CLASSES if args.queues else None,
                queue_packets=args.queue_packets,
            )
        )
        if not fnet.wait_connected(args.connect_timeout):
            log.error("not all switches connected to %s:%d", *address)
            return 1
        if args.cmd:
            script = run_dir / "commands.mn"
            script.write_text("".join(line.strip() + "\n" for line in args.cmd))
            # While a node command runs, the CLI forwards whatever stdin has to the node: give
            # it a pipe that never becomes readable (a tty is not there in batch runs, and
            # /dev/null is always readable, which makes the CLI spin).
            read_fd, write_fd = os.pipe()
            with os.fdopen(read_fd) as quiet, os.fdopen(write_fd, "w"):
                loom_cli(fnet, stdin=quiet, script=str(script))
        else:
            loom_cli(fnet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
