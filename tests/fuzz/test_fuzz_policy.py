"""Hostile policy files against the real loader and ``loom-check``: a Policy or a
``PolicyError`` whose every issue names the file and a line, within 1 s, never a
traceback."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import event, given, seed, settings

from tests.fuzz.budget import CI_EXAMPLES_CHEAP, SEED
from tests.fuzz.checks_policy import check_policy_file, check_policy_text
from tests.fuzz.strategies_policy import PolicyCase, policy_cases, policy_texts


@pytest.fixture(scope="module")
def directory() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="loom-fuzz-policy-") as d:
        yield Path(d)


@seed(SEED)
@settings(max_examples=CI_EXAMPLES_CHEAP)
@given(case=policy_cases())
def test_hostile_policy_files_are_rejected_with_a_location(
    directory: Path, case: PolicyCase
) -> None:
    for part in case.shape.split("+"):
        event(part.split("-")[0] if part[-1].isdigit() else part)
    check_policy_file(case.data, directory)


@seed(SEED)
@settings(max_examples=CI_EXAMPLES_CHEAP)
@given(text=policy_texts)
def test_hostile_policy_text_is_rejected_with_a_location(text: str) -> None:
    check_policy_text(text, "fuzz-text.yaml")
