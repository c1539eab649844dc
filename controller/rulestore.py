"""What Loom has sent to each switch, per owner, and the messages that change it.

Parts never share a rule identity, so each is diffed against what was sent for it
alone. Messages go in an order that never leaves a flow pointing at a missing group
or meter (make-before-break): meters and groups first, then flows, then removals; and
across the owners of one commit, every deletion of a group or meter after every flow
change, because a switch deletes the flows that point at a group deleted under them
and a later modify of such a flow adds nothing (OpenFlow 1.3, 6.4 and 6.5).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from controller.model import (
    FlowMod,
    FlowRule,
    GroupAction,
    GroupMod,
    Match,
    Message,
    Messages,
    MeterMod,
    Op,
    SwitchRules,
)
from controller.owners import Owner, OwnerKind, Plan

log = logging.getLogger("loom.rules")


def _flow_changed_in_place(old: FlowRule, new: FlowRule) -> bool:
    """True when MODIFY_STRICT can carry the change (it keeps cookie and timeouts)."""
    return (old.cookie, old.idle_timeout, old.hard_timeout) == (
        new.cookie,
        new.idle_timeout,
        new.hard_timeout,
    )


def diff(old: SwitchRules, new: SwitchRules) -> list[Message]:
    """Messages turning ``old`` into ``new`` on one switch, in a safe order."""
    return [*_additions(old, new), *_removals(old, new)]


def _additions(old: SwitchRules, new: SwitchRules) -> list[Message]:
    """Adds and modifies, meters then groups then flows, so no flow is sent before the
    meter or group it points at (make-before-break)."""
    msgs: list[Message] = []
    for mid, meter in sorted(new.meters.items()):
        if mid not in old.meters:
            msgs.append(MeterMod(Op.ADD, meter))
        elif old.meters[mid] != meter:
            msgs.append(MeterMod(Op.MODIFY, meter))
    for gid, group in sorted(new.groups.items()):
        if gid not in old.groups:
            msgs.append(GroupMod(Op.ADD, group))
        elif old.groups[gid] != group:
            msgs.append(GroupMod(Op.MODIFY, group))
    for key in sorted(new.flows, key=_flow_sort_key):
        rule, before = new.flows[key], old.flows.get(key)
        if before is None:
            msgs.append(FlowMod(Op.ADD, rule))
        elif before is not rule and before != rule:
            msgs.append(
                FlowMod(Op.MODIFY if _flow_changed_in_place(before, rule) else Op.ADD, rule)
            )
    return msgs


def _removals(old: SwitchRules, new: SwitchRules) -> list[Message]:
    """Deletes in the reverse order, flows then groups then meters, so no group or
    meter goes while a rule still refers to it."""
    msgs: list[Message] = []
    for key in sorted(old.flows, key=_flow_sort_key):
        if key not in new.flows:
            msgs.append(FlowMod(Op.DELETE, old.flows[key]))
    for gid in sorted(old.groups):
        if gid not in new.groups:
            msgs.append(GroupMod(Op.DELETE, old.groups[gid]))
    for mid in sorted(old.meters):
        if mid not in new.meters:
            msgs.append(MeterMod(Op.DELETE, old.meters[mid]))
    return msgs


def _flow_sort_key(key: tuple[int, int, Match]) -> tuple[int, int, Match]:
    table, priority, match = key
    return (table, -priority, match)


class RuleStore:
    """What Loom has sent, per owner and switch; turns new plans into messages.

    Rules read back from a switch that (re)connected are *adopted*: an owner whose plan
    contains one takes it over without a message (or with a modify if it differs), so a
    controller restart resends nothing that is already right; what no owner claims is
    deleted only when ``release`` says the controller has relearned the fabric.
    """

    def __init__(self) -> None:
        self.parts: dict[Owner, Plan] = {}
        self.adopted: dict[int, SwitchRules] = {}
        self.flow_counts: dict[int, int] = {}  # flow entries per switch, across owners
        self.holders: dict[int, set[Owner]] = {}  # switch -> owners with rules on it
        self.deleted_in_use = 0  # groups deleted under a flow of ours (``ordered``)

    def adopt(self, dpid: int, rules: SwitchRules) -> None:
        self.adopted[dpid] = rules

    def release(self, dpid: int) -> list[Message]:
        """Delete what was read back from ``dpid`` and no owner claimed."""
        return diff(self.adopted.pop(dpid, SwitchRules()), SwitchRules())

    def _claim(self, dpid: int, old: SwitchRules, new: SwitchRules) -> SwitchRules:
        adopted = self.adopted.get(dpid)
        if adopted is None:
            return old
        have = old.copy()
        for key in [k for k in new.flows if k in adopted.flows and k not in old.flows]:
            have.flows[key] = adopted.flows.pop(key)
        for gid in [g for g in new.groups if g in adopted.groups and g not in old.groups]:
            have.groups[gid] = adopted.groups.pop(gid)
        for mid in [m for m in new.meters if m in adopted.meters and m not in old.meters]:
            have.meters[mid] = adopted.meters.pop(mid)
        return have

    def replace(self, owner: Owner, plan: Plan) -> Messages:
        """Make ``owner``'s rules equal ``plan`` and return the messages that do it. A
        source that re-plans nothing hands back the very plan it gave before: no diff."""
        old = self.parts.get(owner, {})
        if old is plan:
            return {}
        out: Messages = {}
        for dpid in sorted(set(old) | set(plan)):
            new, before = plan.get(dpid, SwitchRules()), old.get(dpid, SwitchRules())
            self.flow_counts[dpid] = (
                self.flow_counts.get(dpid, 0) + len(new.flows) - len(before.flows)
            )
            msgs = diff(self._claim(dpid, before, new), new)
            if msgs:
                out[dpid] = msgs
        empty = [d for d, r in plan.items() if not (r.flows or r.groups or r.meters)]
        kept = {d: r for d, r in plan.items() if d not in empty} if empty else plan
        for dpid in old.keys() - kept.keys():
            self.holders.get(dpid, set()).discard(owner)
        for dpid in kept.keys() - old.keys():
            self.holders.setdefault(dpid, set()).add(owner)
        if kept:
            self.parts[owner] = kept
        else:
            self.parts.pop(owner, None)
        return out

    def remove(self, owner: Owner) -> Messages:
        return self.replace(owner, {})

    def owners(self, kind: OwnerKind | None = None) -> list[Owner]:
        return sorted((o for o in self.parts if kind is None or o[0] == kind), key=repr)

    def forget_switch(self, dpid: int) -> None:
        """Loom no longer knows what the switch holds (it disconnected or reconnected)."""
        self.adopted.pop(dpid, None)
        self.flow_counts.pop(dpid, None)
        self.holders.pop(dpid, None)
        for owner, plan in list(self.parts.items()):
            if dpid not in plan:
                continue
            rest = {d: r for d, r in plan.items() if d != dpid}  # plans are shared: no edits
            if rest:
                self.parts[owner] = rest
            else:
                del self.parts[owner]

    def fits(self, owner: Owner, plan: Plan, cap: Callable[[int], int | None]) -> bool:
        """Whether replacing ``owner``'s rules by ``plan`` keeps every switch's flow
        entries within ``cap`` (or, where it was over already, adds none there)."""
        old = self.parts.get(owner, {})
        for dpid, rules in plan.items():
            limit = cap(dpid)
            before = len(old[dpid].flows) if dpid in old else 0
            after = self.flow_counts.get(dpid, 0) - before + len(rules.flows)
            if limit is not None and len(rules.flows) > before and after > limit:
                return False
        return True

    def switch_rules(self, dpid: int) -> SwitchRules:
        """Everything installed on one switch, across owners."""
        merged = SwitchRules()
        for owner in sorted(self.holders.get(dpid, ()), key=repr):
            rules = self.parts[owner].get(dpid)
            if rules:
                merged.flows.update(rules.flows)
                merged.groups.update(rules.groups)
                merged.meters.update(rules.meters)
        return merged

    def ordered(self, messages: Messages) -> Messages:
        """One commit's messages in a safe order (``deletes_last``). A group deleted
        while a flow Loom holds still points at it would take that flow with it on the
        switch: never planned, so counted and logged should it happen."""
        out = deletes_last(messages)
        for dpid, msgs in out.items():
            for msg in msgs:
                if not (isinstance(msg, GroupMod) and msg.op is Op.DELETE):
                    continue
                gid = msg.group.group_id
                if self.group_in_use(dpid, gid):
                    self.deleted_in_use += 1
                    log.error("switch %016x: group %d deleted while a flow points at it", dpid, gid)
        return out

    def group_in_use(self, dpid: int, gid: int) -> bool:
        """Whether a flow or group Loom holds on ``dpid`` points at group ``gid`` (a
        switch deletes such flows with the group, and a later modify adds nothing)."""
        target = GroupAction(gid)
        for owner in self.holders.get(dpid, ()):
            rules = self.parts[owner].get(dpid)
            if rules is None or gid in rules.groups:
                continue  # (an owner that holds the group itself re-adds it)
            if any(target in f.actions for f in rules.flows.values()):
                return True
            for group in rules.groups.values():
                if any(target in b.actions or b.watch_group == gid for b in group.buckets):
                    return True
        return False


def deletes_last(messages: Messages) -> Messages:
    """Each switch's group and meter deletions after its flow changes, so a commit
    whose owners change in any order never deletes what a flow still points at; a
    deletion stays put when the same id is added again later in the batch."""
    out: Messages = {}
    for dpid, msgs in messages.items():
        later = [m for m in msgs if _removes_target(m)]
        if not later:
            out[dpid] = msgs
            continue
        readded = {_target(m) for m in msgs if not _removes_target(m) and _target(m)}
        moved = [m for m in later if _target(m) not in readded]
        ids = {id(m) for m in moved}
        out[dpid] = [m for m in msgs if id(m) not in ids] + moved
    return out


def _target(msg: Message) -> tuple[str, int] | None:
    if isinstance(msg, GroupMod):
        return ("group", msg.group.group_id)
    if isinstance(msg, MeterMod):
        return ("meter", msg.meter.meter_id)
    return None


def _removes_target(msg: Message) -> bool:
    return isinstance(msg, GroupMod | MeterMod) and msg.op is Op.DELETE
