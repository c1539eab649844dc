"""The core's settings (``controller.settings`` reads them from the environment)."""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.engineer import TeConfig
from controller.qos import COLLECTIVE, TrafficClass


@dataclass(frozen=True)
class FabricConfig:
    lldp_interval: float = 1.0
    lldp_timeout: float = 3.5
    arp_probe_interval: float = 1.0
    arp_wait_timeout: float = 3.0
    poll_interval: float = 0.5
    link_capacity_mbps: float | None = None  # overrides what ports report (emulated links)
    qos: bool = True  # DSCP classes and queues (off: jobs are placed but not prioritised)
    settle_time: float = 4.0  # after a switch is read back: when to drop what no plan claims
    fast_failover: bool = True  # failover groups with detours, so switches bridge link failures
    # in a cluster: every detour searched afresh when a link comes, so all instances hold
    # the same ones whatever order they learned the fabric in (tunnels span switches)
    fresh_detours: bool = False
    # collective queues jobs are spread over by priority, highest first (DSCP, queue)
    job_levels: tuple[TrafficClass, ...] = (COLLECTIVE,)
    te: TeConfig = field(default_factory=TeConfig)
