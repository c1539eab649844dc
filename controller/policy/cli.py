"""``loom-check POLICY...``: validate policy files; exit 0 when all are valid, 1 if not."""

from __future__ import annotations

import argparse
import sys

from controller.policy.loader import PolicyError, load_policy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="loom-check", description=__doc__)
    parser.add_argument("policy", nargs="+", help="policy YAML file(s)")
    args = parser.parse_args(argv)
    status = 0
    for path in args.policy:
        try:
            policy = load_policy(path)
        except PolicyError as err:
            print(err, file=sys.stderr)
            print(
                f"{path}: invalid ({len(err.issues)} problem{'s' if len(err.issues) != 1 else ''})",
                file=sys.stderr,
            )
            status = 1
            continue
        hosts = sum(len(t.hosts) for t in policy.tenants)
        print(
            f"{path}: ok: {len(policy.tenants)} tenants, {hosts} hosts, {len(policy.jobs)} jobs, "
            f"{len(policy.servers)} servers; "
            f"hosts in no tenant: {policy.fabric.unassigned_hosts}"
        )
    return status


if __name__ == "__main__":
    raise SystemExit(main())
