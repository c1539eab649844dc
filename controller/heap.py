"""Python's cyclic collector kept off what Loom holds for long.

Rules, plans and routes live until the fabric changes, and at size they are millions of
objects: every full pass of the collector walked all of them again, holding the event
loop for seconds at a k=24 fat-tree (a third of its bring-up). None of them is cyclic
garbage (they are freed by reference counting when replaced), so after every call into
the core what it built is *frozen*: moved where the collector never looks (a constant-
time move). Cyclic garbage frozen that way would be kept; the core makes none that
matters (its state is trees of frozen dataclasses, dicts and tuples). The shim and the
scale benchmark call the same two functions.
"""

from __future__ import annotations

import gc


def start() -> None:
    """Everything imported and built before the first switch lives as long as the process."""
    gc.collect()
    gc.freeze()


def after() -> None:
    """After a call into the core: what it built and kept is long-lived."""
    gc.freeze()
