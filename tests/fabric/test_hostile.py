"""Hostile input on the fake fabric: a host that opens flows as fast as it can stops
being tracked for a while (its traffic still flows), while its neighbours are tracked;
garbage and forged discovery frames change nothing."""

from __future__ import annotations

from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.model import LldpFrame, PacketIn
from tests.sim import LoomSim
from topologies import fat_tree

CONFIG = FabricConfig(te=TeConfig(new_flows_per_port=50, quiet_seconds=2.0))


def test_a_flow_flood_from_one_port_is_quieted_and_neighbours_stay_tracked() -> None:
    sim = LoomSim(fat_tree(4), CONFIG).start()
    e00 = sim.graph.nodes["e0_0"]["dpid"]
    for sport in range(1000, 1300):  # 300 new flows within one tick: a scan
        sim.send("h1", sim.fake.packet("h1", "h9", tcp_src=sport))
    assert (e00, 1) in sim.view.quiet_ports and sim.view.events["te.ports_quieted"] == 1
    assert len(sim.view.flows) == 50  # tracking stopped at the limit
    for sport in range(2000, 2050):  # h1's new flows: no longer copied, still delivered
        trace = sim.send("h1", sim.fake.packet("h1", "h9", tcp_src=sport))
        assert trace.ok_unicast("h9"), trace.render()
    assert len(sim.view.flows) == 50
    sim.send("h2", sim.fake.packet("h2", "h10", tcp_src=3000))  # h2, same switch: tracked
    assert any(f.in_port == 2 for f in sim.view.flows.values())
    sim.advance(2.5)  # the quiet time ends: h1 is tracked again
    assert (e00, 1) not in sim.view.quiet_ports
    sim.send("h1", sim.fake.packet("h1", "h9", tcp_src=4000))
    assert any(f.key.l4_src == 4000 for f in sim.view.flows.values())


def test_garbage_and_forged_frames_change_nothing() -> None:
    sim = LoomSim(fat_tree(4), CONFIG).start()
    links, hosts = dict(sim.view.links), dict(sim.view.hosts)
    e00 = sim.graph.nodes["e0_0"]["dpid"]
    for data in (b"", b"\xff" * 13, b"\x01" * 60, bytes(range(256))):
        assert sim.core.packet_in(sim.now, PacketIn(e00, 1, None, data)) == {}
    assert sim.view.events["undecodable_in"] == 4
    assert sim.view.links == links and sim.view.hosts == hosts
    # an LLDP frame a host could forge decodes to nothing (see tests/adapter), and one
    # that arrives decoded on a host port claims a link to a switch port that has a host
    sim.core.packet_in(sim.now, PacketIn(e00, 1, LldpFrame(e00, 2)))
    assert len(sim.view.links) == len(links)
