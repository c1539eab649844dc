"""Loom's host addresses: location and tenant in the MAC, stable while Loom runs."""

from __future__ import annotations

import pytest

from controller.addressing import AddressBook, of_tenant, parse, pmac, to_switch


def bits(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def test_an_address_carries_tenant_switch_and_slot_and_is_unicast_and_local() -> None:
    address = pmac(0x1234, 300, 17)
    assert parse(address) == (0x1234, 300, 17)
    first = bits(address) >> 40
    assert first & 0x02 and not first & 0x01  # locally administered, unicast
    assert parse("02:00:00:00:00:01") is None and parse("not a mac") is None


def test_masks_select_a_switch_a_spread_class_and_a_tenant() -> None:
    value, mask = to_switch(300, 2, 1)
    for slot, hit in ((1, True), (5, True), (2, False)):
        assert (bits(pmac(7, 300, slot)) & bits(mask) == bits(value)) is hit
    assert bits(pmac(7, 301, 1)) & bits(mask) != bits(value)
    value, mask = of_tenant(7)
    assert bits(pmac(7, 9, 9)) & bits(mask) == bits(value)
    assert bits(pmac(8, 9, 9)) & bits(mask) != bits(value)
    assert bits("02:00:00:00:00:07") & bits(mask) != bits(value)  # a real MAC: not a tenant's


def test_switches_keep_their_index_and_hosts_their_slot() -> None:
    book = AddressBook()
    assert book.switch_index(5) == 5 and book.switch_index(5) == 5
    big = book.switch_index(0x0000_1234_5678_9ABC)
    assert 0 < big < 1 << 14 and book.switch_index(0x0000_1234_5678_9ABC) == big
    a = book.address("02:00:00:00:00:0a", 5, 0, port=3)
    b = book.address("02:00:00:00:00:0b", 5, 0, port=3)  # a second host behind port 3
    assert [parse(a), parse(b)] == [(0, 5, 3), (0, 5, 1023)]
    assert book.address("02:00:00:00:00:0a", 5, 0) == a
    assert book.host_at(b) == "02:00:00:00:00:0b" and book.host_at(pmac(0, 5, 9)) is None
    moved = book.address("02:00:00:00:00:0a", 6, 0, port=2)  # a move frees the old slot
    assert parse(moved) == (0, 6, 2) and book.host_at(a) is None


def test_instances_learning_hosts_in_any_order_give_the_same_addresses() -> None:
    """Cluster members learn hosts in different orders; one host per port gets the
    slot of its port on every member."""
    hosts = [(f"02:00:00:00:00:{i:02x}", 7, i) for i in range(1, 9)]
    one, two = AddressBook(), AddressBook()
    first = {mac: one.address(mac, dpid, 0, port) for mac, dpid, port in hosts}
    second = {mac: two.address(mac, dpid, 0, port) for mac, dpid, port in reversed(hosts)}
    assert first == second


def test_a_restarted_controller_adopts_the_addresses_switches_hold() -> None:
    book = AddressBook()
    book.adopt(5, "02:00:00:00:00:0b", pmac(3, 5, 4))
    assert book.address("02:00:00:00:00:0b", 5, 3) == pmac(3, 5, 4)
    assert parse(book.address("02:00:00:00:00:0c", 5, 3)) == (3, 5, 1023)


def test_a_collision_takes_the_highest_free_index() -> None:
    book = AddressBook()
    clash = (1 << 14) - 1 + 4  # too large: maps onto index 5 as well
    assert book.switch_index(5) == 5
    assert book.switch_index(clash) == (1 << 14) - 1


SHUFFLED = [0x9F3A_0000_0001, 0x0012_7777_0003, 0x4400_0000_00FF, 0x0000_0000_0002]
PODS = [SHUFFLED[:2], SHUFFLED[2:], [0xA1, 0xA2, 0xA3]]


def _range_of(book: AddressBook, group: list[int]) -> set[int]:
    """The aligned power-of-two range each member's index falls in."""
    size = 1 << (len(group) - 1).bit_length()
    return {book.index_of[d] // size for d in group}


def test_each_group_gets_one_aligned_range_whatever_the_dpids() -> None:
    book = AddressBook()
    book.arrange(PODS)
    for group in PODS:
        assert len(_range_of(book, group)) == 1
    indexes = [book.switch_index(d) for g in PODS for d in g]
    assert 0 not in indexes and len(set(indexes)) == len(indexes)
    again = AddressBook()
    again.arrange(list(reversed([list(reversed(g)) for g in PODS])))
    assert again.index_of == book.index_of  # the same fabric gives the same layout


def test_a_movable_index_follows_the_fabric_and_a_handed_out_one_stays() -> None:
    book = AddressBook()
    book.arrange([[d] for g in PODS for d in g])  # early: no links known, every switch alone
    fixed = SHUFFLED[2]
    kept = parse(book.address("02:00:00:00:00:01", fixed, 0, port=1))
    book.arrange(PODS)  # the links are in: the pods are known
    assert parse(book.address("02:00:00:00:00:01", fixed, 0, port=1)) == kept
    for group in PODS:
        assert len(_range_of(book, group)) == 1  # its pod's range was chosen around it
    book.arrange([PODS[0]])  # switches in no group lose a movable index only
    assert fixed in book.index_of and PODS[2][0] not in book.index_of


def test_a_read_back_address_takes_its_index_from_a_movable_switch() -> None:
    book = AddressBook()
    book.arrange(PODS)
    movable = PODS[0][0]
    index = book.index_of[movable]
    book.adopt(0x77, "02:00:00:00:00:09", pmac(1, index, 4))
    assert book.index_of[0x77] == index and book.index_of.get(movable) != index
    book.arrange([*PODS, [0x77]])
    assert book.index_of[0x77] == index and len(set(book.index_of.values())) == len(book.index_of)


def test_slots_run_out_with_a_clear_error() -> None:
    book = AddressBook()
    for i in range(1 << 10):
        book.slot(f"h{i}", 1)
    with pytest.raises(ValueError, match="hosts on switch"):
        book.slot("one-more", 1)
