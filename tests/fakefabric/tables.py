"""One switch's state: flow tables, group table and meter table, changed by Ryu messages
exactly as OpenFlow 1.3.5 section 6.4-6.6 describes (OpenFlow 1.2+ semantics: MODIFY never
inserts, ADD over an identical entry keeps counters unless OFPFF_RESET_COUNTS).

Every check runs before anything changes, so a rejected message leaves the switch as it was,
as a real switch does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser

from .actions import Program, compile_instructions, validate_bucket
from .errors import OFError, flow_error, group_error, meter_error, request_error
from .fields import MatchDict, covers, match_display, match_from_ofp, overlaps

FLOW_FLAGS = (
    ofp.OFPFF_SEND_FLOW_REM
    | ofp.OFPFF_CHECK_OVERLAP
    | ofp.OFPFF_RESET_COUNTS
    | ofp.OFPFF_NO_PKT_COUNTS
    | ofp.OFPFF_NO_BYT_COUNTS
)
GROUP_TYPES = {
    ofp.OFPGT_ALL: "all",
    ofp.OFPGT_SELECT: "select",
    ofp.OFPGT_INDIRECT: "indirect",
    ofp.OFPGT_FF: "ff",
}
METER_FLAGS = ofp.OFPMF_KBPS | ofp.OFPMF_PKTPS | ofp.OFPMF_BURST | ofp.OFPMF_STATS
VIRTUAL_METERS = (ofp.OFPM_SLOWPATH, ofp.OFPM_CONTROLLER)


@dataclass(eq=False)
class FlowEntry:
    """An installed flow entry. ``match`` is in Ryu's user form (see ``fields.match_display``)."""

    table_id: int
    priority: int
    match: dict[str, object]
    instructions: list[Any]
    cookie: int
    idle_timeout: int
    hard_timeout: int
    flags: int
    seq: int
    packet_count: int = 0
    byte_count: int = 0
    program: Program = field(default_factory=Program, repr=False)
    key: MatchDict = field(default_factory=dict, repr=False)

    @property
    def is_table_miss(self) -> bool:
        return self.priority == 0 and not self.key

    def describe(self) -> str:
        match = ",".join(f"{k}={v}" for k, v in self.match.items()) or "*"
        return (
            f"table={self.table_id} prio={self.priority} cookie={self.cookie:#x} "
            f"match[{match}] -> {self.program.describe()}"
        )


@dataclass(eq=False)
class GroupEntry:
    group_id: int
    type: int
    buckets: list[Any]

    @property
    def type_name(self) -> str:
        return GROUP_TYPES[self.type]

    def referenced_groups(self) -> set[int]:
        return {
            a.group_id
            for b in self.buckets
            for a in b.actions or ()
            if isinstance(a, parser.OFPActionGroup)
        }


@dataclass(eq=False)
class MeterEntry:
    meter_id: int
    flags: int
    bands: list[Any]


@dataclass
class HardwareLimits:
    """What a switch model caps (None: no cap), enforced with the errors a real switch
    sends, so a test proves the controller stays within a profile rather than trusting it."""

    select_buckets: int | None = None
    groups: int | None = None
    fast_failover: bool = True
    flows: int | None = None

    def check_group(self, group_type: int, buckets: int, groups_after: int) -> None:
        if group_type == ofp.OFPGT_FF and not self.fast_failover:
            raise group_error("OFPGMFC_BAD_TYPE", "this switch has no fast-failover groups")
        most = self.select_buckets
        if group_type == ofp.OFPGT_SELECT and most is not None and buckets > most:
            raise group_error("OFPGMFC_OUT_OF_BUCKETS", f"{buckets} buckets > {most}")
        if self.groups is not None and groups_after > self.groups:
            raise group_error("OFPGMFC_OUT_OF_GROUPS", f"the group table holds {self.groups}")


class SwitchTables:
    """Flow, group and meter tables of one switch, plus what it was sent."""

    def __init__(self, dpid: int, name: str, n_tables: int):
        self.dpid = dpid
        self.name = name
        self.n_tables = n_tables
        self.tables: dict[int, list[FlowEntry]] = {}
        self.groups: dict[int, GroupEntry] = {}
        self.meters: dict[int, MeterEntry] = {}
        self._seq = 0
        self._index: dict[int, list[_MaskGroup]] = {}
        self.limits = HardwareLimits()

    # ---- flows ---------------------------------------------------------------------------

    def flows(self, table_id: int | None = None) -> list[FlowEntry]:
        """Entries as a lookup sees them: table, then priority high to low, then age."""
        ids = sorted(self.tables) if table_id is None else [table_id]
        return [e for tid in ids for e in self.tables.get(tid, [])]

    def flow_mod(self, msg: Any) -> None:
        cmd = msg.command
        if cmd not in (
            ofp.OFPFC_ADD,
            ofp.OFPFC_MODIFY,
            ofp.OFPFC_MODIFY_STRICT,
            ofp.OFPFC_DELETE,
            ofp.OFPFC_DELETE_STRICT,
        ):
            raise flow_error("OFPFMFC_BAD_COMMAND", f"flow_mod command {cmd}")
        deleting = cmd in (ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT)
        if not (0 <= msg.table_id < self.n_tables or (deleting and msg.table_id == ofp.OFPTT_ALL)):
            raise flow_error("OFPFMFC_BAD_TABLE_ID", f"table {msg.table_id}")
        if msg.flags & ~FLOW_FLAGS:
            raise flow_error("OFPFMFC_BAD_FLAGS", f"flags {msg.flags:#x}")
        if not deleting and msg.buffer_id != ofp.OFP_NO_BUFFER:
            raise request_error("OFPBRC_BUFFER_UNKNOWN", f"buffer_id {msg.buffer_id}: no buffers")
        match = match_from_ofp(msg.match)
        if cmd == ofp.OFPFC_ADD:
            self._add(msg, match)
        elif deleting:
            self.delete_flows(self._select(msg, match, strict=cmd == ofp.OFPFC_DELETE_STRICT))
        else:
            self._modify(msg, match, strict=cmd == ofp.OFPFC_MODIFY_STRICT)

    def _compile(self, msg: Any, table_id: int, match: MatchDict) -> Program:
        return compile_instructions(
            msg.instructions, table_id, self.n_tables, match, self.groups, self.meters
        )

    def _add(self, msg: Any, match: MatchDict) -> None:
        prog = self._compile(msg, msg.table_id, match)
        table = self.tables.setdefault(msg.table_id, [])
        same_prio = [e for e in table if e.priority == msg.priority]
        if msg.flags & ofp.OFPFF_CHECK_OVERLAP:
            for other in same_prio:
                if overlaps(other.key, match):
                    raise flow_error("OFPFMFC_OVERLAP", f"overlaps {other.describe()}")
        old = next((e for e in same_prio if e.key == match), None)
        cap = self.limits.flows
        if old is None and cap is not None and sum(map(len, self.tables.values())) >= cap:
            raise flow_error("OFPFMFC_TABLE_FULL", f"the switch holds its maximum of {cap} flows")
        self._seq += 1
        entry = FlowEntry(
            table_id=msg.table_id,
            priority=msg.priority,
            match=match_display(match),
            instructions=list(msg.instructions or ()),
            cookie=msg.cookie,
            idle_timeout=msg.idle_timeout,
            hard_timeout=msg.hard_timeout,
            flags=msg.flags,
            seq=self._seq,
            program=prog,
            key=match,
        )
        if old is not None:
            table.remove(old)
            if not msg.flags & ofp.OFPFF_RESET_COUNTS:
                entry.packet_count, entry.byte_count = old.packet_count, old.byte_count
        table.append(entry)
        table.sort(key=lambda e: (-e.priority, e.seq))  # kept in lookup order
        self._index.pop(msg.table_id, None)

    def _select(self, msg: Any, match: MatchDict, strict: bool) -> list[FlowEntry]:
        """Entries a modify/delete acts on: strict = same priority and identical match;
        otherwise every entry at least as specific as ``match`` (priority ignored). Cookie
        filter when cookie_mask != 0; out_port/out_group filters for deletes only."""
        deleting = msg.command in (ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT)
        tids = sorted(self.tables) if msg.table_id == ofp.OFPTT_ALL else [msg.table_id]
        out = []
        for tid in tids:
            for e in self.flows(tid):
                if strict and (e.priority != msg.priority or e.key != match):
                    continue
                if not strict and not covers(match, e.key):
                    continue
                if e.cookie & msg.cookie_mask != msg.cookie & msg.cookie_mask:
                    continue
                if deleting and not self._outputs_to(e, msg.out_port, msg.out_group):
                    continue
                out.append(e)
        return out

    @staticmethod
    def _outputs_to(entry: FlowEntry, out_port: int, out_group: int) -> bool:
        """The delete filters: OFPP_ANY / OFPG_ANY disable them. Ryu's OFPFlowMod defaults
        are out_port=0, out_group=0, which filter (port 0 is never an output)."""
        if out_port != ofp.OFPP_ANY and out_port not in entry.program.out_ports():
            return False
        return out_group == ofp.OFPG_ANY or out_group in entry.program.out_groups()

    def _modify(self, msg: Any, match: MatchDict, strict: bool) -> None:
        targets = self._select(msg, match, strict)
        progs = [self._compile(msg, e.table_id, e.key) for e in targets]
        for entry, prog in zip(targets, progs, strict=True):
            entry.instructions = list(msg.instructions or ())
            entry.program = prog
            if msg.flags & ofp.OFPFF_RESET_COUNTS:
                entry.packet_count = entry.byte_count = 0

    def delete_flows(self, entries: list[FlowEntry]) -> None:
        for e in entries:
            self.tables[e.table_id].remove(e)
            self._index.pop(e.table_id, None)

    def lookup(
        self, table_id: int, pkt: dict[str, int], in_port: int, metadata: int
    ) -> list[FlowEntry]:
        """The matching entries of the highest priority, oldest first (more than one only
        when overlapping entries tie, which OpenFlow leaves undefined).

        Tuple-space search: entries are grouped by which fields they match under which
        masks, so each group is one dict probe instead of a scan; the result is the same as
        testing every entry with ``fields.packet_matches``.
        """
        if table_id not in self._index:
            self._index[table_id] = _build_index(self.tables.get(table_id, []))
        best: list[FlowEntry] = []
        for top, sig, entries_by_key in self._index[table_id]:
            if best and top < best[0].priority:
                break
            key = []
            for name, mask in sig:
                if name in ("in_port", "in_phy_port"):
                    value: int | None = in_port
                elif name == "metadata":
                    value = metadata
                elif name == "vlan_vid":
                    value = pkt.get("vlan_vid", 0)  # untagged = OFPVID_NONE
                else:
                    value = pkt.get(name)
                if value is None:
                    break  # the packet lacks the field: nothing in this group matches
                key.append(value & mask)
            else:
                found = entries_by_key.get(tuple(key))
                if found:
                    prio = found[0].priority
                    if not best or prio > best[0].priority:
                        best = [e for e in found if e.priority == prio]
                    elif prio == best[0].priority:
                        best += [e for e in found if e.priority == prio]
        return sorted(best, key=lambda e: e.seq)

    # ---- groups --------------------------------------------------------------------------

    def group_mod(self, msg: Any) -> None:
        cmd, gid = msg.command, msg.group_id
        if cmd == ofp.OFPGC_DELETE:
            self._delete_group(gid)
            return
        if cmd not in (ofp.OFPGC_ADD, ofp.OFPGC_MODIFY):
            raise group_error("OFPGMFC_BAD_COMMAND", f"group_mod command {cmd}")
        if not 0 <= gid <= ofp.OFPG_MAX:
            raise group_error("OFPGMFC_INVALID_GROUP", f"group id {gid:#x}")
        if cmd == ofp.OFPGC_ADD and gid in self.groups:
            raise group_error("OFPGMFC_GROUP_EXISTS", f"group {gid} exists")
        if cmd == ofp.OFPGC_MODIFY and gid not in self.groups:
            raise group_error("OFPGMFC_UNKNOWN_GROUP", f"group {gid} does not exist")
        if msg.type not in GROUP_TYPES:
            raise group_error("OFPGMFC_BAD_TYPE", f"group type {msg.type}")
        buckets = list(msg.buckets or ())
        self.limits.check_group(msg.type, len(buckets), len(self.groups) + (gid not in self.groups))
        if msg.type == ofp.OFPGT_INDIRECT and len(buckets) != 1:
            raise group_error("OFPGMFC_INVALID_GROUP", "an indirect group has exactly one bucket")
        for b in buckets:
            if msg.type == ofp.OFPGT_FF and (
                b.watch_port == ofp.OFPP_ANY and b.watch_group == ofp.OFPG_ANY
            ):
                raise group_error("OFPGMFC_BAD_WATCH", "fast-failover bucket watches nothing")
            if b.watch_group != ofp.OFPG_ANY and b.watch_group not in self.groups:
                raise group_error("OFPGMFC_BAD_WATCH", f"watch_group {b.watch_group} unknown")
            validate_bucket(b.actions or (), self.groups)
        entry = GroupEntry(gid, msg.type, buckets)
        if self._reaches(entry.referenced_groups(), gid, entry):
            raise group_error("OFPGMFC_LOOP", f"group {gid} would forward to itself")
        self.groups[gid] = entry

    def _reaches(self, start: set[int], target: int, replacing: GroupEntry) -> bool:
        todo, seen = list(start), set()
        while todo:
            gid = todo.pop()
            if gid == target:
                return True
            if gid in seen:
                continue
            seen.add(gid)
            group = replacing if gid == replacing.group_id else self.groups.get(gid)
            if group is not None:
                todo.extend(group.referenced_groups())
        return False

    def _delete_group(self, gid: int) -> None:
        """Deleting a group also deletes every flow entry that forwards to it (6.5)."""
        if gid == ofp.OFPG_ALL:
            doomed = set(self.groups)
        elif gid in self.groups:
            users = [g.group_id for g in self.groups.values() if gid in g.referenced_groups()]
            if users:
                raise group_error("OFPGMFC_CHAINED_GROUP", f"groups {users} forward to {gid}")
            doomed = {gid}
        else:
            return  # deleting a missing group is not an error
        self.delete_flows([e for e in self.flows() if e.program.out_groups() & doomed])
        for g in doomed:
            del self.groups[g]

    # ---- meters --------------------------------------------------------------------------

    def meter_mod(self, msg: Any) -> None:
        cmd, mid = msg.command, msg.meter_id
        if cmd == ofp.OFPMC_DELETE:
            self._delete_meter(mid)
            return
        if cmd not in (ofp.OFPMC_ADD, ofp.OFPMC_MODIFY):
            raise meter_error("OFPMMFC_BAD_COMMAND", f"meter_mod command {cmd}")
        if not (1 <= mid <= ofp.OFPM_MAX or mid in VIRTUAL_METERS):
            raise meter_error("OFPMMFC_INVALID_METER", f"meter id {mid:#x}")
        if cmd == ofp.OFPMC_ADD and mid in self.meters:
            raise meter_error("OFPMMFC_METER_EXISTS", f"meter {mid} exists")
        if cmd == ofp.OFPMC_MODIFY and mid not in self.meters:
            raise meter_error("OFPMMFC_UNKNOWN_METER", f"meter {mid} does not exist")
        rate_flags = msg.flags & (ofp.OFPMF_KBPS | ofp.OFPMF_PKTPS)
        if msg.flags & ~METER_FLAGS or rate_flags == ofp.OFPMF_KBPS | ofp.OFPMF_PKTPS:
            raise meter_error("OFPMMFC_BAD_FLAGS", f"meter flags {msg.flags:#x}")
        for band in msg.bands or ():
            if band.type not in (ofp.OFPMBT_DROP, ofp.OFPMBT_DSCP_REMARK):
                raise meter_error("OFPMMFC_BAD_BAND", f"meter band type {band.type}")
            if band.rate <= 0:
                raise meter_error("OFPMMFC_BAD_RATE", f"meter band rate {band.rate}")
        self.meters[mid] = MeterEntry(mid, msg.flags, list(msg.bands or ()))

    def _delete_meter(self, mid: int) -> None:
        """Deleting a meter also deletes the flow entries that use it."""
        if mid == ofp.OFPM_ALL:
            doomed = set(self.meters)
        elif mid in self.meters:
            doomed = {mid}
        else:
            return
        self.delete_flows([e for e in self.flows() if e.program.meter in doomed])
        for m in doomed:
            del self.meters[m]


_MaskGroup = tuple[int, tuple[tuple[str, int], ...], dict[tuple[int, ...], list[FlowEntry]]]


def _build_index(entries: list[FlowEntry]) -> list[_MaskGroup]:
    """Group entries (already in lookup order) by mask signature, best group first."""
    groups: dict[tuple[tuple[str, int], ...], dict[tuple[int, ...], list[FlowEntry]]] = {}
    top: dict[tuple[tuple[str, int], ...], int] = {}
    for e in entries:
        sig = tuple(sorted((name, mask) for name, (_, mask) in e.key.items()))
        key = tuple(e.key[name][0] for name, _ in sig)
        groups.setdefault(sig, {}).setdefault(key, []).append(e)
        top.setdefault(sig, e.priority)
    return sorted(((top[s], s, g) for s, g in groups.items()), key=lambda t: -t[0])


def check_packet_out(msg: Any, ports: set[int]) -> None:
    """What a switch checks on OFPT_PACKET_OUT before running its actions."""
    if msg.buffer_id != ofp.OFP_NO_BUFFER:
        raise request_error("OFPBRC_BUFFER_UNKNOWN", f"buffer_id {msg.buffer_id}: no buffers")
    if msg.in_port not in ports and msg.in_port not in (ofp.OFPP_CONTROLLER, ofp.OFPP_LOCAL):
        raise request_error("OFPBRC_BAD_PORT", f"packet_out in_port {msg.in_port}")
    if not msg.data:
        raise request_error("OFPBRC_BAD_LEN", "packet_out without data")


__all__ = ["FlowEntry", "GroupEntry", "MeterEntry", "OFError", "SwitchTables"]
