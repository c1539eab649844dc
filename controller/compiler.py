"""Rules as data: what each switch should hold, and the messages that get it there.

Desired state is built in *parts*, each owned by one concern (a switch's base
pipeline, one destination switch's routes, later a pinned flow or a job). Parts never
share a rule identity, so each can be diffed against what was sent for it alone: a
host appearing re-plans one destination, a reroute one pin, a policy reload one
tenant. Only differences are sent, in an order that never leaves a flow pointing at a
missing group (make-before-break): meters and groups first, flows, then removals.
"""

from __future__ import annotations

import bisect
import functools
import ipaddress
import itertools
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence

from controller import responder
from controller.addressing import SWITCH_BITS, SWITCH_SHIFT, mac_int, mac_str, to_switch
from controller.flows import IP_PROTO_TCP, IP_PROTO_UDP, FlowKey
from controller.limits import OPEN_VSWITCH, SwitchLimits, bucket_subset, pick
from controller.model import (
    ETH_TYPE_ARP,
    ETH_TYPE_IPV4,
    ETH_TYPE_LLDP,
    META_FROM_FABRIC,
    OFPP_CONTROLLER,
    Action,
    Bucket,
    CookieKind,
    FlowRule,
    GroupAction,
    GroupRule,
    GroupType,
    Match,
    MeterRule,
    Output,
    SetField,
    SwitchRules,
    Table,
    cookie_kind,
    make_cookie,
)
from controller.nexthops import TO_CONTROLLER, Hops, next_hop_sets
from controller.owners import Plan
from controller.placement import Path
from controller.qos import TrafficClass, qos_rules
from controller.routing import Routes
from controller.topology import Host

PRIO_LLDP = 1000
PRIO_ARP = 900
PRIO_FABRIC_PORT = 500
PRIO_ARP_OTHER = 400  # ARP from ports neither edge nor fabric (fabric ports' go on)
PRIO_HOST_ROUTE = 120  # delivery to a host, by its exact Loom address
PRIO_ROUTE = 110  # blocks of destination switches (protected siblings take +1)
PRIO_ROUTE_DEFAULT = 100  # the most common next hops
PRIO_FLOW = 100
PRIO_CATCH = 10
PRIO_MISS = 0
CATCH_BYTES = 128  # headers are all the controller needs from a flow's first packet
# Meters on what goes to the controller (tenant meters use ids 1..65535).
METER_ARP_PORT = 0x0001_0000  # + port
METER_ARP_OTHER = 0xFFFE_0001
METER_LLDP = 0xFFFE_0002
METER_MISS = 0xFFFE_0003
ROUTE_GROUP_BASE = 0x0100_0000  # select groups of next-hop sets (below fast failover's)
ROUTE_GROUP_SPAN = 0x0F00_0000


# ---------------------------------------------------------------------------
# Rule builders
# ---------------------------------------------------------------------------


def base_plan(
    dpid: int,
    fabric_ports: Iterable[int],
    catch_flows: bool = False,
    qos: bool = False,
    admit_all: bool = True,
    edge_ports: Iterable[int] = (),
    job_levels: tuple[TrafficClass, ...] = (),
) -> SwitchRules:
    """The fixed pipeline: discovery to the controller, port classes, table chaining;
    with ``catch_flows``, a copy of each untracked TCP/UDP flow's packets from a host goes
    to the controller (128 bytes) while the packet goes on (see ``controller.flows``).

    Everything sent to the controller passes a packet-rate meter, so no host can flood
    it: ARP per edge port (one host cannot starve its neighbours' ARP), LLDP and route
    misses per switch. ARP from another switch is dropped (Loom never floods ARP) but
    for a unicast request or reply to a Loom address (``controller.responder``)."""
    cookie = make_cookie(CookieKind.BASE, dpid)
    rules = SwitchRules()
    to_ctl = (Output(OFPP_CONTROLLER),)
    lldp = Match.of(eth_type=ETH_TYPE_LLDP)
    rules.add_flow(
        FlowRule(Table.CLASSIFY, PRIO_LLDP, lldp, to_ctl, meter=METER_LLDP, cookie=cookie)
    )
    rules.meters[METER_LLDP] = MeterRule(METER_LLDP, 200, 100, per_packet=True)
    arp = Match.of(eth_type=ETH_TYPE_ARP)
    rules.add_flow(
        FlowRule(Table.CLASSIFY, PRIO_ARP_OTHER, arp, to_ctl, meter=METER_ARP_OTHER, cookie=cookie)
    )
    rules.meters[METER_ARP_OTHER] = MeterRule(METER_ARP_OTHER, 50, 50, per_packet=True)
    for port in sorted(edge_ports):
        meter = METER_ARP_PORT + port
        match = Match.of(in_port=port, eth_type=ETH_TYPE_ARP)
        rules.add_flow(
            FlowRule(Table.CLASSIFY, PRIO_ARP, match, to_ctl, meter=meter, cookie=cookie)
        )
        rules.meters[meter] = MeterRule(meter, 50, 50, per_packet=True)
    for rule in responder.transit_rules(cookie):  # ARP from other switches: see there
        rules.add_flow(rule)
    for port in sorted(fabric_ports):
        rules.add_flow(
            FlowRule(
                Table.CLASSIFY,
                PRIO_FABRIC_PORT,
                Match.of(in_port=port),
                goto=Table.QOS,
                write_metadata=(META_FROM_FABRIC, META_FROM_FABRIC),
                cookie=cookie,
            )
        )
    chain = [
        (Table.CLASSIFY, Table.ADMIT),
        (Table.ADMIT, Table.QOS),
        (Table.QOS, Table.PIN),
        (Table.PIN, Table.ROUTE),
    ]
    for table, goto in chain:
        rules.add_flow(FlowRule(table, PRIO_MISS, Match(), goto=goto, cookie=cookie))
    if not admit_all:  # tenants enforced: only what a tenant's ADMIT rule passes goes on
        rules.add_flow(FlowRule(Table.ADMIT, PRIO_MISS, Match(), cookie=cookie))
    rules.add_flow(
        FlowRule(Table.ROUTE, PRIO_MISS, Match(), to_ctl, meter=METER_MISS, cookie=cookie)
    )
    rules.meters[METER_MISS] = MeterRule(METER_MISS, 100, 100, per_packet=True)
    rules.flows.update(qos_rules(cookie, qos, job_levels).flows)
    if catch_flows:
        copy = (Output(OFPP_CONTROLLER, CATCH_BYTES),)
        catch_cookie = make_cookie(CookieKind.CATCH, dpid)
        for proto in (IP_PROTO_TCP, IP_PROTO_UDP):
            match = Match.of(metadata=(0, META_FROM_FABRIC), eth_type=ETH_TYPE_IPV4, ip_proto=proto)
            rules.add_flow(
                FlowRule(Table.PIN, PRIO_CATCH, match, copy, goto=Table.ROUTE, cookie=catch_cookie)
            )
    return rules


def flow_plan(
    key: FlowKey,
    ingress: int,
    in_port: int,
    path: Path | None,
    dest: int,
    routes: Routes,
    marks: tuple[Action, ...] = (),
) -> Plan:
    """A tracked flow's rules: its accounting rule at the ingress (counting, ``marks``
    such as a traffic class, then the default route; or straight out of its first pinned
    hop) and a pin at every transit switch where the default could choose differently.
    A pin matches the port the path arrives by: one rule, where a pin for any in-port
    would need failover siblings for the ports detours arrive by (a packet that comes
    another way, on a detour, takes the default route, which delivers it too)."""
    cookie = make_cookie(CookieKind.FLOW, key.ident)
    fields = key.match_fields()
    at_ingress = Match.of(in_port=in_port, **fields)
    if path:
        out = (*marks, Output(path[0][1]))
        first = FlowRule(Table.PIN, PRIO_FLOW, at_ingress, out, cookie=cookie)
    else:
        first = FlowRule(Table.PIN, PRIO_FLOW, at_ingress, marks, goto=Table.ROUTE, cookie=cookie)
    plan: Plan = {ingress: SwitchRules()}
    plan[ingress].add_flow(first)
    for (before, left_by), (dpid, port) in itertools.pairwise(path or ()):
        if routes.next_ports(dpid, dest) == (port,):
            continue  # the only next hop: the default route already goes there
        link = routes.graph.get_edge_data(before, dpid, left_by)
        at = Match.of(**fields, in_port=link["dst_port"]) if link else Match.of(**fields)
        rules = plan.setdefault(dpid, SwitchRules())
        rules.add_flow(FlowRule(Table.PIN, PRIO_FLOW, at, (Output(port),), cookie=cookie))
    return plan


def delivery_plan(dest: int, hosts: list[tuple[Host, str]]) -> Plan:
    """Delivery to the hosts on switch ``dest``: a packet for a host's Loom address gets
    the host's real MAC back and leaves by its port. The host's IPv4 address rides in
    the cookie and its Loom address in the match, so a restarted controller reads both
    back from the switch (see ``held_hosts``). Beside each, the switch's own answer to
    ARP for the host (``controller.responder``)."""
    rules = SwitchRules()
    for host, address in hosts:
        for rule in _host_rules(host.mac, host.ip, host.port, address):
            rules.add_flow(rule)
    return {dest: rules} if rules.flows else {}


@functools.lru_cache(maxsize=1 << 16)
def _host_rules(mac: str, ip: str | None, port: int, address: str) -> tuple[FlowRule, ...]:
    """One host's rules on its switch, made once: a switch's delivery is planned again
    whenever a host there comes or goes, and the others' rules are the same objects."""
    at_host = make_cookie(CookieKind.HOST, _ip_int(ip))
    actions = (SetField("eth_dst", mac), Output(port))
    match = Match.of(eth_dst=address)
    delivery = FlowRule(Table.ROUTE, PRIO_HOST_ROUTE, match, actions, cookie=at_host)
    return (delivery, *(responder.host_rules(mac, ip, port, address) if ip else ()))


Block = tuple[int, int, int]  # (first switch index, log2 of the block size, action)


def blocks(actions: dict[int, int], absorb: bool, default: int | None) -> list[Block]:
    """Cover switch indexes with aligned blocks of one action each, as few as it takes.

    ``absorb``: indexes that are no destination may take any action (transit switches:
    no host has such an address, and the ingress lets no packet to one in). Blocks whose
    action is ``default`` are left to the default rule. Without ``absorb`` every block
    holds destinations only, so a forged address matches nothing and goes to the
    controller (metered) instead of wandering through the fabric."""
    keys = sorted(actions)
    acts = [actions[k] for k in keys]
    changes = [0]  # changes[i]: how often the action changes within acts[:i + 1]
    for i in range(1, len(acts)):
        changes.append(changes[-1] + (acts[i] != acts[i - 1]))
    out: list[Block] = []

    def cover(lo: int, size_log: int, first: int, last: int) -> None:
        if first == last:
            return
        uniform = changes[last - 1] == changes[first]
        if uniform and (absorb or last - first == 1 << size_log):
            if acts[first] != default:
                out.append((lo, size_log, acts[first]))
            return
        half = lo + (1 << (size_log - 1))
        mid = bisect.bisect_left(keys, half, first, last)
        cover(lo, size_log - 1, first, mid)
        cover(half, size_log - 1, mid, last)

    cover(0, SWITCH_BITS, 0, len(keys))
    return out


@functools.lru_cache(maxsize=65536)
def _block_match(lo: int, size_log: int, spread_bits: int, spread: int) -> tuple[str, str]:
    value, mask = to_switch(lo, spread_bits, spread)
    keep = mac_int(mask) & ~(((1 << size_log) - 1) << SWITCH_SHIFT)
    return value, mac_str(keep)


def _spread_bits(ports: tuple[int, ...]) -> int:
    return (len(ports) - 1).bit_length() if len(ports) > 1 else 0


DETOUR_SPREAD_BITS = 2  # a detour's destinations spread over 4 of its ports at most


def transit_spread(ports: tuple[int, ...], usual: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """The rules a block of destinations takes in transit, as (spread bits, spread value,
    port): its own spread over ``ports`` (by the low bits of the destination's slot), or,
    where ``ports`` are some of the default's ``usual`` ones, only the default's spread
    values whose port is not among them: the others fall through to the default's rules,
    which already lead to one of ``ports``. A failed link makes many destinations lose a
    port or two; each then costs a rule or two, not a whole spread. Whichever is fewer.
    Where ``ports`` outnumber the usual ones they are a detour (a core that lost its link
    to a pod reaches it through any other pod: carrying only packets already on their way),
    spread over a few of them only."""
    if not ports:
        return [(0, 0, OFPP_CONTROLLER)]
    bits = _spread_bits(ports)
    if usual and len(ports) > len(usual):
        bits = min(bits, DETOUR_SPREAD_BITS)
    own = [(bits, s, ports[s % len(ports)]) for s in range(1 << bits)]
    if not usual or not set(ports) < set(usual):
        return own
    usual_bits, keep = _spread_bits(usual), set(ports)
    spread = range(1 << usual_bits)
    over = [
        (usual_bits, s, ports[s % len(ports)]) for s in spread if usual[s % len(usual)] not in keep
    ]
    return over if len(over) < len(own) else own


def _select_gid(ports: tuple[int, ...], taken: dict[int, tuple[int, ...]]) -> int:
    """A select group per set of next-hop ports, its id derived from the ports (so it
    stays put while other sets come and go)."""
    gid = ROUTE_GROUP_BASE + zlib.crc32(repr(ports).encode()) % ROUTE_GROUP_SPAN
    while taken.get(gid, ports) != ports:
        gid = ROUTE_GROUP_BASE + (gid - ROUTE_GROUP_BASE + 1) % ROUTE_GROUP_SPAN
    taken[gid] = ports
    return gid


def route_plan(
    dpid: int,
    routes: Routes,
    indexes: Sequence[int],
    from_hosts: bool,
    limits: SwitchLimits = OPEN_VSWITCH,
    hops: Hops | None = None,
) -> SwitchRules:
    """One switch's routes towards every destination switch, by Loom address.

    Packets in transit take one of the equal-cost next hops by the low bits of the
    destination's slot (spread per destination host); packets from a host go to a
    select group over them (hashed per flow), only where hosts can be. The most common
    next-hop set becomes a default; the rest are aligned blocks of switch indexes, so a
    fat-tree's core holds a few rules per pod, not one per host. ``indexes``: the
    address index of each of ``routes.dests``; ``hops``: ``next_hops``, if known."""
    cookie = make_cookie(CookieKind.ROUTE, dpid)
    rules = SwitchRules()
    sets, actions = next_hop_sets(dpid, routes, indexes, hops)
    counts = Counter(a for a in actions.values() if a != TO_CONTROLLER)
    default = min(counts, key=lambda a: (-counts[a], sets[a])) if counts else None
    transit = (META_FROM_FABRIC, META_FROM_FABRIC)
    cover = blocks(actions, True, default)
    if default is not None:
        cover.append((0, SWITCH_BITS, default))
    usual = sets[default] if default is not None else ()
    for lo, size_log, action in cover:
        is_default = size_log == SWITCH_BITS
        prio = PRIO_ROUTE_DEFAULT if is_default else PRIO_ROUTE
        ports = sets[action] if action != TO_CONTROLLER else ()
        for bits, spread, port in transit_spread(ports, () if is_default else usual):
            match = Match.of(eth_dst=_block_match(lo, size_log, bits, spread), metadata=transit)
            meter = None if ports else METER_MISS
            hop = Output(port)
            rules.add_flow(FlowRule(Table.ROUTE, prio, match, (hop,), meter=meter, cookie=cookie))
    if from_hosts:
        _from_host_rules(rules, cookie, sets, blocks(actions, False, None), limits)
    return rules


def _from_host_rules(
    rules: SwitchRules,
    cookie: int,
    sets: list[tuple[int, ...]],
    cover: list[Block],
    limits: SwitchLimits,
) -> None:
    """Packets from hosts: a select group per next-hop set, within the switch's group
    and bucket caps (a set left without a group gets one port per destination block)."""
    from_host = (0, META_FROM_FABRIC)
    chosen: list[tuple[int, Match, tuple[int, ...]]] = []
    for lo, size_log, action in cover:
        match = Match.of(eth_dst=_block_match(lo, size_log, 0, 0), metadata=from_host)
        if action == TO_CONTROLLER:
            miss = (Output(OFPP_CONTROLLER),)
            rules.add_flow(
                FlowRule(Table.ROUTE, PRIO_ROUTE, match, miss, meter=METER_MISS, cookie=cookie)
            )
            continue
        chosen.append((lo, match, bucket_subset(sets[action], limits.select_buckets, lo)))
    uses = Counter(ports for _, _, ports in chosen)
    grouped = sorted(uses, key=lambda p: (len(p) == 1, -uses[p], p))
    allowed = set(grouped if limits.groups is None else grouped[: limits.groups])
    taken: dict[int, tuple[int, ...]] = {}
    for lo, match, ports in chosen:
        hop: Action = Output(ports[pick(lo, len(ports))])
        if ports in allowed:
            gid = _select_gid(ports, taken)
            buckets = tuple(Bucket((Output(p),), weight=1, watch_port=p) for p in ports)
            rules.add_group(GroupRule(gid, GroupType.SELECT, buckets))
            hop = GroupAction(gid)
        rules.add_flow(FlowRule(Table.ROUTE, PRIO_ROUTE, match, (hop,), cookie=cookie))


def _ip_int(ip: str | None) -> int:
    return int(ipaddress.IPv4Address(ip)) if ip else 0


def held_hosts(held: SwitchRules) -> list[tuple[str, str | None, int, str]]:
    """(MAC, IP, port, Loom address) of every host whose delivery rule a switch holds;
    the IP rides in the cookie, the Loom address in the match."""
    found: dict[str, tuple[str, str | None, int, str]] = {}
    for rule in held.flows.values():
        if cookie_kind(rule.cookie) is not CookieKind.HOST:
            continue
        address = rule.match.get("eth_dst")
        mac = next((a.value for a in rule.actions if isinstance(a, SetField)), None)
        out = next((a for a in rule.actions if isinstance(a, Output)), None)
        if isinstance(address, str) and isinstance(mac, str) and out and mac not in found:
            ip_int = rule.cookie & 0xFFFF_FFFF
            ip = str(ipaddress.IPv4Address(ip_int)) if ip_int else None
            found[mac] = (mac, ip, out.port, address)
    return list(found.values())


# ---------------------------------------------------------------------------
# Diffing
# ---------------------------------------------------------------------------


def union_plans(old: Plan, new: Plan) -> Plan:
    """Both plans' rules, the new one winning where they share an identity."""
    out: Plan = {dpid: rules.copy() for dpid, rules in old.items()}
    for dpid, rules in new.items():
        merged = out.setdefault(dpid, SwitchRules())
        merged.flows.update(rules.flows)
        merged.groups.update(rules.groups)
        merged.meters.update(rules.meters)
    return out
