"""What the cluster tests share: a real etcd is needed (installed by `make setup`)."""

from __future__ import annotations

import os
import shutil

import pytest

# Skipped only where etcd is missing and the whole suite is not required (as `make test`
# requires it: there a missing etcd fails the tests instead).
needs_etcd = pytest.mark.skipif(
    shutil.which("etcd") is None and not os.environ.get("LOOM_REQUIRE_EMULATION"),
    reason="etcd missing: run `make setup`",
)
