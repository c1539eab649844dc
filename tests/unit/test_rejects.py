"""A switch's error names the message it refused, in the spec's words."""

from __future__ import annotations

from controller.model import FlowMod, FlowRule, Match, Op, Table
from controller.ofp.rejects import SentMessages, error_name


def test_error_names_follow_the_spec() -> None:
    assert error_name(2, 9) == "OFPET_BAD_ACTION/OFPBAC_BAD_OUT_GROUP"
    assert error_name(6, 0) == "OFPET_GROUP_MOD_FAILED/OFPGMFC_GROUP_EXISTS"
    assert error_name(99, 1) == "type=99 code=1"


def test_sent_messages_are_found_by_xid_and_forgotten_oldest_first() -> None:
    sent = SentMessages(keep=2)
    msgs = [FlowMod(Op.ADD, FlowRule(Table.ROUTE, i, Match.of(in_port=i))) for i in range(3)]
    for xid, msg in enumerate(msgs, start=10):
        sent.sent(1, xid, msg)
    assert sent.take(1, 10) is None  # beyond ``keep``
    assert sent.take(1, 12) == msgs[2]
    assert sent.take(1, 12) is None  # taken once
    sent.switch_gone(1)
    assert sent.take(1, 11) is None
