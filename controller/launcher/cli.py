"""``loom-run``: register a training job with Loom before its first collective, run it,
delete it when it ends.

NCCL and torchrun rank nodes without knowing the fabric, and Loom can place a job's ring
hops apart only once it knows the job. So on every node ``loom-run`` finds the node's
address, node rank 0 gathers them (``rendezvous``), asks Loom for a topology-aware rank
order, registers the job in that order with a lease, and only then does any node start
its command, told its rank. Node rank 0 renews the lease while the command runs and
deletes the job when it ends; if it dies instead, the lease runs out and Loom deletes it.
Loom being down never stops training unless ``--strict`` says so.
"""

from __future__ import annotations

import os
import secrets
import sys
import threading
from collections.abc import Sequence

from controller.launcher.child import CommandError, Interrupted, Placement, Supervisor
from controller.launcher.client import ACTIVE, LoomClient, LoomError, monotonic
from controller.launcher.lease import LeaseKeeper
from controller.launcher.options import RunOptions, parse_run
from controller.launcher.rendezvous import Exchange, Plan, RendezvousError, source_address

LOOM_FAILED = 3  # --strict, and Loom unreachable or refusing
RENDEZVOUS_FAILED = 4  # the nodes could not meet
LOOPBACK = "127.0.0.1"


def say(message: str) -> None:
    print(f"loom-run: {message}", file=sys.stderr, flush=True)


class NotPlaced(Exception):
    """Loom took the job but has not placed it within ``--active-timeout``."""


class Launch:
    """One node's run: meet the others, agree on the plan, run the command, clean up."""

    def __init__(self, options: RunOptions, client: LoomClient, supervisor: Supervisor) -> None:
        self.options = options
        self.client = client
        self.supervisor = supervisor
        self.registered: str | None = None  # the job this node registered, to delete
        self.keeper: LeaseKeeper | None = None
        self.exchange: Exchange | None = None  # node rank 0 hosts it: kept to the end

    def run(self) -> int:
        try:
            try:
                address, plan = self._meet()
            except RendezvousError as exc:
                say(str(exc))
                return RENDEZVOUS_FAILED
            if plan.exit_code is not None:
                if self.options.node_rank != 0:
                    say(f"node rank 0: {plan.message}")
                return plan.exit_code
            rank = plan.hosts.index(address) if address in plan.hosts else self.options.node_rank
            placement = Placement(plan.job, plan.hosts, rank)
            environ = {**os.environ, **placement.environment()}
            try:
                return self.supervisor.run(placement.substitute(self.options.command), environ)
            except CommandError as exc:
                say(str(exc))
                return exc.status
        finally:
            self._withdraw()

    # -- meeting the other nodes ----------------------------------------------------------
    def _meet(self) -> tuple[str, Plan]:
        o = self.options
        if o.hosts is not None:
            address = o.address or o.hosts[o.node_rank]
        elif o.address:
            address = o.address
        elif o.rdzv_host:
            address = source_address(o.rdzv_host, o.store_port)
        else:
            address = LOOPBACK
        if o.nnodes == 1:  # no fabric traffic between nodes: nothing for Loom to place
            return address, Plan(self._job_name(), (address,), False)
        if o.hosts is not None:
            if o.node_rank == 0:
                return address, self._decide(list(o.hosts))
            return address, self._follow(o.hosts)
        assert o.rdzv_host is not None  # parse_run insists on it
        self.exchange = Exchange(o.rdzv_host, o.store_port, o.nnodes, o.node_rank, o.rdzv_timeout)
        addresses = self.exchange.gather(address)
        if o.node_rank != 0:
            return address, self.exchange.receive()
        plan = self._decide(addresses)
        if not self.exchange.publish(plan):
            say(f"not every node took the plan within {o.rdzv_timeout:g} s; starting anyway")
        return address, plan

    def _job_name(self) -> str:
        return self.options.job or f"run-{secrets.token_hex(4)}"

    # -- node rank 0: order, register, wait ---------------------------------------------
    def _decide(self, addresses: list[str]) -> Plan:
        """Node rank 0's plan: the rank order and whether Loom holds the job."""
        name = self._job_name()
        given = tuple(addresses)
        repeated = sorted({a for a in addresses if addresses.count(a) > 1})
        if repeated:
            ranks = [r for r, a in enumerate(addresses) if a == repeated[0]]
            message = (
                f"node ranks {', '.join(map(str, ranks))} all report address {repeated[0]}; "
                "give each node its fabric address with --address"
            )
            say(message)
            return Plan(name, given, False, exit_code=2, message=message)
        order = given
        if self.options.order:
            try:
                order = self._advised(addresses)
            except LoomError as exc:
                if exc.unreachable:
                    return self._without_loom(name, given, str(exc))
                say(f"{exc}; keeping node-rank order")
        try:
            self._register(name, order)
        except (LoomError, NotPlaced) as exc:
            if self.registered is None and self.options.hosts is not None:
                order = given  # the other nodes fall back to the order they were given
            return self._without_loom(name, order, str(exc))
        return Plan(name, order, True)

    def _advised(self, addresses: list[str]) -> tuple[str, ...]:
        advice = self.client.order(addresses)
        if sorted(advice.hosts) != sorted(addresses):
            say(f"Loom's order {advice.hosts} is not of the hosts asked about; not using it")
            return tuple(addresses)
        if advice.unknown:
            say(f"Loom has not learned {', '.join(advice.unknown)} yet: ranked last")
        return tuple(advice.hosts)

    def _register(self, name: str, order: tuple[str, ...]) -> None:
        o = self.options
        job = self.client.register(
            {
                "name": name,
                "tenant": o.tenant,
                "hosts": list(order),
                "pattern": o.pattern,
                "ring_direction": o.ring_direction,
                "traffic_class": "collective",
                "priority": o.priority,
                "weight": o.weight,
                "lease_seconds": o.lease,
            }
        )
        self.registered = name
        self.keeper = LeaseKeeper(self.client, name, o.lease, say).start()
        if job.get("status") != ACTIVE:
            job = self.client.wait_active(name, o.active_timeout)
        if job.get("status") != ACTIVE:
            raise NotPlaced(
                f"job {name} is registered but not placed after {o.active_timeout:g} s: "
                f"{job.get('status')}"
            )
        say(f"job {name} active on Loom: {len(order)} hosts, lease {o.lease} s")

    def _without_loom(self, name: str, order: tuple[str, ...], problem: str) -> Plan:
        if self.options.strict:
            message = f"{problem}; --strict: not running the command"
            say(message)
            return Plan(name, order, False, exit_code=LOOM_FAILED, message=message)
        held = "with the job registered" if self.registered else "without Loom"
        say(f"{problem}; running the command {held} (--strict stops instead)")
        return Plan(name, order, self.registered is not None)

    # -- other node ranks given --hosts: the job as node rank 0 registered it -------------
    def _follow(self, given: tuple[str, ...]) -> Plan:
        name = self.options.job
        assert name is not None  # parse_run insists on it
        deadline = monotonic() + self.options.active_timeout
        pause = threading.Event()
        order = given  # node rank 0's order once the job shows up (placed or not)
        while True:
            try:
                job = self.client.job(name)
            except LoomError as exc:
                if exc.status != 404:
                    return self._without_loom(name, order, str(exc))
                problem = f"node rank 0 has not registered job {name}"
            else:
                hosts = tuple(str(h) for h in job.get("hosts", []))
                if sorted(hosts) != sorted(given):
                    return self._without_loom(name, given, f"job {name} on Loom has other hosts")
                order = hosts
                if job.get("status") == ACTIVE:
                    return Plan(name, order, True)
                problem = f"job {name} is not placed: {job.get('status')}"
            if monotonic() >= deadline:
                return self._without_loom(
                    name, order, f"{problem} after {self.options.active_timeout:g} s"
                )
            pause.wait(0.2)

    # -- the end ----------------------------------------------------------------------------
    def _withdraw(self) -> None:
        """Stop renewing and delete the job this node registered (gone already is fine)."""
        if self.keeper is not None:
            self.keeper.stop()
        if self.registered is None:
            return
        try:
            self.client.delete(self.registered)
        except LoomError as exc:
            if exc.status != 404:
                say(f"{exc}; the lease expires it in {self.options.lease} s")
        self.registered = None


def main(argv: Sequence[str] | None = None) -> int:
    options, client = parse_run(sys.argv[1:] if argv is None else argv, os.environ)
    try:
        with Supervisor() as supervisor:
            return Launch(options, client, supervisor).run()
    except Interrupted as exc:
        say(f"{exc} before the command started: stopped")
        return 128 + exc.signum


if __name__ == "__main__":
    sys.exit(main())
