"""Reading Loom's Grafana dashboards and Prometheus rules: panels, queries, variables and
the metric and label names a PromQL expression uses. Shared by the static checks in
tests/unit/test_grafana.py and the live checks in tests/emulation/test_dashboards.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controller.metrics import METRICS

GRAFANA = Path(__file__).resolve().parents[1] / "grafana"
DASHBOARDS = GRAFANA / "dashboards"
RULES = GRAFANA / "rules"
RULE_FILES = (RULES / "loom-recording.yml", RULES / "loom-alerts.yml")
ALERT_TESTS = RULES / "loom-alerts.test.yml"
PROMETHEUS_CONFIG = GRAFANA / "prometheus.yml"
DATASOURCE_UID = "loom-prometheus"
DS_VARIABLE = "DS_PROMETHEUS"
# A panel whose query may return nothing in a healthy fabric says so in its description.
EMPTY_OK = "[empty-ok]"
# The only panels allowed that marker; adding one means justifying it here.
EMPTY_OK_PANELS = {
    ("loom-controller", "Loom alerts pending or firing"),  # no alert pending in a healthy fabric
}
# Series Prometheus itself creates, which dashboards may use.
PROMETHEUS_SERIES = {
    "up",
    "scrape_duration_seconds",
    "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
    "ALERTS",
    "ALERTS_FOR_STATE",
}
# Labels not declared in METRICS: the scrape target's, the renamed `job` label of Loom's
# per-job metrics, histogram buckets, and labels our rules and Prometheus add.
EXTRA_LABELS = {
    "instance",
    "job",
    "exported_job",
    "le",
    "link",
    "lost",
    "alertname",
    "alertstate",
    "severity",
}
PROMQL_WORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "inf",
    "nan",
    "atan2",
}
PROMTOOL = shutil.which("promtool")


# --------------------------------------------------------------------------- helpers
@dataclass(frozen=True)
class Query:
    """One target of one panel."""

    dashboard: str  # uid
    panel: str  # title
    ref: str
    expr: str
    instant: bool
    empty_ok: bool


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


def load_dashboards() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in dashboard_files()]


def iter_panels(dash: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel but rows, including those inside collapsed rows."""
    for panel in dash.get("panels", []):
        if panel.get("type") == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def panel_queries(dash: Mapping[str, Any]) -> list[Query]:
    out = []
    for panel in iter_panels(dash):
        empty_ok = EMPTY_OK in panel.get("description", "")
        for t in panel.get("targets", []):
            if t.get("hide"):
                continue
            out.append(
                Query(
                    dash["uid"],
                    panel["title"],
                    t.get("refId", "?"),
                    t.get("expr", ""),
                    bool(t.get("instant")) and not t.get("range"),
                    empty_ok,
                )
            )
    return out


def annotation_exprs(dash: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(a["name"], a["expr"]) for a in dash["annotations"]["list"] if a.get("expr")]


def variables(dash: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(dash.get("templating", {}).get("list", []))


def variable_query(var: Mapping[str, Any]) -> str:
    q = var.get("query", "")
    return str(q.get("query", "") if isinstance(q, Mapping) else q)


LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?:(.*)\s*,)?\s*([A-Za-z_]\w*)\s*\)\s*$")


def parse_label_values(query: str) -> tuple[str | None, str]:
    """``label_values(selector, label)`` -> (selector or None, label)."""
    m = LABEL_VALUES.match(query)
    if not m:
        raise ValueError(f"not a label_values() query: {query!r}")
    return (m.group(1).strip() if m.group(1) else None), m.group(2)


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """Replace Grafana variables ($name, ${name}, ${name:fmt}, [[name]]), longest first."""

    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        if name not in values:
            raise KeyError(f"no value for ${name} in {expr!r}")
        return values[name]

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)", repl, expr)


def recording_rules() -> dict[str, str]:
    doc = yaml.safe_load(RULE_FILES[0].read_text())
    return {r["record"]: r["expr"] for g in doc["groups"] for r in g["rules"] if "record" in r}


def alert_rules() -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load(RULE_FILES[1].read_text())
    return {r["alert"]: r for g in doc["groups"] for r in g["rules"] if "alert" in r}


_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)?\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)")
_DURATION = re.compile(r"(?<![\w:.])(?:\d+(?:ms|[smhdwy]))+\b")
_NUMBER = re.compile(r"(?<![\w:.])(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)")
_IDENT = re.compile(r"[A-Za-z_:][\w:]*")


def _neutral(expr: str) -> str:
    """The expression with Grafana variables replaced by harmless tokens."""
    expr = re.sub(r"\[\s*\$\{?\w+\}?\s*\]", "[1m]", expr)
    return re.sub(r"\$\{\w+(?::\w+)?\}|\[\[\w+\]\]|\$\w+", "1", expr)


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression reads (identifiers that are not functions,
    keywords, label names, numbers or durations)."""
    e = _STRING.sub('""', _neutral(expr))
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = _GROUPING.sub(" ", e)
    e = _DURATION.sub(" ", e)
    e = _NUMBER.sub(" ", e)
    names = set()
    for m in _IDENT.finditer(e):
        word = m.group(0)
        rest = e[m.end() :].lstrip()
        if word in PROMQL_WORDS or rest.startswith("("):
            continue
        names.add(word)
    return names


def selector_labels(expr: str) -> list[tuple[str | None, str]]:
    """(metric or None, label) for every label matcher of every selector."""
    e = _neutral(expr)
    out = []
    for m in _SELECTOR.finditer(_STRING.sub(lambda s: '"' + "x" * (len(s.group()) - 2) + '"', e)):
        out += [(m.group(1), label) for label in _MATCHER.findall(m.group(2))]
    return out


def grouping_labels(expr: str) -> set[str]:
    e = _STRING.sub('""', _neutral(expr))
    return {label.strip() for m in _GROUPING.finditer(e) for label in m.group(2).split(",")} - {""}


DOCS = {m.name: m for m in METRICS}


def allowed_metric(name: str, records: set[str]) -> bool:
    if name in DOCS or name in records or name in PROMETHEUS_SERIES:
        return True
    for suffix in ("_bucket", "_count", "_sum"):
        base = name.removesuffix(suffix)
        if base != name and base in DOCS and DOCS[base].kind == "histogram":
            return True
    return False


def labels_of(metric: str) -> set[str] | None:
    """Labels a series of ``metric`` carries in Prometheus; None if we do not know."""
    base = metric
    for suffix in ("_bucket", "_count", "_sum"):
        if metric.endswith(suffix) and metric.removesuffix(suffix) in DOCS:
            base = metric.removesuffix(suffix)
    doc = DOCS.get(base)
    if doc is None:
        return None
    labels = set(doc.labels) | {"instance", "job"}
    if "job" in doc.labels:
        labels.add("exported_job")  # Loom's `job` clashes with the scrape job's
    if metric.endswith("_bucket"):
        labels.add("le")
    return labels


def known_labels() -> set[str]:
    return {label for m in METRICS for label in m.labels} | EXTRA_LABELS


def all_exprs() -> list[tuple[str, str]]:
    """(where, expr) for every PromQL expression in dashboards and rules."""
    out = []
    for dash in load_dashboards():
        out += [(f"{q.dashboard} / {q.panel} / {q.ref}", q.expr) for q in panel_queries(dash)]
        out += [(f"{dash['uid']} / annotation {n}", e) for n, e in annotation_exprs(dash)]
        for var in variables(dash):
            if var.get("type") == "query":
                selector, _ = parse_label_values(variable_query(var))
                if selector:
                    out.append((f"{dash['uid']} / variable {var['name']}", selector))
    out += [(f"record {n}", e) for n, e in recording_rules().items()]
    out += [(f"alert {n}", r["expr"]) for n, r in alert_rules().items()]
    return out


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], capture_output=True, text=True, cwd=GRAFANA, timeout=60, check=False
    )
