"""docs/failure.md states rule counts and timings of the code: held to them here."""

from __future__ import annotations

import re
from pathlib import Path

from controller.cadence import AWAY_AFTER
from controller.compiler import base_plan, delivery_plan
from controller.model import CookieKind, Table, cookie_kind
from controller.responder import LOOM_ADDRESS
from controller.topology import Host

DOC = (Path(__file__).resolve().parents[2] / "docs" / "failure.md").read_text()


def test_the_responders_cost_what_the_doc_says() -> None:
    hosts = [(Host("02:00:00:00:00:01", "10.0.0.1", 7, 1, 0.0), "0a:00:00:00:1c:01")]
    rules = delivery_plan(7, hosts)[7].flows.values()
    arp = [r for r in rules if cookie_kind(r.cookie) is CookieKind.ARP]
    assert "three rules on the host's own switch" in DOC and len(arp) == 3
    with_fabric = base_plan(7, [25, 26, 27], edge_ports=[1, 2]).flows.values()
    without = base_plan(7, [], edge_ports=[1, 2]).flows.values()
    transit = {r.key for r in with_fabric} - {r.key for r in without}
    assert {k[0] for k in transit} == {Table.CLASSIFY}  # fabric ports cost no ARP rule
    passing = [r for r in with_fabric if r.match.get("eth_dst") == LOOM_ADDRESS]
    assert "two rules per switch" in DOC and len(passing) == 1
    k = 48  # an edge switch: k/2 hosts
    flat = " ".join(DOC.split())  # (the doc's line breaks aside)
    said = re.search(r"k=48 fat-tree's edge switch the responders take (\d+) rules", flat)
    assert said is not None and int(said.group(1)) == k // 2 * len(arp) + 2


def test_the_stall_a_controller_is_excused_for_is_the_codes() -> None:
    assert f"more than {AWAY_AFTER:g} s after the one before" in DOC.replace("\n", " ")
