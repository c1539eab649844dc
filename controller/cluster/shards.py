"""Which Loom instance (member) masters which switch, when several share one fabric.

Each switch has exactly one master; the others are standby for it. The switches are
spread evenly over the live members so that none carries the fabric alone, and a change of
membership moves as few switches as possible: every move is a role change on the switch
and a new master that must learn it. Every instance computes the target on its own from
the same store, so ``assign`` is pure and deterministic: it iterates in sorted order and
never depends on set order or hash seeds, and equal inputs give the same answer everywhere.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping


def assign(
    switches: Mapping[int, Collection[str]],
    members: Collection[str],
    current: Mapping[int, str],
) -> dict[int, str]:
    """The master of every switch that has an eligible live member (the others are left out).

    ``switches`` maps a dpid to the members connected to it; only those that are also in
    ``members`` are eligible. A switch keeps its current master when that member is live and
    eligible (stale entries in ``current`` are ignored). A switch without one (new, or its
    master died) goes to its eligible member holding the fewest, switches with the fewest
    eligible members first, then by dpid. Then, while some member holds a switch that an
    eligible member holding at least two fewer could take, the most loaded such member gives
    up its highest such dpid to the least loaded one (ties by member id everywhere).

    Each move lowers the sum of squared loads, so this ends, and where it ends no switch can
    move to an eligible member holding two fewer. With full eligibility that means every
    member holds floor(n/m) or ceil(n/m), the extra switches stay with the members that held
    the most, and no switch moves twice: the moves are the fewest that balance allows (from a
    balanced start, a death moves only the dead member's switches and a join moves switches
    only to the newcomer).
    With restricted eligibility it is that local balance, not an optimum. The result is a
    fixed point: given back as ``current``, it comes back unchanged.
    """
    live = set(members)
    eligible: dict[int, list[str]] = {}
    for dpid in sorted(switches):
        able = sorted(live.intersection(switches[dpid]))
        if able:
            eligible[dpid] = able
    held: dict[str, set[int]] = {member: set() for member in sorted(live)}
    owner: dict[int, str] = {}
    orphans: list[int] = []
    for dpid, able in eligible.items():
        master = current.get(dpid)
        if master is not None and master in able:
            _give(dpid, master, owner, held)
        else:
            orphans.append(dpid)
    for dpid in sorted(orphans, key=lambda d: (len(eligible[d]), d)):
        _give(dpid, _lightest(eligible[dpid], held), owner, held)
    while (move := _move(eligible, held)) is not None:
        _give(*move, owner, held)
    return dict(sorted(owner.items()))


def _lightest(able: Collection[str], held: Mapping[str, Collection[int]]) -> str:
    """The member among ``able`` holding the fewest switches, the lowest id on a tie."""
    return min(able, key=lambda member: (len(held[member]), member))


def _give(dpid: int, member: str, owner: dict[int, str], held: dict[str, set[int]]) -> None:
    if dpid in owner:
        held[owner[dpid]].discard(dpid)
    owner[dpid] = member
    held[member].add(dpid)


def _move(
    eligible: Mapping[int, Collection[str]], held: Mapping[str, Collection[int]]
) -> tuple[int, str] | None:
    """The next levelling move: the most loaded member's highest dpid that an eligible
    member holding at least two fewer can take, and that member; None when balanced."""
    fewest = min((len(dpids) for dpids in held.values()), default=0)
    for giver in sorted(held, key=lambda member: (-len(held[member]), member)):
        load = len(held[giver])
        if load - fewest < 2:
            return None
        for dpid in sorted(held[giver], reverse=True):
            taker = _lightest(eligible[dpid], held)
            if len(held[taker]) <= load - 2:
                return dpid, taker
    return None


def moves(before: Mapping[int, str], after: Mapping[int, str]) -> int:
    """How many switches present in both changed master: each is a role change to make."""
    return sum(1 for dpid, master in after.items() if dpid in before and before[dpid] != master)


def spread(assignment: Mapping[int, str], members: Collection[str]) -> tuple[int, int]:
    """The fewest and the most switches any live member masters (members with none count)."""
    counts = Counter(assignment.values())
    loads = [counts[member] for member in set(members)]
    return min(loads, default=0), max(loads, default=0)
