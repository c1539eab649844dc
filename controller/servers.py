"""The policy's GPU servers against what discovery learned, for ``GET /loom/v1/topology``.

The policy declares each server's NICs in GPU order, by MAC or by IPv4 address; the
fabric learns hosts (MAC -> leaf dpid and port, and their IPs). This module matches the
two (a NIC declared by MAC is the learned host with that MAC; one declared by IP alone is
the learned host with that IP) and asks ``controller.rails`` whether the cabling is
rail-optimized. It runs when the topology is asked for, never on a packet's path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from controller.rails import RailReport, discover_rails, natural_key, report_json
from controller.topology import Host

if TYPE_CHECKING:
    from controller.policy.schema import Policy


@dataclass(frozen=True)
class DeclaredNic:
    """A NIC as the policy gives it: a lower-case MAC, an IPv4 address, or both."""

    mac: str | None
    ip: str | None


Servers = Mapping[str, tuple[DeclaredNic, ...]]


def declared_servers(policy: Policy | None) -> dict[str, tuple[DeclaredNic, ...]]:
    """The policy's servers by name, NICs in GPU order (none without a policy)."""
    if policy is None:
        return {}
    return {s.name: tuple(DeclaredNic(n.mac, n.ip) for n in s.nics) for s in policy.servers}


def _learned(
    nic: DeclaredNic, hosts: Mapping[str, Host], host_by_ip: Callable[[str], Host | None]
) -> Host | None:
    """The learned host a NIC is: by its MAC when declared (then only by it), else by IP."""
    if nic.mac is not None:
        return hosts.get(nic.mac)
    return host_by_ip(nic.ip) if nic.ip is not None else None


def learned_nics(
    servers: Servers, hosts: Mapping[str, Host], host_by_ip: Callable[[str], Host | None]
) -> dict[str, list[tuple[DeclaredNic, Host | None]]]:
    """Each server's NICs in GPU order, each with the learned host it is (``None``: not
    learned); servers in natural name order."""
    return {
        name: [(nic, _learned(nic, hosts, host_by_ip)) for nic in servers[name]]
        for name in sorted(servers, key=natural_key)
    }


def rail_input(
    nics: Mapping[str, list[tuple[DeclaredNic, Host | None]]],
) -> tuple[dict[str, list[str]], dict[str, int]]:
    """``discover_rails``' arguments from ``learned_nics``: each server's NIC keys (the
    learned MAC, else the MAC or IP as declared) and where each learned MAC attaches."""
    keys: dict[str, list[str]] = {}
    attached: dict[str, int] = {}
    for name, pairs in nics.items():
        keys[name] = []
        for nic, host in pairs:
            if host is None:
                keys[name].append(nic.mac or str(nic.ip))
            else:
                keys[name].append(host.mac)
                attached[host.mac] = host.dpid
    return keys, attached


def rail_report(nics: Mapping[str, list[tuple[DeclaredNic, Host | None]]]) -> RailReport:
    """``controller.rails``' report on these servers (from ``learned_nics``)."""
    return discover_rails(*rail_input(nics))


def describe_servers(
    servers: Servers, hosts: Mapping[str, Host], host_by_ip: Callable[[str], Host | None]
) -> dict[str, Any]:
    """``{"servers": {name: {"nics": [...]}}, "rails": report | None}``: each NIC's MAC
    and IP (the learned host's where found, else as declared), the leaf dpid and port it
    was learned on (``None``: not learned); ``rails`` is ``controller.rails``' report as
    JSON, ``None`` when no server is declared. Servers in natural name order. A NIC not
    learned and declared by IP alone enters the report under its IP."""
    if not servers:
        return {"servers": {}, "rails": None}
    found = learned_nics(servers, hosts, host_by_ip)
    shown: dict[str, Any] = {}
    for name, pairs in found.items():
        nics: list[dict[str, str | int | None]] = []
        for nic, host in pairs:
            if host is None:
                nics.append({"mac": nic.mac, "ip": nic.ip, "dpid": None, "port": None})
            else:
                ip = host.ip or nic.ip
                nics.append({"mac": host.mac, "ip": ip, "dpid": host.dpid, "port": host.port})
        shown[name] = {"nics": nics}
    return {"servers": shown, "rails": report_json(rail_report(found))}
