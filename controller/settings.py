"""Controller settings from ``LOOM_*`` environment variables, with clear errors.

Every variable, its default and its policy ``fabric`` key: docs/settings.md (held to this
module by tests/unit/test_settings_doc.py). A policy file's ``fabric`` section provides
defaults that these variables override.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from controller.cluster.etcd import parse_url
from controller.engineer import TeConfig
from controller.fabric import FabricConfig
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


CLUSTER_FORM = "etcd://HOST:PORT[,HOST:PORT...][/PREFIX]"


def _cluster(raw: str) -> str:
    parse_url(raw)
    return raw


@dataclass(frozen=True)
class Settings:
    fabric: FabricConfig
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9108
    api_token: str | None = None
    cluster: str | None = None  # an etcd:// URL; None: one process, as always
    cluster_address: str = "127.0.0.1"

    @staticmethod
    def from_env(
        env: Mapping[str, str] = os.environ, base: FabricSettings | None = None
    ) -> Settings:
        """Settings from the environment, over ``base`` (the policy file's fabric section)
        when given, over Loom's defaults."""
        d, t = FabricConfig(), TeConfig()
        cluster = _get(env, "LOOM_CLUSTER", _cluster, None, CLUSTER_FORM)
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
            cluster=cluster,
            cluster_address=env.get("LOOM_CLUSTER_ADDRESS") or "127.0.0.1",
        )
