"""The flood guard: a host port that opens flows too fast stops being tracked a while.

Every new flow from a host costs the controller a packet-in and a tracked flow; a scan
or a flood opens thousands a second from one port. Past ``new_flows_per_port`` a second,
the port's first packets are no longer copied to the controller for ``quiet_seconds``
(one rule above the catch rule: its traffic still flows, on the default routes), then
tracking resumes on its own.
"""

from __future__ import annotations

import logging
from collections import Counter

from controller.model import (
    ETH_TYPE_IPV4,
    META_FROM_FABRIC,
    CookieKind,
    FlowRule,
    Match,
    PortRef,
    SwitchRules,
    Table,
    make_cookie,
)
from controller.owners import Owner, OwnerKind, Plan

log = logging.getLogger("loom.te")
PRIO_QUIET = 20  # above the catch rule (10), below tracked flows (100)


class FloodGuard:
    def __init__(self, per_second: int, quiet_seconds: float, events: Counter[str]) -> None:
        self.per_second = per_second
        self.quiet_seconds = quiet_seconds
        self.events = events
        self.quiet: dict[PortRef, float] = {}  # port -> until when its flows go untracked
        self._opened: dict[PortRef, list[float]] = {}  # port -> its new flows' times

    def opened(self, now: float, at: PortRef) -> dict[Owner, Plan] | None:
        """A new flow from host port ``at``: None while the port is within its rate, else
        the rule that quiets it (empty if it is quiet already)."""
        recent = [t for t in self._opened.get(at, []) if now - t < 1.0] + [now]
        self._opened[at] = recent
        if len(recent) > self.per_second:
            return self._quiet(now, at)
        return None

    def _quiet(self, now: float, at: PortRef) -> dict[Owner, Plan]:
        if at in self.quiet:
            return {}
        dpid, port = at
        self.quiet[at] = now + self.quiet_seconds
        self.events["ports_quieted"] += 1
        log.warning(
            "port %016x:%d opens flows too fast: not tracked for %.0f s",
            dpid,
            port,
            self.quiet_seconds,
        )
        match = Match.of(in_port=port, metadata=(0, META_FROM_FABRIC), eth_type=ETH_TYPE_IPV4)
        rule = FlowRule(
            Table.PIN,
            PRIO_QUIET,
            match,
            goto=Table.ROUTE,
            cookie=make_cookie(CookieKind.CATCH, dpid),
        )
        rules = SwitchRules()
        rules.add_flow(rule)
        return {(OwnerKind.QUIET, at): {dpid: rules}}

    def expire(self, now: float) -> dict[Owner, Plan]:
        """Ports whose quiet is over: their rules go, and they are tracked again."""
        plans: dict[Owner, Plan] = {}
        for ref, until in list(self.quiet.items()):
            if now >= until:
                del self.quiet[ref]
                plans[(OwnerKind.QUIET, ref)] = {}
        return plans
