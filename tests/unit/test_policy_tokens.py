"""The policy's API tokens: ``tenants[].tokens`` and ``access`` (readers, anonymous reads).
A token is declared by name and SHA-256 digest; every bad entry names the file, the line,
the key and what was expected, and never quotes what was written where a digest belongs
(it may be the token itself)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from controller.policy import parse_policy
from controller.policy.isolated import load_isolated
from tests.unit.test_policy import problems


def digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


TEXT = f"""\
version: 1
tenants:
  - name: red
    hosts: [{{ip: 10.0.0.2}}]
    tokens:
      - {{name: slurm, digest: "{digest("red-1")}"}}
      - {{name: ci, digest: "{digest("red-2")}"}}
  - name: blue
    hosts: [{{ip: 10.0.0.3}}]
    tokens: [{{name: slurm, digest: "{digest("blue-1")}"}}]
access:
  readers:
    - {{name: grafana, digest: "{digest("read-1")}"}}
  anonymous: health
"""


def edit(old: str, new: str) -> str:
    assert TEXT.count(old) == 1, old
    return TEXT.replace(old, new)


def test_tokens_load_by_name_and_digest() -> None:
    policy = parse_policy(edit(digest("red-2"), digest("red-2").upper().replace("SHA", "sha")))
    red, blue = policy.tenants
    assert [(t.name, t.digest) for t in red.tokens] == [
        ("slurm", digest("red-1")),
        ("ci", digest("red-2")),  # lower-cased
    ]
    assert [t.name for t in blue.tokens] == ["slurm"]  # names are per list
    assert [t.name for t in policy.access.readers] == ["grafana"]
    assert policy.access.anonymous == "health"
    bare = parse_policy("tenants: []\n")
    assert bare.access.readers == [] and bare.access.anonymous is None


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            digest("red-1"),
            "red-1-the-token-itself",
            "p.yaml:6: tenants[0].tokens[0].digest: expected sha256:<64 hex digits>, the "
            "SHA-256 of the token (printf %s TOKEN | sha256sum), never the token itself",
        ),
        (
            digest("read-1"),
            digest("read-1")[:-1],
            "p.yaml:13: access.readers[0].digest: expected sha256:<64 hex digits>",
        ),
        (
            "{name: ci,",
            "{name: CI bot,",
            "p.yaml:7: tenants[0].tokens[1].name: 'CI bot' is not a token name: 1-64 of a-z 0-9",
        ),
        (
            "{name: ci,",
            "{name: ci, rights: all,",
            "p.yaml:7: tenants[0].tokens[1].rights: unknown key; expected one of name, digest",
        ),
        (
            "  anonymous: health",
            "  anonymous: none",
            "p.yaml:14: access.anonymous: Input should be 'read' or 'health' (got none)",
        ),
        (
            "  anonymous: health",
            "  admins: []",
            "p.yaml:14: access.admins: unknown key; expected one of readers, anonymous",
        ),
        (
            digest("read-1"),
            digest("blue-1"),
            "p.yaml:13: access.readers[0].digest: the same token is already declared at "
            "tenants[1].tokens[0]",
        ),
        (
            "{name: ci,",
            "{name: slurm,",
            "p.yaml:7: tenants[0].tokens[1].name: token name 'slurm' is already used at "
            "tenants[0].tokens[0]",
        ),
        (
            '{name: slurm, digest: "' + digest("red-1") + '"}',
            "{name: slurm}",
            "p.yaml:6: tenants[0].tokens[0].digest: Field required",
        ),
    ],
)
def test_a_bad_token_entry_is_named_with_its_line_and_key(
    old: str, new: str, expected: str
) -> None:
    found = problems(edit(old, new))
    assert any(p.startswith(expected) for p in found), found


def test_a_digest_that_is_not_one_is_never_quoted() -> None:
    found = problems(edit(digest("red-1"), "correct-horse-battery-staple"))
    assert found and not any("correct-horse" in p for p in found), found


def test_the_checks_across_tokens_run_beside_other_errors() -> None:
    text = edit("[{ip: 10.0.0.3}]", "[{ip: 10.0.0.300}]").replace(digest("read-1"), digest("red-1"))
    found = problems(text)
    assert any("tenants[1].hosts[0].ip" in p for p in found), found
    assert any("access.readers[0].digest: the same token" in p for p in found), found


def test_tokens_survive_the_isolated_reload(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(TEXT)
    policy = load_isolated(str(path))
    assert policy.tenants[0].tokens[0].digest == digest("red-1")
    assert policy.access.readers[0].name == "grafana"
