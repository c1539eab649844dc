"""Per-flow accounting at the ingress edge, and which flows are elephants.

How Loom finds elephants, and what it costs: every edge switch copies the first packet
of each untracked TCP/UDP flow from a host to the controller (PIN table, 128 bytes,
forwarding unaffected). The controller answers with one accounting rule for that
5-tuple on that switch, whose byte counter it then reads with one flow-statistics
request per switch per polling interval. So: one packet-in (a few, while the rule is in
flight) and one flow-mod per new flow; one rule per active flow, on its ingress switch
only; rules of flows idle for ``idle_timeout`` are removed. A flow sending at least
``elephant_share`` of its ingress link's capacity is an elephant (and stops being one
below half of that, so the label does not flap).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from controller.model import ETH_TYPE_IPV4, EthFrame, Match, MatchValue

IP_PROTO_TCP = 6
IP_PROTO_UDP = 17


@dataclass(frozen=True, order=True)
class FlowKey:
    ipv4_src: str
    ipv4_dst: str
    ip_proto: int
    l4_src: int
    l4_dst: int

    def match_fields(self) -> dict[str, MatchValue]:
        l4 = "tcp" if self.ip_proto == IP_PROTO_TCP else "udp"
        return {
            "eth_type": ETH_TYPE_IPV4,
            "ip_proto": self.ip_proto,
            "ipv4_src": self.ipv4_src,
            "ipv4_dst": self.ipv4_dst,
            f"{l4}_src": self.l4_src,
            f"{l4}_dst": self.l4_dst,
        }

    def reverse(self) -> FlowKey:
        """The other direction of the same conversation (a TCP flow's ACK stream)."""
        return FlowKey(self.ipv4_dst, self.ipv4_src, self.ip_proto, self.l4_dst, self.l4_src)

    @property
    def ident(self) -> int:
        """Stable 32-bit id (cookies, labels): CRC32, never Python's ``hash()``."""
        return zlib.crc32(repr(self).encode())

    def __str__(self) -> str:
        proto = "tcp" if self.ip_proto == IP_PROTO_TCP else "udp"
        return f"{proto}:{self.ipv4_src}:{self.l4_src}->{self.ipv4_dst}:{self.l4_dst}"

    @staticmethod
    def of_frame(frame: EthFrame) -> FlowKey | None:
        if frame.ip_proto not in (IP_PROTO_TCP, IP_PROTO_UDP) or frame.l4_src is None:
            return None
        if frame.ipv4_src is None or frame.ipv4_dst is None or frame.l4_dst is None:
            return None
        return FlowKey(frame.ipv4_src, frame.ipv4_dst, frame.ip_proto, frame.l4_src, frame.l4_dst)

    @staticmethod
    def of_match(match: Match) -> FlowKey | None:
        """The key of an accounting or pin rule's match; ``None`` for any other match."""
        m = match.as_dict()
        proto = m.get("ip_proto")
        l4 = "tcp" if proto == IP_PROTO_TCP else "udp"
        src, dst = m.get("ipv4_src"), m.get("ipv4_dst")
        sport, dport = m.get(f"{l4}_src"), m.get(f"{l4}_dst")
        if not (isinstance(src, str) and isinstance(dst, str) and isinstance(proto, int)):
            return None
        if not (isinstance(sport, int) and isinstance(dport, int)):
            return None
        return FlowKey(src, dst, proto, sport, dport)


@dataclass
class TrackedFlow:
    key: FlowKey
    src_mac: str
    dst_mac: str
    ingress: int  # dpid of the edge switch the flow enters
    in_port: int
    first_seen: float
    last_active: float
    bytes: int = 0
    sampled_at: float | None = None
    rate_bps: float = 0.0
    elephant: bool = False


@dataclass
class FlowTable:
    elephant_share: float = 0.1
    idle_timeout: float = 10.0
    smoothing: float = 0.5
    flows: dict[FlowKey, TrackedFlow] = field(default_factory=dict)
    tcp_bps: float = 0.0  # what tracked TCP flows send in all (kept as rates change)

    def seen(
        self, now: float, key: FlowKey, src_mac: str, dst_mac: str, dpid: int, port: int
    ) -> bool:
        """A packet-in from the catch rule; True when the flow is new."""
        if key in self.flows:
            return False
        self.flows[key] = TrackedFlow(key, src_mac, dst_mac, dpid, port, now, now)
        return True

    def counted(self, now: float, key: FlowKey, byte_count: int, capacity_bps: float) -> None:
        """A flow-statistics reading of the flow's accounting rule at its ingress."""
        flow = self.flows.get(key)
        if flow is None:
            return
        if flow.sampled_at is not None and now > flow.sampled_at and byte_count >= flow.bytes:
            rate = 8 * (byte_count - flow.bytes) / (now - flow.sampled_at)
            before = flow.rate_bps
            flow.rate_bps = self.smoothing * rate + (1 - self.smoothing) * flow.rate_bps
            if key.ip_proto == IP_PROTO_TCP:
                self.tcp_bps = max(0.0, self.tcp_bps + flow.rate_bps - before)
        if byte_count > flow.bytes:
            flow.last_active = now
        flow.bytes, flow.sampled_at = byte_count, now
        threshold = self.elephant_share * capacity_bps
        if capacity_bps > 0:
            flow.elephant = flow.rate_bps >= (threshold / 2 if flow.elephant else threshold)

    def expire(self, now: float) -> list[TrackedFlow]:
        gone = [f for f in self.flows.values() if now - f.last_active > self.idle_timeout]
        for f in gone:
            del self.flows[f.key]
            self._gone(f)
        return gone

    def elephants(self) -> list[TrackedFlow]:
        return sorted((f for f in self.flows.values() if f.elephant), key=lambda f: f.key)

    def forget_switch(self, dpid: int) -> list[TrackedFlow]:
        gone = [f for f in self.flows.values() if f.ingress == dpid]
        for f in gone:
            del self.flows[f.key]
            self._gone(f)
        return gone

    def _gone(self, flow: TrackedFlow) -> None:
        if flow.key.ip_proto == IP_PROTO_TCP:
            self.tcp_bps = max(0.0, self.tcp_bps - flow.rate_bps)
