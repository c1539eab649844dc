"""Batches sent from different greenlets reach a switch whole and in order, even when
the datapath's own queue is full and sending yields."""

from __future__ import annotations

from typing import Any

from controller.ofp.compat import hub
from controller.ofp.outbox import Outbox


class Msg:
    def __init__(self, name: str) -> None:
        self.name, self.xid = name, None


class SlowDatapath:
    """Yields on every send, as Ryu's datapath does once its 16-message queue is full."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.xid, self.seconds = 0, seconds
        self.wire: list[Any] = []

    def set_xid(self, msg: Any) -> None:
        self.xid += 1
        msg.xid = self.xid

    def send_msg(self, msg: Any) -> None:
        hub.sleep(self.seconds)
        self.wire.append(msg.name)


def run_two_senders(send: Any) -> None:
    first = hub.spawn(send, "tick", 30)
    second = hub.spawn(send, "packet-in", 30)
    hub.joinall([first, second])
    hub.sleep(0.05)  # the outbox's drainer runs


def test_outbox_keeps_each_batch_whole_and_in_order() -> None:
    dp, outbox = SlowDatapath(), Outbox()
    outbox.open(1, dp)
    xids: list[int] = []

    def batch(name: str, n: int) -> None:
        xids.extend(outbox.put(1, dp, Msg(f"{name}-{i}")) for i in range(n))

    run_two_senders(batch)
    expected = [f"tick-{i}" for i in range(30)] + [f"packet-in-{i}" for i in range(30)]
    assert dp.wire == expected
    assert xids == list(range(1, 61))  # xids given at once, in queue order
    outbox.close(1)


def test_without_the_outbox_batches_interleave() -> None:
    """The failure the outbox exists for: direct sends from two greenlets mix."""
    dp = SlowDatapath()

    def batch(name: str, n: int) -> None:
        for i in range(n):
            dp.send_msg(Msg(f"{name}-{i}"))

    run_two_senders(batch)
    assert dp.wire[:2] == ["tick-0", "packet-in-0"]


def test_wait_room_holds_a_handler_until_its_switch_has_caught_up() -> None:
    dp, outbox = SlowDatapath(seconds=0.01), Outbox(room=8)
    outbox.open(1, dp)
    for i in range(100):
        outbox.put(1, dp, Msg(f"m{i}"))
    outbox.wait_room(1)
    assert 92 <= len(dp.wire) < 100  # let through only once fewer than 8 were waiting
    outbox.wait_room(2)  # a switch without a queue never waits
    outbox.close(1)
