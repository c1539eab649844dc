"""Reading Loom's Prometheus endpoint from a benchmark or a test: samples, differences of
histograms between two scrapes, and the quantiles Prometheus would compute from them; plus
small-sample percentiles for latencies measured outside.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Sequence

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str, timeout: float = 5.0) -> Samples:
    """Every sample of a Prometheus endpoint: (name, sorted labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=timeout) as resp:
        text = resp.read().decode()
    out: Samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out


def sample(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, lab), v in samples.items() if n == name and want <= set(lab))


def histogram_delta(
    before: Samples, after: Samples, name: str, **labels: str
) -> tuple[list[tuple[float, float]], float, float]:
    """Cumulative buckets ``[(le, count)]`` (``le`` ascending, +Inf last), the sum and the
    count of a histogram between two scrapes."""
    les: dict[float, float] = {}
    for (n, lab), v in after.items():
        d = dict(lab)
        if n != f"{name}_bucket" or any(d.get(k) != x for k, x in labels.items()):
            continue
        le = float(d["le"])
        les[le] = v - before.get((n, lab), 0.0)
    total = sample(after, f"{name}_sum", **labels) - sample(before, f"{name}_sum", **labels)
    count = sample(after, f"{name}_count", **labels) - sample(before, f"{name}_count", **labels)
    return sorted(les.items()), total, count


def add_buckets(
    a: list[tuple[float, float]], b: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    if not a:
        return list(b)
    merged = dict(a)
    for le, c in b:
        merged[le] = merged.get(le, 0.0) + c
    return sorted(merged.items())


def bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' ``histogram_quantile``: linear interpolation inside the bucket holding
    the q-th observation; an answer in the +Inf bucket is the highest finite bound."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for le, cum in buckets:
        if cum >= rank:
            if le == float("inf"):
                return lower
            if cum == below:
                return le
            return lower + (le - lower) * (rank - below) / (cum - below)
        lower, below = le, cum
    return lower


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..1) of a small sample; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))
    return ordered[k]


def median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
