"""The least-loaded equal-cost path between two switches, found without listing paths.

Two edge switches of a k=48 fat-tree in different pods have 576 equal-cost paths; any
fixed sample of them leaves most core links out, and the edge switches of one pod,
each with its own sample, end up sharing core links while others stay idle. Here every
path counts: one pass over the next-hop DAG (``Routes.hops_to``), from the destination
back, gives each switch the best load of any way on from it, so the cost is the DAG's
links (1,200 at k=48), not its paths. A path's load is its busiest link, then the sum
over its links, as the placement weighs it.

Ties are broken by a mix of the flow's ``turn`` and the switch, never by ``hash()``:
the same flow gets the same path in every process, and equal flows spread over every
uplink and every core switch rather than the lowest port of each tier.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

from controller.model import PortRef
from controller.routing import Routes

Path = tuple[PortRef, ...]
Load = Callable[[PortRef], float]  # a link's load, as a share of its capacity

_MIX = 0x9E3779B97F4A7C15  # 2**64 / golden ratio: neighbouring turns land far apart
_MASK = (1 << 64) - 1


# Next hops followed from one switch: a k=48 pair's 1,200 links cost ~1.8 ms a new flow
# (at 1,000 a second, most of a core); following the 8 least-loaded of each switch's 24
# uplinks reads each uplink's load once but explores 144 links, and a busy uplink is
# never where the best way starts anyway.
FANOUT = 8


def _rotation(turn: int, node: int, width: int) -> int:
    """Where ``node``'s ports start being tried for ``turn``: spread over the ports, and
    unrelated between the tiers of one path (so a tie at the edge and one at the next
    tier do not pick the same column of the fabric)."""
    mixed = ((turn * _MIX) ^ (node * 0xBF58476D1CE4E5B9)) & _MASK
    mixed = (mixed ^ (mixed >> 31)) * 0x94D049BB133111EB & _MASK
    return (mixed >> 32) % width


def least_loaded_path(
    routes: Routes, src: int, dst: int, load: Load, turn: int = 0, fanout: int = FANOUT
) -> tuple[Path, bool] | None:
    """The equal-cost path from ``src`` to ``dst`` whose busiest link is least loaded,
    then whose links' loads sum least, and whether any other path exists at all (no
    choice: the default route is that path). ``None`` when ``dst`` cannot be reached.
    From a switch with more than ``fanout`` next hops only the ``fanout`` least-loaded
    links are followed further (see ``FANOUT``)."""
    if src == dst:
        return (), False
    if dst not in routes.index:
        return None
    hops = routes.hops_to(dst)
    far = cast(Callable[[int], Mapping[int, int]], routes.peer().of)
    best: dict[int, tuple[float, float]] = {dst: (0.0, 0.0)}
    via: dict[int, tuple[int, int]] = {}  # switch -> (port, next switch) on its best way
    ways: dict[int, list[tuple[float, int, int]]] = {}  # switch -> (load, port, next) followed
    choice = False
    stack = [src]
    while stack:
        node = stack[-1]
        if node in best:
            stack.pop()
            continue
        followed = ways.get(node)
        if followed is None:
            followed = ways[node] = _followed(
                node, hops.get(node, ()), far(node), load, turn, fanout
            )
            choice = choice or len(hops.get(node, ())) > 1
            todo = [nxt for _, _, nxt in followed if nxt not in best]
            if todo:
                stack.extend(todo)
                continue
        stack.pop()
        top: tuple[float, float] = (float("inf"), float("inf"))
        for share, port, nxt in followed:
            ahead = best[nxt]
            cost = (max(share, ahead[0]), share + ahead[1])
            if cost < top:
                top, via[node] = cost, (port, nxt)
        best[node] = top
    if best[src][0] == float("inf"):
        return None
    path: list[PortRef] = []
    node = src
    while node != dst:
        port, nxt = via[node]
        path.append((node, port))
        node = nxt
    return tuple(path), choice


def _followed(
    node: int,
    ports: tuple[int, ...],
    ends: Mapping[int, int],
    load: Load,
    turn: int,
    fanout: int,
) -> list[tuple[float, int, int]]:
    """``node``'s next hops as (load, port, next switch), tried from the flow's rotation
    on; the ``fanout`` least loaded of them when there are more (ties: in that order)."""
    live = [p for p in ports if p in ends]
    if len(live) > 1:
        start = _rotation(turn, node, len(live))
        live = live[start:] + live[:start]
    ways = [(load((node, p)), p, ends[p]) for p in live]
    if len(ways) <= fanout:
        return ways
    order = sorted(range(len(ways)), key=lambda i: (ways[i][0], i))[:fanout]
    return [ways[i] for i in sorted(order)]
