"""The policy file: every error class names the file, the line, the key and what was
expected; valid files load; ``loom-check`` exits 0 or 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.policy import PolicyError, load_policy, parse_policy
from controller.policy.cli import main as loom_check

GOOD = """\
version: 1
fabric:
  poll_interval: 0.5
tenants:
  - name: red
    hosts:
      - {mac: 02:00:00:00:00:01, ip: 10.0.0.2}
      - {ip: 10.0.0.3, switch: 7, port: 2}
  - name: blue
    bandwidth_mbps: 20
    traffic_classes: [bulk]
    hosts:
      - {mac: "02:00:00:00:00:09"}
jobs:
  - {name: ring1, tenant: red, hosts: [10.0.0.2, 10.0.0.3]}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as err:
        parse_policy(text, "p.yaml")
    return [str(i) for i in err.value.issues]


def test_a_valid_policy_loads() -> None:
    policy = parse_policy(GOOD, "p.yaml")
    assert [t.name for t in policy.tenants] == ["red", "blue"]
    assert policy.tenants[0].hosts[0].mac == "02:00:00:00:00:01"  # unquoted MAC kept as text
    assert policy.fabric.unassigned_hosts == "deny" and policy.jobs[0].hosts == [
        "10.0.0.2",
        "10.0.0.3",
    ]


def test_the_shipped_example_is_valid() -> None:
    policy = load_policy("controller/policy/example-policy.yaml")
    assert len(policy.tenants) == 3 and policy.jobs[0].name == "llm-pretrain"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "  poll_interval: 0.5",
            "  pol_interval: 0.5",
            "p.yaml:3: fabric.pol_interval: unknown key; expected one of poll_interval",
        ),
        (
            "  poll_interval: 0.5",
            "  poll_interval: soon",
            "p.yaml:3: fabric.poll_interval: Input should be a valid number",
        ),
        (
            "ip: 10.0.0.2}",
            "ip: 10.0.0.256}",
            "p.yaml:7: tenants[0].hosts[0].ip: '10.0.0.256' does not parse as an IPv4 address",
        ),
        (
            "ip: 10.0.0.2}",
            "ip: fe80::1}",
            "p.yaml:7: tenants[0].hosts[0].ip: 'fe80::1' is IPv6; Loom tenants use IPv4 addresses",
        ),
        (
            '{mac: "02:00:00:00:00:09"}',
            '{mac: "02:00:00:00:09"}',
            "p.yaml:13: tenants[1].hosts[0].mac: '02:00:00:00:09' is not a MAC address",
        ),
        (
            '{mac: "02:00:00:00:00:09"}',
            '{mac: "02:00:00:00:00:01"}',
            "p.yaml:13: tenants[1].hosts[0].mac: 02:00:00:00:00:01 is already in tenant 'red'",
        ),
        (
            "{ip: 10.0.0.3, switch: 7, port: 2}",
            "{ip: 10.0.0.3, port: 2}",
            "p.yaml:8: tenants[0].hosts[1]: port given without switch",
        ),
        (
            "bandwidth_mbps: 20",
            "bandwidth_mbps: -5",
            "p.yaml:10: tenants[1].bandwidth_mbps: Input should be greater than 0",
        ),
        (
            "traffic_classes: [bulk]",
            "traffic_classes: [gold]",
            "p.yaml:11: tenants[1].traffic_classes: 'gold' is not a traffic class",
        ),
        (
            "  - name: blue",
            "  - name: Blue!",
            "p.yaml:9: tenants[1].name: 'Blue!' is not a tenant name",
        ),
        (
            "tenant: red, hosts",
            "tenant: green, hosts",
            "p.yaml:15: jobs[0].tenant: unknown tenant 'green'; expected one of blue, red",
        ),
        (
            "hosts: [10.0.0.2, 10.0.0.3]",
            "hosts: [10.0.0.2, 10.0.0.9]",
            "p.yaml:15: jobs[0].hosts[1]: 10.0.0.9 is not an IP of tenant 'red'",
        ),
        (
            "tenant: red, hosts",
            "tenant: red, weight: 0, hosts",
            "p.yaml:15: jobs[0].weight: Input should be greater than or equal to 1 (got 0)",
        ),
        ("version: 1", "version: 2", "p.yaml:1: version: Input should be 1"),
        (
            "  - name: blue",
            "  - name: red",
            "p.yaml:9: tenants[1].name: tenant 'red' is declared twice",
        ),
    ],
)
def test_each_error_names_file_line_key_and_expectation(old: str, new: str, expected: str) -> None:
    text = GOOD.replace(old, new, 1)
    assert text != GOOD
    found = problems(text)
    assert any(p.startswith(expected) for p in found), found


def test_yaml_syntax_and_duplicate_keys_and_wrong_shapes() -> None:
    assert problems("tenants: [\n  - name: a\n")[0].startswith("p.yaml:2: (syntax): not valid YAML")
    dup = problems("fabric:\n  te: true\n  te: false\n")
    assert dup[0] == "p.yaml:3: fabric.te: key given twice"
    assert problems("- 1\n- 2\n")[0].startswith("p.yaml:1: (document): expected a mapping")
    many = problems("tenants:\n  - name: a\n    hosts: []\n    colour: red\n")
    assert len(many) == 2  # every problem at once
    assert any("tenants[0].hosts: List should have at least 1 item" in p for p in many)


def test_loom_check_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD)
    bad.write_text(GOOD.replace("10.0.0.2}", "10.0.0.999}"))
    assert loom_check([str(good)]) == 0
    assert "ok: 2 tenants, 3 hosts, 1 jobs" in capsys.readouterr().out
    assert loom_check([str(good), str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:7: tenants[0].hosts[0].ip" in err and "invalid (1 problem)" in err
    assert loom_check([str(tmp_path / "missing.yaml")]) == 1
    assert "cannot read" in capsys.readouterr().err
