"""OpenFlow 1.3 controller roles as a switch enforces them (spec §6.3.6, as Open vSwitch does).

Every connection starts *equal* (full access). A master or slave request carries a
generation id; one older than the newest seen (compared as a signed 64-bit difference)
is refused with OFPRRFC_STALE. A new master turns the previous one into a slave. A slave
may read (statistics) but a write from it is refused with OFPBRC_IS_SLAVE.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

EQUAL, MASTER, SLAVE = "equal", "master", "slave"


class StaleGeneration(Exception):
    """OFPET_ROLE_REQUEST_FAILED / OFPRRFC_STALE."""


@dataclass
class SwitchRoles:
    roles: dict[str, str] = field(default_factory=dict)  # controller -> role
    newest: int | None = None
    refused: Counter[str] = field(default_factory=Counter)  # writes refused, per controller

    def request(self, controller: str, role: str, generation: int) -> str:
        if role in (MASTER, SLAVE):
            if self.newest is not None and _signed(generation - self.newest) < 0:
                raise StaleGeneration(f"{controller}: generation {generation} < {self.newest}")
            self.newest = generation
        if role == MASTER:
            for other, r in self.roles.items():
                if r == MASTER and other != controller:
                    self.roles[other] = SLAVE
        self.roles[controller] = role
        return role

    def may_write(self, controller: str) -> bool:
        if self.roles.get(controller, EQUAL) == SLAVE:
            self.refused[controller] += 1
            return False
        return True

    def master(self) -> str | None:
        return next((c for c, r in self.roles.items() if r == MASTER), None)


def _signed(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value
