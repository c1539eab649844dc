"""Fake OpenFlow 1.3 fabric for Loom's tests: applies real Ryu parser messages to per-switch
tables of a topology graph and traces packets across it, per the OpenFlow 1.3.5 spec.

Modules: ``fields`` (OXM values, masks, prerequisites), ``actions`` (validation),
``tables`` (FlowMod/GroupMod/MeterMod), ``pipeline`` (one switch), ``model`` (trace
results), ``fabric`` (the graph, links and the walk).
"""

from .errors import OFError, TraceLimitError, UnsupportedError
from .fabric import FakeFabric
from .model import Branch, End, Fork, Hop, Report, Trace
from .tables import FlowEntry, GroupEntry, MeterEntry

__all__ = [
    "Branch",
    "End",
    "FakeFabric",
    "FlowEntry",
    "Fork",
    "GroupEntry",
    "Hop",
    "MeterEntry",
    "OFError",
    "Report",
    "Trace",
    "TraceLimitError",
    "UnsupportedError",
]
