"""Tenant isolation, enforced at the ingress edge port.

Every frame a host sends is checked where it enters: the ADMIT table passes only
untagged IPv4 from a tenant member's own port, MAC and IP, and writes the tenant's id
into metadata; anything else from an edge port is dropped there (spoofed MACs or IPs,
VLAN tags, other ethertypes, hosts in no tenant), and so is a frame to any address
but a Loom address of the sender's own tenant (the tenant id is part of every address
Loom hands out, see ``controller.addressing``).
ARP crosses the fabric only as a host's unicast request to a Loom address of its own
tenant, which the target's switch answers (``controller.responder``); the controller
answers the rest, and only within a tenant.
Without a policy the fabric is open: everyone is tenant 0 and ADMIT passes all.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from controller.addressing import of_tenant
from controller.model import (
    ETH_TYPE_IPV4,
    META_TENANT_MASK,
    META_TENANT_SHIFT,
    CookieKind,
    FlowRule,
    Match,
    MeterRule,
    SwitchRules,
    Table,
    make_cookie,
)
from controller.servers import DeclaredNic, declared_servers
from controller.topology import Host, Topology

if TYPE_CHECKING:
    from controller.policy.schema import HostEntry, Policy

OFPVID_NONE = 0x0000
PRIO_ADMIT = 300
UNASSIGNED = ""  # the tenant of hosts in no tenant, when the policy allows them


def stable_ids(names: list[str]) -> dict[str, int]:
    """Tenant ids 1..65535 from CRC32 of the name: the same tenant keeps its id across
    reloads and restarts, whatever else the policy adds or removes."""
    ids: dict[str, int] = {}
    taken: set[int] = set()
    for name in sorted(names):
        ident = zlib.crc32(name.encode()) % 0xFFFF + 1
        while ident in taken:
            ident = ident % 0xFFFF + 1
        ids[name] = ident
        taken.add(ident)
    return ids


@dataclass
class TenantView:
    """The policy compiled for quick questions; ``policy is None`` means an open fabric."""

    policy: Policy | None = None
    ids: dict[str, int] = field(default_factory=dict)
    by_mac: dict[str, tuple[str, HostEntry]] = field(default_factory=dict)
    by_ip: dict[str, tuple[str, HostEntry]] = field(default_factory=dict)
    rejected: int = 0
    servers: dict[str, tuple[DeclaredNic, ...]] = field(default_factory=dict)  # GPU servers

    @staticmethod
    def of(policy: Policy | None) -> TenantView:
        view = TenantView(policy, servers=declared_servers(policy))
        if policy is None:
            return view
        view.ids = stable_ids([t.name for t in policy.tenants])
        for tenant in policy.tenants:
            for entry in tenant.hosts:
                if entry.mac:
                    view.by_mac[entry.mac] = (tenant.name, entry)
                if entry.ip:
                    view.by_ip[entry.ip] = (tenant.name, entry)
        return view

    @property
    def enforcing(self) -> bool:
        return self.policy is not None

    def tenant_of(self, mac: str, ip: str | None, dpid: int, port: int) -> str | None:
        """The tenant a host sending from (dpid, port) with this MAC and IP belongs to;
        ``None`` when the policy does not admit it there."""
        if self.policy is None:
            return UNASSIGNED
        match = self.by_mac.get(mac) or (self.by_ip.get(ip) if ip else None)
        if match is None:
            return UNASSIGNED if self.policy.fabric.unassigned_hosts == "allow" else None
        tenant, entry = match
        if entry.mac is not None and entry.mac != mac:
            return None
        if entry.ip is not None and ip is not None and entry.ip != ip:
            return None
        if entry.switch is not None and entry.switch != dpid:
            return None
        if entry.port is not None and entry.port != port:
            return None
        if ip is not None and ip in self.by_ip and self.by_ip[ip][0] != tenant:
            return None  # an address that belongs to another tenant
        return tenant

    def tenant_of_ip(self, ip: str) -> str | None:
        """Which tenant an address is declared in (``None``: not declared anywhere)."""
        found = self.by_ip.get(ip)
        return found[0] if found else None

    def id_of(self, tenant: str) -> int:
        return self.ids.get(tenant, 0)

    def classes_of(self, tenant: str) -> set[str]:
        if self.policy is None:
            return {"collective", "control", "bulk"}
        for t in self.policy.tenants:
            if t.name == tenant:
                return set(t.traffic_classes)
        return {"bulk"}


def readmit(topo: Topology, view: TenantView) -> list[Host]:
    """Every learned host under a new policy: those no tenant admits are forgotten (their
    routes go with them), those whose tenant changed are re-labelled; the moved ones,
    whose peers must learn their new addresses."""
    moved = []
    for host in list(topo.hosts.values()):
        tenant = view.tenant_of(host.mac, host.ip, host.dpid, host.port)
        if tenant is None:
            del topo.hosts[host.mac]
            topo.host_changed(host.dpid)
        elif tenant != host.tenant:
            topo.hosts[host.mac] = replace(host, tenant=tenant)
            moved.append(topo.hosts[host.mac])
            topo.host_changed(host.dpid)
    return moved


def admit_plan(view: TenantView, tenant: str, hosts: list[Host]) -> dict[int, SwitchRules]:
    """ADMIT rules (and the bandwidth meter) for one tenant's learned hosts: a frame
    passes only to a Loom address of the same tenant (``controller.addressing``)."""
    plan: dict[int, SwitchRules] = {}
    ident = view.id_of(tenant)
    cookie = make_cookie(CookieKind.TENANT, ident)
    cap = None
    if view.policy is not None:
        cap = next((t.bandwidth_mbps for t in view.policy.tenants if t.name == tenant), None)
    for host in hosts:
        if host.ip is None:
            continue
        rules = plan.setdefault(host.dpid, SwitchRules())
        match = Match.of(
            in_port=host.port,
            eth_src=host.mac,
            vlan_vid=OFPVID_NONE,
            eth_type=ETH_TYPE_IPV4,
            ipv4_src=host.ip,
            eth_dst=of_tenant(ident),
        )
        meter = ident if cap else None
        meta = (ident << META_TENANT_SHIFT, META_TENANT_MASK)
        rules.add_flow(
            FlowRule(
                Table.ADMIT,
                PRIO_ADMIT,
                match,
                goto=Table.QOS,
                write_metadata=meta,
                meter=meter,
                cookie=cookie,
            )
        )
        if cap:
            rules.meters[ident] = MeterRule(ident, int(cap * 1000), int(cap * 100))
    return plan
