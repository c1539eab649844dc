"""When do the switches have what one event made the controller send?

OpenFlow switches answer a barrier request only after every message sent before it on
the same connection has been processed. So the time from an event (a PortStatus) to the
last barrier reply of every switch its messages went to is the time until the reroute is
in force in the fabric, not merely sent. The caller passes ``now`` (one clock for start
and replies); nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from controller.model import FlowMod, GroupMod, Messages, MeterMod

MODIFICATIONS = (FlowMod, GroupMod, MeterMod)


def modified_switches(messages: Messages) -> list[int]:
    """Switches that were sent at least one flow, group or meter modification."""
    return sorted(
        dpid for dpid, msgs in messages.items() if any(isinstance(m, MODIFICATIONS) for m in msgs)
    )


@dataclass
class _Fence:
    started: float
    waiting: set[tuple[int, int]] = field(default_factory=set)


class BarrierFences:
    """Fences in flight: ``start`` one with the (switch, barrier xid) pairs it waits for;
    ``reply`` returns the fence's duration when its last barrier reply arrives. A fence
    whose switch disconnected, or that waited longer than ``expire_after`` seconds, is
    dropped without a duration (a partial reroute is not a reroute time)."""

    def __init__(self, expire_after: float = 30.0) -> None:
        self.expire_after = expire_after
        self._fences: dict[int, _Fence] = {}
        self._owner: dict[tuple[int, int], int] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self._fences)

    def start(self, now: float, started: float, barriers: Iterable[tuple[int, int]]) -> None:
        """A fence for an event that arrived at ``started``, waiting for ``barriers``."""
        self._expire(now)
        waiting = set(barriers)
        if not waiting:
            return
        self._next += 1
        self._fences[self._next] = _Fence(started, waiting)
        for key in waiting:
            self._owner[key] = self._next

    def reply(self, now: float, dpid: int, xid: int) -> float | None:
        """A barrier reply: the fence's duration if it was the fence's last one."""
        token = self._owner.pop((dpid, xid), None)
        if token is None or token not in self._fences:
            return None
        fence = self._fences[token]
        fence.waiting.discard((dpid, xid))
        if fence.waiting:
            return None
        del self._fences[token]
        return now - fence.started

    def switch_gone(self, dpid: int) -> None:
        """A switch disconnected: fences waiting for it will never complete."""
        for token, fence in list(self._fences.items()):
            if any(d == dpid for d, _ in fence.waiting):
                self._drop(token)

    def _expire(self, now: float) -> None:
        for token, fence in list(self._fences.items()):
            if now - fence.started > self.expire_after:
                self._drop(token)

    def _drop(self, token: int) -> None:
        fence = self._fences.pop(token)
        for key in fence.waiting:
            self._owner.pop(key, None)
