"""Location-encoded host addresses (PortLand's pseudo-MACs), so transit rules do not grow
with hosts.

Loom answers every ARP request itself, so the MAC a host learns for a peer can be one
Loom chose: ``0a:TT:TT:SS:SS:ss`` carries the peer's tenant id (16 bits), the index of
the switch it sits on (14 bits) and a slot on that switch (10 bits). Transit switches
then match the switch bits under a mask (one rule per destination switch, or one default
for most of them), the ingress checks the tenant bits (so isolation needs no rule per
destination host), and the destination switch restores the host's real MAC as it
delivers. Addresses are stable: a switch keeps its index once an address on it was
handed out, a host its slot while Loom runs, and both are read back from the delivery
rules after a restart.

Switch indexes come from the fabric's shape, not from datapath ids: each group of leaves
(a pod, a dragonfly group; ``controller.grouping``) gets one aligned range, so a transit
switch reaches a whole group with one masked rule however the switches are numbered.
Until an address is handed out on a switch its index may move as the fabric is learned.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

MARK = 0x0A  # first octet: locally administered, unicast
MARK_SHIFT = 40
TENANT_SHIFT = 24
TENANT_BITS = 16
SWITCH_SHIFT = 10
SWITCH_BITS = 14
SLOT_BITS = 10
MAX_SWITCHES = 1 << SWITCH_BITS
MAX_SLOTS = 1 << SLOT_BITS

MARK_MASK = 0xFF << MARK_SHIFT
TENANT_MASK = ((1 << TENANT_BITS) - 1) << TENANT_SHIFT
SWITCH_MASK = (MAX_SWITCHES - 1) << SWITCH_SHIFT
SLOT_MASK = MAX_SLOTS - 1


def mac_str(value: int) -> str:
    return ":".join(f"{(value >> s) & 0xFF:02x}" for s in range(40, -1, -8))


def mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def pmac(tenant: int, switch: int, slot: int) -> str:
    """The address Loom hands out for a host."""
    value = (MARK << MARK_SHIFT) | (tenant << TENANT_SHIFT) | (switch << SWITCH_SHIFT) | slot
    return mac_str(value)


def parse(mac: str) -> tuple[int, int, int] | None:
    """(tenant, switch index, slot) of a Loom address, ``None`` for any other MAC."""
    try:
        value = mac_int(mac)
    except ValueError:
        return None
    if value >> MARK_SHIFT != MARK:
        return None
    tenant = (value & TENANT_MASK) >> TENANT_SHIFT
    return tenant, (value & SWITCH_MASK) >> SWITCH_SHIFT, value & SLOT_MASK


def masked(value: int, mask: int) -> tuple[str, str]:
    """An ``eth_dst`` match: Loom's mark plus the bits of ``mask``."""
    full = mask | MARK_MASK
    return mac_str(((MARK << MARK_SHIFT) | value) & full), mac_str(full)


def to_switch(index: int | None, spread_bits: int = 0, spread: int = 0) -> tuple[str, str]:
    """Addresses on switch ``index`` (any switch when ``None``) whose slot's low
    ``spread_bits`` equal ``spread``: transit switches spread destinations over next hops
    by slot, so the tiers never make the same choice for the same flow."""
    low = (1 << spread_bits) - 1
    value, mask = spread & low, low
    if index is not None:
        value |= index << SWITCH_SHIFT
        mask |= SWITCH_MASK
    return masked(value, mask)


def of_tenant(tenant: int) -> tuple[str, str]:
    """Every address in ``tenant``: what a host of that tenant may send to."""
    return masked(tenant << TENANT_SHIFT, TENANT_MASK)


@dataclass
class AddressBook:
    """Switch indexes and host slots, kept stable while Loom runs and recovered from
    what switches hold after a restart."""

    index_of: dict[int, int] = field(default_factory=dict)  # dpid -> switch index
    slot_of: dict[str, tuple[int, int]] = field(default_factory=dict)  # MAC -> (dpid, slot)
    _taken: dict[int, int] = field(default_factory=dict)  # switch index -> dpid
    _slots: dict[int, dict[int, str]] = field(default_factory=dict)  # dpid -> slot -> MAC
    # per switch, bumped whenever an address there may have changed (plans kept per stamp)
    stamps: dict[int, int] = field(default_factory=dict)
    _fixed: set[int] = field(default_factory=set)  # switches an address was handed out on
    _reserved: set[int] = field(default_factory=set)  # indexes of the groups' ranges

    def fixed(self, dpid: int) -> bool:
        """Whether an address on ``dpid`` was handed out (its index no longer moves)."""
        return dpid in self._fixed

    def switch_index(self, dpid: int) -> int:
        """A switch's index: where ``arrange`` put it; else its dpid's low bits when free
        (so instances agree), else the highest free index, outside the groups' ranges."""
        index = self.index_of.get(dpid)
        if index is not None:
            return index
        blocked = self._taken.keys() | self._reserved
        preferred = dpid if 0 < dpid < MAX_SWITCHES else dpid % (MAX_SWITCHES - 1) + 1
        free = (i for i in range(MAX_SWITCHES - 1, 0, -1) if i not in blocked)
        index = preferred if preferred not in blocked else next(free, 0)
        if index == 0:
            raise ValueError(f"more than {MAX_SWITCHES - 1} switches: no address left")
        self._bind(dpid, index)
        return index

    def arrange(self, groups: Sequence[Sequence[int]]) -> None:
        """Lay ``groups`` of switches out in aligned ranges of indexes (largest groups
        first, each range a power of two, index 0 never used). Switches with a handed-out
        address keep their index, and their group's range is chosen around them where it
        can be; switches in no group lose a movable index. Deterministic for the same
        groups and handed-out addresses, so instances that learned the same fabric agree."""
        placed = {d for g in groups for d in g}
        for dpid in [d for d in self.index_of if d not in self._fixed and d not in placed]:
            self._unbind(dpid)
        layout = _Layout({i: d for i, d in self._taken.items() if d in self._fixed})
        want: dict[int, int] = {}
        for group in sorted(groups, key=lambda g: (-len(g), min(g, default=0))):
            members = sorted(group)
            free = layout.reserve(members)
            for dpid in members:
                if dpid not in self._fixed:
                    want[dpid] = layout.take(dpid, next(free, None))
        self._reserved = layout.reserved
        for dpid, index in want.items():
            if self.index_of.get(dpid) != index:
                self._unbind(dpid)
        for dpid, index in want.items():
            if self.index_of.get(dpid) != index:
                self._bind(dpid, index)

    def _unbind(self, dpid: int) -> None:
        old = self.index_of.pop(dpid, None)
        if old is not None:
            self._bump(dpid)
            if self._taken.get(old) == dpid:
                del self._taken[old]

    def _bump(self, dpid: int) -> None:
        self.stamps[dpid] = self.stamps.get(dpid, 0) + 1

    def _bind(self, dpid: int, index: int) -> None:
        self._bump(dpid)
        old = self.index_of.pop(dpid, None)
        if old is not None:
            self._taken.pop(old, None)
        self.index_of[dpid] = index
        self._taken[index] = dpid

    def slot(self, mac: str, dpid: int, port: int = 0) -> int:
        """A host's slot on its switch: kept while it stays there; else its port number
        when free, so instances that learn hosts in different orders agree; else the
        highest free one (clear of the port numbers)."""
        held = self.slot_of.get(mac)
        if held is not None and held[0] == dpid:
            return held[1]
        self.release(mac)
        used = self._slots.setdefault(dpid, {})
        if 0 < port < MAX_SLOTS and port not in used:
            slot: int | None = port
        else:
            slot = next((s for s in range(MAX_SLOTS - 1, -1, -1) if s not in used), None)
        if slot is None:
            raise ValueError(f"more than {MAX_SLOTS} hosts on switch {dpid:016x}")
        used[slot] = mac
        self.slot_of[mac] = (dpid, slot)
        self._fixed.add(dpid)
        self._bump(dpid)
        return slot

    def release(self, mac: str) -> None:
        held = self.slot_of.pop(mac, None)
        if held is not None:
            self._bump(held[0])
            self._slots.get(held[0], {}).pop(held[1], None)

    def address(self, mac: str, dpid: int, tenant: int, port: int = 0) -> str:
        return pmac(tenant, self.switch_index(dpid), self.slot(mac, dpid, port))

    def host_at(self, address: str) -> str | None:
        """The real MAC of the host Loom gave ``address`` (``None``: no such host)."""
        parsed = parse(address)
        if parsed is None:
            return None
        dpid = self._taken.get(parsed[1])
        return None if dpid is None else self._slots.get(dpid, {}).get(parsed[2])

    def adopt(self, dpid: int, mac: str, address: str) -> None:
        """A delivery rule read back from a switch: keep the address it was given."""
        parsed = parse(address)
        if parsed is None:
            return
        _, index, slot = parsed
        owner = self._taken.get(index)
        if owner is not None and owner != dpid and owner not in self._fixed:
            self._unbind(owner)  # a movable index: the address read back wins
            owner = None
        if owner is None or owner == dpid:
            self._bind(dpid, index)
            self._fixed.add(dpid)
        used = self._slots.setdefault(dpid, {})
        if used.get(slot, mac) == mac and self.index_of.get(dpid) == index:
            self.release(mac)
            used[slot] = mac
            self.slot_of[mac] = (dpid, slot)
            self._bump(dpid)


class _Layout:
    """One pass of ``AddressBook.arrange``: indexes taken so far and the groups' ranges."""

    def __init__(self, kept: dict[int, int]) -> None:
        self.taken = {0: -1, **kept}  # index -> dpid (index 0 is never handed out)
        self.reserved: set[int] = set()
        self._cursor: dict[int, int] = {}  # range size -> lowest range that may be free

    def reserve(self, members: list[int]) -> Iterator[int]:
        """The free indexes of the group's range (none if no range fits)."""
        size = 1 << max(0, len(members) - 1).bit_length()
        lo = self._around(set(members), size)
        if lo is None:
            lo = self._lowest_free(size)
        if lo is None:
            return iter(())
        span = range(lo, lo + size)
        self.reserved.update(span)
        return (i for i in span if i not in self.taken)

    def take(self, dpid: int, index: int | None) -> int:
        """``index`` for ``dpid``; ``None``: the highest index outside every range."""
        if index is None:
            top = range(MAX_SWITCHES - 1, 0, -1)
            index = next((i for i in top if i not in self.taken and i not in self.reserved), 0)
            if index == 0:
                raise ValueError(f"more than {MAX_SWITCHES - 1} switches: no address left")
        self.taken[index] = dpid
        return index

    def _fits(self, lo: int, size: int, mine: set[int]) -> bool:
        return all(
            i not in self.reserved and (i not in self.taken or self.taken[i] in mine)
            for i in range(lo, lo + size)
        )

    def _around(self, mine: set[int], size: int) -> int | None:
        """The range holding most of the group's kept indexes, if one fits."""
        held = Counter(i - i % size for i, d in self.taken.items() if d in mine)
        for lo, _ in sorted(held.items(), key=lambda item: (-item[1], item[0])):
            if self._fits(lo, size, mine):
                return lo
        return None

    def _lowest_free(self, size: int) -> int | None:
        lo = self._cursor.get(size, 0)
        while lo + size <= MAX_SWITCHES:
            if not any(i in self.reserved or i in self.taken for i in range(lo, lo + size)):
                self._cursor[size] = lo + size
                return lo
            lo += size
        self._cursor[size] = lo
        return None
