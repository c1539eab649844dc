"""Which connection speaks for a datapath id (``controller.claims``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controller.claims import SwitchClaims, Verdict


class Conn:
    """A connection: only its identity matters."""

    def __init__(self, name: str) -> None:
        self.name = name


def test_first_claim_is_accepted_and_held() -> None:
    claims: SwitchClaims[Conn] = SwitchClaims()
    a = Conn("a")
    claim = claims.claim(0x51, "10.0.0.1", a)
    assert claim.verdict is Verdict.NEW and claim.accepted
    assert claims.holder(0x51) is a


def test_the_same_connection_claiming_again_changes_nothing() -> None:
    claims: SwitchClaims[Conn] = SwitchClaims()
    a = Conn("a")
    claims.claim(1, "10.0.0.1", a)
    claim = claims.claim(1, "10.0.0.1", a)
    assert claim.verdict is Verdict.SAME and claim.accepted and claims.holder(1) is a


def test_a_claim_from_another_address_is_refused_and_the_holder_stays() -> None:
    claims: SwitchClaims[Conn] = SwitchClaims()
    switch, rogue = Conn("switch"), Conn("rogue")
    claims.claim(7, "10.0.0.1", switch)
    claim = claims.claim(7, "10.0.0.66", rogue)
    assert claim.verdict is Verdict.REFUSED and not claim.accepted
    assert claim.held_by is switch and claim.held_from == "10.0.0.1"
    assert claims.holder(7) is switch
    assert not claims.release(7, rogue)  # the refused one's close frees nothing
    assert claims.holder(7) is switch


def test_a_restarted_switch_from_the_same_address_takes_over() -> None:
    claims: SwitchClaims[Conn] = SwitchClaims()
    old, new = Conn("old"), Conn("new")
    claims.claim(7, "127.0.0.1", old)
    claim = claims.claim(7, "127.0.0.1", new)
    assert claim.verdict is Verdict.RECONNECT and claim.accepted
    assert claim.held_by is old  # to be closed
    assert claims.holder(7) is new
    assert not claims.release(7, old)  # the old one's late close leaves the new in charge
    assert claims.holder(7) is new


def test_once_the_holder_goes_another_address_may_claim() -> None:
    claims: SwitchClaims[Conn] = SwitchClaims()
    first, moved = Conn("first"), Conn("moved")
    claims.claim(9, "10.0.0.1", first)
    assert claims.release(9, first) and len(claims) == 0
    assert claims.claim(9, "10.0.0.2", moved).verdict is Verdict.NEW


def test_ids_are_independent() -> None:
    claims: SwitchClaims[Conn] = SwitchClaims()
    a, b = Conn("a"), Conn("b")
    assert claims.claim(1, "10.0.0.1", a).accepted
    assert claims.claim(2, "10.0.0.2", b).accepted
    assert len(claims) == 2


@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(1, 3), st.sampled_from(["a", "b"]), st.integers(0, 3)),
        max_size=40,
    )
)
def test_one_holder_per_id_and_only_its_address_displaces_it(
    steps: list[tuple[bool, int, str, int]],
) -> None:
    """Whatever the order of claims and closes: an id has at most one holder, a refused
    claim never changes it, and a holder is only ever replaced from its own address."""
    claims: SwitchClaims[Conn] = SwitchClaims()
    conns = [Conn(str(i)) for i in range(4)]
    address: dict[int, str] = {}  # each connection keeps its address
    for is_claim, dpid, addr, i in steps:
        conn = conns[i]
        before = claims.holder(dpid)
        if not is_claim:
            assert claims.release(dpid, conn) == (before is conn)
            continue
        addr = address.setdefault(i, addr)
        claim = claims.claim(dpid, addr, conn)
        after = claims.holder(dpid)
        if claim.accepted:
            assert after is conn
            assert before is None or before is conn or address[conns.index(before)] == addr
        else:
            assert after is before and before is not None
            assert address[conns.index(before)] != addr
