"""What users put in, shared through a real etcd: a job posted to one instance's API is
applied by another and outlives the first; a name taken anywhere is a conflict; the
cluster's token is accepted everywhere; with the store down a change is refused with a
clear error and changes nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mininet_scenarios.harness.etcd import EtcdCluster
from tests.cluster.support import TOKEN, Instance, needs_etcd

pytestmark = [pytest.mark.slow, needs_etcd]
JOB = {"name": "ring", "hosts": ["10.0.0.2", "10.1.0.2", "10.2.0.2", "10.3.0.2"]}
EXAMPLE = Path(__file__).resolve().parents[2] / "controller/policy/example-policy.yaml"


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdCluster]:
    with EtcdCluster(base_port=14379) as cluster:
        yield cluster


def test_a_job_posted_anywhere_is_applied_everywhere(etcd: EtcdCluster) -> None:
    url = etcd.url.rsplit("/", 1)[0] + "/shared-test"
    one, two = Instance(url), Instance(url)
    one.sync()
    two.sync()
    auth = f"Bearer {TOKEN}"
    assert one.api.handle("POST", "/loom/v1/jobs", {}, json.dumps(JOB).encode()).status == 401
    res = one.api.handle("POST", "/loom/v1/jobs", {}, json.dumps(JOB).encode(), auth)
    assert res.status == 201, res.body
    assert "ring" not in two.sim.core.sources.jobs.jobs
    two.sync()
    assert "ring" in two.sim.core.sources.jobs.jobs  # applied from the store
    assert sum(len(m) for batch in two.sent for m in batch.values()) > 0
    again = two.api.handle("POST", "/loom/v1/jobs", {}, json.dumps(JOB).encode(), auth)
    assert again.status == 409
    del one  # the instance that took the job is gone: the job is not
    three = Instance(url)
    three.sync()
    assert "ring" in three.sim.core.sources.jobs.jobs
    assert two.api.handle("DELETE", "/loom/v1/jobs/ring", {}, b"", auth).status == 200
    three.sync()
    assert "ring" not in three.sim.core.sources.jobs.jobs


def test_a_leased_job_is_renewed_anywhere_and_expires_everywhere(etcd: EtcdCluster) -> None:
    """The store's lease, not each instance's clock, decides: a renewal on another
    instance keeps the job; without renewals etcd deletes it and every instance drops it."""
    url = etcd.url.rsplit("/", 1)[0] + "/lease-test"
    one, two = Instance(url), Instance(url)
    auth = f"Bearer {TOKEN}"
    body = json.dumps({**JOB, "name": "leased", "lease_seconds": 2}).encode()
    res = one.api.handle("POST", "/loom/v1/jobs", {}, body, auth)
    assert res.status == 201, res.body
    assert res.body["lease_seconds"] == 2
    two.sync()
    assert "leased" in two.sim.core.sources.jobs.jobs
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline:  # twice the lease, renewed through the other one
        renewed = two.api.handle("POST", "/loom/v1/jobs/leased/renew", {}, b"", auth)
        assert renewed.status == 200, renewed.body
        time.sleep(0.5)
    one.sync()
    two.sync()
    assert "leased" in one.sim.core.sources.jobs.jobs and "leased" in two.sim.core.sources.jobs.jobs
    time.sleep(3.5)  # not renewed: etcd expires the lease (its TTL, rounded up)
    one.sync()
    two.sync()
    assert (
        "leased" not in one.sim.core.sources.jobs.jobs
        and "leased" not in two.sim.core.sources.jobs.jobs
    )
    gone = two.api.handle("POST", "/loom/v1/jobs/leased/renew", {}, b"", auth)
    assert gone.status == 404


def test_with_no_quorum_a_change_is_refused_and_changes_nothing(etcd: EtcdCluster) -> None:
    url = etcd.url.rsplit("/", 1)[0] + "/quorum-test"
    one = Instance(url)
    one.sync()
    etcd.kill(2)
    etcd.kill(3)
    try:
        res = one.api.handle(
            "POST", "/loom/v1/jobs", {}, json.dumps(JOB).encode(), f"Bearer {TOKEN}"
        )
        assert res.status == 503
        assert "no quorum" in res.body["error"] and "nothing was changed" in res.body["error"]
        assert "ring" not in one.sim.core.sources.jobs.jobs
        assert res.messages == {}
    finally:
        etcd.restart(2)
        etcd.restart(3)


def tenant_names(instance: Instance) -> set[str]:
    tenants: Any = instance.policy.describe()["tenants"]
    return {t["name"] for t in tenants}


def test_a_policy_reloaded_on_one_instance_is_applied_by_the_others(
    etcd: EtcdCluster, tmp_path: Path
) -> None:
    """The example policy reloaded on one instance is published and checked and applied by
    another, whose own file says nothing; an invalid file is refused where it is reloaded,
    is not published, and the cluster keeps the policy in force."""
    url = etcd.url.rsplit("/", 1)[0] + "/policy-test"
    path = tmp_path / "policy.yaml"
    path.write_text(EXAMPLE.read_text())
    one = Instance(url, policy=str(path))
    two = Instance(url)
    auth = f"Bearer {TOKEN}"
    assert one.api.handle("POST", "/loom/v1/policy/reload", {}, b"", auth).status == 200
    two.sync()
    tenants = tenant_names(two)
    assert tenants == {"research", "production", "guests"}
    assert two.sim.core.inputs.tenants.enforcing
    path.write_text("version: 1\ntenants: [{name: x, hosts: [{ip: 10.0.0.2}]}, {name: x}]\n")
    res = one.api.handle("POST", "/loom/v1/policy/reload", {}, b"", auth)
    assert res.status == 422
    revision = two.shared.policy_revision
    two.sync()
    assert two.shared.policy_revision == revision  # nothing new was published
    tenants = tenant_names(two)
    assert tenants == {"research", "production", "guests"}


def test_the_first_instance_with_a_policy_offers_it_to_the_cluster(
    etcd: EtcdCluster, tmp_path: Path
) -> None:
    url = etcd.url.rsplit("/", 1)[0] + "/offer-test"
    path = tmp_path / "policy.yaml"
    path.write_text(EXAMPLE.read_text())
    one = Instance(url, policy=str(path))
    one.policy.reload(one.sim.now)
    one.shared.offer_policy()
    other = tmp_path / "other.yaml"
    other.write_text("version: 1\ntenants: [{name: solo, hosts: [{ip: 10.0.0.2}]}]\n")
    two = Instance(url, policy=str(other))
    two.policy.reload(two.sim.now)
    two.shared.offer_policy()  # the cluster has one already: the cluster's wins
    two.sync()
    assert tenant_names(two) == {"research", "production", "guests"}


def test_a_snapshot_read_before_a_withdraw_does_not_bring_the_job_back(
    etcd: EtcdCluster,
) -> None:
    """A sync reads the store, then a delete on this instance withdraws the job, then the
    sync applies what it read: the job must stay gone here, not come back until the next
    sync (its rules installed and torn down again)."""
    url = etcd.url.rsplit("/", 1)[0] + "/stale-test"
    one = Instance(url)
    one.sync()
    auth = f"Bearer {TOKEN}"
    job = {**JOB, "name": "stale"}
    assert one.api.handle("POST", "/loom/v1/jobs", {}, json.dumps(job).encode(), auth).status == 201
    read = one.client.get_prefix(one.shared.prefix)  # the job is in it
    assert one.api.handle("DELETE", "/loom/v1/jobs/stale", {}, b"", auth).status == 200
    sent = len(one.sent)
    one.shared.apply(one.sim.now, read)  # read before the delete, applied after it
    assert "stale" not in one.sim.core.sources.jobs.jobs and "stale" not in one.shared.jobs
    assert len(one.sent) == sent  # no rule went out for it
    one.sync()
    assert "stale" not in one.sim.core.sources.jobs.jobs
