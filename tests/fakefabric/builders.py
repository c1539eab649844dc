"""Builders for the fake fabric's own tests: hand-built Ryu OpenFlow 1.3 messages and
small graphs (a line and a diamond) with known port numbers."""

from __future__ import annotations

from typing import Any

import networkx as nx
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as P

from tests.fakefabric import FakeFabric
from topologies.graph import add_host, add_link, add_switch, new_graph

# ---- message helpers ---------------------------------------------------------------------


def out(port: int) -> Any:
    return P.OFPActionOutput(port)


def apply(*actions: Any) -> Any:
    return P.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, list(actions))


def write(*actions: Any) -> Any:
    return P.OFPInstructionActions(ofp.OFPIT_WRITE_ACTIONS, list(actions))


def clear() -> Any:
    return P.OFPInstructionActions(ofp.OFPIT_CLEAR_ACTIONS, [])


def setf(**kw: Any) -> Any:
    return P.OFPActionSetField(**kw)


def flow(match: dict[str, Any] | None = None, *inst: Any, **kw: Any) -> Any:
    kw.setdefault("priority", 10)
    kw.setdefault("table_id", 0)
    return P.OFPFlowMod(None, match=P.OFPMatch(**(match or {})), instructions=list(inst), **kw)


def delete(match: dict[str, Any] | None = None, strict: bool = False, **kw: Any) -> Any:
    kw.setdefault("out_port", ofp.OFPP_ANY)
    kw.setdefault("out_group", ofp.OFPG_ANY)
    kw["command"] = ofp.OFPFC_DELETE_STRICT if strict else ofp.OFPFC_DELETE
    return flow(match, **kw)


def modify(match: dict[str, Any] | None, *inst: Any, strict: bool = False, **kw: Any) -> Any:
    kw["command"] = ofp.OFPFC_MODIFY_STRICT if strict else ofp.OFPFC_MODIFY
    return flow(match, *inst, **kw)


def group(gid: int, gtype: int, *buckets: Any, command: int = ofp.OFPGC_ADD) -> Any:
    return P.OFPGroupMod(None, command, gtype, gid, list(buckets))


def bucket(*actions: Any, weight: int = 0, watch_port: int = ofp.OFPP_ANY) -> Any:
    return P.OFPBucket(weight=weight, watch_port=watch_port, actions=list(actions))


def meter(mid: int, command: int = ofp.OFPMC_ADD) -> Any:
    return P.OFPMeterMod(None, command, ofp.OFPMF_KBPS, mid, [P.OFPMeterBandDrop(1000, 10)])


IPV4 = {"eth_type": 0x0800}
MODIFY = ofp.OFPGC_MODIFY

# ---- graphs ------------------------------------------------------------------------------


def line() -> nx.MultiGraph:
    """h1 -1- s1 -2/2- s2 -3/2- s3 -1- h3, and h2 on s2 port 1."""
    g = new_graph("line", "custom")
    for i in (1, 2, 3):
        add_switch(g, f"s{i}", i, "edge")
    add_host(g, "h1", "s1", "10.0.0.1", 10, switch_port=1)
    add_host(g, "h2", "s2", "10.0.0.2", 10, switch_port=1)
    add_host(g, "h3", "s3", "10.0.0.3", 10, switch_port=1)
    add_link(g, "s1", "s2", 10, port_a=2, port_b=2)
    add_link(g, "s2", "s3", 10, port_a=3, port_b=2)
    return g


def diamond() -> nx.MultiGraph:
    """h1 on s1; s1 port 2 -> s2, port 3 -> s3; s2 and s3 port 2 -> s4; h4 on s4."""
    g = new_graph("diamond", "custom")
    for i in (1, 2, 3, 4):
        add_switch(g, f"s{i}", i, "edge")
    add_host(g, "h1", "s1", "10.0.0.1", 10, switch_port=1)
    add_host(g, "h4", "s4", "10.0.0.4", 10, switch_port=1)
    add_link(g, "s1", "s2", 10, port_a=2, port_b=1)
    add_link(g, "s1", "s3", 10, port_a=3, port_b=1)
    add_link(g, "s2", "s4", 10, port_a=2, port_b=2)
    add_link(g, "s3", "s4", 10, port_a=2, port_b=3)
    return g


def mac(f: FakeFabric, host: str) -> str:
    return str(f.graph.nodes[host]["mac"])


def route_line(f: FakeFabric) -> None:
    """Plain eth_dst forwarding on the line for h1, h2, h3."""
    ports = {1: {"h1": 1, "h2": 2, "h3": 2}, 2: {"h1": 2, "h2": 1, "h3": 3}}
    ports[3] = {"h1": 2, "h2": 2, "h3": 1}
    for dpid, table in ports.items():
        for host, port in table.items():
            f.send(dpid, flow({"eth_dst": mac(f, host)}, apply(out(port))))
