"""Traffic engineering's settings, one frozen record shared by its concerns (new-flow
placement, the flood guard, elephant placement), so none of them imports another's
module to learn them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TeConfig:
    enabled: bool = True
    te_interval: float = 0.5
    elephant_share: float = 0.1
    flow_idle_timeout: float = 10.0
    hold_down: float = 2.0
    stage_delay: float = 0.2
    margin: float = 0.05
    background_floor: float = 0.1  # share of capacity: less unexplained load counts as none
    path_policy: str = "adaptive"
    ack_priority: bool = True  # elephants' ACK streams ride the control class
    max_candidates: int = 16
    place_new: bool = True  # each new flow pinned at its first packet onto the least-loaded path
    keep_placed: bool = True  # ... and kept there as an elephant unless a move lowers the peak
    max_flows: int = 20_000  # tracked flows at most (rules and memory stay bounded) ...
    flows_per_host: int = 2  # ... or this many per host, if more; ACK streams apart
    new_flows_per_port: int = 100  # per second; above it a port stops being tracked ...
    quiet_seconds: float = 10.0  # ... for this long (its traffic still flows)
