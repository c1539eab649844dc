"""Location-encoded host addresses (PortLand's pseudo-MACs), so transit rules do not grow
with hosts.

Loom answers every ARP request itself, so the MAC a host learns for a peer can be one
Loom chose: ``0a:TT:TT:SS:SS:ss`` carries the peer's tenant id (16 bits), the index of
the switch it sits on (14 bits) and a slot on that switch (10 bits). Transit switches
then match the switch bits under a mask (one rule per destination switch, or one default
for most of them), the ingress checks the tenant bits (so isolation needs no rule per
destination host), and the destination switch restores the host's real MAC as it
delivers. Addresses are stable: a switch keeps its index and a host its slot while Loom
runs, and both are read back from the delivery rules after a restart.
"""

from __future__ import annotations

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

    def switch_index(self, dpid: int) -> int:
        """A switch's index: its dpid's low bits when free (so restarts agree), else the
        smallest free one."""
        index = self.index_of.get(dpid)
        if index is not None:
            return index
        preferred = dpid if 0 < dpid < MAX_SWITCHES else dpid % (MAX_SWITCHES - 1) + 1
        if preferred in self._taken:
            free = (i for i in range(1, MAX_SWITCHES) if i not in self._taken)
            preferred = next(free, 0)
            if preferred == 0:
                raise ValueError(f"more than {MAX_SWITCHES - 1} switches: no address left")
        self._bind(dpid, preferred)
        return preferred

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
        if owner is None or owner == dpid:
            self._bind(dpid, index)
        used = self._slots.setdefault(dpid, {})
        if used.get(slot, mac) == mac and self.index_of.get(dpid) == index:
            self.release(mac)
            used[slot] = mac
            self.slot_of[mac] = (dpid, slot)
            self._bump(dpid)
