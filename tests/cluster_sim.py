"""Several Loom cores sharing one fake fabric, as the instances of a cluster do.

Every switch is connected to every member: whatever a switch sends to its controllers
(packet-ins, replies to each member's own requests) reaches each member's core, and each
member's output passes its own ``Roles`` gate, then the switch's role check
(``tests.fakefabric.roles``): a write from a slave is refused and counted there.
Mastership is handed out here as the store would (a growing generation per claim), so
these tests are about roles and take-overs, not about etcd.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from controller.cluster.roles import Roles
from controller.cluster.shards import assign
from controller.conductor import FabricConfig
from controller.model import LldpFrame, Messages, PacketIn
from tests.fakefabric import FakeFabric
from tests.fakefabric.model import Trace
from tests.fakefabric.roles import MASTER, SLAVE, SwitchRoles
from tests.sim import LoomSim
from topologies.graph import switches


class MemberSim(LoomSim):
    def __init__(self, cluster: ClusterSim, name: str, config: FabricConfig | None) -> None:
        super().__init__(cluster.graph, config)
        self.cluster, self.name = cluster, name
        self.fake = cluster.fake
        self.roles = Roles(clustered=True)
        self.sent_log: list[Messages] = []
        self.alive = True

    def apply(self, messages: Messages) -> None:
        if not self.alive:
            return
        allowed = self.roles.gate(messages, self.now)
        self.sent_log.append(allowed)
        super().apply(allowed)

    def _send_rule(self, dpid: int, ofmsg: Any) -> None:
        if self.cluster.switch_roles[dpid].may_write(self.name):
            super()._send_rule(dpid, ofmsg)

    def _run_packet_out(self, dpid: int, ofmsg: Any) -> None:
        if self.cluster.switch_roles[dpid].may_write(self.name):
            super()._run_packet_out(dpid, ofmsg)

    def _handle_trace(self, trace: Trace, original: Any) -> None:
        """What reaches the controller goes to every live member (asynchronous
        messages as a slave: see ``encode.async_config``)."""
        for branch in trace.branches:
            end = branch.end
            if end.kind == "controller" and branch.hops:
                hop = branch.hops[-1]
                frame = original if isinstance(original, LldpFrame) else self._frame_of(end.packet)
                cookie = hop.cookies[-1] if hop.cookies else 0
                pkt_in = PacketIn(hop.dpid, hop.in_port, frame, b"", end.table_id or 0, cookie)
                for member in self.cluster.live():
                    member.packet_ins += 1
                    member.apply(member.core.packet_in(member.now, pkt_in))
            elif end.kind == "delivered" and end.host is not None:
                self._host_receives(end.host, end.packet)


class ClusterSim:
    def __init__(
        self, graph: nx.MultiGraph, names: list[str], config: FabricConfig | None = None
    ) -> None:
        self.graph = graph
        self.fake = FakeFabric(graph)
        self.dpids = [graph.nodes[s]["dpid"] for s in switches(graph)]
        self.switch_roles = {d: SwitchRoles() for d in self.dpids}
        self.members = {n: MemberSim(self, n, config) for n in names}
        first = self.members[names[0]]
        self.fake.addresses = lambda mac: first.view.address_of(mac)
        self.generation = 0
        self.masters: dict[int, str] = {}

    def live(self) -> list[MemberSim]:
        return [m for _, m in sorted(self.members.items()) if m.alive]

    def start(self) -> ClusterSim:
        for m in self.live():  # each connects as a slave first, then mastership is given out
            m.connect_all()
            for dpid in self.dpids:
                self.switch_roles[dpid].request(m.name, SLAVE, self.generation)
        self.elect()
        self.advance(1.5)
        first = self.live()[0]
        first.announce_hosts()
        self.advance(0.5)
        return self

    def advance(self, seconds: float, step: float = 0.1) -> None:
        for _ in range(round(seconds / step)):
            for m in self.live():
                m.now = round(m.now + step, 6)
                m.apply(m.core.tick(m.now))

    def elect(self) -> dict[int, str]:
        """Give each switch a master as the store would: balanced, minimal moves, a
        new (larger) generation for every claim. Returns the switches that moved."""
        eligible = {d: {m.name for m in self.live()} for d in self.dpids}
        target = assign(eligible, [m.name for m in self.live()], self.masters)
        moved = {d: n for d, n in target.items() if self.masters.get(d) != n}
        for dpid, name in sorted(moved.items()):
            self.generation += 1
            self.claim(self.members[name], dpid, self.generation)
        self.masters = target
        return moved

    def claim(self, member: MemberSim, dpid: int, generation: int) -> None:
        """The claim, the role request, the switch's reply, the take-over."""
        member.roles.claim(dpid, generation)
        role = self.switch_roles[dpid].request(member.name, MASTER, generation)
        if member.roles.replied(dpid, role == MASTER, generation):
            member.apply(member.core.take_over(member.now, dpid))

    def kill(self, name: str) -> None:
        self.members[name].alive = False

    def fail_link(self, a: str, b: str) -> None:
        """The link goes down; both ends' PortStatus reaches every member."""
        for m in self.live():
            m.set_link(a, b, False)
