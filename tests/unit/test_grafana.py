"""The operators' view in grafana/: dashboards, Prometheus configuration and rules.

Every dashboard parses, every panel has a query, every query names only metrics Loom
declares in ``controller.metrics.METRICS`` (or recording rules of grafana/rules, or
Prometheus's own series), and promtool accepts the configuration and the rules and passes
the alert unit tests. tests/emulation/test_dashboards.py runs every query against a real
Prometheus scraping Loom.
"""

from __future__ import annotations

import os
import re

import pytest
import yaml

from tests.dashboard_queries import (
    ALERT_TESTS,
    DATASOURCE_UID,
    DS_VARIABLE,
    EMPTY_OK,
    EMPTY_OK_PANELS,
    GRAFANA,
    PROMETHEUS_CONFIG,
    PROMTOOL,
    RULE_FILES,
    alert_rules,
    all_exprs,
    allowed_metric,
    dashboard_files,
    grouping_labels,
    iter_panels,
    known_labels,
    labels_of,
    load_dashboards,
    metric_names,
    panel_queries,
    parse_label_values,
    promtool,
    recording_rules,
    selector_labels,
    substitute,
    variable_query,
    variables,
)

# promtool ships with the prometheus package that `make setup` installs; only a bare
# unit-test run (no set-up) may skip these, never `make test`.
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None and not os.environ.get("LOOM_REQUIRE_EMULATION"),
    reason="promtool not installed",
)


def test_the_four_dashboards_exist_and_parse() -> None:
    dashes = load_dashboards()
    uids = [d["uid"] for d in dashes]
    assert sorted(uids) == ["loom-controller", "loom-fabric", "loom-jobs", "loom-te"]
    for path, dash in zip(dashboard_files(), dashes, strict=True):
        assert dash["schemaVersion"] >= 36, path.name  # Grafana 9 or later
        assert dash["title"].startswith("Loom / "), path.name
        assert "loom" in dash["tags"], path.name
        assert dash.get("id") is None, f"{path.name}: exported with an instance-specific id"


def test_every_panel_has_a_query_and_a_unique_id() -> None:
    for dash in load_dashboards():
        panels = list(iter_panels(dash))
        assert panels, dash["uid"]
        ids = [p["id"] for p in panels]
        assert len(ids) == len(set(ids)), f"{dash['uid']}: duplicate panel ids"
        for p in panels:
            exprs = [t.get("expr", "").strip() for t in p.get("targets", [])]
            assert any(exprs), f"{dash['uid']} / {p['title']}: no target with an expr"
            assert all(exprs), f"{dash['uid']} / {p['title']}: a target without an expr"
            refs = [t["refId"] for t in p["targets"]]
            assert len(refs) == len(set(refs)), f"{dash['uid']} / {p['title']}: refIds"
            assert p.get("description"), f"{dash['uid']} / {p['title']}: no description"


def test_panels_fit_the_grid_without_overlapping() -> None:
    for dash in load_dashboards():
        cells: dict[tuple[int, int], str] = {}
        for p in iter_panels(dash):
            g = p["gridPos"]
            assert g["x"] >= 0 and g["x"] + g["w"] <= 24, f"{dash['uid']} / {p['title']}"
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    other = cells.setdefault((x, y), p["title"])
                    assert other == p["title"], f"{dash['uid']}: {p['title']!r} on {other!r}"


def test_data_source_is_a_variable_defaulting_to_the_provisioned_uid() -> None:
    ref = {"type": "prometheus", "uid": "${" + DS_VARIABLE + "}"}
    for dash in load_dashboards():
        (ds,) = [v for v in variables(dash) if v["name"] == DS_VARIABLE]
        assert ds["type"] == "datasource" and ds["query"] == "prometheus"
        assert ds["current"]["value"] == DATASOURCE_UID
        for p in iter_panels(dash):
            assert p["datasource"] == ref, f"{dash['uid']} / {p['title']}"
            for t in p["targets"]:
                assert t["datasource"] == ref, f"{dash['uid']} / {p['title']} / {t['refId']}"
        for var in variables(dash):
            if var["type"] == "query":
                assert var["datasource"] == ref, f"{dash['uid']} / ${var['name']}"
        for a in dash["annotations"]["list"]:
            if a.get("expr"):
                assert a["datasource"] == ref, f"{dash['uid']} / annotation {a['name']}"
    provisioned = yaml.safe_load((GRAFANA / "provisioning/datasources/loom.yaml").read_text())
    (source,) = provisioned["datasources"]
    assert source["uid"] == DATASOURCE_UID and source["type"] == "prometheus"
    providers = yaml.safe_load((GRAFANA / "provisioning/dashboards/loom.yaml").read_text())
    assert providers["apiVersion"] == 1 and providers["providers"][0]["type"] == "file"


def test_metric_name_extraction() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (kind, le) (rate(loom_path_computation_seconds_bucket"
        '{kind=~"$k"}[$__rate_interval]))) > bool 1e-3 or on (instance) vector(0) '
        '* label_replace(up{job="loom"}, "a", "$1", "b", "(.*)") + fabric:x:y offset 5m'
    )
    assert metric_names(expr) == {"loom_path_computation_seconds_bucket", "up", "fabric:x:y"}
    assert grouping_labels(expr) == {"kind", "le", "instance"}
    assert selector_labels(expr) == [
        ("loom_path_computation_seconds_bucket", "kind"),
        ("up", "job"),
    ]
    assert metric_names("topk(10, loom_hosts) / ignoring(x) group_left () loom_links_up") == {
        "loom_hosts",
        "loom_links_up",
    }


def test_every_expression_uses_only_declared_metrics_and_labels() -> None:
    records = set(recording_rules())
    labels = known_labels()
    problems = []
    for where, expr in all_exprs():
        for name in sorted(metric_names(expr)):
            if not allowed_metric(name, records):
                problems.append(f"{where}: unknown metric {name!r} in {expr!r}")
        for metric, label in selector_labels(expr):
            allowed = labels_of(metric) if metric else None
            if allowed is not None and label not in allowed:
                problems.append(f"{where}: {metric} has no label {label!r}")
            elif label not in labels and label != "__name__":
                problems.append(f"{where}: unknown label {label!r}")
        for label in sorted(grouping_labels(expr) - labels):
            problems.append(f"{where}: grouping on unknown label {label!r}")
    assert not problems, "\n".join(problems)


def test_legends_name_labels_that_exist() -> None:
    labels = known_labels()
    for dash in load_dashboards():
        for p in iter_panels(dash):
            for t in p["targets"]:
                used = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", t.get("legendFormat", "")))
                assert used <= labels, f"{dash['uid']} / {p['title']}: {used - labels}"
                if "exported_job" in t["expr"]:
                    assert "job" not in used, f"{p['title']}: {{{{job}}}} is the scrape job"


def test_every_variable_a_query_uses_is_defined() -> None:
    builtins = {"__rate_interval", "__interval", "__range", "__range_s", "__interval_ms"}
    for dash in load_dashboards():
        names = {v["name"] for v in variables(dash)} | builtins
        values = dict.fromkeys(names, "1")
        for q in panel_queries(dash):
            substitute(q.expr, values)  # raises KeyError on an undefined variable
        for var in variables(dash):
            if var["type"] == "query":
                parse_label_values(variable_query(var))
                substitute(variable_query(var), values)


def test_panels_allowed_to_be_empty_are_few_and_justified() -> None:
    marked = set()
    for dash in load_dashboards():
        for p in iter_panels(dash):
            desc = p.get("description", "")
            if EMPTY_OK in desc:
                marked.add((dash["uid"], p["title"]))
                reason = desc.split(EMPTY_OK, 1)[1].strip()
                assert len(reason) >= 30, f"{p['title']}: say why it may be empty"
    assert marked == EMPTY_OK_PANELS
    assert len(marked) <= 3


def test_alerts_cover_the_operators_list() -> None:
    alerts = alert_rules()
    assert {
        "LoomControllerDown",
        "LoomLinkSaturated",
        "LoomFabricPartitioned",
        "LoomRerouteStorm",
        "LoomPolicyReloadFailed",
    } <= set(alerts)
    assert alerts["LoomLinkSaturated"]["expr"].strip() == "loom_link_utilization_ratio > 0.9"
    assert alerts["LoomLinkSaturated"]["for"] == "1m"
    assert alerts["LoomPolicyReloadFailed"]["expr"].strip() == "loom_policy_last_reload_ok == 0"
    assert "up{" in alerts["LoomControllerDown"]["expr"]
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in ("critical", "warning"), name
        assert rule["annotations"].get("summary"), name
        assert rule["annotations"].get("description"), name


def test_every_alert_has_unit_tests_that_fire_and_stay_silent() -> None:
    doc = yaml.safe_load(ALERT_TESTS.read_text())
    assert sorted(doc["rule_files"]) == sorted(p.name for p in RULE_FILES)
    fires: set[str] = set()
    silent: set[str] = set()
    for case in doc["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else silent).add(check["alertname"])
    assert fires == set(alert_rules()), "alerts never shown to fire"
    assert silent == set(alert_rules()), "alerts never shown to stay silent"


def test_readme_describes_every_dashboard_and_alert() -> None:
    readme = (GRAFANA / "README.md").read_text()
    for dash in load_dashboards():
        assert dash["title"] in readme, dash["title"]
    for name in alert_rules():
        assert name in readme, name


@needs_promtool
def test_promtool_check_rules() -> None:
    run = promtool("check", "rules", *(str(p) for p in RULE_FILES))
    assert run.returncode == 0, run.stdout + run.stderr


@needs_promtool
def test_promtool_check_config() -> None:
    run = promtool("check", "config", str(PROMETHEUS_CONFIG))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 rule files found" in run.stdout, run.stdout


@needs_promtool
def test_promtool_alert_unit_tests() -> None:
    run = promtool("test", "rules", str(ALERT_TESTS))
    assert run.returncode == 0, run.stdout + run.stderr
