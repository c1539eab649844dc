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

from controller.jobspec import JobError, brief
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


def server_of_ip(
    servers: Servers, hosts: Mapping[str, Host], host_by_ip: Callable[[str], Host | None]
) -> dict[str, str]:
    """Each learned NIC's IP -> its server: two ranks on one server talk over the
    server's own links (NVLink), not the fabric."""
    found = learned_nics(servers, hosts, host_by_ip) if servers else {}
    return {h.ip: name for name, pairs in found.items() for _, h in pairs if h and h.ip}


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


def resolve_nic_refs(
    hosts: object,
    servers: Servers,
    learned: Mapping[str, Host],
    host_by_ip: Callable[[str], Host | None],
) -> object:
    """A job's ``hosts`` with every ``"server:NIC"`` entry (``"gpu3:5"``: NIC 5 of server
    gpu3) replaced by that NIC's IP: the learned host's, else the one declared. Anything
    else is left for the job's own validation. ``JobError`` on ``hosts[i]`` names a bad
    reference: no servers declared, no such server, a NIC index out of range, or a NIC
    whose IP is not known yet (declared by MAC and not learned)."""
    if not isinstance(hosts, list):
        return hosts
    out: list[object] = []
    for i, entry in enumerate(hosts):
        if not isinstance(entry, str) or ":" not in entry:
            out.append(entry)
            continue
        out.append(_resolve(f"hosts[{i}]", entry, servers, learned, host_by_ip))
    return out


def _resolve(
    at: str,
    entry: str,
    servers: Servers,
    learned: Mapping[str, Host],
    host_by_ip: Callable[[str], Host | None],
) -> str:
    name, _, index = entry.rpartition(":")
    said = brief(entry)
    if not servers:
        none = "but the policy declares no servers; expected an IPv4 address"
        raise JobError(at, f"{said} names a server's NIC, {none}")
    if not index.isascii() or not index.isdigit():
        raise JobError(at, f"{said}: expected server:NIC with NIC a number (e.g. gpu3:5)")
    nics = servers.get(name)
    if nics is None:
        known = ", ".join(sorted(servers, key=natural_key)[:5])
        raise JobError(at, f"{said}: no server named {brief(name)}; servers include {known}")
    nic = int(index)
    if nic >= len(nics):
        raise JobError(at, f"{said}: server {name} has NICs 0 to {len(nics) - 1}, not {nic}")
    host = _learned(nics[nic], learned, host_by_ip)
    ip = (host.ip if host is not None else None) or nics[nic].ip
    if ip is None:
        unseen = f"NIC {nic} of server {name} ({nics[nic].mac}) is not learned yet"
        raise JobError(at, f"{said}: {unseen}, so its IP is unknown")
    return ip
