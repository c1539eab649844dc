"""A fast fake wire for the scale benchmark: the real core (``controller.conductor.Conductor``)
driven by switches and hosts that are plain dictionaries.

The test suite's fake fabric (``tests/sim.py``) encodes every message with Ryu and traces
every packet through modelled flow tables: right for correctness, far too slow for a
fabric of thousands of switches. Here a switch only keeps what it was told to hold
(flows by their OpenFlow identity, groups and meters by id) and decides one thing from
it: whether an LLDP or ARP frame arriving on a port goes to the controller (its table-0
rules for that ethertype). Nothing is forwarded host to host, meters are not modelled
(no packet-in is ever rate-limited), and a switch that (re)connects is empty, as after
a reboot. Hosts behave as Linux does: they answer an ARP probe for their own address and
ignore every other ARP frame that is not a reply to them.

Every core call is timed with ``clock`` and nothing else is: the wire's own work
(delivering frames, answering polls) is not core time.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from controller import heap
from controller.conductor import Conductor
from controller.model import (
    ETH_TYPE_ARP,
    ETH_TYPE_LLDP,
    OFPP_CONTROLLER,
    OFPP_LOCAL,
    ArpFrame,
    ClearSwitch,
    FlowMod,
    FlowRule,
    FlowStats,
    GroupAction,
    GroupMod,
    GroupRule,
    GroupStats,
    LldpFrame,
    Match,
    Message,
    Messages,
    MeterMod,
    MeterRule,
    Op,
    Output,
    PacketIn,
    PacketOut,
    PortDesc,
    PortStats,
    StatsKind,
    StatsRequest,
)
from controller.view import FabricView
from mininet_scenarios.bench.scale_sizes import (
    ARP_FRAME,
    LLDP_FRAME,
    MULTIPART,
    PACKET_IN,
    PORT_STATUS,
    REPLY_LIMIT,
    flow_bytes,
    group_bytes,
    match_bytes,
    message_bytes,
    message_kind,
)
from topologies.graph import host_list, link_ends, switches

PortRef = tuple[int, int]
BACKGROUND_SHARE = 0.01  # of a port's speed: counters move, nothing looks like an elephant
READ_BACK = frozenset({StatsKind.FLOW, StatsKind.GROUP_DESC, StatsKind.METER_CONFIG})
RULE_MESSAGES = (FlowMod, GroupMod, MeterMod, ClearSwitch)


# -- tallies -----------------------------------------------------------------------------
@dataclass
class CallStat:
    count: int = 0
    total: float = 0.0
    max: float = 0.0


@dataclass
class Tally:
    """What happened on the wire during one phase: core calls and traffic both ways."""

    calls: dict[str, CallStat] = field(default_factory=dict)
    core_s: float = 0.0
    largest: tuple[str, float, float] = ("", 0.0, 0.0)  # kind, seconds, simulated time
    planning: dict[str, float] = field(default_factory=dict)  # Conductor.drain_timings
    out_msgs: Counter[str] = field(default_factory=Counter)  # controller -> switches
    out_bytes: Counter[str] = field(default_factory=Counter)
    in_msgs: Counter[str] = field(default_factory=Counter)  # switches -> controller
    in_bytes: Counter[str] = field(default_factory=Counter)
    ruled: set[int] = field(default_factory=set)  # switches sent a rule message
    messaged: set[int] = field(default_factory=set)  # switches sent anything
    frames_to_hosts: int = 0
    arp_ignored: int = 0  # ARP frames a host received and ignored

    def call(self, kind: str, seconds: float, now: float) -> None:
        stat = self.calls.setdefault(kind, CallStat())
        stat.count += 1
        stat.total += seconds
        stat.max = max(stat.max, seconds)
        self.core_s += seconds
        if seconds > self.largest[1]:
            self.largest = (kind, seconds, now)

    @property
    def rule_messages(self) -> int:
        plain = ("packet", "stats", "read")
        return sum(n for k, n in self.out_msgs.items() if not k.startswith(plain))

    def as_dict(self) -> dict[str, Any]:
        return {
            "core_s": self.core_s,
            "largest_call": {"kind": self.largest[0], "s": self.largest[1], "at": self.largest[2]},
            "calls": {
                k: {"count": c.count, "total_s": c.total, "max_s": c.max}
                for k, c in sorted(self.calls.items())
            },
            "planning_s": dict(self.planning),
            "messages_out": dict(sorted(self.out_msgs.items())),
            "bytes_out": dict(sorted(self.out_bytes.items())),
            "messages_in": dict(sorted(self.in_msgs.items())),
            "bytes_in": dict(sorted(self.in_bytes.items())),
            "rule_messages": self.rule_messages,
            "switches_ruled": len(self.ruled),
            "switches_messaged": len(self.messaged),
            "frames_to_hosts": self.frames_to_hosts,
            "arp_ignored_by_hosts": self.arp_ignored,
        }


@dataclass
class Call:
    """One timed core call and what it returned."""

    kind: str
    seconds: float
    out: Messages

    def as_dict(self) -> dict[str, Any]:
        msgs = [m for ms in self.out.values() for m in ms]
        ruled = {d for d, ms in self.out.items() if any(isinstance(m, RULE_MESSAGES) for m in ms)}
        return {
            "kind": self.kind,
            "s": self.seconds,
            "messages": len(msgs),
            "rule_messages": sum(isinstance(m, RULE_MESSAGES) for m in msgs),
            "switches_ruled": len(ruled),
            "switches_messaged": len(self.out),
        }


# -- switches ------------------------------------------------------------------------------
@dataclass
class SwitchTable:
    """What one switch holds; ``punt`` indexes its table-0 rules that match an ethertype
    (and maybe an in_port): (in_port or None, eth_type) -> (priority, to the controller)."""

    flows: dict[tuple[int, int, Match], FlowRule] = field(default_factory=dict)
    groups: dict[int, GroupRule] = field(default_factory=dict)
    meters: dict[int, MeterRule] = field(default_factory=dict)
    punt: dict[tuple[int | None, int], tuple[int, bool]] = field(default_factory=dict)
    version: int = 0  # bumped by every message applied: lets a reader's index know it is stale
    cascaded: int = 0  # flows deleted with the group or meter they pointed at
    lost_modifies: int = 0  # modifies of flows the switch does not hold (ignored, as OVS does)

    @staticmethod
    def _punt_key(rule: FlowRule) -> tuple[int | None, int] | None:
        fields = dict(rule.match.fields)
        eth_type, in_port = fields.pop("eth_type", None), fields.pop("in_port", None)
        if rule.table != 0 or fields or not isinstance(eth_type, int):
            return None
        return (in_port if isinstance(in_port, int) else None, eth_type)

    def apply(self, msg: Message) -> int:
        """Apply a rule message; returns the change in the number of flows and groups."""
        self.version += 1
        if isinstance(msg, ClearSwitch):
            before = len(self.flows) + len(self.groups)
            self.flows, self.groups, self.meters, self.punt = {}, {}, {}, {}
            return -before
        if isinstance(msg, MeterMod):
            if msg.op is Op.DELETE:
                self.meters.pop(msg.meter.meter_id, None)
                return -self._cascade(lambda r: r.meter == msg.meter.meter_id)
            self.meters[msg.meter.meter_id] = msg.meter
            return 0
        if isinstance(msg, GroupMod):
            gid, had = msg.group.group_id, msg.group.group_id in self.groups
            if msg.op is Op.DELETE:
                gone = int(self.groups.pop(gid, None) is not None)
                return -gone - self._cascade(lambda r: GroupAction(gid) in r.actions)
            self.groups[gid] = msg.group
            return int(not had)
        assert isinstance(msg, FlowMod)
        rule = msg.rule
        key, punt, had = rule.key, self._punt_key(rule), rule.key in self.flows
        if msg.op is Op.DELETE:
            self._remove(rule)
            return -int(had)
        if msg.op is Op.MODIFY and not had:  # OpenFlow 1.3: a modify adds nothing
            self.lost_modifies += 1
            return 0
        self.flows[key] = rule
        if punt is not None and rule.priority >= self.punt.get(punt, (-1, False))[0]:
            out = (isinstance(a, Output) and a.port == OFPP_CONTROLLER for a in rule.actions)
            self.punt[punt] = (rule.priority, any(out))
        return int(not had)

    def _cascade(self, uses: Callable[[FlowRule], bool]) -> int:
        """As a switch does (OpenFlow 1.3, 6.5 and 6.6): deleting a group or a meter
        deletes every flow that points at it; counted, as no sender should rely on it."""
        doomed = [rule for rule in self.flows.values() if uses(rule)]
        for rule in doomed:
            self._remove(rule)
        self.cascaded += len(doomed)
        return len(doomed)

    def _remove(self, rule: FlowRule) -> None:
        self.flows.pop(rule.key, None)
        punt = self._punt_key(rule)
        if punt is not None and self.punt.get(punt, (-1, False))[0] == rule.priority:
            del self.punt[punt]

    def punts(self, port: int, eth_type: int) -> bool:
        """Whether a frame of ``eth_type`` arriving on ``port`` goes to the controller."""
        own, every = self.punt.get((port, eth_type)), self.punt.get((None, eth_type))
        best = max((r for r in (own, every) if r is not None), default=None)
        return best is not None and best[1]


class Wire:
    """Switches, links and hosts of ``graph`` around ``fabric``; ``now`` is simulated.
    ``total`` tallies everything, ``tally`` the current phase (replace it to start one)."""

    def __init__(
        self,
        graph: nx.MultiGraph,
        fabric: Conductor,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.graph, self.fabric, self.clock = graph, fabric, clock
        self.view = FabricView(fabric)
        self.now = 0.0
        self.total, self.tally = Tally(), Tally()
        self.in_core = False  # for a gc callback: is a core call running?
        self.watch: Callable[[], None] | None = None  # after every core call (budget, progress)
        # after every core call, once its rules are applied, with the call's kind: a check of
        # what the switches hold between calls (``scale_walk``), outside the timed call
        self.after_call: Callable[[str], None] | None = None
        self.last_rule_at = 0.0  # simulated time of the last rule message
        self.core_at_last_rule = self.wall_at_last_rule = 0.0  # total core time, clock then
        self.rules_installed = 0  # flows + groups on every switch
        self.queue: deque[tuple[int, PacketOut | StatsRequest]] = deque()
        self.connected: set[int] = set()
        self.tables: dict[int, SwitchTable] = {}
        self.ports: dict[int, dict[int, PortDesc]] = {}
        self.names: dict[int, str] = {}
        self.roles: dict[int, str] = {}
        self.peer: dict[PortRef, PortRef] = {}  # switch port -> switch port
        self.down: set[PortRef] = set()  # ports whose cable is unplugged
        self.host_at: dict[PortRef, str] = {}
        self.where: dict[str, PortRef] = {}  # host -> where it is plugged in now
        self.counters: dict[PortRef, float] = {}
        self.polled_at: dict[int, float] = {}
        self.reads: dict[int, set[StatsKind]] = {}
        for sw in switches(graph):
            self._add_switch(sw)
        self.expected_links = set(self.peer.items())
        self.hosts = host_list(graph)

    def _add_switch(self, sw: str) -> None:
        dpid = int(self.graph.nodes[sw]["dpid"])
        self.names[dpid], self.roles[dpid] = sw, str(self.graph.nodes[sw].get("role", ""))
        ports = {OFPP_LOCAL: PortDesc(OFPP_LOCAL, name=sw)}  # as Open vSwitch reports it
        for end in link_ends(self.graph, sw):
            speed = int(end.rate_mbps * 1000)
            ports[end.port] = PortDesc(end.port, name=f"{sw}-eth{end.port}", speed_kbps=speed)
            peer = self.graph.nodes[end.peer]
            if peer["kind"] == "switch":
                self.peer[(dpid, end.port)] = (int(peer["dpid"]), end.peer_port)
            else:
                self.host_at[(dpid, end.port)] = end.peer
                self.where[end.peer] = (dpid, end.port)
        self.ports[dpid], self.tables[dpid] = ports, SwitchTable()

    # -- core calls ----------------------------------------------------------------------
    def call(self, kind: str, fn: Callable[..., Messages], *args: Any) -> Call:
        """Run one core call, timed; send what it returns (packets and polls queued)."""
        self.in_core = True
        started = self.clock()
        try:
            out = fn(*args)
        finally:
            seconds = self.clock() - started
            self.in_core = False
        planned = self.fabric.drain_timings()
        heap.after()  # as the shim does after each call
        for tally in (self.total, self.tally):
            tally.call(kind, seconds, self.now)
            for name, spent in planned:
                tally.planning[name] = tally.planning.get(name, 0.0) + spent
        self.send(out)
        if self.after_call is not None:
            self.after_call(kind)
        if self.watch is not None:
            self.watch()
        return Call(kind, seconds, out)

    def run(self, kind: str, fn: Callable[..., Messages], *args: Any) -> Call:
        """``call``, then deliver everything that follows from it."""
        call = self.call(kind, fn, *args)
        self.drain()
        return call

    def send(self, out: Messages) -> None:
        """Rules take effect at once; packet-outs and polls are answered by ``drain``."""
        for dpid, msgs in out.items():
            if dpid not in self.connected:
                continue  # as the shim: no connection, nothing sent
            for msg in msgs:
                kind, size = message_kind(msg), message_bytes(msg)
                for tally in (self.total, self.tally):
                    tally.out_msgs[kind] += 1
                    tally.out_bytes[kind] += size
                    tally.messaged.add(dpid)
                if isinstance(msg, PacketOut | StatsRequest):
                    self.queue.append((dpid, msg))
                    continue
                self.rules_installed += self.tables[dpid].apply(msg)
                self.last_rule_at, self.core_at_last_rule = self.now, self.total.core_s
                self.wall_at_last_rule = self.clock()
                self.total.ruled.add(dpid)
                self.tally.ruled.add(dpid)

    def drain(self) -> None:
        while self.queue:
            dpid, msg = self.queue.popleft()
            if dpid not in self.connected:
                continue
            if isinstance(msg, StatsRequest):
                self._answer(dpid, msg)
            else:
                self._packet_out(dpid, msg)

    def _count_in(self, kind: str, size: int, reply: bool = False) -> None:
        """A message to the controller; a multipart ``reply`` of a body of ``size``."""
        messages = max(1, -(-size // REPLY_LIMIT)) if reply else 1
        for tally in (self.total, self.tally):
            tally.in_msgs[kind] += messages
            tally.in_bytes[kind] += size + (MULTIPART if reply else 0)

    # -- packets -------------------------------------------------------------------------
    def _packet_in(self, dpid: int, port: int, frame: LldpFrame | ArpFrame) -> Call:
        lldp = isinstance(frame, LldpFrame)
        kind = "packet_in.lldp" if lldp else "packet_in.arp"
        self._count_in(kind, PACKET_IN + (LLDP_FRAME if lldp else ARP_FRAME))
        return self.call(kind, self.fabric.packet_in, self.now, PacketIn(dpid, port, frame))

    def _packet_out(self, dpid: int, msg: PacketOut) -> None:
        frame = msg.frame
        if not isinstance(frame, LldpFrame | ArpFrame):
            return  # a re-injected packet: forwarding is not modelled
        eth_type = ETH_TYPE_LLDP if isinstance(frame, LldpFrame) else ETH_TYPE_ARP
        for action in msg.actions:
            if not isinstance(action, Output):
                continue
            ref = (dpid, action.port)
            host = self.host_at.get(ref)
            if host is not None:
                self._host_receives(host, ref, frame)
                continue
            far = self.peer.get(ref)
            if far is None or ref in self.down or far[0] not in self.connected:
                continue
            if self.tables[far[0]].punts(far[1], eth_type):
                self._packet_in(far[0], far[1], frame)

    def _host_receives(self, host: str, ref: PortRef, frame: LldpFrame | ArpFrame) -> None:
        """Linux answers an ARP probe for its own address to the prober (RFC 5227)."""
        self.total.frames_to_hosts += 1
        self.tally.frames_to_hosts += 1
        attrs = self.graph.nodes[host]
        if not isinstance(frame, ArpFrame) or ref in self.down:
            return
        if frame.op == 1 and frame.tpa == attrs["ip"]:
            mac, ip = str(attrs["mac"]), str(attrs["ip"])
            self._from_host(ref, ArpFrame(2, mac, frame.sha, mac, ip, frame.sha, frame.spa))
        elif not (frame.op == 2 and frame.eth_dst == attrs["mac"]):
            self.total.arp_ignored += 1
            self.tally.arp_ignored += 1

    def _from_host(self, ref: PortRef, frame: ArpFrame) -> Call | None:
        dpid, port = ref
        if dpid not in self.connected or ref in self.down:
            return None
        return (
            self._packet_in(dpid, port, frame)
            if self.tables[dpid].punts(port, ETH_TYPE_ARP)
            else None
        )

    def host_arps(self, host: str, target_ip: str) -> Call | None:
        """``host`` asks who has ``target_ip`` (a ping's first packet); returns the
        packet-in's call (``None``: its switch did not send the frame to the controller)."""
        attrs = self.graph.nodes[host]
        mac, ip = str(attrs["mac"]), str(attrs["ip"])
        frame = ArpFrame(1, mac, "ff:ff:ff:ff:ff:ff", mac, ip, "00:00:00:00:00:00", target_ip)
        call = self._from_host(self.where[host], frame)
        self.drain()
        return call

    def announce(self, hosts: Iterable[str] | None = None) -> None:
        """Each host ARPs for the next one, as ``tests/sim.py``'s ``announce_hosts``."""
        index = {h: i for i, h in enumerate(self.hosts)}
        for host in self.hosts if hosts is None else hosts:
            after = self.hosts[(index[host] + 1) % len(self.hosts)]
            self.host_arps(host, str(self.graph.nodes[after]["ip"]))

    # -- polls ---------------------------------------------------------------------------
    def _answer(self, dpid: int, req: StatsRequest) -> None:
        table, now = self.tables[dpid], self.now
        if req.sync:
            self._read_back(dpid, req.kind)
        elif req.kind is StatsKind.PORT:
            ports = self._port_stats(dpid)
            self._count_in("stats_reply.port", 112 * len(ports), reply=True)
            self.call("port_stats", self.fabric.port_stats, now, dpid, ports)
        elif req.kind is StatsKind.GROUP:
            buckets = {g.group_id: (0,) * len(g.buckets) for g in table.groups.values()}
            groups = [GroupStats(gid, zero, zero) for gid, zero in buckets.items()]
            size = sum(40 + 16 * len(zero) for zero in buckets.values())
            self._count_in("stats_reply.group", size, reply=True)
            self.call("group_stats", self.fabric.group_stats, now, dpid, groups)
        elif req.kind is StatsKind.FLOW:
            mask, want = req.cookie_mask, req.cookie & req.cookie_mask
            rules = [
                r
                for r in table.flows.values()
                if req.table in (None, r.table) and r.cookie & mask == want
            ]
            size = sum(flow_bytes(r) for r in rules)
            self._count_in("stats_reply.flow", size, reply=True)
            flows = [FlowStats(r.table, r.priority, r.match, r.cookie, 0, 0) for r in rules]
            self.call("flow_stats", self.fabric.flow_stats, now, dpid, flows)

    def _read_back(self, dpid: int, kind: StatsKind) -> None:
        """The three reads of a (re)connected switch: one ``switch_state`` once all are
        answered, as the shim does."""
        table = self.tables[dpid]
        size = {
            StatsKind.FLOW: sum(48 + match_bytes(f.match) for f in table.flows.values()),
            StatsKind.GROUP_DESC: sum(group_bytes(g) - 8 for g in table.groups.values()),
        }.get(kind, 24 * len(table.meters))
        self._count_in("read_back_reply", size, reply=True)
        seen = self.reads.setdefault(dpid, set())
        seen.add(kind)
        if seen >= READ_BACK:
            del self.reads[dpid]
            state = (list(table.flows.values()), list(table.groups.values()))
            meters = list(table.meters.values())
            self.call("switch_state", self.fabric.switch_state, self.now, dpid, *state, meters)

    def _port_stats(self, dpid: int) -> list[PortStats]:
        """Counters that grow at a small share of each live port's speed (plus what
        :meth:`_traffic` adds)."""
        elapsed = self.now - self.polled_at.get(dpid, self.now)
        self.polled_at[dpid] = self.now
        out = []
        for port, desc in self.ports[dpid].items():
            ref = (dpid, port)
            if desc.up and ref not in self.down and (ref in self.peer or ref in self.host_at):
                rate = self._background(ref, desc)
                self.counters[ref] = self.counters.get(ref, 0.0) + elapsed * rate
            base = int(self.counters.get(ref, 0.0))
            got, sent = (base + extra for extra in self._traffic(ref))
            out.append(PortStats(port, got, sent, got // 1000, sent // 1000))
        return out

    def _background(self, ref: PortRef, desc: PortDesc) -> float:
        """Bytes/s a live port's counters grow by when nothing else is modelled."""
        return desc.speed_kbps * 125 * BACKGROUND_SHARE

    def _traffic(self, ref: PortRef) -> tuple[int, int]:
        """Bytes a port received and sent beyond the background: none here."""
        return 0, 0

    # -- world events ----------------------------------------------------------------------
    def connect(self, dpids: Iterable[int]) -> list[Call]:
        """Switches connect in a burst; their read-back answers arrive after all of them."""
        calls = []
        for dpid in dpids:
            self.connected.add(dpid)
            ports = list(self.ports[dpid].values())
            calls.append(self.call("switch_up", self.fabric.switch_up, self.now, dpid, ports))
        self.drain()
        return calls

    def connect_all(self) -> list[Call]:
        return self.connect(sorted(self.tables))

    def disconnect(self, dpid: int) -> Call:
        """The switch loses its controller connection and restarts (comes back empty)."""
        self.connected.discard(dpid)
        self.reads.pop(dpid, None)
        self.rules_installed += self.tables[dpid].apply(ClearSwitch())
        return self.run("switch_down", self.fabric.switch_down, self.now, dpid)

    def step(self, dt: float = 0.1) -> Call:
        """A tick, then (as the shim does) the re-plan's remaining slices, each a call."""
        self.now = round(self.now + dt, 6)
        tick = self.run("tick", self.fabric.tick, self.now)
        self.finish()
        return tick

    def finish(self) -> None:
        """Planning left over from the last call, slice by slice, each a call of its own."""
        while self.fabric.busy:
            self.run("work", self.fabric.work, self.now)

    def set_port(self, ref: PortRef, up: bool) -> Call:
        """A PortStatus from ``ref``: the port went up or down."""
        old = self.ports[ref[0]][ref[1]]
        desc = PortDesc(old.port_no, old.hw_addr, old.name, up, old.speed_kbps)
        self.ports[ref[0]][ref[1]] = desc
        self._count_in("port_status", PORT_STATUS)
        return self.call("port_status", self.fabric.port_status, self.now, ref[0], desc)

    def set_link(self, ref: PortRef, up: bool) -> list[Call]:
        """Unplug (or plug back) the cable at ``ref``: PortStatus from both ends."""
        ends = [ref, self.peer[ref]]
        for end in ends:
            (self.down.discard if up else self.down.add)(end)
        calls = [self.set_port(end, up) for end in ends]
        self.drain()
        return calls

    def move_host(self, host: str, dpid: int, ask: str) -> list[Call]:
        """Unplug ``host``, plug it into a new port of switch ``dpid`` and let it ARP for
        ``ask``: PortStatus down, PortStatus of the new port (up), the ARP packet-in."""
        old = self.where[host]
        calls = [self.set_port(old, False)]
        del self.host_at[old]
        port = max(p for p in self.ports[dpid] if p != OFPP_LOCAL) + 1
        speed = self.ports[old[0]][old[1]].speed_kbps
        name = f"{self.names[dpid]}-eth{port}"
        self.ports[dpid][port] = PortDesc(port, name=name, up=False, speed_kbps=speed)
        self.host_at[(dpid, port)] = host
        self.where[host] = (dpid, port)
        calls.append(self.set_port((dpid, port), True))
        self.drain()
        arp = self.host_arps(host, ask)
        return [*calls, arp] if arp is not None else calls

    # -- what the core and the switches hold ---------------------------------------------
    def links_seen(self) -> int:
        return sum(1 for link in self.view.links.values() if self.peer.get(link.src) == link.dst)

    def missing_hosts(self) -> list[str]:
        """Hosts the core does not know where they are now."""
        known = {(h.mac, h.dpid, h.port) for h in self.view.hosts.values()}
        return [h for h in self.hosts if (self.graph.nodes[h]["mac"], *self.where[h]) not in known]

    def mismatches(self) -> list[int]:
        """Switches whose rules differ from what the core believes it installed."""
        bad = []
        for dpid in sorted(self.connected):
            table, core = self.tables[dpid], self.fabric.store.switch_rules(dpid)
            held = (set(table.flows), set(table.groups), set(table.meters))
            if held != (set(core.flows), set(core.groups), set(core.meters)):
                bad.append(dpid)
        return bad
