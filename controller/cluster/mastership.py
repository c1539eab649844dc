"""Mastership as the store shows it, and what this instance should do about it.

Every instance reads the same keys and computes the same target assignment
(``shards.assign``), then acts only for itself: it claims the free switches the target
gives it, gives up those the target gives to another, and notices those it lost. A claim is
a key created only if absent and bound to the claimant's lease, so a dead instance's claims
vanish with its lease and no switch ever has two claims; the claim's revision is the
OpenFlow generation id, which only grows. Pure: the caller does the I/O.

Keys under the cluster prefix:
  members/ID        {"probe": "HOST:PORT", "api": URL, "switches": [dpid, ...], "ready": bool},
                    on ID's lease
  masters/DPID      "ID/LEASE" (DPID as 16 hex digits), on ID's lease
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from controller.cluster.etcd import Snapshot
from controller.cluster.shards import assign

MEMBERS, MASTERS = "members/", "masters/"


@dataclass(frozen=True)
class Member:
    id: str
    lease: int
    probe: str = ""  # HOST:PORT that refuses connections once the instance is dead
    api: str = ""
    switches: frozenset[int] = frozenset()
    ready: bool = True  # its view of the fabric is whole: it may take switches from others


@dataclass(frozen=True)
class Claim:
    member: str
    lease: int
    generation: int  # the store revision that created the claim


@dataclass(frozen=True)
class View:
    """The cluster at one store revision: live members and switch claims."""

    revision: int
    members: dict[str, Member] = field(default_factory=dict)
    masters: dict[int, Claim] = field(default_factory=dict)

    @staticmethod
    def parse(snapshot: Snapshot, prefix: str) -> View:
        members: dict[str, Member] = {}
        masters: dict[int, Claim] = {}
        for kv in snapshot.items:
            name = kv.key[len(prefix) :] if kv.key.startswith(prefix) else ""
            try:
                if name.startswith(MEMBERS):
                    body = json.loads(kv.value)
                    mid = name[len(MEMBERS) :]
                    members[mid] = Member(
                        mid,
                        kv.lease,
                        str(body.get("probe", "")),
                        str(body.get("api", "")),
                        frozenset(int(d) for d in body.get("switches", [])),
                        bool(body.get("ready", True)),
                    )
                elif name.startswith(MASTERS):
                    member, _, lease = kv.value.decode().rpartition("/")
                    dpid = int(name[len(MASTERS) :], 16)
                    masters[dpid] = Claim(member, int(lease, 16), kv.create_revision)
            except (ValueError, AttributeError, TypeError):
                continue  # not written by Loom: ignored rather than trusted
        return View(snapshot.revision, members, masters)

    def live_claims(self) -> dict[int, str]:
        """Claims made under their member's current lease (others are about to expire)."""
        out = {}
        for dpid, claim in self.masters.items():
            member = self.members.get(claim.member)
            if member is not None and member.lease == claim.lease:
                out[dpid] = claim.member
        return out

    def target(self) -> dict[int, str]:
        """The balanced assignment, except that a member still learning the fabric is given
        no switch another masters, nor one a ready member could take instead: it may have
        only what nobody else can (as when a whole cluster starts)."""
        eligible = _eligible(self.members.values())
        current = self.live_claims()
        out = assign(eligible, list(self.members), current)
        held = Counter(out.values())
        for dpid, member in sorted(out.items()):
            if self.members[member].ready or current.get(dpid) == member:
                continue
            ready = sorted((held[m], m) for m in eligible[dpid] if self.members[m].ready)
            instead = current.get(dpid) or (ready[0][1] if ready else member)
            if instead != member:
                held[member] -= 1
                held[instead] += 1
                out[dpid] = instead
        return out

    def unmastered(self) -> list[int]:
        """Switches some live member is connected to that nobody masters."""
        seen = {d for m in self.members.values() for d in m.switches}
        return sorted(seen - set(self.live_claims()))


def _eligible(members: Iterable[Member]) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for member in members:
        for dpid in member.switches:
            out.setdefault(dpid, set()).add(member.id)
    return out


def claim_key(prefix: str, dpid: int) -> str:
    return f"{prefix}{MASTERS}{dpid:016x}"


def claim_value(member: str, lease: int) -> bytes:
    return f"{member}/{lease:x}".encode()


@dataclass(frozen=True)
class Steps:
    claim: list[int]  # free switches the target gives this instance
    release: list[int]  # own claims the target gives to another
    confirm: list[tuple[int, int]]  # own claims not yet acted on: (dpid, generation)
    lost: list[int]  # switches held here that the store gives to another (or nobody)


def steps(
    view: View,
    me: str,
    lease: int,
    connected: Iterable[int],
    held: dict[int, int],
) -> Steps:
    """What this instance does at ``view``. ``held`` maps the switches it has claimed or
    masters to their generation; a claim newer than the view is not judged by it."""
    target = view.target()
    linked = set(connected)
    claim = [
        d for d, m in sorted(target.items()) if m == me and d not in view.masters and d in linked
    ]
    release, confirm = [], []
    for dpid, c in sorted(view.masters.items()):
        if c.member != me or c.lease != lease:
            continue
        if target.get(dpid) != me or dpid not in linked:
            release.append(dpid)
        elif dpid not in held:
            confirm.append((dpid, c.generation))
    lost = []
    for dpid, generation in sorted(held.items()):
        if generation > view.revision:
            continue
        now_held = view.masters.get(dpid)
        if now_held is None or now_held != Claim(me, lease, generation):
            lost.append(dpid)
    return Steps(claim, release, confirm, lost)
