"""PNG plots of the demo, drawn from what Prometheus recorded (``query_range`` over the
demo's own time window, the same HTTP API Grafana uses), with matplotlib.

:func:`to_series` turns a ``query_range`` result into plain lists; the rest draws.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mininet_scenarios.harness.prometheus import PrometheusProcess


@dataclass(frozen=True)
class Series:
    label: str
    times: list[float]  # seconds since the plot's origin
    values: list[float]

    @property
    def peak(self) -> float:
        finite = [v for v in self.values if math.isfinite(v)]
        return max(finite, default=0.0)


def series_label(metric: Mapping[str, str], keys: Sequence[str] = ()) -> str:
    """``a=1 b=2`` from a result's labels (only ``keys`` if given; never ``__name__``)."""
    names = keys or sorted(k for k in metric if k != "__name__")
    return " ".join(f"{k}={metric[k]}" for k in names if k in metric) or "value"


def to_series(
    result: Sequence[Mapping[str, Any]],
    origin: float,
    scale: float = 1.0,
    label: str | None = None,
    keys: Sequence[str] = (),
) -> list[Series]:
    """One :class:`Series` per matrix entry: times relative to ``origin`` (Unix seconds),
    values times ``scale`` ("NaN" and unparsable values become NaN), sorted by label."""
    out = []
    for item in result:
        times, values = [], []
        for t, v in item.get("values", []):
            times.append(float(t) - origin)
            try:
                values.append(float(v) * scale)
            except (TypeError, ValueError):
                values.append(math.nan)
        name = label if label is not None else series_label(item.get("metric", {}), keys)
        out.append(Series(name, times, values))
    return sorted(out, key=lambda s: s.label)


def _figure(title: str, ylabel: str) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=110)
    ax.set_title(title)
    ax.set_xlabel("seconds")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _save(fig: Any, ax: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_collision(
    prom: PrometheusProcess,
    path: Path,
    edge: str,
    aggs: Sequence[str],
    window: tuple[float, float],
    apart: float | None,
    rate: float,
) -> tuple[Path, list[Series]]:
    """Load on an edge switch's uplinks (Loom's ``loom_link_load_bits_per_second``)."""
    start, end = window[0] - 3, window[1] + 3
    expr = f'loom_link_load_bits_per_second{{src_switch="{edge}",dst_switch=~"{"|".join(aggs)}"}}'
    series = to_series(prom.query_range(expr, start, end, 1.0), start, 1e-6, keys=("dst_switch",))
    title = f"Two elephants ECMP would collide on {edge}'s uplinks, placed apart"
    fig, ax = _figure(title, "Mbit/s")
    for s in series:
        ax.plot(s.times, s.values, marker=".", label=f"{edge} -> {s.label.split('=')[-1]}")
    ax.axhline(rate, color="grey", linestyle=":", label=f"link rate {rate:g} Mbit/s")
    if apart is not None:
        ax.axvline(apart - start, color="red", linestyle="--", label="both uplinks busy")
    ax.set_ylim(bottom=0)
    return _save(fig, ax, path), series


def plot_classes(
    prom: PrometheusProcess,
    path: Path,
    job: str,
    phases: Mapping[str, tuple[float, float]],
) -> tuple[Path, list[Series]]:
    """The job's bytes (collective class) against the elephant flows (bulk) over time."""
    spans = list(phases.values())
    start, end = min(s for s, _ in spans) - 3, max(e for _, e in spans) + 3
    coll = to_series(
        prom.query_range(
            # the target's own "job" label wins, so Prometheus renames the metric's one
            f'sum(rate(loom_job_bytes_total{{exported_job="{job}"}}[3s])) or vector(0)',
            start,
            end,
            1.0,
        ),
        start,
        8e-6,
        label=f"collective (job {job})",
    )
    bulk = to_series(
        prom.query_range("sum(loom_elephant_flow_bits_per_second) or vector(0)", start, end, 1.0),
        start,
        1e-6,
        label="bulk (elephant flows)",
    )
    fig, ax = _figure("Collective vs bulk traffic in the fabric", "Mbit/s (sum over senders)")
    for s, color in zip(coll + bulk, ("tab:blue", "tab:orange"), strict=False):
        ax.plot(s.times, s.values, marker=".", color=color, label=s.label)
    for (name, (a, b)), shade in zip(phases.items(), ("#e8f0ff", "#ffeede"), strict=False):
        ax.axvspan(a - start, b - start, color=shade, label=f"all-reduce {name} (timed iterations)")
    ax.set_ylim(bottom=0)
    return _save(fig, ax, path), coll + bulk
