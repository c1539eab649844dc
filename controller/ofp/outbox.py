"""One ordered queue of outgoing messages per switch.

Ryu's datapath queue holds 16 messages; a handler that sends more blocks in the middle
of its batch, and another greenlet (the tick loop, a packet-in, a REST call) may then
send its own batch in between. The core plans each batch against the state left by the
one before it, so interleaving breaks make-before-break: a flow can reach the switch
before the group it points at (OFPBAC_BAD_OUT_GROUP). Here every message gets its xid
and its place in line at once, without yielding, and one greenlet per switch hands them
to Ryu in that order.

Nothing may yield between planning a batch and queueing it (a later batch, planned on
the state this one left, could otherwise overtake it). So back-pressure comes first:
an event handler ``wait_room``s for its switch's queue before asking the core, which
keeps a packet-in flood from burying a rule that would stop it under thousands queued
before it.
"""

from __future__ import annotations

from typing import Any

from controller.ofp.compat import hub


class Outbox:
    def __init__(self, room: int = 32) -> None:
        self.room = room
        self._queues: dict[int, Any] = {}

    def wait_room(self, dpid: int) -> None:
        """Yield until fewer than ``room`` messages wait for ``dpid``."""
        queue = self._queues.get(dpid)
        while queue is not None and queue.qsize() >= self.room:
            hub.sleep(0.001)

    def open(self, dpid: int, dp: Any) -> None:
        """A switch connected: start its queue (ending a previous connection's)."""
        self.close(dpid)
        queue = hub.Queue()  # unbounded: put never yields
        self._queues[dpid] = queue
        hub.spawn(self._drain, dp, queue)

    def close(self, dpid: int) -> None:
        queue = self._queues.pop(dpid, None)
        if queue is not None:
            queue.put(None)

    def put(self, dpid: int, dp: Any, msg: Any) -> int:
        """Queue ``msg`` for ``dp``; returns the xid it was given."""
        if msg.xid is None:
            dp.set_xid(msg)
        queue = self._queues.get(dpid)
        if queue is None:  # a datapath the app never opened: nothing to keep in order
            dp.send_msg(msg)
        else:
            queue.put(msg)
        return int(msg.xid)

    @staticmethod
    def _drain(dp: Any, queue: Any) -> None:
        while (msg := queue.get()) is not None:
            dp.send_msg(msg)
