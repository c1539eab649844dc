"""Traffic matrices for the fabric benchmarks (``docs/benchmarks.md`` §1, §3).

A matrix is a list of ``(sender, receiver)`` host-name pairs, one flow per sender, in host
order. Every generator is a pure function of its arguments: randomness comes only from
``random.Random(seed)`` (never from Python's salted ``hash()``), so the same pattern and seed
give the same matrix in every mode of a benchmark, in every process and on every machine;
that is what lets a benchmark divide one mode's throughput by another's.

Fat-tree patterns (after Hedera, NSDI 2010): :func:`stride`, :func:`staggered`,
:func:`random_dest`, :func:`random_bijection`, :func:`hotspot`. Dragonfly patterns
(Kim et al., ISCA 2008): :func:`uniform_random` and :func:`adversarial` (group ``i`` to
group ``i+1``, the pattern that defeats minimal routing). :func:`by_name` parses the short
names the command line uses (``stride4``, ``stag(0.2,0.3)``, ``randbij``, ``df-adversarial``).

No Mininet import here: the unit tests and the report code use this module without root.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import networkx as nx

from topologies.graph import host_list

Matrix = list[tuple[str, str]]

FAT_TREE_PATTERNS = (
    "stride1",
    "stride2",
    "stride4",
    "stride8",
    "stag(0.2,0.3)",
    "stag(0.5,0.3)",
    "random",
    "randbij",
    "hotspot",
)
DRAGONFLY_PATTERNS = ("df-uniform", "df-adversarial")


class PatternError(ValueError):
    """A pattern name or its parameters describe no matrix for the given hosts."""


def _need_two(hosts: Sequence[str]) -> list[str]:
    out = list(hosts)
    if len(out) < 2:
        raise PatternError(f"a traffic matrix needs at least two hosts, got {len(out)}")
    if len(set(out)) != len(out):
        raise PatternError("host names repeat")
    return out


def stride(hosts: Sequence[str], i: int) -> Matrix:
    """Host ``x`` sends to host ``(x + i) mod n`` (in the given order: pod by pod)."""
    hs = _need_two(hosts)
    if i % len(hs) == 0:
        raise PatternError(f"stride({i}) on {len(hs)} hosts would make every host send to itself")
    return [(h, hs[(x + i) % len(hs)]) for x, h in enumerate(hs)]


def staggered(graph: nx.MultiGraph, edge_p: float, pod_p: float, seed: int) -> Matrix:
    """Each host picks its destination on its own edge switch with probability ``edge_p``,
    elsewhere in its pod with ``pod_p``, in another pod otherwise (uniformly within the tier).

    Tiers come from the graph's host attributes ``switch`` and ``group``. When the drawn tier
    has no host (one host per switch, or a single pod), the next wider tier is used, then
    the next narrower one, so every host still sends exactly one flow.
    """
    if not (0.0 <= edge_p <= 1.0 and 0.0 <= pod_p <= 1.0 and edge_p + pod_p <= 1.0 + 1e-9):
        raise PatternError(f"stag({edge_p},{pod_p}): probabilities must be in [0,1], sum <= 1")
    hs = _need_two(host_list(graph))
    rng = random.Random(seed)
    out: Matrix = []
    for h in hs:
        me = graph.nodes[h]
        same_edge = [d for d in hs if d != h and graph.nodes[d]["switch"] == me["switch"]]
        same_pod = [
            d
            for d in hs
            if graph.nodes[d]["group"] == me["group"] and graph.nodes[d]["switch"] != me["switch"]
        ]
        other_pod = [d for d in hs if graph.nodes[d]["group"] != me["group"]]
        tiers = [same_edge, same_pod, other_pod]
        r = rng.random()
        tier = 0 if r < edge_p else 1 if r < edge_p + pod_p else 2
        # Fallback order: wider tiers first, then narrower ones.
        order = [tier, *range(tier + 1, 3), *range(tier - 1, -1, -1)]
        chosen = next(tiers[t] for t in order if tiers[t])
        out.append((h, rng.choice(chosen)))
    return out


def random_dest(hosts: Sequence[str], seed: int) -> Matrix:
    """Each host sends to a host drawn uniformly from the others; receivers may collide."""
    hs = _need_two(hosts)
    rng = random.Random(seed)
    return [(h, rng.choice([d for d in hs if d != h])) for h in hs]


def random_bijection(hosts: Sequence[str], seed: int) -> Matrix:
    """A uniformly drawn permutation without fixed points: every host sends once, receives once.

    Rejection sampling of shuffles (about e tries on average) keeps the draw uniform over
    derangements, unlike Sattolo's algorithm, which only yields single cycles.
    """
    hs = _need_two(hosts)
    rng = random.Random(seed)
    dst = list(hs)
    while True:
        rng.shuffle(dst)
        if all(a != b for a, b in zip(hs, dst, strict=True)):
            return list(zip(hs, dst, strict=True))


def hotspot(hosts: Sequence[str], seed: int) -> Matrix:
    """Every other host sends to one receiver drawn by ``seed``: a sanity pattern whose
    bottleneck is the receiver's link in every mode, so all modes should score about 1.0."""
    hs = _need_two(hosts)
    target = random.Random(seed).choice(hs)
    return [(h, target) for h in hs if h != target]


def uniform_random(hosts: Sequence[str], seed: int) -> Matrix:
    """Dragonfly uniform random traffic: each host to a uniformly drawn other host."""
    return random_dest(hosts, seed)


def adversarial(graph: nx.MultiGraph, seed: int) -> Matrix:
    """Every host of group ``i`` sends to a host of group ``i+1`` (cyclically), one receiver
    each: a bijection between consecutive groups drawn by ``seed``.

    All of a group's traffic wants the few global links to one neighbour group, so minimal
    routing caps each flow at (global links between the pair) / (hosts per group).
    """
    hs = _need_two(host_list(graph))
    groups: dict[int, list[str]] = {}
    for h in hs:
        grp = graph.nodes[h]["group"]
        if grp is None:
            raise PatternError(f"host {h} has no group: adversarial needs a grouped fabric")
        groups.setdefault(int(grp), []).append(h)
    order = sorted(groups)
    if len(order) < 2:
        raise PatternError("adversarial needs at least two groups")
    sizes = {len(v) for v in groups.values()}
    if len(sizes) != 1:
        raise PatternError(f"adversarial needs groups of equal size, got sizes {sorted(sizes)}")
    rng = random.Random(seed)
    pairs: dict[str, str] = {}
    for n, grp in enumerate(order):
        receivers = list(groups[order[(n + 1) % len(order)]])
        rng.shuffle(receivers)
        pairs.update(zip(groups[grp], receivers, strict=True))
    return [(h, pairs[h]) for h in hs]


@dataclass(frozen=True)
class Pattern:
    """A named pattern; ``matrix(graph, seed)`` builds its matrix on ``graph``'s hosts."""

    name: str
    build: Callable[[nx.MultiGraph, int], Matrix]
    permutation: bool = False  # every host receives exactly once (stride, randbij, adversarial)

    def matrix(self, graph: nx.MultiGraph, seed: int) -> Matrix:
        return self.build(graph, seed)


_STRIDE = re.compile(r"stride(\d+)$")
_STAG = re.compile(r"stag\(\s*([0-9.]+)\s*,\s*([0-9.]+)\s*\)$")


def by_name(name: str) -> Pattern:
    """``stride<i>``, ``stag(<EdgeP>,<PodP>)``, ``random``, ``randbij``, ``hotspot``,
    ``df-uniform`` or ``df-adversarial``; raises :class:`PatternError` for anything else."""
    spec = name.strip().lower().replace(" ", "")
    if m := _STRIDE.match(spec):
        i = int(m.group(1))
        if i < 1:
            raise PatternError(f"{name}: the stride must be at least 1")
        return Pattern(spec, lambda g, _s: stride(host_list(g), i), permutation=True)
    if m := _STAG.match(spec):
        try:
            ep, pp = float(m.group(1)), float(m.group(2))
        except ValueError:
            raise PatternError(f"{name}: probabilities must be numbers") from None
        if ep + pp > 1.0 + 1e-9:
            raise PatternError(f"{name}: EdgeP + PodP must not exceed 1")
        return Pattern(f"stag({ep:g},{pp:g})", lambda g, s: staggered(g, ep, pp, s))
    simple: dict[str, tuple[Callable[[nx.MultiGraph, int], Matrix], bool]] = {
        "random": (lambda g, s: random_dest(host_list(g), s), False),
        "randbij": (lambda g, s: random_bijection(host_list(g), s), True),
        "hotspot": (lambda g, s: hotspot(host_list(g), s), False),
        "df-uniform": (lambda g, s: uniform_random(host_list(g), s), False),
        "df-adversarial": (adversarial, True),
    }
    if spec in simple:
        build, perm = simple[spec]
        return Pattern(spec, build, permutation=perm)
    raise PatternError(
        f"unknown pattern {name!r}: expected stride<i>, stag(<EdgeP>,<PodP>), random, randbij,"
        " hotspot, df-uniform or df-adversarial"
    )
