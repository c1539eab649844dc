"""etcd over TLS as an etcd user: the settings that say how (each mistake named), and the
client against a stub of etcd's JSON gateway over the real TLS stack (a CA of the lab's
``make pki``): a token got once and sent with every request, renewed once when etcd no
longer takes it, and refusals of who we are raised as ``StoreAccessDenied``."""

from __future__ import annotations

import json
import shutil
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from controller.cluster.etcd import (
    EtcdAccess,
    EtcdClient,
    StoreAccessDenied,
    StoreUnavailable,
    parse_url,
)
from controller.settings import Settings, SettingsError
from mininet_scenarios.harness.pki import ETCD, Pki, ensure

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")

URL = "etcds://127.0.0.1:2379/loom"
PASSWORD = "correct horse"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return ensure(tmp_path_factory.mktemp("pki"), ETCD)


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return ensure(tmp_path_factory.mktemp("other"), ("etcd-client",))


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "password"
    path.write_text(PASSWORD + "\n")
    return path


def secured(pki: Pki, password_file: Path) -> dict[str, str]:
    return {
        "LOOM_CLUSTER": URL,
        "LOOM_ETCD_CA": str(pki.ca_cert),
        "LOOM_ETCD_CERT": str(pki.cert("etcd-client")),
        "LOOM_ETCD_KEY": str(pki.key("etcd-client")),
        "LOOM_ETCD_USER": "loom",
        "LOOM_ETCD_PASSWORD_FILE": str(password_file),
    }


# --------------------------------------------------------------------------- settings


def test_etcds_gives_https_endpoints_and_the_settings_the_files_and_password() -> None:
    assert parse_url("etcds://a:1,b:2/x") == (["https://a:1", "https://b:2"], "/x/")
    assert Settings.from_env({"LOOM_CLUSTER": URL}).etcd == EtcdAccess()


def test_every_setting_read_and_the_password_from_its_file_never_shown(
    pki: Pki, password_file: Path
) -> None:
    access = Settings.from_env(secured(pki, password_file)).etcd
    assert access.ca == str(pki.ca_cert) and access.key == str(pki.key("etcd-client"))
    assert access.user == "loom" and access.password == PASSWORD
    assert PASSWORD not in repr(access) and PASSWORD not in repr(Settings.from_env({}))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"LOOM_CLUSTER": "etcd://127.0.0.1:2379"}, "LOOM_ETCD_CA is set: expected with "),
        ({"LOOM_CLUSTER": ""}, "LOOM_CLUSTER=None"),
        ({"LOOM_ETCD_KEY": ""}, "LOOM_ETCD_KEY is unset: expected the client certificate"),
        ({"LOOM_ETCD_CERT": ""}, "LOOM_ETCD_CERT is unset: expected the client certificate"),
        ({"LOOM_ETCD_PASSWORD_FILE": ""}, "LOOM_ETCD_PASSWORD_FILE is unset: expected the"),
        ({"LOOM_ETCD_USER": ""}, "LOOM_ETCD_USER is unset: expected the etcd user"),
        ({"LOOM_ETCD_CA": "/nonexistent/ca.pem"}, "LOOM_ETCD_CA='/nonexistent/ca.pem': expect"),
        ({"LOOM_ETCD_PASSWORD_FILE": "/nonexistent"}, "LOOM_ETCD_PASSWORD_FILE='/nonexistent'"),
    ],
)
def test_a_bad_setting_is_named_with_what_was_expected(
    pki: Pki, password_file: Path, change: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match="expected") as caught:
        Settings.from_env({**secured(pki, password_file), **change})
    assert message in str(caught.value), caught.value


def test_files_that_are_not_what_they_should_be_are_named(
    pki: Pki, other_ca: Pki, password_file: Path, tmp_path: Path
) -> None:
    env = secured(pki, password_file)
    with pytest.raises(SettingsError, match=r"LOOM_ETCD_CA=.*expected PEM CA certificates"):
        Settings.from_env({**env, "LOOM_ETCD_CA": str(password_file)})
    mismatch = {**env, "LOOM_ETCD_KEY": str(other_ca.key("etcd-client"))}
    with pytest.raises(SettingsError, match=r"LOOM_ETCD_CERT=.*LOOM_ETCD_KEY=.*its private key"):
        Settings.from_env(mismatch)
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(SettingsError, match="expected a password, found none"):
        Settings.from_env({**env, "LOOM_ETCD_PASSWORD_FILE": str(tmp_path / "empty")})


def test_the_client_itself_refuses_certificates_or_users_over_plain_http() -> None:
    with pytest.raises(ValueError, match="need https"):
        EtcdClient(["http://127.0.0.1:2379"], access=EtcdAccess(user="loom", password="x"))


# --------------------------------------------------------------------------- a stub etcd


@dataclass
class Stub:
    """The gateway's answers that matter here: a token per authentication, which
    ``expire`` makes etcd forget, and ranges only with the current token."""

    tokens: int = 0
    valid: str | None = None
    denied: bool = False
    plain: bool = False  # refuse as etcd's HTTP server does, in plain text
    seen: list[tuple[str, str | None]] = field(default_factory=list)

    def expire(self) -> None:
        self.valid = None

    def answer(self, path: str, body: dict[str, str], token: str | None) -> tuple[int, object]:
        self.seen.append((path, token))
        if path == "/v3/auth/authenticate":
            if body.get("name") != "loom" or body.get("password") != PASSWORD:
                message = "etcdserver: authentication failed, invalid user ID or password"
                return 400, {"error": message, "code": 3, "message": message}
            self.tokens += 1
            self.valid = f"token-{self.tokens}"
            return 200, {"header": {"revision": "7"}, "token": self.valid}
        if token is None:
            message = "etcdserver: user name is empty"
            return 400, {"error": message, "code": 3, "message": message}
        if token != self.valid:
            message = "etcdserver: invalid auth token"
            if path == "/v3/lease/keepalive":
                return 200, {"error": {"grpc_code": 16, "http_code": 401, "message": message}}
            return 401, {"error": message, "code": 16, "message": message}
        if self.denied:
            return 403, {"code": 7, "message": "etcdserver: permission denied"}
        if self.plain:
            return 400, "CommonName of client sending a request against gateway will be ignored"
        if path == "/v3/lease/keepalive":
            return 200, {"result": {"header": {"revision": "7"}, "TTL": "2"}}
        return 200, {"header": {"revision": "7"}, "kvs": []}


def serve(pki: Pki, stub: Stub) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, reply = stub.answer(self.path, body, self.headers.get("Authorization"))
            data = (reply if isinstance(reply, str) else json.dumps(reply)).encode() + b"\n"
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_cert))
    context.verify_mode = ssl.CERT_REQUIRED  # etcd's --client-cert-auth
    context.load_cert_chain(pki.cert("etcd-server"), pki.key("etcd-server"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


@pytest.fixture
def stub(pki: Pki) -> Iterator[tuple[Stub, str]]:
    state = Stub()
    server = serve(pki, state)
    yield state, f"https://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def access(pki: Pki, password: str = PASSWORD, client: Pki | None = None) -> EtcdAccess:
    client = client or pki
    cert, key = str(client.cert("etcd-client")), str(client.key("etcd-client"))
    return EtcdAccess(str(pki.ca_cert), cert, key, "loom", password)


def test_a_token_is_got_once_and_sent_with_every_request(pki: Pki, stub: tuple[Stub, str]) -> None:
    state, endpoint = stub
    client = EtcdClient([endpoint], timeout=2.0, access=access(pki))
    client.get("/loom/a")
    client.get_prefix("/loom/")
    assert client.authentications == 1 and client.revision == 7
    assert state.seen[1:] == [("/v3/kv/range", "token-1")] * 2


def test_a_token_etcd_no_longer_takes_is_renewed_once_and_the_request_sent_again(
    pki: Pki, stub: tuple[Stub, str]
) -> None:
    state, endpoint = stub
    client = EtcdClient([endpoint], timeout=2.0, access=access(pki))
    client.get("/loom/a")
    state.expire()
    assert client.get("/loom/a") is None
    state.expire()
    assert client.lease_keepalive(1) == 2  # the gateway's stream says so in its own way
    assert client.authentications == 3
    assert [token for path, token in state.seen if path == "/v3/kv/range"] == [
        "token-1",
        "token-1",
        "token-2",
    ]


def test_a_wrong_password_no_user_missing_rights_or_a_plain_refusal_are_access_denied(
    pki: Pki, stub: tuple[Stub, str]
) -> None:
    state, endpoint = stub
    wrong = EtcdClient([endpoint], timeout=2.0, access=access(pki, password="guess"))
    with pytest.raises(StoreAccessDenied, match=r"refused user 'loom': .*invalid user ID"):
        wrong.get("/loom/a")
    nobody = replace(access(pki), user=None, password="")
    with pytest.raises(StoreAccessDenied, match=r"to nobody: .*user name is empty"):
        EtcdClient([endpoint], timeout=2.0, access=nobody).get("/loom/a")
    state.denied = True
    with pytest.raises(StoreAccessDenied, match="permission denied"):
        EtcdClient([endpoint], timeout=2.0, access=access(pki)).get("/loom/a")
    state.denied, state.plain = False, True
    with pytest.raises(StoreAccessDenied, match="HTTP 400: CommonName of client"):
        EtcdClient([endpoint], timeout=2.0, access=access(pki)).get("/loom/a")


def test_a_client_without_a_certificate_of_the_ca_is_refused_in_the_handshake(
    pki: Pki, other_ca: Pki, stub: tuple[Stub, str]
) -> None:
    _, endpoint = stub
    for who in (
        EtcdAccess(str(pki.ca_cert), user="loom", password=PASSWORD),
        access(pki, client=other_ca),
    ):
        with pytest.raises(StoreAccessDenied, match="refused TLS") as caught:
            EtcdClient([endpoint], timeout=2.0, access=who).get("/loom/a")
        assert isinstance(caught.value, StoreUnavailable)
    mine = access(pki)
    stranger = EtcdAccess(str(other_ca.ca_cert), mine.cert, mine.key)  # etcd's CA unknown
    with pytest.raises(StoreAccessDenied, match="CERTIFICATE_VERIFY_FAILED"):
        EtcdClient([endpoint], timeout=2.0, access=stranger).get("/loom/a")
