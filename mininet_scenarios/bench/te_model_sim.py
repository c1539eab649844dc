"""Traffic for the real core over the scale wire: the flow-level side of ``te_model``.

:class:`TrafficWire` is the scale benchmark's fake wire
(:class:`~mininet_scenarios.bench.scale_wire.Wire`) whose counters move at the rates a
max-min fair model gives the flows: every switch port's transmit and receive bytes, and
the byte counter of every flow's accounting rule at its ingress, so what the core polls
is what the modelled traffic would show. Counters are integrals of piecewise-constant
rates (:class:`Meter`), folded only when a rate changes.

:class:`Simulation` runs one traffic matrix on it: each flow's first packets reach the
core as the catch rule's copies (packet-ins), simulated time advances in 0.1 s ticks,
and after every tick the flows whose path crosses a switch whose rules changed are
traced again (:class:`FreshTracer`) and the rates solved again
(:func:`~mininet_scenarios.bench.whatif_model.max_min`).

What an iperf3 test puts on the wire, as the patterns benchmark runs it: a control
connection (an ephemeral client port, a few hundred bytes at the start, then idle), the
data connection (client port ``cport``) and, from the receiver, the first packet of each
connection's other direction (its ACK stream). All four reach the core, in that order,
test after test. Only data connections take capacity in the model; an ACK stream's
counter moves at ``ACK_RATIO`` of its data (it keeps the core's accounting of it alive)
but its bytes are not put on the links.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import networkx as nx

from controller.conductor import Conductor
from controller.flows import FlowKey
from controller.model import (
    ETH_TYPE_IPV4,
    OFPP_CONTROLLER,
    CookieKind,
    EthFrame,
    FlowStats,
    Output,
    PacketIn,
    PortDesc,
    StatsKind,
    StatsRequest,
    cookie_kind,
)
from mininet_scenarios.bench.scale_sizes import flow_bytes
from mininet_scenarios.bench.scale_wire import BACKGROUND_SHARE, PortRef, Wire
from mininet_scenarios.bench.whatif_model import Flow, Solution, max_min
from mininet_scenarios.bench.whatif_trace import Flow5, Tracer

TICK = 0.1  # simulated seconds, as the app ticks
BYTES_PER_MBIT = 125_000.0
ACK_RATIO = 0.02  # an ACK stream's bytes per data byte (a 66-byte ACK per two segments)
CONTROL_BYTES = 400  # an iperf3 control connection: parameters at the start, then idle
IPERF_PORT = 5201
TRIM = 0.1  # iperf3's figure: the middle 80 % of the run


class Meter:
    """A byte counter growing at a piecewise-constant rate (bytes/s)."""

    __slots__ = ("base", "rate", "since")

    def __init__(self, base: float = 0.0) -> None:
        self.base, self.rate, self.since = base, 0.0, 0.0

    def value(self, now: float) -> float:
        return self.base + self.rate * (now - self.since)

    def set_rate(self, now: float, rate: float) -> None:
        if rate != self.rate:
            self.base, self.rate, self.since = self.value(now), rate, now


# -- the wire ------------------------------------------------------------------------------
class TrafficWire(Wire):
    """The scale wire with modelled traffic in its counters (see the module docstring).
    ``reported_mbps``: the speed every port reports (default: its link's rate; a veth
    reports 10,000 whatever shapes it)."""

    def __init__(
        self, graph: nx.MultiGraph, fabric: Conductor, reported_mbps: float | None = None
    ) -> None:
        super().__init__(graph, fabric)
        # bytes/s of each port's link: the background's base, whatever the port reports
        self.line_rate = {
            (dpid, no): desc.speed_kbps * 125.0
            for dpid, ports in self.ports.items()
            for no, desc in ports.items()
        }
        if reported_mbps is not None:
            speed = int(reported_mbps * 1000)
            for ports in self.ports.values():
                for no, desc in ports.items():
                    if desc.speed_kbps:
                        ports[no] = replace(desc, speed_kbps=speed)
        self.tx: dict[PortRef, Meter] = {}
        self.rx: dict[PortRef, Meter] = {}
        self.flow_meters: dict[tuple[int, FlowKey], Meter] = {}  # (ingress dpid, key)

    def meter(self, table: dict[Any, Meter], key: Any) -> Meter:
        got = table.get(key)
        if got is None:
            got = table[key] = Meter()
        return got

    def _background(self, ref: PortRef, desc: PortDesc) -> float:
        """A small share of the port's line rate, not of what it reports."""
        return self.line_rate[ref] * BACKGROUND_SHARE

    def _traffic(self, ref: PortRef) -> tuple[int, int]:
        """The modelled traffic each way."""
        tx, rx = self.tx.get(ref), self.rx.get(ref)
        return (
            int(rx.value(self.now)) if rx is not None else 0,
            int(tx.value(self.now)) if tx is not None else 0,
        )

    def _answer(self, dpid: int, req: StatsRequest) -> None:
        """Flow counters from the flows' meters; everything else as the scale wire."""
        if req.sync or req.kind is not StatsKind.FLOW:
            super()._answer(dpid, req)
            return
        mask, want = req.cookie_mask, req.cookie & req.cookie_mask
        rules = [
            r
            for r in self.tables[dpid].flows.values()
            if req.table in (None, r.table) and r.cookie & mask == want
        ]
        self._count_in("stats_reply.flow", sum(flow_bytes(r) for r in rules), reply=True)
        stats = []
        for r in rules:
            counted = 0
            key = FlowKey.of_match(r.match) if cookie_kind(r.cookie) is CookieKind.FLOW else None
            if key is not None and r.match.get("in_port") is not None:
                m = self.flow_meters.get((dpid, key))
                counted = int(m.value(self.now)) if m is not None else 0
            stats.append(
                FlowStats(r.table, r.priority, r.match, r.cookie, counted // 1500, counted)
            )
        self.call("flow_stats", self.fabric.flow_stats, self.now, dpid, stats)

    def first_packet(self, flow: Flow5, cookie: int) -> None:
        """``flow``'s first packet as a packet-in from its edge switch, copied there by
        the rule of ``cookie``."""
        g = self.graph
        src, dst = g.nodes[flow.src], g.nodes[flow.dst]
        dpid, port = self.where[flow.src]
        to = self.view.address_of(str(dst["mac"])) or str(dst["mac"])
        frame = EthFrame(
            str(src["mac"]), to, ETH_TYPE_IPV4, None, str(src["ip"]), str(dst["ip"]), 6,
            flow.sport, flow.dport,
        )  # fmt: skip
        self._count_in("packet_in.flow", 128)
        pkt = PacketIn(dpid, port, frame, cookie=cookie)
        self.run("packet_in.flow", self.fabric.packet_in, self.now, pkt)


class FreshTracer(Tracer):
    """A tracer that re-indexes a switch whose rules changed since it last looked."""

    def __init__(self, wire: Wire) -> None:
        super().__init__(wire)
        self.versions = {dpid: t.version for dpid, t in wire.tables.items()}

    def refresh(self) -> set[int]:
        """Forget the index of every switch whose rules changed; returns those switches."""
        changed = {d for d, t in self.wire.tables.items() if t.version != self.versions[d]}
        if changed:
            self.index = {k: v for k, v in self.index.items() if k[0] not in changed}
            for d in changed:
                self.versions[d] = self.wire.tables[d].version
        return changed

    def copied_by(self, flow: Flow5) -> int | None:
        """The cookie of the rule at ``flow.src``'s switch that copies its first packet to
        the controller (a length-bounded copy: the catch rule), ``None`` if none does."""
        pkt = self.packet(flow)
        dpid, port = self.wire.where[flow.src]
        pkt["in_port"], pkt["metadata"] = port, 0
        table: int | None = 0
        while table is not None:
            rule = self._table(dpid, table).lookup(pkt)
            if rule is None:
                return None
            if any(
                isinstance(a, Output) and a.port == OFPP_CONTROLLER and a.max_len is not None
                for a in rule.actions
            ):
                return rule.cookie
            self._apply(dpid, rule.actions, pkt, [], "copy")
            if rule.write_metadata is not None:
                value, mask = rule.write_metadata
                pkt["metadata"] = (pkt["metadata"] & ~mask) | (value & mask)
            table = rule.goto
        return None


# -- links ---------------------------------------------------------------------------------
@dataclass
class LinkMap:
    """Directed links as ``whatif_model`` names them, with the switch ports at each end:
    the port that transmits onto the link and the port that receives from it."""

    by_egress: dict[PortRef, str]
    uplink: dict[str, str]  # host -> its link to its switch
    downlink: dict[str, str]  # host -> its switch's link to it
    capacity: dict[str, float]
    ends: dict[str, tuple[PortRef | None, PortRef | None]]  # id -> (tx port, rx port)

    @staticmethod
    def of(graph: nx.MultiGraph) -> LinkMap:
        m = LinkMap({}, {}, {}, {}, {})
        for a, b, data in graph.edges(data=True):
            for x, y in ((a, b), (b, a)):
                lid = f"{x}:{data['ports'][x]}->{y}"
                m.capacity[lid] = float(data["rate_mbps"])
                sx, sy = graph.nodes[x], graph.nodes[y]
                tx = (int(sx["dpid"]), int(data["ports"][x])) if sx["kind"] == "switch" else None
                rx = (int(sy["dpid"]), int(data["ports"][y])) if sy["kind"] == "switch" else None
                m.ends[lid] = (tx, rx)
                if tx is None:
                    m.uplink[x] = lid
                else:
                    m.by_egress[tx] = lid
                if rx is None:
                    m.downlink[y] = lid
        return m

    def path(self, flow: Flow5, hops: Iterable[PortRef]) -> tuple[str, ...]:
        return (self.uplink[flow.src], *(self.by_egress[h] for h in hops))


def nonblocking_rates(links: LinkMap, pairs: Sequence[tuple[str, str]]) -> list[float]:
    """Max-min fair rates when only the hosts' own links limit the flows."""
    flows = [Flow((links.uplink[a], links.downlink[b])) for a, b in pairs]
    return max_min(flows, links.capacity).flow_rate


# -- iperf3 tests --------------------------------------------------------------------------
@dataclass(frozen=True)
class IperfTest:
    """One iperf3 test: its data connection (client port ``cport``) and its control
    connection (an ephemeral client port), both to the server's port."""

    src: str
    dst: str
    cport: int
    server_port: int
    control_port: int

    @property
    def data(self) -> Flow5:
        return Flow5(self.src, self.dst, self.cport, self.server_port)

    @property
    def control(self) -> Flow5:
        return Flow5(self.src, self.dst, self.control_port, self.server_port)


def iperf_tests(matrix: Sequence[tuple[str, str]], cport_base: int, tag: str) -> list[IperfTest]:
    """As ``iperf3_flows`` starts them: server ports from 5201 per receiver, client ports
    ``cport_base + i``; control ports drawn from the Linux ephemeral range by ``tag``."""
    next_port: dict[str, int] = {}
    out = []
    for i, (a, b) in enumerate(matrix):
        port = next_port.get(b, IPERF_PORT)
        next_port[b] = port + 1
        control = 32768 + zlib.crc32(f"{tag}/{i}".encode()) % 28232
        out.append(IperfTest(a, b, cport_base + i, port, control))
    return out


def reverse(flow: Flow5) -> Flow5:
    return Flow5(flow.dst, flow.src, flow.dport, flow.sport)


# -- one run -------------------------------------------------------------------------------
class Simulation:
    """One traffic matrix on ``wire`` for ``seconds`` (see the module docstring)."""

    def __init__(
        self, wire: TrafficWire, links: LinkMap, tests: Sequence[IperfTest], salt: int = 0
    ) -> None:
        self.wire, self.links, self.tests, self.salt = wire, links, list(tests), salt
        self.tracer = FreshTracer(wire)
        self.keys = [self.key(t.data) for t in self.tests]
        self.hops: list[list[PortRef]] = []
        self.visits: dict[int, set[int]] = {}  # switch -> tests whose data crosses it
        self.moved_at: list[float | None] = [None] * len(self.tests)
        self.moves = [0] * len(self.tests)
        self.rates: list[float] = [0.0] * len(self.tests)  # Mbit/s
        self.delivered = [Meter() for _ in self.tests]  # Mbit
        self.solves = 0
        self.caught = 0  # first packets the switches copied to the core

    def key(self, flow: Flow5) -> FlowKey:
        g = self.wire.graph
        ip_src, ip_dst = str(g.nodes[flow.src]["ip"]), str(g.nodes[flow.dst]["ip"])
        return FlowKey(ip_src, ip_dst, 6, flow.sport, flow.dport)

    def ingress(self, flow: Flow5) -> int:
        return self.wire.where[flow.src][0]

    def start(self) -> None:
        """Every test's four first packets, test after test, at one instant: each a
        packet-in if the rules its edge switch holds now copy it to the controller (they
        are asked before the first is sent: a flow's own rules never match another's)."""
        w = self.wire
        firsts = [
            flow
            for t in self.tests
            for flow in (t.control, reverse(t.control), t.data, reverse(t.data))
        ]
        copies = [(f, self.tracer.copied_by(f)) for f in firsts]
        for flow, cookie in copies:
            if cookie is not None:
                w.first_packet(flow, cookie)
                self.caught += 1
        self.tracer.refresh()
        for flow in (t.control for t in self.tests):
            for f in (flow, reverse(flow)):
                w.meter(w.flow_meters, (self.ingress(f), self.key(f))).base += CONTROL_BYTES
        self.hops = [[] for _ in self.tests]
        self._trace(range(len(self.tests)), first=True)
        self._solve()

    def _trace(self, which: Iterable[int], first: bool = False) -> bool:
        """Trace the data of tests ``which`` again; True when any path changed."""
        changed = False
        for i in which:
            hops = self.tracer.trace(self.tests[i].data, self.salt)
            if hops == self.hops[i]:
                continue
            for dpid, _ in self.hops[i]:
                self.visits[dpid].discard(i)
            for dpid, _ in hops:
                self.visits.setdefault(dpid, set()).add(i)
            if not first:
                self.moves[i] += 1
                self.moved_at[i] = self.wire.now
            self.hops[i], changed = hops, True
        return changed

    def _solve(self) -> None:
        """Rates from the traced paths; every counter follows them from now on."""
        w, links, now = self.wire, self.links, self.wire.now
        paths = [links.path(t.data, h) for t, h in zip(self.tests, self.hops, strict=True)]
        sol: Solution = max_min([Flow(p) for p in paths], links.capacity)
        self.solves += 1
        self.rates = sol.flow_rate
        for meter in (*w.tx.values(), *w.rx.values()):
            meter.set_rate(now, 0.0)
        for lid, mbps in sol.load.items():
            tx, rx = links.ends[lid]
            for ref, table in ((tx, w.tx), (rx, w.rx)):
                if ref is not None:
                    w.meter(table, ref).set_rate(now, mbps * BYTES_PER_MBIT)
        self._flow_rates(now, self.rates)

    def _flow_rates(self, now: float, rates: Sequence[float]) -> None:
        w = self.wire
        for t, key, rate, got in zip(self.tests, self.keys, rates, self.delivered, strict=True):
            w.meter(w.flow_meters, (self.ingress(t.data), key)).set_rate(now, rate * BYTES_PER_MBIT)
            back = reverse(t.data)
            ack = w.meter(w.flow_meters, (self.ingress(back), self.key(back)))
            ack.set_rate(now, ACK_RATIO * rate * BYTES_PER_MBIT)
            got.set_rate(now, rate)

    def tick(self) -> None:
        """One tick of the core; then what its rule changes did to the paths."""
        self.wire.step(TICK)
        changed = self.tracer.refresh()
        if not changed:
            return
        which = sorted({i for d in changed for i in self.visits.get(d, ())})
        if self._trace(which):
            self._solve()

    def stop(self) -> None:
        """Every flow ends: no more bytes anywhere."""
        w, now = self.wire, self.wire.now
        for meter in (*w.tx.values(), *w.rx.values()):
            meter.set_rate(now, 0.0)
        self._flow_rates(now, [0.0] * len(self.tests))

    def run(self, seconds: float, progress: Any = None) -> dict[str, Any]:
        """Start, tick for ``seconds``, stop; per test: Mbit delivered over its whole life,
        over the middle 80 % and its rate at the end (Mbit/s)."""
        w = self.wire
        t0, core0 = w.now, w.total.core_s
        self.start()
        start_core = w.total.core_s - core0
        ticks = round(seconds / TICK)
        lo, hi = round(TRIM * ticks), ticks - round(TRIM * ticks)
        at_lo = at_hi = [0.0] * len(self.tests)
        for n in range(1, ticks + 1):
            self.tick()
            if n == lo:
                at_lo = [m.value(w.now) for m in self.delivered]
            if n == hi:
                at_hi = [m.value(w.now) for m in self.delivered]
            if progress is not None:
                progress(n, ticks)
        end_rates = list(self.rates)
        whole = [m.value(w.now) / seconds for m in self.delivered]
        span = (hi - lo) * TICK
        trimmed = [(b - a) / span for a, b in zip(at_lo, at_hi, strict=True)]
        self.stop()
        te = w.fabric.sources.te
        tracked = sum(k in te.flows.flows for k in self.keys)
        return {
            "whole_mbps": whole,
            "trimmed_mbps": trimmed,
            "end_mbps": end_rates,
            "moves": self.moves,
            "last_moved_s": [None if m is None else round(m - t0, 2) for m in self.moved_at],
            "placement_steady_s": round(max((m - t0 for m in self.moved_at if m), default=0.0), 2),
            "tracked_data_flows": tracked,
            "caught_first_packets": self.caught,
            "solves": self.solves,
            "start_core_s": round(start_core, 3),
            "core_s": round(w.total.core_s - core0, 3),
        }

    def drain(self, quiet_s: float, limit_s: float = 120.0) -> float:
        """Tick with no traffic until the core tracks no flow and ``quiet_s`` passed
        (its smoothed port rates decay), so the next run starts from a clean core."""
        w, t0 = self.wire, self.wire.now
        te = w.fabric.sources.te
        while w.now - t0 < limit_s and (w.now - t0 < quiet_s or te.flows.flows or te.paths):
            w.step(TICK)
        return w.now - t0
