"""Hostile frames at host ports, fabric ports, odd ports and unknown switches of a learned
fat-tree: decoding never raises, the core answers each within 1 s, and forwarding does
not change (links, hosts' places, unicast delivery)."""

from __future__ import annotations

import pytest
from hypothesis import Phase, event, given, seed, settings

from tests.fuzz.budget import SEED
from tests.fuzz.checks_frames import FrameCase, FrameWorld, check_forwarding, check_frame
from tests.fuzz.strategies_frames import frame_batches


@pytest.fixture(scope="module")
def world() -> FrameWorld:
    return FrameWorld()


# No Hypothesis deadline here: a case that changed the core's rules (a host learned from a
# hostile ARP, say) is followed by a fresh copy of the simulated fabric (~0.5 s), which
# is harness time. Every frame's own time is bounded by check_frame (1 s, perf_counter).
# No shrinking either: every shrink step that fails needs a fresh fabric, so a failure took
# ~50 s to shrink; a batch holds at most 8 frames, each printed with its shape.
@seed(SEED)
@settings(deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.explain))
@given(batch=frame_batches)
def test_hostile_frames_change_no_forwarding(world: FrameWorld, batch: list[FrameCase]) -> None:
    world.reset_if_dirty()
    for case in batch:
        event(case.shape.split(":", 1)[0])
        check_frame(world, case)
    check_forwarding(world)
