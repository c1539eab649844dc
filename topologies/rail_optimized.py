"""Rail-optimized fabric of an AI back end: every GPU server has ``nics`` NICs (one per
GPU) and NIC ``i`` of every server is cabled to the leaf of rail ``i``, so same-index GPUs
of different servers meet in one hop and rails meet only at the spines. Servers come in
scalable units (SUs) of ``servers_per_su``: each SU has its own leaf per rail, and every
leaf links to every spine ``uplinks_per_spine`` times (parallel MultiGraph edges, as in
``leaf_spine``). A leaf's oversubscription at equal link rates is
``servers_per_su / (spines * uplinks_per_spine)``, recorded in ``params``.

Numbering: servers ``1..servers`` fill SUs ``1..`` in order (the last SU may be short);
NICs and rails are 0-based like GPU indexes. Server ``s`` is in SU
``u = (s-1) // servers_per_su + 1`` at slot ``k = (s-1) mod servers_per_su``.

Names: NIC ``i`` of server ``s`` is host ``s{s}n{i}`` with extra node attributes
``server`` (``"s{s}"``) and ``nic`` (``i``); leaves ``su{u}r{i}``; spines ``spine{j}``.
Hosts and leaves have ``group = u``. Hosts are numbered server by server, NIC by NIC.

Port plan (fixed; ``S = servers_per_su``, ``U = uplinks_per_spine``, uplink ``v`` =
0..U-1, 1-based spine ``j``): leaf ``su{u}r{i}``: slot ``k`` at ``k+1``, then spine ``j``
uplink ``v`` at ``S + (j-1)*U + v + 1``; spine: leaf number ``L = (u-1)*nics + i`` uplink
``v`` at ``L*U + v + 1``. Dpids: spines ``1..spines``, then leaf ``L`` at
``spines + L + 1``.

Addressing: NIC ``i`` of the server in slot ``k`` of SU ``u`` has IP
``10.{100+i}.{u}.{k+2}``. Each rail is its own /16 (``10.{100+i}.0.0/16``), as reference
designs number one subnet per rail so that a worker bound to NIC ``i`` reaches NIC ``i``
of the other servers inside rail ``i``; all of it stays inside the ``10.0.0.0/8`` every
Loom fabric uses, so the rest of Loom sees one flat host subnet as before.
"""

from __future__ import annotations

import networkx as nx

from topologies.graph import TopologyError, add_host, add_link, add_switch, new_graph, validate

RAIL_OCTET_BASE = 100  # second octet of rail 0
MAX_NICS = 255 - RAIL_OCTET_BASE + 1  # second octet 100+i, at most 255
MAX_SUS = 255  # third octet u, 1..255
MAX_SERVERS_PER_SU = 253  # fourth octet k+2, at most 254
MAX_SERVERS = MAX_SUS * MAX_SERVERS_PER_SU


def _check_int(name: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TopologyError(f"rail_optimized: {name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise TopologyError(f"rail_optimized: {name} must be from {low} to {high}, got {value}")
    return value


def _su_size(servers: int, servers_per_su: int | None) -> int:
    """The SU size; without one, all servers form one SU (so at most one SU's worth)."""
    if servers_per_su is None:
        if servers > MAX_SERVERS_PER_SU:
            raise TopologyError(
                f"rail_optimized: servers_per_su must be given (1 to {MAX_SERVERS_PER_SU}) "
                f"for more than {MAX_SERVERS_PER_SU} servers, got servers={servers}"
            )
        return servers
    size = _check_int("servers_per_su", servers_per_su, 1, MAX_SERVERS_PER_SU)
    sus = -(-servers // size)
    if sus > MAX_SUS:
        raise TopologyError(
            f"rail_optimized: servers={servers} with servers_per_su={size} needs {sus} "
            f"scalable units, at most {MAX_SUS}"
        )
    return size


def rail_optimized(
    servers: int = 4,
    nics: int = 4,
    spines: int = 2,
    servers_per_su: int | None = None,
    rate_mbps: float = 10.0,
    uplinks_per_spine: int = 1,
) -> nx.MultiGraph:
    servers = _check_int("servers", servers, 1, MAX_SERVERS)
    nics = _check_int("nics", nics, 1, MAX_NICS)
    spines = _check_int("spines", spines, 1, 512)
    uplinks = _check_int("uplinks_per_spine", uplinks_per_spine, 1, 64)
    size = _su_size(servers, servers_per_su)
    if not isinstance(rate_mbps, int | float) or isinstance(rate_mbps, bool) or rate_mbps <= 0:
        raise TopologyError(
            f"rail_optimized: rate_mbps must be a positive number, got {rate_mbps!r}"
        )
    rate = float(rate_mbps)
    sus = -(-servers // size)
    g = new_graph(
        f"rail_optimized({servers},{nics},{spines},{size})",
        "rail_optimized",
        servers=servers,
        nics=nics,
        spines=spines,
        servers_per_su=size,
        rate_mbps=rate,
        uplinks_per_spine=uplinks,
        oversubscription=size / (spines * uplinks),
    )
    spine_names = [f"spine{j}" for j in range(1, spines + 1)]
    for dpid, name in enumerate(spine_names, start=1):
        add_switch(g, name, dpid, "spine")
    for u in range(1, sus + 1):
        leaves = [f"su{u}r{i}" for i in range(nics)]
        for i, leaf in enumerate(leaves):
            add_switch(g, leaf, spines + (u - 1) * nics + i + 1, "leaf", group=u)
        first = (u - 1) * size + 1
        for k, s in enumerate(range(first, min(first + size, servers + 1))):
            for i, leaf in enumerate(leaves):
                host = f"s{s}n{i}"
                ip = f"10.{RAIL_OCTET_BASE + i}.{u}.{k + 2}"
                add_host(g, host, leaf, ip, rate, group=u, switch_port=k + 1)
                g.nodes[host].update(server=f"s{s}", nic=i)
        for i, leaf in enumerate(leaves):
            number = (u - 1) * nics + i
            for j, spine in enumerate(spine_names):
                for v in range(uplinks):
                    add_link(
                        g,
                        leaf,
                        spine,
                        rate,
                        port_a=size + j * uplinks + v + 1,
                        port_b=number * uplinks + v + 1,
                    )
    validate(g)  # e.g. interface names such as spine300-eth16384 would be too long
    return g
