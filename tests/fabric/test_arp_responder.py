"""The switches answer a host's ARP for a peer it already knows, without the controller.

Linux re-validates a neighbour entry with unicast requests to the address it holds. On
the fake fabric, programmed by the real core and encoder, such a request is traced hop by
hop: it must come back to the requester as the reply Loom itself would give (the peer's
Loom address), reach neither the controller nor the peer, and stay within the tenant;
anything that does not fit (a forged sender, another tenant's address, an address that is
not the target's) gets no answer from the switches.
"""

from __future__ import annotations

import pytest

from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.model import ArpFrame, CookieKind, FlowMod, cookie_kind
from controller.policy import parse_policy
from tests.fabric.test_tenants import policy_text
from tests.sim import LoomSim, arp_fields
from topologies import dragonfly, fat_tree
from topologies.graph import host_list

BROADCAST = "ff:ff:ff:ff:ff:ff"


def reprobe(sim: LoomSim, src: str, dst: str, *, spa: str | None = None) -> ArpFrame:
    """The unicast request Linux sends to re-validate its entry for ``dst``."""
    a, b = sim.graph.nodes[src], sim.graph.nodes[dst]
    address = sim.view.address_of(b["mac"])
    assert address is not None
    return ArpFrame(1, a["mac"], address, a["mac"], spa or a["ip"], "00:00:00:00:00:00", b["ip"])


def answered(sim: LoomSim, src: str, dst: str, frame: ArpFrame) -> dict[str, object] | None:
    """Trace ``frame`` from ``src`` without the controller: the reply ``src`` gets on
    every path the fabric may take (``None``: not answered on some path)."""
    before = sim.packet_ins
    trace = sim.fake.trace(src, arp_fields(frame))
    assert not trace.by_kind("controller"), trace.render()
    assert sim.packet_ins == before
    assert dst not in trace.delivered_hosts, trace.render()
    replies = [shown(e.packet) for e in trace.ends if e.kind == "delivered" and e.host == src]
    if len(replies) < len(trace.ends):
        return None
    assert all(r == replies[0] for r in replies), trace.render()
    return replies[0]


def expected_reply(sim: LoomSim, src: str, dst: str) -> dict[str, object]:
    a, b = sim.graph.nodes[src], sim.graph.nodes[dst]
    address = sim.view.address_of(b["mac"])
    return {
        "eth_src": address,
        "eth_dst": a["mac"],
        "arp_op": 2,
        "arp_sha": address,
        "arp_spa": b["ip"],
        "arp_tha": a["mac"],
        "arp_tpa": a["ip"],
    }


def shown(packet: dict[str, object]) -> dict[str, object]:
    keys = ("eth_src", "eth_dst", "arp_op", "arp_sha", "arp_spa", "arp_tha", "arp_tpa")
    return {k: packet.get(k) for k in keys}


@pytest.mark.parametrize(
    "graph",
    [lambda: fat_tree(4), lambda: dragonfly(a=4, p=2, h=2, g=5)],
    ids=["fat_tree(4)", "dragonfly(4,2,2,5)"],
)
def test_every_host_gets_every_known_peer_answered_by_the_switches(graph) -> None:  # type: ignore[no-untyped-def]
    sim = LoomSim(graph()).start()
    hosts = host_list(sim.graph)
    for src in hosts:
        for dst in hosts:
            if src == dst:
                continue
            reply = answered(sim, src, dst, reprobe(sim, src, dst))
            assert reply is not None, f"{src} -> {dst}: no answer"
            assert reply == expected_reply(sim, src, dst), f"{src} -> {dst}"


def test_the_answer_holds_with_a_link_down_and_after_a_restart() -> None:
    sim = LoomSim(fat_tree(4)).start()
    sim.fail_link("a0_0", "c1")
    sim.advance(0.5)
    for dst in ("h2", "h3", "h16"):
        assert answered(sim, "h1", dst, reprobe(sim, "h1", dst)) is not None, dst
    sent = sim.restart_controller()
    rewritten = [
        m
        for batch in sent
        for msgs in batch.values()
        for m in msgs
        if isinstance(m, FlowMod) and cookie_kind(m.rule.cookie) is CookieKind.ARP
    ]
    assert rewritten == []  # read back from the switches, not sent again
    reply = answered(sim, "h1", "h16", reprobe(sim, "h1", "h16"))
    assert reply == expected_reply(sim, "h1", "h16")


def test_what_does_not_fit_gets_no_answer_from_the_switches() -> None:
    sim = LoomSim(fat_tree(4)).start()
    # a forged sender address goes to the controller, which refuses it
    forged = reprobe(sim, "h1", "h16", spa=sim.graph.nodes["h5"]["ip"])
    trace = sim.fake.trace("h1", arp_fields(forged))
    assert {e.kind for e in trace.ends} == {"controller"}, trace.render()
    # an address asked of a host that does not hold it reaches that host, unanswered
    wrong = reprobe(sim, "h1", "h16")
    wrong = ArpFrame(1, wrong.eth_src, wrong.eth_dst, wrong.sha, wrong.spa, wrong.tha, "10.9.9.9")
    trace = sim.fake.trace("h1", arp_fields(wrong))
    assert trace.delivered_hosts == {"h16"}, trace.render()
    # a broadcast request still asks the controller (the first ARP for a peer)
    first = reprobe(sim, "h1", "h16")
    first = ArpFrame(1, first.eth_src, BROADCAST, first.sha, first.spa, first.tha, first.tpa)
    trace = sim.fake.trace("h1", arp_fields(first))
    assert {e.kind for e in trace.ends} == {"controller"}, trace.render()


def test_tenants_get_answers_only_within_their_own_tenant() -> None:
    sim = LoomSim(fat_tree(4), FabricConfig(te=TeConfig(enabled=False)))
    sim.apply(sim.core.apply_policy(0.0, parse_policy(policy_text(sim.graph))))
    sim.start()
    # red: h1-h6, blue: h7-h11
    assert answered(sim, "h1", "h6", reprobe(sim, "h1", "h6")) is not None
    assert answered(sim, "h7", "h11", reprobe(sim, "h7", "h11")) is not None
    across = reprobe(sim, "h1", "h7")
    trace = sim.fake.trace("h1", arp_fields(across))
    assert not trace.delivered_hosts, trace.render()
    handled = sim.send("h1", arp_fields(across))  # the controller does not answer either
    assert not handled.delivered_hosts
