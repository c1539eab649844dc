"""Python's cyclic collector kept off what Loom holds for long.

Rules, plans and routes live until the fabric changes, and at size they are millions of
objects: every full pass of the collector walked all of them again, holding the event
loop for seconds at a k=48 fat-tree. None of them is cyclic garbage (they are freed by
reference counting when replaced), so once built they are *frozen*: moved where the
collector never looks. The shim and the scale benchmark call the same two functions.
"""

from __future__ import annotations

import gc

FREEZE_AFTER_S = 0.05  # a call that planned this long built enough to be worth freezing


def start() -> None:
    """Everything imported and built before the first switch lives as long as the process."""
    gc.collect()
    gc.freeze()


def after(planned_s: float) -> None:
    """After a core call that spent ``planned_s`` planning: freeze what it built."""
    if planned_s >= FREEZE_AFTER_S:
        gc.freeze()
