"""Rail discovery: does the fabric cable the operator's GPU servers rail-optimized?

In a rail-optimized AI fabric NIC ``i`` of every server reaches a leaf of rail ``i`` (one
leaf per rail and scalable unit), so same-index GPUs meet one hop apart and rails meet
only at the spines. Loom cannot see GPUs, only NICs: the operator declares which NICs
(MACs, in GPU order) belong to which server, discovery says where each NIC attaches, and
this module compares the two. It is pure (plain data in, a frozen report out) so the
controller can call it on every change and the REST API can show the result.

Rule: rail ``i`` is the set of leaves reached by NIC ``i`` of the servers. Rail ``i``
holds when every declared NIC ``i`` is attached (a NIC not yet seen is reported, never
guessed), each sits on a leaf no NIC of another index reaches (so rails are disjoint and
no server has two NICs on one leaf), and its MAC is declared once. The fabric is
*rail-optimized* when every rail holds, *partly* when some do, *not* when none does. A
server with fewer NICs than others is absent from the higher rails; that is noted, not
counted against it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Status = Literal["rail-optimized", "partly rail-optimized", "not rail-optimized"]
RAIL_OPTIMIZED: Status = "rail-optimized"
PARTLY: Status = "partly rail-optimized"
NOT_RAIL_OPTIMIZED: Status = "not rail-optimized"


@dataclass(frozen=True)
class RailReport:
    """What discovery found. ``rails`` maps a rail index to the leaves its NICs reach;
    ``broken`` lists the rails that do not hold; ``nic_rail`` gives each declared NIC
    (lower-case MAC) its rail, or ``None`` when it fits none; ``reasons`` explains every
    deviation so an operator can fix the cabling or the declaration."""

    status: Status
    rails: Mapping[int, tuple[int, ...]]
    broken: tuple[int, ...]
    nic_rail: Mapping[str, int | None]
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class _Nic:
    server: str
    index: int
    mac: str


def natural_key(name: str) -> tuple[tuple[object, ...], str]:
    """Sort key so that ``s2`` comes before ``s10``; the name itself breaks ties."""
    parts = re.split(r"(\d+)", name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name


def _list(items: Iterable[object]) -> str:
    """``a``, ``a and b``, ``a, b and c``: reasons read as sentences."""
    words = [str(x) for x in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _nic(nic: _Nic) -> str:
    return f"NIC {nic.index} of {nic.server}"


def _leaf(dpid: int) -> str:
    return f"leaf {dpid:#x}"


def _declared(servers: Mapping[str, Sequence[str]]) -> list[_Nic]:
    """Every declared NIC, servers in natural name order, so the caller's mapping order
    cannot change the report."""
    return [
        _Nic(name, i, mac.lower())
        for name in sorted(servers, key=natural_key)
        for i, mac in enumerate(servers[name])
    ]


def _short_servers(servers: Mapping[str, Sequence[str]]) -> list[str]:
    widest = max((len(nics) for nics in servers.values()), default=0)
    out = []
    for name in sorted(servers, key=natural_key):
        have = len(servers[name])
        if have < widest:
            missing = _list(range(have, widest))
            out.append(
                f"server {name} declares {have} NIC{'' if have == 1 else 's'}, others up to "
                f"{widest}: "
                f"it has no NIC on rail{'s' if widest - have > 1 else ''} {missing}"
            )
    return out


def _mixed_leaves(on_leaf: Mapping[int, list[_Nic]]) -> tuple[list[str], set[int]]:
    """Reasons for servers with several NICs on one leaf and for leaves reached by NICs of
    several indices, and the rails those touch."""
    reasons: list[str] = []
    touched: set[int] = set()
    for dpid in sorted(on_leaf):
        nics = on_leaf[dpid]
        indices = sorted({n.index for n in nics})
        if len(indices) < 2:
            continue
        touched.update(indices)
        by_server: dict[str, list[int]] = defaultdict(list)
        for n in nics:
            by_server[n.server].append(n.index)
        for server in sorted(by_server, key=natural_key):
            same = sorted(set(by_server[server]))
            if len(same) > 1:
                reasons.append(f"server {server}: NICs {_list(same)} reach the same {_leaf(dpid)}")
        groups = []
        for i in indices:
            names = sorted({n.server for n in nics if n.index == i}, key=natural_key)
            groups.append(f"NIC {i} of {', '.join(names)}")
        if len(by_server) > 1:  # one server's doubling up is said above
            reasons.append(f"{_leaf(dpid)} is reached by {_list(groups)}")
    return reasons, touched


def _leaf_rail(on_leaf: Mapping[int, list[_Nic]]) -> dict[int, int | None]:
    """The rail a leaf serves: the index most of its NICs have (``None`` on a tie), so one
    miscabled NIC does not unseat the correctly cabled ones from their rail."""
    out: dict[int, int | None] = {}
    for dpid, nics in on_leaf.items():
        ranked = Counter(n.index for n in nics).most_common()
        tie = len(ranked) > 1 and ranked[0][1] == ranked[1][1]
        out[dpid] = None if tie else ranked[0][0]
    return out


def discover_rails(servers: Mapping[str, Sequence[str]], attached: Mapping[str, int]) -> RailReport:
    """Compare the declared ``servers`` (name -> NIC MACs in GPU order) with where the
    fabric saw each host (``attached``: MAC -> dpid of its leaf); see the module rule."""
    where = {mac.lower(): dpid for mac, dpid in attached.items()}
    declared = _declared(servers)
    if not declared:
        return RailReport(NOT_RAIL_OPTIMIZED, {}, (), {}, ("no server declares a NIC",))
    reasons: list[str] = []
    broken: set[int] = set()
    seen: dict[str, list[_Nic]] = defaultdict(list)
    for n in declared:
        seen[n.mac].append(n)
    twice = {mac for mac, uses in seen.items() if len(uses) > 1}
    for mac in sorted(twice):
        reasons.append(f"MAC {mac} is declared more than once: {_list(map(_nic, seen[mac]))}")
        broken.update(n.index for n in seen[mac])
    rails: dict[int, set[int]] = {i: set() for i in sorted({n.index for n in declared})}
    on_leaf: dict[int, list[_Nic]] = defaultdict(list)
    for n in declared:
        dpid = where.get(n.mac)
        if dpid is None:
            reasons.append(f"{_nic(n)} ({n.mac}) is not attached")
            broken.add(n.index)
            continue
        rails[n.index].add(dpid)
        if n.mac not in twice:
            on_leaf[dpid].append(n)
    mixed, touched = _mixed_leaves(on_leaf)
    reasons += mixed
    broken |= touched
    leaf_rail = _leaf_rail(on_leaf)
    nic_rail: dict[str, int | None] = {}
    for n in declared:
        dpid = where.get(n.mac)
        fits = n.mac not in twice and dpid is not None and leaf_rail[dpid] == n.index
        nic_rail[n.mac] = n.index if fits else None
    reasons += _short_servers(servers)
    bad = tuple(sorted(broken))
    good = [i for i in rails if i not in broken]
    if not bad:
        status = RAIL_OPTIMIZED
    elif good:
        status = PARTLY
        reasons.append(f"rails that hold: {_list(good)}; rails that do not: {_list(bad)}")
    else:
        status = NOT_RAIL_OPTIMIZED
    return RailReport(
        status=status,
        rails={i: tuple(sorted(leaves)) for i, leaves in rails.items()},
        broken=bad,
        nic_rail=dict(sorted(nic_rail.items())),
        reasons=tuple(reasons),
    )


def report_json(report: RailReport) -> dict[str, object]:
    """The report as JSON-able data for the REST API: rail keys as strings (JSON object
    keys are strings; the API does the same for ``next_hops``), dpids as plain ints."""
    return {
        "status": report.status,
        "rails": {str(i): list(leaves) for i, leaves in sorted(report.rails.items())},
        "broken": list(report.broken),
        "nic_rail": dict(report.nic_rail),
        "reasons": list(report.reasons),
    }
