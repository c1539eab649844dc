"""The cluster's pure parts: the write gate of roles, and what an instance does at a store
revision (claims, confirmations, releases, losses)."""

from __future__ import annotations

import json

from controller.cluster.etcd import KeyValue, Snapshot
from controller.cluster.mastership import Member, View, claim_key, claim_value, steps
from controller.cluster.roles import Phase, Roles
from controller.model import FlowMod, FlowRule, Match, Op, StatsKind, StatsRequest, Table

PREFIX = "/loom/"
RULE = FlowMod(Op.ADD, FlowRule(Table.CLASSIFY, 1, Match.of(in_port=1), ()))
READ = StatsRequest(StatsKind.PORT)


def test_embedded_roles_write_everything() -> None:
    roles = Roles()
    assert roles.gate({1: [RULE, READ]}, 0.0) == {1: [RULE, READ]}


def test_a_slave_or_claimed_switch_gets_reads_only() -> None:
    roles = Roles(clustered=True)
    roles.claim(2, generation=7)
    out = roles.gate({1: [RULE, READ], 2: [RULE], 3: [READ]}, 0.0)
    assert out == {1: [READ], 3: [READ]}
    assert roles.dropped == {"slave": 1, "claimed": 1}


def test_mastership_needs_the_reply_for_the_same_generation() -> None:
    roles = Roles(clustered=True)
    roles.claim(1, generation=7)
    assert not roles.replied(1, master=True, generation=6)  # an older request's reply
    assert roles.phase[1] is Phase.CLAIMED
    assert not roles.replied(1, master=False, generation=7)  # the slave reply at connect
    assert roles.replied(1, master=True, generation=7)
    assert roles.gate({1: [RULE]}, 0.0) == {1: [RULE]}
    assert roles.masters() == [1]


def test_a_master_whose_lease_may_have_expired_is_fenced() -> None:
    roles = Roles(clustered=True, fresh_until=10.0)
    roles.claim(1, 3)
    roles.replied(1, True, 3)
    assert roles.gate({1: [RULE]}, 9.9) == {1: [RULE]}
    assert roles.gate({1: [RULE]}, 10.0) == {}
    assert roles.dropped["fenced"] == 1
    assert roles.release(1) and not roles.writable(1, 0.0)


def snapshot(
    revision: int,
    members: dict[str, tuple[int, list[int]]],
    masters: dict[int, tuple[str, int, int]],
) -> Snapshot:
    items = [
        KeyValue(f"{PREFIX}members/{m}", json.dumps({"switches": s}).encode(), 1, 1, lease)
        for m, (lease, s) in members.items()
    ]
    items += [
        KeyValue(claim_key(PREFIX, d), claim_value(m, lease), gen, gen, lease)
        for d, (m, lease, gen) in masters.items()
    ]
    return Snapshot(revision, 1, tuple(sorted(items, key=lambda kv: kv.key)))


ALL = [1, 2, 3, 4, 5, 6]


def test_free_switches_are_claimed_evenly() -> None:
    view = View.parse(snapshot(10, {"a": (0xA, ALL), "b": (0xB, ALL), "c": (0xC, ALL)}, {}), PREFIX)
    claims = {
        m: steps(view, m, lease, ALL, {}).claim for m, lease in (("a", 0xA), ("b", 0xB), ("c", 0xC))
    }
    assert sorted(len(c) for c in claims.values()) == [2, 2, 2]
    assert sorted(d for c in claims.values() for d in c) == ALL  # each once


def test_a_claim_under_a_dead_lease_is_not_counted_and_its_switch_waits() -> None:
    """b died: its member key is gone, its claims are on a lease about to expire. Nobody
    claims them until they vanish (a claim is only created where no key is)."""
    masters = {d: ("b", 0xB, 5) for d in (1, 2, 3)} | {d: ("a", 0xA, 6) for d in (4, 5, 6)}
    view = View.parse(snapshot(10, {"a": (0xA, ALL)}, masters), PREFIX)
    todo = steps(view, "a", 0xA, ALL, {4: 6, 5: 6, 6: 6})
    assert todo.claim == [] and todo.lost == [] and todo.release == []
    assert view.unmastered() == [1, 2, 3]


def test_own_claims_are_confirmed_released_or_lost() -> None:
    masters = {1: ("a", 0xA, 5), 2: ("a", 0xA, 6), 3: ("b", 0xB, 7)}
    members = {"a": (0xA, [1, 2, 3]), "b": (0xB, [1, 2, 3])}
    view = View.parse(snapshot(10, members, masters), PREFIX)
    # a holds 1 and 2 (over its share of 3 switches over 2 members: it keeps 2, gives none
    # since b's 1 + a's 2 is within one); 3 was a's before and is b's now: lost.
    todo = steps(view, "a", 0xA, [1, 2, 3], {1: 5, 3: 4})
    assert todo.confirm == [(2, 6)]
    assert todo.lost == [3]
    assert todo.release == []
    # A claim newer than the view is not judged by it.
    assert steps(view, "a", 0xA, [1, 2, 3], {3: 11}).lost == []


def test_a_switch_the_instance_lost_its_connection_to_is_released() -> None:
    masters = {1: ("a", 0xA, 5)}
    view = View.parse(snapshot(10, {"a": (0xA, [1]), "b": (0xB, [1])}, masters), PREFIX)
    assert steps(view, "a", 0xA, [], {1: 5}).release == [1]


def test_keys_not_written_by_loom_are_ignored() -> None:
    snap = Snapshot(
        3,
        1,
        (
            KeyValue(f"{PREFIX}members/x", b"not json", 1, 1, 1),
            KeyValue(f"{PREFIX}masters/zz", b"?", 1, 1, 1),
        ),
    )
    view = View.parse(snap, PREFIX)
    assert view.members == {} and view.masters == {}


def test_a_member_still_learning_takes_nothing_from_others_but_may_take_orphans() -> None:
    def view(ready_b: bool, masters: dict[int, tuple[str, int, int]]) -> View:
        items = [
            KeyValue(f"{PREFIX}members/a", json.dumps({"switches": ALL}).encode(), 1, 1, 0xA),
            KeyValue(
                f"{PREFIX}members/b",
                json.dumps({"switches": ALL, "ready": ready_b}).encode(),
                1,
                1,
                0xB,
            ),
        ]
        items += [
            KeyValue(claim_key(PREFIX, d), claim_value(m, lease), g, g, lease)
            for d, (m, lease, g) in masters.items()
        ]
        return View.parse(Snapshot(20, 1, tuple(sorted(items, key=lambda kv: kv.key))), PREFIX)

    held_by_a = {d: ("a", 0xA, 5) for d in ALL}
    assert set(view(False, held_by_a).target().values()) == {"a"}
    assert sorted(view(True, held_by_a).target().values()).count("b") == 3
    # Nothing mastered and a ready to take it: the learning member gets nothing.
    assert sorted(view(False, {}).target().values()).count("b") == 0
    # A cluster starting (nobody ready): the switches are shared all the same.
    starting = view(False, {}).members | {
        "a": Member("a", 0xA, switches=frozenset(ALL), ready=False)
    }
    assert sorted(View(20, starting).target().values()).count("b") == 3
