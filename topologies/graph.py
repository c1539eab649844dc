"""The fabric graph every part of Loom shares: generators build it, Mininet runs it,
the fake fabric traces packets on it and what-if analysis scales it.

Format (a ``networkx.MultiGraph``; parallel links are allowed):

* ``G.graph``: ``name`` (e.g. ``"fat_tree(4)"``), ``kind`` (``fat_tree``, ``dragonfly``,
  ``leaf_spine`` or ``custom``) and ``params`` (the generator's arguments).
* Switch nodes: ``kind="switch"``, ``dpid`` (unique int, 1..2**48-1), ``role``
  (``edge``/``agg``/``core``, ``leaf``/``spine``, ``router`` or free text) and ``group``
  (fat-tree pod, dragonfly group, or ``None``).
* Host nodes: ``kind="host"``, ``index`` (0-based, in generation order: pod by pod),
  ``mac`` (``"02:00:00:00:00:01"`` form), ``ip`` (dotted quad, all hosts in one
  ``10.0.0.0/8`` subnet), ``switch`` (name of the switch it hangs off) and ``group``.
* Edges: ``ports`` (``{node: port_no}`` for both ends; a host's end is port 0 = ``eth0``),
  ``rate_mbps`` (float) and ``scope``: ``host`` for host links, ``global`` for dragonfly
  inter-group links, ``fabric`` otherwise.

Switch port numbers start at 1 and are unique per switch. Names stay short enough that
Mininet interface names (``<node>-eth<port>``) fit Linux's 15 characters.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import networkx as nx

MAX_DPID = 2**48 - 1
MAX_IFNAME = 15


class TopologyError(ValueError):
    """A generator was given parameters that describe no valid fabric."""


@dataclass(frozen=True)
class LinkEnd:
    """One end of a link: the node, its port, and who is on the other side."""

    node: str
    port: int
    peer: str
    peer_port: int
    rate_mbps: float
    scope: str


def new_graph(name: str, kind: str, **params: object) -> nx.MultiGraph:
    g = nx.MultiGraph()
    g.graph.update(name=name, kind=kind, params=dict(params))
    return g


def add_switch(g: nx.MultiGraph, name: str, dpid: int, role: str, group: int | None = None) -> None:
    if not 1 <= dpid <= MAX_DPID:
        raise TopologyError(f"switch {name}: dpid {dpid} outside 1..{MAX_DPID}")
    g.add_node(name, kind="switch", dpid=dpid, role=role, group=group)


def add_host(
    g: nx.MultiGraph,
    name: str,
    switch: str,
    ip: str,
    rate_mbps: float,
    group: int | None = None,
    switch_port: int | None = None,
    mac: str | None = None,
) -> None:
    """Add a host with the next index (and a MAC derived from it), linked to ``switch``."""
    index = int(g.graph.get("host_count", 0))
    g.graph["host_count"] = index + 1
    mac = mac or mac_for_index(index)
    g.add_node(name, kind="host", index=index, mac=mac, ip=ip, switch=switch, group=group)
    add_link(g, name, switch, rate_mbps, scope="host", port_a=0, port_b=switch_port)


def mac_for_index(index: int) -> str:
    """Locally administered unicast MAC ``02:00:00:xx:xx:xx`` for host number ``index``."""
    value = index + 1
    return "02:00:00:" + ":".join(f"{(value >> s) & 0xFF:02x}" for s in (16, 8, 0))


def next_port(g: nx.MultiGraph, node: str) -> int:
    """Lowest unused port number at ``node`` (switches from 1; hosts from 0)."""
    used = {d["ports"][node] for _, _, d in g.edges(node, data=True)}
    port = 0 if g.nodes[node]["kind"] == "host" else 1
    while port in used:
        port += 1
    return port


def add_link(
    g: nx.MultiGraph,
    a: str,
    b: str,
    rate_mbps: float,
    scope: str = "fabric",
    port_a: int | None = None,
    port_b: int | None = None,
) -> None:
    if a == b:
        raise TopologyError(f"link {a}-{b}: a node cannot link to itself")
    if rate_mbps <= 0:
        raise TopologyError(f"link {a}-{b}: rate_mbps must be positive, got {rate_mbps}")
    pa = next_port(g, a) if port_a is None else port_a
    pb = next_port(g, b) if port_b is None else port_b
    g.add_edge(a, b, ports={a: pa, b: pb}, rate_mbps=float(rate_mbps), scope=scope)


def switches(g: nx.MultiGraph) -> Iterator[str]:
    """Switch names in insertion order."""
    return (n for n, d in g.nodes(data=True) if d["kind"] == "switch")


def hosts(g: nx.MultiGraph) -> Iterator[str]:
    """Host names in index order."""
    return (n for n, d in g.nodes(data=True) if d["kind"] == "host")


def host_list(g: nx.MultiGraph) -> list[str]:
    return sorted(hosts(g), key=lambda h: g.nodes[h]["index"])


def dpid_of(g: nx.MultiGraph, switch: str) -> int:
    return int(g.nodes[switch]["dpid"])


def link_ends(g: nx.MultiGraph, node: str) -> list[LinkEnd]:
    """Every link at ``node``, sorted by local port."""
    ends = [
        LinkEnd(node, d["ports"][node], peer, d["ports"][peer], d["rate_mbps"], d["scope"])
        for _, peer, d in g.edges(node, data=True)
    ]
    return sorted(ends, key=lambda e: e.port)


def port_map(g: nx.MultiGraph) -> dict[tuple[str, int], tuple[str, int]]:
    """``(node, port) -> (peer, peer_port)`` for every link end in the graph."""
    out: dict[tuple[str, int], tuple[str, int]] = {}
    for a, b, d in g.edges(data=True):
        out[(a, d["ports"][a])] = (b, d["ports"][b])
        out[(b, d["ports"][b])] = (a, d["ports"][a])
    return out


def switch_graph(g: nx.MultiGraph) -> nx.MultiGraph:
    """The subgraph of switches and the links between them."""
    return g.subgraph(list(switches(g))).copy()


def validate(g: nx.MultiGraph) -> None:
    """Check the invariants above; raise ``TopologyError`` naming the first violation."""
    dpids: dict[int, str] = {}
    for n, d in g.nodes(data=True):
        if d.get("kind") not in ("switch", "host"):
            raise TopologyError(f"node {n}: kind must be 'switch' or 'host', got {d.get('kind')!r}")
        if d["kind"] == "switch":
            if d["dpid"] in dpids:
                raise TopologyError(f"switches {dpids[d['dpid']]} and {n} share dpid {d['dpid']}")
            dpids[d["dpid"]] = n
        elif g.degree(n) != 1:
            raise TopologyError(f"host {n}: needs exactly one link, has {g.degree(n)}")
        for end in link_ends(g, n):
            if len(f"{n}-eth{end.port}") > MAX_IFNAME:
                raise TopologyError(f"node {n}: interface name {n}-eth{end.port} is too long")
        ports = [e.port for e in link_ends(g, n)]
        if len(ports) != len(set(ports)):
            raise TopologyError(f"node {n}: port numbers repeat: {sorted(ports)}")
    macs = [d["mac"] for _, d in g.nodes(data=True) if d["kind"] == "host"]
    ips = [d["ip"] for _, d in g.nodes(data=True) if d["kind"] == "host"]
    if len(set(macs)) != len(macs) or len(set(ips)) != len(ips):
        raise TopologyError("host MAC and IP addresses must be unique")


def prefixed(graph: nx.MultiGraph, prefix: str) -> nx.MultiGraph:
    """``graph`` with every node renamed ``prefix + name`` (links keep their port numbers):
    two emulations of one topology on a machine need distinct node names. A host's
    ``switch`` is renamed with it, and its ``server`` (the emulation's name for the
    server it is a NIC of) is prefixed too."""
    mapping = {n: f"{prefix}{n}" for n in graph.nodes}
    g = nx.relabel_nodes(graph, mapping, copy=True)
    for _, d in g.nodes(data=True):
        if d.get("switch") in mapping:
            d["switch"] = mapping[d["switch"]]
        if d.get("server") is not None:
            d["server"] = f"{prefix}{d['server']}"
    for _, _, d in g.edges(data=True):
        d["ports"] = {mapping[n]: p for n, p in d["ports"].items()}
    g.graph["name"] = f"{prefix}-{graph.graph.get('name', 'fabric')}"
    return g


def shuffle_ids(graph: nx.MultiGraph, seed: str = "") -> nx.MultiGraph:
    """Datapath ids as real switches have them: MAC-derived, 48 random-looking bits in no
    relation to a switch's place (generators number switches by position). Seeded, so a
    run can be repeated; changes ``graph`` in place and returns it."""
    rng = random.Random(zlib.crc32((seed or str(graph.graph.get("name", ""))).encode()))
    switches = [n for n, d in graph.nodes(data=True) if d["kind"] == "switch"]
    ids: set[int] = set()
    while len(ids) < len(switches):
        ids.add(rng.getrandbits(48) | 1)
    for node, dpid in zip(switches, rng.sample(sorted(ids), len(ids)), strict=True):
        graph.nodes[node]["dpid"] = dpid
    return graph
