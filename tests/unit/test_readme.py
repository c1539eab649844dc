"""The README's metrics table lists exactly the metrics controller/metrics.py declares."""

from __future__ import annotations

import re
from pathlib import Path

from controller.metrics import METRICS

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_metrics_table_matches_the_declared_metrics() -> None:
    rows = re.findall(r"^\| `(loom_[a-z_]+)` \| (\w+) \|", README.read_text(), re.MULTILINE)
    assert rows, "no metrics table in README.md"
    documented = {name: kind for name, kind in rows}
    declared = {m.name: m.kind for m in METRICS}
    assert documented == declared
