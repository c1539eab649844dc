"""The rights model alone: who a bearer token names, what each caller may do, what a
request without a token may read, and what the audit trail calls each caller."""

from __future__ import annotations

import hashlib

import pytest

from controller.access import (
    AccessTable,
    Caller,
    Right,
    Role,
    digest_of,
    may_change,
    may_change_jobs,
    may_read,
    may_reload,
    unknown,
)
from controller.policy import parse_policy
from controller.policy.schema import Policy


def digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def policy(
    readers: bool = True, anonymous: str | None = None, tenant_tokens: bool = True
) -> Policy:
    text = "tenants:\n  - name: red\n    hosts: [{ip: 10.0.0.2}]\n"
    if tenant_tokens:
        text += f"    tokens: [{{name: slurm, digest: '{digest('red-t')}'}}]\n"
    text += "  - name: blue\n    hosts: [{ip: 10.0.0.3}]\naccess:\n"
    if readers:
        text += f"  readers: [{{name: grafana, digest: '{digest('read-t')}'}}]\n"
    if anonymous is not None:
        text += f"  anonymous: {anonymous}\n"
    return parse_policy(text if readers or anonymous else text.removesuffix("access:\n"))


TABLE = AccessTable.of(policy(), digest_of("admin-t"))


def test_with_no_token_configured_everyone_may_do_everything() -> None:
    caller = AccessTable.of(None).identify("Bearer anything")
    assert caller.role is Role.OPEN and caller.rights == frozenset(Right)
    assert not AccessTable.of(policy(readers=False, tenant_tokens=False)).guarded


@pytest.mark.parametrize(
    ("auth", "role", "who"),
    [
        ("Bearer admin-t", Role.ADMIN, "admin"),
        ("Bearer read-t", Role.READER, "reader:grafana"),
        ("Bearer red-t", Role.TENANT, "tenant:red/slurm"),
        ("", Role.ANONYMOUS, "anonymous"),
        ("Bearer red-t ", Role.UNKNOWN, "unknown"),
        ("bearer red-t", Role.UNKNOWN, "unknown"),
        ("Basic cmVkLXQ=", Role.UNKNOWN, "unknown"),
        ("Bearer \ud800", Role.UNKNOWN, "unknown"),
    ],
)
def test_a_bearer_token_names_its_caller(auth: str, role: Role, who: str) -> None:
    caller = TABLE.identify(auth)
    assert (caller.role, caller.who) == (role, who)


def test_a_tenant_changes_and_reads_its_own_tenant_alone() -> None:
    red = TABLE.identify("Bearer red-t")
    assert red.scope == "red"
    assert may_change(red) is None and may_change_jobs(red, "red") is None
    refused = may_change_jobs(red, "blue")
    assert refused is not None and (refused.status, refused.right) == (403, "jobs")
    assert refused.body() == {"error": refused.message, "right": "jobs", "tenant": "blue"}
    assert may_read(red, "red") is None
    assert (may_read(red, "blue") or refused).status == 403
    assert (may_read(red) or refused).right == "read"
    assert (may_reload(red) or refused).right == "policy"


def test_a_reader_reads_everything_and_changes_nothing() -> None:
    reader = TABLE.identify("Bearer read-t")
    assert reader.scope is None and may_read(reader) is None and may_read(reader, "x") is None
    denied = may_change(reader)
    assert denied is not None and denied.status == 403 and "reader:grafana" in denied.message


def test_the_admin_may_do_everything() -> None:
    admin = TABLE.identify("Bearer admin-t")
    checks = [may_change(admin), may_change_jobs(admin, "blue"), may_reload(admin)]
    assert checks == [None, None, None] and may_read(admin) is None


@pytest.mark.parametrize(
    ("anonymous", "tokens", "reads"),
    [(None, True, False), (None, False, True), ("read", True, True), ("health", False, False)],
)
def test_what_a_request_without_a_token_may_read(
    anonymous: str | None, tokens: bool, reads: bool
) -> None:
    table = AccessTable.of(policy(tokens, anonymous, tokens), digest_of("admin-t"))
    caller = table.identify("")
    assert (may_read(caller) is None) is reads
    denied = may_change(caller)
    assert denied is not None and denied.status == 401  # never a change


def test_an_unknown_token_is_refused_whatever_it_asks() -> None:
    caller = TABLE.identify("Bearer guess")
    denied = unknown(caller)
    assert denied is not None and (denied.status, denied.right) == (401, "token")
    assert unknown(TABLE.identify("")) is None


def test_the_admin_token_alone_keeps_reads_open() -> None:
    table = AccessTable.of(None, digest_of("admin-t"))
    assert table.guarded and may_read(table.identify("")) is None
    assert Caller(Role.ANONYMOUS).who == "anonymous"
