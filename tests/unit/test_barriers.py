"""Barrier fences time a reroute from its PortStatus to the last switch's barrier reply."""

from __future__ import annotations

from controller.model import FlowMod, Messages, PacketOut
from controller.ofp.barriers import BarrierFences, modified_switches


def test_duration_is_taken_at_the_last_reply_of_all_switches() -> None:
    fences = BarrierFences()
    fences.start(now=10.0, started=9.9, barriers=[(1, 100), (2, 200)])
    assert fences.reply(10.02, 1, 100) is None
    assert fences.reply(10.05, 2, 200) == 10.05 - 9.9
    assert len(fences) == 0


def test_unknown_and_repeated_replies_are_ignored() -> None:
    fences = BarrierFences()
    fences.start(1.0, 1.0, [(1, 5)])
    assert fences.reply(1.1, 1, 6) is None
    assert fences.reply(1.1, 3, 5) is None
    assert fences.reply(1.2, 1, 5) is not None
    assert fences.reply(1.3, 1, 5) is None


def test_a_switch_that_disconnects_drops_its_fences_without_a_figure() -> None:
    fences = BarrierFences()
    fences.start(1.0, 1.0, [(1, 5), (2, 6)])
    fences.start(1.0, 1.0, [(3, 7)])
    fences.switch_gone(2)
    assert len(fences) == 1
    assert fences.reply(1.1, 1, 5) is None
    assert fences.reply(1.1, 3, 7) is not None


def test_stale_fences_expire_and_empty_fences_are_not_started() -> None:
    fences = BarrierFences(expire_after=5.0)
    fences.start(0.0, 0.0, [(1, 1)])
    fences.start(0.0, 0.0, [])
    assert len(fences) == 1
    fences.start(6.0, 6.0, [(2, 2)])
    assert len(fences) == 1
    assert fences.reply(6.1, 1, 1) is None


def test_only_switches_sent_modifications_are_fenced() -> None:
    messages: Messages = {
        4: [PacketOut.__new__(PacketOut)],
        2: [FlowMod.__new__(FlowMod)],
        3: [],
    }
    assert modified_switches(messages) == [2]
