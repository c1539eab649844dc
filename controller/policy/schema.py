"""The tenant policy: what the YAML file may say, as pydantic models.

Unknown keys are errors (a misspelt key must not silently mean "default"), types are
strict where YAML guesses (a MAC is a string, never a base-60 number), and every
address is parsed. Cross-entry rules (a host in two tenants, a job host outside its
tenant, a NIC in two servers) are checked in ``loader.py``, on every entry whose model
validated.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from controller.jobspec import Job
from controller.limits import OPEN_VSWITCH, Limits, SwitchLimits
from controller.model import OFPG_MAX
from controller.qos import CLASSES
from controller.vocabulary import NAME_RE, POLICIES

MAX_MBPS = 10_000_000  # 10 Tbit/s: anything above is a typo
MAC_RE = re.compile(r"[0-9a-f]{2}(:[0-9a-f]{2}){5}")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def unicast_mac(v: str) -> str:
    """A host's MAC, lower-cased; ``ValueError`` names what was expected."""
    low = v.lower()
    if not MAC_RE.fullmatch(low):
        raise ValueError(
            f"{v!r} is not a MAC address (expected six hex pairs, e.g. 02:00:00:00:00:01)"
        )
    if int(low[:2], 16) & 1:
        raise ValueError(f"{v!r} is a multicast MAC; a host needs a unicast address")
    return low


def entry_name(v: str, what: str) -> str:
    """A name of a policy entry (``what``: tenant, server, ...); ``ValueError`` says why not."""
    if not NAME_RE.fullmatch(v):
        raise ValueError(f"{v!r} is not a {what} name: 1-64 of a-z 0-9 . _ -")
    return v


def ipv4(v: str, users: str) -> str:
    """An IPv4 address in its usual form; ``users`` (e.g. ``Loom tenants``) for the error."""
    try:
        addr = ipaddress.ip_address(v)
    except ValueError:
        raise ValueError(f"{v!r} does not parse as an IPv4 address") from None
    if addr.version != 4:
        raise ValueError(f"{v!r} is IPv{addr.version}; {users} use IPv4 addresses")
    return str(addr)


class Addressed(Strict):
    """An endpoint by MAC, by IPv4 address, or both (``WHAT`` and ``USERS`` for errors)."""

    WHAT: ClassVar[str] = "an endpoint"
    USERS: ClassVar[str] = "Loom"
    mac: str | None = None
    ip: str | None = None

    @field_validator("mac")
    @classmethod
    def _mac(cls, v: str | None) -> str | None:
        return None if v is None else unicast_mac(v)

    @field_validator("ip")
    @classmethod
    def _ip(cls, v: str | None) -> str | None:
        return None if v is None else ipv4(v, cls.USERS)

    @model_validator(mode="after")
    def _named(self) -> Addressed:
        if self.mac is None and self.ip is None:
            raise ValueError(f"{self.WHAT} needs a mac, an ip, or both")
        return self


class HostEntry(Addressed):
    """A tenant member: by MAC, by IPv4 address, or both; optionally pinned to a port."""

    WHAT: ClassVar[str] = "a host"
    USERS: ClassVar[str] = "Loom tenants"
    switch: int | None = Field(
        default=None, ge=0, le=2**64 - 1, description="dpid of the edge switch"
    )
    port: int | None = Field(default=None, ge=1, le=0xFFFFFF00)

    @model_validator(mode="after")
    def _pinned(self) -> HostEntry:
        if self.port is not None and self.switch is None:
            raise ValueError("port given without switch: say which switch (dpid) the port is on")
        return self


class TokenEntry(Strict):
    """An API token, by name (what the audit trail calls its user) and by the SHA-256 of
    its text: the file never holds a token itself (``printf %s TOKEN | sha256sum``)."""

    name: str
    digest: str

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return entry_name(v, "token")

    @field_validator("digest")
    @classmethod
    def _digest(cls, v: str) -> str:
        low = v.lower()
        if not DIGEST_RE.fullmatch(low):
            raise ValueError(
                "expected sha256:<64 hex digits>, the SHA-256 of the token "
                "(printf %s TOKEN | sha256sum), never the token itself"
            )
        return low


class Access(Strict):
    """Who may use the REST API beyond the admin token (``LOOM_API_TOKEN``): read-only
    tokens for dashboards, and what a request without a token may read (``read``: every
    GET; ``health``: GET health alone; unset: ``read`` unless the policy declares tokens)."""

    readers: list[TokenEntry] = Field(default_factory=list)
    anonymous: Literal["read", "health"] | None = None


class Tenant(Strict):
    name: str
    hosts: list[HostEntry] = Field(min_length=1)
    tokens: list[TokenEntry] = Field(default_factory=list)
    traffic_classes: list[str] = Field(default_factory=lambda: list(CLASSES))
    bandwidth_mbps: float | None = Field(default=None, gt=0, le=MAX_MBPS)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return entry_name(v, "tenant")

    @field_validator("traffic_classes")
    @classmethod
    def _classes(cls, v: list[str]) -> list[str]:
        for name in v:
            if name not in CLASSES:
                raise ValueError(
                    f"{name!r} is not a traffic class; expected one of {', '.join(CLASSES)}"
                )
        return v


class NicEntry(Addressed):
    """One NIC of a server: by MAC, by IPv4 address (matched to the learned host that has
    it), or both (matched by MAC)."""

    WHAT: ClassVar[str] = "a NIC"
    USERS: ClassVar[str] = "Loom servers"


class Server(Strict):
    """A GPU server: its NICs in GPU order (NIC ``i`` should reach a leaf of rail ``i``).
    Declaring servers changes no forwarding; ``GET /loom/v1/topology`` compares them with
    where discovery saw their NICs (``controller.rails``)."""

    name: str
    nics: list[NicEntry] = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return entry_name(v, "server")


class Queues(Strict):
    collective: float = Field(default=0.90, gt=0, le=1)
    control: float = Field(default=0.05, gt=0, le=1)
    bulk: float = Field(default=0.05, gt=0, le=1)

    @model_validator(mode="after")
    def _sum(self) -> Queues:
        total = self.collective + self.control + self.bulk
        if total > 1.0 + 1e-9:
            raise ValueError(f"queue shares add up to {total:g}; they must not exceed 1")
        return self


class FabricSettings(Strict):
    poll_interval: float = Field(default=0.5, gt=0, le=60)
    elephant_share: float = Field(default=0.1, gt=0, le=1)
    link_capacity_mbps: float | None = Field(default=None, gt=0, le=MAX_MBPS)
    te: bool = True
    qos: bool = True
    path_policy: Literal["adaptive", "minimal", "valiant"] = "adaptive"
    unassigned_hosts: Literal["deny", "allow"] = "deny"
    queues: Queues = Field(default_factory=Queues)

    @field_validator("path_policy")
    @classmethod
    def _policy(cls, v: str) -> str:
        assert v in POLICIES
        return v


class Profile(Strict):
    """What one switch model can hold (see ``controller.limits``); unset: no cap."""

    select_buckets: int | None = Field(default=None, ge=1, le=0xFFFF)
    groups: int | None = Field(default=None, ge=0, le=OFPG_MAX)
    fast_failover: bool = True
    flows: int | None = Field(default=None, ge=1, le=2**32 - 1)


class Hardware(Strict):
    """Switch profiles and which switches (by dpid) have each; the rest ``default``."""

    profiles: dict[str, Profile] = Field(default_factory=dict)
    switches: dict[str, list[Annotated[int, Field(ge=1, le=2**64 - 1)]]] = Field(
        default_factory=dict
    )
    default: str = OPEN_VSWITCH.name

    @model_validator(mode="after")
    def _names(self) -> Hardware:
        if OPEN_VSWITCH.name in self.profiles:
            raise ValueError(f"profiles: {OPEN_VSWITCH.name!r} is the built-in profile's name")
        for name in self.profiles:
            if not NAME_RE.fullmatch(name):
                raise ValueError(f"profiles: {name!r} is not a profile name: 1-64 of a-z 0-9 . _ -")
        known = sorted({OPEN_VSWITCH.name, *self.profiles})
        for key, name in [("default", self.default), *(("switches", n) for n in self.switches)]:
            if name not in known:
                raise ValueError(f"{key}: no profile {name!r}; defined: {', '.join(known)}")
        seen: dict[int, str] = {}
        for name, dpids in self.switches.items():
            for dpid in dpids:
                if seen.setdefault(dpid, name) != name:
                    raise ValueError(
                        f"switches: dpid {dpid} is in both {seen[dpid]!r} and {name!r}"
                    )
        return self

    def limits(self) -> Limits:
        def profile(name: str) -> SwitchLimits:
            if name == OPEN_VSWITCH.name:
                return OPEN_VSWITCH
            return SwitchLimits(name, **self.profiles[name].model_dump())

        by_dpid = {d: profile(n) for n, dpids in self.switches.items() for d in dpids}
        return Limits(profile(self.default), by_dpid)


class Policy(Strict):
    version: Literal[1] = 1
    fabric: FabricSettings = Field(default_factory=FabricSettings)
    hardware: Hardware = Field(default_factory=Hardware)
    tenants: list[Tenant] = Field(default_factory=list)
    jobs: list[Job] = Field(default_factory=list)
    servers: list[Server] = Field(default_factory=list)
    access: Access = Field(default_factory=Access)
