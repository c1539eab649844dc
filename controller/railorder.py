"""Rail-aware rank order: a ring over GPU servers whose every network hop stays on a rail.

On a rail-optimized fabric (``controller.rails``) NIC ``i`` of every server reaches a leaf
of rail ``i``, and rails meet only at the spines. A ring collective over the servers' NICs
(one rank per NIC, i.e. per GPU) then wants two things from the rank order:

- each server's ranks consecutive: hops inside a server ride NVLink, not the network;
- every hop between servers on one rail: it leaves server ``s`` by NIC ``x_s`` and enters
  the next server by NIC ``e_{s+1}``; with ``x_s == e_{s+1}`` it crosses only that rail's
  leaf (same scalable unit) or that rail's leaves and a spine, never two rails.

The rule (``rail_ring``): servers keep the order today's leaf/block order gives their
first NIC (``controller.schedulers.rank_order``: by scalable unit, then leaf port). Each
server ``s`` gets an entry NIC ``e_s`` and an exit NIC ``x_s``, ``e_s != x_s`` when it has
two or more NICs in the ring (a server's ranks are distinct NICs), and ranks ``e_s``, its
other NICs ascending, ``x_s``. The hop rails ``h_s = x_s = e_{s+1}`` must then be a cyclic
sequence whose neighbours differ. With every server offering the same ``n >= 2`` rails
this exists whenever ``m`` servers are even or ``n >= 3``: ``h_s = s mod 2`` for
``s < m - 1`` and ``h_{m-1} = 1`` (``m`` even) or ``2`` (``m`` odd), so server ``s`` enters
on ``h_{s-1}`` and leaves on ``h_s != h_{s-1}`` and the last hop closes onto server 0's
entry ``h_{m-1}``. With ``n = 2`` and ``m`` odd none exists: the hop rails would
2-colour an odd cycle, so one hop must cross rails. Servers of which only some NICs are
asked (a server with one NIC enters and leaves by it) can make more hops cross, so the
entries and exits are chosen by an exact dynamic programme over the ring that minimises
the hops that cross rails (zero whenever an order with none exists for these servers in
this order), ties to the lower NIC: deterministic, no hashing.

The order is used only when every host asked for is a NIC of a declared server and the
rails of those NICs hold for the servers involved; otherwise today's order stands and
``rails`` says why (``not declared`` or ``not rail-optimized``, with reasons). Pure: a
``Topology``, the IPs and the declared servers in, plain data out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from controller.rails import natural_key
from controller.schedulers import NicPlace, rank_order
from controller.servers import DeclaredNic, Servers, learned_nics, rail_report
from controller.topology import Host, Topology

RailUse = Literal["used", "not declared", "not rail-optimized"]
USED: RailUse = "used"
NOT_DECLARED: RailUse = "not declared"
NOT_RAIL_OPTIMIZED: RailUse = "not rail-optimized"
NAMED = 5  # hosts named in a reason before "and N more"
FAR = 1 << 30  # above any number of crossing hops


def _pairs(rails: Sequence[int]) -> list[tuple[int, int]]:
    """The (entry, exit) NICs a server with these rails can have, ascending."""
    if len(rails) == 1:
        return [(rails[0], rails[0])]
    return [(e, x) for e in rails for x in rails if e != x]


def _cheapest(asked: Sequence[Sequence[int]], entry: int) -> tuple[int, list[tuple[int, int]]]:
    """The fewest crossing hops with server 0 entered by ``entry``, and each server's
    (entry, exit) that achieve it. ``cost[x]``: crossings so far with the last server
    left by ``x``; the hop into server ``k`` by ``e`` costs 0 from ``x == e``, else 1."""
    cost = {x: 0 for e, x in _pairs(asked[0]) if e == entry}
    back: list[dict[int, tuple[int, int]]] = [{x: (entry, -1) for x in cost}]
    for rails in asked[1:]:
        low = min(cost.values())
        low_exit = min(x for x, c in cost.items() if c == low)
        new: dict[int, int] = {}
        links: dict[int, tuple[int, int]] = {}
        for e, x in _pairs(rails):
            stay = cost.get(e, FAR)
            c, came = (stay, e) if stay <= low + 1 else (low + 1, low_exit)
            if c < new.get(x, FAR):
                new[x], links[x] = c, (e, came)
        cost = new
        back.append(links)
    total = {x: c + (x != entry) for x, c in cost.items()}
    best = min(total.values())
    x = min(x for x, c in total.items() if c == best)
    chosen: list[tuple[int, int]] = []
    for links in reversed(back):
        e, came = links[x]
        chosen.append((e, x))
        x = came
    return best, chosen[::-1]


def rail_ring(asked: Sequence[Sequence[int]]) -> tuple[list[list[int]], list[int]]:
    """Each server's NICs (rail indices) in rank order, servers as given (a ring), and
    the servers whose hop to the next one crosses rails (none whenever possible; see the
    module rule). ``asked[s]``: the distinct NICs of server ``s`` in the ring."""
    rails = [sorted(set(r)) for r in asked]
    if any(not r for r in rails):
        raise ValueError("every server needs at least one NIC in the ring")
    if len(rails) < 2:
        return rails, []
    found: tuple[int, list[tuple[int, int]]] | None = None
    for entry in rails[0]:
        here = _cheapest(rails, entry)
        if found is None or here[0] < found[0]:
            found = here
        if found[0] == 0:
            break
    assert found is not None
    ends = found[1]
    order = [
        [e, *(r for r in own if r not in (e, x)), *([x] if x != e else [])]
        for own, (e, x) in zip(rails, ends, strict=True)
    ]
    m = len(ends)
    crossing = [s for s in range(m) if ends[s][1] != ends[(s + 1) % m][0]]
    return order, crossing


@dataclass(frozen=True)
class RailOrder:
    """The answer to ``GET order``: ``hosts`` in rank order (unknown IPs last, also in
    ``unknown``); ``rails`` whether the rail-aware order was used, ``reasons`` why not
    (or which hops cross rails); with rails used, ``groups`` (rail -> the ranks whose NIC
    is on it) and ``crossing`` (ranks whose hop to the next rank crosses rails)."""

    hosts: list[str]
    unknown: list[str]
    rails: RailUse
    reasons: tuple[str, ...] = ()
    groups: dict[int, list[int]] = field(default_factory=dict)
    crossing: list[int] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "hosts": self.hosts,
            "unknown": self.unknown,
            "rails": self.rails,
            "rail_reasons": list(self.reasons),
        }
        if self.rails == USED:
            body["rail_groups"] = {str(r): ranks for r, ranks in self.groups.items()}
            body["cross_rail_hops"] = self.crossing
        return body


def _named(ips: Sequence[str], what: str) -> tuple[str, ...]:
    more = len(ips) - NAMED
    tail = (f"and {more} more like them",) if more > 0 else ()
    return tuple(f"{ip} {what}" for ip in ips[:NAMED]) + tail


def _owners(
    servers: Servers, topo: Topology
) -> tuple[dict[str, tuple[str, int]], dict[str, list[tuple[DeclaredNic, Host | None]]]]:
    """IP -> (server, NIC index) for every declared NIC's learned or declared IP."""
    found = learned_nics(servers, topo.hosts, topo.host_by_ip)
    owner: dict[str, tuple[str, int]] = {}
    for name, pairs in found.items():
        for i, (nic, host) in enumerate(pairs):
            for ip in (host.ip if host else None, nic.ip):
                if ip:
                    owner.setdefault(ip, (name, i))
    return owner, found


def rail_order(topo: Topology, ips: Sequence[str], servers: Servers) -> RailOrder:
    """The rank order of ``ips`` (see the module rule), or today's order with the reason
    rails were not used."""
    base, unknown = rank_order(topo, ips)
    if not servers:
        return RailOrder(base + unknown, unknown, NOT_DECLARED, ("the policy declares no servers",))
    owner, found = _owners(servers, topo)
    asked = list(dict.fromkeys(ips))
    strangers = [ip for ip in asked if ip not in owner]
    if strangers:
        why = _named(strangers, "is not a NIC of a declared server")
        return RailOrder(base + unknown, unknown, NOT_DECLARED, why)
    involved = sorted({owner[ip][0] for ip in asked}, key=natural_key)
    report = rail_report({name: found[name] for name in involved})
    broken = sorted({owner[ip][1] for ip in asked} & set(report.broken))
    if broken or unknown:
        why = _named(unknown, "is not learned yet") + report.reasons
        if broken:
            listed = ", ".join(map(str, broken))
            rails = f"rail{'s' if len(broken) > 1 else ''} {listed}"
            why += (f"the asked NICs' {rails} do not hold for these servers",)
        return RailOrder(base + unknown, unknown, NOT_RAIL_OPTIMIZED, why)
    return _ordered(base, owner)


def _ordered(base: list[str], owner: Mapping[str, tuple[str, int]]) -> RailOrder:
    """The rail ring over learned NICs of declared servers (``base``: today's order)."""
    by_server: dict[str, dict[int, str]] = {}
    for ip in base:  # servers in the order their first NIC comes today
        name, nic = owner[ip]
        by_server.setdefault(name, {})[nic] = ip
    names = list(by_server)
    order, crossing = rail_ring([sorted(by_server[n]) for n in names])
    hosts = [by_server[n][nic] for n, nics in zip(names, order, strict=True) for nic in nics]
    groups: dict[int, list[int]] = {}
    for rank, ip in enumerate(hosts):
        groups.setdefault(owner[ip][1], []).append(rank)
    last = [sum(len(nics) for nics in order[: s + 1]) - 1 for s in range(len(order))]
    hops = [last[s] for s in crossing]
    reasons: tuple[str, ...] = ()
    if hops:
        ranks = f"rank{'s' if len(hops) > 1 else ''} {', '.join(map(str, hops))}"
        reasons = (
            f"{len(hops)} of {len(order)} network hops cross rails (after {ranks}): no "
            "order of these servers' NICs keeps them all on one rail (an odd number of "
            "servers with two NICs each cannot alternate two rails)",
        )
    return RailOrder(hosts, [], USED, reasons, dict(sorted(groups.items())), hops)


def nic_places(servers: Servers, topo: Topology) -> dict[str, NicPlace]:
    """For the exports: each learned NIC of a declared server by IP, with its server, its
    index and its rail where that rail holds for all declared servers."""
    if not servers:
        return {}
    found = learned_nics(servers, topo.hosts, topo.host_by_ip)
    broken = set(rail_report(found).broken)
    places: dict[str, NicPlace] = {}
    for name, pairs in found.items():
        for i, (_, host) in enumerate(pairs):
            if host is not None and host.ip:
                places[host.ip] = NicPlace(name, i, None if i in broken else i)
    return places
