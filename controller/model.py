"""Domain model: rules, frames, events and messages as frozen dataclasses.

The core speaks only these types. ``controller/ofp/`` translates them to and from
OpenFlow 1.3 messages, so the core can be tested without Ryu or switches, and a rule
compiler can compare desired and installed state by plain equality.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, IntEnum

# ---------------------------------------------------------------------------
# Pipeline layout and well-known numbers
# ---------------------------------------------------------------------------


class Table(IntEnum):
    """The flow-table pipeline every Loom switch runs.

    CLASSIFY sends LLDP/ARP to the controller and sorts ports: fabric ports skip the
    edge-only tables. ADMIT enforces tenants, QOS marks traffic classes, PIN holds
    per-flow placements (traffic engineering, jobs) and ROUTE the per-destination
    defaults.
    """

    CLASSIFY = 0
    ADMIT = 1
    QOS = 2
    PIN = 3
    ROUTE = 4


OFPP_CONTROLLER = 0xFFFFFFFD
OFPP_TABLE = 0xFFFFFFF9
OFPP_IN_PORT = 0xFFFFFFF8
OFPP_LOCAL = 0xFFFFFFFE
OFPP_ANY = 0xFFFFFFFF
OFPG_ANY = 0xFFFFFFFF
OFPG_MAX = 0xFFFFFF00
MAX_PHYSICAL_PORT = 0xFFFFFF00

ETH_TYPE_IPV4 = 0x0800
ETH_TYPE_ARP = 0x0806
ETH_TYPE_LLDP = 0x88CC
ETH_TYPE_VLAN = 0x8100

#: metadata bit set in CLASSIFY for packets that entered from another switch.
META_FROM_FABRIC = 0x1
#: metadata bits ADMIT sets to the sender's tenant id, for packets from edge ports.
META_TENANT_SHIFT = 8
META_TENANT_MASK = 0xFFFF << META_TENANT_SHIFT

#: the controller's own MAC: source of its ARP probes, so leaked probes teach nothing.
CONTROLLER_MAC = "0e:00:4c:4f:4f:4d"

COOKIE_BASE = 0x4C4F << 48  # "LO": marks every Loom rule


class CookieKind(IntEnum):
    BASE = 1
    ROUTE = 2
    FLOW = 3  # a tracked flow: its accounting rule at the ingress and its pins
    JOB = 4
    TENANT = 5
    CATCH = 6  # copies the first packets of untracked flows to the controller
    HOST = 7  # delivery to a host on its switch; the ident is the host's IPv4 address
    PROTECT = 8  # fast-failover groups and the detour tunnels behind them
    ARP = 9  # ARP answered by the switches for a host; the ident is its IPv4 address


def make_cookie(kind: CookieKind, ident: int = 0) -> int:
    """Loom's cookie: a fixed marker, the rule's kind and an identifier (e.g. a dpid)."""
    return COOKIE_BASE | (int(kind) << 40) | (ident & 0xFF_FFFF_FFFF)


COOKIE_MARK_MASK = 0xFFFF << 48
COOKIE_KIND_MASK = COOKIE_MARK_MASK | (0xFF << 40)


def cookie_kind(cookie: int) -> CookieKind | None:
    """The kind of a Loom cookie, ``None`` for a rule Loom did not write."""
    if cookie & COOKIE_MARK_MASK != COOKIE_BASE:
        return None
    try:
        return CookieKind((cookie >> 40) & 0xFF)
    except ValueError:
        return None


# ---------------------------------------------------------------------------
# Matches and actions
# ---------------------------------------------------------------------------

PortRef = tuple[int, int]  # (dpid, port_no)
MatchValue = int | str | tuple[int, int] | tuple[str, str]


@dataclass(frozen=True, order=True)
class Match:
    """An OpenFlow match as sorted ``(oxm_field, value)`` pairs (Ryu's field names).

    A masked value is a ``(value, mask)`` tuple. Sorting makes equal matches compare
    equal, which the rule compiler relies on.
    """

    fields: tuple[tuple[str, MatchValue], ...] = ()

    @staticmethod
    def of(**kwargs: MatchValue) -> Match:
        return Match(tuple(sorted(kwargs.items())))

    def get(self, name: str) -> MatchValue | None:
        for key, value in self.fields:
            if key == name:
                return value
        return None

    def as_dict(self) -> dict[str, MatchValue]:
        return dict(self.fields)


@dataclass(frozen=True)
class Output:
    """Output to a port; ``max_len`` bounds what a copy to the controller carries
    (``None``: the whole packet)."""

    port: int
    max_len: int | None = None


@dataclass(frozen=True)
class GroupAction:
    group_id: int


@dataclass(frozen=True)
class SetField:
    field: str
    value: int | str


@dataclass(frozen=True)
class SetQueue:
    queue_id: int


@dataclass(frozen=True)
class CopyField:
    """Copy one whole header field into another: Open vSwitch's ``move`` (OpenFlow 1.5's
    copy_field), which lets a switch answer an ARP request by turning it around."""

    src: str
    dst: str


@dataclass(frozen=True)
class PushVlan:
    ethertype: int = 0x8100


@dataclass(frozen=True)
class PopVlan:
    pass


Action = Output | GroupAction | SetField | CopyField | SetQueue | PushVlan | PopVlan

# ---------------------------------------------------------------------------
# Rules: what the core wants a switch to hold
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FlowRule:
    """One flow entry. Identity (``key``) is table, priority and match, as in OpenFlow."""

    table: int
    priority: int
    match: Match
    actions: tuple[Action, ...] = ()
    goto: int | None = None
    write_metadata: tuple[int, int] | None = None
    meter: int | None = None
    cookie: int = 0
    idle_timeout: int = 0
    hard_timeout: int = 0

    @property
    def key(self) -> tuple[int, int, Match]:
        return (self.table, self.priority, self.match)


class GroupType(Enum):
    ALL = "all"
    SELECT = "select"
    INDIRECT = "indirect"
    FAST_FAILOVER = "ff"


@dataclass(frozen=True)
class Bucket:
    actions: tuple[Action, ...]
    weight: int = 1
    watch_port: int = OFPP_ANY
    watch_group: int = OFPG_ANY


@dataclass(frozen=True)
class GroupRule:
    group_id: int
    type: GroupType
    buckets: tuple[Bucket, ...]


@dataclass(frozen=True)
class MeterRule:
    """A drop-band meter: traffic above ``rate`` (with ``burst``) is dropped. Units are
    kbit/s and kbit, or packets/s and packets when ``per_packet``."""

    meter_id: int
    rate: int
    burst: int = 0
    per_packet: bool = False


@dataclass
class SwitchRules:
    """Everything a switch should hold (or holds), keyed for diffing."""

    flows: dict[tuple[int, int, Match], FlowRule] = field(default_factory=dict)
    groups: dict[int, GroupRule] = field(default_factory=dict)
    meters: dict[int, MeterRule] = field(default_factory=dict)

    def add_flow(self, rule: FlowRule) -> None:
        self.flows[rule.key] = rule

    def add_group(self, group: GroupRule) -> None:
        self.groups[group.group_id] = group

    def copy(self) -> SwitchRules:
        return SwitchRules(dict(self.flows), dict(self.groups), dict(self.meters))


# ---------------------------------------------------------------------------
# Frames: packets the core reads from packet-ins or asks to be sent
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LldpFrame:
    """A Loom discovery frame: which switch port sent it, and when (the controller's own
    clock; 0: not known). Frames are equal whenever they were sent."""

    dpid: int
    port: int
    sent: float = field(default=0.0, compare=False)


@dataclass(frozen=True)
class ArpFrame:
    op: int  # 1 request, 2 reply
    eth_src: str
    eth_dst: str
    sha: str
    spa: str
    tha: str
    tpa: str


@dataclass(frozen=True)
class EthFrame:
    """Any other frame, with the header fields the core may need."""

    eth_src: str
    eth_dst: str
    eth_type: int
    vlan_vid: int | None = None
    ipv4_src: str | None = None
    ipv4_dst: str | None = None
    ip_proto: int | None = None
    l4_src: int | None = None
    l4_dst: int | None = None


Frame = LldpFrame | ArpFrame | EthFrame


@dataclass(frozen=True)
class RawFrame:
    """Bytes to send back unchanged (re-injection of a packet-in)."""

    data: bytes


# ---------------------------------------------------------------------------
# Events in (from switches, already decoded)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PortDesc:
    port_no: int
    hw_addr: str = ""
    name: str = ""
    up: bool = True
    speed_kbps: int = 0


@dataclass(frozen=True)
class PacketIn:
    dpid: int
    in_port: int
    frame: Frame | None
    data: bytes = b""
    table_id: int = 0
    cookie: int = 0


@dataclass(frozen=True)
class PortStats:
    port_no: int
    rx_bytes: int = 0
    tx_bytes: int = 0
    rx_packets: int = 0
    tx_packets: int = 0
    rx_dropped: int = 0
    tx_dropped: int = 0
    rx_errors: int = 0
    tx_errors: int = 0
    # How long the port has been up, by the switch's own clock, when it read the counters
    # (None: not reported). Rates are taken over it: the time between replies as the
    # controller sees them varies with every queue on the way, by a tenth of a
    # half-second poll on a busy switch, and a level TCP holds would not read flat.
    uptime: float | None = None


@dataclass(frozen=True)
class FlowStats:
    table: int
    priority: int
    match: Match
    cookie: int
    packets: int
    bytes: int


@dataclass(frozen=True)
class GroupStats:
    group_id: int
    bucket_packets: tuple[int, ...]
    bucket_bytes: tuple[int, ...]


# ---------------------------------------------------------------------------
# Messages out (to switches), in the order they must be sent
# ---------------------------------------------------------------------------


class Op(Enum):
    ADD = "add"
    MODIFY = "modify"
    DELETE = "delete"


@dataclass(frozen=True)
class FlowMod:
    op: Op
    rule: FlowRule


@dataclass(frozen=True)
class GroupMod:
    op: Op
    group: GroupRule


@dataclass(frozen=True)
class MeterMod:
    op: Op
    meter: MeterRule


@dataclass(frozen=True)
class PacketOut:
    in_port: int
    actions: tuple[Action, ...]
    frame: LldpFrame | ArpFrame | RawFrame


@dataclass(frozen=True)
class ClearSwitch:
    """Remove every flow, group and meter: a switch whose state Loom does not know."""


class StatsKind(Enum):
    PORT = "port"
    FLOW = "flow"
    GROUP = "group"
    GROUP_DESC = "group_desc"
    METER_CONFIG = "meter_config"


@dataclass(frozen=True)
class StatsRequest:
    """Ask a switch for counters or contents; flow requests filter by table and cookie.
    ``sync`` marks the requests that read a (re)connected switch's whole state."""

    kind: StatsKind
    table: int | None = None
    cookie: int = 0
    cookie_mask: int = 0
    sync: bool = False


Message = FlowMod | GroupMod | MeterMod | PacketOut | ClearSwitch | StatsRequest

Messages = dict[int, list[Message]]


def merge(into: Messages, more: Messages) -> Messages:
    """Append ``more`` to ``into`` per switch, keeping order; returns ``into``."""
    for dpid, msgs in more.items():
        into.setdefault(dpid, []).extend(msgs)
    return into
