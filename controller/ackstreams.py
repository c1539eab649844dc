"""The ACK streams of TCP elephants: where they run and how they are marked.

A TCP flow's ACKs come back as a flow of their own (its reverse), opened by the
receiver. Two things keep that stream from stretching the elephant's round trip:

- it runs the way back of its data's path (``way_back``): each fabric link then carries,
  besides its data, the ACKs of the one flow whose data crosses it the other way, as a
  host's link does, so no FIFO queue builds up in the fabric for other flows' ACKs to
  wait behind; it follows its data as that moves (``follow``);
- while its data is an elephant (and it is none), it is marked into the control class at
  its ingress (``ack_priority``, ``mark``): where it meets other elephants' data it is
  served first.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.flows import IP_PROTO_TCP, FlowKey, FlowTable, TrackedFlow
from controller.model import Action
from controller.placement import Path, is_minimal, reverse_path
from controller.routing import Routes
from controller.topology import Topology


class AckStreams:
    def __init__(
        self, flows: FlowTable, paths: dict[FlowKey, Path], marks: tuple[Action, ...]
    ) -> None:
        self.flows = flows
        self.paths = paths  # shared with the placers: every pinned flow's path
        self.marks = marks
        self.streams: set[FlowKey] = set()  # tracked because their reverse was
        self.marked: set[FlowKey] = set()  # flows given ``marks``

    def is_stream(self, key: FlowKey) -> bool:
        """Whether ``key`` is the ACK stream of a tracked TCP flow (its reverse)."""
        return key.ip_proto == IP_PROTO_TCP and key.reverse() in self.flows.flows

    def way_back(self, key: FlowKey, routes: Routes, src: int, dst: int) -> Path | None:
        """For a TCP flow's ACK stream (``key``): the reverse of its data's path, if that
        is one of its own equal-cost paths."""
        data = self.paths.get(key.reverse())
        back = reverse_path(routes, data) if data else None
        return back if back is not None and is_minimal(routes, back, src, dst) else None

    def follow(
        self, elephants: Iterable[TrackedFlow], topo: Topology, routes: Routes
    ) -> list[TrackedFlow]:
        """Keep each TCP elephant's ACK stream (while no elephant itself) on the way back
        of the elephant's path, as it moves: the streams re-pinned, to re-plan."""
        moved: list[TrackedFlow] = []
        for e in elephants:
            back = self.flows.flows.get(e.key.reverse())
            if e.key.ip_proto != IP_PROTO_TCP or back is None or back.elephant:
                continue
            dst = topo.hosts.get(back.dst_mac)
            if dst is None:
                continue
            way = self.way_back(back.key, routes, back.ingress, dst.dpid)
            if way is not None and way != self.paths.get(back.key):
                self.paths[back.key] = way
                moved.append(back)
        return moved

    def mark(self, elephants: Iterable[TrackedFlow]) -> list[FlowKey]:
        """The flows that became, or stopped being, an elephant's ACK stream (to
        re-plan, marked or unmarked)."""
        if not self.marks:
            return []
        tracked = self.flows.flows
        wanted = {
            back
            for e in elephants
            if e.key.ip_proto == IP_PROTO_TCP
            and (back := e.key.reverse()) in tracked
            and not tracked[back].elephant
        }
        changed = sorted(wanted ^ self.marked)
        self.marked = wanted
        return changed

    def drop(self, key: FlowKey) -> None:
        self.streams.discard(key)
        self.marked.discard(key)
