"""Which switches this instance may write to: its OpenFlow role on each, as the switch sees it.

In a cluster every switch is connected to every instance, and only its master may change
it. Winning a switch's election in the store is not enough: the switch must have answered
the role request (with the election's generation id) before anything is written, or a
flow-mod could reach it while another instance is still master there. And a master whose
lease may have expired in the store (it lost touch with etcd) stops writing before anyone
else can be elected. Everything the core plans for a switch this instance may not write is
dropped here; the core's belief about that switch is corrected by a read-back when this
instance takes it over.

With no cluster configured every switch is writable, as Loom has always run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from controller.model import Message, Messages, StatsRequest


class Phase(Enum):
    SLAVE = "slave"  # another instance (or none) is master: read only
    CLAIMED = "claimed"  # won in the store, role request sent, no reply yet
    MASTER = "master"  # the switch answered: this instance is its master


@dataclass
class Roles:
    """This instance's role on each switch, and the gate on what it sends them."""

    clustered: bool = False
    fresh_until: float = float("inf")  # the store lease is surely alive until then
    phase: dict[int, Phase] = field(default_factory=dict)
    generation: dict[int, int] = field(default_factory=dict)
    dropped: Counter[str] = field(default_factory=Counter)

    def writable(self, dpid: int, now: float) -> bool:
        if not self.clustered:
            return True
        return self.phase.get(dpid) is Phase.MASTER and now < self.fresh_until

    def fenced(self, now: float) -> bool:
        """The lease may have expired: no switch is written until it is renewed."""
        return self.clustered and now >= self.fresh_until

    def gate(self, messages: Messages, now: float) -> Messages:
        """What may be sent: everything to switches this instance masters, and only
        read requests (statistics, read-backs) to the others."""
        if not self.clustered:
            return messages
        out: Messages = {}
        for dpid, msgs in messages.items():
            if self.writable(dpid, now):
                out[dpid] = msgs
                continue
            kept: list[Message] = [m for m in msgs if isinstance(m, StatsRequest)]
            if len(kept) < len(msgs):
                self.dropped[self._reason(dpid, now)] += len(msgs) - len(kept)
            if kept:
                out[dpid] = kept
        return out

    def _reason(self, dpid: int, now: float) -> str:
        phase = self.phase.get(dpid, Phase.SLAVE)
        if phase is Phase.MASTER and now >= self.fresh_until:
            return "fenced"
        return phase.value

    def claim(self, dpid: int, generation: int) -> None:
        """Elected in the store with ``generation``: writes wait for the role reply."""
        self.phase[dpid] = Phase.CLAIMED
        self.generation[dpid] = generation

    def replied(self, dpid: int, master: bool, generation: int) -> bool:
        """The switch answered a role request. True when this makes the instance its
        master now, so the switch must be read back before it is planned for."""
        claimed = self.phase.get(dpid) is Phase.CLAIMED and self.generation.get(dpid) == generation
        if master and claimed:
            self.phase[dpid] = Phase.MASTER
            return True
        if not master and self.phase.get(dpid) is not Phase.CLAIMED:
            self.phase[dpid] = Phase.SLAVE
        return False

    def release(self, dpid: int) -> bool:
        """No longer master (moved to another instance, refused as stale, or gone);
        True when it was master or claimed."""
        was = self.phase.get(dpid, Phase.SLAVE) is not Phase.SLAVE
        self.phase[dpid] = Phase.SLAVE
        self.generation.pop(dpid, None)
        return was

    def forget(self, dpid: int) -> None:
        self.phase.pop(dpid, None)
        self.generation.pop(dpid, None)

    def held(self) -> dict[int, Phase]:
        """Switches this instance has claimed or masters."""
        return {d: p for d, p in sorted(self.phase.items()) if p is not Phase.SLAVE}

    def masters(self) -> list[int]:
        return sorted(d for d, p in self.phase.items() if p is Phase.MASTER)
