"""The scale benchmark on a k=4 fat-tree: the fake wire drives the real core to a settled
fabric whose switches hold exactly what the core planned, and the report is written."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from controller.conductor import Conductor
from controller.model import (
    ETH_TYPE_ARP,
    ETH_TYPE_LLDP,
    OFPP_CONTROLLER,
    FlowMod,
    FlowRule,
    LldpFrame,
    Match,
    Op,
    Output,
    PacketOut,
)
from mininet_scenarios.bench.scale import (
    Watch,
    core_config,
    main,
    pick_link,
    run_size,
    settle,
    split_specs,
)
from mininet_scenarios.bench.scale_sizes import message_bytes
from mininet_scenarios.bench.scale_wire import SwitchTable, Wire
from topologies import fat_tree


@pytest.fixture
def settled() -> tuple[Wire, dict[str, object]]:
    wire = Wire(fat_tree(4), Conductor(core_config(), timer=time.perf_counter))
    result = settle(wire, Watch(wire, "k=4", budget=60.0), cold=True)
    return wire, result


def test_the_wire_settles_a_k4_fat_tree_with_every_link_and_host(
    settled: tuple[Wire, dict[str, object]],
) -> None:
    wire, result = settled
    assert result["settled"] is True, result
    assert len(wire.expected_links) == 2 * 32  # 16 edge-agg and 16 agg-core, both ways
    assert wire.links_seen() == len(wire.expected_links)
    assert wire.missing_hosts() == []
    assert len(wire.view.hosts) == 16
    assert wire.total.calls["switch_state"].count == 20  # every switch read back once


def test_switches_hold_what_the_core_believes_it_installed(
    settled: tuple[Wire, dict[str, object]],
) -> None:
    wire, _ = settled
    assert wire.mismatches() == []
    core = [wire.fabric.store.switch_rules(d) for d in sorted(wire.tables)]
    assert wire.rules_installed == sum(len(r.flows) + len(r.groups) for r in core)
    assert min(len(t.flows) for t in wire.tables.values()) > 10  # a pipeline everywhere


def test_a_link_down_reroutes_at_some_switches_only_and_lldp_stops_crossing(
    settled: tuple[Wire, dict[str, object]],
) -> None:
    wire, _ = settled
    ref = pick_link(wire)
    assert {wire.roles[ref[0]], wire.roles[wire.peer[ref][0]]} == {"agg", "core"}
    ends = wire.set_link(ref, False)
    assert [c.kind for c in ends] == ["port_status", "port_status"]
    ruled = {d for c in ends for d in c.out if c.as_dict()["rule_messages"]}
    assert 0 < len(ruled) < len(wire.tables), ruled
    for _ in range(50):  # 5 s: past the LLDP timeout, the link must stay gone
        wire.step()
    assert wire.links_seen() == len(wire.expected_links) - 2
    assert wire.mismatches() == []
    wire.set_link(ref, True)
    for _ in range(20):
        wire.step()
    assert wire.links_seen() == len(wire.expected_links)


def test_a_switch_without_rules_sends_nothing_to_the_controller() -> None:
    table = SwitchTable()
    assert not table.punts(1, ETH_TYPE_LLDP)
    to_ctl = (Output(OFPP_CONTROLLER),)
    table.apply(FlowMod(Op.ADD, FlowRule(0, 1000, Match.of(eth_type=ETH_TYPE_LLDP), to_ctl)))
    table.apply(FlowMod(Op.ADD, FlowRule(0, 899, Match.of(eth_type=ETH_TYPE_ARP), to_ctl)))
    drop = FlowRule(0, 900, Match.of(in_port=3, eth_type=ETH_TYPE_ARP))
    table.apply(FlowMod(Op.ADD, drop))
    assert table.punts(1, ETH_TYPE_LLDP) and table.punts(2, ETH_TYPE_ARP)
    assert not table.punts(3, ETH_TYPE_ARP)  # a fabric port: ARP from there is dropped
    table.apply(FlowMod(Op.DELETE, drop))
    assert table.punts(3, ETH_TYPE_ARP)


def test_message_sizes_follow_the_openflow_structs() -> None:
    lldp = PacketOut(OFPP_CONTROLLER, (Output(2),), LldpFrame(1, 2))
    assert message_bytes(lldp) == 24 + 16 + 80
    rule = FlowRule(4, 100, Match.of(eth_dst="02:00:00:00:00:01"), (Output(1),))
    assert message_bytes(FlowMod(Op.ADD, rule)) == 48 + 16 + 8 + 16
    assert message_bytes(FlowMod(Op.DELETE, rule)) == 48 + 16


def test_fabric_lists_split_between_specs_not_inside_them() -> None:
    specs = split_specs("fat_tree:k=4,dragonfly:a=4,p=2,h=2,g=9,fat_tree:k=8")
    assert specs == ["fat_tree:k=4", "dragonfly:a=4,p=2,h=2,g=9", "fat_tree:k=8"]


def test_a_size_over_budget_stops_and_says_how_far_it_got() -> None:
    doc = run_size("fat_tree:k=4", budget=0.001)
    assert doc["settle"]["settled"] is False
    assert doc["stopped"]["phase"] == "settle"
    progress = doc["settle"]["progress"]
    assert progress["links_expected"] == 64 and progress["hosts"] == 16


def test_the_program_writes_json_table_and_figure(tmp_path: Path) -> None:
    assert main(["--fabrics", "fat_tree:k=4", "--out", str(tmp_path), "--budget", "60"]) == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    (size,) = doc["sizes"]
    assert size["settle"]["settled"] is True and size["switches"] == 20
    assert size["recompute"]["tally"]["rule_messages"] == 0  # nothing changed, nothing sent
    assert size["rules"]["mismatched_switches"] == 0
    assert size["host_move"]["learned"] is True
    assert size["rss_mib"] > 0
    table = (tmp_path / "table.txt").read_text()
    assert "fat_tree(4)" in table and "PASS" in table and "<= 60" in table
    assert (tmp_path / "scale.png").read_bytes()[:4] == b"\x89PNG"


def test_a_core_planning_as_a_cluster_instance_settles_and_agrees_with_its_switches() -> None:
    """``--cluster`` (detours searched afresh when a link comes): the fabric settles with
    every switch holding exactly what the core believes, and so does a link's return."""
    doc = run_size("fat_tree:k=4", 120.0, cluster=True)
    assert doc["settle"]["settled"] and doc["link"]["up"]["settle"]["settled"]
    assert doc["rules"]["mismatched_switches"] == 0
