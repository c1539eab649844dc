"""Who may do what through the REST API: tokens, the rights they carry, and refusals.

Four kinds of caller: the admin (``LOOM_API_TOKEN``: every right), a reader (a policy
``access.readers`` token: every read, no change), a tenant (a token in its tenant's
``tokens``: its own jobs, and reads filtered to its own hosts and jobs) and anyone
without a token (every read unless the policy closes reads; no change). With no token
configured at all the API is open, as it always was. Tokens are known by their SHA-256
digests and compared in constant time; a token nobody declared is refused outright (401),
a known one without the right is refused naming it (403). The table is built from one
policy, so a reload swaps every token at once and a rejected one changes none.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.policy.schema import Policy


class Right(StrEnum):
    READ = "read"  # every GET, unfiltered
    READ_TENANT = "read:tenant"  # the GETs about the caller's own tenant, filtered
    JOBS = "jobs"  # register, renew and delete any tenant's jobs
    TENANT_JOBS = "jobs:tenant"  # ... the caller's own tenant's
    POLICY = "policy"  # reload the policy


class Role(StrEnum):
    OPEN = "open"  # no token configured anywhere: every right, as before tokens existed
    ADMIN = "admin"
    READER = "reader"
    TENANT = "tenant"
    ANONYMOUS = "anonymous"
    UNKNOWN = "unknown"  # sent a token that matches none: refused whatever it asks


GRANTS: dict[Role, frozenset[Right]] = {
    Role.OPEN: frozenset(Right),
    Role.ADMIN: frozenset(Right),
    Role.READER: frozenset({Right.READ, Right.READ_TENANT}),
    Role.TENANT: frozenset({Right.READ_TENANT, Right.TENANT_JOBS}),
    Role.ANONYMOUS: frozenset(),
    Role.UNKNOWN: frozenset(),
}


@dataclass(frozen=True)
class Caller:
    role: Role
    name: str = ""  # the token's name (a reader's or a tenant's)
    tenant: str | None = None  # a tenant token's tenant
    rights: frozenset[Right] = frozenset()

    @property
    def who(self) -> str:
        """The caller as the audit trail names it: never the token."""
        if self.role is Role.TENANT:
            return f"tenant:{self.tenant}/{self.name}"
        if self.role is Role.READER:
            return f"reader:{self.name}"
        return str(self.role)

    @property
    def scope(self) -> str | None:
        """The one tenant this caller's reads are limited to; ``None``: no limit."""
        return self.tenant if Right.READ not in self.rights else None


@dataclass(frozen=True)
class Denial:
    status: int  # 401: who is asking is not known; 403: known, without the right
    right: str
    message: str
    tenant: str | None = None

    def body(self) -> dict[str, str]:
        out = {"error": self.message, "right": self.right}
        return {**out, "tenant": self.tenant} if self.tenant is not None else out


@dataclass(frozen=True)
class Grant:
    digest: str  # sha256 hex of the token
    caller: Caller


def digest_of(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


@dataclass(frozen=True)
class AccessTable:
    """Every token the API accepts and what an anonymous request may read."""

    grants: tuple[Grant, ...] = ()
    anonymous_reads: bool = True

    @staticmethod
    def of(policy: Policy | None, admin_digest: str = "") -> AccessTable:
        """The table of a policy's tokens plus the admin's (hex digest; "": none)."""
        grants = [Grant(admin_digest, Caller(Role.ADMIN, rights=GRANTS[Role.ADMIN]))]
        grants = grants if admin_digest else []
        if policy is None:
            return AccessTable(tuple(grants))
        for token in policy.access.readers:
            caller = Caller(Role.READER, token.name, rights=GRANTS[Role.READER])
            grants.append(Grant(_hex(token.digest), caller))
        declared = bool(policy.access.readers)
        for tenant in policy.tenants:
            for token in tenant.tokens:
                caller = Caller(Role.TENANT, token.name, tenant.name, GRANTS[Role.TENANT])
                grants.append(Grant(_hex(token.digest), caller))
                declared = True
        anonymous = policy.access.anonymous
        reads = anonymous == "read" if anonymous is not None else not declared
        return AccessTable(tuple(grants), reads)

    @property
    def guarded(self) -> bool:
        return bool(self.grants)

    def identify(self, auth: str) -> Caller:
        """The caller an ``Authorization`` header names; every declared digest is compared,
        in constant time, whichever matches."""
        if not self.guarded:
            return Caller(Role.OPEN, rights=GRANTS[Role.OPEN])
        if not auth:
            reads = frozenset({Right.READ, Right.READ_TENANT}) if self.anonymous_reads else None
            return Caller(Role.ANONYMOUS, rights=reads or frozenset())
        presented = digest_of(auth[7:]) if auth.startswith("Bearer ") else ""
        found = Caller(Role.UNKNOWN)
        for grant in self.grants:
            if hmac.compare_digest(presented.encode(), grant.digest.encode()) and presented:
                found = grant.caller
        return found


def _hex(digest: str) -> str:
    return digest.removeprefix("sha256:")


def unknown(caller: Caller) -> Denial | None:
    """A request with a token that matches none, or a change with no token: 401."""
    if caller.role is Role.UNKNOWN:
        message = "'Authorization: Bearer <token>' holds no token Loom knows; nothing was done"
        return Denial(401, "token", message)
    return None


def may_read(caller: Caller, tenant: str | None = None) -> Denial | None:
    """A read of what belongs to ``tenant`` (``None``: to the whole fabric)."""
    if Right.READ in caller.rights:
        return None
    if caller.role is Role.ANONYMOUS:
        return Denial(401, Right.READ.value, "reads need 'Authorization: Bearer <token>'")
    if tenant is not None and tenant == caller.tenant and Right.READ_TENANT in caller.rights:
        return None
    what = f"tenant {tenant!r}" if tenant is not None else "the whole fabric"
    return Denial(403, Right.READ.value, f"{caller.who} may not read {what}", tenant=tenant)


def not_own_host(caller: Caller, ip: str) -> Denial:
    """A tenant asking about a host not its own (whose owner, if any, is not said)."""
    message = f"{caller.who} may ask about its own tenant's hosts alone; {ip} is not one"
    return Denial(403, Right.READ.value, message)


def may_change_jobs(caller: Caller, tenant: str) -> Denial | None:
    """Registering, renewing or deleting a job of ``tenant``."""
    if Right.JOBS in caller.rights:
        return None
    if tenant == caller.tenant and Right.TENANT_JOBS in caller.rights:
        return None
    if caller.role is Role.ANONYMOUS:
        return Denial(401, Right.JOBS.value, _NO_TOKEN)
    message = f"{caller.who} may not change the jobs of tenant {tenant!r}; nothing was changed"
    return Denial(403, Right.JOBS.value, message, tenant=tenant)


def may_reload(caller: Caller) -> Denial | None:
    if Right.POLICY in caller.rights:
        return None
    if caller.role is Role.ANONYMOUS:
        return Denial(401, Right.POLICY.value, _NO_TOKEN)
    return Denial(403, Right.POLICY.value, f"{caller.who} may not reload the policy")


def may_change(caller: Caller) -> Denial | None:
    """Any change at all, before its target is known: refused early only when the
    caller can change nothing (so a bad body never tells a stranger what is wrong)."""
    if caller.rights & {Right.JOBS, Right.TENANT_JOBS, Right.POLICY}:
        return None
    if caller.role is Role.ANONYMOUS:
        return Denial(401, Right.JOBS.value, _NO_TOKEN)
    return Denial(403, Right.JOBS.value, f"{caller.who} may read but change nothing")


_NO_TOKEN = "this call changes the fabric: send 'Authorization: Bearer <token>'"
