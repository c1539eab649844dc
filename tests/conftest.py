"""Makes ``tests`` importable as this repository's package under a bare ``pytest`` too.

pytest imports this file as ``tests.conftest`` and so puts the repository root first on
``sys.path``; without it ``from tests.fakefabric import FakeFabric`` can resolve ``tests`` to
an unrelated top-level ``tests`` package some dependency installs into site-packages.
"""


def pytest_report_header() -> str:
    """The fuzz layer's seed (tests/fuzz): LOOM_FUZZ_SEED=<n> runs the same examples."""
    from tests.fuzz.budget import SEED, SEED_ENV

    return f"fuzz: {SEED_ENV}={SEED}"
