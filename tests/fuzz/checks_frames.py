"""The frame path's invariants, for one frame: ``frames.decode`` never raises and only a
frame this controller signed decodes as LLDP; ``Conductor.packet_in`` answers any decoded
frame at any port within the bound; and forwarding does not change: the learned links
and the learned hosts' places stay as they were, and unicast between hosts still
arrives after a batch (``check_forwarding``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.model import (
    OFPP_ANY,
    OFPP_CONTROLLER,
    OFPP_LOCAL,
    ArpFrame,
    EthFrame,
    LldpFrame,
    PacketIn,
    RawFrame,
)
from controller.ofp import frames
from tests.fuzz.common import assert_bounded, record, short, stopwatch
from tests.fuzz.world import clone, host_macs, host_places, link_map, new_sim, store_snapshot
from topologies.graph import link_ends, switches

KIND = "frames"
WHERE = ("host", "fabric", "same-port", "same-switch", "odd-port", "odd-switch")
ODD_PORTS = (0, 5, 99, 0xFFFFFF00, OFPP_LOCAL, OFPP_CONTROLLER, OFPP_ANY, 2**31)
ODD_DPIDS = (0, 999, 2**64 - 1, 2**63)
PAIRS = (("h1", "h16"), ("h16", "h1"), ("h2", "h3"), ("h5", "h12"), ("h9", "h10"))
Edit = tuple[str, int, bytes]  # (op, position, bytes): op in flip, insert, delete, cut, put


def apply_edits(data: bytes, edits: tuple[Edit, ...]) -> bytes:
    out = bytearray(data)
    for op, pos, arg in edits:
        at = pos % (len(out) + 1)
        if op == "flip" and out:
            out[at % len(out)] ^= (arg or b"\x01")[0] or 1
        elif op == "insert":
            out[at:at] = arg
        elif op == "delete":
            del out[at : at + max(1, len(arg))]
        elif op == "cut":
            del out[at:]
        elif op == "put":
            out[at : at + len(arg)] = arg
    return bytes(out)


@dataclass(frozen=True)
class FrameCase:
    """``data`` (or, when ``genuine``, a signed LLDP frame from the ``origin``-th switch
    port) with ``edits`` applied, injected where ``at`` and ``pick`` say."""

    shape: str
    data: bytes
    at: str = "host"
    pick: int = 0
    genuine: bool = False
    origin: int = 0
    edits: tuple[Edit, ...] = ()
    cookie: int = 0
    table_id: int = 0

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # Hypothesis's printer
        printer.text(repr(self))

    def __repr__(self) -> str:
        return (
            f"FrameCase(shape={self.shape!r}, data=bytes.fromhex({short(self.data.hex(), 400)}),"
            f" at={self.at!r}, pick={self.pick}, genuine={self.genuine}, origin={self.origin},"
            f" edits={short(self.edits, 300)}, cookie={self.cookie:#x}, table_id={self.table_id})"
        )


class FrameWorld:
    """A learned fat-tree (no policy, TE off as in ``LoomSim``); copied afresh after any
    case that changed the core's rules (a new host learned, say) or broke an invariant."""

    def __init__(self) -> None:
        self._pristine = new_sim()
        p = self._pristine
        self.links = link_map(p.core)
        self.macs = host_macs(p)
        self.places = host_places(p.core, self.macs)
        self.store = store_snapshot(p.core)
        self.host_ports: list[tuple[int, int]] = []
        self.all_ports: list[tuple[int, int]] = []
        for sw in switches(p.graph):
            dpid = int(p.graph.nodes[sw]["dpid"])
            for end in link_ends(p.graph, sw):
                self.all_ports.append((dpid, end.port))
                if end.scope == "host":
                    self.host_ports.append((dpid, end.port))
        self.fabric_ports = sorted(self.links)
        self.dpids = sorted({d for d, _ in self.all_ports})
        self.sim = clone(p)
        self.touched: set[int] = set()  # switches that were sent a rule since the last reset
        send_rule = self.sim._send_rule

        def recording(dpid: int, ofmsg: Any) -> None:
            self.touched.add(dpid)
            send_rule(dpid, ofmsg)

        self.sim._send_rule = recording  # type: ignore[method-assign,unused-ignore]
        self.dirty = False

    def reset_if_dirty(self) -> None:
        """Back to the pristine fabric: a fresh core, and fresh tables on the switches
        that were sent rules (copying all twenty takes ~0.5 s, the core ~0.08 s)."""
        if not self.dirty:
            return
        p, sim = self._pristine, self.sim
        sim.core, sim.now = clone(p.core), p.now
        for dpid in self.touched:
            sim.fake.switches[dpid] = clone(p.fake.switches[dpid])
        self.touched.clear()
        self.dirty = False

    def settle(self) -> None:
        """After a case whose invariants held: dirty if it changed any rule."""
        self.dirty = bool(self.touched) or store_snapshot(self.sim.core) != self.store

    def resolve(self, case: FrameCase) -> tuple[int, int, bytes]:
        """(dpid, in_port, bytes) of a case in this world."""
        origin = self.all_ports[case.origin % len(self.all_ports)]
        base = frames.lldp_bytes(LldpFrame(*origin)) if case.genuine else case.data
        data = apply_edits(base, case.edits)
        if case.at == "same-port":
            return origin[0], origin[1], data
        if case.at == "same-switch":
            others = [p for d, p in self.all_ports if d == origin[0] and p != origin[1]]
            return origin[0], others[case.pick % len(others)], data
        if case.at == "fabric":
            return (*self.fabric_ports[case.pick % len(self.fabric_ports)], data)
        if case.at == "odd-port":
            dpid = self.dpids[case.pick % len(self.dpids)]
            return dpid, ODD_PORTS[(case.pick // len(self.dpids)) % len(ODD_PORTS)], data
        if case.at == "odd-switch":
            return ODD_DPIDS[case.pick % len(ODD_DPIDS)], 1, data
        return (*self.host_ports[case.pick % len(self.host_ports)], data)


def check_frame(world: FrameWorld, case: FrameCase) -> float:
    dpid, port, data = world.resolve(case)
    sim = world.sim
    world.dirty = True  # until the invariants below hold
    frame: Any = None
    with stopwatch() as t:
        frame = frames.decode(data)
        messages = sim.core.packet_in(
            sim.now, PacketIn(dpid, port, frame, data, case.table_id, case.cookie)
        )
    record(KIND, t[0])
    world.dirty = False
    world.settle()  # dirty if it sent rules; also below if links or hosts changed
    assert_bounded(KIND, t[0], f"decode + packet_in of {len(data)} bytes")
    assert frame is None or isinstance(frame, LldpFrame | ArpFrame | EthFrame | RawFrame)
    if isinstance(frame, LldpFrame):
        assert case.genuine, f"an unsigned frame decoded as LLDP {frame}"
    world.dirty = True  # the fake may change from here
    sim.apply(messages)  # re-injected frames the fake cannot parse are counted, not traced
    world.settle()
    _assert_unchanged(world, f"after {short(frame, 200)} at ({dpid}, {port})")
    return t[0]


def _assert_unchanged(world: FrameWorld, context: str) -> None:
    """The learned links and the original hosts' places are what they were."""
    core = world.sim.core
    links = link_map(core)
    if links != world.links:
        moved = {k: (world.links.get(k), links.get(k)) for k in set(links) | set(world.links)}
        changed = {k: v for k, v in moved.items() if v[0] != v[1]}
        raise AssertionError(f"links changed {context}: {short(changed, 300)}")
    places = host_places(core, world.macs)
    if places != world.places:
        was_is = {m: (world.places.get(m), places.get(m)) for m in world.macs}
        diff = {m: v for m, v in was_is.items() if v[0] != v[1]}
        raise AssertionError(f"hosts moved or forgotten {context}: {short(diff, 300)}")


def check_forwarding(world: FrameWorld) -> None:
    """After a batch: unicast between host pairs across the fabric is still delivered."""
    sim = world.sim
    world.dirty = True
    for src, dst in PAIRS:
        trace = sim.send(src, sim.fake.packet(src, dst))
        assert trace.ok_unicast(dst), f"{src} -> {dst} no longer delivered:\n{trace.render()}"
    world.settle()
