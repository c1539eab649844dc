"""Switch sync: which switches Loom may write to, and when read-back rules go.

A switch that connects (or reconnects after a controller restart) may still forward
on what it holds. Loom reads everything back before it plans for that switch, adopts
what it finds, and keeps such a switch *held* on its old rules until the fabric has
been relearned (a half-learned plan would rewrite rules that are right). Once
discovery has been quiet for a while the switch is *settled*: it gets the plans of the
whole relearned fabric, then what no plan claimed is removed. A switch that refuses a
message is read back the same way, but keeps being routed meanwhile (a repair).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.model import (
    FlowRule,
    GroupRule,
    Message,
    MeterRule,
    StatsKind,
    StatsRequest,
    SwitchRules,
    cookie_kind,
)
from controller.owners import Plan

REPAIR_BACKOFF = 5.0  # seconds between two repairs of one switch after rejections
READ_BACK = (StatsKind.FLOW, StatsKind.GROUP_DESC, StatsKind.METER_CONFIG)


@dataclass
class SwitchSync:
    settle_time: float
    reading: dict[int, float] = field(default_factory=dict)  # dpid -> when read back
    adopted_at: dict[int, float] = field(default_factory=dict)  # dpid -> when adopted
    holding: set[int] = field(default_factory=set)  # kept on what they held
    repaired_at: dict[int, float] = field(default_factory=dict)  # dpid -> last repair

    def read_back(self, now: float, dpid: int) -> list[Message]:
        """Requests for everything ``dpid`` holds; nothing is written to it until the
        answer is in (``adopt``)."""
        self.reading[dpid] = now
        self.adopted_at.pop(dpid, None)
        self.holding.discard(dpid)
        return [StatsRequest(kind, sync=True) for kind in READ_BACK]

    def connected(self, dpid: int) -> None:
        self.repaired_at.pop(dpid, None)

    def disconnected(self, dpid: int) -> None:
        self.holding.discard(dpid)

    def may_repair(self, now: float, dpid: int) -> bool:
        """At most one repair per ``REPAIR_BACKOFF`` seconds, so a rule the switch can
        never accept does not loop; none while a read-back is under way."""
        if dpid in self.reading:
            return False
        if now - self.repaired_at.get(dpid, -REPAIR_BACKOFF) < REPAIR_BACKOFF:
            return False
        self.repaired_at[dpid] = now
        return True

    def awaited(self, dpid: int) -> bool:
        return dpid in self.reading

    def adopt(
        self,
        now: float,
        dpid: int,
        flows: list[FlowRule],
        groups: list[GroupRule],
        meters: list[MeterRule],
    ) -> SwitchRules:
        """What the switch answered, as Loom's own rules (others' flows are left
        alone); a switch that forwards on its own is held unless this is a repair."""
        del self.reading[dpid]
        held = SwitchRules()
        for rule in flows:
            if cookie_kind(rule.cookie) is not None:
                held.add_flow(rule)
        for group in groups:
            held.add_group(group)
        for meter in meters:
            held.meters[meter.meter_id] = meter
        self.adopted_at[dpid] = now
        if held.flows and dpid not in self.repaired_at:
            self.holding.add(dpid)
        return held

    def settled(self, now: float, last_change: float) -> tuple[list[int], bool]:
        """Switches whose read-back rules may now be released (discovery quiet for
        half the settle time, adopted for all of it), and whether any of them was
        held (then the whole fabric must be planned for it first)."""
        done = [
            dpid
            for dpid, adopted in sorted(self.adopted_at.items())
            if now - adopted >= self.settle_time and now - last_change >= self.settle_time / 2
        ]
        unheld = bool(self.holding & set(done))
        self.holding -= set(done)
        for dpid in done:
            del self.adopted_at[dpid]
        return done, unheld

    def writable(self, plan: Plan) -> Plan:
        """The part of a plan that may be sent now: not to switches being read back
        or held on what they had."""
        if not self.reading and not self.holding:
            return plan
        return {
            dpid: rules
            for dpid, rules in plan.items()
            if dpid not in self.reading and dpid not in self.holding
        }
