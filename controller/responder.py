"""ARP answered by the switches, so hosts that already know a peer never wait on Loom.

Linux re-validates a neighbour entry with unicast requests to the address it holds
(STALE -> DELAY -> PROBE); unanswered, the entry fails and the host stops sending to a
peer it knew. If only the controller answered, every stopped, restarting, fenced or
starved controller would cost traffic. So a host's own switch holds, per host:

- an *ingress* rule: a request from the host's port, with its own MAC and IP as sender,
  to a Loom address of its own tenant, gets the host's Loom address as Ethernet source
  (so an answer can be routed back) and is routed by its destination like any frame;
- two *responders* where the target lives: a request for the target's Loom address and
  IP is turned around in place (OVS ``move``), answered with that Loom address, and sent
  back out of the port it came in by: towards the requester's Loom address when it came
  from the fabric, to the requester's own MAC when both hosts share the switch.

Three rules per host, all on the host's own switch, and two per switch (a unicast ARP
crosses the fabric, other ARP from a switch is dropped): 74 on a k=48 edge switch, and
nothing grows with the fabric's size. The tenant check is the ingress's (a Loom address
carries the tenant), the sender checks are the same as ADMIT's (port, MAC, IP). A
broadcast request (a host's very first ARP for a peer, or after its entry was dropped)
still goes to the controller: answering it at the edge would need an entry per peer on
every switch.
"""

from __future__ import annotations

import ipaddress

from controller.addressing import MARK, MARK_MASK, MARK_SHIFT, mac_str, of_tenant, parse
from controller.model import (
    ETH_TYPE_ARP,
    META_FROM_FABRIC,
    OFPP_IN_PORT,
    CookieKind,
    CopyField,
    FlowRule,
    Match,
    Output,
    SetField,
    Table,
    make_cookie,
)
from controller.tenants import OFPVID_NONE

ARP_REQUEST, ARP_REPLY = 1, 2
PRIO_INGRESS = 910  # above CLASSIFY's ARP-to-controller rules (900)
PRIO_RESPOND = 200  # in PIN, above flow pins (100)
PRIO_TRANSIT = 150  # ... below the responders
LOOM_ADDRESS = (mac_str(MARK << MARK_SHIFT), mac_str(MARK_MASK))


def transit_rules(cookie: int) -> tuple[FlowRule, FlowRule]:
    """ARP from another switch: a unicast request or reply to a Loom address is routed on
    (after the responders had their look), any other is dropped. Two rules a switch, in
    PIN, where fabric ports' metadata bit tells where a frame came from."""
    transit = (META_FROM_FABRIC, META_FROM_FABRIC)
    on = Match.of(metadata=transit, eth_type=ETH_TYPE_ARP, eth_dst=LOOM_ADDRESS)
    drop = Match.of(metadata=transit, eth_type=ETH_TYPE_ARP)
    return (
        FlowRule(Table.PIN, PRIO_TRANSIT, on, goto=Table.ROUTE, cookie=cookie),
        FlowRule(Table.PIN, PRIO_TRANSIT - 1, drop, cookie=cookie),
    )


def host_rules(mac: str, ip: str, port: int, address: str) -> tuple[FlowRule, ...]:
    """The ingress and the two responders of one host on its own switch."""
    cookie = make_cookie(CookieKind.ARP, int(ipaddress.IPv4Address(ip)))
    tenant = (parse(address) or (0, 0, 0))[0]
    ingress = Match.of(
        in_port=port,
        eth_src=mac,
        vlan_vid=OFPVID_NONE,
        eth_type=ETH_TYPE_ARP,
        arp_op=ARP_REQUEST,
        arp_sha=mac,
        arp_spa=ip,
        eth_dst=of_tenant(tenant),
    )
    out = [
        FlowRule(
            Table.CLASSIFY,
            PRIO_INGRESS,
            ingress,
            (SetField("eth_src", address),),
            goto=Table.QOS,
            cookie=cookie,
        )
    ]
    turn = (
        SetField("eth_src", address),
        SetField("arp_op", ARP_REPLY),
        CopyField("arp_sha", "arp_tha"),
        SetField("arp_sha", address),
        CopyField("arp_spa", "arp_tpa"),
        SetField("arp_spa", ip),
    )
    for came_by, reply_to in ((META_FROM_FABRIC, "eth_src"), (0, "arp_sha")):
        match = Match.of(
            metadata=(came_by, META_FROM_FABRIC),
            vlan_vid=OFPVID_NONE,
            eth_type=ETH_TYPE_ARP,
            arp_op=ARP_REQUEST,
            eth_dst=address,
            arp_tpa=ip,
        )
        actions = (CopyField(reply_to, "eth_dst"), *turn, Output(OFPP_IN_PORT))
        out.append(FlowRule(Table.PIN, PRIO_RESPOND, match, actions, cookie=cookie))
    return tuple(out)
