"""``loom-run``'s options: flags first, then what a scheduler (Slurm) or a torchrun-style
launcher put in the environment, so one command line serves ``srun``, batch scripts and
a shell alike. Pure: the environment is passed in."""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn

from controller.joblimits import MAX_PRIORITY, MAX_WEIGHT
from controller.launcher.client import LoomClient, add_api_options, client_from

DEFAULT_RDZV_PORT = 29500  # torchrun's default master port
MAX_LEASE = 86400
_Failer = Callable[[str], NoReturn]  # reports a usage error and exits 2


@dataclass(frozen=True)
class RunOptions:
    tenant: str
    job: str | None  # None: node rank 0 names it
    pattern: str
    ring_direction: str
    priority: int
    weight: int
    lease: int
    nnodes: int
    node_rank: int
    rdzv_host: str | None
    store_port: int
    address: str | None  # None: found towards the rendezvous host
    hosts: tuple[str, ...] | None  # given up front: no rendezvous
    order: bool
    strict: bool
    rdzv_timeout: float
    active_timeout: float
    command: tuple[str, ...]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="loom-run",
        usage="loom-run --tenant T [options] -- COMMAND [ARGS...]",
        description="Register a training job with Loom in a topology-aware rank order, run "
        "COMMAND with LOOM_RANK, LOOM_WORLD_SIZE, LOOM_HOSTS, LOOM_MASTER and LOOM_JOB set "
        "({loom_rank}, {loom_world_size}, {loom_master}, {loom_job} in ARGS replaced), keep "
        "the job's lease alive while it runs and delete the job when it ends.",
    )
    p.add_argument("--tenant", required=True, help="the tenant the job runs as")
    p.add_argument("--job", help="the job's name (default: slurm-$SLURM_JOB_ID, else generated)")
    add_api_options(p)
    p.add_argument("--pattern", choices=("ring", "all_to_all"), default="ring")
    p.add_argument("--ring-direction", choices=("forward", "backward", "both"), default="forward")
    add_share_options(p)
    p.add_argument(
        "--lease",
        type=int,
        default=30,
        metavar="S",
        help="seconds Loom keeps the job without a renewal (renewed every S/3 s; default 30)",
    )
    p.add_argument("--nnodes", help="nodes in the job (default: $SLURM_NNODES, $WORLD_SIZE, 1)")
    p.add_argument("--node-rank", help="this node's rank (default: $SLURM_NODEID, $NODE_RANK, 0)")
    p.add_argument(
        "--rdzv-endpoint",
        metavar="HOST[:PORT]",
        help="where node rank 0 is reached (default: $MASTER_ADDR[:$MASTER_PORT])",
    )
    p.add_argument(
        "--store-port",
        type=int,
        help="the port of the address exchange on node rank 0 (default: the endpoint's + 1)",
    )
    p.add_argument("--address", help="this node's fabric IPv4 address (default: found)")
    p.add_argument("--hosts", metavar="IP,IP,...", help="every node's address: no rendezvous")
    p.add_argument(
        "--no-order",
        dest="order",
        action="store_false",
        help="keep node-rank order instead of asking Loom for a topology-aware one",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 3 instead of running the command when Loom is unreachable or refuses",
    )
    p.add_argument(
        "--rdzv-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds nodes wait for one another (default 300)",
    )
    p.add_argument(
        "--active-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds to wait for Loom to place the job (default 30)",
    )
    return p


def add_share_options(parser: argparse.ArgumentParser) -> None:
    """``--priority`` and ``--weight``: how the job fares against others (the API's keys)."""
    parser.add_argument(
        "--priority",
        type=_ranged("--priority", 0, MAX_PRIORITY),
        default=0,
        help=f"0-{MAX_PRIORITY}: placed first, a higher collective queue (default 0)",
    )
    parser.add_argument(
        "--weight",
        type=_ranged("--weight", 1, MAX_WEIGHT),
        default=1,
        help=f"1-{MAX_WEIGHT}: its share of the links jobs must share (default 1)",
    )


def _ranged(flag: str, low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected a whole number {low}-{high}, got {text!r}")
        return value

    parse.__name__ = flag  # argparse names the type in its message
    return parse


def parse_run(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[RunOptions, LoomClient]:
    """The options and the API client; a usage error exits 2 with its reason."""
    parser = build_parser()
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    command = tuple(argv[cut + 1 :])
    if not command:
        parser.error("expected -- COMMAND [ARGS...] after the options")
    fail = parser.error
    hosts = parse_hosts(args.hosts, fail) if args.hosts else None
    nnodes = _whole(args.nnodes, "--nnodes", fail)
    if hosts is not None:
        if nnodes is not None and nnodes != len(hosts):
            fail(f"--nnodes {nnodes} but --hosts lists {len(hosts)} addresses")
        nnodes = len(hosts)
    if nnodes is None:
        nnodes = _from_env(environ, ("SLURM_NNODES", "WORLD_SIZE"), fail) or 1
    if nnodes < 1:
        fail("--nnodes: expected 1 or more nodes")
    node_rank = _whole(args.node_rank, "--node-rank", fail)
    if node_rank is None:
        node_rank = _from_env(environ, ("SLURM_NODEID", "NODE_RANK"), fail) or 0
    if not 0 <= node_rank < nnodes:
        fail(f"node rank {node_rank} is not in 0..{nnodes - 1} ({nnodes} nodes)")
    rdzv_host, rdzv_port = _endpoint(args.rdzv_endpoint, environ, fail)
    job = args.job or (f"slurm-{environ['SLURM_JOB_ID']}" if environ.get("SLURM_JOB_ID") else None)
    if hosts is not None and node_rank > 0 and job is None:
        fail("--hosts on node ranks above 0 needs --job (or $SLURM_JOB_ID): the job to follow")
    if nnodes > 1 and hosts is None and rdzv_host is None:
        fail(f"{nnodes} nodes: --rdzv-endpoint (or $MASTER_ADDR) or --hosts is needed")
    store_port = args.store_port if args.store_port is not None else rdzv_port + 1
    if not 0 < store_port < 65536:
        fail(f"--store-port: {store_port} is not a TCP port")
    address = parse_ipv4(args.address, "--address", fail) if args.address else None
    if hosts is not None and address is not None and address not in hosts:
        fail(f"--address {address} is not one of --hosts")
    if not 1 <= args.lease <= MAX_LEASE:
        fail(f"--lease: expected 1 to {MAX_LEASE} seconds, got {args.lease}")
    if args.rdzv_timeout <= 0 or args.active_timeout <= 0:
        fail("--rdzv-timeout and --active-timeout must be positive")
    options = RunOptions(
        tenant=args.tenant,
        job=job,
        pattern=args.pattern,
        ring_direction=args.ring_direction,
        priority=args.priority,
        weight=args.weight,
        lease=args.lease,
        nnodes=nnodes,
        node_rank=node_rank,
        rdzv_host=rdzv_host,
        store_port=store_port,
        address=address,
        hosts=hosts,
        order=args.order,
        strict=args.strict,
        rdzv_timeout=args.rdzv_timeout,
        active_timeout=args.active_timeout,
        command=command,
    )
    return options, client_from(args, environ, parser)


def _whole(text: str | None, what: str, fail: _Failer) -> int | None:
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        fail(f"{what}: expected a whole number, got {text!r}")
    return value


def _from_env(environ: Mapping[str, str], names: tuple[str, ...], fail: _Failer) -> int | None:
    for name in names:
        if environ.get(name):
            return _whole(environ[name], f"${name}", fail)
    return None


def _endpoint(
    given: str | None, environ: Mapping[str, str], fail: _Failer
) -> tuple[str | None, int]:
    """HOST and PORT of the rendezvous, from ``--rdzv-endpoint`` or MASTER_ADDR/PORT."""
    if given:
        host, colon, port = given.rpartition(":")
        if not colon:
            host, port = given, ""
    else:
        host, port = environ.get("MASTER_ADDR", ""), environ.get("MASTER_PORT", "")
    if not port:
        return host or None, DEFAULT_RDZV_PORT
    number = _whole(port, "rendezvous port", fail)
    if number is None or not 0 < number < 65535:
        fail(f"rendezvous port: {port!r} is not a TCP port below 65535")
    return host or None, number


def parse_ipv4(text: str, what: str, fail: _Failer) -> str:
    try:
        if ipaddress.ip_address(text).version == 4:
            return text
    except ValueError:
        pass
    fail(f"{what}: {text!r} is not an IPv4 address")


def parse_hosts(text: str, fail: _Failer) -> tuple[str, ...]:
    hosts = tuple(parse_ipv4(h.strip(), "--hosts", fail) for h in text.split(",") if h.strip())
    repeated = sorted({h for h in hosts if hosts.count(h) > 1})
    if repeated:
        fail(f"--hosts: {', '.join(repeated)} appears more than once; one address per node")
    if not hosts:
        fail("--hosts: expected IPv4 addresses separated by commas")
    return hosts
