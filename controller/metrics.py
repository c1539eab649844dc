"""Every Prometheus metric Loom exports, declared once (``METRICS``).

Values are read from the core at scrape time by a collector, so they are never stale
copies; the registry is injectable so tests can scrape without a server. Switches are
labelled by name (an OVS bridge's name, else the dpid in hex) and ports by number.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.audit import AuditTrail, audit_docs, audit_families
from controller.cluster.metrics import ClusterFigures, cluster_docs, cluster_families
from controller.collectives import JobState
from controller.commit import OPTIONAL
from controller.conductor import Conductor
from controller.metricdoc import MetricDoc
from controller.policy.manager import PolicyStatus
from controller.telemetry import imbalance
from controller.view import FabricView

LINK = ("src_switch", "src_port", "dst_switch", "dst_port")
PORT = ("switch", "port")
METRICS = [
    MetricDoc("loom_switches_up", "gauge", (), "Switches connected to the controller."),
    MetricDoc("loom_links_up", "gauge", (), "Directed switch-to-switch links discovered and up."),
    MetricDoc("loom_hosts", "gauge", (), "Hosts learned at edge ports."),
    MetricDoc(
        "loom_link_capacity_bits_per_second",
        "gauge",
        (*LINK, "source"),
        "Capacity Loom believes a directed link has; source: degraded or suspect (held flat"
        " well below its kind while its flows had room elsewhere: avoided), configured,"
        " learned (drops at its egress, or held flat by TCP at its kind's highest level),"
        " peers (learned on links whose ports report the same speed), reported, or default.",
    ),
    MetricDoc(
        "loom_degraded_link_verdicts_total",
        "counter",
        ("verdict",),
        "Gray-link verdicts: suspected (a link held well below its kind; its flows moved off"
        " to test it), degraded (they sped up once moved), cleared (they did not), retried"
        " (a degraded link believed again after its hold), untested (its flows ended, slowed"
        " down once moved, or left by a way that proves nothing).",
    ),
    MetricDoc("loom_link_load_bits_per_second", "gauge", LINK, "Measured load of a directed link."),
    MetricDoc(
        "loom_link_lldp_transit_seconds",
        "gauge",
        LINK,
        "Time the last LLDP frame took from the controller out of a directed link back to it"
        " from the far switch: it waits in the port's queue with the traffic, so a standing"
        " queue shows here.",
    ),
    MetricDoc(
        "loom_link_utilization_ratio", "gauge", LINK, "Load over capacity of a directed link."
    ),
    MetricDoc("loom_port_receive_bytes_total", "counter", PORT, "Bytes a switch port received."),
    MetricDoc("loom_port_transmit_bytes_total", "counter", PORT, "Bytes a switch port sent."),
    MetricDoc(
        "loom_port_receive_packets_total", "counter", PORT, "Packets a switch port received."
    ),
    MetricDoc("loom_port_transmit_packets_total", "counter", PORT, "Packets a switch port sent."),
    MetricDoc("loom_port_receive_drops_total", "counter", PORT, "Packets dropped on receive."),
    MetricDoc("loom_port_transmit_drops_total", "counter", PORT, "Packets dropped on transmit."),
    MetricDoc("loom_port_receive_errors_total", "counter", PORT, "Receive errors."),
    MetricDoc("loom_port_transmit_errors_total", "counter", PORT, "Transmit errors."),
    MetricDoc(
        "loom_group_bucket_packets_total",
        "counter",
        ("switch", "group", "bucket"),
        "Packets through each bucket of an ECMP select group.",
    ),
    MetricDoc(
        "loom_group_bucket_bytes_total",
        "counter",
        ("switch", "group", "bucket"),
        "Bytes through each bucket of an ECMP select group.",
    ),
    MetricDoc(
        "loom_group_imbalance_ratio",
        "gauge",
        ("switch", "group"),
        "Busiest bucket's rate over the mean bucket rate, minus 1 (0 = even).",
    ),
    MetricDoc("loom_flows_tracked", "gauge", (), "Flows with an accounting rule at their ingress."),
    MetricDoc("loom_elephant_flows", "gauge", (), "Tracked flows above the elephant threshold."),
    MetricDoc(
        "loom_elephant_flow_bits_per_second",
        "gauge",
        ("flow", "ingress_switch", "pinned"),
        "Measured rate of each elephant flow.",
    ),
    MetricDoc(
        "loom_reroutes_total",
        "counter",
        ("reason",),
        "Flows moved to another path, by reason (new_elephant, congestion, link_down).",
    ),
    MetricDoc(
        "loom_flows_placed_total",
        "counter",
        (),
        "New flows pinned at their first packet onto the least-loaded equal-cost path.",
    ),
    MetricDoc(
        "loom_te_max_link_utilization_ratio",
        "gauge",
        (),
        "Highest link utilisation the last traffic-engineering plan expects.",
    ),
    MetricDoc(
        "loom_packet_in_total", "counter", ("kind",), "Packets the switches sent the controller."
    ),
    MetricDoc("loom_jobs", "gauge", ("status",), "Registered collective jobs, active or waiting."),
    MetricDoc(
        "loom_policy_reloads_total", "counter", ("result",), "Policy reloads, ok or rejected."
    ),
    MetricDoc("loom_policy_last_reload_ok", "gauge", (), "1 if the last policy reload was valid."),
    MetricDoc(
        "loom_isolation_drops_total",
        "counter",
        ("kind",),
        "Frames refused by the controller: lying or unadmitted ARP, packets between tenants.",
    ),
    MetricDoc(
        "loom_job_bytes_total",
        "counter",
        ("job", "tenant"),
        "Bytes a job's senders put into the fabric (its ingress rules' counters).",
    ),
    MetricDoc("loom_tenant_bytes_total", "counter", ("tenant",), "Bytes of all jobs of a tenant."),
    MetricDoc(
        "loom_job_busbw_bps",
        "gauge",
        ("job", "tenant"),
        "A job's bus bandwidth estimated from its counters: the median rank's send rate in"
        " the last poll interval (nccl-tests' busbw for rings and all-to-all; 0 when idle).",
    ),
    MetricDoc(
        "loom_job_limiting_link_utilization_ratio",
        "gauge",
        ("job", "tenant", "switch", "port"),
        "Measured load / capacity of the busiest link a job's paths cross: what limits it.",
    ),
    MetricDoc(
        "loom_job_limiting_link_sharers",
        "gauge",
        ("job", "tenant", "kind"),
        "Other jobs (kind=job) and pinned flows (kind=flow) on a job's limiting link.",
    ),
    MetricDoc(
        "loom_job_link_pairs",
        "gauge",
        ("job", *LINK),
        "Sender-receiver pairs of a job placed on a directed link: which jobs load a link.",
    ),
    MetricDoc(
        "loom_event_handling_seconds",
        "histogram",
        ("event",),
        "From an event's arrival to the last message sent for it (port_status: the reroute).",
    ),
    MetricDoc(
        "loom_reroute_latency_seconds",
        "histogram",
        (),
        "From a PortStatus reaching the controller to the barrier replies of every switch"
        " its reroute modified: the reroute is in force.",
    ),
    MetricDoc(
        "loom_flow_tracking_paused_total",
        "counter",
        (),
        "Times an edge port opened flows too fast and its flows went untracked for a while.",
    ),
    MetricDoc(
        "loom_switch_rejections_total",
        "counter",
        (),
        "Messages a switch refused with an OpenFlow error (the controller log names each).",
    ),
    MetricDoc(
        "loom_switch_repairs_total",
        "counter",
        (),
        "Times a switch that refused a message was read back and its differences resent.",
    ),
    MetricDoc(
        "loom_rules_refused_total",
        "counter",
        ("owner",),
        "Optional rule sets (owner: flow pins, job placements, quiet rules) not installed"
        " because a switch's profile caps its flow entries; forwarding falls back to routes.",
    ),
    MetricDoc(
        "loom_groups_deleted_in_use_total",
        "counter",
        (),
        "Groups deleted while a flow Loom holds still pointed at one (the switch deletes"
        " that flow with it): never planned, each is a bug and is logged.",
    ),
    MetricDoc(
        "loom_hosts_recovered_total",
        "counter",
        (),
        "Hosts found in the delivery rules a (re)connecting switch still held: after a"
        " controller restart, hosts known without having to speak.",
    ),
    MetricDoc(
        "loom_input_dropped_total",
        "counter",
        ("reason",),
        "Input counted and dropped: undecodable frames, packet-ins from ports a switch"
        " does not have, statistics replies nobody asked for, errors about no message of"
        " ours, counters of ports a switch does not have, messages of a refused or"
        " replaced connection.",
    ),
    MetricDoc(
        "loom_switch_connections_refused_total",
        "counter",
        ("reason",),
        "OpenFlow connections closed unheard: a datapath id already connected from"
        " another address (duplicate_dpid), a failed TLS handshake, such as a switch"
        " without a certificate of the CA (tls_handshake). The controller log names each.",
    ),
    MetricDoc(
        "loom_handler_errors_total",
        "counter",
        ("handler",),
        "Events (or REST requests) whose handling failed with an error; each is a bug.",
    ),
    MetricDoc(
        "loom_api_aborted_requests_total",
        "counter",
        (),
        "REST requests whose client hung up before its body arrived: logged, not answered.",
    ),
    MetricDoc(
        "loom_api_tls_refused_total",
        "counter",
        (),
        "REST connections refused at the TLS handshake (plain HTTP, a client without a"
        " certificate of LOOM_API_CA where one is asked, another CA's): one warning each.",
    ),
    MetricDoc(
        "loom_path_computation_seconds",
        "histogram",
        ("kind",),
        "Time to compute routes (kind=routes) or a traffic-engineering plan (kind=te).",
    ),
]
METRICS += cluster_docs()
METRICS += audit_docs()
PACKET_IN_KINDS = {
    "lldp_in": "lldp",
    "arp_in": "arp",
    "flow_in": "flow",
    "route_miss_dropped": "route_miss",
    "route_miss_reinjected": "route_miss",
    "undecodable_in": "undecodable",
}


CORE_DROPS = {
    "undecodable_in": "undecodable_frame",
    "unknown_in_port": "unknown_in_port",
    "stats_unknown_port": "stats_unknown_port",
}


@dataclass
class ShimCounts:
    """What the Ryu shim refuses or fails on, by reason (the core counts its own)."""

    dropped: Counter[str] = field(default_factory=Counter)
    handler_errors: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)  # connections, by reason
    api_aborted: int = 0  # REST clients that hung up mid-body
    api_tls_refused: int = 0  # REST connections refused at the TLS handshake


class FabricCollector(Collector):
    """Reads the core's state when Prometheus scrapes."""

    def __init__(self, view: FabricView, policy: PolicyStatus, shim: ShimCounts) -> None:
        self.view = view
        self.policy = policy
        self.shim = shim
        self.cluster: Callable[[], ClusterFigures] | None = None  # set when in a cluster
        self.audit: AuditTrail | None = None  # set when the REST API is served

    def _family(self, name: str) -> GaugeMetricFamily | CounterMetricFamily:
        doc = next(m for m in METRICS if m.name == name)
        cls = CounterMetricFamily if doc.kind == "counter" else GaugeMetricFamily
        base = name[: -len("_total")] if doc.kind == "counter" else name
        return cls(base, doc.help, labels=list(doc.labels))

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        events = self.view.events
        yield from self._inventory()
        yield from self._links()
        yield from self._ports()
        yield from self._groups()
        yield from self._flows()
        yield from self._jobs()
        yield from self._policy()
        packet_ins = self._family("loom_packet_in_total")
        per_kind: dict[str, float] = {}
        for event, kind in PACKET_IN_KINDS.items():
            per_kind[kind] = per_kind.get(kind, 0.0) + events.get(event, 0)
        for kind, value in sorted(per_kind.items()):
            packet_ins.add_metric([kind], value)
        yield packet_ins
        for name, event in (
            ("loom_switch_rejections_total", "switch_rejected"),
            ("loom_switch_repairs_total", "switch_repaired"),
            ("loom_hosts_recovered_total", "host_recovered"),
            ("loom_groups_deleted_in_use_total", "rules.group_deleted_in_use"),
        ):
            family = self._family(name)
            family.add_metric([], events.get(event, 0))
            yield family
        verdicts = self._family("loom_degraded_link_verdicts_total")
        for verdict in ("suspected", "degraded", "cleared", "retried", "untested"):
            verdicts.add_metric([verdict], events.get(f"gray.{verdict}", 0))
        yield verdicts
        yield from self._refused(events)
        yield from self._cluster()
        refused = self._family("loom_rules_refused_total")
        for owner in OPTIONAL:
            refused.add_metric([owner.value], events.get(f"limit_refused.{owner}", 0))
        yield refused

    def _refused(
        self, events: Mapping[str, int]
    ) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        dropped = self._family("loom_input_dropped_total")
        counts = Counter({CORE_DROPS[e]: events.get(e, 0) for e in CORE_DROPS})
        counts.update(self.shim.dropped)
        for reason, n in sorted(counts.items()):
            dropped.add_metric([reason], n)
        errors = self._family("loom_handler_errors_total")
        for handler, n in sorted(self.shim.handler_errors.items()):
            errors.add_metric([handler], n)
        aborted = self._family("loom_api_aborted_requests_total")
        aborted.add_metric([], self.shim.api_aborted)
        tls_refused = self._family("loom_api_tls_refused_total")
        tls_refused.add_metric([], self.shim.api_tls_refused)
        refused = self._family("loom_switch_connections_refused_total")
        for reason, n in sorted(self.shim.refused.items()):
            refused.add_metric([reason], n)
        yield from (dropped, errors, aborted, tls_refused, refused)
        yield from audit_families(self.audit, self._family)

    def _cluster(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        alone = ClusterFigures("", 0, mine=len(self.view.switches))
        figures = self.cluster() if self.cluster is not None else alone
        yield from cluster_families(figures, self._family, self._name)

    def _name(self, dpid: int) -> str:
        switch = self.view.switches.get(dpid)
        return switch.name if switch else f"{dpid:016x}"

    def _inventory(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        topo = self.view
        for name, value in (
            ("loom_switches_up", len(topo.switches)),
            ("loom_links_up", len(topo.links)),
            ("loom_hosts", len(topo.hosts)),
        ):
            fam = self._family(name)
            fam.add_metric([], value)
            yield fam

    def _links(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        v = self.view
        cap, load, util, transit = (
            self._family(n)
            for n in (
                "loom_link_capacity_bits_per_second",
                "loom_link_load_bits_per_second",
                "loom_link_utilization_ratio",
                "loom_link_lldp_transit_seconds",
            )
        )
        for src, link in sorted(v.links.items()):
            labels = [self._name(src[0]), str(src[1]), self._name(link.dst[0]), str(link.dst[1])]
            belief, bps = v.capacity_belief(src), v.tx_bps(src)
            c = belief.bps
            cap.add_metric([*labels, belief.source], c)
            load.add_metric(labels, bps)
            util.add_metric(labels, bps / c if c else 0.0)
            seconds = v.lldp_transit(src)
            if seconds is not None:
                transit.add_metric(labels, seconds)
        yield from (cap, load, util, transit)

    def _ports(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        fields = (
            ("receive_bytes", "rx_bytes"),
            ("transmit_bytes", "tx_bytes"),
            ("receive_packets", "rx_packets"),
            ("transmit_packets", "tx_packets"),
            ("receive_drops", "rx_dropped"),
            ("transmit_drops", "tx_dropped"),
            ("receive_errors", "rx_errors"),
            ("transmit_errors", "tx_errors"),
        )
        samples = sorted(self.view.port_samples.items())
        for metric, attr in fields:
            fam = self._family(f"loom_port_{metric}_total")
            for (dpid, port), sample in samples:
                fam.add_metric([self._name(dpid), str(port)], getattr(sample.stats, attr))
            yield fam

    def _groups(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        pkts, byts = (
            self._family("loom_group_bucket_packets_total"),
            self._family("loom_group_bucket_bytes_total"),
        )
        skew = self._family("loom_group_imbalance_ratio")
        for (dpid, gid), sample in sorted(self.view.group_samples.items()):
            name = self._name(dpid)
            for i, (p, b) in enumerate(
                zip(sample.stats.bucket_packets, sample.stats.bucket_bytes, strict=True)
            ):
                pkts.add_metric([name, str(gid), str(i)], p)
                byts.add_metric([name, str(gid), str(i)], b)
            skew.add_metric([name, str(gid)], imbalance(sample.bucket_bps))
        yield from (pkts, byts, skew)

    def _flows(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        v = self.view
        tracked, elephants = self._family("loom_flows_tracked"), self._family("loom_elephant_flows")
        tracked.add_metric([], len(v.flows))
        big = v.elephants()
        elephants.add_metric([], len(big))
        rates = self._family("loom_elephant_flow_bits_per_second")
        for flow in big:
            rates.add_metric(
                [
                    str(flow.key),
                    self._name(flow.ingress),
                    str(v.pinned_path(flow.key) is not None).lower(),
                ],
                flow.rate_bps,
            )
        reroutes = self._family("loom_reroutes_total")
        for reason in ("new_elephant", "congestion", "link_down"):
            reroutes.add_metric([reason], v.reroutes.get(reason, 0))
        placed = self._family("loom_flows_placed_total")
        placed.add_metric([], v.events.get("te.flows_placed", 0))
        peak = self._family("loom_te_max_link_utilization_ratio")
        peak.add_metric([], v.max_link_utilization)
        yield from (tracked, elephants, rates, reroutes, placed, peak)

    def _jobs(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        v = self.view
        count, per_job = self._family("loom_jobs"), self._family("loom_job_bytes_total")
        per_tenant, on_link = (
            self._family("loom_tenant_bytes_total"),
            self._family("loom_job_link_pairs"),
        )
        jobs = sorted(v.jobs.values(), key=lambda j: j.spec.name)
        active = sum(1 for j in jobs if j.placed)
        count.add_metric(["active"], active)
        count.add_metric(["waiting"], len(jobs) - active)
        tenants: dict[str, int] = {}
        for job in jobs:
            per_job.add_metric([job.spec.name, job.spec.tenant], job.bytes)
            tenants[job.spec.tenant] = tenants.get(job.spec.tenant, 0) + job.bytes
            pairs: dict[tuple[int, int], int] = {}
            for path in job.paths.values():
                for hop in path:
                    pairs[hop] = pairs.get(hop, 0) + 1
            for src, n in sorted(pairs.items()):
                seen = v.links.get(src)
                if seen is not None:
                    labels = [
                        self._name(src[0]),
                        str(src[1]),
                        self._name(seen.dst[0]),
                        str(seen.dst[1]),
                    ]
                    on_link.add_metric([job.spec.name, *labels], n)
        for tenant, total in sorted(tenants.items()):
            per_tenant.add_metric([tenant], total)
        yield from (count, per_job, per_tenant, on_link, *self._job_health(jobs))

    def _job_health(
        self, jobs: list[JobState]
    ) -> tuple[GaugeMetricFamily | CounterMetricFamily, ...]:
        busbw, limit, sharers = (
            self._family("loom_job_busbw_bps"),
            self._family("loom_job_limiting_link_utilization_ratio"),
            self._family("loom_job_limiting_link_sharers"),
        )
        every = self.view.jobs_health()
        for job in jobs:
            h = every[job.spec.name]
            who = [job.spec.name, job.spec.tenant]
            busbw.add_metric(who, h.busbw_bps)
            if h.limiting_link is not None:
                dpid, port = h.limiting_link
                limit.add_metric([*who, self._name(dpid), str(port)], h.utilization)
                sharers.add_metric([*who, "job"], len(h.sharing_jobs))
                sharers.add_metric([*who, "flow"], h.sharing_flows)
        return busbw, limit, sharers

    def _policy(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        st = self.policy
        reloads, last_ok = (
            self._family("loom_policy_reloads_total"),
            self._family("loom_policy_last_reload_ok"),
        )
        reloads.add_metric(["ok"], st.reloads_ok)
        reloads.add_metric(["rejected"], st.reloads_failed)
        last_ok.add_metric([], 1.0 if st.ok else 0.0)
        paused = self._family("loom_flow_tracking_paused_total")
        events = self.view.events
        paused.add_metric([], events.get("te.ports_quieted", 0))
        yield paused
        dropped = self._family("loom_isolation_drops_total")
        dropped.add_metric(["arp"], events.get("arp.rejected", 0))
        dropped.add_metric(["route"], events.get("isolation_dropped", 0))
        yield from (reloads, last_ok, dropped)


BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
# Finer around the 100 ms target (BENCHMARKS.md section 4), so p50/p95 interpolate well.
REROUTE_BUCKETS = (
    0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.06, 0.075,
    0.1, 0.125, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5, 5.0,
)  # fmt: skip


class LoomMetrics:
    """The registry a Loom controller serves: the collector plus timing histograms."""

    def __init__(
        self,
        fabric: Conductor,
        registry: CollectorRegistry | None = None,
        policy: PolicyStatus | None = None,
        shim: ShimCounts | None = None,
    ) -> None:
        self.registry = registry or CollectorRegistry()
        self.shim = shim or ShimCounts()
        view = FabricView(fabric)
        self.collector = FabricCollector(view, policy or PolicyStatus(None), self.shim)
        self.registry.register(self.collector)
        self.path_seconds = self._histogram("loom_path_computation_seconds", BUCKETS)
        self.handling = self._histogram("loom_event_handling_seconds", BUCKETS)
        self.reroute = self._histogram("loom_reroute_latency_seconds", REROUTE_BUCKETS)

    def _histogram(self, name: str, buckets: tuple[float, ...]) -> Histogram:
        """A histogram as ``METRICS`` declares it (name, help, labels)."""
        doc = next(m for m in METRICS if m.name == name)
        return Histogram(
            doc.name, doc.help, list(doc.labels), registry=self.registry, buckets=buckets
        )

    def rerouted(self, seconds: float) -> None:
        self.reroute.observe(seconds)

    def handled(self, event: str, seconds: float) -> None:
        self.handling.labels(event).observe(seconds)

    def observe(self, timings: list[tuple[str, float]]) -> None:
        for kind, seconds in timings:
            self.path_seconds.labels(kind).observe(seconds)
