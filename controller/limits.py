"""What a switch can hold: per-switch hardware profiles that Loom plans within.

Switch ASICs cap what a controller may use: buckets per select group, groups in the
group table, whether fast-failover groups exist at all, entries in the flow tables.
A switch sent more answers with an OpenFlow error and the rule is simply missing, so
Loom plans within the switch's profile instead:

- more equal-cost next hops than ``select_buckets``: a select group takes a subset,
  rotated per destination block so the subsets together still use every port;
- more next-hop sets than ``groups``: the most used sets get groups, the rest one port
  each (chosen per destination block, so spread);
- fast failover only where the profile has it and the groups it needs fit beside the
  select groups (all of a switch's failover groups or none: half a set would protect
  some ports and not others for no reason a user could see);
- ``flows``: optional rules (pinned flows, job placements) that would fill a switch's
  tables past the cap are refused and counted; forwarding itself is never refused.

The default profile is Open vSwitch's, which caps none of these.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SwitchLimits:
    name: str = "openvswitch"
    select_buckets: int | None = None  # None: no cap
    groups: int | None = None
    fast_failover: bool = True
    flows: int | None = None


OPEN_VSWITCH = SwitchLimits()


@dataclass(frozen=True)
class Limits:
    """The profile of every switch: ``by_dpid`` where assigned, else ``default``."""

    default: SwitchLimits = OPEN_VSWITCH
    by_dpid: Mapping[int, SwitchLimits] = field(default_factory=dict)

    def of(self, dpid: int) -> SwitchLimits:
        return self.by_dpid.get(dpid, self.default)


NO_LIMITS = Limits()


def pick(key: int, count: int) -> int:
    """A stable choice among ``count`` options for ``key`` (no Python ``hash``)."""
    return zlib.crc32(key.to_bytes(8, "big")) % count


def bucket_subset(ports: tuple[int, ...], cap: int | None, key: int) -> tuple[int, ...]:
    """At most ``cap`` of ``ports``: a window rotated by ``key``, in port order."""
    if cap is None or len(ports) <= cap:
        return ports
    start = pick(key, len(ports))
    return tuple(sorted(ports[(start + i) % len(ports)] for i in range(cap)))
