"""Dragonfly (Kim et al., ISCA 2008): ``g`` groups of ``a`` fully meshed routers, ``p``
hosts and ``h`` global links per router. The canonical balanced size ``g = a*h + 1``
gives every pair of groups exactly one global link, so any host reaches any other in at
most three router-to-router hops (local, global, local).

Port plan of router ``r{group}_{i}`` (fixed, so a port number tells the link type):
``1..p`` hosts; ``p+1..p+a-1`` local links to the other routers of the group in index
order (router ``j`` at ``p+1+j`` if ``j < i`` else ``p+j``); ``p+a..p+a+h-1`` global links.
The group's ``a*h`` global ports are numbered ``t = i*h + k`` for global port ``k`` of
router ``i``.

Global-link arrangements (which group port ``t`` of group ``G`` reaches):

* ``consecutive`` (default): port ``t`` goes to group ``(G + 1 + t) mod g``, i.e. the
  ports go to groups ``G+1, G+2, ...`` in order across the routers. The literature also
  calls this the *relative* arrangement.
* ``absolute``: port ``t`` goes to the other groups in ascending group number, skipping
  ``G`` (Hastings et al., Cluster 2015).

With fewer groups (``g < a*h + 1``) each group still has ``a*h`` global ports, spread as
evenly as possible: ``q = a*h // (g-1)`` links to every other group (``q >= 1``) plus one
extra link to ``r = a*h mod (g-1)`` groups chosen by a circulant pattern (offsets
``±1..±r/2``, plus ``g/2`` when ``r`` is odd), so group pairs differ by at most one link.
The ports list ``q`` rounds of the arrangement's order, then the extra groups in that
order. The ``k``-th link from ``G`` to ``H`` pairs with the ``k``-th link from ``H`` to
``G``. Such a wiring exists exactly when the total global port count ``g*a*h`` is even.

Hosts ``h1..`` are numbered group by group, router by router, with IP
``10.{group}.{router}.{host+2}``; dpids run from 1 in generation order (group by group).
"""

from __future__ import annotations

import networkx as nx

from topologies.graph import TopologyError, add_host, add_link, add_switch, new_graph, validate

ARRANGEMENTS = ("consecutive", "absolute")
MAX_GROUPS = 256  # second IP octet
MAX_ROUTERS = 256  # third IP octet
MAX_HOSTS_PER_ROUTER = 253  # fourth IP octet is host+2, at most 254


def _check_int(name: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TopologyError(f"dragonfly: {name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise TopologyError(f"dragonfly: {name} must be from {low} to {high}, got {value}")
    return value


def _check_rate(name: str, value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
        raise TopologyError(f"dragonfly: {name} must be a positive number, got {value!r}")
    return float(value)


def _extra_offsets(g: int, r: int) -> list[int]:
    """Offsets of an ``r``-regular circulant graph on ``g`` groups (needs ``g*r`` even)."""
    half = r // 2
    offsets = list(range(1, half + 1)) + list(range(g - half, g))
    if r % 2:
        offsets.append(g // 2)
    return sorted(offsets)


def group_targets(a: int, h: int, g: int, arrangement: str = "consecutive") -> list[list[int]]:
    """For each group, the group reached by each of its ``a*h`` global ports, in port order."""
    ports = a * h
    rounds, extra = divmod(ports, g - 1)
    extras = _extra_offsets(g, extra)
    targets: list[list[int]] = []
    for grp in range(g):
        if arrangement == "consecutive":
            order = [(grp + d) % g for d in range(1, g)]
        else:
            order = [o for o in range(g) if o != grp]
        chosen = {(grp + d) % g for d in extras}
        targets.append(order * rounds + [o for o in order if o in chosen])
    return targets


def dragonfly(
    a: int = 4,
    p: int = 2,
    h: int = 2,
    g: int | None = None,
    rate_mbps: float = 10.0,
    global_rate_mbps: float | None = None,
    arrangement: str = "consecutive",
) -> nx.MultiGraph:
    a = _check_int("a (routers per group)", a, 1, MAX_ROUTERS)
    p = _check_int("p (hosts per router)", p, 1, MAX_HOSTS_PER_ROUTER)
    h = _check_int("h (global links per router)", h, 1, 10_000)
    g = _check_groups(a, h, g)
    if arrangement not in ARRANGEMENTS:
        raise TopologyError(
            f"dragonfly: unknown arrangement {arrangement!r} (expected one of "
            f"{', '.join(ARRANGEMENTS)})"
        )
    rate = _check_rate("rate_mbps", rate_mbps)
    global_rate = (
        rate if global_rate_mbps is None else _check_rate("global_rate_mbps", global_rate_mbps)
    )
    graph = new_graph(
        f"dragonfly({a},{p},{h},{g})",
        "dragonfly",
        a=a,
        p=p,
        h=h,
        g=g,
        rate_mbps=rate,
        global_rate_mbps=global_rate,
        arrangement=arrangement,
    )
    host_no = 0
    for grp in range(g):
        host_no = _add_group(graph, grp, a, p, rate, host_no)
    _add_global_links(graph, group_targets(a, h, g, arrangement), a, p, h, global_rate)
    validate(graph)
    return graph


def _check_groups(a: int, h: int, g: int | None) -> int:
    """The group count: ``g``, or the canonical ``a*h + 1``, if the global ports can be
    wired (at most ``a*h + 1`` groups, an even number of global ports in all)."""
    canonical = a * h + 1
    if g is None:
        g = canonical
        if g > MAX_GROUPS:
            raise TopologyError(
                f"dragonfly: the canonical group count a*h+1 = {g} exceeds {MAX_GROUPS} "
                f"(the group number is an IP octet); pass a smaller g"
            )
    g = _check_int("g (groups)", g, 2, MAX_GROUPS)
    if g > canonical:
        raise TopologyError(
            f"dragonfly: g={g} groups is impossible with a={a}, h={h}: each group has only "
            f"a*h={a * h} global ports, so it can reach at most {a * h} other groups "
            f"(g <= a*h+1 = {canonical})"
        )
    if (g * a * h) % 2:
        raise TopologyError(
            f"dragonfly: g*a*h = {g}*{a}*{h} = {g * a * h} global ports cannot be wired: "
            f"every global link uses two ports, so the total must be even"
        )
    return g


def _router(grp: int, i: int) -> str:
    return f"r{grp}_{i}"


def _add_group(graph: nx.MultiGraph, grp: int, a: int, p: int, rate: float, host_no: int) -> int:
    """Group ``grp``'s routers, their hosts and its full mesh of local links; hosts are
    numbered on from ``host_no``, and the last number used is returned."""
    for i in range(a):
        add_switch(graph, _router(grp, i), grp * a + i + 1, "router", group=grp)
    for i in range(a):
        for k in range(p):
            host_no += 1
            add_host(
                graph, f"h{host_no}", _router(grp, i), f"10.{grp}.{i}.{k + 2}", rate, grp, k + 1
            )
    for i in range(a):
        for j in range(i + 1, a):
            # j > i sits at p+j on router i; i < j sits at p+1+i on router j.
            add_link(graph, _router(grp, i), _router(grp, j), rate, port_a=p + j, port_b=p + 1 + i)
    return host_no


def _add_global_links(
    graph: nx.MultiGraph, targets: list[list[int]], a: int, p: int, h: int, global_rate: float
) -> None:
    """Wire each group's global ports to the groups ``targets`` names, pairing the k-th
    link from G to H with the k-th link from H to G."""
    # ports_to[G][H]: G's global port indices that lead to H, in port order.
    ports_to: list[dict[int, list[int]]] = [{} for _ in targets]
    for grp, row in enumerate(targets):
        for t, other in enumerate(row):
            ports_to[grp].setdefault(other, []).append(t)
    first_global = p + a
    for grp in range(len(targets)):
        for other, mine in ports_to[grp].items():
            if other < grp:
                continue  # wired from the lower-numbered group
            for t, u in zip(mine, ports_to[other][grp], strict=True):
                add_link(
                    graph,
                    _router(grp, t // h),
                    _router(other, u // h),
                    global_rate,
                    scope="global",
                    port_a=first_global + t % h,
                    port_b=first_global + u % h,
                )
