"""The rule compiler: plans per owner, minimal diffs in a safe order."""

from __future__ import annotations

import networkx as nx

from controller.compiler import (
    RuleStore,
    base_plan,
    destination_plan,
    diff,
    group_id_for,
    union_plans,
)
from controller.model import (
    META_FROM_FABRIC,
    META_TENANT_MASK,
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
    SwitchRules,
    Table,
)
from controller.owners import OwnerKind
from controller.routing import Routes
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
    assert arp[3].actions == () and arp[4].actions == ()  # ARP from another switch: dropped


def test_destination_plan_hashes_at_ingress_and_spreads_in_transit() -> None:
    hosts = [
        Host("02:00:00:00:00:0a", "10.0.0.10", 2, 1, 0.0),
        Host("02:00:00:00:00:0b", "10.0.0.11", 2, 2, 0.0),
    ]
    routes = Routes(nx.MultiDiGraph(), None, {}, {2: {1: (3, 4), 3: (7,)}})
    plan = destination_plan(2, hosts, routes, [1, 2, 3])
    local = plan[2].flows
    assert {r.actions for r in local.values()} == {(Output(1),), (Output(2),)}
    assert len(local) == 4  # per host: from an edge port (tenant checked) and in transit
    gid = group_id_for(2)
    assert plan[1].groups[gid].buckets == (
        Bucket((Output(3),), 1, watch_port=3),
        Bucket((Output(4),), 1, watch_port=4),
    )
    transit = sorted(
        (
            r
            for r in plan[1].flows.values()
            if r.match.get("metadata") == (META_FROM_FABRIC, META_FROM_FABRIC)
        ),
        key=lambda r: str(r.match.get("eth_dst")),
    )
    assert [r.actions for r in transit] == [(Output(3),), (Output(4),)]  # rank 0 -> 3, rank 1 -> 4
    ingress = [
        r
        for r in plan[1].flows.values()
        if r.match.get("metadata") == (0, META_TENANT_MASK | META_FROM_FABRIC)
    ]
    assert all(r.actions == (GroupAction(gid),) for r in ingress) and len(ingress) == 2
    assert plan[3].groups[gid].buckets == (Bucket((Output(7),), 1, watch_port=7),)


def test_group_ids_are_stable_and_in_range() -> None:
    assert group_id_for(17) == 17
    big = group_id_for(0xFFFF_0000_0000)
    assert 0 < big < 0xFFFFFF00 and big == group_id_for(0xFFFF_0000_0000)
