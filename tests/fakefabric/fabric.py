"""The fake fabric: every switch of a topology graph, its links, and packet traces across them.

Messages are applied with :meth:`FakeFabric.send`; a packet is followed with
:meth:`FakeFabric.trace` from a host (or :meth:`trace_from` a switch port, or
:meth:`trace_packet_out` for a PacketOut) hop by hop until every copy is delivered to a
host, dropped, sent to the controller, looped or out of hops.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import networkx as nx
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser

from .actions import validate_action
from .errors import OFError, TraceLimitError
from .fields import display_packet, normalize_packet, packet_from_bytes
from .model import Branch, End, Fork, Hop, Report, Trace
from .pipeline import Item, Leaf, Pipeline, Pkt
from .tables import FlowEntry, GroupEntry, MeterEntry, SwitchTables, check_packet_out

EdgeId = tuple[str, str, Any]
BROADCAST = "ff:ff:ff:ff:ff:ff"


class FakeFabric:
    """OpenFlow 1.3 switch tables for every switch of ``graph`` (see topologies/graph.py).

    ``strict`` (default): a message the switch would reject raises :class:`OFError`; with
    ``strict=False`` it is only appended to ``errors`` and otherwise ignored, as on a real
    switch. Either way a rejected message changes nothing.
    """

    def __init__(self, graph: nx.MultiGraph, *, n_tables: int = 255, strict: bool = True):
        self.graph = graph
        self.strict = strict
        self.errors: list[OFError] = []
        self.switches: dict[int, SwitchTables] = {}
        self._dpid_of: dict[str, int] = {}
        self._ports: dict[int, dict[int, tuple[str, int, EdgeId]]] = {}
        self._attach: dict[str, tuple[int, int, EdgeId]] = {}
        self._link_up: dict[EdgeId, bool] = {}
        self._port_down: set[tuple[int, int]] = set()
        self._log: dict[int, list[Any]] = {}
        self._packet_outs: dict[int, list[Any]] = {}
        # What a sender's ARP cache holds for a host's real MAC (a controller handing out
        # its own addresses sets it); ``packet`` addresses IP packets with it.
        self.addresses: Callable[[str], str | None] | None = None
        for name, data in graph.nodes(data=True):
            if data.get("kind") == "switch":
                dpid = int(data["dpid"])
                if dpid in self.switches:
                    raise ValueError(f"switches {self.switches[dpid].name} and {name} share {dpid}")
                self.switches[dpid] = SwitchTables(dpid, name, n_tables)
                self._dpid_of[name] = dpid
                self._ports[dpid], self._log[dpid], self._packet_outs[dpid] = {}, [], []
        for a, b, key, data in graph.edges(keys=True, data=True):
            eid: EdgeId = (*sorted((a, b)), key)
            self._link_up[eid] = True
            for node, peer in ((a, b), (b, a)):
                if node not in self._dpid_of:
                    continue
                port, table = data["ports"][node], self._ports[self._dpid_of[node]]
                if port in table:
                    raise ValueError(f"{node}: port {port} used by two links")
                table[port] = (peer, data["ports"][peer], eid)
                if graph.nodes[peer].get("kind") == "host":
                    self._attach[peer] = (self._dpid_of[node], port, eid)

    # ---- names -----------------------------------------------------------------------------

    def dpid_of(self, switch: str) -> int:
        return self._dpid_of[switch]

    def name_of(self, dpid: int) -> str:
        return self._switch(dpid).name

    def hosts(self) -> list[str]:
        """Host names in index order."""
        nodes = [(d.get("index", 0), n) for n, d in self.graph.nodes(data=True)]
        return [n for _, n in sorted(nodes) if self.graph.nodes[n].get("kind") == "host"]

    def _switch(self, dpid: int) -> SwitchTables:
        try:
            return self.switches[dpid]
        except KeyError:
            raise KeyError(f"no switch with dpid {dpid}") from None

    # ---- messages --------------------------------------------------------------------------

    def send(self, dpid: int, msg: Any) -> None:
        """Apply one Ryu OpenFlow 1.3 message to switch ``dpid``."""
        sw = self._switch(dpid)
        try:
            if isinstance(msg, parser.OFPFlowMod):
                sw.flow_mod(msg)
            elif isinstance(msg, parser.OFPGroupMod):
                sw.group_mod(msg)
            elif isinstance(msg, parser.OFPMeterMod):
                sw.meter_mod(msg)
            elif isinstance(msg, parser.OFPPacketOut):
                self._check_packet_out(dpid, msg)
                self._packet_outs[dpid].append(msg)
            elif not isinstance(msg, parser.OFPBarrierRequest):
                raise TypeError(f"FakeFabric.send: unsupported message {type(msg).__name__}")
        except OFError as exc:
            err = exc.at(dpid)
            self.errors.append(err)
            if self.strict:
                raise err from None
            return
        self._log[dpid].append(msg)

    def send_all(self, msgs_by_dpid: Mapping[int, Iterable[Any]]) -> None:
        for dpid, msgs in msgs_by_dpid.items():
            for msg in msgs:
                self.send(dpid, msg)

    def _check_packet_out(self, dpid: int, msg: Any) -> None:
        check_packet_out(msg, set(self._ports[dpid]))
        for action in msg.actions or ():
            validate_action(action, self.switches[dpid].groups, packet_out=True)

    def messages(self, dpid: int) -> list[Any]:
        """Every message switch ``dpid`` accepted, in order."""
        return list(self._log[dpid])

    def packet_outs(self, dpid: int) -> list[Any]:
        return list(self._packet_outs[dpid])

    def flows(self, dpid: int, table_id: int | None = None) -> list[FlowEntry]:
        """Installed entries in lookup order (table, priority high to low, age)."""
        return self._switch(dpid).flows(table_id)

    def groups(self, dpid: int) -> dict[int, GroupEntry]:
        return dict(self._switch(dpid).groups)

    def meters(self, dpid: int) -> dict[int, MeterEntry]:
        return dict(self._switch(dpid).meters)

    # ---- links and ports -------------------------------------------------------------------

    def set_link(self, a: str, b: str, up: bool, key: Any = None) -> None:
        """Bring the link(s) between nodes ``a`` and ``b`` up or down (all parallel ones
        unless ``key`` names one); a dead link makes the ports at both ends not live."""
        edges = self.graph.get_edge_data(a, b)
        if not edges or (key is not None and key not in edges):
            raise KeyError(f"no link {a}-{b}" + (f" with key {key!r}" if key is not None else ""))
        for k in [key] if key is not None else list(edges):
            self._link_up[(*sorted((a, b)), k)] = up

    def set_port(self, dpid: int, port: int, up: bool) -> None:
        if port not in self._ports[self._switch(dpid).dpid]:
            raise KeyError(f"{self.name_of(dpid)} has no port {port}")
        (self._port_down.discard if up else self._port_down.add)((dpid, port))

    def port_live(self, dpid: int, port: int) -> bool:
        """Live = the port exists, is up, its link is up and the far end's port is up."""
        peer = self._ports[dpid].get(port)
        if peer is None or (dpid, port) in self._port_down:
            return False
        node, peer_port, eid = peer
        if not self._link_up[eid]:
            return False
        return node not in self._dpid_of or (self._dpid_of[node], peer_port) not in self._port_down

    # ---- packets -----------------------------------------------------------------------------

    def packet(self, src_host: str, dst_host: str, **fields: object) -> dict[str, object]:
        """A packet from ``src_host`` to ``dst_host`` with their graph addresses.

        ``kind``: "tcp" (default, tcp 49152->5201), "udp" (49152->4791, RoCEv2), "icmp",
        "arp" (broadcast request) or "arp-reply". Other keywords override fields; a value
        of None removes the field.
        """
        kind = fields.pop("kind", "tcp")
        s, d = self.graph.nodes[src_host], self.graph.nodes[dst_host]
        pkt: dict[str, object] = {"eth_src": s["mac"], "eth_dst": d["mac"]}
        if kind in ("arp", "arp-reply"):
            request = kind == "arp"
            pkt.update(eth_type=0x0806, arp_op=1 if request else 2)
            pkt.update(arp_spa=s["ip"], arp_tpa=d["ip"], arp_sha=s["mac"])
            pkt["arp_tha"] = "00:00:00:00:00:00" if request else d["mac"]
            if request:
                pkt["eth_dst"] = BROADCAST
        elif kind in ("tcp", "udp", "icmp"):
            learned = self.addresses(d["mac"]) if self.addresses else None
            pkt["eth_dst"] = learned or d["mac"]
            pkt.update(eth_type=0x0800, ipv4_src=s["ip"], ipv4_dst=d["ip"])
            pkt.update(ip_dscp=0, ip_ecn=0, ip_ttl=64)
            if kind == "tcp":
                pkt.update(ip_proto=6, tcp_src=49152, tcp_dst=5201)
            elif kind == "udp":
                pkt.update(ip_proto=17, udp_src=49152, udp_dst=4791)
            else:
                pkt.update(ip_proto=1, icmpv4_type=8, icmpv4_code=0)
        else:
            raise ValueError(f"packet kind {kind!r}: use tcp, udp, icmp, arp or arp-reply")
        for name, value in fields.items():
            if value is None:
                pkt.pop(name, None)
            else:
                pkt[name] = value
        return display_packet(normalize_packet(pkt))

    def trace(
        self,
        src_host: str,
        pkt: Mapping[str, object],
        *,
        explore_all: bool = True,
        max_hops: int = 64,
        max_branches: int = 10_000,
        frame_len: int = 64,
    ) -> Trace:
        """Follow ``pkt`` sent by ``src_host``. With ``explore_all`` SELECT groups branch into
        every live bucket (alternatives) and counters stay untouched; without it one bucket
        is picked by a stable hash and flow counters count the packet (``frame_len`` bytes).
        """
        if self.graph.nodes[src_host].get("kind") != "host":
            raise ValueError(f"{src_host} is not a host")
        fields = normalize_packet(pkt)
        trace = Trace(src_host, display_packet(fields))
        walk = _Walk(self, trace, explore_all, max_hops, max_branches, frame_len)
        dpid, port, eid = self._attach[src_host]
        if not self._link_up[eid] or (dpid, port) in self._port_down:
            name = self.name_of(dpid)
            end = End("drop", dpid, name, reason="source-link-down", packet=trace.packet)
            walk.finish([], end, ())
        else:
            walk.at_switch(dpid, port, Pkt(fields), [], (), frozenset())
        return trace

    def trace_from(self, dpid: int, in_port: int, pkt: Mapping[str, object], **kw: Any) -> Trace:
        """Follow ``pkt`` arriving at switch ``dpid`` on ``in_port`` (same keywords as trace)."""
        fields = normalize_packet(pkt)
        trace = Trace(f"{self.name_of(dpid)}:{in_port}", display_packet(fields))
        walk = _Walk(self, trace, kw.pop("explore_all", True), **_walk_kw(kw))
        walk.at_switch(dpid, in_port, Pkt(fields), [], (), frozenset())
        return trace

    def trace_packet_out(self, dpid: int, msg: Any, **kw: Any) -> Trace:
        """Run a PacketOut's actions on switch ``dpid`` (output:TABLE enters table 0 with the
        message's in_port) and follow the copies across the fabric. The data is parsed with
        ``ryu.lib.packet``."""
        self._switch(dpid)
        try:
            self._check_packet_out(dpid, msg)
        except OFError as exc:
            raise exc.at(dpid) from None
        fields = normalize_packet(packet_from_bytes(msg.data))
        trace = Trace(f"packet-out@{self.name_of(dpid)}", display_packet(fields))
        kw.setdefault("frame_len", len(msg.data))
        walk = _Walk(self, trace, kw.pop("explore_all", True), **_walk_kw(kw))
        actions = list(msg.actions or ())
        items = walk.pipeline(dpid).run_packet_out(actions, Pkt(fields), msg.in_port)
        walk.expand(dpid, msg.in_port, items, [], (), frozenset())
        return trace

    def reachability(
        self,
        pairs: Iterable[tuple[str, str]] | None = None,
        *,
        explore_all: bool = True,
        max_hops: int = 64,
        **fields: object,
    ) -> Report:
        """Trace one unicast packet (``packet(src, dst, **fields)``) per ordered host pair
        (all distinct pairs by default) and sort the pairs by outcome."""
        if pairs is None:
            hosts = self.hosts()
            pairs = [(a, b) for a in hosts for b in hosts if a != b]
        report = Report()
        for src, dst in pairs:
            pkt = self.packet(src, dst, **fields)
            report.add(src, dst, self.trace(src, pkt, explore_all=explore_all, max_hops=max_hops))
        return report


def _walk_kw(kw: dict[str, Any]) -> dict[str, Any]:
    allowed = {"max_hops": 64, "max_branches": 10_000, "frame_len": 64}
    unknown = set(kw) - set(allowed)
    if unknown:
        raise TypeError(f"unexpected keyword(s) {sorted(unknown)}")
    return {k: kw.get(k, v) for k, v in allowed.items()}


class _Walk:
    """One trace in progress: depth-first over branches, forks numbered in visit order."""

    def __init__(
        self,
        fabric: FakeFabric,
        trace: Trace,
        explore_all: bool,
        max_hops: int,
        max_branches: int,
        frame_len: int,
    ):
        self.fabric, self.trace = fabric, trace
        self.explore_all, self.max_hops, self.max_branches = explore_all, max_hops, max_branches
        self.count_bytes = None if explore_all else frame_len
        self.fork_ids = itertools.count(1)
        self.pipelines: dict[int, Pipeline] = {}

    def pipeline(self, dpid: int) -> Pipeline:
        if dpid not in self.pipelines:
            f = self.fabric
            self.pipelines[dpid] = Pipeline(
                f.switches[dpid],
                list(f._ports[dpid]),
                lambda port, dpid=dpid: f.port_live(dpid, port),  # type: ignore[misc]
                self._warn,
                self._note,
                self.explore_all,
                self.count_bytes,
            )
        return self.pipelines[dpid]

    def _warn(self, text: str) -> None:
        if text not in self.trace.warnings:
            self.trace.warnings.append(text)

    def _note(self, text: str) -> None:
        if text not in self.trace.notes:
            self.trace.notes.append(text)

    def finish(self, hops: list[Hop], end: End, lineage: tuple[Fork, ...]) -> None:
        if len(self.trace.branches) >= self.max_branches:
            raise TraceLimitError(
                f"more than {self.max_branches} branches (broadcast storm?)\n{self.trace.render()}"
            )
        self.trace.branches.append(Branch(hops, end, lineage))

    def at_switch(
        self,
        dpid: int,
        in_port: int,
        pkt: Pkt,
        hops: list[Hop],
        lineage: tuple[Fork, ...],
        visited: frozenset[tuple[object, ...]],
    ) -> None:
        name = self.fabric.name_of(dpid)
        key = (dpid, in_port, pkt.key())
        if key in visited:
            end = End("loop", dpid, name, reason=f"back at in_port {in_port}", packet=pkt.display())
            self.finish(hops, end, lineage)
        elif len(hops) >= self.max_hops:
            self.finish(hops, End("hop-limit", dpid, name, packet=pkt.display()), lineage)
        else:
            items = self.pipeline(dpid).run(pkt, in_port)
            self.expand(dpid, in_port, items, hops, lineage, visited | {key})

    def expand(
        self,
        dpid: int,
        in_port: int,
        items: list[Item],
        hops: list[Hop],
        lineage: tuple[Fork, ...],
        visited: frozenset[tuple[object, ...]],
    ) -> None:
        where = self.fabric.name_of(dpid)
        for lin, leaf in self._flatten(items, lineage, where):
            self._leaf(dpid, in_port, leaf, hops, lin, visited)

    def _flatten(
        self, items: list[Item], lineage: tuple[Fork, ...], where: str
    ) -> Iterator[tuple[tuple[Fork, ...], Leaf]]:
        copy_id = next(self.fork_ids) if len(items) > 1 else 0
        for i, item in enumerate(items):
            lin = lineage
            if copy_id:
                lin = (*lineage, Fork(copy_id, "copy", i, len(items), where))
            if isinstance(item, Leaf):
                yield lin, item
                continue
            alt_id = next(self.fork_ids)
            for j, child in enumerate(item.children):
                fork = Fork(alt_id, "alt", j, len(item.children), item.where)
                yield from self._flatten(child, (*lin, fork), where)

    def _leaf(
        self,
        dpid: int,
        in_port: int,
        leaf: Leaf,
        hops: list[Hop],
        lineage: tuple[Fork, ...],
        visited: frozenset[tuple[object, ...]],
    ) -> None:
        st, end, name = leaf.state, leaf.end, self.fabric.name_of(dpid)
        out_port = leaf.port
        if end is not None and end.kind in ("controller", "local"):
            out_port = ofp.OFPP_CONTROLLER if end.kind == "controller" else ofp.OFPP_LOCAL
        hop = Hop(
            dpid,
            name,
            in_port,
            out_port,
            st.queue,
            tuple(st.meters),
            tuple(st.tables),
            tuple(st.cookies),
            tuple(st.groups),
            st.pkt,
        )
        hops = [*hops, hop]
        if end is not None:
            self.finish(hops, end, lineage)
            return
        assert leaf.port is not None
        peer = self.fabric._ports[dpid].get(leaf.port)
        if peer is None or not self.fabric.port_live(dpid, leaf.port):
            reason = "no-link" if peer is None else "dead-port"
            self.finish(hops, End("drop", dpid, name, reason=reason, packet=hop.packet), lineage)
        elif peer[0] not in self.fabric._dpid_of:
            end = End("delivered", dpid, name, host=peer[0], packet=hop.packet)
            self.finish(hops, end, lineage)
        else:
            next_dpid = self.fabric._dpid_of[peer[0]]
            self.at_switch(next_dpid, peer[1], st.pkt, hops, lineage, visited)
