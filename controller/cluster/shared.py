"""What users put in, kept in etcd so every instance applies the same revision of it.

A job posted to any instance is written to the store first and then applied; every other
instance applies it when it reads the key, and it outlives the instance that took it.
The policy travels the same way: a reload that validates on one instance is published,
and the others check and apply the published text (a text that fails to validate
anywhere changes nothing there). The API token is kept as a SHA-256 digest, so every
instance accepts the same token. What Loom learns (topology, hosts, load, rules) is not
here: every instance learns it from the switches, and a new master reads its switches back.

Keys under the cluster prefix: jobs/NAME (the job's JSON), policy (YAML text),
token (hex digest), secret/lldp (the key that signs discovery frames). A job posted with
``lease_seconds`` is bound to an etcd lease of that TTL, with leases/NAME (the lease id)
beside it: a renewal on any instance keeps it alive, and when nobody renews, etcd deletes
the job on every instance at once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from controller.cluster.etcd import EtcdClient, Snapshot, StoreUnavailable
from controller.conductor import Conductor
from controller.jobspec import JobError, parse_job, split_lease
from controller.model import Messages
from controller.policy.manager import PolicyManager

log = logging.getLogger("loom.cluster")
JOBS, POLICY, TOKEN, LLDP_SECRET = "jobs/", "policy", "token", "secret/lldp"
LEASES = "leases/"
NO_QUORUM = (
    "the cluster store (etcd) is unavailable or has no quorum; changes are refused until "
    "it returns, and nothing was changed"
)


class SharedState:
    def __init__(
        self,
        client: EtcdClient,
        prefix: str,
        fabric: Conductor,
        send: Callable[[Messages], None],
        policy: PolicyManager | None = None,
    ) -> None:
        self.client, self.prefix, self.fabric, self.send = client, prefix, fabric, send
        self.policy = policy
        self.revision = 0  # the store revision whose state is applied here
        self.jobs: dict[str, int] = {}  # job name -> revision of its key, applied here
        # Jobs this instance is writing to the store: a sync that runs while the write
        # waits on etcd leaves them alone (it would apply the job before its own handler
        # does, which then finds the name taken).
        self._writing: set[str] = set()
        # Jobs this instance withdrew, by the store revision of the delete: a snapshot
        # read before it (a sync that was waiting on etcd) must not bring them back.
        self._withdrawn: dict[str, int] = {}
        self.leases: dict[str, float] = {}  # job name -> its lease's TTL, seconds
        self._lease_ids: dict[str, int] = {}
        self.policy_revision = 0
        self.token_digest = ""
        self._cache = Path(tempfile.mkdtemp(prefix="loom-cluster-"))

    # -- start ---------------------------------------------------------------------
    def secret(self) -> bytes:
        """The cluster's discovery key: created by the first instance, read by the others
        (each must accept the frames the others send)."""
        key = self.prefix + LLDP_SECRET
        self.client.create(key, os.urandom(32).hex().encode())
        kv = self.client.get(key)
        if kv is None:  # pragma: no cover - just created
            raise StoreUnavailable(f"{key} vanished")
        return bytes.fromhex(kv.value.decode())

    def share_token(self, token: str | None) -> None:
        if token:
            self.client.create(
                self.prefix + TOKEN, hashlib.sha256(token.encode()).hexdigest().encode()
            )

    # -- changes made here -----------------------------------------------------------
    def publish_job(self, name: str, body: bytes, lease: float | None = None) -> int:
        """Store a job before applying it; a name taken in the store is a conflict."""
        self._writing.add(name)
        try:
            lease_id = self.client.lease_grant(math.ceil(lease)) if lease is not None else 0
            revision = self.client.create(self.prefix + JOBS + name, body, lease_id)
            if revision is None:
                if lease_id:
                    self.client.lease_revoke(lease_id)
                raise JobError("name", f"a job named {name!r} already exists", conflict=True)
            self.jobs[name] = revision
            if lease is not None:
                record = json.dumps({"id": lease_id, "seconds": lease}).encode()
                self.client.put(self.prefix + LEASES + name, record, lease_id)
                self.leases[name], self._lease_ids[name] = lease, lease_id
            return revision
        finally:
            self._writing.discard(name)

    def renew_job(self, name: str) -> float:
        """Keep a leased job alive another lease (any instance may be asked)."""
        lease_id = self._lease_ids.get(name)
        if lease_id is None or not self.client.lease_keepalive(lease_id):
            raise JobError("name", f"job {name!r} has no lease to renew", True)
        return self.leases[name]

    def withdraw_job(self, name: str) -> None:
        self._writing.add(name)
        try:
            lease_id = self._lease_ids.pop(name, None)
            if lease_id is not None:
                self.client.lease_revoke(lease_id)  # the job's key and its lease record too
                self.leases.pop(name, None)
            self._withdrawn[name] = self.client.delete(self.prefix + JOBS + name)
            self.jobs.pop(name, None)
        finally:
            self._writing.discard(name)

    def offer_policy(self) -> None:
        """At start: this instance's policy becomes the cluster's if it has none yet."""
        st = self.policy.status if self.policy is not None else None
        if st is None or st.path is None or not (st.loaded and st.ok):
            return
        text = Path(st.path).read_bytes()
        revision = self.client.create(self.prefix + POLICY, text)
        if revision is not None:
            self.policy_revision = revision

    def publish_policy(self) -> None:
        """After a reload validated here: the file's text becomes the cluster's policy."""
        if self.policy is None or self.policy.status.path is None:
            return
        text = Path(self.policy.status.path).read_bytes()
        self.policy_revision = self.client.put(self.prefix + POLICY, text)

    # -- changes read from the store -------------------------------------------------
    def apply(self, now: float, snapshot: Snapshot) -> None:
        if snapshot.revision == self.revision:
            return
        stored = {}
        for kv in snapshot.items:
            name = kv.key[len(self.prefix) :]
            if name.startswith(JOBS):
                stored[name[len(JOBS) :]] = kv
            elif name == POLICY and kv.mod_revision > self.policy_revision:
                self._adopt_policy(now, kv.value, kv.mod_revision)
            elif name.startswith(LEASES):
                self._note_lease(name[len(LEASES) :], kv.value)
            elif name == TOKEN:
                self.token_digest = kv.value.decode(errors="replace")
        for name, kv in sorted(stored.items()):
            if name in self._writing or self._withdrawn.get(name, 0) > snapshot.revision:
                continue  # being written, or withdrawn after this snapshot was read
            if self.jobs.get(name) != kv.mod_revision:
                self._adopt_job(now, name, kv.value, kv.mod_revision)
        self._withdrawn = {n: r for n, r in self._withdrawn.items() if r > snapshot.revision}
        for name, revision in sorted(self.jobs.items()):
            if name not in stored and revision <= snapshot.revision and name not in self._writing:
                del self.jobs[name]
                self.leases.pop(name, None)
                self._lease_ids.pop(name, None)
                if name in self.fabric.sources.jobs.jobs:
                    self.send(self.fabric.delete_job(name))
                    log.info("job %s deleted in the cluster store: removed", name)
        self.revision = snapshot.revision

    def _adopt_job(self, now: float, name: str, body: bytes, revision: int) -> None:
        self.jobs[name] = revision
        try:
            if name in self.fabric.sources.jobs.jobs:
                self.send(self.fabric.delete_job(name))
            data, _lease = split_lease(json.loads(body))  # etcd's lease expires it here
            self.send(self.fabric.create_job(now, parse_job(data)))
            log.info("job %s from the cluster store (revision %d) applied", name, revision)
        except (JobError, ValueError) as exc:
            log.error("job %s in the cluster store not applied here: %s", name, exc)

    def _note_lease(self, name: str, value: bytes) -> None:
        try:
            record = json.loads(value)
            self._lease_ids[name], self.leases[name] = int(record["id"]), float(record["seconds"])
        except (ValueError, KeyError, TypeError):
            log.error("lease of job %s in the cluster store unreadable: ignored", name)

    def _adopt_policy(self, now: float, text: bytes, revision: int) -> None:
        self.policy_revision = revision
        if self.policy is None:
            return
        path = self._cache / "policy.yaml"
        path.write_bytes(text)
        self.send(self.policy.reload(now, path=str(path)))
        log.info("policy from the cluster store (revision %d) checked and applied", revision)
