"""When traffic engineering places elephants again from the edge colouring, and how
often (``controller.recolour``)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping

from controller.model import PortRef
from controller.placement import Demand, minimal_paths, place
from controller.recolour import WAIT, Recolouring
from controller.routing import compute_routes
from tests.graphs import learned_topology
from topologies import dragonfly, fat_tree

TOPO = learned_topology(fat_tree(16))
HOSTS = sorted(TOPO.hosts.values(), key=lambda h: (h.dpid, h.port))
ROUTES = compute_routes(TOPO.graph(), sorted({h.dpid for h in HOSTS}))
LEAVES = {h.dpid for h in HOSTS}
CAP: dict[PortRef, float] = {
    (u, k): 1.0 for u, edges in ROUTES.out.items() for k, _, _ in edges if isinstance(u, int)
}


def tangled(count: int, seed: int = 1) -> list[Demand]:
    """The first ``count`` flows of a random permutation on a k=16 fat-tree, each where
    a greedy placement one by one put it (some meet another on a link)."""
    perm = HOSTS[:]
    random.Random(seed).shuffle(perm)
    pairs = [(a, b) for a, b in zip(HOSTS, perm, strict=True) if a.dpid != b.dpid][:count]
    demands = [
        Demand(a.mac, 1.0, tuple(minimal_paths(ROUTES, a.dpid, b.dpid, 16))) for a, b in pairs
    ]
    greedy = place(demands, CAP)
    return [Demand(d.key, d.rate, d.candidates, greedy.paths[d.key]) for d in demands]


def test_a_tangle_is_undone_and_counted() -> None:
    events: Counter[str] = Counter()
    demands = tangled(600)
    before = place(demands, CAP)
    assert before.max_utilization == 2.0
    after = Recolouring(0.05, 2.0, events).better(
        0.0, demands, CAP, {}, ROUTES.peer().of, LEAVES, before
    )
    assert after.max_utilization == 1.0 and events["recoloured"] == 1


def test_it_runs_at_most_once_a_hold_down() -> None:
    events: Counter[str] = Counter()
    recolour = Recolouring(0.05, 2.0, events)
    few = tangled(400)
    recolour.better(0.0, few, CAP, {}, ROUTES.peer().of, LEAVES, place(few, CAP))
    assert events["recoloured"] == 1
    more = tangled(800)  # other elephants, but within the hold-down
    held = place(more, CAP)
    assert held.max_utilization > 1.05
    assert recolour.better(1.9, more, CAP, {}, ROUTES.peer().of, LEAVES, held) is held
    again = recolour.better(2.0, more, CAP, {}, ROUTES.peer().of, LEAVES, held)
    assert again is not held and again.max_utilization == 1.0
    assert events["recoloured"] == 2


def test_where_it_did_not_help_it_waits_for_other_elephants_or_a_while() -> None:
    graph = dragonfly(a=4, p=1, h=1, g=5)  # no Clos: the colouring has nothing to give
    topo = learned_topology(graph)
    hosts = sorted(topo.hosts.values(), key=lambda h: (h.dpid, h.port))
    routes = compute_routes(topo.graph(), sorted({h.dpid for h in hosts}))
    demands = [Demand("x", 1.0, tuple(minimal_paths(routes, hosts[0].dpid, hosts[-1].dpid)))]
    events: Counter[str] = Counter()
    recolour = Recolouring(0.05, 2.0, events)
    placement = place(demands, {})
    calls = Counter[str]()
    far = routes.peer().of

    def counting(switch: int) -> Mapping[int, object]:
        calls["far"] += 1
        return far(switch)

    leaves = {h.dpid for h in hosts}
    for now in (0.0, 1.0, WAIT - 0.1):
        assert recolour.better(now, demands, {}, {}, counting, leaves, placement) is placement
        if now == 0.0:
            first = calls["far"]
            assert first > 0  # the fabric was read once ...
    assert calls["far"] == first  # ... and not again for the same elephants
    recolour.better(WAIT + 0.1, demands, {}, {}, counting, leaves, placement)
    assert calls["far"] > first  # tried again after a while
    assert events["recoloured"] == 0
