"""Settings from ``LOOM_*`` variables: defaults with none set, each bad value refused with
the variable, what it held and what was expected, and the cluster setting."""

from __future__ import annotations

import pytest

from controller.settings import CLUSTER_FORM, Settings, SettingsError


def test_no_variable_gives_one_process_with_the_defaults() -> None:
    s = Settings.from_env({})
    assert s.cluster is None and not s.fabric.fresh_detours
    assert s.metrics_port == 9108 and s.api_token is None
    assert s.fabric.te.enabled and s.fabric.te.place_new and s.fabric.fast_failover


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("LOOM_POLL_INTERVAL", "0", "seconds > 0"),
        ("LOOM_ELEPHANT_SHARE", "1.5", "a share in (0, 1]"),
        ("LOOM_TE", "maybe", "on or off"),
        ("LOOM_METRICS_PORT", "70000", "a TCP port 0-65535"),
        ("LOOM_CLUSTER", "http://127.0.0.1:2379", CLUSTER_FORM),
        ("LOOM_CLUSTER", "etcd://", CLUSTER_FORM),
        ("LOOM_CLUSTER", "etcd://127.0.0.1:notaport", CLUSTER_FORM),
    ],
)
def test_a_bad_value_names_the_variable_and_what_was_expected(
    name: str, value: str, expected: str
) -> None:
    with pytest.raises(SettingsError) as err:
        Settings.from_env({name: value})
    assert str(err.value) == f"{name}={value!r}: expected {expected}"


def test_a_cluster_url_makes_an_instance_that_agrees_with_the_others() -> None:
    url = "etcd://127.0.0.1:21379,127.0.0.1:22379/loom"
    s = Settings.from_env({"LOOM_CLUSTER": url, "LOOM_CLUSTER_ADDRESS": "10.0.0.5"})
    assert s.cluster == url and s.cluster_address == "10.0.0.5"
    assert s.fabric.fresh_detours  # detours searched afresh: every instance holds the same
