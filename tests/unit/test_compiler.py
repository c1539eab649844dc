"""The rule compiler: plans per owner, minimal diffs in a safe order."""

from __future__ import annotations

import networkx as nx
from hypothesis import given
from hypothesis import strategies as st

from controller.addressing import to_switch
from controller.compiler import (
    base_plan,
    blocks,
    delivery_plan,
    held_hosts,
    route_plan,
    transit_spread,
    union_plans,
)
from controller.model import (
    META_FROM_FABRIC,
    OFPP_CONTROLLER,
    Bucket,
    FlowMod,
    FlowRule,
    GroupAction,
    GroupMod,
    GroupRule,
    GroupType,
    Match,
    MeterMod,
    MeterRule,
    Op,
    Output,
    SetField,
    SwitchRules,
    Table,
)
from controller.owners import OwnerKind
from controller.responder import LOOM_ADDRESS
from controller.routing import compute_routes
from controller.rulestore import RuleStore, diff
from controller.topology import Host


def rules(
    *flows: FlowRule, groups: tuple[GroupRule, ...] = (), meters: tuple[MeterRule, ...] = ()
) -> SwitchRules:
    r = SwitchRules()
    for f in flows:
        r.add_flow(f)
    for g in groups:
        r.add_group(g)
    for m in meters:
        r.meters[m.meter_id] = m
    return r


F1 = FlowRule(Table.ROUTE, 100, Match.of(eth_dst="02:00:00:00:00:01"), (Output(1),), cookie=7)
G5 = GroupRule(
    5, GroupType.SELECT, (Bucket((Output(3),), watch_port=3), Bucket((Output(4),), watch_port=4))
)
F_TO_G5 = FlowRule(
    Table.ROUTE, 100, Match.of(eth_dst="02:00:00:00:00:02"), (GroupAction(5),), cookie=7
)


def test_union_of_plans_keeps_both_and_the_new_rule_wins_a_shared_identity() -> None:
    moved = FlowRule(F1.table, F1.priority, F1.match, (Output(2),), cookie=7)
    old = {1: rules(F1, groups=(G5,)), 2: rules(F_TO_G5)}
    both = union_plans(old, {1: rules(moved), 3: rules(F1)})
    assert both[1].flows == {F1.key: moved} and both[1].groups == {5: G5}
    assert both[2].flows == {F_TO_G5.key: F_TO_G5} and both[3].flows == {F1.key: F1}
    assert old[1].flows == {F1.key: F1}  # the old plan is not changed


def test_identical_states_need_no_messages() -> None:
    assert diff(rules(F1, groups=(G5,)), rules(F1, groups=(G5,))) == []


def test_match_field_order_does_not_matter() -> None:
    a = Match.of(eth_dst="x", metadata=(1, 1))
    b = Match((("metadata", (1, 1)), ("eth_dst", "x")))
    assert a != b and Match.of(**dict(b.fields)) == a


def test_new_group_is_added_before_the_flow_that_uses_it() -> None:
    msgs = diff(rules(), rules(F_TO_G5, groups=(G5,)))
    assert msgs == [GroupMod(Op.ADD, G5), FlowMod(Op.ADD, F_TO_G5)]


def test_flow_removed_before_its_group_and_meters_last() -> None:
    meter = MeterRule(1, 1000)
    msgs = diff(rules(F_TO_G5, groups=(G5,), meters=(meter,)), rules())
    assert msgs == [
        FlowMod(Op.DELETE, F_TO_G5),
        GroupMod(Op.DELETE, G5),
        MeterMod(Op.DELETE, meter),
    ]


def test_changed_actions_modify_in_place_changed_cookie_re_adds() -> None:
    moved = FlowRule(F1.table, F1.priority, F1.match, (Output(2),), cookie=7)
    assert diff(rules(F1), rules(moved)) == [FlowMod(Op.MODIFY, moved)]
    recookied = FlowRule(F1.table, F1.priority, F1.match, F1.actions, cookie=8)
    assert diff(rules(F1), rules(recookied)) == [FlowMod(Op.ADD, recookied)]


def test_changed_buckets_modify_the_group() -> None:
    g = GroupRule(5, GroupType.SELECT, (Bucket((Output(3),), watch_port=3),))
    assert diff(rules(groups=(G5,)), rules(groups=(g,))) == [GroupMod(Op.MODIFY, g)]


def test_rule_store_diffs_per_owner_and_forgets_switches() -> None:
    store = RuleStore()
    first = store.replace((OwnerKind.DEST, 2), {1: rules(F1)})
    assert first == {1: [FlowMod(Op.ADD, F1)]}
    assert store.replace((OwnerKind.DEST, 2), {1: rules(F1)}) == {}
    other = store.replace((OwnerKind.DEST, 3), {1: rules(F_TO_G5, groups=(G5,))})
    assert list(other) == [1] and len(other[1]) == 2
    assert set(store.switch_rules(1).flows) == {F1.key, F_TO_G5.key}
    assert store.remove((OwnerKind.DEST, 2)) == {1: [FlowMod(Op.DELETE, F1)]}
    store.forget_switch(1)
    assert store.parts == {}
    assert store.replace((OwnerKind.DEST, 3), {1: rules(F_TO_G5, groups=(G5,))})[1][0] == GroupMod(
        Op.ADD, G5
    )


def test_base_plan_sends_discovery_to_controller_and_marks_fabric_ports() -> None:
    plan = base_plan(9, [3, 4], edge_ports=[1, 2])
    classify = [r for r in plan.flows.values() if r.table == Table.CLASSIFY]
    fabric = [
        r for r in classify if r.match.get("in_port") in (3, 4) and r.match.get("eth_type") is None
    ]
    assert sorted(r.match.get("in_port") for r in fabric) == [3, 4]  # type: ignore[type-var]
    assert all(r.goto == Table.QOS and r.write_metadata == (META_FROM_FABRIC,) * 2 for r in fabric)
    lldp = next(r for r in classify if r.match.get("eth_type") == 0x88CC)
    assert lldp.priority > max(r.priority for r in fabric)
    misses = {r.table: r for r in plan.flows.values() if r.match == Match()}
    assert sorted(misses) == [0, 1, 2, 3, 4]


def test_everything_bound_for_the_controller_is_metered() -> None:
    plan = base_plan(9, [3, 4], edge_ports=[1, 2])
    to_controller = [
        r
        for r in plan.flows.values()
        if any(getattr(a, "port", None) == 0xFFFFFFFD for a in r.actions)
    ]
    assert to_controller and all(r.meter in plan.meters for r in to_controller)
    assert all(m.per_packet for m in plan.meters.values())
    arp = {
        r.match.get("in_port"): r for r in plan.flows.values() if r.match.get("eth_type") == 0x0806
    }
    assert arp[1].meter != arp[2].meter  # one host's ARP cannot starve its neighbour's
    # ARP from another switch: dropped, but unicast to a Loom address (routed on)
    assert 3 not in arp and 4 not in arp
    transit = [r for r in plan.flows.values() if r.match.get("metadata") == (1, 1)]
    transit = [r for r in transit if r.match.get("eth_type") == 0x0806]
    assert [(r.goto, r.actions, r.match.get("eth_dst")) for r in transit] == [
        (Table.ROUTE, (), LOOM_ADDRESS),
        (None, (), None),
    ]


def leaf_spine() -> nx.MultiDiGraph:
    """Leaves 1, 2, 3 (ports 3 and 4 up to spines 10 and 11; spine port = leaf number)."""
    g = nx.MultiDiGraph()
    for leaf in (1, 2, 3):
        for port, spine in ((3, 10), (4, 11)):
            g.add_edge(leaf, spine, key=port, dst_port=leaf)
            g.add_edge(spine, leaf, key=leaf, dst_port=port)
    return g


def test_route_plan_hashes_at_ingress_and_spreads_by_slot_in_transit() -> None:
    routes = compute_routes(leaf_spine(), [1, 2, 3])
    plan = route_plan(1, routes, [1, 2, 3], from_hosts=True)
    transit = {
        r.match.get("eth_dst"): r.actions
        for r in plan.flows.values()
        if r.match.get("metadata") == (META_FROM_FABRIC, META_FROM_FABRIC)
    }
    # the default: any Loom address, by the slot's low bit, over both spines
    assert transit[to_switch(None, 1, 0)] == (Output(3),)
    assert transit[to_switch(None, 1, 1)] == (Output(4),)
    # the switch itself: an address it does not deliver goes to the controller (the
    # block takes index 0 too: no switch has it, so no packet carries it in transit)
    itself = ("0a:00:00:00:00:00", "ff:00:00:ff:f8:00")
    assert transit[itself] == (Output(OFPP_CONTROLLER),)
    assert len(transit) == 3
    ingress = [r for r in plan.flows.values() if r.match.get("metadata") == (0, META_FROM_FABRIC)]
    (gid,) = plan.groups
    assert plan.groups[gid].buckets == (
        Bucket((Output(3),), 1, watch_port=3),
        Bucket((Output(4),), 1, watch_port=4),
    )
    # leaves 2 and 3 share next hops: one aligned block {2, 3}; leaf 1 is itself
    by_match = {r.match.get("eth_dst"): r.actions for r in ingress}
    block = ("0a:00:00:00:08:00", "ff:00:00:ff:f8:00")
    assert by_match == {block: (GroupAction(gid),), to_switch(1): (Output(OFPP_CONTROLLER),)}


def test_route_plan_of_a_spine_has_one_rule_per_leaf_and_no_ingress_rules() -> None:
    routes = compute_routes(leaf_spine(), [1, 2, 3])
    plan = route_plan(10, routes, [1, 2, 3], from_hosts=False)
    assert not plan.groups
    outs = {r.actions for r in plan.flows.values()}
    assert len(plan.flows) == 3 and outs == {(Output(1),), (Output(2),), (Output(3),)}


def lands_on(usual: tuple[int, ...], ports: tuple[int, ...], slot: int) -> int:
    """The port a transit packet to a block over ``ports`` leaves by, for its slot's low
    bits: the block's own rule for them, else the default's (over ``usual``)."""
    own = {s: p for bits, s, p in transit_spread(ports, usual) if slot % (1 << bits) == s}
    usual_rules = {s: p for bits, s, p in transit_spread(usual, ()) if slot % (1 << bits) == s}
    return next(iter(own.values())) if own else next(iter(usual_rules.values()))


@given(
    st.lists(st.integers(1, 48), min_size=1, max_size=24, unique=True),
    st.lists(st.integers(1, 48), min_size=1, max_size=48, unique=True),
)
def test_a_block_in_transit_always_leaves_by_one_of_its_own_ports(
    usual: list[int], ports: list[int]
) -> None:
    """Whether a block spreads over its own ports or only overrides the default where the
    default's port is not one of them, every slot leaves by one of the block's ports; and
    never with more rules than its own spread."""
    rules = transit_spread(tuple(ports), tuple(usual))
    assert len(rules) <= max(len(transit_spread(tuple(ports), ())), 1)
    for slot in range(256):
        assert lands_on(tuple(usual), tuple(ports), slot) in ports


def test_a_destination_that_lost_one_of_the_usual_ports_costs_one_rule_in_transit() -> None:
    usual = tuple(range(1, 9))  # an edge's eight uplinks
    assert transit_spread(usual[1:], usual) == [(3, 0, 2)]  # (slot bits 3, slot 0 -> port 2)
    assert len(transit_spread(usual[4:], usual)) == 4
    detour = tuple(range(1, 16))  # a core that lost its pod: through any other pod
    assert len(transit_spread(detour, (16,))) == 4


def test_blocks_cover_each_destination_once_and_never_absorb_at_the_ingress() -> None:
    actions = {4: 0, 5: 0, 6: 0, 7: 0, 8: 1, 9: 1, 12: 0}
    assert blocks(actions, absorb=False, default=None) == [(4, 2, 0), (8, 1, 1), (12, 0, 0)]
    # in transit, indexes no switch has take any action: fewer, larger blocks
    assert blocks(actions, absorb=True, default=0) == [(8, 2, 1)]


def test_delivery_restores_the_real_address() -> None:
    host = Host("02:00:00:00:00:0a", "10.0.0.10", 2, 1, 0.0)
    plan = delivery_plan(2, [(host, "0a:00:00:00:08:00")])
    (rule,) = [r for r in plan[2].flows.values() if r.table == Table.ROUTE]
    assert rule.match == Match.of(eth_dst="0a:00:00:00:08:00")
    assert rule.actions == (SetField("eth_dst", host.mac), Output(1))
    assert held_hosts(plan[2]) == [(host.mac, host.ip, 1, "0a:00:00:00:08:00")]
