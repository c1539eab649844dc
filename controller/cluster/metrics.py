"""The cluster's metrics: who masters what, the store's health, what this instance dropped.

Declared here (``CLUSTER_METRICS``, part of ``controller.metrics.METRICS``) and read at
scrape time from ``ClusterFigures``, which the cluster glue fills in. An instance that runs
alone reports itself as the master of every connected switch and no cluster members, so
dashboards and alerts read the same series either way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from controller.metricdoc import MetricDoc

Family = GaugeMetricFamily | CounterMetricFamily


@dataclass(frozen=True)
class ClusterFigures:
    member: str  # this instance ("" when it runs alone)
    members: int  # live members in the store
    masters: Mapping[int, str] = field(default_factory=dict)  # dpid -> member, per the store
    mine: int = 0  # switches whose role reply made this instance their master
    unmastered: int = 0  # switches a member is connected to that nobody masters
    changes: Mapping[str, int] = field(default_factory=dict)  # gained / lost / released
    store_up: bool = True
    rtt: float = 0.0  # seconds, the store's last round trip
    revision: int = 0  # store revision of the shared state applied here
    term_changes: int = 0  # etcd leader elections seen
    dropped: Mapping[str, int] = field(default_factory=dict)  # writes not sent, by reason


def cluster_docs() -> list[MetricDoc]:
    return [
        MetricDoc(
            "loom_cluster_members", "gauge", (), "Live Loom instances in the cluster (0: alone)."
        ),
        MetricDoc(
            "loom_cluster_switch_master",
            "gauge",
            ("switch", "member"),
            "1 for the instance that masters each switch, as the cluster store says.",
        ),
        MetricDoc(
            "loom_cluster_switches_mastered",
            "gauge",
            (),
            "Switches this instance masters (its role request answered).",
        ),
        MetricDoc(
            "loom_cluster_switches_unmastered",
            "gauge",
            (),
            "Switches connected to a live instance that no instance masters.",
        ),
        MetricDoc(
            "loom_cluster_mastership_changes_total",
            "counter",
            ("change",),
            "Switches this instance gained, lost (to another, or with its lease) or released.",
        ),
        MetricDoc(
            "loom_cluster_store_up", "gauge", (), "1 while the cluster store (etcd) answers."
        ),
        MetricDoc(
            "loom_cluster_store_rtt_seconds",
            "gauge",
            (),
            "Round-trip time of the last request to the cluster store.",
        ),
        MetricDoc(
            "loom_cluster_state_revision",
            "gauge",
            (),
            "Store revision of the shared state (jobs, policy) this instance applies.",
        ),
        MetricDoc(
            "loom_cluster_store_leader_changes_total",
            "counter",
            (),
            "Leader elections of the cluster store seen by this instance.",
        ),
        MetricDoc(
            "loom_cluster_writes_dropped_total",
            "counter",
            ("reason",),
            "Messages not sent to a switch this instance may not write (slave, claimed:"
            " waiting for the role reply, fenced: its lease may have expired).",
        ),
    ]


def cluster_families(
    figures: ClusterFigures, family: Callable[[str], Family], name: Callable[[int], str]
) -> Iterator[Family]:
    values = {
        "loom_cluster_members": figures.members,
        "loom_cluster_switches_mastered": figures.mine,
        "loom_cluster_switches_unmastered": figures.unmastered,
        "loom_cluster_store_up": 1.0 if figures.store_up else 0.0,
        "loom_cluster_store_rtt_seconds": figures.rtt,
        "loom_cluster_state_revision": figures.revision,
        "loom_cluster_store_leader_changes_total": figures.term_changes,
    }
    for metric, value in values.items():
        fam = family(metric)
        fam.add_metric([], value)
        yield fam
    masters = family("loom_cluster_switch_master")
    for dpid, member in sorted(figures.masters.items()):
        masters.add_metric([name(dpid), member], 1.0)
    yield masters
    changes = family("loom_cluster_mastership_changes_total")
    for change in ("gained", "lost", "released"):
        changes.add_metric([change], figures.changes.get(change, 0))
    yield changes
    dropped = family("loom_cluster_writes_dropped_total")
    for reason in ("slave", "claimed", "fenced"):
        dropped.add_metric([reason], figures.dropped.get(reason, 0))
    yield dropped
