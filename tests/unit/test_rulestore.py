"""Commits never delete a group under a flow: a switch deletes such flows with the group
and a later modify of them adds nothing (what Open vSwitch does under OpenFlow 1.3)."""

from __future__ import annotations

from controller.model import (
    Bucket,
    FlowMod,
    FlowRule,
    GroupAction,
    GroupMod,
    GroupRule,
    GroupType,
    Match,
    Messages,
    Op,
    Output,
    SwitchRules,
    Table,
)
from controller.owners import OwnerKind
from controller.rulestore import RuleStore, deletes_last
from mininet_scenarios.bench.scale_wire import SwitchTable

DPID = 7
GROUP = GroupRule(0x1005, GroupType.FAST_FAILOVER, (Bucket((Output(5),), watch_port=5),))
MATCH = Match.of(eth_dst=("0a:00:00:00:04:00", "ff:ff:ff:ff:fc:00"))
GUARDED = FlowRule(Table.ROUTE, 100, MATCH, (GroupAction(GROUP.group_id),))
PLAIN = FlowRule(Table.ROUTE, 100, MATCH, (Output(5),))
PROTECT, ROUTE = (OwnerKind.PROTECT, DPID), (OwnerKind.ROUTE, DPID)


def rules(*items: FlowRule | GroupRule) -> SwitchRules:
    out = SwitchRules()
    for item in items:
        if isinstance(item, GroupRule):
            out.add_group(item)
        else:
            out.add_flow(item)
    return out


def installed() -> RuleStore:
    store = RuleStore()
    store.replace(PROTECT, {DPID: rules(GROUP)})
    store.replace(ROUTE, {DPID: rules(GUARDED)})
    return store


def protection_first(store: RuleStore) -> Messages:
    """A commit whose owners come protection first: its group goes, then the route
    that pointed at it is changed to a plain output."""
    out: Messages = {}
    for owner, plan in ((PROTECT, {}), (ROUTE, {DPID: rules(PLAIN)})):
        for dpid, msgs in store.replace(owner, plan).items():
            out.setdefault(dpid, []).extend(msgs)
    return out


def apply(messages: Messages) -> SwitchTable:
    table = SwitchTable()
    table.apply(GroupMod(Op.ADD, GROUP))
    table.apply(FlowMod(Op.ADD, GUARDED))
    for msg in messages.get(DPID, []):
        table.apply(msg)
    return table


def test_the_switch_model_loses_a_flow_whose_group_goes_first() -> None:
    """The hazard itself: owners committed protection first, routes second."""
    store = installed()
    out = protection_first(store)
    assert [type(m) for m in out[DPID]] == [GroupMod, FlowMod]
    table = apply(out)
    assert table.flows == {} and table.cascaded == 1 and table.lost_modifies == 1


def test_a_commit_deletes_groups_after_every_flow_change() -> None:
    store = installed()
    out = protection_first(store)
    ordered = store.ordered(out)
    assert [type(m) for m in ordered[DPID]] == [FlowMod, GroupMod]
    table = apply(ordered)
    assert list(table.flows.values()) == [PLAIN] and table.groups == {}
    assert table.cascaded == 0 and store.deleted_in_use == 0


def test_a_group_deleted_under_a_flow_still_held_is_counted() -> None:
    store = installed()
    assert store.group_in_use(DPID, GROUP.group_id)
    store.ordered(store.replace(PROTECT, {}))
    assert store.deleted_in_use == 1
    assert not store.group_in_use(DPID + 1, GROUP.group_id)


def test_a_deletion_stays_before_the_same_group_added_again() -> None:
    again = GroupRule(GROUP.group_id, GroupType.SELECT, (Bucket((Output(6),)),))
    msgs: Messages = {
        DPID: [GroupMod(Op.DELETE, GROUP), GroupMod(Op.ADD, again), FlowMod(Op.ADD, GUARDED)],
        DPID + 1: [GroupMod(Op.DELETE, GROUP), FlowMod(Op.MODIFY, PLAIN)],
    }
    out = deletes_last(msgs)
    assert out[DPID] == msgs[DPID]
    assert out[DPID + 1] == [FlowMod(Op.MODIFY, PLAIN), GroupMod(Op.DELETE, GROUP)]


def test_switch_rules_follow_the_owners_on_a_switch() -> None:
    store = installed()
    assert set(store.switch_rules(DPID).flows.values()) == {GUARDED}
    store.replace(ROUTE, {})
    assert store.holders[DPID] == {PROTECT}
    store.forget_switch(DPID)
    assert store.switch_rules(DPID) == SwitchRules()
