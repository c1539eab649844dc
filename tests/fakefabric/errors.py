"""Errors the fake fabric raises.

A real switch answers a bad message with an asynchronous OFPT_ERROR and carries on; a
test wants to hear about it at the line that sent the message, so ``FakeFabric.send``
raises :class:`OFError` (named with the spec's type and code, so tests can assert on the
exact rejection) and also records it in ``FakeFabric.errors``.
"""

from __future__ import annotations

from ryu.ofproto import ofproto_v1_3 as ofp


class OFError(Exception):
    """The switch would reject the message with ``OFPT_ERROR`` ``(type, code)``."""

    def __init__(self, type_name: str, code_name: str, detail: str, dpid: int | None = None):
        self.type_name = type_name
        self.code_name = code_name
        self.type: int = getattr(ofp, type_name)
        self.code: int = getattr(ofp, code_name)
        self.detail = detail
        self.dpid = dpid
        where = f"dpid {dpid}: " if dpid is not None else ""
        super().__init__(f"{where}{type_name}/{code_name}: {detail}")

    def at(self, dpid: int) -> OFError:
        """The same error, naming the switch that raised it."""
        return OFError(self.type_name, self.code_name, self.detail, dpid)


class UnsupportedError(NotImplementedError):
    """A legal OpenFlow feature the fake does not model (MPLS, PBB, OFPP_NORMAL, ...).

    Raised instead of guessing, so a test never passes on behaviour nobody simulated.
    """


class TraceLimitError(RuntimeError):
    """A trace fanned out into more branches than ``max_branches`` (e.g. a broadcast storm)."""


def flow_error(code: str, detail: str) -> OFError:
    return OFError("OFPET_FLOW_MOD_FAILED", code, detail)


def group_error(code: str, detail: str) -> OFError:
    return OFError("OFPET_GROUP_MOD_FAILED", code, detail)


def meter_error(code: str, detail: str) -> OFError:
    return OFError("OFPET_METER_MOD_FAILED", code, detail)


def action_error(code: str, detail: str) -> OFError:
    return OFError("OFPET_BAD_ACTION", code, detail)


def instruction_error(code: str, detail: str) -> OFError:
    return OFError("OFPET_BAD_INSTRUCTION", code, detail)


def match_error(code: str, detail: str) -> OFError:
    return OFError("OFPET_BAD_MATCH", code, detail)


def request_error(code: str, detail: str) -> OFError:
    return OFError("OFPET_BAD_REQUEST", code, detail)
