"""docs/settings.md lists every LOOM_* variable the code reads or sets, and no other, with
the code's defaults and the policy's fabric keys."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from controller.policy.schema import FabricSettings
from controller.qos import TrafficClass
from controller.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "settings.md").read_text()
ROWS = re.findall(r"^\| `(LOOM_[A-Z_]+)` \| ([^|]*) \|(.*)\|$", DOC, re.MULTILINE)


def in_the_code() -> set[str]:
    """Every LOOM_* name a program of the repository (not its tests) spells out."""
    files = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    names: set[str] = set()
    for name in files:
        if not name.startswith("tests/"):
            names.update(re.findall(r"\"(LOOM_[A-Z][A-Z_]*)\"", (ROOT / name).read_text()))
    return names


def shown(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return ",".join(f"{c.dscp}:{c.queue}" for c in value if isinstance(c, TrafficClass))
    return str(value)


def test_every_variable_the_code_reads_is_documented_and_no_other() -> None:
    documented = [name for name, _, _ in ROWS]
    assert len(documented) == len(set(documented))
    assert set(documented) == in_the_code()


def test_the_documented_defaults_are_the_codes() -> None:
    s = Settings.from_env({})
    f, te = s.fabric, s.fabric.te
    defaults = {
        "LOOM_TE": te.enabled,
        "LOOM_TE_INTERVAL": te.te_interval,
        "LOOM_ELEPHANT_SHARE": te.elephant_share,
        "LOOM_PLACE_NEW_FLOWS": te.place_new,
        "LOOM_KEEP_PLACED": te.keep_placed,
        "LOOM_ACK_PRIORITY": te.ack_priority,
        "LOOM_PATH_POLICY": te.path_policy,
        "LOOM_QOS": f.qos,
        "LOOM_JOB_QUEUES": f.job_levels,
        "LOOM_FAST_FAILOVER": f.fast_failover,
        "LOOM_POLL_INTERVAL": f.poll_interval,
        "LOOM_LLDP_INTERVAL": f.lldp_interval,
        "LOOM_LLDP_TIMEOUT": f.lldp_timeout,
        "LOOM_METRICS_HOST": s.metrics_host,
        "LOOM_METRICS_PORT": s.metrics_port,
        "LOOM_CLUSTER_ADDRESS": s.cluster_address,
    }
    documented = {name: default.strip() for name, default, _ in ROWS}
    assert {name: documented[name] for name in defaults} == {
        name: shown(value) for name, value in defaults.items()
    }
    unset = {"LOOM_LINK_CAPACITY_MBPS": f.link_capacity_mbps, "LOOM_API_TOKEN": s.api_token}
    unset["LOOM_CLUSTER"] = s.cluster
    e = s.etcd
    unset |= {"LOOM_ETCD_CA": e.ca, "LOOM_ETCD_CERT": e.cert, "LOOM_ETCD_KEY": e.key}
    unset |= {"LOOM_ETCD_USER": e.user, "LOOM_ETCD_PASSWORD_FILE": e.password or None}
    assert all(value is None and documented[name].startswith("(") for name, value in unset.items())


def test_the_policy_keys_named_are_the_fabric_sections() -> None:
    keys = re.findall(r"\| `([a-z_]+)` \|", "".join(f"|{rest}|" for _, _, rest in ROWS))
    assert keys and set(keys) <= set(FabricSettings.model_fields)
    for key in set(FabricSettings.model_fields) - set(keys):
        assert f"`{key}`" in DOC
