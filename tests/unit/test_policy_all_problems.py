"""One run names every problem of a policy file: the checks across entries (duplicates, a
host in two tenants, a job outside its tenant) run on every entry that validated, even
when others did not, and an entry that failed never causes a second, derived error."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.policy.cli import main as loom_check
from tests.unit.test_policy import GOOD, problems

BAD_IP = ("{ip: 10.0.0.3, switch: 7, port: 2}", "{ip: 10.0.0.300, switch: 7, port: 2}")
DUP_HOST = ('{mac: "02:00:00:00:00:09"}', '{mac: "02:00:00:00:00:01"}')
IP_ERROR = "p.yaml:8: tenants[0].hosts[1].ip: '10.0.0.300' does not parse as an IPv4 address"
DUP_ERROR = (
    "p.yaml:13: tenants[1].hosts[0].mac: 02:00:00:00:00:01 is already in tenant 'red' "
    "(tenants[0].hosts[0].mac); a host belongs to one tenant"
)


def edit(*changes: tuple[str, str]) -> str:
    text = GOOD
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def test_a_bad_address_and_a_duplicate_host_are_both_named() -> None:
    found = problems(edit(BAD_IP, DUP_HOST))
    assert len(found) == 2, found  # the job on the bad host's tenant is not blamed for it
    assert found[0].startswith(IP_ERROR) and found[1] == DUP_ERROR, found


def test_loom_check_names_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(edit(BAD_IP, DUP_HOST))
    assert loom_check([str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:8: tenants[0].hosts[1].ip: '10.0.0.300'" in err, err
    assert f"{path}:13: tenants[1].hosts[0].mac: 02:00:00:00:00:01 is already in" in err, err
    assert "invalid (2 problems)" in err, err


def test_a_host_listed_twice_beside_a_bad_field_of_its_own_tenant() -> None:
    text = edit(
        ("    bandwidth_mbps: 20", "    bandwidth_mbps: -5"),
        (
            '{mac: "02:00:00:00:00:09"}',
            '{mac: "02:00:00:00:00:09"}\n      - {mac: 02:00:00:00:00:09, ip: 10.0.0.9}',
        ),
    )
    found = problems(text)
    assert len(found) == 2, found
    assert found[0].startswith("p.yaml:10: tenants[1].bandwidth_mbps: Input should be greater")
    assert found[1] == "p.yaml:14: tenants[1].hosts[1].mac: 02:00:00:00:00:09 is listed twice"


def test_a_declared_twice_tenant_beside_a_bad_job() -> None:
    text = edit(
        ("  - name: blue", "  - name: red"),
        ("tenant: red, hosts", "tenant: red, weight: 0, hosts"),
    )
    found = problems(text)
    assert len(found) == 2, found
    assert found[0] == "p.yaml:9: tenants[1].name: tenant 'red' is declared twice"
    assert found[1].startswith("p.yaml:15: jobs[0].weight: Input should be greater than")


def test_every_bad_job_is_named_beside_a_bad_one() -> None:
    text = edit(
        ("tenant: red, hosts", "tenant: red, weight: 0, hosts"),
        (
            "hosts: [10.0.0.2, 10.0.0.3]}",
            "hosts: [10.0.0.2, 10.0.0.3]}\n"
            "  - {name: ring2, tenant: green, hosts: [10.0.0.2, 10.0.0.3]}\n"
            "  - {name: ring2, tenant: red, hosts: [10.0.0.2, 10.0.0.9]}",
        ),
    )
    found = problems(text)
    assert [p.split(": ", 2)[:2] for p in found] == [
        ["p.yaml:15", "jobs[0].weight"],
        ["p.yaml:16", "jobs[1].tenant"],
        ["p.yaml:17", "jobs[2].hosts[1]"],
        ["p.yaml:17", "jobs[2].name"],
    ], found


def test_a_failed_entry_causes_no_derived_error() -> None:
    # host 0 of red fails on its MAC: its IP is unknown, so the job is not blamed for it
    bad_mac = ("{mac: 02:00:00:00:00:01, ip: 10.0.0.2}", "{mac: 02:00:00:00:01, ip: 10.0.0.2}")
    assert [p.split(":")[1] for p in problems(edit(bad_mac))] == ["7"]
    # a tenant whose name fails is no tenant to name: its job is not "unknown tenant"
    bad_name = ("  - name: red", "  - name: Red!")
    found = problems(edit(bad_name))
    assert len(found) == 1 and "tenants[0].name: 'Red!' is not a tenant name" in found[0], found
    # tenants that are not a list: nothing to check jobs against
    found = problems("tenants: 3\njobs:\n  - {name: j, tenant: red, hosts: [10.0.0.2, 10.0.0.3]}\n")
    assert len(found) == 1 and found[0].startswith("p.yaml:1: tenants: Input should be"), found


def test_entries_that_do_not_parse_are_skipped_not_crashed() -> None:
    text = (
        "tenants:\n"
        "  - 7\n"
        "  - {name: a, hosts: [5, {ip: 10.0.0.2}, {ip: 10.0.0.2}]}\n"
        "  - {name: a, hosts: {ip: 10.0.0.2}}\n"
        "jobs: [nope, {name: j, tenant: b, hosts: [10.0.0.2, 10.0.0.3]}]\n"
    )
    found = problems(text)
    keys = [p.split(": ", 2)[1] for p in found]
    assert "tenants[0]" in keys and "tenants[1].hosts[0]" in keys and "jobs[0]" in keys, found
    assert "tenants[1].hosts[2].ip" in keys, found  # listed twice: found beside the rest
    assert "tenants[2].name" in keys, found  # declared twice, though its hosts failed
    assert not any("unknown tenant" in p for p in found), found  # tenants[0] had no name
