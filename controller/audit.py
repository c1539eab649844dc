"""The audit trail: every change asked of the REST API and every refused token, one JSON
line each on the ``loom.audit`` logger, and counted for Prometheus.

A line says who (the token's name and tenant, ``admin``, ``anonymous``: never the token),
what (method, path, action, and the job and tenant it concerned), the outcome (the HTTP
status, and the right missing when refused) and when (``clock``: wall time, injected).
Operators route the logger wherever their audit records go (a file, syslog, a SIEM).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from controller.access import Caller
from controller.metricdoc import MetricDoc

log = logging.getLogger("loom.audit")
Family = GaugeMetricFamily | CounterMetricFamily
ACTIONS = {  # (method, resource, shape) -> the change it asks for
    ("POST", "jobs", None): "job_create",
    ("POST", "jobs", "*/renew"): "job_renew",
    ("DELETE", "jobs", "*"): "job_delete",
    ("POST", "policy", "*"): "policy_reload",
}
OUTCOMES = ("ok", "refused", "denied", "failed")


def action_of(method: str, resource: str, shape: str | None) -> str | None:
    """The change a request asks for; ``None`` for a read (or nothing the API knows)."""
    if method == "GET":
        return None
    return ACTIONS.get((method, resource, shape), "other")


def outcome_of(status: int, about: Mapping[str, str]) -> str:
    """denied (the token: a refusal names the ``right`` it lacked, whether answered 401,
    403 or, for another tenant's job, 404), else ok (2xx), refused (another 4xx), failed
    (5xx)."""
    if "right" in about:
        return "denied"
    if status < 400:
        return "ok"
    return "refused" if status < 500 else "failed"


@dataclass(frozen=True)
class AuditEvent:
    caller: Caller
    method: str
    path: str
    action: str  # job_create ... or "read" for a refused read
    status: int
    about: Mapping[str, str] = field(default_factory=dict)  # job, tenant, right


@dataclass
class AuditTrail:
    clock: Callable[[], float]  # wall-clock seconds (the shim passes time.time)
    changes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (action, outcome)
    denials: Counter[tuple[str, str]] = field(default_factory=Counter)  # (role, right)

    def record(self, event: AuditEvent) -> str:
        """Log and count one event; the line, for tests."""
        caller = event.caller
        line = json.dumps(
            {
                "time": round(self.clock(), 3),
                "who": caller.who,
                "role": caller.role.value,
                "tenant": caller.tenant,
                "method": event.method[:16],
                "path": event.path[:200],
                "action": event.action,
                "status": event.status,
                **{k: v[:200] for k, v in sorted(event.about.items())},
            },
            sort_keys=True,
        )
        log.info("%s", line)
        outcome = outcome_of(event.status, event.about)
        if event.action != "read":
            self.changes[(event.action, outcome)] += 1
        if outcome == "denied":
            self.denials[(caller.role.value, event.about.get("right", "token"))] += 1
        return line


def audit_docs() -> list[MetricDoc]:
    return [
        MetricDoc(
            "loom_api_changes_total",
            "counter",
            ("action", "outcome"),
            "Changes asked of the REST API (job_create, job_renew, job_delete, policy_reload,"
            " other) by outcome: ok, refused (a bad request), denied (the token), failed.",
        ),
        MetricDoc(
            "loom_api_denied_total",
            "counter",
            ("role", "right"),
            "REST requests refused for their token (401, 403; 404 where a tenant's token asks"
            " for another tenant's job), by the caller's role and the right it lacked (token:"
            " a token Loom does not know).",
        ),
    ]


def audit_families(trail: AuditTrail | None, family: Callable[[str], Family]) -> Iterator[Family]:
    changes, denied = family("loom_api_changes_total"), family("loom_api_denied_total")
    counted = trail.changes if trail is not None else Counter[tuple[str, str]]()
    for action in sorted({*ACTIONS.values(), "other"}):
        for outcome in OUTCOMES:
            changes.add_metric([action, outcome], counted.get((action, outcome), 0))
    for (role, right), n in sorted((trail.denials if trail is not None else {}).items()):
        denied.add_metric([role, right], n)
    yield from (changes, denied)
