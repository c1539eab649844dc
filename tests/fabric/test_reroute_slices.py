"""Reroutes that neither loop nor send into a dead link while they are planned: at size
a re-plan is planned a slice of switches at a time (here one switch a call, as at
k=48), and packets are walked through every switch's rules after every slice of the
reroute of a failure of each kind of link (``controller.repair``)."""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx
import pytest

from controller import sources
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from tests.sim import LoomSim
from topologies import dragonfly, fat_tree, shuffle_ids
from topologies.graph import switch_graph

FABRICS: dict[str, Callable[[], nx.MultiGraph]] = {
    "fat_tree(4)": lambda: shuffle_ids(fat_tree(4), "slices"),
    "dragonfly(4,1,1,5)": lambda: shuffle_ids(dragonfly(a=4, p=1, h=1, g=5), "slices"),
}


def sample_links(graph: nx.MultiGraph, per_kind: int = 2) -> list[tuple[str, str]]:
    """A few links of each kind (by the roles of their ends and their scope): a failure
    of one is like a failure of any other of its kind."""
    kinds: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for a, b, data in sorted(switch_graph(graph).edges(data=True)):
        roles = sorted(str(graph.nodes[n]["role"]) for n in (a, b))
        kinds.setdefault((*roles, str(data.get("scope"))), []).append((a, b))
    return [link for links in kinds.values() for link in links[:per_kind]]


def walk_every_slice(sim: LoomSim, a: str, b: str) -> list[str]:
    """Fail ``a``-``b`` (both PortStatus), then plan one call at a time, walking every
    pair after each: what went wrong, per call."""
    problems: list[str] = []

    def walk(when: str) -> None:
        report = sim.fake.reachability()
        drops = {br.end.reason for t in report.traces.values() for br in t.branches
                 if br.end.kind == "drop"}  # fmt: skip
        if report.looped or drops:
            problems.append(f"{a}-{b} down, {when}:\n{report.render()}")

    sim.set_link(a, b, False)
    walk("after PortStatus")
    for call in range(1, 200):
        if not sim.core.busy:
            break
        sim.apply(sim.core.work(sim.now))
        walk(f"after call {call}")
    return problems


@pytest.mark.parametrize("name", sorted(FABRICS))
@pytest.mark.parametrize("failover", [False, True], ids=["routes", "failover"])
def test_no_packet_loops_or_meets_a_dead_link_after_any_slice_of_a_reroute(
    name: str, failover: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "ROUTE_SLICE_WORK", 1)  # one switch a call, as at size
    graph = FABRICS[name]()
    config = FabricConfig(te=TeConfig(enabled=False), fast_failover=failover)
    problems: list[str] = []
    for a, b in sample_links(graph):
        sim = LoomSim(FABRICS[name](), config).start()
        problems += walk_every_slice(sim, a, b)
        sim.advance(2.0)
        assert sim.fake.reachability().ok, f"{a}-{b} down: not rerouted"
    assert not problems, f"{len(problems)} bad moments; the first:\n{problems[0]}"
