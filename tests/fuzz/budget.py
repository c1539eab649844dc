"""The fuzz budget: one seed per session and the Hypothesis settings profiles.

The seed comes from ``LOOM_FUZZ_SEED`` or is drawn at random once per process; the
report header shows it and a failing fuzz test says which value reproduces the run.
This module imports nothing heavy so the root conftest can read the seed cheaply.
"""

from __future__ import annotations

import os
import random

SEED_ENV = "LOOM_FUZZ_SEED"
BOUND_S = 1.0  # every input is answered within this many seconds
CI_EXAMPLES = 40  # per property in `make test`: the whole fuzz layer stays well under 60 s
CI_EXAMPLES_CHEAP = 150  # for the properties whose cases take a few milliseconds


def _choose_seed() -> int:
    raw = os.environ.get(SEED_ENV, "").strip()
    if raw:
        return int(raw, 0)
    return random.SystemRandom().randrange(2**32)


SEED: int = _choose_seed()


def reproduce_line(seed: int | None = None) -> str:
    return f"{SEED_ENV}={SEED if seed is None else seed} reproduces this run"


def register_profiles() -> None:
    """``ci`` (the default) and ``bench``; ``HYPOTHESIS_PROFILE`` may pick another."""
    from hypothesis import HealthCheck, settings

    slow = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
    settings.register_profile(
        "ci",
        max_examples=CI_EXAMPLES,
        deadline=int(BOUND_S * 1000),
        database=None,
        print_blob=True,
        derandomize=False,
        suppress_health_check=slow,
    )
    settings.register_profile(
        "bench",
        max_examples=10_000,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[*slow, HealthCheck.large_base_example],
    )
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
