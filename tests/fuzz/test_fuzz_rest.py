"""Hostile requests against ``LoomApi.handle`` over a learned fat-tree with a policy and
a resident job: never a raise or a 5xx, an error string (and the offending field) on
every refusal, nothing changed by a refused request, 401 without the token."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import event, given, seed, settings

from tests.fuzz.budget import CI_EXAMPLES_CHEAP, SEED
from tests.fuzz.checks_rest import RestCase, RestWorld, check_rest
from tests.fuzz.strategies_rest import rest_cases


@pytest.fixture(scope="module")
def world() -> Iterator[RestWorld]:
    with tempfile.TemporaryDirectory(prefix="loom-fuzz-rest-") as d:
        yield RestWorld(Path(d))


# No Hypothesis deadline: a case that changed the fabric (a job created) is followed by a
# fresh copy of the core (~0.1 s, more under GC), which is harness time. Every request's
# own time is bounded by check_rest (1 s, perf_counter around LoomApi.handle only).
@seed(SEED)
@settings(max_examples=CI_EXAMPLES_CHEAP, deadline=None)
@given(case=rest_cases())
def test_hostile_requests_are_refused_cleanly(world: RestWorld, case: RestCase) -> None:
    event(case.shape.split("@", 1)[0].split("-", 1)[0])
    check_rest(world, case)
