"""LOOM_API_CERT, LOOM_API_KEY and LOOM_API_CA: the REST API over HTTPS. Both of the
first two or neither; the CA only with them; every file read at start, a bad one named
with what was expected. Certificates from the lab's CA (``make pki``)."""

from __future__ import annotations

import shutil
import ssl
from pathlib import Path

import pytest

from controller.settings import ApiTls, Settings, SettingsError
from mininet_scenarios.harness.pki import API, Pki, ensure

SERVER, CLIENT = API

if shutil.which("openssl") is None:  # pragma: no cover - the lab's certificates need it
    pytest.skip("openssl is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return ensure(tmp_path_factory.mktemp("pki"), (SERVER,))


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return ensure(tmp_path_factory.mktemp("other"), (SERVER,))


def _env(pki: Pki) -> dict[str, str]:
    return {
        "LOOM_API_CERT": str(pki.cert(SERVER)),
        "LOOM_API_KEY": str(pki.key(SERVER)),
        "LOOM_API_CA": str(pki.ca_cert),
    }


def test_plain_http_is_the_default() -> None:
    assert Settings.from_env({}).api_tls is None
    assert Settings.from_env({"LOOM_API_CERT": "", "LOOM_API_KEY": ""}).api_tls is None


def test_the_files_make_a_server_context_of_tls_1_2_at_least(pki: Pki) -> None:
    env = _env(pki)
    tls = Settings.from_env(env).api_tls
    assert tls == ApiTls(env["LOOM_API_CERT"], env["LOOM_API_KEY"], env["LOOM_API_CA"])
    ctx = tls.context()
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    del env["LOOM_API_CA"]
    one_way = Settings.from_env(env).api_tls
    assert one_way is not None and one_way.ca is None
    assert one_way.context().verify_mode == ssl.CERT_NONE


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"LOOM_API_KEY": ""}, "LOOM_API_KEY is unset: expected the API's certificate and its"),
        ({"LOOM_API_CERT": ""}, "LOOM_API_CERT is unset: expected the API's certificate and"),
        (
            {"LOOM_API_CERT": "", "LOOM_API_KEY": ""},
            "LOOM_API_CA is set: expected with LOOM_API_CERT and LOOM_API_KEY",
        ),
        ({"LOOM_API_CERT": "/nonexistent.pem"}, "LOOM_API_CERT='/nonexistent.pem': expected a"),
        ({"LOOM_API_KEY": "/nonexistent.key"}, "LOOM_API_KEY='/nonexistent.key': expected a"),
        ({"LOOM_API_CA": "/nonexistent/ca.pem"}, "LOOM_API_CA='/nonexistent/ca.pem': expected"),
    ],
)
def test_a_bad_setting_is_named_with_what_was_expected(
    pki: Pki, change: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match="expected") as caught:
        Settings.from_env({**_env(pki), **change})
    assert message in str(caught.value), caught.value


def test_files_that_are_not_a_pair_or_not_a_ca_are_refused_by_name(
    pki: Pki, other: Pki, tmp_path: Path
) -> None:
    mismatch = {**_env(pki), "LOOM_API_KEY": str(other.key(SERVER))}
    with pytest.raises(SettingsError, match=r"LOOM_API_CERT=.*LOOM_API_KEY=.*its private key"):
        Settings.from_env(mismatch)
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    with pytest.raises(SettingsError, match=r"LOOM_API_CA=.*expected PEM CA certificates"):
        Settings.from_env({**_env(pki), "LOOM_API_CA": str(tmp_path / "junk.pem")})
    with pytest.raises(SettingsError, match=r"LOOM_API_CERT=.*expected a PEM certificate"):
        Settings.from_env({**_env(pki), "LOOM_API_CERT": str(tmp_path / "junk.pem")})
