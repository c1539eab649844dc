"""The lab's CA (``make pki``) and what the TLS pieces make of it: no root, no network.

A handshake over a socket pair between the controller's context (built as Loom's
listener builds it) and a switch's: a certificate of the CA passes, none or another
CA's fails."""

from __future__ import annotations

import shutil
import socket
import ssl
import threading
from pathlib import Path

import pytest

from controller.ofp.tls import accept, server_context
from mininet_scenarios.harness.pki import Pki, ensure
from mininet_scenarios.harness.tls import (
    SslSetting,
    controller_args,
    parse_get_ssl,
    switch_ssl,
)
from tests.emulation.tls_support import client_context

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return ensure(tmp_path_factory.mktemp("pki"))


def test_make_pki_is_idempotent_and_keeps_keys_private(pki: Pki) -> None:
    made = {p: p.read_bytes() for p in pki.root.glob("*.pem")}
    assert {p.name for p in made} == {"ca.pem", "controller.pem", "switch.pem"}
    ensure(pki.root)
    assert {p: p.read_bytes() for p in pki.root.glob("*.pem")} == made
    for key in ("ca", "controller", "switch"):
        assert (pki.root / f"{key}.key").stat().st_mode & 0o077 == 0


def handshake(pki: Pki, client: ssl.SSLContext | None) -> str:
    """What Loom's listener (``accept``) made of a client: 'ok' if it handed over the
    connection and the client's first bytes came through, 'refused: why', or 'hung up'
    (``client`` None: it closes before a word)."""
    ours, theirs = socket.socketpair()
    server = server_context(
        {
            "certfile": str(pki.cert("controller")),
            "keyfile": str(pki.key("controller")),
            "ca_certs": str(pki.ca_cert),
            "cert_reqs": ssl.CERT_REQUIRED,
        }
    )
    outcome: list[str] = []

    def handle(conn: ssl.SSLSocket, addr: object) -> None:
        with conn:
            outcome.append("ok" if conn.recv(5) == b"hello" else "nothing read")

    def refused(addr: object, why: str) -> None:
        outcome.append(f"refused: {why}")

    thread = threading.Thread(target=accept, args=(server, handle, refused, ours, ("x", 1)))
    thread.start()
    if client is None:
        theirs.close()
    else:
        try:
            with client.wrap_socket(theirs) as conn:
                conn.sendall(b"hello")
                conn.recv(1)  # the server's alert, or its close
        except OSError:
            pass
    thread.join(timeout=10)
    return outcome[0] if outcome else "hung up"


def test_only_a_certificate_of_the_ca_passes_the_handshake(pki: Pki, tmp_path: Path) -> None:
    other = ensure(tmp_path / "other")
    switch = client_context(pki.ca_cert, pki.cert("switch"), pki.key("switch"))
    assert handshake(pki, switch) == "ok"
    assert handshake(pki, client_context(pki.ca_cert)).startswith("refused")
    stranger = client_context(pki.ca_cert, other.cert("switch"), other.key("switch"))
    assert handshake(pki, stranger).startswith("refused")
    assert handshake(pki, None) == "hung up"  # a cluster peer's probe is not counted


def test_controller_flags_and_the_ovs_setting(pki: Pki) -> None:
    args = controller_args(pki, 6654)
    assert args[:2] == ["--ofp-ssl-listen-port", "6654"]
    assert args[args.index("--ca-certs") + 1] == str(pki.ca_cert)
    assert switch_ssl(pki).set_command()[-3:] == [
        str(pki.key("switch")),
        str(pki.cert("switch")),
        str(pki.ca_cert),
    ]


def test_get_ssl_is_parsed_and_an_empty_one_is_none() -> None:
    text = "Private key: /k.pem\nCertificate: /c.pem\nCA Certificate: /ca.pem\nBootstrap: true\n"
    setting = parse_get_ssl(text)
    assert setting == SslSetting("/k.pem", "/c.pem", "/ca.pem", bootstrap=True)
    assert setting.set_command()[:3] == ["ovs-vsctl", "--bootstrap", "set-ssl"]
    assert parse_get_ssl("") is None


def test_bridges_take_tcp_or_ssl_targets() -> None:
    from mininet_scenarios.harness.network import FabricNet
    from mininet_scenarios.harness.ovs import FabricError
    from topologies import fat_tree

    assert FabricNet(fat_tree(4), protocol="ssl").protocol == "ssl"
    with pytest.raises(FabricError, match="tcp or ssl"):
        FabricNet(fat_tree(4), protocol="unix")
