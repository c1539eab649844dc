"""How the nodes of a job learn one another's addresses and the rank order Loom advised.

Node rank 0 hosts a ``torch.distributed.TCPStore`` (the store torchrun's own rendezvous
rests on, so no new protocol and no new port rules beyond the next port); every node puts
its address there, node rank 0 decides the order and whether Loom took the job, and
publishes that ``Plan``; no node starts its command before node rank 0 has it registered.
"""

from __future__ import annotations

import importlib
import json
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

ADDRESS_KEY = "loom/address/{}"
PLAN_KEY = "loom/plan"
HAS_PLAN_KEY = "loom/has-plan/{}"


class RendezvousError(Exception):
    """The nodes could not meet: no store, a timeout, or PyTorch missing."""


def source_address(host: str, port: int = 9) -> str:
    """The IPv4 address the kernel sends from towards ``host``, the one peers see.
    Connecting a UDP socket picks the route and sends nothing."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, port))
            return str(probe.getsockname()[0])
    except OSError as exc:
        raise RendezvousError(
            f"cannot find this node's address towards {host}: {exc.strerror or exc}; pass --address"
        ) from None


@dataclass(frozen=True)
class Plan:
    """What node rank 0 decided, the same for every node."""

    job: str
    hosts: tuple[str, ...]  # every node's address, in rank order
    registered: bool  # Loom holds the job (its lease renewed by node rank 0)
    exit_code: int | None = None  # set: every node stops with it instead of running
    message: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "job": self.job,
                "hosts": list(self.hosts),
                "registered": self.registered,
                "exit_code": self.exit_code,
                "message": self.message,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Plan:
        data = json.loads(text)
        return cls(
            str(data["job"]),
            tuple(str(h) for h in data["hosts"]),
            bool(data["registered"]),
            None if data["exit_code"] is None else int(data["exit_code"]),
            str(data["message"]),
        )


class Exchange:
    """One job's TCPStore: hosted by node rank 0, joined by the others."""

    def __init__(self, host: str, port: int, nnodes: int, node_rank: int, timeout: float) -> None:
        self.nnodes = nnodes
        self.node_rank = node_rank
        self.timeout = timedelta(seconds=timeout)
        where = f"{host}:{port}"
        try:
            dist: Any = importlib.import_module("torch.distributed")
        except ImportError:
            raise RendezvousError(
                "gathering the nodes' addresses needs PyTorch (torch.distributed.TCPStore); "
                "install it, or give every address with --hosts"
            ) from None
        try:
            self.store: Any = dist.TCPStore(
                host,
                port,
                nnodes,
                node_rank == 0,
                self.timeout,
                wait_for_workers=False,
            )
        except Exception as exc:  # torch raises RuntimeError and its subclasses
            verb = "host" if node_rank == 0 else "reach"
            raise RendezvousError(f"cannot {verb} the address exchange at {where}: {exc}") from None

    def gather(self, address: str) -> list[str]:
        """Every node's address in node-rank order (node rank 0); others just give theirs."""
        self._do(lambda: self.store.set(ADDRESS_KEY.format(self.node_rank), address), "sharing")
        if self.node_rank != 0:
            return []
        keys = [ADDRESS_KEY.format(r) for r in range(self.nnodes)]
        self._do(lambda: self.store.wait(keys, self.timeout), "waiting for every node's address")
        values = self._do(lambda: [self.store.get(k) for k in keys], "reading the addresses")
        return [bytes(v).decode() for v in values]

    def publish(self, plan: Plan) -> bool:
        """Node rank 0: hand the plan out; True once every node has it (bounded)."""
        self._do(lambda: self.store.set(PLAN_KEY, plan.to_json()), "publishing the plan")
        keys = [HAS_PLAN_KEY.format(r) for r in range(1, self.nnodes)]
        try:
            self.store.wait(keys, self.timeout)
        except Exception:
            return False
        return True

    def receive(self) -> Plan:
        """Other node ranks: the plan, once node rank 0 has published it."""
        self._do(lambda: self.store.wait([PLAN_KEY], self.timeout), "waiting for node rank 0")
        plan = Plan.from_json(self._do(lambda: self.store.get(PLAN_KEY), "reading").decode())
        self._do(lambda: self.store.set(HAS_PLAN_KEY.format(self.node_rank), "1"), "confirming")
        return plan

    def _do(self, step: Callable[[], Any], what: str) -> Any:
        try:
            return step()
        except Exception as exc:  # a timeout or a lost store, as torch reports it
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise RendezvousError(
                f"address exchange ({what}, node rank {self.node_rank} of {self.nnodes}): {first}"
            ) from None
