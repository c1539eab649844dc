"""A read-only view of the core, for the REST API, the metrics exporter and tests.

They read what the core learned and planned through this one door, never the core's
working parts: mappings come back as read-only proxies, and nothing here changes
anything, so the core's internals can change without touching its readers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from controller.capacity import Belief
from controller.collectives import JobState, describe
from controller.flows import FlowKey, TrackedFlow
from controller.jobhealth import JobHealth, health
from controller.model import PortRef
from controller.placement import Path
from controller.routing import infer_groups
from controller.servers import DeclaredNic, describe_servers
from controller.telemetry import BucketSample, PortSample
from controller.topology import Host, Link, Switch

if TYPE_CHECKING:
    from controller.conductor import Conductor
    from controller.policy.schema import Policy


class FabricView:
    def __init__(self, fabric: Conductor) -> None:
        self._f = fabric

    # -- what was learned -----------------------------------------------------
    @property
    def switches(self) -> Mapping[int, Switch]:
        return MappingProxyType(self._f.topo.switches)

    @property
    def links(self) -> Mapping[PortRef, Link]:
        """Live links by their source port."""
        return MappingProxyType(self._f.topo.links)

    @property
    def hosts(self) -> Mapping[str, Host]:
        return MappingProxyType(self._f.topo.hosts)

    def host_by_ip(self, ip: str) -> Host | None:
        return self._f.topo.host_by_ip(ip)

    @property
    def servers(self) -> Mapping[str, tuple[DeclaredNic, ...]]:
        """The policy's GPU servers, NICs in GPU order (empty: none declared)."""
        return MappingProxyType(self._f.inputs.tenants.servers)

    @property
    def policy(self) -> Policy | None:
        """The policy in force (``None``: an open fabric)."""
        return self._f.inputs.tenants.policy

    def tenant_of_ip(self, ip: str) -> str | None:
        """The tenant of the host with this address: learned there, else declared."""
        host = self._f.topo.host_by_ip(ip)
        return host.tenant if host is not None else self._f.inputs.tenants.tenant_of_ip(ip)

    def is_fabric_port(self, ref: PortRef) -> bool:
        return self._f.topo.is_fabric_port(ref)

    def switch_name(self, dpid: int) -> str:
        switch = self._f.topo.switches.get(dpid)
        return switch.name if switch else str(dpid)

    def capacity(self, ref: PortRef) -> float:
        return self._f.readings.capacity(ref)

    def lldp_transit(self, ref: PortRef) -> float | None:
        """Seconds the last LLDP frame out of ``ref`` took to come back from the far
        switch: it waits in the port's queue with the traffic (``controller.graylinks``)."""
        heard = self._f.readings.transit(ref)
        return None if heard is None else heard[1]

    def capacity_belief(self, ref: PortRef) -> Belief:
        """What a port is believed to carry and where that belief came from."""
        return self._f.readings.belief(ref)

    # -- what was planned -----------------------------------------------------
    def next_hops(self, dest: int) -> Mapping[int, tuple[int, ...]]:
        """Per switch, the ports that lead towards the destination switch ``dest``."""
        routes = self._f.inputs.routes
        hops = routes.hops_to(dest) if dest in routes.index else {}
        return MappingProxyType(hops)  # type: ignore[arg-type]

    def address_of(self, mac: str) -> str | None:
        """The MAC Loom hands out for the host ``mac`` (what its peers' ARP learns)."""
        host = self._f.topo.hosts.get(mac)
        return self._f.address_of(host) if host is not None else None

    def peers(self) -> dict[PortRef, int]:
        """The switch at the far end of every routed link (by its source port)."""
        return {(u, k): v for u, v, k in self._f.inputs.routes.graph.edges(keys=True)}

    def ecmp_groups(self) -> dict[Any, int] | None:
        """Groups of interchangeable switches of the learned links (None: no tiers)."""
        return infer_groups(self._f.topo.snapshot())

    # -- traffic engineering ----------------------------------------------------
    @property
    def flows(self) -> Mapping[FlowKey, TrackedFlow]:
        return MappingProxyType(self._f.sources.te.flows.flows)

    def elephants(self) -> list[TrackedFlow]:
        return self._f.sources.te.flows.elephants()

    @property
    def pinned(self) -> Mapping[FlowKey, Path]:
        """Flows traffic engineering has pinned, and their paths."""
        return MappingProxyType(self._f.sources.te.paths)

    def pinned_path(self, key: FlowKey) -> Path | None:
        return self._f.sources.te.paths.get(key)

    def last_moved(self, key: FlowKey) -> float | None:
        """When traffic engineering last moved the flow (``None``: never moved)."""
        return self._f.sources.te.moved_at.get(key)

    @property
    def ack_flows(self) -> frozenset[FlowKey]:
        """Reverse flows of elephants marked into the control class."""
        return frozenset(self._f.sources.te.acks)

    def ack_priority(self, key: FlowKey) -> bool:
        return key in self._f.sources.te.acks

    @property
    def reroutes(self) -> Mapping[str, int]:
        return MappingProxyType(self._f.sources.te.reroutes)

    @property
    def max_link_utilization(self) -> float:
        return self._f.sources.te.last_max_utilization

    @property
    def quiet_ports(self) -> Mapping[PortRef, float]:
        """Edge ports whose new flows go untracked, and until when."""
        return MappingProxyType(self._f.sources.te.quiet)

    # -- measurements -----------------------------------------------------------
    @property
    def port_samples(self) -> Mapping[PortRef, PortSample]:
        return MappingProxyType(self._f.readings.telemetry.ports)

    @property
    def group_samples(self) -> Mapping[tuple[int, int], BucketSample]:
        return MappingProxyType(self._f.readings.telemetry.groups)

    def tx_bps(self, ref: PortRef) -> float:
        return self._f.readings.telemetry.tx_bps(ref)

    # -- jobs and counts --------------------------------------------------------
    @property
    def jobs(self) -> Mapping[str, JobState]:
        return MappingProxyType(self._f.sources.jobs.jobs)

    def describe_job(self, name: str) -> dict[str, Any]:
        """A job as the API shows it, with how it fares (:mod:`controller.jobhealth`)."""
        body = describe(self._f.sources.jobs.jobs[name], self._f.topo, self.switch_name)
        h = self.job_health(name)
        link = None
        if h.limiting_link is not None:
            peer = self._f.topo.links.get(h.limiting_link)
            host = next(
                (x for x in self.hosts.values() if (x.dpid, x.port) == h.limiting_link), None
            )
            link = {
                "switch": self.switch_name(h.limiting_link[0]),
                "port": h.limiting_link[1],
                "to": self.switch_name(peer.dst[0]) if peer else (host.ip if host else None),
            }
        body["health"] = {
            "busbw_mbps": round(h.busbw_bps / 1e6, 3),
            "limiting_link": link,
            "limiting_link_utilization": round(h.utilization, 3),
            "sharing_jobs": list(h.sharing_jobs),
            "sharing_flows": h.sharing_flows,
        }
        return body

    def job_health(self, name: str) -> JobHealth:
        return self.jobs_health([name])[name]

    def jobs_health(self, names: Iterable[str] | None = None) -> dict[str, JobHealth]:
        """Health of the named jobs (all by default), computed together (one pass)."""
        topo, jobs = self._f.topo, self._f.sources.jobs.jobs

        def access(ip: str) -> PortRef | None:
            host = topo.host_by_ip(ip)
            return (host.dpid, host.port) if host else None

        def utilization(ref: PortRef) -> float:
            capacity = self._f.readings.capacity(ref)
            return self._f.readings.telemetry.tx_bps(ref) / capacity if capacity > 0 else 0.0

        every = health(jobs.values(), access, utilization, self._f.sources.te.paths.values())
        return every if names is None else {n: every[n] for n in names}

    @property
    def events(self) -> Mapping[str, int]:
        """What the core counted: its own events, traffic engineering's, ARP's refusals
        (``te.`` and ``arp.`` prefixed)."""
        merged: Counter[str] = Counter(self._f.events)
        merged.update({f"te.{k}": v for k, v in self._f.sources.te.events.items()})
        merged["arp.rejected"] = self._f.arp.rejected
        merged["rules.group_deleted_in_use"] = self._f.store.deleted_in_use
        merged.update({f"gray.{k}": v for k, v in self._f.readings.gray.verdicts.items()})
        return MappingProxyType(merged)

    def _link(self, src: PortRef, dst: PortRef) -> dict[str, Any]:
        belief = self.capacity_belief(src)
        return {
            "src": list(src),
            "dst": list(dst),
            "capacity_bps": belief.bps,
            "capacity_source": belief.source,
            "reported_bps": self._f.topo.reported_bps(src),
            "lldp_transit_s": self.lldp_transit(src),
        }

    def describe(self) -> dict[str, Any]:
        """The learned fabric as plain data (for the API, logs and the demo), with the
        policy's servers where discovery saw their NICs and whether rails hold."""
        topo = self._f.topo
        links = sorted((link.src, link.dst) for link in topo.links.values())
        groups = self.ecmp_groups()  # of the links above, not of the last plan
        return {
            "switches": sorted(topo.switches),
            "links": [self._link(s, d) for s, d in links],
            "hosts": [
                {
                    "mac": h.mac,
                    "ip": h.ip,
                    "dpid": h.dpid,
                    "port": h.port,
                    "address": self._f.address_of(h),
                }
                for h in sorted(topo.hosts.values(), key=lambda h: (h.dpid, h.port, h.mac))
            ],
            "groups": None if groups is None else len(set(groups.values())),
            "profiles": {
                "default": self._f.inputs.limits.default.name,
                "switches": {
                    str(d): p.name for d, p in sorted(self._f.inputs.limits.by_dpid.items())
                },
            },
            **describe_servers(self._f.inputs.tenants.servers, topo.hosts, topo.host_by_ip),
        }
