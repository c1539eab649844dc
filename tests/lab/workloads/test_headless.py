"""The headless measurement without a network: neighbour dumps parsed, state timelines
read over a window, TCP stalls placed, the per-timers verdict, and the report drawn."""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mininet_scenarios.bench.headless_report import plot, table
from mininet_scenarios.harness.hog import CpuHog
from mininet_scenarios.harness.neighbours import (
    NDMSG,
    NLMSG,
    RTATTR,
    RTM_NEWNEIGH,
    NeighbourWatch,
    neighbour_states,
)
from mininet_scenarios.workloads.headless import summarize
from mininet_scenarios.workloads.tcp_stall import TcpTrace, stall_in


def _neigh(ip: str, state: int) -> bytes:
    dst = socket.inet_aton(ip)
    attr = RTATTR.pack(RTATTR.size + 4, 1) + dst
    lladdr = RTATTR.pack(RTATTR.size + 6, 2) + bytes(6) + bytes(2)  # padded to 4
    body = NDMSG.pack(socket.AF_INET, 3, state, 0, 1) + attr + lladdr
    return NLMSG.pack(NLMSG.size + len(body), RTM_NEWNEIGH, 2, 1, 0) + body


class FakeNetlink:
    def __init__(self, replies: list[bytes]) -> None:
        self.replies = replies
        self.sent: list[bytes] = []

    def send(self, data: bytes) -> int:
        self.sent.append(data)
        return len(data)

    def recv(self, size: int) -> bytes:
        return self.replies.pop(0)


def test_a_dump_is_read_to_its_end_across_messages() -> None:
    done = NLMSG.pack(NLMSG.size + 4, 3, 2, 1, 0) + struct.pack("=i", 0)
    sock: Any = FakeNetlink(
        [_neigh("10.0.0.2", 0x02) + _neigh("10.3.1.3", 0x10), _neigh("10.1.0.2", 0x20) + done]
    )
    states = neighbour_states(sock)
    assert states == {"10.0.0.2": "REACHABLE", "10.3.1.3": "PROBE", "10.1.0.2": "FAILED"}
    assert len(sock.sent) == 1 and struct.unpack_from("=H", sock.sent[0], 4)[0] == 30


def _watch() -> NeighbourWatch:
    graph = SimpleNamespace(nodes={"a": {"ip": "10.0.0.2"}, "b": {"ip": "10.1.0.2"}})
    net = SimpleNamespace(graph=graph, host=lambda name: SimpleNamespace(pid=1))
    watch = NeighbourWatch(net, [("a", "b")])
    for t, state in ((0.0, "REACHABLE"), (1.0, "STALE"), (2.0, "PROBE"), (5.0, "FAILED")):
        watch._note(("a", "b"), t, state)
    watch._note(("a", "b"), 6.0, "FAILED")  # no change: not a new point
    watch._note(("a", "b"), 9.0, "REACHABLE")
    return watch


def test_states_seen_and_time_without_an_entry_in_a_window() -> None:
    watch = _watch()
    assert watch.timeline[("a", "b")][-2:] == [(5.0, "FAILED"), (9.0, "REACHABLE")]
    assert watch.seen(("a", "b"), 1.5, 6.0) == ["STALE", "PROBE", "FAILED"]
    assert watch.lost_seconds(("a", "b"), 0.0, 20.0) == 4.0
    assert watch.lost_seconds(("a", "b"), 6.0, 7.0) == 1.0
    assert watch.summary(0.0, 20.0)["a->b"]["unusable_s"] == 4.0
    assert watch.summary(0.0, 20.0)["b->a"] == {"states": [], "unusable_s": 0.0}


def test_a_stall_counts_whole_where_it_overlaps_the_window() -> None:
    trace = TcpTrace(1, 1, stalls=[(1.0, 1.3), (10.0, 17.0)], stopped=20.0)
    assert trace.longest_stall_s == 7.0
    assert stall_in(trace, 12.0, 13.0) == 7.0
    assert stall_in(trace, 0.0, 5.0) == pytest.approx(0.3)
    assert stall_in(trace, 18.0, 19.0) == 0.0


def _pair(kind: str, timers: str, **figures: Any) -> dict[str, Any]:
    states = {"x->y": {"states": ["REACHABLE", "PROBE"], "unusable_s": 0.0}}
    row: dict[str, Any] = {"pair": "x->y", "kind": kind, "timers": timers}
    row.update(neighbours=states, timeline=[[-1.0, "REACHABLE"], [2.0, "PROBE"]])
    return row | figures


def test_targets_are_met_only_with_no_loss_and_no_long_stall() -> None:
    udp = {"sent": 1000, "lost_in_window": 0, "largest_gap_ms": 2.0}
    pairs = [
        _pair("udp", "default", lost=0, **udp),
        _pair("tcp", "default", longest_stall_s=0.2, errors=[]),
        _pair("udp", "shortened", lost=1, **udp),
        _pair("tcp", "shortened", longest_stall_s=0.2, errors=[]),
    ]
    verdict = summarize(pairs)
    assert verdict["default"]["met"] and not verdict["shortened"]["met"]
    pairs[1]["longest_stall_s"] = 1.5
    assert not summarize(pairs)["default"]["met"]
    pairs[1]["longest_stall_s"], pairs[1]["errors"] = 0.1, ["receiver: no report"]
    assert not summarize(pairs)["default"]["met"]


def test_the_report_prints_and_draws_a_saved_run(tmp_path: Path) -> None:
    udp = {"sent": 1000, "lost": 7, "lost_in_window": 7, "largest_gap_ms": 7.0}
    pairs = [_pair("udp", "shortened", **udp), _pair("tcp", "shortened", longest_stall_s=2.0)]
    pairs[1]["errors"] = []
    res = {"pairs": pairs, "by_timers": summarize(pairs), "fault_s": 10.0, "detail": None}
    doc = {"scenarios": {"sigstop": res, "quorum": {"error": "EtcdError: port taken"}}}
    text = table(doc)
    assert "sigstop (SIGSTOP, 10.0 s)" in text and "NO" in text and "FAILED: EtcdError" in text
    assert plot(doc, tmp_path / "h.png").stat().st_size > 10_000


def test_the_hog_leaves_the_controller_what_the_weights_say() -> None:
    assert abs(CpuHog([], workers=4, nice=-20).controller_share - 0.0029) < 0.0001
    assert abs(CpuHog([], workers=1, nice=0).controller_share - 0.5) < 1e-9
