"""The generators make what they claim: each kind's strategy, searched deterministically
(the session seed), yields the hostile shapes the fuzz properties rely on. A strategy
that silently stopped producing alias bombs or looped LLDP would fail here."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st

from tests.fuzz.budget import SEED
from tests.fuzz.checks_frames import FrameCase
from tests.fuzz.checks_rest import AUTH, RestCase
from tests.fuzz.strategies_frames import frame_cases
from tests.fuzz.strategies_policy import PolicyCase, policy_cases
from tests.fuzz.strategies_rest import rest_cases

T = TypeVar("T")
SEARCH = settings(
    max_examples=3000,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
    deadline=None,
)


def found(strategy: st.SearchStrategy[T], condition: Callable[[T], bool]) -> T:
    return find(strategy, condition, settings=SEARCH, random=random.Random(SEED))


POLICY_SHAPES: dict[str, Callable[[PolicyCase], bool]] = {
    "alias bomb": lambda c: "alias-bomb" in c.shape and b"*b" in c.data,
    "merge-key bomb": lambda c: "merge-bomb" in c.shape and b"<<: *m" in c.data,
    "recursive alias": lambda c: "recursive-alias" in c.shape,
    "deep nesting": lambda c: "deep-lists" in c.shape and b"[" * 50 in c.data,
    "python tag": lambda c: b"!!python/" in c.data,
    "invalid UTF-8": lambda c: not _decodes(c.data),
    "UTF-16": lambda c: c.shape.endswith("utf-16"),
    "raw bytes": lambda c: c.shape == "raw-bytes" and len(c.data) > 10,
}


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize("shape", sorted(POLICY_SHAPES))
def test_policy_strategy_makes(shape: str) -> None:
    found(policy_cases(), POLICY_SHAPES[shape])


def _body(case: RestCase) -> Any:
    try:
        return json.loads(case.body)
    except (ValueError, RecursionError):
        return None


REST_SHAPES: dict[str, Callable[[RestCase], bool]] = {
    "2 MiB body": lambda c: len(c.body) > 2 * 1024 * 1024,
    "a million hosts": lambda c: c.shape.startswith("size-hosts-1e6"),
    "deep nesting": lambda c: c.body.startswith(b"[" * 100),
    "NaN or Infinity": lambda c: b"NaN" in c.body or b"Infinity" in c.body,
    "lone surrogate": lambda c: b"\\ud800" in c.body or b"\xed\xa0\x80" in c.body,
    "non-UTF-8 body": lambda c: not _decodes(c.body),
    "duplicate key": lambda c: c.shape.startswith("duplicate-key"),
    "unknown field": lambda c: isinstance(_body(c), dict) and "extra" in _body(c),
    "no token on a change": lambda c: c.method.upper() != "GET" and c.auth != AUTH,
    "odd path": lambda c: not c.path.startswith("/loom/v1/"),
}


@pytest.mark.parametrize("shape", sorted(REST_SHAPES))
def test_rest_strategy_makes(shape: str) -> None:
    found(rest_cases(), REST_SHAPES[shape])


FRAME_SHAPES: dict[str, Callable[[FrameCase], bool]] = {
    "LLDP looped to its own port": lambda c: c.genuine and c.at == "same-port",
    "LLDP looped to its own switch": lambda c: c.genuine and c.at == "same-switch",
    "genuine LLDP replayed by a host": lambda c: c.genuine and c.at == "host" and not c.edits,
    "forged LLDP signature": lambda c: "sig-random" in c.shape,
    "ARP with a bad hlen": lambda c: c.shape.startswith("arp") and ":h6p" not in c.shape,
    "IPv4 with a bad IHL": lambda c: c.shape.startswith("ipv4") and ":ihl5:" not in c.shape,
    "IPv4 fragment": lambda c: c.shape.startswith("ipv4") and ":frag0x0:" not in c.shape,
    "stacked VLAN tags": lambda c: ":vlan2:" in c.shape or ":vlan3:" in c.shape,
    "oversized frame": lambda c: len(c.data) > 60000,
    "truncated frame": lambda c: c.shape.startswith("raw:short") and len(c.data) < 14,
}


@pytest.mark.parametrize("shape", sorted(FRAME_SHAPES))
def test_frame_strategy_makes(shape: str) -> None:
    found(frame_cases(), FRAME_SHAPES[shape])
