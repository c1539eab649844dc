"""The topology's per-switch indexes kept in place (edge ports, silent ports, the oldest
link sighting) agree with what a walk of the whole fabric finds, whatever the order of
events: a first ARP at size must not find every switch's ports afresh, and expiry must
not walk every link each tick, yet neither may miss a port or a dead link."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.model import MAX_PHYSICAL_PORT, PortDesc
from controller.topology import Topology

SWITCHES = 4
PORTS = 5


def walked_edge(topo: Topology, dpid: int) -> list[int]:
    switch = topo.switches.get(dpid)
    if switch is None:
        return []
    return [
        p
        for p in switch.live_ports()
        if p <= MAX_PHYSICAL_PORT and (dpid, p) not in topo.fabric_ports
    ]


def walked_silent(topo: Topology) -> dict[int, set[int]]:
    found = {
        d: {p for p in walked_edge(topo, d) if topo.host_on((d, p)) is None} for d in topo.switches
    }
    return {d: ports for d, ports in found.items() if ports}


event = st.one_of(
    st.tuples(st.just("switch"), st.integers(1, SWITCHES)),
    st.tuples(st.just("gone"), st.integers(1, SWITCHES)),
    st.tuples(st.just("port"), st.integers(1, SWITCHES), st.integers(1, PORTS), st.booleans()),
    st.tuples(
        st.just("link"),
        st.integers(1, SWITCHES),
        st.integers(1, PORTS),
        st.integers(1, SWITCHES),
        st.integers(1, PORTS),
    ),
    st.tuples(st.just("host"), st.integers(1, SWITCHES), st.integers(1, PORTS), st.integers(0, 3)),
)


def apply(topo: Topology, step: tuple[object, ...], now: float) -> None:
    kind, *args = step
    ports = [PortDesc(p) for p in range(1, PORTS + 1)]
    if kind == "switch":
        topo.add_switch(int(args[0]), ports)  # type: ignore[call-overload]
    elif kind == "gone":
        topo.remove_switch(int(args[0]))  # type: ignore[call-overload]
    elif kind == "port":
        dpid, port, up = args
        topo.port_changed(int(dpid), PortDesc(int(port), up=bool(up)))  # type: ignore[call-overload]
    elif kind == "link":
        a, pa, b, pb = (int(x) for x in args)  # type: ignore[call-overload]
        topo.link_seen(now, (a, pa), (b, pb))
    else:
        dpid, port, n = (int(x) for x in args)  # type: ignore[call-overload]
        topo.learn_host(now, f"02:00:00:00:00:{n:02x}", f"10.0.0.{n + 1}", dpid, port)


@settings(max_examples=300, deadline=None)
@given(st.lists(event, max_size=40))
def test_edge_and_silent_ports_kept_in_place_equal_a_walk(steps: list[tuple[object, ...]]) -> None:
    topo = Topology()
    for i, step in enumerate(steps):
        apply(topo, step, float(i))
        for dpid in range(1, SWITCHES + 1):
            assert topo.edge_ports(dpid) == walked_edge(topo, dpid), (step, dpid)
        assert topo.silent_ports() == walked_silent(topo), step


def test_discovery_leaves_the_edge_index_warm() -> None:
    """After the switches connect, LLDP moves ports out of the edge index in place: the
    cache a first ARP reads is never dropped by a link."""
    topo = Topology()
    for dpid in (1, 2):
        topo.add_switch(dpid, [PortDesc(p) for p in range(1, 5)])
    assert topo.edge_ports(1) == [1, 2, 3, 4]
    cached = topo._edge[1]
    topo.link_seen(0.0, (1, 4), (2, 4))
    assert topo._edge[1] is cached and cached == [1, 2, 3]
    assert topo.silent_ports() == {1: {1, 2, 3}, 2: {1, 2, 3}}


def test_a_link_not_seen_expires_while_others_are_seen_again() -> None:
    topo = Topology()
    for dpid in (1, 2, 3):
        topo.add_switch(dpid, [PortDesc(p) for p in range(1, 3)])
    topo.link_seen(0.0, (1, 1), (2, 1))
    topo.link_seen(0.0, (2, 2), (3, 2))
    assert topo.expire_links(5.0, 10.0) == []
    topo.link_seen(8.0, (1, 1), (2, 1))  # one is seen again, the other is not
    assert topo.expire_links(9.0, 10.0) == []
    dead = topo.expire_links(10.5, 10.0)
    assert [link.src for link in dead] == [(2, 2)]
    assert topo.expire_links(17.0, 10.0) == []  # the survivor was seen at 8
    assert [link.src for link in topo.expire_links(18.5, 10.0)] == [(1, 1)]
    topo.link_seen(30.0, (2, 2), (3, 2))  # back: the bound moves down to it again
    assert [link.src for link in topo.expire_links(40.5, 10.0)] == [(2, 2)]
