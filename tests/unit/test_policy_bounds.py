"""Hostile policy files: each is refused with the file, the line and why, in bounded
time, by the in-process loader and by the child-process check the controller uses."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from controller.policy import PolicyError, load_policy, parse_policy
from controller.policy import bounded_yaml as by
from controller.policy.isolated import load_isolated
from controller.policy.loader import INTERNAL, MAX_ISSUES

VALID = "tenants:\n  - name: red\n    hosts: [{ip: 10.0.0.1}, {ip: 10.0.0.2}]\n"


def alias_bomb(levels: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def refusal(data: str | bytes) -> tuple[int, str, str]:
    started = time.perf_counter()
    with pytest.raises(PolicyError) as err:
        parse_policy(data, "bad.yaml")
    assert time.perf_counter() - started < 1.0
    (issue,) = err.value.issues
    assert issue.file == "bad.yaml" and issue.key != INTERNAL
    return issue.line, issue.key, issue.message


@pytest.mark.parametrize(
    ("data", "line", "words"),
    [
        (alias_bomb(), 6, "aliases are expanded"),
        ("tenants: &a [*a]\n", 1, "refers to a node that contains it"),
        ("\n" + "[" * 5000 + "]" * 5000, 2, f"more than {by.MAX_DEPTH} levels"),
        ("b: &b [1]\nd: [" + "*b, " * 1001 + "]\n", 2, f"more than {by.MAX_ALIASES} aliases"),
        (b"tenants:\n  - name: r\xffd\n", 2, "not UTF-8 text: byte 0xff at byte offset 20"),
        (b"\xfe\xff\x00t\x00e", 1, "not UTF-8 text: byte 0xfe at byte offset 0"),
        ("tenants:\n  - name: a\x00b\n", 2, "U+0000 at byte offset 20"),
        ("fabric:\n  poll_interval: " + "1" * 5000 + "\n", 2, "value cannot be read"),
        ('fabric: !!python/object/apply:os.system ["true"]\n', 1, "constructor"),
        ("tenants: []\n---\ntenants: []\n", 2, "second YAML document"),
        ("fabric: {poll_interval: .inf}\n", 1, "finite number"),
        ("fabric: {poll_interval: .nan}\n", 1, "finite number"),
        ('tenants:\n  - name: "red\\n"\n    hosts: [{ip: 10.0.0.1}]\n', 2, "not a tenant"),
    ],
)
def test_hostile_files_are_refused_at_their_line(data: str | bytes, line: int, words: str) -> None:
    got = refusal(data)
    assert got[0] == line and words in got[2], got


def test_a_file_over_the_size_limit_is_refused_unparsed(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_bytes(b"# " + b"x" * by.MAX_BYTES + b"\n")
    with pytest.raises(PolicyError) as err:
        load_policy(path)
    assert f"larger than {by.MAX_BYTES:,} bytes" in str(err.value)


def test_aliases_within_bounds_still_work() -> None:
    text = (
        "fabric: {queues: &q {collective: 0.8, control: 0.1, bulk: 0.1}}\n"
        "tenants:\n  - name: red\n    traffic_classes: &c [collective, bulk]\n"
        "    hosts: [{ip: 10.0.0.1}]\n  - name: blue\n    traffic_classes: *c\n"
        "    hosts: [{ip: 10.0.0.2}]\n"
    )
    policy = parse_policy(text, "ok.yaml")
    assert policy.tenants[1].traffic_classes == ["collective", "bulk"]


def test_a_problem_per_host_is_summarised() -> None:
    hosts = "".join(f"      - {{ip: 10.0.{i // 250}.{i % 250 + 1}, port: 0}}\n" for i in range(500))
    with pytest.raises(PolicyError) as err:
        parse_policy(f"tenants:\n  - name: red\n    hosts:\n{hosts}", "many.yaml")
    assert len(err.value.issues) == MAX_ISSUES
    assert err.value.issues[-1].message == f"... and {500 - MAX_ISSUES + 1} more problems"


def test_long_values_are_cut_in_messages() -> None:
    text = f"tenants:\n  - name: {'x' * 100_000}\n    hosts: [{{ip: 10.0.0.1}}]\n"
    line, key, message = refusal(text)
    assert line == 2 and len(message) < 300 and len(key) < 130


def test_the_child_process_check_agrees_with_the_loader(tmp_path: Path) -> None:
    good, bomb = tmp_path / "good.yaml", tmp_path / "bomb.yaml"
    good.write_text(VALID)
    bomb.write_text(alias_bomb())
    assert load_isolated(good) == load_policy(good)
    with pytest.raises(PolicyError) as err:
        load_isolated(bomb)
    assert [str(i) for i in err.value.issues] == [
        f"{bomb}:6: (file): more than {by.MAX_NODES:,} values once aliases are expanded "
        "(an alias bomb?)"
    ]


def test_a_check_past_its_time_bound_is_refused(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(VALID)
    with pytest.raises(PolicyError) as err:
        load_isolated(good, timeout=0.001)
    assert "longer than 0.001 s; refused" in str(err.value)
