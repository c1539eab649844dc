"""Tenants on the fake fabric: three tenants on fat_tree(4). Every intra-tenant pair is
delivered, every cross-tenant trace delivers nothing, attack frames stop at the ingress,
a reload changes only what it must, and a bad reload changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.model import ArpFrame, CookieKind, FlowMod, GroupMod, MeterMod, PacketOut
from controller.policy import parse_policy
from controller.policy.manager import PolicyManager
from tests.sim import LoomSim
from topologies import fat_tree
from topologies.graph import host_list

TENANTS = {"red": range(1, 7), "blue": range(7, 12), "green": range(12, 16)}  # h16: no tenant


def policy_text(graph, tenants=TENANTS, extra: str = "") -> str:  # type: ignore[no-untyped-def]
    lines = ["version: 1", "tenants:"]
    for name, members in tenants.items():
        lines += [f"  - name: {name}", "    hosts:"]
        for i in members:
            d = graph.nodes[f"h{i}"]
            lines.append(f'      - {{mac: "{d["mac"]}", ip: {d["ip"]}}}')
        if name == "blue":
            lines.append("    bandwidth_mbps: 20")
    return "\n".join(lines) + "\n" + extra


def tenant_of(host: str) -> str | None:
    i = int(host[1:])
    return next((t for t, members in TENANTS.items() if i in members), None)


@pytest.fixture
def sim() -> LoomSim:
    s = LoomSim(fat_tree(4), FabricConfig(te=TeConfig(enabled=False)))
    s.apply(s.core.apply_policy(0.0, parse_policy(policy_text(s.graph))))
    return s.start()


def test_intra_tenant_delivered_cross_tenant_and_unassigned_get_nothing(sim: LoomSim) -> None:
    assert len(sim.view.hosts) == 15  # h16, in no tenant, is denied: never learned
    hosts = host_list(sim.graph)
    for src in hosts:
        for dst in hosts:
            if src == dst:
                continue
            trace = sim.fake.trace(src, sim.fake.packet(src, dst))
            same = tenant_of(src) is not None and tenant_of(src) == tenant_of(dst)
            if same:
                assert trace.ok_unicast(dst), trace.render()
            else:
                assert not trace.delivered_hosts, f"{src}->{dst} crossed tenants:\n{trace.render()}"


ATTACKS = {
    # h6 (red) attacks h7 (blue); each frame is what the attacker can put on its own wire
    "spoofed source MAC (blue's)": {"eth_src": "02:00:00:00:00:08"},
    "spoofed source IP (blue's)": {"ipv4_src": "10.1.1.2"},
    "spoofed MAC and IP": {"eth_src": "02:00:00:00:00:08", "ipv4_src": "10.1.1.2"},
    "VLAN-tagged frame": {"vlan_vid": 0x1000 | 7},
    "broadcast destination": {"eth_dst": "ff:ff:ff:ff:ff:ff"},
    "multicast destination": {"eth_dst": "01:00:5e:00:00:01", "ipv4_dst": "224.0.0.1"},
    "unknown destination MAC": {"eth_dst": "02:00:00:00:99:99"},
    "UDP to blue": {
        "ip_proto": 17,
        "udp_src": 1,
        "udp_dst": 4791,
        "tcp_src": None,
        "tcp_dst": None,
    },
    "non-IP ethertype": {
        "eth_type": 0x88B5,
        "ip_proto": None,
        "ipv4_src": None,
        "ipv4_dst": None,
        "tcp_src": None,
        "tcp_dst": None,
        "ip_dscp": None,
        "ip_ecn": None,
        "ip_ttl": None,
    },
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_frames_stop_at_the_ingress(sim: LoomSim, name: str) -> None:
    pkt = sim.fake.packet("h6", "h7", **ATTACKS[name])  # type: ignore[arg-type]
    trace = sim.fake.trace("h6", pkt)
    assert not trace.delivered_hosts, trace.render()
    for branch in trace.branches:  # nothing leaves the attacker's edge switch
        assert len(branch.hops) == 1, trace.render()


def test_arp_between_tenants_is_never_answered_and_lying_arp_is_refused(sim: LoomSim) -> None:
    a, b = sim.graph.nodes["h6"], sim.graph.nodes["h7"]
    before = sim.fake.packet_outs(sim.graph.nodes["e1_0"]["dpid"])  # h6's edge switch
    sim.host_sends(
        "h6",
        ArpFrame(1, a["mac"], "ff:ff:ff:ff:ff:ff", a["mac"], a["ip"], "00:00:00:00:00:00", b["ip"]),
    )
    assert sim.fake.packet_outs(sim.graph.nodes["e1_0"]["dpid"]) == before  # no reply, no probe
    rejected = sim.view.events["arp.rejected"]
    # h6 claims blue's address: refused, and blue's host keeps its address
    sim.host_sends(
        "h6",
        ArpFrame(2, a["mac"], "ff:ff:ff:ff:ff:ff", a["mac"], b["ip"], "00:00:00:00:00:00", b["ip"]),
    )
    sim.host_sends(
        "h6",
        ArpFrame(1, b["mac"], "ff:ff:ff:ff:ff:ff", b["mac"], b["ip"], "00:00:00:00:00:00", a["ip"]),
    )
    assert sim.view.events["arp.rejected"] == rejected + 2
    learned = sim.view.host_by_ip(b["ip"])
    assert learned is not None and learned.mac == b["mac"]


def test_capped_tenant_gets_a_meter_on_its_edge_switches(sim: LoomSim) -> None:
    blue = sim.core.inputs.tenants.id_of("blue")
    e1_1 = sim.graph.nodes["e1_1"]["dpid"]  # h7, h8 (blue)
    meters = sim.fake.meters(e1_1)
    assert blue in meters
    admit = [e for e in sim.fake.flows(e1_1, 1) if e.cookie >> 40 & 0xFF == CookieKind.TENANT]
    assert len(admit) == 2
    trace = sim.fake.trace("h7", sim.fake.packet("h7", "h9"))
    assert trace.ok_unicast("h9") and blue in trace.branches[0].hops[0].meter_ids


def test_reload_changes_only_the_changed_tenant(sim: LoomSim) -> None:
    moved = dict(TENANTS, green=range(12, 17))  # h16 joins green
    text = policy_text(sim.graph, moved)
    out = sim.core.apply_policy(sim.now, parse_policy(text))
    touched = {
        (d, m.rule.cookie >> 40 & 0xFF, m.rule.cookie & 0xFFFF)
        for d, ms in out.items()
        for m in ms
        if isinstance(m, FlowMod)
    }
    red, blue = sim.core.inputs.tenants.id_of("red"), sim.core.inputs.tenants.id_of("blue")
    assert not any(kind == CookieKind.TENANT and ident in (red, blue) for _, kind, ident in touched)
    assert not any(isinstance(m, GroupMod | MeterMod) for ms in out.values() for m in ms)
    sim.apply(out)
    sim.announce_hosts()  # h16 is admitted now and speaks
    assert sim.fake.trace("h16", sim.fake.packet("h16", "h12")).ok_unicast("h12")
    again = sim.core.apply_policy(sim.now, parse_policy(text))
    assert again == {}  # the same policy twice: nothing to send


def test_bad_reload_keeps_the_old_policy_in_force(sim: LoomSim, tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(policy_text(sim.graph))
    manager = PolicyManager(sim.core, str(path))
    assert manager.reload(sim.now) == {}  # the same policy: warm, nothing sent
    path.write_text(policy_text(sim.graph).replace("ip: 10.0.0.2", "ip: 10.0.0.999", 1))
    assert manager.reload(sim.now) == {}
    assert not manager.status.ok and "10.0.0.999" in manager.status.errors[0]
    assert sim.fake.trace("h1", sim.fake.packet("h1", "h2")).ok_unicast("h2")
    assert manager.describe()["reloads_failed"] == 1


def test_a_host_moved_to_another_tenant_is_announced_to_its_new_peers(sim: LoomSim) -> None:
    """h6 leaves red for blue: its Loom address changes (it carries the tenant), and every
    blue host is told the new one at once, none of the red hosts."""
    h6 = sim.core.topo.host_by_ip(sim.graph.nodes["h6"]["ip"])
    assert h6 is not None
    old = sim.core.address_of(h6)
    moved = dict(TENANTS, red=range(1, 6), blue=range(6, 12))
    out = sim.core.apply_policy(sim.now, parse_policy(policy_text(sim.graph, moved)))
    new_h6 = sim.core.topo.hosts[h6.mac]
    new = sim.core.address_of(new_h6)
    assert new != old
    told = {
        m.frame.eth_dst
        for ms in out.values()
        for m in ms
        if isinstance(m, PacketOut) and isinstance(m.frame, ArpFrame)
        and m.frame.spa == h6.ip and m.frame.sha == new and m.frame.op == 2
        and m.frame.tpa == h6.ip and m.frame.tha == new  # gratuitous, as Linux tells it:
        # so it is taken within the 1 s locktime of the peer's entry too
    }  # fmt: skip
    blue = {sim.graph.nodes[f"h{i}"]["mac"] for i in range(7, 12)}
    assert told == blue
    sim.apply(out)
    sim.announce_hosts()
    assert sim.fake.trace("h7", sim.fake.packet("h7", "h6")).ok_unicast("h6")
