"""Validation of actions and instructions, done when a message arrives, as a switch would.

A switch rejects a flow or group whose actions it cannot run (bad port, missing group,
a set-field whose header the match does not guarantee, ...). Checking here, at ``send``
time, makes a controller bug fail at the line that produced the bad message rather than as
a puzzling trace later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser

from .errors import UnsupportedError, action_error, instruction_error, meter_error
from .fields import FIELDS, NOT_SETTABLE, OFPVID_PRESENT, MatchDict, prereq_met, to_int

# Action-set execution order (OpenFlow 1.3.5 section 5.10); lower runs first.
SET_ORDER: dict[type, int] = {
    parser.OFPActionCopyTtlIn: 0,
    parser.OFPActionPopVlan: 1,
    parser.OFPActionPopMpls: 1,
    parser.OFPActionPopPbb: 1,
    parser.OFPActionPushMpls: 2,
    parser.OFPActionPushPbb: 3,
    parser.OFPActionPushVlan: 4,
    parser.OFPActionCopyTtlOut: 5,
    parser.OFPActionDecNwTtl: 6,
    parser.OFPActionDecMplsTtl: 6,
    parser.OFPActionSetField: 7,
    parser.OFPActionSetNwTtl: 7,
    parser.OFPActionSetMplsTtl: 7,
    parser.OFPActionSetQueue: 8,
    parser.OFPActionGroup: 9,
    parser.OFPActionOutput: 10,
}
SUPPORTED = (
    parser.OFPActionOutput,
    parser.OFPActionGroup,
    parser.OFPActionSetQueue,
    parser.OFPActionSetField,
    parser.OFPActionPushVlan,
    parser.OFPActionPopVlan,
    parser.OFPActionDecNwTtl,
    parser.OFPActionSetNwTtl,
    parser.NXActionRegMove,  # Open vSwitch's move: an extension OVS accepts in OpenFlow 1.3
)
VALID_RESERVED_OUT = {ofp.OFPP_IN_PORT, ofp.OFPP_FLOOD, ofp.OFPP_ALL, ofp.OFPP_CONTROLLER}
VALID_RESERVED_OUT.add(ofp.OFPP_LOCAL)

PORT_NAMES = {
    ofp.OFPP_IN_PORT: "IN_PORT",
    ofp.OFPP_TABLE: "TABLE",
    ofp.OFPP_NORMAL: "NORMAL",
    ofp.OFPP_FLOOD: "FLOOD",
    ofp.OFPP_ALL: "ALL",
    ofp.OFPP_CONTROLLER: "CONTROLLER",
    ofp.OFPP_LOCAL: "LOCAL",
    ofp.OFPP_ANY: "ANY",
}


def port_name(port: int | None) -> str:
    if port is None:
        return "-"
    return PORT_NAMES.get(port, str(port))


def set_key(action: Any) -> object:
    """Identity of an action in the action set: one per type, set-field one per field."""
    if isinstance(action, parser.OFPActionSetField):
        return ("set_field", action.key)
    return type(action).__name__


def describe_action(action: Any) -> str:
    if isinstance(action, parser.OFPActionOutput):
        return f"output:{port_name(action.port)}"
    if isinstance(action, parser.OFPActionGroup):
        return f"group:{action.group_id}"
    if isinstance(action, parser.OFPActionSetQueue):
        return f"set_queue:{action.queue_id}"
    if isinstance(action, parser.OFPActionSetField):
        return f"set_field:{action.key}={action.value}"
    if isinstance(action, parser.OFPActionPushVlan):
        return f"push_vlan:{action.ethertype:#06x}"
    if isinstance(action, parser.OFPActionSetNwTtl):
        return f"set_nw_ttl:{action.nw_ttl}"
    if isinstance(action, parser.NXActionRegMove):
        return f"move:{action.src_field}->{action.dst_field}"
    return type(action).__name__.removeprefix("OFPAction").lower()


def validate_action(action: Any, groups: Any, *, packet_out: bool = False) -> None:
    """Reject what a switch would reject; ``groups`` is the switch's group table."""
    if not isinstance(action, SUPPORTED):
        if isinstance(action, tuple(SET_ORDER)):
            raise UnsupportedError(f"the fake fabric does not model {type(action).__name__}")
        raise action_error("OFPBAC_BAD_TYPE", f"not an OpenFlow 1.3 action: {action!r}")
    if isinstance(action, parser.OFPActionOutput):
        _validate_output(action.port, packet_out=packet_out)
    elif isinstance(action, parser.OFPActionGroup):
        if action.group_id not in groups:
            raise action_error("OFPBAC_BAD_OUT_GROUP", f"group {action.group_id} does not exist")
    elif isinstance(action, parser.OFPActionSetField):
        _validate_set_field(action.key, action.value)
    elif isinstance(action, parser.OFPActionPushVlan):
        if action.ethertype not in (0x8100, 0x88A8):
            raise action_error("OFPBAC_BAD_ARGUMENT", f"push_vlan ethertype {action.ethertype:#x}")
    elif isinstance(action, parser.NXActionRegMove):
        _validate_move(action)
    elif isinstance(action, parser.OFPActionSetNwTtl) and not 0 <= action.nw_ttl <= 255:
        raise action_error("OFPBAC_BAD_ARGUMENT", f"set_nw_ttl {action.nw_ttl}")


def _validate_output(port: int, *, packet_out: bool) -> None:
    """An output port must be physical or a reserved port a switch accepts here."""
    if port == ofp.OFPP_NORMAL:
        raise UnsupportedError("output:NORMAL (the switch's own L2 learning) is not modelled")
    if port == ofp.OFPP_TABLE and not packet_out:
        raise action_error("OFPBAC_BAD_OUT_PORT", "output:TABLE is only valid in PacketOut")
    if not (1 <= port <= ofp.OFPP_MAX or port in VALID_RESERVED_OUT or port == ofp.OFPP_TABLE):
        raise action_error("OFPBAC_BAD_OUT_PORT", f"output to invalid port {port_name(port)}")


def _validate_set_field(field: str, value: Any) -> None:
    """A set-field must name a settable field, unmasked, with a value that fits it."""
    if field not in FIELDS or field in NOT_SETTABLE:
        raise action_error("OFPBAC_BAD_SET_TYPE", f"set_field cannot set {field}")
    if isinstance(value, tuple):
        raise action_error("OFPBAC_BAD_SET_ARGUMENT", f"masked set_field {field} (OF 1.5)")
    try:
        number = to_int(field, value)
    except ValueError as exc:
        raise action_error("OFPBAC_BAD_SET_ARGUMENT", str(exc)) from None
    if field == "vlan_vid" and not number & OFPVID_PRESENT:
        raise action_error(
            "OFPBAC_BAD_SET_ARGUMENT",
            f"set_field vlan_vid={number:#x} must carry OFPVID_PRESENT (0x1000 | vid)",
        )


def _validate_move(action: Any) -> None:
    """A move copies whole fields here: both known, the destination writable, the same
    width, and the bit count that width (partial moves are not modelled)."""
    src, dst = action.src_field, action.dst_field
    for name in (src, dst):
        if name not in FIELDS:
            raise UnsupportedError(f"move of {name} is not modelled")
    if dst in NOT_SETTABLE:
        raise action_error("OFPBAC_BAD_SET_TYPE", f"move cannot write {dst}")
    width = FIELDS[src].width
    if FIELDS[dst].width != width or action.n_bits != width or action.src_ofs or action.dst_ofs:
        raise action_error("OFPBAC_BAD_SET_ARGUMENT", f"move {src}->{dst}: not whole fields")


def validate_bucket(actions: Sequence[Any], groups: Any) -> None:
    """Bucket actions are an action set in OpenFlow 1.3 (5.6.1), while Open vSwitch runs them
    as a list. Only lists on which both readings agree are accepted: at most one action of
    each kind, already in action-set order, and not both group and output.
    """
    for action in actions:
        validate_action(action, groups)
    keys = [set_key(a) for a in actions]
    if len(keys) != len(set(keys)):
        raise action_error("OFPBAC_TOO_MANY", "a bucket holds two actions of one kind")
    ranks = [SET_ORDER[type(a)] for a in actions]
    if ranks != sorted(ranks):
        raise action_error(
            "OFPBAC_UNSUPPORTED_ORDER",
            "bucket actions out of action-set order: " + ", ".join(map(describe_action, actions)),
        )
    if 9 in ranks and 10 in ranks:
        raise action_error("OFPBAC_UNSUPPORTED_ORDER", "a bucket with both group and output")


@dataclass
class Program:
    """A flow entry's instructions, sorted into the order the spec executes them."""

    meter: int | None = None
    apply: list[Any] | None = None
    clear: bool = False
    write: list[Any] | None = None
    metadata: tuple[int, int] | None = None
    goto: int | None = None

    def actions(self) -> list[Any]:
        return [*(self.apply or ()), *(self.write or ())]

    def out_ports(self) -> set[int]:
        return {a.port for a in self.actions() if isinstance(a, parser.OFPActionOutput)}

    def out_groups(self) -> set[int]:
        return {a.group_id for a in self.actions() if isinstance(a, parser.OFPActionGroup)}

    def describe(self) -> str:
        parts = []
        if self.meter is not None:
            parts.append(f"meter:{self.meter}")
        if self.apply is not None:
            parts.append("apply(" + ",".join(map(describe_action, self.apply)) + ")")
        if self.clear:
            parts.append("clear")
        if self.write is not None:
            parts.append("write(" + ",".join(map(describe_action, self.write)) + ")")
        if self.metadata is not None:
            parts.append(f"metadata:{self.metadata[0]:#x}/{self.metadata[1]:#x}")
        if self.goto is not None:
            parts.append(f"goto:{self.goto}")
        return " ".join(parts) or "drop"


def compile_instructions(
    instructions: Sequence[Any],
    table_id: int,
    n_tables: int,
    match: MatchDict,
    groups: Any,
    meters: Any,
) -> Program:
    """Check a FlowMod's instructions against the switch and the entry's match."""
    prog = Program()
    seen: set[int] = set()
    for inst in instructions or ():
        kind = getattr(inst, "type", None)
        if kind in seen:
            raise instruction_error("OFPBIC_UNSUP_INST", f"two instructions of type {kind}")
        seen.add(kind)  # type: ignore[arg-type]
        if isinstance(inst, parser.OFPInstructionGotoTable):
            if not table_id < inst.table_id < n_tables:
                raise instruction_error(
                    "OFPBIC_BAD_TABLE_ID", f"goto_table {inst.table_id} from table {table_id}"
                )
            prog.goto = inst.table_id
        elif isinstance(inst, parser.OFPInstructionWriteMetadata):
            prog.metadata = (inst.metadata, inst.metadata_mask)
        elif isinstance(inst, parser.OFPInstructionMeter):
            if inst.meter_id not in meters:
                raise meter_error("OFPMMFC_UNKNOWN_METER", f"meter {inst.meter_id} does not exist")
            prog.meter = inst.meter_id
        elif isinstance(inst, parser.OFPInstructionActions) and kind == ofp.OFPIT_CLEAR_ACTIONS:
            if inst.actions:
                raise instruction_error("OFPBIC_BAD_LEN", "clear_actions carries actions")
            prog.clear = True
        elif isinstance(inst, parser.OFPInstructionActions) and kind in (
            ofp.OFPIT_APPLY_ACTIONS,
            ofp.OFPIT_WRITE_ACTIONS,
        ):
            for action in inst.actions:
                validate_action(action, groups)
            if kind == ofp.OFPIT_APPLY_ACTIONS:
                prog.apply = list(inst.actions)
            else:
                keys = [set_key(a) for a in inst.actions]
                if len(keys) != len(set(keys)):
                    raise action_error("OFPBAC_TOO_MANY", "write_actions holds two of one kind")
                prog.write = list(inst.actions)
        else:
            raise instruction_error("OFPBIC_UNKNOWN_INST", f"unknown instruction {inst!r}")
    _check_consistency(prog, match)
    return prog


def _check_consistency(prog: Program, match: MatchDict) -> None:
    """Set-fields and TTL actions need headers the match guarantees (OFPBAC_MATCH_INCONSISTENT,
    as Open vSwitch enforces); VLAN headers may also come from an earlier push_vlan."""
    tagged = prereq_met(match, "vlan_pcp")

    def check(action: Any, tagged: bool) -> None:
        if isinstance(action, parser.OFPActionSetField):
            field = action.key
            ok = tagged if field in ("vlan_vid", "vlan_pcp") else prereq_met(match, field)
        elif isinstance(action, parser.OFPActionDecNwTtl | parser.OFPActionSetNwTtl):
            ok = prereq_met(match, "ip_proto")
        elif isinstance(action, parser.NXActionRegMove):
            ok = prereq_met(match, action.src_field) and prereq_met(match, action.dst_field)
        else:
            return
        if not ok:
            raise action_error(
                "OFPBAC_MATCH_INCONSISTENT",
                f"{describe_action(action)}: the match does not guarantee that header",
            )

    for action in prog.apply or ():
        if isinstance(action, parser.OFPActionPushVlan):
            tagged = True
        elif isinstance(action, parser.OFPActionPopVlan):
            tagged = False
        check(action, tagged)
    write = prog.write or []
    if any(isinstance(a, parser.OFPActionPushVlan) for a in write):
        tagged = True
    elif any(isinstance(a, parser.OFPActionPopVlan) for a in write):
        tagged = False
    for action in write:
        check(action, tagged)
