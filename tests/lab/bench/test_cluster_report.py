"""The cluster benchmark's report on a saved run: the summary's percentiles and sums, the
table's lines beside the targets, and the figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mininet_scenarios.bench.cluster_report import plot, summarize, table


def kill(remaster: float, lost: int, gap: float, rewritten: int = 0) -> dict[str, Any]:
    return {
        "remaster_s": remaster,
        "stream": {"sent": 10_000, "received": 10_000 - lost, "lost": lost},
        "gap": {"gap_ms": gap},
        "baseline": {"gap_ms": 20.0},
        "collective": {"completed": True, "busbw_mbps": 90.0},
        "job_intact": True,
        "rules": {"rewritten": rewritten, "pins_removed": 2},
    }


DOC: dict[str, Any] = {
    "shares": {"loom-1": 7, "loom-2": 7, "loom-3": 6},
    "kills": [kill(0.4, 0, 25.0), kill(0.5, 0, 30.0), kill(0.9, 1, 80.0, rewritten=3)],
    "load": {
        "1": {"loom-1": {"cpu_per_s": 0.2, "packet_ins_per_s": 30.0, "switches": 20}},
        "2": {
            "loom-1": {"cpu_per_s": 0.2, "packet_ins_per_s": 30.0, "switches": 10},
            "loom-2": {"cpu_per_s": 0.19, "packet_ins_per_s": 30.0, "switches": 10},
        },
    },
}


def test_summary_and_table(tmp_path: Path) -> None:
    s = summarize(DOC)
    assert s["remaster_s"] == {"p50": 0.5, "p95": 0.9, "max": 0.9}
    assert s["lost"] == 1 and s["rules_rewritten"] == 3 and s["pins_removed"] == 6
    assert s["share_spread"] == 1 and s["jobs_intact"] == 3
    text = table({**DOC, "summary": s})
    assert "p50 0.5  p95 0.9  max 0.9" in text and "(target p95 <= 1.0)" in text
    assert "load with 2 instance(s):" in text and "loom-2: 10 switches" in text
    assert plot(DOC, tmp_path / "cluster.png").stat().st_size > 10_000
