"""The one place that chooses the OpenFlow framework: Ryu, or OpenStack's os-ken fork.

Whichever manager started the process has already imported its framework, so that one
wins (an app built on the other framework's base class would never be loaded);
otherwise Ryu is preferred.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

if "os_ken" in sys.modules and "ryu" not in sys.modules:  # pragma: no cover - os-ken only
    from os_ken.base import app_manager
    from os_ken.controller import ofp_event
    from os_ken.controller.handler import (
        CONFIG_DISPATCHER,
        DEAD_DISPATCHER,
        MAIN_DISPATCHER,
        set_ev_cls,
    )
    from os_ken.lib import hub
    from os_ken.lib.packet import arp, ethernet, ipv4, lldp, packet, tcp, udp, vlan
    from os_ken.ofproto import ofproto_v1_3 as ofp
    from os_ken.ofproto import ofproto_v1_3_parser as parser

    BaseApp = app_manager.OSKenApp
    FRAMEWORK = "os_ken"
else:
    from ryu.base import app_manager
    from ryu.controller import ofp_event
    from ryu.controller.handler import (
        CONFIG_DISPATCHER,
        DEAD_DISPATCHER,
        MAIN_DISPATCHER,
        set_ev_cls,
    )
    from ryu.lib import hub
    from ryu.lib.packet import arp, ethernet, ipv4, lldp, packet, tcp, udp, vlan
    from ryu.ofproto import ofproto_v1_3 as ofp
    from ryu.ofproto import ofproto_v1_3_parser as parser

    BaseApp = app_manager.RyuApp
    FRAMEWORK = "ryu"


def offload(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a native thread while the event loop goes on serving switches
    (both frameworks run on eventlet; its thread pool hands the result back)."""
    from eventlet import tpool

    result: T = tpool.execute(fn, *args)
    return result


__all__ = [
    "CONFIG_DISPATCHER",
    "DEAD_DISPATCHER",
    "FRAMEWORK",
    "MAIN_DISPATCHER",
    "BaseApp",
    "app_manager",
    "arp",
    "ethernet",
    "hub",
    "ipv4",
    "lldp",
    "offload",
    "ofp",
    "ofp_event",
    "packet",
    "parser",
    "set_ev_cls",
    "tcp",
    "udp",
    "vlan",
]
