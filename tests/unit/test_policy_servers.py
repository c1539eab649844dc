"""The policy's ``servers``: GPU servers and their NICs in GPU order, each NIC by MAC or
IPv4 address. Every error names the file, the line, the key path and what was expected;
the checks across servers (a name twice, a NIC in two servers or twice in one) run beside
the entries' own errors, as those of tenants do."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.policy import load_policy, parse_policy
from controller.policy.cli import main as loom_check
from controller.policy.isolated import load_isolated
from tests.unit.test_policy import GOOD, problems

SERVERS = """\
servers:
  - name: gpu1
    nics:
      - {mac: 02:00:00:00:00:11}
      - {ip: 10.0.1.2}
  - name: gpu2
    nics:
      - {mac: "02:00:00:00:00:21", ip: 10.0.2.2}
      - {mac: "02:00:00:00:00:22"}
"""
EXAMPLE = Path(__file__).resolve().parents[2] / "controller/policy/example-policy.yaml"
TEXT = GOOD + SERVERS  # servers start at line 16 of the file


def edit(old: str, new: str) -> str:
    assert TEXT.count(old) == 1, old
    return TEXT.replace(old, new)


def test_servers_load_in_gpu_order_with_lower_case_macs() -> None:
    policy = parse_policy(TEXT.replace("02:00:00:00:00:22", "02:00:00:00:00:AB"), "p.yaml")
    assert [s.name for s in policy.servers] == ["gpu1", "gpu2"]
    gpu1, gpu2 = policy.servers
    assert [(n.mac, n.ip) for n in gpu1.nics] == [("02:00:00:00:00:11", None), (None, "10.0.1.2")]
    assert [(n.mac, n.ip) for n in gpu2.nics] == [
        ("02:00:00:00:00:21", "10.0.2.2"),
        ("02:00:00:00:00:ab", None),
    ]
    assert parse_policy(GOOD, "p.yaml").servers == []  # optional


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "  - name: gpu2",
            "  - name: GPU 2",
            "p.yaml:21: servers[1].name: 'GPU 2' is not a server name: 1-64 of a-z 0-9 . _ -",
        ),
        (
            "{mac: 02:00:00:00:00:11}",
            "{mac: 02:00:00:00:11}",
            "p.yaml:19: servers[0].nics[0].mac: '02:00:00:00:11' is not a MAC address "
            "(expected six hex pairs",
        ),
        (
            "{mac: 02:00:00:00:00:11}",
            "{mac: 03:00:00:00:00:11}",
            "p.yaml:19: servers[0].nics[0].mac: '03:00:00:00:00:11' is a multicast MAC",
        ),
        (
            "{ip: 10.0.1.2}",
            "{ip: 10.0.1.256}",
            "p.yaml:20: servers[0].nics[1].ip: '10.0.1.256' does not parse as an IPv4 address",
        ),
        (
            "{ip: 10.0.1.2}",
            "{ip: fe80::2}",
            "p.yaml:20: servers[0].nics[1].ip: 'fe80::2' is IPv6; Loom servers use IPv4",
        ),
        (
            "{ip: 10.0.1.2}",
            "{}",
            "p.yaml:20: servers[0].nics[1]: a NIC needs a mac, an ip, or both",
        ),
        (
            "{ip: 10.0.1.2}",
            "{ip: 10.0.1.2, port: 3}",
            "p.yaml:20: servers[0].nics[1].port: unknown key; expected one of mac, ip",
        ),
        (
            "  - name: gpu2\n",
            "  - name: gpu2\n    gpus: 8\n",
            "p.yaml:22: servers[1].gpus: unknown key; expected one of name, nics",
        ),
        (
            "servers:\n  - name: gpu1\n    nics:\n",
            "servers:\n  - name: gpu1\n    nic:\n",
            "p.yaml:18: servers[0].nic: unknown key; expected one of name, nics",
        ),
        (
            "    nics:\n      - {mac: 02:00:00:00:00:11}\n      - {ip: 10.0.1.2}\n",
            "    nics: []\n",
            "p.yaml:18: servers[0].nics: List should have at least 1 item",
        ),
        (
            "  - name: gpu2",
            "  - name: gpu1",
            "p.yaml:21: servers[1].name: server 'gpu1' is declared twice",
        ),
        (
            '{mac: "02:00:00:00:00:22"}',
            '{mac: "02:00:00:00:00:11"}',
            "p.yaml:24: servers[1].nics[1].mac: 02:00:00:00:00:11 is already a NIC of server "
            "'gpu1' (servers[0].nics[0].mac); a NIC belongs to one server",
        ),
        (
            '{mac: "02:00:00:00:00:21", ip: 10.0.2.2}',
            '{mac: "02:00:00:00:00:21", ip: 10.0.1.2}',
            "p.yaml:23: servers[1].nics[0].ip: 10.0.1.2 is already a NIC of server 'gpu1' "
            "(servers[0].nics[1].ip); a NIC belongs to one server",
        ),
        (
            '{mac: "02:00:00:00:00:22"}',
            '{mac: "02:00:00:00:00:21"}',
            "p.yaml:24: servers[1].nics[1].mac: 02:00:00:00:00:21 is listed twice in server "
            "'gpu2' (servers[1].nics[0].mac); each NIC once",
        ),
        (
            "servers:\n",
            "servers:\n  - 7\n",
            "p.yaml:17: servers[0]: Input should be a valid dictionary",
        ),
    ],
)
def test_each_server_error_names_file_line_key_and_expectation(
    old: str, new: str, expected: str
) -> None:
    found = problems(edit(old, new))
    assert any(p.startswith(expected) for p in found), found


def test_a_duplicate_nic_is_named_beside_a_bad_field_of_its_server() -> None:
    text = edit("  - name: gpu2\n", "  - name: gpu2\n    gpus: 8\n").replace(
        '{mac: "02:00:00:00:00:22"}', '{mac: "02:00:00:00:00:11"}'
    )
    found = problems(text)
    assert [p.split(": ", 2)[1] for p in found] == ["servers[1].gpus", "servers[1].nics[1].mac"]


def test_a_failed_nic_or_server_name_causes_no_derived_error() -> None:
    # the NIC that fails is no NIC to compare: its MAC is not blamed as a duplicate too
    text = edit('{mac: "02:00:00:00:00:22"}', '{mac: "02:00:00:00:00:11", ip: 10.0.1.999}')
    assert [p.split(": ", 2)[1] for p in problems(text)] == ["servers[1].nics[1].ip"]
    # a server whose name fails is not "declared twice"
    text = edit("  - name: gpu2", "  - name: Gpu1")
    assert [p.split(": ", 2)[1] for p in problems(text)] == ["servers[1].name"]


def test_servers_that_are_not_a_list_are_one_error() -> None:
    found = problems(GOOD + "servers: {name: gpu1}\n")
    assert len(found) == 1 and found[0].startswith("p.yaml:16: servers: Input should be"), found


def test_loom_check_counts_servers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(TEXT)
    assert loom_check([str(path)]) == 0
    assert "1 jobs, 2 servers;" in capsys.readouterr().out


def test_the_child_process_check_reads_servers_back(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(TEXT)
    assert load_isolated(path).servers == load_policy(path).servers != []


def test_the_shipped_example_servers_block_is_valid_once_uncommented() -> None:
    text = EXAMPLE.read_text()
    block = text[text.index("# servers:") :].splitlines()
    uncommented = "\n".join(line[2:] for line in block if line.startswith("# "))
    policy = parse_policy(text + "\n" + uncommented + "\n", str(EXAMPLE))
    assert [(s.name, len(s.nics)) for s in policy.servers] == [("gpu1", 2), ("gpu2", 2)]
