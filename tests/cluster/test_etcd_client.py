"""The etcd client against a real three-member etcd on loopback: keys, transactions,
leases kept alive and let go, and what a caller sees when members die and the quorum is
lost and regained."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator

import pytest

from controller.cluster.etcd import URL_FORM, EtcdClient, StoreUnavailable, parse_url
from mininet_scenarios.harness.etcd import EtcdCluster
from mininet_scenarios.harness.processes import free_port
from tests.cluster.support import needs_etcd

pytestmark = [pytest.mark.slow, needs_etcd]

BASE_PORT = 27379  # clear of the defaults (21379...) and below the ephemeral range
TIMEOUT = 0.5


class Members:
    """The cluster and which of its members are down, so each test leaves it whole."""

    def __init__(self, cluster: EtcdCluster) -> None:
        self.cluster = cluster
        self.down: set[int] = set()

    def kill(self, i: int) -> None:
        self.cluster.kill(i)
        self.down.add(i)

    def restart(self, i: int) -> None:
        self.cluster.restart(i)
        self.down.discard(i)

    def heal(self) -> None:
        for i in sorted(self.down):
            self.restart(i)
        for endpoint in self.cluster.endpoints():
            eventually(functools.partial(EtcdClient([endpoint], timeout=1.0).get_prefix, "/"))


def eventually(attempt: Callable[[], object], within: float = 10.0) -> float:
    """Retry ``attempt`` while the store is unavailable; the seconds it took."""
    started = time.monotonic()
    while True:
        try:
            attempt()
            return time.monotonic() - started
        except StoreUnavailable:
            if time.monotonic() - started > within:
                raise
            time.sleep(0.05)


@pytest.fixture(scope="module")
def members() -> Iterator[Members]:
    with EtcdCluster(base_port=BASE_PORT) as cluster:
        yield Members(cluster)


@pytest.fixture
def etcd(members: Members) -> Iterator[EtcdClient]:
    yield EtcdClient(members.cluster.endpoints(), timeout=TIMEOUT)
    members.heal()


@pytest.fixture
def prefix(request: pytest.FixtureRequest) -> str:
    return f"/loom/{request.node.name}/"


# --------------------------------------------------------------------------- URLs


def test_a_url_names_every_endpoint_and_the_prefix() -> None:
    hosts = "127.0.0.1:21379,127.0.0.1:22379,127.0.0.1:23379"
    endpoints = ["http://127.0.0.1:21379", "http://127.0.0.1:22379", "http://127.0.0.1:23379"]
    assert parse_url(f"etcd://{hosts}/loom") == (endpoints, "/loom/")
    assert parse_url(f"etcd://{hosts}") == (endpoints, "/loom/")
    assert parse_url("etcd://db:2379/a/b/") == (["http://db:2379"], "/a/b/")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:2379/loom", "the scheme must be etcd://"),
        ("127.0.0.1:2379", "the scheme must be etcd://"),
        ("etcd://", "no host"),
        ("etcd:///loom", "no host"),
        ("etcd://127.0.0.1/loom", "'127.0.0.1' is not HOST:PORT"),
        ("etcd://:2379", "':2379' is not HOST:PORT"),
        ("etcd://a:1,,b:2", "'' is not HOST:PORT"),
        ("etcd://127.0.0.1:http", "bad port 'http'"),
        ("etcd://127.0.0.1:0", "bad port '0'"),
        ("etcd://127.0.0.1:65536", "bad port '65536'"),
    ],
)
def test_a_bad_url_says_what_is_wrong_and_what_was_expected(url: str, why: str) -> None:
    with pytest.raises(ValueError, match="bad etcd URL") as caught:
        parse_url(url)
    assert why in str(caught.value) and URL_FORM in str(caught.value), caught.value


# --------------------------------------------------------------------------- keys


def test_put_get_and_a_prefix_sorted_by_key_at_a_growing_revision(
    etcd: EtcdClient, prefix: str
) -> None:
    first = etcd.put(prefix + "b", b"2")
    second = etcd.put(prefix + "a", b"1")
    etcd.put(prefix.rstrip("/") + "x", b"next door")  # shares the text, not the prefix
    assert second > first and etcd.revision >= second
    kv = etcd.get(prefix + "a")
    assert kv is not None and kv.value == b"1" and kv.mod_revision == second and kv.lease == 0
    assert etcd.get(prefix + "missing") is None

    snapshot = etcd.get_prefix(prefix)
    pairs = [(kv.key, kv.value) for kv in snapshot.items]
    assert pairs == [(prefix + "a", b"1"), (prefix + "b", b"2")], pairs
    assert snapshot.revision >= second and snapshot.raft_term >= 1
    assert etcd.put(prefix + "a", b"") > snapshot.revision
    assert etcd.get_prefix(prefix).revision > snapshot.revision
    assert etcd.last_rtt > 0


def test_create_only_when_the_key_is_new(etcd: EtcdClient, prefix: str) -> None:
    revision = etcd.create(prefix + "owner", b"me")
    assert revision is not None
    kv = etcd.get(prefix + "owner")
    assert kv is not None and kv.create_revision == revision
    assert etcd.create(prefix + "owner", b"you") is None
    kv = etcd.get(prefix + "owner")
    assert kv is not None and kv.value == b"me", kv


def test_delete_if_value_deletes_only_on_a_match(etcd: EtcdClient, prefix: str) -> None:
    etcd.put(prefix + "claim", b"me")
    assert not etcd.delete_if_value(prefix + "claim", b"you")
    assert etcd.get(prefix + "claim") is not None
    assert etcd.delete_if_value(prefix + "claim", b"me")
    assert etcd.get(prefix + "claim") is None
    assert not etcd.delete_if_value(prefix + "claim", b"me")
    revision = etcd.put(prefix + "plain", b"x")
    assert etcd.delete(prefix + "plain") > revision and etcd.get(prefix + "plain") is None


# --------------------------------------------------------------------------- leases


def test_a_revoked_lease_takes_its_keys_with_it(etcd: EtcdClient, prefix: str) -> None:
    lease = etcd.lease_grant(30)
    etcd.put(prefix + "held", b"x", lease=lease)
    kv = etcd.get(prefix + "held")
    assert kv is not None and kv.lease == lease
    etcd.lease_revoke(lease)
    assert etcd.get(prefix + "held") is None
    assert etcd.lease_keepalive(lease) <= 0
    etcd.lease_revoke(lease)  # already gone: not an error
    with pytest.raises(ValueError, match="requested lease not found"):
        etcd.put(prefix + "orphan", b"x", lease=lease)


def test_keepalive_holds_a_lease_past_its_ttl_and_without_it_the_key_goes(
    etcd: EtcdClient, prefix: str
) -> None:
    ttl = 2
    kept, left = etcd.lease_grant(ttl), etcd.lease_grant(ttl)
    etcd.put(prefix + "kept", b"x", lease=kept)
    etcd.put(prefix + "left", b"x", lease=left)
    started = time.monotonic()
    gone_after = None
    while time.monotonic() - started < 3.2:
        assert etcd.lease_keepalive(kept) == ttl
        if gone_after is None and etcd.get(prefix + "left") is None:
            gone_after = time.monotonic() - started
        time.sleep(0.5)
    assert etcd.get(prefix + "kept") is not None
    assert gone_after is not None and gone_after <= ttl + 1.5, gone_after
    etcd.lease_revoke(kept)


# --------------------------------------------------------------------------- failures


def test_with_member_1_dead_the_others_answer(members: Members, etcd: EtcdClient) -> None:
    patient = EtcdClient(members.cluster.endpoints(), timeout=2.0)  # across an election
    members.kill(1)
    assert patient.put("/loom/failover", b"x") > 0
    assert [kv.key for kv in patient.get_prefix("/loom/failover").items] == ["/loom/failover"]


def test_without_a_quorum_reads_fail_fast_and_recover_with_it(
    members: Members, etcd: EtcdClient
) -> None:
    etcd.put("/loom/quorum", b"x")
    members.kill(1)
    members.kill(2)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as caught:
        etcd.get_prefix("/loom/")
    assert time.monotonic() - started < 3 * TIMEOUT + 0.2
    for endpoint in members.cluster.endpoints():
        assert endpoint in str(caught.value), caught.value
    members.restart(2)
    assert eventually(lambda: etcd.get_prefix("/loom/quorum")) < 10.0
    assert [kv.key for kv in etcd.get_prefix("/loom/quorum").items] == ["/loom/quorum"]


def test_a_client_with_every_endpoint_dead_names_them() -> None:
    endpoints = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    with pytest.raises(StoreUnavailable) as caught:
        EtcdClient(endpoints, timeout=TIMEOUT).get("/loom/x")
    assert all(endpoint in str(caught.value) for endpoint in endpoints), caught.value
