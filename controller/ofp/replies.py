"""Which statistics replies answer a request of ours.

A switch (or whatever speaks for it) may send a multipart reply nobody asked for, or
repeat one; its counters would then read as traffic and move elephants. The shim notes
the xid of every polling request it sends and hands the core only the replies that
answer one, each once (a reply in several parts keeps its xid until the last part).
The rest are counted and dropped. Memory is bounded: a switch that never answers keeps
only its ``keep`` most recent requests.
"""

from __future__ import annotations

from collections import OrderedDict

from controller.model import StatsKind


class Solicited:
    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        self._asked: dict[int, OrderedDict[int, StatsKind]] = {}

    def asked(self, dpid: int, xid: int, kind: StatsKind) -> None:
        pending = self._asked.setdefault(dpid, OrderedDict())
        pending[xid] = kind
        if len(pending) > self.keep:
            pending.popitem(last=False)

    def answers(self, dpid: int, xid: int, kind: StatsKind, more: bool) -> bool:
        """True when this reply answers a request of ours of ``kind``; ``more`` says
        further parts of the same reply follow."""
        pending = self._asked.get(dpid)
        if pending is None or pending.get(xid) is not kind:
            return False
        if not more:
            del pending[xid]
        return True

    def switch_gone(self, dpid: int) -> None:
        self._asked.pop(dpid, None)
