"""``loom-job``: register, renew and delete a job from a scheduler's prolog and epilog,
where the node list is known before anything starts on the nodes.

Exit codes are for scripts: 0 done, 2 usage, 3 Loom unreachable or refusing (the reason,
with the key Loom objected to, on stderr). Deleting a job that is not there is success:
an epilog also runs after a prolog that failed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from controller.launcher.client import LoomClient, LoomError, add_api_options, client_from
from controller.launcher.options import MAX_LEASE, add_share_options, parse_hosts

LOOM_FAILED = 3


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="loom-job",
        description="Register, renew or delete a collective job on Loom, or ask for the "
        "rank order Loom advises for a set of hosts.",
    )
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    register = sub.add_parser("register", help="register a job (hosts in rank order)")
    register.add_argument("--tenant", required=True)
    register.add_argument("--job", required=True, help="the job's name")
    register.add_argument("--hosts", required=True, metavar="IP,IP,...")
    register.add_argument("--pattern", choices=("ring", "all_to_all"), default="ring")
    register.add_argument(
        "--ring-direction", choices=("forward", "backward", "both"), default="forward"
    )
    add_share_options(register)
    lease = register.add_mutually_exclusive_group()
    lease.add_argument(
        "--lease",
        type=int,
        metavar="S",
        help="Loom deletes the job unless renewed within S seconds (loom-job renew)",
    )
    lease.add_argument(
        "--no-lease",
        dest="lease",
        action="store_const",
        const=None,
        help="the job stays until deleted (the default: an epilog deletes it)",
    )
    register.add_argument(
        "--order", action="store_true", help="register the hosts in the order Loom advises"
    )
    for action, text in (("renew", "renew a job's lease"), ("delete", "delete a job")):
        sub.add_parser(action, help=text).add_argument("--job", required=True)
    order = sub.add_parser("order", help="print the rank order Loom advises for these hosts")
    order.add_argument("--hosts", required=True, metavar="IP,IP,...")
    for parser in sub.choices.values():
        add_api_options(parser)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    client = client_from(args, os.environ, parser)
    hosts = list(parse_hosts(args.hosts, parser.error)) if getattr(args, "hosts", None) else []
    lease = getattr(args, "lease", None)
    if lease is not None and not 1 <= lease <= MAX_LEASE:
        parser.error(f"--lease: expected 1 to {MAX_LEASE} seconds, got {lease}")
    try:
        if args.action == "register":
            register(client, args, hosts)
        elif args.action == "renew":
            answer = client.renew(args.job)
            print(f"job {args.job}: lease renewed, expires in {answer.get('expires_in')} s")
        elif args.action == "delete":
            delete(client, args.job)
        else:
            advice = client.order(hosts)
            warn_unknown(advice.unknown)
            print(",".join(advice.hosts))
    except LoomError as exc:
        print(f"loom-job: {exc}", file=sys.stderr)
        return LOOM_FAILED
    return 0


def register(client: LoomClient, args: argparse.Namespace, hosts: list[str]) -> None:
    if args.order:
        advice = client.order(hosts)
        warn_unknown(advice.unknown)
        hosts = advice.hosts
    body: dict[str, object] = {
        "name": args.job,
        "tenant": args.tenant,
        "hosts": hosts,
        "pattern": args.pattern,
        "ring_direction": args.ring_direction,
        "traffic_class": "collective",
        "priority": args.priority,
        "weight": args.weight,
    }
    if args.lease is not None:
        body["lease_seconds"] = args.lease
    job = client.register(body)
    lease = f", lease {args.lease} s" if args.lease is not None else ""
    ranked = ",".join(str(h) for h in job.get("hosts", hosts))
    print(f"job {args.job} ({args.tenant}): {job.get('status')}{lease}; rank order {ranked}")


def delete(client: LoomClient, name: str) -> None:
    try:
        client.delete(name)
    except LoomError as exc:
        if exc.status != 404:
            raise
        print(f"job {name}: not on Loom, nothing to delete")
        return
    print(f"job {name}: deleted")


def warn_unknown(unknown: list[str]) -> None:
    if unknown:
        print(f"loom-job: Loom has not learned {', '.join(unknown)}: ranked last", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
