"""OpenFlow over TLS with certificates both ways, and a datapath id claimed twice.

With TLS, Loom takes only switches holding a certificate of its CA: a peer with none, one
of another CA, or plain TCP is refused at the handshake and counted, even from the real
switches' own address, while the fabric keeps forwarding. Open vSwitch's SSL setting,
global to its database, is what it was before once the run ends. Over plain TCP, a
connection from another address naming a datapath id already connected is closed before
it is sent anything but the handshake, and counted; a reconnect from the same address
takes over (a restarted switch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mininet_scenarios.harness.metrics import sample, scrape
from mininet_scenarios.harness.ovs import sh
from mininet_scenarios.harness.pki import Pki, ensure
from mininet_scenarios.harness.stack import LoomStack
from mininet_scenarios.harness.tls import current_ssl, switch_ssl
from tests.emulation.conftest import pair_graph
from tests.emulation.hostile_support import FakeSwitch
from tests.emulation.tls_support import HANDSHAKE, RawSwitch, client_context

pytestmark = pytest.mark.emulation
REFUSED = "loom_switch_connections_refused_total"
DPID = 0x51  # the first switch of pair_graph
wait = FakeSwitch.wait  # until a condition holds, or a timeout


def refused(stack: LoomStack, reason: str) -> float:
    return sample(scrape(stack.metrics_url), REFUSED, reason=reason)


def fabric_works(stack: LoomStack) -> None:
    assert sorted(stack.api.topology()["switches"]) == [DPID, DPID + 1]
    result = stack.net.pingall(timeout=2.0)
    assert result.loss_pct == 0.0, result.failed


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return ensure(tmp_path_factory.mktemp("pki"))


def test_tls_fabric_refuses_peers_without_a_certificate_of_its_ca(
    pki: Pki, tmp_path: Path, run_dir: Path
) -> None:
    other = ensure(tmp_path / "other-ca")  # a CA of its own, and a switch certificate of it
    before = current_ssl()
    with LoomStack(pair_graph("ht"), run_dir, shape=False, tls=pki) as stack:
        assert current_ssl() == switch_ssl(pki)
        assert sh(["ovs-vsctl", "get-controller", "hts1"]).strip().startswith("ssl:127.0.0.1:")
        fabric_works(stack)
        stranger = client_context(pki.ca_cert, other.cert("switch"), other.key("switch"))
        peers = [  # an id the fabric has, and one it does not
            ("no certificate", client_context(pki.ca_cert), DPID),
            ("another CA's", stranger, DPID),
            ("plain TCP", None, DPID),
            ("no certificate, a new id", client_context(pki.ca_cert), 0x99),
        ]
        for name, ctx, dpid in peers:
            # From the real switches' address: only the certificate tells them apart.
            address = ("127.0.0.1", stack.ofp_port)
            with RawSwitch(address, dpid, source="127.0.0.1", tls=ctx) as rogue:
                assert rogue.wait_closed(10.0), f"{name}: still connected"
                assert rogue.received == [], f"{name}: sent {rogue.received} before TLS"
        assert wait(lambda: refused(stack, "tls_handshake") == len(peers), 5.0)
        assert refused(stack, "duplicate_dpid") == 0
        fabric_works(stack)  # the same two switches: no rogue among them
        log = stack.controller_log()
        assert log.count("OpenFlow TLS handshake from 127.0.0.1:") == len(peers), log[-3000:]
    assert current_ssl() == before


def test_a_second_connection_for_a_connected_dpid_is_refused_and_counted(run_dir: Path) -> None:
    with LoomStack(pair_graph("hu"), run_dir, shape=False) as stack:
        address = ("127.0.0.1", stack.ofp_port)
        with RawSwitch(address, DPID, source="127.0.0.2") as rogue:
            assert rogue.wait_closed(10.0), f"not closed; it received {rogue.received}"
            assert set(rogue.received) <= HANDSHAKE, rogue.received  # no rule, no packet
        assert wait(lambda: refused(stack, "duplicate_dpid") == 1, 5.0)
        assert (
            "switch 0000000000000051: connection from 127.0.0.2 refused,"
            " the id is connected from 127.0.0.1" in stack.controller_log()
        )
        fabric_works(stack)

        # A new id from 127.0.0.2 is a switch; its reconnect from there takes over.
        new = DPID + 0x10
        with RawSwitch(address, new, source="127.0.0.2") as first:
            assert wait(lambda: new in stack.api.topology()["switches"], 10.0)
            with RawSwitch(address, new, source="127.0.0.2") as again:
                assert first.wait_closed(10.0), "the replaced connection was not closed"
                assert not again.closed.is_set()
                assert new in stack.api.topology()["switches"]
        assert wait(lambda: new not in stack.api.topology()["switches"], 10.0)
        assert refused(stack, "duplicate_dpid") == 1
        fabric_works(stack)
