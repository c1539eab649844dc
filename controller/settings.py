"""Controller settings from ``LOOM_*`` environment variables, with clear errors.

Every variable, its default and its policy ``fabric`` key: docs/settings.md (held to this
module by tests/unit/test_settings_doc.py). A policy file's ``fabric`` section provides
defaults that these variables override.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from controller.cluster.etcd import URL_FORM, EtcdAccess, parse_url
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.qos import job_levels
from controller.vocabulary import POLICIES

if TYPE_CHECKING:
    from controller.policy.schema import FabricSettings

T = TypeVar("T")


class SettingsError(ValueError):
    """A LOOM_* variable holds something that is not a valid value."""


def _get(
    env: Mapping[str, str], name: str, parse: Callable[[str], T], default: T, expected: str
) -> T:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return parse(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r}: expected {expected}") from None


def _positive(raw: str) -> float:
    value = float(raw)
    if value <= 0:
        raise ValueError(raw)
    return value


def _share(raw: str) -> float:
    value = float(raw)
    if not 0 < value <= 1:
        raise ValueError(raw)
    return value


def _switch(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("on", "1", "true", "yes"):
        return True
    if value in ("off", "0", "false", "no"):
        return False
    raise ValueError(raw)


def _policy(raw: str) -> str:
    if raw not in POLICIES:
        raise ValueError(raw)
    return raw


def _port(raw: str) -> int:
    value = int(raw)
    if not 0 <= value <= 65535:
        raise ValueError(raw)
    return value


CLUSTER_FORM = URL_FORM
TLS_VARIABLES = ("LOOM_ETCD_CA", "LOOM_ETCD_CERT", "LOOM_ETCD_KEY")
AUTH_VARIABLES = ("LOOM_ETCD_USER", "LOOM_ETCD_PASSWORD_FILE")


def _cluster(raw: str) -> str:
    parse_url(raw)
    return raw


def _readable(env: Mapping[str, str], name: str, what: str) -> str | None:
    path = env.get(name) or None
    if path is not None:
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise SettingsError(f"{name}={path!r}: expected {what} ({exc.strerror})") from None
    return path


def _pair(env: Mapping[str, str], first: str, second: str, what: str) -> None:
    for name, other in ((first, second), (second, first)):
        if env.get(name) and not env.get(other):
            raise SettingsError(f"{other} is unset: expected {what}, with {name}")


def _password(path: str) -> str:
    with open(path, encoding="utf-8") as file:
        password = file.read().rstrip("\r\n")
    if not password:
        raise SettingsError(f"LOOM_ETCD_PASSWORD_FILE={path!r}: expected a password, found none")
    return password


def _etcd_access(env: Mapping[str, str], cluster: str | None) -> EtcdAccess:
    """TLS and user settings for etcd: only with a cluster, TLS only with ``etcds://``,
    and every file read now, so a bad one stops the start with its variable named."""
    given = [name for name in (*TLS_VARIABLES, *AUTH_VARIABLES) if env.get(name)]
    if not given:
        return EtcdAccess()
    if cluster is None or not cluster.startswith("etcds://"):
        raise SettingsError(
            f"{given[0]} is set: expected with LOOM_CLUSTER=etcds://... (etcd over TLS), "
            f"not LOOM_CLUSTER={cluster!r}"
        )
    _pair(env, "LOOM_ETCD_CERT", "LOOM_ETCD_KEY", "the client certificate and its key")
    _pair(env, "LOOM_ETCD_USER", "LOOM_ETCD_PASSWORD_FILE", "the etcd user and its password")
    ca = _readable(env, "LOOM_ETCD_CA", "a readable file of PEM CA certificates")
    cert = _readable(env, "LOOM_ETCD_CERT", "a readable PEM client certificate")
    key = _readable(env, "LOOM_ETCD_KEY", "a readable PEM private key, not encrypted")
    secret = _readable(env, "LOOM_ETCD_PASSWORD_FILE", "a readable file holding the password")
    access = EtcdAccess(ca, cert, key, env.get("LOOM_ETCD_USER") or None)
    if secret is not None:
        try:
            access = EtcdAccess(ca, cert, key, access.user, _password(secret))
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"LOOM_ETCD_PASSWORD_FILE={secret!r}: unreadable ({exc})") from None
    try:  # ssl.SSLError is an OSError
        EtcdAccess(ca).context()
    except (OSError, ValueError) as exc:
        raise SettingsError(f"LOOM_ETCD_CA={ca!r}: expected PEM CA certificates ({exc})") from None
    try:
        access.context()
    except (OSError, ValueError) as exc:
        raise SettingsError(
            f"LOOM_ETCD_CERT={cert!r}, LOOM_ETCD_KEY={key!r}: expected a PEM certificate and "
            f"its private key, not encrypted ({exc})"
        ) from None
    return access


API_TLS_VARIABLES = ("LOOM_API_CERT", "LOOM_API_KEY", "LOOM_API_CA")


@dataclass(frozen=True)
class ApiTls:
    """The REST API over HTTPS: the server's certificate and key and, with ``ca``, the CA
    whose certificate every client must present."""

    cert: str
    key: str
    ca: str | None = None

    def context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert, self.key)
        if self.ca is not None:
            ctx.load_verify_locations(self.ca)
            ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx


def _api_tls(env: Mapping[str, str]) -> ApiTls | None:
    """HTTPS for the REST API when LOOM_API_CERT and LOOM_API_KEY say so; every file is
    read now, so a bad one stops the start with its variable named."""
    _pair(env, "LOOM_API_CERT", "LOOM_API_KEY", "the API's certificate and its key")
    cert = _readable(env, "LOOM_API_CERT", "a readable PEM server certificate")
    key = _readable(env, "LOOM_API_KEY", "a readable PEM private key, not encrypted")
    ca = _readable(env, "LOOM_API_CA", "a readable file of PEM CA certificates")
    if cert is None or key is None:
        if ca is not None:
            raise SettingsError(
                "LOOM_API_CA is set: expected with LOOM_API_CERT and LOOM_API_KEY (HTTPS)"
            )
        return None
    try:  # ssl.SSLError is an OSError
        ApiTls(cert, key).context()
    except (OSError, ValueError) as exc:
        raise SettingsError(
            f"LOOM_API_CERT={cert!r}, LOOM_API_KEY={key!r}: expected a PEM certificate and "
            f"its private key, not encrypted ({exc})"
        ) from None
    tls = ApiTls(cert, key, ca)
    try:
        tls.context()
    except (OSError, ValueError) as exc:
        raise SettingsError(f"LOOM_API_CA={ca!r}: expected PEM CA certificates ({exc})") from None
    return tls


@dataclass(frozen=True)
class Settings:
    fabric: FabricConfig
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9108
    api_token: str | None = None
    api_tls: ApiTls | None = None  # the REST API over HTTPS; None: plain HTTP
    cluster: str | None = None  # an etcd:// URL; None: one process, as always
    cluster_address: str = "127.0.0.1"
    etcd: EtcdAccess = field(default_factory=EtcdAccess)  # how to reach a secured etcd (etcds://)

    @staticmethod
    def from_env(
        env: Mapping[str, str] = os.environ, base: FabricSettings | None = None
    ) -> Settings:
        """Settings from the environment, over ``base`` (the policy file's fabric section)
        when given, over Loom's defaults."""
        d, t = FabricConfig(), TeConfig()
        cluster = _get(env, "LOOM_CLUSTER", _cluster, None, CLUSTER_FORM)
        etcd = _etcd_access(env, cluster)
        if base is not None:
            t = TeConfig(
                enabled=base.te, elephant_share=base.elephant_share, path_policy=base.path_policy
            )
            d = FabricConfig(
                poll_interval=base.poll_interval,
                link_capacity_mbps=base.link_capacity_mbps,
                qos=base.qos,
                te=t,
            )
        te = TeConfig(
            enabled=_get(env, "LOOM_TE", _switch, t.enabled, "on or off"),
            te_interval=_get(env, "LOOM_TE_INTERVAL", _positive, t.te_interval, "seconds > 0"),
            elephant_share=_get(
                env, "LOOM_ELEPHANT_SHARE", _share, t.elephant_share, "a share in (0, 1]"
            ),
            path_policy=_get(
                env, "LOOM_PATH_POLICY", _policy, t.path_policy, " or ".join(POLICIES)
            ),
            ack_priority=_get(env, "LOOM_ACK_PRIORITY", _switch, t.ack_priority, "on or off"),
            place_new=_get(env, "LOOM_PLACE_NEW_FLOWS", _switch, t.place_new, "on or off"),
            keep_placed=_get(env, "LOOM_KEEP_PLACED", _switch, t.keep_placed, "on or off"),
        )
        fabric = FabricConfig(
            lldp_interval=_get(
                env, "LOOM_LLDP_INTERVAL", _positive, d.lldp_interval, "seconds > 0"
            ),
            lldp_timeout=_get(env, "LOOM_LLDP_TIMEOUT", _positive, d.lldp_timeout, "seconds > 0"),
            poll_interval=_get(
                env, "LOOM_POLL_INTERVAL", _positive, d.poll_interval, "seconds > 0"
            ),
            link_capacity_mbps=_get(
                env, "LOOM_LINK_CAPACITY_MBPS", _positive, d.link_capacity_mbps, "Mbit/s > 0"
            ),
            qos=_get(env, "LOOM_QOS", _switch, d.qos, "on or off"),
            fast_failover=_get(env, "LOOM_FAST_FAILOVER", _switch, d.fast_failover, "on or off"),
            fresh_detours=cluster is not None,
            job_levels=_get(
                env, "LOOM_JOB_QUEUES", job_levels, d.job_levels, "DSCP:QUEUE[,DSCP:QUEUE...]"
            ),
            te=te,
        )
        return Settings(
            fabric,
            metrics_host=env.get("LOOM_METRICS_HOST") or "127.0.0.1",
            metrics_port=_get(env, "LOOM_METRICS_PORT", _port, 9108, "a TCP port 0-65535"),
            api_token=env.get("LOOM_API_TOKEN") or None,
            api_tls=_api_tls(env),
            cluster=cluster,
            cluster_address=env.get("LOOM_CLUSTER_ADDRESS") or "127.0.0.1",
            etcd=etcd,
        )
