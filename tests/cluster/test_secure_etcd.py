"""Loom's shared state on a real three-member etcd over TLS with users, as the lab's
harness starts it (the CA of ``make pki``, ``--client-cert-auth`` for clients and peers,
a ``loom`` user whose role covers Loom's prefix, auth enabled): reached with the settings
an instance reads, a job posted on one instance is applied by another, a token that
expired is renewed on its own, and a client without a certificate of the CA, with a
wrong password, or outside the prefix is refused."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from controller.cluster.etcd import EtcdClient, StoreAccessDenied, parse_url
from controller.settings import Settings
from mininet_scenarios.harness.etcd import EtcdCluster
from mininet_scenarios.harness.pki import ETCD, ensure
from tests.cluster.support import TOKEN, Instance, needs_etcd

pytestmark = [pytest.mark.slow, needs_etcd]

BASE_PORT = 8379  # members on 8379, 9379, 10379: clear of the other clusters' ports
TOKEN_TTL = 1  # seconds: an unused etcd token expires within the test
JOB = {"name": "ring", "hosts": ["10.0.0.2", "10.1.0.2", "10.2.0.2", "10.3.0.2"]}


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    pki = ensure(tmp_path_factory.mktemp("pki"), ETCD)
    with EtcdCluster(base_port=BASE_PORT, pki=pki, auth=True, token_ttl=TOKEN_TTL) as cluster:
        yield cluster


def test_the_shared_state_over_tls_as_the_loom_user(etcd: EtcdCluster) -> None:
    settings = Settings.from_env(etcd.loom_env())
    assert settings.cluster is not None and settings.cluster.startswith("etcds://")
    one = Instance(settings.cluster, timeout=2.0, access=settings.etcd)
    two = Instance(settings.cluster, timeout=2.0, access=settings.etcd)
    auth = f"Bearer {TOKEN}"
    res = one.api.handle("POST", "/loom/v1/jobs", {}, json.dumps(JOB).encode(), auth)
    assert res.status == 201, res.body
    two.sync()
    assert "ring" in two.sim.core.sources.jobs.jobs
    time.sleep(TOKEN_TTL + 1.5)  # etcd forgets an unused token (checked once a second)
    assert two.api.handle("DELETE", "/loom/v1/jobs/ring", {}, b"", auth).status == 200
    one.sync()
    assert "ring" not in one.sim.core.sources.jobs.jobs
    assert two.client.authentications == 2  # the first token, and one renewal


def test_no_certificate_a_wrong_password_or_another_prefix_is_refused(
    etcd: EtcdCluster,
) -> None:
    endpoints, prefix = parse_url(etcd.url)
    loom = etcd.access()
    assert EtcdClient(endpoints, access=loom).get_prefix(prefix).revision > 0
    other = ensure(etcd.password_file().parent / "other-ca", ("etcd-client",))
    stranger = replace(loom, cert=str(other.cert("etcd-client")), key=str(other.key("etcd-client")))
    refused = [
        ("refused TLS", replace(loom, cert=None, key=None)),  # no certificate
        ("refused TLS", stranger),  # one of another CA
        ("refused user 'loom'", replace(loom, password="guess")),
    ]
    for why, access in refused:
        with pytest.raises(StoreAccessDenied, match=why):
            EtcdClient(endpoints, timeout=2.0, access=access).get_prefix(prefix)
    with pytest.raises(StoreAccessDenied, match="permission denied"):
        EtcdClient(endpoints, timeout=2.0, access=loom).put("/elsewhere", b"x")
