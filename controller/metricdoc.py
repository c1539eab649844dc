"""One exported metric as the docs and the collectors declare it: its name, kind, labels
and help. Its own module so that the cluster's metrics and the core's can both declare
theirs without importing each other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricDoc:
    name: str
    kind: str
    labels: tuple[str, ...]
    help: str
