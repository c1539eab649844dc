"""A learned k=4 fat-tree under Loom's core (``tests.sim.LoomSim``), kept pristine and
copied for each fuzz case that changed it, plus what "nothing changed" compares."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from controller.conductor import Conductor
from controller.topology import Host, Link
from tests.sim import LoomSim
from topologies import fat_tree
from topologies.graph import host_list

StoreSnapshot = dict[Any, dict[int, tuple[dict[Any, Any], dict[Any, Any], dict[Any, Any]]]]

# A valid policy for fat_tree(4): two tenants (h1..h8, h9..h16), hosts in no tenant allowed.
POLICY_TEXT = """version: 1
fabric: {unassigned_hosts: allow}
tenants:
  - name: research
    hosts: [{ip: 10.0.0.2}, {ip: 10.0.0.3}, {ip: 10.0.1.2}, {ip: 10.0.1.3},
            {ip: 10.1.0.2}, {ip: 10.1.0.3}, {ip: 10.1.1.2}, {ip: 10.1.1.3}]
  - name: guests
    traffic_classes: [bulk, control]
    hosts: [{ip: 10.2.0.2}, {ip: 10.2.0.3}, {ip: 10.2.1.2}, {ip: 10.2.1.3},
            {ip: 10.3.0.2}, {ip: 10.3.0.3}, {ip: 10.3.1.2}, {ip: 10.3.1.3}]
"""


def store_snapshot(core: Conductor) -> StoreSnapshot:
    """Every rule the core believes it has sent, by owner and switch (rules are frozen)."""
    return {
        owner: {
            dpid: (dict(rules.flows), dict(rules.groups), dict(rules.meters))
            for dpid, rules in plan.items()
        }
        for owner, plan in core.store.parts.items()
    }


def link_map(core: Conductor) -> dict[tuple[int, int], tuple[int, int]]:
    links: dict[tuple[int, int], Link] = core.topo.links
    return {src: link.dst for src, link in links.items()}


def host_places(core: Conductor, macs: list[str]) -> dict[str, tuple[int, int, str | None]]:
    hosts: dict[str, Host] = core.topo.hosts
    return {m: (hosts[m].dpid, hosts[m].port, hosts[m].ip) for m in macs if m in hosts}


def new_sim() -> LoomSim:
    sim = LoomSim(fat_tree(4)).start()
    assert len(sim.view.links) == 64 and len(sim.view.hosts) == 16, "sim not learned"
    return sim


def host_macs(sim: LoomSim) -> list[str]:
    return [str(sim.graph.nodes[h]["mac"]) for h in host_list(sim.graph)]


def write_policy(directory: Path) -> Path:
    path = directory / "fuzz-world-policy.yaml"
    path.write_text(POLICY_TEXT)
    return path


def clone(value: Any) -> Any:
    return copy.deepcopy(value)
