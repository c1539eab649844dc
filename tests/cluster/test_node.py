"""Cluster members on a real three-member etcd, without switches: they share 20 switches
within one of even, a dead member's switches move to the others within a few rounds
(its lease revoked as soon as its port refuses connections), a joining member takes only
its share, and every claim's generation is larger than the one before."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from controller.cluster.etcd import EtcdClient, parse_url
from controller.cluster.node import POLL, ClusterNode
from controller.cluster.roles import Roles
from mininet_scenarios.harness.etcd import EtcdCluster
from mininet_scenarios.harness.processes import free_port
from tests.cluster.support import needs_etcd
from tests.fakefabric.roles import MASTER, SLAVE, StaleGeneration, SwitchRoles

pytestmark = [pytest.mark.slow, needs_etcd]
DPIDS = list(range(1, 21))


ARBITERS: dict[str, dict[int, SwitchRoles]] = {}  # per test: the switches' own role state


class Switches:
    """Every switch connected; a role request is answered at once by the switch's role
    state (a stale generation refused, as Open vSwitch does)."""

    def __init__(self, arbiters: dict[int, SwitchRoles], name: str) -> None:
        self.arbiters, self.name = arbiters, name
        self.node: ClusterNode | None = None
        self.pending: list[tuple[int, int]] = []
        self.generations: dict[int, int] = {}
        self.taken_over: list[int] = []
        self.learned = True  # the core has learned the whole fabric

    def connected(self) -> list[int]:
        return DPIDS

    def ready(self) -> bool:
        return self.learned

    def request_role(self, dpid: int, master: bool, generation: int) -> None:
        """A master request is on its way (delivered at the end of the round, after the
        other instances' slave requests); a slave request arrives at once."""
        if master:
            assert generation > self.generations.get(dpid, 0)
            self.generations[dpid] = generation
            self.pending.append((dpid, generation))
        else:
            self.arrive(dpid, False, generation)

    def deliver(self) -> None:
        pending, self.pending = self.pending, []
        for dpid, generation in pending:
            self.arrive(dpid, True, generation)

    def arrive(self, dpid: int, master: bool, generation: int) -> None:
        assert self.node is not None
        arbiter = self.arbiters.setdefault(dpid, SwitchRoles())
        try:
            arbiter.request(self.name, MASTER if master else SLAVE, generation)
        except StaleGeneration:
            self.node.refused(dpid)
            return
        self.node.role_replied(dpid, master, generation)

    def be_slave(self) -> None:
        """What an instance asks of a switch it does not hold (as on connecting)."""
        assert self.node is not None
        for dpid in DPIDS:
            if dpid not in self.node.roles.held():
                self.request_role(dpid, False, self.node.slave_generation(dpid))

    def take_over(self, dpid: int) -> None:
        self.taken_over.append(dpid)


class Member:
    def __init__(self, url: str, name: str) -> None:
        endpoints, prefix = parse_url(url)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.switches = Switches(ARBITERS.setdefault(url, {}), name)
        self.roles = Roles(clustered=True)
        port = self.listener.getsockname()[1]
        self.node = ClusterNode(
            EtcdClient(endpoints),
            prefix,
            name,
            self.roles,
            self.switches,
            probe=f"127.0.0.1:{port}",
        )
        self.switches.node = self.node

    def die(self) -> None:
        self.listener.close()  # as the process's sockets close when it is killed


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdCluster]:
    with EtcdCluster(base_port=11379) as cluster:
        yield cluster


def rounds(members: list[Member], n: int, now: list[float]) -> None:
    for _ in range(n):
        now[0] += POLL
        for m in members:
            m.node.step(now[0])
            m.node.probe_peers()
        settle_roles(members)


def settle_roles(members: list[Member]) -> None:
    """Every instance's slave requests reach the switches before the round's master
    requests do (the interleaving that makes a slave's generation matter)."""
    for m in members:
        m.switches.be_slave()
    for m in members:
        m.switches.deliver()


def shares(members: list[Member]) -> dict[str, list[int]]:
    return {m.node.me: m.roles.masters() for m in members}


def test_members_share_switches_and_take_over_from_the_dead(etcd: EtcdCluster) -> None:
    url = etcd.url.rsplit("/", 1)[0] + "/node-test"
    now = [0.0]
    a, b, c = (Member(url, n) for n in ("a", "b", "c"))
    rounds([a, b, c], 5, now)
    held = shares([a, b, c])
    assert sorted(len(v) for v in held.values()) == [6, 7, 7]
    assert sorted(d for v in held.values() for d in v) == DPIDS  # one master each
    for m in (a, b, c):  # every member took over what it holds (a, first, held all once)
        assert set(m.roles.masters()) <= set(m.switches.taken_over)

    a.die()
    before = {m.node.me: set(m.roles.masters()) for m in (b, c)}
    taken = 0
    while sorted(len(v) for v in shares([b, c]).values()) != [10, 10] and taken < 20:
        rounds([b, c], 1, now)
        taken += 1
    assert taken <= 6, f"{taken} rounds to take a dead member's switches over"
    for m in (b, c):  # the survivors kept theirs
        assert before[m.node.me] <= set(m.roles.masters())
    for m in (b, c):
        gained = set(m.roles.masters()) - before[m.node.me]
        assert gained <= set(held["a"])
        assert gained <= set(m.switches.taken_over)

    d = Member(url, "d")
    d.switches.learned = False  # still learning: takes nothing from the others
    rounds([b, c, d], 5, now)
    assert d.roles.masters() == []
    d.switches.learned = True
    rounds([b, c, d], 5, now)
    after = shares([b, c, d])
    assert sorted(len(v) for v in after.values()) == [6, 7, 7]
    assert sorted(x for v in after.values() for x in v) == DPIDS
    for m in (b, c):
        assert set(after[m.node.me]) <= set(m.switches.generations)


def test_a_member_cut_off_from_the_store_stops_writing_before_anyone_takes_over(
    etcd: EtcdCluster,
) -> None:
    """A partition: ``a`` still runs (its port accepts connections, so nobody revokes its
    lease) but reaches no etcd member. It stops writing before its lease can expire, and
    only after that do the others claim its switches: at no instant do two members write
    to one switch."""
    url = etcd.url.rsplit("/", 1)[0] + "/partition-test"
    a, b, c = (Member(url, n) for n in ("a", "b", "c"))
    members = [a, b, c]
    for _ in range(10):
        now = time.monotonic()
        for m in members:
            m.node.step(now)
        settle_roles(members)
        time.sleep(POLL)
    theirs = set(a.roles.masters())
    assert theirs
    a.node.client = EtcdClient([f"http://127.0.0.1:{free_port()}"], timeout=0.2)
    overlaps, moved_at, cut = 0, None, time.monotonic()
    while time.monotonic() - cut < 6.0:
        now = time.monotonic()
        for m in members:
            m.node.step(now)
            m.node.probe_peers()
        settle_roles(members)
        writers = {d: [m.node.me for m in members if m.roles.writable(d, now)] for d in DPIDS}
        overlaps += sum(1 for w in writers.values() if len(w) > 1)
        if moved_at is None and all(writers[d] and writers[d] != ["a"] for d in theirs):
            moved_at = now - cut
        time.sleep(0.05)
    assert overlaps == 0
    assert not any(a.roles.writable(d, time.monotonic()) for d in DPIDS)  # fenced
    print(f"partition: switches moved {moved_at} s after the cut")
    assert moved_at is not None and 1.5 <= moved_at < 5.0, moved_at
