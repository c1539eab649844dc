"""Which connection speaks for a datapath id: the first one, until it goes.

A switch names itself by the datapath id in its FEATURES_REPLY, and nothing in OpenFlow
stops a second connection from claiming an id already connected. Obeying the latest
would hand the fabric's rules and packet-ins for that switch to whoever claimed last, so
a second claim from another address is refused (the first stays in charge). A claim
from the address already holding the id is a restarted switch whose old connection is
not yet known dead: it takes over, and the old connection is to be closed.

Addresses are compared without the port (a reconnect comes from a new source port). In
the lab every bridge connects from 127.0.0.1, so only another address is refused there.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

C = TypeVar("C")


class Verdict(Enum):
    NEW = "new"  # no connection held the id
    SAME = "same"  # the connection holding it claimed it again
    RECONNECT = "reconnect"  # a new connection from the holder's address: it takes over
    REFUSED = "refused"  # another address holds the id: close the claimant


@dataclass(frozen=True)
class Claim(Generic[C]):
    """A verdict, with the connection and address that held the id before (if any):
    on RECONNECT the connection to close, on REFUSED the one that stays."""

    verdict: Verdict
    held_by: C | None = None
    held_from: str | None = None

    @property
    def accepted(self) -> bool:
        return self.verdict is not Verdict.REFUSED


class SwitchClaims(Generic[C]):
    """Datapath id -> the connection (``C``, any identity) that speaks for it, and its
    address; ``claim`` when a connection announces an id, ``release`` when it goes."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[C, str]] = {}

    def claim(self, dpid: int, address: str, conn: C) -> Claim[C]:
        held = self._held.get(dpid)
        if held is None:
            self._held[dpid] = (conn, address)
            return Claim(Verdict.NEW)
        holder, held_from = held
        if holder is conn:
            return Claim(Verdict.SAME, holder, held_from)
        if held_from != address:
            return Claim(Verdict.REFUSED, holder, held_from)
        self._held[dpid] = (conn, address)
        return Claim(Verdict.RECONNECT, holder, held_from)

    def release(self, dpid: int, conn: C) -> bool:
        """Forget ``dpid`` if ``conn`` holds it; False for a refused or replaced one."""
        held = self._held.get(dpid)
        if held is None or held[0] is not conn:
            return False
        del self._held[dpid]
        return True

    def holder(self, dpid: int) -> C | None:
        held = self._held.get(dpid)
        return held[0] if held is not None else None

    def __len__(self) -> int:
        return len(self._held)
