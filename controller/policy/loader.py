"""Load and validate a policy file; every problem names the file, the line and the key.

YAML is read twice over: as data for the schema, and as a node tree that remembers
where each key and value stands, so a pydantic error location such as
``('tenants', 1, 'hosts', 0, 'ip')`` becomes ``policy.yaml:14: tenants[1].hosts[0].ip``.
Every problem is reported at once: the checks across entries (a host in two tenants, a
job outside its tenant, a NIC in two servers) run on every entry that validated, even when
others did not, so a bad address does not hide a duplicate host; entries that failed are
skipped by them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from controller.jobspec import Job
from controller.policy import bounded_yaml
from controller.policy.schema import HostEntry, NicEntry, Policy, TokenEntry

log = logging.getLogger("loom.policy")

Loc = tuple[str | int, ...]
M = TypeVar("M", bound=BaseModel)
KEY_ORDER = {"version": 0, "fabric": 1, "tenants": 2, "jobs": 3}
INTERNAL = "(internal error)"  # the key of an issue that is Loom's bug, not the file's
MAX_ISSUES = 50  # a file with a problem per host would otherwise list 27,648


@dataclass(frozen=True)
class PolicyIssue:
    file: str
    line: int
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.key}: {self.message}"


class PolicyError(ValueError):
    def __init__(self, issues: list[PolicyIssue]) -> None:
        ordered = sorted(issues, key=lambda i: (i.line, i.key))
        if len(ordered) > MAX_ISSUES:
            rest = len(ordered) - MAX_ISSUES + 1
            last = ordered[MAX_ISSUES - 1]
            ordered[MAX_ISSUES - 1 :] = [
                PolicyIssue(last.file, last.line, last.key, f"... and {rest} more problems")
            ]
        self.issues = ordered
        super().__init__("\n".join(str(i) for i in self.issues))


def key_text(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document)"


class _Lines:
    """Line numbers (1-based) of every key and value in a YAML document."""

    def __init__(self, root: yaml.Node | None) -> None:
        self.lines: dict[Loc, int] = {}
        self.raw: dict[Loc, str] = {}
        self.duplicates: list[tuple[Loc, int]] = []
        if root is not None:
            self._walk(root, ())

    def _walk(self, node: yaml.Node, loc: Loc) -> None:
        self.lines.setdefault(loc, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                name = str(key.value)
                if name in seen:
                    self.duplicates.append(((*loc, name), key.start_mark.line + 1))
                seen.add(name)
                self.lines[(*loc, name)] = key.start_mark.line + 1
                if isinstance(value, yaml.ScalarNode):
                    self.raw[(*loc, name)] = str(value.value)
                self._walk(value, (*loc, name))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._walk(item, (*loc, i))

    def line(self, loc: Loc) -> int:
        while loc and loc not in self.lines:
            loc = loc[:-1]
        return self.lines.get(loc, 1)


def parse_policy(text: str | bytes, file: str = "<policy>") -> Policy:
    """Validate a policy (the file's bytes, or its text); raises ``PolicyError`` listing
    every problem, and nothing else, whatever the input."""
    try:
        return _parse(text, file)
    except PolicyError:
        raise
    except Exception as exc:  # a bug here must not become a traceback for the user
        log.exception("policy %s: unexpected error while checking it", file)
        raise PolicyError(
            [PolicyIssue(file, 1, INTERNAL, f"could not be checked: {type(exc).__name__}")]
        ) from None


def _parse(text: str | bytes, file: str) -> Policy:
    try:
        if isinstance(text, bytes):
            text = bounded_yaml.decode(text)
        root, data = bounded_yaml.load(text)
    except bounded_yaml.YamlRefusal as exc:
        raise PolicyError([PolicyIssue(file, exc.line, "(file)", exc.message)]) from None
    except yaml.YAMLError as exc:
        line, problem = bounded_yaml.error_line(exc)
        raise PolicyError(
            [PolicyIssue(file, line, "(syntax)", f"not valid YAML: {brief(problem)}")]
        ) from None
    lines = _Lines(root)
    issues = [PolicyIssue(file, n, key_text(loc), "key given twice") for loc, n in lines.duplicates]
    if data is None:  # a truncated write looks like this: it must not mean "deny all"
        raise PolicyError(
            [
                PolicyIssue(
                    file,
                    1,
                    "(document)",
                    "no policy in the file (empty, or only comments); "
                    "a fabric with no tenants says so: tenants: []",
                )
            ]
        )
    if not isinstance(data, dict):
        raise PolicyError(
            [PolicyIssue(file, 1, "(document)", "expected a mapping with fabric, tenants, jobs")]
        )
    _keep_raw_macs(data, lines)
    try:
        policy = Policy.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        issues += [_issue(file, lines, err) for err in errors]
        issues += list(_cross_checks(_salvage(data, errors), file, lines))
        raise PolicyError(issues) from None
    issues += list(_cross_checks(_Entries.of(policy), file, lines))
    if issues:
        raise PolicyError(issues)
    return policy


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy file; bounded in size and work (``bounded_yaml``)."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = f.read(bounded_yaml.MAX_BYTES + 1)
    except OSError as exc:
        raise PolicyError(
            [PolicyIssue(str(path), 1, "(file)", f"cannot read: {exc.strerror or exc}")]
        ) from None
    return parse_policy(data, str(path))


def brief(value: object, limit: int = 120) -> str:
    """A value or message cut to ``limit`` characters: errors quote input, and input
    can be a megabyte long."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _keep_raw_macs(data: dict[str, Any], lines: _Lines) -> None:
    """YAML 1.1 reads an unquoted 12:34:56:00:00:01 as a base-60 number: use the text."""
    for loc, raw in lines.raw.items():
        if loc and loc[-1] == "mac":
            node: Any = data
            try:
                for part in loc[:-1]:
                    node = node[part]
                if isinstance(node, dict) and not isinstance(node.get("mac"), str):
                    node["mac"] = raw
            except (KeyError, IndexError, TypeError):
                continue


def _issue(file: str, lines: _Lines, err: Any) -> PolicyIssue:
    loc: Loc = tuple(
        p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))
    )
    kind, msg = err["type"], err["msg"]
    if kind == "extra_forbidden":
        msg = "unknown key" + _allowed_keys(loc)
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    shown = err.get("input")
    secret = bool(loc) and loc[-1] == "digest"  # may hold the token itself: never echoed
    plain = not isinstance(shown, dict | list) and kind not in ("extra_forbidden", "missing")
    plain = plain and not secret
    if plain and repr(shown) not in msg:
        msg += f" (got {brief(shown)})"
    return PolicyIssue(file, lines.line(loc), brief(key_text(loc)), brief(msg, 240))


def _allowed_keys(loc: Loc) -> str:
    """The keys the entry holding the unknown key ``loc[-1]`` may have."""
    from controller import jobspec
    from controller.policy import schema

    models: dict[str, type[BaseModel]] = {
        "fabric": schema.FabricSettings,
        "tenants": schema.Tenant,
        "hosts": schema.HostEntry,
        "jobs": jobspec.Job,
        "queues": schema.Queues,
        "servers": schema.Server,
        "nics": schema.NicEntry,
        "access": schema.Access,
        "readers": schema.TokenEntry,
        "tokens": schema.TokenEntry,
    }
    context = [p for p in loc[:-1] if isinstance(p, str)]
    model = models.get(context[-1], schema.Policy) if context else schema.Policy
    return "; expected one of " + ", ".join(model.model_fields)


class _Tenant(NamedTuple):
    at: int  # its index in the file
    name: str
    hosts: list[tuple[int, HostEntry]]  # by index in the file
    whole: bool  # every host validated: its IPs are all known


class _Server(NamedTuple):
    at: int  # its index in the file
    name: str
    nics: list[tuple[int, NicEntry]]  # by index in the file


class _Entries(NamedTuple):
    """What the checks across entries read: the entries that validated, by index."""

    tenants: list[_Tenant]
    jobs: list[tuple[int, Job]]
    every_tenant: bool  # every tenant's name is known: a job's unknown tenant is an error
    servers: list[_Server]
    tokens: list[tuple[Loc, TokenEntry]]  # by where each is declared

    @classmethod
    def of(cls, policy: Policy) -> _Entries:
        tenants = [
            _Tenant(t, tenant.name, list(enumerate(tenant.hosts)), True)
            for t, tenant in enumerate(policy.tenants)
        ]
        servers = [
            _Server(s, server.name, list(enumerate(server.nics)))
            for s, server in enumerate(policy.servers)
        ]
        tokens: list[tuple[Loc, TokenEntry]] = [
            (("tenants", t, "tokens", k), token)
            for t, tenant in enumerate(policy.tenants)
            for k, token in enumerate(tenant.tokens)
        ]
        tokens += [(("access", "readers", k), t) for k, t in enumerate(policy.access.readers)]
        return cls(tenants, list(enumerate(policy.jobs)), True, servers, tokens)


def _salvage(data: dict[str, Any], errors: list[ErrorDetails]) -> _Entries:
    """The entries of a document that failed validation which hold no error themselves,
    so the checks across entries still run on them (one run names every problem). What
    failed is left out, and a check that would need it is skipped, never guessed."""
    at = {tuple(err["loc"]) for err in errors}
    under = {e[:n] for e in at for n in range(len(e) + 1)}  # an error at or below

    def clean(*loc: str | int) -> bool:  # no error at, above or below loc
        return loc not in under and not any(loc[:n] in at for n in range(len(loc)))

    raw_tenants, raw_jobs = data.get("tenants", []), data.get("jobs", [])
    tenants: list[_Tenant] = []
    every_tenant = isinstance(raw_tenants, list)
    for t, raw in enumerate(raw_tenants if isinstance(raw_tenants, list) else []):
        name = raw.get("name") if isinstance(raw, dict) else None
        if not (isinstance(name, str) and clean("tenants", t, "name")):
            every_tenant = False
            continue
        listed = raw.get("hosts")
        hosts = [
            (h, entry)
            for h, host in enumerate(listed if isinstance(listed, list) else [])
            if clean("tenants", t, "hosts", h) and (entry := _valid(HostEntry, host)) is not None
        ]
        tenants.append(_Tenant(t, name, hosts, clean("tenants", t, "hosts")))
    jobs = [
        (j, job)
        for j, raw in enumerate(raw_jobs if isinstance(raw_jobs, list) else [])
        if clean("jobs", j) and (job := _valid(Job, raw)) is not None
    ]
    servers = _salvage_servers(data, clean)
    return _Entries(tenants, jobs, every_tenant, servers, _salvage_tokens(data, clean))


def _salvage_servers(data: dict[str, Any], clean: Callable[..., bool]) -> list[_Server]:
    """The servers whose name validated, with those of their NICs that did."""
    raw_servers = data.get("servers", [])
    servers: list[_Server] = []
    for s, raw in enumerate(raw_servers if isinstance(raw_servers, list) else []):
        name = raw.get("name") if isinstance(raw, dict) else None
        if not (isinstance(name, str) and clean("servers", s, "name")):
            continue
        listed = raw.get("nics")
        nics = [
            (n, entry)
            for n, nic in enumerate(listed if isinstance(listed, list) else [])
            if clean("servers", s, "nics", n) and (entry := _valid(NicEntry, nic)) is not None
        ]
        servers.append(_Server(s, name, nics))
    return servers


def _salvage_tokens(data: dict[str, Any], clean: Callable[..., bool]) -> list[tuple[Loc, Any]]:
    """The token entries (tenants' and readers') that validated, by where they stand."""
    holders: list[tuple[Loc, Any]] = []
    tenants, access = data.get("tenants"), data.get("access")
    for t, raw in enumerate(tenants if isinstance(tenants, list) else []):
        if isinstance(raw, dict):
            holders.append((("tenants", t, "tokens"), raw.get("tokens")))
    if isinstance(access, dict):
        holders.append((("access", "readers"), access.get("readers")))
    found: list[tuple[Loc, Any]] = []
    for at, listed in holders:
        for k, raw in enumerate(listed if isinstance(listed, list) else []):
            if clean(*at, k) and (entry := _valid(TokenEntry, raw)) is not None:
                found.append(((*at, k), entry))
    return found


def _valid(model: type[M], raw: Any) -> M | None:
    """An entry the document's validation found no error in, as its model (``None``
    should not happen: the same model validates the same input)."""
    try:
        return model.model_validate(raw)
    except ValidationError:
        return None


def _cross_checks(entries: _Entries, file: str, lines: _Lines) -> Iterator[PolicyIssue]:
    tenant_ips: dict[str, set[str] | None] = {}  # None: not all known
    yield from _tenant_checks(entries.tenants, file, lines, tenant_ips)
    yield from _job_checks(entries, file, lines, tenant_ips)
    yield from _server_checks(entries.servers, file, lines)
    yield from _token_checks(entries.tokens, file, lines)


def _tenant_checks(
    tenants: list[_Tenant], file: str, lines: _Lines, tenant_ips: dict[str, set[str] | None]
) -> Iterator[PolicyIssue]:
    """Tenants declared twice and hosts in two places; fills ``tenant_ips``."""
    owner: dict[str, tuple[str, str]] = {}  # address -> (tenant, key of first mention)
    names: set[str] = set()
    for t, name, hosts, whole in tenants:
        if name in names:
            yield PolicyIssue(
                file,
                lines.line(("tenants", t, "name")),
                f"tenants[{t}].name",
                f"tenant {name!r} is declared twice",
            )
        names.add(name)
        ips: set[str] = set()
        for h, host in hosts:
            for field in ("mac", "ip"):
                addr = getattr(host, field)
                if addr is None:
                    continue
                loc: Loc = ("tenants", t, "hosts", h, field)
                if addr in owner and owner[addr][0] != name:
                    yield PolicyIssue(
                        file,
                        lines.line(loc),
                        key_text(loc),
                        f"{addr} is already in tenant {owner[addr][0]!r} ({owner[addr][1]}); "
                        "a host belongs to one tenant",
                    )
                elif addr in owner:
                    yield PolicyIssue(
                        file, lines.line(loc), key_text(loc), f"{addr} is listed twice"
                    )
                owner.setdefault(addr, (name, key_text(loc)))
            if host.ip:
                ips.add(host.ip)
        tenant_ips[name] = ips if whole else None


def _job_checks(
    entries: _Entries, file: str, lines: _Lines, tenant_ips: dict[str, set[str] | None]
) -> Iterator[PolicyIssue]:
    """Jobs named twice, and jobs outside their tenant (when its hosts are all known)."""
    jobs: set[str] = set()
    for j, job in entries.jobs:
        if job.name in jobs:
            yield PolicyIssue(
                file, lines.line(("jobs", j, "name")), f"jobs[{j}].name", f"job {job.name!r} twice"
            )
        jobs.add(job.name)
        if job.tenant not in tenant_ips and entries.every_tenant:
            yield PolicyIssue(
                file,
                lines.line(("jobs", j, "tenant")),
                f"jobs[{j}].tenant",
                f"unknown tenant {job.tenant!r}; expected one of "
                + (", ".join(sorted(tenant_ips)) or "(none declared)"),
            )
            continue
        members = tenant_ips.get(job.tenant)
        if members is None:  # its tenant's hosts are not all known: nothing to hold it to
            continue
        for i, ip in enumerate(job.hosts):
            if ip not in members:
                loc = ("jobs", j, "hosts", i)
                yield PolicyIssue(
                    file,
                    lines.line(loc),
                    key_text(loc),
                    f"{ip} is not an IP of tenant {job.tenant!r}; jobs live inside their tenant",
                )


def _server_checks(servers: list[_Server], file: str, lines: _Lines) -> Iterator[PolicyIssue]:
    """Servers declared twice, and a NIC (its MAC or IP) in two servers or twice in one."""
    owner: dict[str, tuple[int, str, str]] = {}  # address -> (server at, name, first key)
    names: set[str] = set()
    for s, name, nics in servers:
        if name in names:
            yield PolicyIssue(
                file,
                lines.line(("servers", s, "name")),
                f"servers[{s}].name",
                f"server {name!r} is declared twice",
            )
        names.add(name)
        for n, nic in nics:
            for field in ("mac", "ip"):
                addr = getattr(nic, field)
                if addr is None:
                    continue
                loc: Loc = ("servers", s, "nics", n, field)
                if addr not in owner:
                    owner[addr] = (s, name, key_text(loc))
                    continue
                at, first, key = owner[addr]
                message = (
                    f"{addr} is listed twice in server {name!r} ({key}); each NIC once"
                    if at == s
                    else f"{addr} is already a NIC of server {first!r} ({key}); "
                    "a NIC belongs to one server"
                )
                yield PolicyIssue(file, lines.line(loc), key_text(loc), message)


def _token_checks(
    tokens: list[tuple[Loc, TokenEntry]], file: str, lines: _Lines
) -> Iterator[PolicyIssue]:
    """A token declared twice (it would name two users) and a name given twice in one
    list (the audit trail could not tell them apart)."""
    first: dict[str, str] = {}  # digest -> key of its first declaration
    names: dict[tuple[Loc, str], str] = {}  # (list, name) -> key of its first use
    for loc, token in tokens:
        key = key_text(loc)
        if token.digest in first:
            message = f"the same token is already declared at {first[token.digest]}"
            yield PolicyIssue(file, lines.line((*loc, "digest")), f"{key}.digest", message)
        first.setdefault(token.digest, key)
        named = (loc[:-1], token.name)
        if named in names:
            message = f"token name {token.name!r} is already used at {names[named]}"
            yield PolicyIssue(file, lines.line((*loc, "name")), f"{key}.name", message)
        names.setdefault(named, key)
