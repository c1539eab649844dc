"""Who owns which rules. Every part of the core that plans rules (a *plan source*)
keeps them under an ``Owner`` key, so re-planning one part never touches another's
rules: the store diffs each owner's old plan against its new one."""

from __future__ import annotations

from collections.abc import Hashable
from enum import StrEnum

from controller.model import SwitchRules


class OwnerKind(StrEnum):
    BASE = "base"  # per switch: pipeline skeleton, LLDP/ARP catch, meters, DSCP classes
    ROUTE = "route"  # per switch: its routes towards every destination switch
    DEST = "dest"  # per destination switch: delivery to its hosts
    FLOW = "flow"  # per tracked flow: traffic engineering's pins
    QUIET = "quiet"  # per edge port: flow tracking paused (expires on its own)
    JOB = "job"  # per collective job: its placed pairs
    TENANT = "tenant"  # per tenant: admission rules and meters
    PROTECT = "protect"  # per switch: fast-failover groups and detour tunnels

    @property
    def follows_routes(self) -> bool:
        """Rules that forward along routes: fast failover wraps their outputs."""
        return self in (OwnerKind.ROUTE, OwnerKind.FLOW, OwnerKind.JOB)


Owner = tuple[OwnerKind, Hashable]
Plan = dict[int, SwitchRules]  # dpid -> rules of one owner
Plans = dict[Owner, Plan]
