"""Which message did a switch reject?

A switch answers a bad message with an asynchronous OFPT_ERROR that carries only the
message's xid and the first bytes of it. The shim remembers what it sent under each
xid (the last ``keep`` messages per switch), so the log names the rule a switch refused
(the core then reads that switch back and repairs it), with the spec's error names.
"""

from __future__ import annotations

from collections import OrderedDict

from controller.model import Message
from controller.ofp.compat import ofp

# OFPET_* type -> prefix of its codes' names, per OpenFlow 1.3 section A.4.4.
_CODE_PREFIX = {
    "OFPET_HELLO_FAILED": "OFPHFC_",
    "OFPET_BAD_REQUEST": "OFPBRC_",
    "OFPET_BAD_ACTION": "OFPBAC_",
    "OFPET_BAD_INSTRUCTION": "OFPBIC_",
    "OFPET_BAD_MATCH": "OFPBMC_",
    "OFPET_FLOW_MOD_FAILED": "OFPFMFC_",
    "OFPET_GROUP_MOD_FAILED": "OFPGMFC_",
    "OFPET_PORT_MOD_FAILED": "OFPPMFC_",
    "OFPET_TABLE_MOD_FAILED": "OFPTMFC_",
    "OFPET_QUEUE_OP_FAILED": "OFPQOFC_",
    "OFPET_SWITCH_CONFIG_FAILED": "OFPSCFC_",
    "OFPET_ROLE_REQUEST_FAILED": "OFPRRFC_",
    "OFPET_METER_MOD_FAILED": "OFPMMFC_",
    "OFPET_TABLE_FEATURES_FAILED": "OFPTFFC_",
}


def error_name(type_: int, code: int) -> str:
    """``OFPET_BAD_ACTION/OFPBAC_BAD_OUT_GROUP`` for (2, 9); numbers where unknown."""
    type_name = next((t for t in _CODE_PREFIX if getattr(ofp, t, None) == type_), None)
    if type_name is None:
        return f"type={type_} code={code}"
    prefix = _CODE_PREFIX[type_name]
    codes = sorted(n for n in dir(ofp) if n.startswith(prefix) and getattr(ofp, n) == code)
    return f"{type_name}/{codes[0] if codes else code}"


class SentMessages:
    """The last ``keep`` rule messages sent to each switch, by xid."""

    def __init__(self, keep: int = 20000) -> None:
        self.keep = keep
        self._sent: dict[int, OrderedDict[int, Message]] = {}

    def sent(self, dpid: int, xid: int, msg: Message) -> None:
        log = self._sent.setdefault(dpid, OrderedDict())
        log[xid] = msg
        if len(log) > self.keep:
            log.popitem(last=False)

    def take(self, dpid: int, xid: int) -> Message | None:
        return self._sent.get(dpid, OrderedDict()).pop(xid, None)

    def switch_gone(self, dpid: int) -> None:
        self._sent.pop(dpid, None)
