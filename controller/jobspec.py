"""A collective job as users declare it: one validated model for the REST API and the
policy file alike, so a job is accepted or refused with the same words either way.

``Job`` is the pydantic model (the policy schema embeds it; the policy loader turns its
errors into located issues); ``parse_job`` validates a REST body with it and raises a
``JobError`` that names the key; ``JobSpec`` is the frozen result the core works on.
Kept free of heavy imports: the policy check child imports it.
"""

from __future__ import annotations

import ipaddress
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from controller.joblimits import MAX_PRIORITY, MAX_WEIGHT
from controller.qos import CLASSES
from controller.vocabulary import DIRECTIONS, NAME_RE, PATTERNS

MAX_RANKS = 4096  # a ring: one pair per rank
MAX_ALL_TO_ALL_RANKS = 256  # an all-to-all: n(n-1) pairs, 65,280 at this size
Pair = tuple[str, str]  # (source IPv4, destination IPv4)


class JobError(ValueError):
    """An invalid job request; ``field`` names the offending key, ``conflict`` marks a
    request that is valid but clashes with a job that exists."""

    def __init__(self, field_name: str, message: str, conflict: bool = False) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.conflict = conflict


def brief(value: object, limit: int = 60) -> str:
    """``repr`` of a request's value, cut short: it is echoed in an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _hosts_shape(value: Any) -> Any:
    """Length first, so an absurd list is refused before any element is looked at."""
    if not isinstance(value, list) or not 2 <= len(value) <= MAX_RANKS:
        raise ValueError(f"expected a list of 2 to {MAX_RANKS} host IPv4 addresses in rank order")
    return value


def _ipv4(value: str) -> str:
    try:
        if ipaddress.ip_address(value).version == 4:
            return value
    except ValueError:
        pass
    raise ValueError(f"{brief(value)} is not an IPv4 address")


def _name(what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not NAME_RE.fullmatch(value):
            raise ValueError(
                f"{brief(value)} is not a {what} name: 1-64 of a-z 0-9 . _ -, starting "
                "and ending with a letter or digit"
            )
        return value

    return AfterValidator(check)


class Job(BaseModel):
    """A job request. Field order matters: ``hosts`` is checked knowing ``pattern``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: Annotated[str, _name("job")]
    tenant: Annotated[str, _name("tenant")]
    pattern: str = "ring"
    hosts: Annotated[list[Annotated[str, AfterValidator(_ipv4)]], BeforeValidator(_hosts_shape)]
    traffic_class: str = "collective"
    ring_direction: str = "forward"
    priority: Annotated[int, Field(ge=0, le=MAX_PRIORITY)] = 0
    weight: Annotated[int, Field(ge=1, le=MAX_WEIGHT)] = 1

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, v: str) -> str:
        if v not in PATTERNS:
            expected = ", ".join(sorted(PATTERNS))
            raise ValueError(f"{brief(v)} is not a pattern; expected one of {expected}")
        return PATTERNS[v]

    @field_validator("hosts")
    @classmethod
    def _ranks(cls, v: list[str], info: ValidationInfo) -> list[str]:
        if info.data.get("pattern") == "all_to_all" and len(v) > MAX_ALL_TO_ALL_RANKS:
            raise ValueError(
                f"expected a list of 2 to {MAX_ALL_TO_ALL_RANKS} host IPv4 addresses in rank "
                "order (all_to_all)"
            )
        seen: set[str] = set()
        for ip in v:
            if ip in seen:
                raise ValueError(f"{ip} appears more than once; one rank per host")
            seen.add(ip)
        return v

    @field_validator("traffic_class")
    @classmethod
    def _class(cls, v: str) -> str:
        if v not in CLASSES:
            expected = ", ".join(CLASSES)
            raise ValueError(f"{brief(v)} is not a traffic class; expected one of {expected}")
        return v

    @field_validator("ring_direction")
    @classmethod
    def _direction(cls, v: str) -> str:
        if v not in DIRECTIONS:
            raise ValueError(f"{brief(v)}; expected one of {', '.join(DIRECTIONS)}")
        return v

    def spec(self) -> JobSpec:
        return JobSpec(
            self.name,
            self.tenant,
            tuple(self.hosts),
            self.pattern,
            self.traffic_class,
            self.ring_direction,
            self.priority,
            self.weight,
        )


@dataclass(frozen=True)
class JobSpec:
    name: str
    tenant: str
    hosts: tuple[str, ...]  # IPv4 addresses in rank order
    pattern: str = "ring"
    traffic_class: str = "collective"
    ring_direction: str = "forward"  # forward: rank i -> i+1 (NCCL); backward: i -> i-1 (gloo)
    priority: int = 0  # higher: placed first, and a higher collective queue where there are more
    weight: int = 1  # where jobs must share links, their pairs share them in this proportion

    @property
    def ident(self) -> int:
        return zlib.crc32(self.name.encode())

    def pairs(self) -> list[tuple[Pair, float]]:
        """Every (src, dst) the job sends on, with its share of a link at full speed."""
        n, h = len(self.hosts), self.hosts
        if self.pattern == "all_to_all":
            return [((a, b), 1.0 / (n - 1)) for a in h for b in h if a != b]
        steps = {"forward": (1,), "backward": (-1,), "both": (1, -1)}[self.ring_direction]
        out: dict[Pair, float] = {}
        for step in steps:
            for i in range(n):
                out[(h[i], h[(i + step) % n])] = 1.0
        return sorted(out.items())

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tenant": self.tenant,
            "hosts": list(self.hosts),
            "pattern": self.pattern,
            "traffic_class": self.traffic_class,
            "ring_direction": self.ring_direction,
            "priority": self.priority,
            "weight": self.weight,
        }


KEYS = tuple(Job.model_fields)
_PLAIN = {
    "string_type": "expected a non-empty string",
    "missing": "expected a non-empty string (required)",
    "list_type": f"expected a list of 2 to {MAX_RANKS} host IPv4 addresses in rank order",
}


MAX_LEASE_SECONDS = 86_400.0


def split_lease(data: Any) -> tuple[Any, float | None]:
    """A REST job body's ``lease_seconds`` (how long the job lives unless renewed: a
    launcher's lease) apart from the job itself; refused with the key named unless it is
    a number of seconds from 1 to a day."""
    if not isinstance(data, Mapping) or "lease_seconds" not in data:
        return data, None
    rest = {k: v for k, v in data.items() if k != "lease_seconds"}
    lease = data["lease_seconds"]
    if lease is None:
        return rest, None
    if isinstance(lease, bool) or not isinstance(lease, int | float):
        raise JobError("lease_seconds", f"{brief(lease)} is not a number of seconds")
    if not 1.0 <= lease <= MAX_LEASE_SECONDS:
        raise JobError("lease_seconds", f"expected 1 to {MAX_LEASE_SECONDS:g} seconds, got {lease}")
    return rest, float(lease)


def parse_job(data: Any) -> JobSpec:
    """Validate a REST job request (tenant ``default`` unless given); the error names
    the first offending key and says what was expected."""
    if not isinstance(data, Mapping):
        raise JobError("body", "expected a JSON object with name, tenant and hosts")
    try:
        return Job.model_validate({"tenant": "default", **data}).spec()
    except ValidationError as exc:
        raise job_error(exc) from None


def job_error(exc: ValidationError) -> JobError:
    err = exc.errors(include_url=False)[0]
    loc = err["loc"]
    key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    kind, msg = err["type"], err["msg"]
    if kind == "extra_forbidden":
        return JobError(key[:64], f"unknown key; expected one of {', '.join(KEYS)}")
    if kind == "string_type" and loc[0] == "hosts":
        return JobError(key, f"{brief(err.get('input'))} is not an IPv4 address")
    if kind == "missing" and loc == ("hosts",):
        return JobError(key, _PLAIN["list_type"] + " (required)")
    if kind in _PLAIN and not (kind == "missing" and loc != ("name",)):
        return JobError(key, _PLAIN[kind])
    return JobError(key or "body", msg.removeprefix("Value error, "))
