"""The fuzz layer's budget (``tests/fuzz/budget.py``) and its report: a failing fuzz
test names the ``LOOM_FUZZ_SEED`` that reproduces the run. The seed itself is shown in
the report header by the hook in ``tests/conftest.py`` (pytest reads that hook only
from the root conftest)."""

from __future__ import annotations

from collections.abc import Generator

import pytest
from _pytest._code.code import ExceptionRepr

from tests.fuzz.budget import SEED, register_profiles, reproduce_line

register_profiles()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.failed:
        if isinstance(report.longrepr, ExceptionRepr):
            report.longrepr.addsection("fuzz seed", reproduce_line(SEED))
        else:
            report.sections.append(("fuzz seed", reproduce_line(SEED)))
