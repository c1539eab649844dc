"""One Loom instance in a cluster: its lease, its switch claims, its peers' deaths.

The node keeps a lease in etcd (refreshed every ``KEEPALIVE`` s), advertises the switches
it is connected to, and reads the cluster's keys every ``POLL`` s. From each new revision
it claims, confirms and releases switches (``mastership.steps``) and hands the shared
state (jobs, policy) to ``SharedState``. A master that cannot renew its lease stops
writing (``Roles.fresh_until``) before the store could give its switches to another.

An instance killed outright stops answering on its OpenFlow port at once, while its lease
would live on for ``ttl`` seconds: peers probe each other's port, and a refused connection
(the host answered, the port is closed) lets them revoke the dead instance's lease, so its
switches move within a few polls instead of a lease TTL. A peer that is cut off (no
answer at all) is left to its lease: it may still be alive and masters until then.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from controller.cluster.etcd import EtcdClient, Snapshot, StoreUnavailable
from controller.cluster.mastership import (
    MEMBERS,
    View,
    claim_key,
    claim_value,
    steps,
)
from controller.cluster.roles import Roles

log = logging.getLogger("loom.cluster")
POLL = 0.1  # seconds between two reads of the cluster's keys
KEEPALIVE = 0.3  # seconds between lease renewals
TTL = 2  # lease time-to-live, seconds (etcd counts whole seconds)
MARGIN = 0.5  # stop writing this long before the lease could have expired
PROBE_TIMEOUT = 0.2
REFUSALS = 2  # refused probes in a row that prove a peer dead


class Switches(Protocol):
    """What the node asks of the OpenFlow side."""

    def connected(self) -> list[int]: ...

    def ready(self) -> bool: ...

    def request_role(self, dpid: int, master: bool, generation: int) -> None: ...

    def take_over(self, dpid: int) -> None: ...


class Shared(Protocol):
    def apply(self, now: float, snapshot: Snapshot) -> None: ...


@dataclass
class NodeStatus:
    store_up: bool = False
    view: View = field(default_factory=lambda: View(0))
    changes: Counter[str] = field(default_factory=Counter)  # gained / lost / released
    raft_term: int = 0
    term_changes: int = 0


class ClusterNode:
    def __init__(
        self,
        client: EtcdClient,
        prefix: str,
        me: str,
        roles: Roles,
        switches: Switches,
        shared: Shared | None = None,
        probe: str = "",
        api: str = "",
    ) -> None:
        self.client, self.prefix, self.me = client, prefix, me
        self.roles, self.switches, self.shared = roles, switches, shared
        self.probe, self.api = probe, api
        self.lease = 0
        self.advertised: tuple[tuple[int, ...], bool] | None = None
        self.status = NodeStatus()
        self._last_keepalive = -1e9
        self.newest_claim: dict[int, int] = {}  # dpid -> newest claim generation seen
        self._acted_on: tuple[object, ...] = ()
        self._refusals: Counter[str] = Counter()

    # -- lease ---------------------------------------------------------------------
    def _register(self, now: float) -> None:
        self.lease = self.client.lease_grant(TTL)
        self.roles.fresh_until = now + TTL - MARGIN
        self._last_keepalive = now
        self.advertised = None
        log.info("cluster member %s joined with lease %x", self.me, self.lease)

    def _advertise(self) -> None:
        linked = tuple(sorted(self.switches.connected()))
        ready = self.switches.ready()
        if (linked, ready) == self.advertised:
            return
        body = {"probe": self.probe, "api": self.api, "switches": list(linked), "ready": ready}
        self.client.put(f"{self.prefix}{MEMBERS}{self.me}", json.dumps(body).encode(), self.lease)
        self.advertised = (linked, ready)

    def _keepalive(self, now: float) -> None:
        if now - self._last_keepalive < KEEPALIVE:
            return
        was_fenced = self.roles.fenced(now)
        if self.client.lease_keepalive(self.lease) <= 0:
            log.warning("cluster member %s: lease %x expired; joining again", self.me, self.lease)
            for dpid in list(self.roles.held()):
                self._drop(dpid, "lost")
            self.lease = 0
            return
        self._last_keepalive = now
        self.roles.fresh_until = now + TTL - MARGIN
        if was_fenced:  # writes were dropped meanwhile: read each switch back
            for dpid in self.roles.masters():
                self.switches.take_over(dpid)

    # -- one round -----------------------------------------------------------------
    def step(self, now: float) -> None:
        """Renew, advertise, read the keys and act on them; ``StoreUnavailable`` leaves
        everything as it is (the lease fences writes if it lasts)."""
        try:
            if not self.lease:
                self._register(now)
            self._keepalive(now)
            if not self.lease:
                return
            self._advertise()
            snapshot = self.client.get_prefix(self.prefix)
            self._read(now, snapshot)
        except StoreUnavailable as exc:
            if self.status.store_up:
                log.error("cluster store unavailable: %s", exc)
            self.status.store_up = False

    def _read(self, now: float, snapshot: Snapshot) -> None:
        if not self.status.store_up:
            log.info("cluster store reachable (revision %d)", snapshot.revision)
        self.status.store_up = True
        if snapshot.raft_term != self.status.raft_term:
            self.status.term_changes += self.status.raft_term != 0
            self.status.raft_term = snapshot.raft_term
        view = View.parse(snapshot, self.prefix)
        self.status.view = view
        for dpid, claim in view.masters.items():
            if claim.generation > self.newest_claim.get(dpid, 0):
                self.newest_claim[dpid] = claim.generation
        self._act(view)
        if self.shared is not None:
            self.shared.apply(now, snapshot)

    def _act(self, view: View) -> None:
        held = {d: self.roles.generation.get(d, 0) for d in self.roles.held()}
        linked = self.switches.connected()
        inputs = (view.revision, self.lease, tuple(linked), tuple(sorted(held.items())))
        if inputs == self._acted_on:  # the same revision, switches and holdings: no steps
            return
        todo = steps(view, self.me, self.lease, linked, held)
        for dpid in todo.lost:
            self._drop(dpid, "lost")
        for dpid in todo.release:
            self._drop(dpid, "released")
            self.client.delete_if_value(
                claim_key(self.prefix, dpid), claim_value(self.me, self.lease)
            )
        for dpid, generation in todo.confirm:
            self._claimed(dpid, generation)
        for dpid in todo.claim:
            key, value = claim_key(self.prefix, dpid), claim_value(self.me, self.lease)
            won = self.client.create(key, value, self.lease)
            if won is not None:
                self._claimed(dpid, won)
        self._acted_on = inputs  # (not before: a step the store refused is tried again)

    def _claimed(self, dpid: int, generation: int) -> None:
        self.roles.claim(dpid, generation)
        self.switches.request_role(dpid, True, generation)

    def _drop(self, dpid: int, why: str) -> None:
        if self.roles.release(dpid):
            self.status.changes[why] += 1
            log.info("cluster member %s: switch %016x %s", self.me, dpid, why)

    def role_replied(self, dpid: int, master: bool, generation: int) -> None:
        if self.roles.replied(dpid, master, generation):
            self.status.changes["gained"] += 1
            log.info(
                "cluster member %s masters switch %016x (generation %d)", self.me, dpid, generation
            )
            self.switches.take_over(dpid)

    def slave_generation(self, dpid: int) -> int:
        """A slave's generation id: the newest claim on the switch known here, never
        more. A switch keeps the largest generation it has seen from anyone, so a slave
        asking with a newer revision would make its master's next claim look stale."""
        return self.newest_claim.get(dpid, 0)

    def refused(self, dpid: int) -> None:
        """The switch refused our role (a newer generation reached it) or a write as a
        slave's (another is master): give the claim up, so that a fresh one (a newer
        revision) can be made by whoever the shares then name."""
        self._drop(dpid, "lost")
        with contextlib.suppress(StoreUnavailable):
            self.client.delete_if_value(
                claim_key(self.prefix, dpid), claim_value(self.me, self.lease)
            )

    # -- peers -----------------------------------------------------------------------
    def probe_peers(self, connect: Callable[[str], bool | None] | None = None) -> None:
        """Revoke the lease of a peer whose probe port refuses connections."""
        connect = connect or refused
        for member in self.status.view.members.values():
            if member.id == self.me or not member.probe:
                continue
            if connect(member.probe):
                self._refusals[member.id] += 1
            else:
                self._refusals[member.id] = 0
            if self._refusals[member.id] == REFUSALS:
                log.warning("cluster member %s is gone (connection refused): revoking", member.id)
                try:
                    self.client.lease_revoke(member.lease)
                except StoreUnavailable:
                    self._refusals[member.id] = 0


def refused(address: str) -> bool:
    """True when HOST:PORT actively refuses a connection (nothing listens there)."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT).close()
    except ConnectionRefusedError:
        return True
    except OSError as exc:
        return exc.errno == errno.ECONNREFUSED
    return False
