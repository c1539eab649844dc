"""The REST API over HTTPS, met as a user meets it: Ryu's WSGI server made TLS by
``serve_https`` as the controller makes it, on loopback, with certificates from the lab's
CA (``mininet_scenarios/harness/pki.py``). A client that trusts the CA is answered; plain
HTTP to the TLS port is not; with ``LOOM_API_CA`` a client without a certificate of that
CA is refused, one with it answered; the server goes on after each refusal."""

from __future__ import annotations

import shutil
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.api import LoomApi
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.launcher.client import LoomClient, LoomError, client_from
from controller.launcher.jobcli import build_parser
from controller.metrics import LoomMetrics, ShimCounts
from controller.settings import Settings
from mininet_scenarios.harness.client import LabClient
from mininet_scenarios.harness.pki import API, Pki, ensure
from tests.restserver import ShimApp, serving
from tests.sim import LoomSim
from topologies import fat_tree

pytest.importorskip("ryu.app.wsgi")
SERVER, CLIENT = API
if shutil.which("openssl") is None:  # pragma: no cover - the lab's certificates need it
    pytest.skip("openssl is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return ensure(tmp_path_factory.mktemp("pki"), API)


def _settings(pki: Pki, ca: bool) -> Settings:
    env = {"LOOM_API_CERT": str(pki.cert(SERVER)), "LOOM_API_KEY": str(pki.key(SERVER))}
    if ca:
        env["LOOM_API_CA"] = str(pki.ca_cert)
    return Settings.from_env(env)


COUNTS: dict[int, ShimCounts] = {}  # each server's counts, by its port


def _served(pki: Pki, ca: bool) -> Iterator[int]:
    tls = _settings(pki, ca).api_tls
    assert tls is not None
    sim = LoomSim(fat_tree(4), FabricConfig(te=TeConfig(enabled=False))).start()
    app = ShimApp(LoomMetrics(sim.core).shim)
    with serving(LoomApi(sim.core, lambda: sim.now), app, tls.context()) as port:
        COUNTS[port] = app.counts
        yield port


@pytest.fixture
def https(pki: Pki) -> Iterator[int]:
    yield from _served(pki, ca=False)


@pytest.fixture
def mutual(pki: Pki) -> Iterator[int]:
    yield from _served(pki, ca=True)


def _client(pki: Pki, certificate: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    if certificate:
        ctx.load_cert_chain(str(pki.cert(CLIENT)), str(pki.key(CLIENT)))
    return ctx


def _topology(port: int, ctx: ssl.SSLContext) -> object:
    return LabClient(f"https://127.0.0.1:{port}", context=ctx).get("/loom/v1/topology")


def test_a_client_that_trusts_the_ca_is_answered_over_https(https: int, pki: Pki) -> None:
    answer = _topology(https, _client(pki))
    assert isinstance(answer, dict) and answer["switches"]


def test_plain_http_to_the_tls_port_is_not_answered(
    https: int, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{https}/loom/v1/topology", timeout=5)
    assert _topology(https, _client(pki))  # the server goes on
    said = [r.getMessage() for r in caplog.records if r.name == "loom.api"]
    assert len(said) == 1 and said[0].startswith("REST TLS from 127.0.0.1:")
    assert "http request" in said[0]  # one line, no traceback
    assert COUNTS[https].api_tls_refused == 1  # and counted


def test_a_client_that_does_not_trust_the_ca_refuses_the_server(https: int) -> None:
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        _topology(https, ssl.create_default_context())


def test_with_the_ca_set_a_client_without_a_certificate_is_refused(mutual: int, pki: Pki) -> None:
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        _topology(mutual, _client(pki))
    assert _topology(mutual, _client(pki, certificate=True))
    assert COUNTS[mutual].api_tls_refused == 1


def test_with_the_ca_set_a_certificate_of_another_ca_is_refused(
    mutual: int, pki: Pki, tmp_path: Path
) -> None:
    other = ensure(tmp_path / "other", (CLIENT,))
    ctx = _client(pki)
    ctx.load_cert_chain(str(other.cert(CLIENT)), str(other.key(CLIENT)))
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        _topology(mutual, ctx)
    assert _topology(mutual, _client(pki, certificate=True))


def _loom_job(argv: list[str], environ: dict[str, str]) -> LoomClient:
    parser = build_parser()
    return client_from(parser.parse_args(["order", "--hosts", "10.0.0.1", *argv]), environ, parser)


def test_the_launcher_takes_an_https_api_and_the_ca_to_check_it_against(
    https: int, pki: Pki
) -> None:
    api, ca = f"https://127.0.0.1:{https}", str(pki.ca_cert)
    assert _loom_job(["--api", api, "--ca-file", ca], {}).order(["10.0.0.1"]).hosts
    assert _loom_job([], {"LOOM_API": api, "LOOM_CA_FILE": ca}).order(["10.0.0.1"]).hosts
    with pytest.raises(LoomError, match="CERTIFICATE_VERIFY_FAILED") as caught:
        _loom_job(["--api", api], {}).order(["10.0.0.1"])  # the system's CAs
    assert caught.value.unreachable


def test_the_launcher_refuses_a_ca_file_it_cannot_use(
    pki: Pki, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    for argv in (
        ["--api", "http://127.0.0.1:8080", "--ca-file", str(pki.ca_cert)],
        ["--api", "https://127.0.0.1:8080", "--ca-file", str(tmp_path / "junk.pem")],
        ["--api", "https://127.0.0.1:8080", "--ca-file", str(tmp_path / "none.pem")],
    ):
        with pytest.raises(SystemExit) as done:
            _loom_job(argv, {})
        assert done.value.code == 2
        assert "--ca-file" in capsys.readouterr().err


def test_the_launcher_presents_its_certificate_where_the_api_asks_for_one(
    mutual: int, pki: Pki, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api, ca = f"https://127.0.0.1:{mutual}", str(pki.ca_cert)
    cert, key = str(pki.cert(CLIENT)), str(pki.key(CLIENT))
    with pytest.raises(LoomError):
        _loom_job(["--api", api, "--ca-file", ca], {}).order(["10.0.0.1"])  # none: refused
    flags = ["--api", api, "--ca-file", ca, "--cert-file", cert, "--key-file", key]
    assert _loom_job(flags, {}).order(["10.0.0.1"]).hosts
    env = {"LOOM_API": api, "LOOM_CA_FILE": ca, "LOOM_CERT_FILE": cert, "LOOM_KEY_FILE": key}
    assert _loom_job([], env).order(["10.0.0.1"]).hosts
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    for argv, named in (
        (["--api", api, "--ca-file", ca, "--cert-file", str(tmp_path / "junk.pem")], "--cert"),
        (["--api", api, "--key-file", key], "--key-file"),
        (["--api", "http://127.0.0.1:8080", "--cert-file", cert], "--cert-file"),
    ):
        with pytest.raises(SystemExit) as done:
            _loom_job(argv, {})
        assert done.value.code == 2 and named in capsys.readouterr().err
