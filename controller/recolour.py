"""Elephants placed again from the Clos edge colouring, where moving one at a time leaves
a link over capacity (traffic engineering's last resort; ``controller.elephants`` asks).

Flows placed one by one at their first packet meet on half the links of a random
permutation at k=16, and no single move undoes such a tangle, while the colouring
(``controller.clos``) routes any permutation one flow a link. The colouring's placement
is taken if its busiest link is lower by more than the margin. It moves most flows (those
it can keep, it keeps, those held down after a move first), so it runs at most once a
``hold_down``: on a random pattern at k=32, where elephants come and go round after round
and no routing fits, it moved flows 5,322 times in 20 s when it could run every round,
2,542 times once a hold-down, for the same throughput (a permutation's last elephants wait
up to a hold-down longer: 0.942 of non-blocking from first byte to last, against 0.954).
Where it did not help, it is tried again for other elephants, or after ``WAIT`` seconds
(a pattern no routing fits: its cost each round buys nothing). Pure: ``now`` is passed in.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping

from controller.clos import Far, from_colouring
from controller.model import PortRef
from controller.placement import Demand, Placement, place

log = logging.getLogger("loom.te")
WAIT = 5.0  # seconds before the colouring is tried again for the same elephants


class Recolouring:
    def __init__(self, margin: float, hold_down: float, events: Counter[str]) -> None:
        self.margin, self.hold_down = margin, hold_down
        self.events = events  # counts "recoloured": each colouring taken
        self._failed: tuple[float, frozenset[Hashable]] = (0.0, frozenset())
        self._last = -1e9  # when one was last taken

    def better(
        self,
        now: float,
        demands: list[Demand],
        cap: Mapping[PortRef, float],
        background: Mapping[PortRef, float],
        far: Far,
        leaves: Iterable[int],
        placement: Placement,
    ) -> Placement:
        """``placement``, or the colouring's where it is better (module docstring)."""
        keys = frozenset(d.key for d in demands)
        if keys == self._failed[1] and now < self._failed[0] + WAIT:
            return placement
        if now < self._last + self.hold_down:
            return placement
        coloured = from_colouring(demands, far, leaves)
        if coloured is not None:
            other = place(coloured, cap, background, margin=self.margin)
            if other.max_utilization < placement.max_utilization - self.margin:
                self.events["recoloured"] += 1
                self._last = now
                log.info(
                    "recoloured: busiest link %.2f -> %.2f",
                    placement.max_utilization,
                    other.max_utilization,
                )
                return other
        self._failed = (now, keys)
        return placement
