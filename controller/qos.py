"""Traffic classes: DSCP marks set at the ingress edge, queues at every hop.

Hosts are not trusted to mark their own traffic: at edge ports the QOS table rewrites
DSCP to the bulk class, and only Loom's job rules (PIN table) mark a collective's
packets. At every switch, fabric traffic carrying a class's DSCP is sent to that
class's queue (``set_queue``), for switches with real per-queue schedulers; software
fabrics schedule on the DSCP itself (the emulation's HTB trees filter on it), which is
also how RoCE AI fabrics classify traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.model import (
    ETH_TYPE_IPV4,
    META_FROM_FABRIC,
    FlowRule,
    Match,
    SetField,
    SetQueue,
    SwitchRules,
    Table,
)


@dataclass(frozen=True)
class TrafficClass:
    name: str
    dscp: int
    queue: int
    share: float  # guaranteed share of a link; idle classes lend to busy ones


COLLECTIVE = TrafficClass("collective", 26, 1, 0.90)  # AF31, as RoCE data commonly uses
CONTROL = TrafficClass("control", 48, 2, 0.05)  # CS6
BULK = TrafficClass("bulk", 0, 0, 0.05)  # best effort: everything unmarked
CLASSES = {c.name: c for c in (COLLECTIVE, CONTROL, BULK)}

PRIO_QUEUE = 200
PRIO_REMARK = 100


def qos_rules(cookie: int, enabled: bool, job_levels: tuple[TrafficClass, ...] = ()) -> SwitchRules:
    """The QOS table of every switch (its miss entry, to PIN, is in the base plan);
    ``job_levels``: the collective queues jobs are spread over by priority, if more than
    the one collective class."""
    rules = SwitchRules()
    if not enabled:
        return rules
    for tc in (COLLECTIVE, CONTROL, *(t for t in job_levels if t.dscp != COLLECTIVE.dscp)):
        match = Match.of(
            metadata=(META_FROM_FABRIC, META_FROM_FABRIC), eth_type=ETH_TYPE_IPV4, ip_dscp=tc.dscp
        )
        rules.add_flow(
            FlowRule(
                Table.QOS, PRIO_QUEUE, match, (SetQueue(tc.queue),), goto=Table.PIN, cookie=cookie
            )
        )
    from_host = Match.of(metadata=(0, META_FROM_FABRIC), eth_type=ETH_TYPE_IPV4)
    remark = (SetField("ip_dscp", BULK.dscp),)
    rules.add_flow(
        FlowRule(Table.QOS, PRIO_REMARK, from_host, remark, goto=Table.PIN, cookie=cookie)
    )
    return rules


def job_levels(spec: str) -> tuple[TrafficClass, ...]:
    """``DSCP:QUEUE,DSCP:QUEUE,...`` (highest priority first) as the collective classes
    jobs are spread over; a ``ValueError`` says what is wrong."""
    levels: list[TrafficClass] = []
    for i, item in enumerate(x.strip() for x in spec.split(",") if x.strip()):
        dscp_text, _, queue_text = item.partition(":")
        try:
            dscp, queue = int(dscp_text), int(queue_text)
        except ValueError:
            raise ValueError(f"item {i + 1} {item!r}: expected DSCP:QUEUE, two integers") from None
        if not 0 <= dscp <= 63 or not 0 <= queue <= 0xFFFFFFFE:
            raise ValueError(f"item {i + 1} {item!r}: DSCP 0-63 and a queue id expected")
        if dscp in (CONTROL.dscp, BULK.dscp):
            raise ValueError(f"item {i + 1} {item!r}: DSCP {dscp} is the control or bulk class")
        levels.append(TrafficClass(f"collective-{i}", dscp, queue, COLLECTIVE.share))
    if not levels or len({t.dscp for t in levels}) != len(levels):
        raise ValueError("expected at least one level and no DSCP twice")
    return tuple(levels)


def mark(tc: TrafficClass, enabled: bool) -> tuple[SetField | SetQueue, ...]:
    """Actions that put a packet in class ``tc`` at its ingress switch."""
    if not enabled:
        return ()
    return (SetField("ip_dscp", tc.dscp), SetQueue(tc.queue))


def ack_marks(enabled: bool) -> tuple[SetField | SetQueue, ...]:
    """The class of ACK streams (an elephant's, a job hop's): control, ahead of every data
    queue, so a flow's ACK clock never waits behind other flows' data."""
    return mark(CONTROL, enabled)
