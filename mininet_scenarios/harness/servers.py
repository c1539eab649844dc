"""GPU servers with several NICs: one Mininet host (network namespace) per server.

A graph whose host nodes carry a ``server`` attribute (and ``nic``, the NIC's index), as
``topologies.rail_optimized`` makes them, describes NICs: host node ``s1n0`` is NIC 0 of
server ``s1``. :class:`~mininet_scenarios.harness.network.FabricNet` then builds one Mininet
host per *server*, named as the server, with one interface per NIC; hosts without
``server`` (every other graph) are built as before, one namespace per host.

Names. NIC ``i`` of server ``s1`` is the interface ``s1-eth<i>`` (the NIC index, so the
name says the NIC; at most 15 characters, Linux's limit), with the NIC's MAC and IP from
the graph. The graph's node name still names the NIC everywhere in the harness:
``fnet.host("s1n0")`` is the server's Mininet host (commands run "on a NIC" run on its
server), ``fnet.intf("s1n0", 0)`` is ``s1-eth0``, ``fnet.nics["s1n0"]`` is its
:class:`NicPort` (server, interface, IP) and ``fnet.server("s1")`` the server by name.

Prefix: each NIC's address with its rail's prefix, /16 (:data:`RAIL_PREFIX_LEN`; rail ``i``
of ``rail_optimized`` is ``10.{100+i}.0.0/16``), not the /8 of ordinary hosts. The kernel
then holds one connected route per rail, pointing at that rail's NIC, so traffic to rail
``i``'s addresses leaves by NIC ``i``, as on a real rail-optimized cluster, where every NIC
(one per GPU) has its own subnet and a GPU's traffic to the same-index GPU of another
server stays on its rail. With the /8 on every interface the kernel would hold four
equal routes for 10/8 and send everything by the first NIC: one rail would carry all of
the server's traffic and reach the others through the spines. Traffic to another rail's
address leaves by *that* rail's NIC with that NIC's address as source (the kernel picks
by destination; forwarding stays off, so a server never routes between its NICs). NICs
of one server must therefore be in distinct /16s (checked).

Sysctls, on every NIC interface, as multi-NIC (multi-rail) servers are configured:

* ``arp_ignore=1``: answer an ARP request only on the interface that holds the target
  address. Linux's default (0) answers for any local address on any interface, so Loom's
  probe for NIC 0's address (``controller.arp`` asks every silent edge port, sender IP
  0.0.0.0) would be answered by NIC 1 too, with NIC 1's MAC: Loom would learn NIC 0's IP
  at NIC 1's MAC and port, or, once NIC 0 is known, count the frame as a lie
  (``tests/emulation/test_rail_servers.py`` sees NIC 1 answer with the default).
* ``arp_announce=2``: an ARP request carries the sending interface's own address as
  sender IP. The default (0) takes the source address of the packet that needs the
  neighbour, which may be another NIC's (a reply to a peer whose request came in on
  another rail, a socket bound to another NIC's address): Loom would see NIC ``j``'s IP
  from NIC ``i``'s MAC and port: it would record that IP there while NIC ``j`` has not
  spoken, else reject the request as a lie (``ArpService._admit``) and never answer it.
* ``rp_filter=2`` (loose): accept a packet whose source is reachable by any interface.
  Strict (1) drops traffic that arrives on one rail from another rail's address (a
  request leaves by the destination's rail, its reply comes back by the source's rail).
  The kernel uses the larger of ``all`` and the interface's value, so 2 on the interface
  is loose whatever ``all`` holds. With plain routing a server's packets carry their
  egress NIC's address and paths are symmetric, and under Loom a packet from another
  NIC's address never arrives (ADMIT matches each NIC's own source IP at its leaf port);
  the setting matters for sources bound by hand and for the learning-switch baselines.

Intra-server traffic (a worker bound to NIC 0 talking to one bound to NIC 1 of the same
server) is addressed to a local address, which the kernel delivers over the namespace's
loopback, never a NIC: the stand-in for NVLink.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from mininet_scenarios.harness.ovs import FabricError
from topologies.graph import MAX_IFNAME, host_list

RAIL_PREFIX_LEN = 16  # a NIC's subnet: its rail's /16 (see the module docstring)
MULTI_NIC_SYSCTLS = (("arp_ignore", 1), ("arp_announce", 2), ("rp_filter", 2))
SERVER_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class NicPort:
    """NIC ``nic`` of ``server``: graph host ``name``, interface ``intf`` of the server's
    Mininet host, with the graph's ``ip`` (in ``prefix_len``) and ``mac``."""

    name: str
    server: str
    nic: int
    intf: str
    ip: str
    mac: str
    prefix_len: int = RAIL_PREFIX_LEN

    @property
    def cidr(self) -> str:
        return f"{self.ip}/{self.prefix_len}"

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.cidr, strict=False)

    def reaches(self, ip: str) -> bool:
        """Whether ``ip`` is on this NIC's subnet (its rail): sent to by this NIC."""
        return ipaddress.IPv4Address(ip) in self.network


def nic_ports(graph: nx.MultiGraph, reserved: Sequence[str] = ()) -> dict[str, NicPort]:
    """Every host of ``graph`` with a ``server`` as a :class:`NicPort`, in host order;
    empty for a graph without servers. Raises ``FabricError`` on what cannot be built: a
    server name that is a graph node or in ``reserved``, a NIC index missing or repeated
    on its server, an interface name over 15 characters, two NICs of a server on one
    subnet."""
    nics: dict[str, NicPort] = {}
    for name in host_list(graph):
        d = graph.nodes[name]
        server = d.get("server")
        if server is None:
            continue
        if not isinstance(server, str) or not SERVER_NAME_RE.fullmatch(server):
            raise FabricError(f"host {name}: server {server!r} is not a usable node name")
        if server in graph or server in reserved:
            raise FabricError(f"host {name}: server name {server!r} is taken by another node")
        nic = d.get("nic")
        if not isinstance(nic, int) or isinstance(nic, bool) or nic < 0:
            raise FabricError(f"host {name}: server {server} but NIC index {nic!r}")
        intf = f"{server}-eth{nic}"
        if len(intf) > MAX_IFNAME:
            raise FabricError(f"host {name}: interface name {intf} is over {MAX_IFNAME} chars")
        nics[name] = NicPort(name, server, nic, intf, str(d["ip"]), str(d["mac"]))
    for server, ports in servers_of(nics).items():
        indexes = [nics[n].nic for n in ports]
        if len(set(indexes)) != len(indexes):
            raise FabricError(f"server {server}: NIC indexes repeat: {indexes}")
        nets = [nics[n].network for n in ports]
        if len(set(nets)) != len(nets):
            raise FabricError(
                f"server {server}: two NICs on one /{RAIL_PREFIX_LEN}: "
                + ", ".join(f"{n} {nics[n].cidr}" for n in ports)
            )
    return nics


def servers_of(nics: Mapping[str, NicPort]) -> dict[str, list[str]]:
    """Server -> its NICs' names in NIC order (servers in order of their first NIC)."""
    out: dict[str, list[str]] = {}
    for name, port in nics.items():
        out.setdefault(port.server, []).append(name)
    return {s: sorted(names, key=lambda n: nics[n].nic) for s, names in out.items()}


def servers_yaml(graph: nx.MultiGraph) -> str:
    """The policy's ``servers:`` block for ``graph``'s GPU servers: each server's NICs by
    MAC, in NIC order; empty for a graph without servers."""
    ports = nic_ports(graph)
    if not ports:
        return ""
    lines = ["servers:"]
    for server, names in servers_of(ports).items():
        lines += [f"  - name: {server}", "    nics:"]
        lines += [f'      - {{mac: "{graph.nodes[n]["mac"]}"}}' for n in names]
    return "\n".join(lines) + "\n"


def configure_nics(run: Callable[[str], str], server: str, intfs: Sequence[str]) -> None:
    """Set :data:`MULTI_NIC_SYSCTLS` on each of ``intfs`` (``run``: a command in the
    server's namespace) and read them back; ``FabricError`` if any did not take."""
    keys = [f"net/ipv4/conf/{i}/{k}" for i in intfs for k, _v in MULTI_NIC_SYSCTLS]
    want = [str(v) for _i in intfs for _k, v in MULTI_NIC_SYSCTLS]
    sets = " ".join(f"{k}={v}" for k, v in zip(keys, want, strict=True))
    out = run(f"sysctl -qw {sets} 2>&1")
    got = run(f"sysctl -n {' '.join(keys)} 2>&1").split()
    if out.strip() or got != want:
        raise FabricError(f"{server}: sysctl -w {sets}: {out.strip()} (read back {got})")


def add_link(
    net: Any, a: str, b: str, ports: Mapping[str, int], nics: Mapping[str, NicPort]
) -> None:
    """Add the graph link ``a``-``b`` (``a`` the host end, if any) to Mininet ``net``: a
    NIC's end is port ``i`` of its server, interface ``<server>-eth<i>`` with the NIC's MAC
    and address; any other link as the graph numbers its ports."""
    nic = nics.get(a)
    if nic is None:
        net.addLink(a, b, port1=ports[a], port2=ports[b])
        return
    net.addLink(
        nic.server,
        b,
        port1=nic.nic,
        port2=ports[b],
        intfName1=nic.intf,
        addr1=nic.mac,
        params1={"ip": nic.cidr},
    )


def rail_pairs(nics: Mapping[str, NicPort], ips: Mapping[str, str]) -> list[tuple[str, str]]:
    """The ordered ``(src, dst)`` host pairs a reachability check sends on: from a NIC,
    to every host not on its server whose IP is on the NIC's subnet (traffic to another
    rail leaves by that rail's NIC, so these are all the paths a server's traffic takes);
    from a host that is no NIC, to every other host (``ips``: every host's IP)."""
    pairs = []
    for src in ips:
        port = nics.get(src)
        for dst, ip in ips.items():
            if dst == src:
                continue
            if port is not None:
                other = nics.get(dst)
                if (other is not None and other.server == port.server) or not port.reaches(ip):
                    continue
            pairs.append((src, dst))
    return pairs
