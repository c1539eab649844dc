"""The core's structure holds: every concern is a plan source under its own owner kinds,
switch sync decides what may be written, one job model answers REST and policy alike,
and readers get a view they cannot change."""

from __future__ import annotations

import pytest

from controller import hooks, sources
from controller.addressing import pmac
from controller.conductor import Conductor
from controller.jobspec import JobError, parse_job
from controller.model import (
    CookieKind,
    FlowRule,
    Match,
    StatsRequest,
    SwitchRules,
    Table,
    make_cookie,
)
from controller.owners import OwnerKind, Plans
from controller.policy import PolicyError, parse_policy
from controller.sync import REPAIR_BACKOFF, SwitchSync
from tests.sim import LoomSim
from topologies import fat_tree

POLICY = """
tenants:
  - name: red
    hosts: [{ip: 10.0.0.2}, {ip: 10.0.0.3}]
jobs:
  - name: j1
    tenant: red
    hosts: [10.0.0.2, %s]
"""


def test_every_owner_kind_but_quiet_is_swept_by_exactly_one_source() -> None:
    core = Conductor()
    swept = [kind for source in core.sources for kind in source.kinds]
    assert sorted(swept) == sorted(set(OwnerKind) - {OwnerKind.QUIET})
    assert core.sources[-1] is core.sources.failover  # it protects what the others planned


def test_a_learned_fabric_holds_only_owners_of_known_kinds() -> None:
    sim = LoomSim(fat_tree(4)).start()
    kinds = {owner[0] for owner in sim.core.store.parts}
    assert kinds == {OwnerKind.BASE, OwnerKind.ROUTE, OwnerKind.DEST, OwnerKind.PROTECT}
    assert all(isinstance(owner[0], OwnerKind) for owner in sim.core.store.parts)


def test_a_source_that_no_longer_plans_an_owner_loses_its_rules() -> None:
    sim = LoomSim(fat_tree(4)).start()
    hosts = [sim.graph.nodes[h]["ip"] for h in ("h1", "h5")]
    sim.apply(sim.core.create_job(sim.now, parse_job({"name": "j", "hosts": hosts})))
    assert (OwnerKind.JOB, "j") in sim.core.store.parts
    sim.core.sources.jobs.jobs.clear()  # the book forgets it: the next full re-plan drops its rules
    sim.apply(sim.core.recompute(sim.now))
    assert (OwnerKind.JOB, "j") not in sim.core.store.parts


def _held() -> list[FlowRule]:
    return [FlowRule(Table.ROUTE, 10, Match(), cookie=make_cookie(CookieKind.BASE, 1))]


def test_switch_sync_reads_back_holds_settles_and_backs_off_repairs() -> None:
    sync = SwitchSync(settle_time=4.0)
    reads = sync.read_back(0.0, 1)
    assert all(isinstance(m, StatsRequest) and m.sync for m in reads) and len(reads) == 3
    plan = {1: SwitchRules(), 2: SwitchRules()}
    assert set(sync.writable(plan)) == {2}  # nothing goes to a switch being read
    assert not sync.may_repair(0.0, 1)  # nor is it repaired meanwhile
    sync.adopt(1.0, 1, _held(), [], [])
    assert set(sync.writable(plan)) == {2}  # it forwards on its own: held
    assert sync.settled(4.0, last_change=0.0) == ([], False)
    assert sync.settled(5.0, last_change=0.0) == ([1], True)
    assert set(sync.writable(plan)) == {1, 2}
    assert sync.may_repair(10.0, 1) and not sync.may_repair(10.0 + REPAIR_BACKOFF / 2, 1)
    sync.read_back(20.0, 1)
    sync.adopt(20.5, 1, _held(), [], [])
    assert set(sync.writable(plan)) == {1, 2}  # a repair keeps routing: not held


@pytest.mark.parametrize(
    ("ip", "words"),
    [("10.0.0.300", "is not an IPv4 address"), ("10.0.0.2", "appears more than once")],
)
def test_one_job_model_refuses_a_bad_job_in_the_same_words_from_rest_and_policy(
    ip: str, words: str
) -> None:
    with pytest.raises(JobError) as rest:
        parse_job({"name": "j1", "tenant": "red", "hosts": ["10.0.0.2", ip]})
    with pytest.raises(PolicyError) as policy:
        parse_policy(POLICY % ip, "p.yaml")
    assert words in str(rest.value)
    assert any(words in issue.message for issue in policy.value.issues), policy.value


def test_the_view_cannot_change_the_core() -> None:
    sim = LoomSim(fat_tree(4)).start()
    view = sim.view
    with pytest.raises(TypeError):
        view.hosts["02:00:00:00:00:99"] = next(iter(view.hosts.values()))  # type: ignore[index]
    with pytest.raises(TypeError):
        view.jobs["x"] = None  # type: ignore[index]
    assert len(view.hosts) == 16 and len(view.links) == 64
    assert view.describe()["switches"] == sorted(view.switches)


def test_routes_are_planned_again_only_when_their_inputs_change() -> None:
    sim = LoomSim(fat_tree(4)).start()
    core, inputs = sim.core, sim.core.inputs
    first = core.sources.routing.plan_all(inputs)
    again = core.sources.routing.plan_all(inputs)
    assert all(again[owner] is plan for owner, plan in first.items())  # nothing to diff
    edge = next(h.dpid for h in core.topo.hosts.values())
    core.book.adopt(edge, "02:00:00:00:99:99", pmac(0, 9000, 0))  # the switch's index moves
    moved = core.sources.routing.plan_all(inputs)
    assert all(moved[owner] is not plan for owner, plan in first.items())


def test_route_planning_is_sliced_with_the_switches_of_a_failed_link_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One switch per call: a link failure re-plans the switches at its ends in the
    PortStatus call itself, the others in later calls; the fabric stays whole."""
    monkeypatch.setattr(sources, "ROUTE_SLICE_WORK", 1)
    sim = LoomSim(fat_tree(4)).start()
    sim.advance(3.0)
    assert not sim.core.busy
    a, c = (sim.graph.nodes[n]["dpid"] for n in ("a0_0", "c1"))
    planned: list[set[int]] = []
    original = sim.core.sources.routing.plan_pending

    def record(inputs: hooks.PlanInputs) -> Plans:
        plans = original(inputs)
        planned.append({int(owner[1]) for owner in plans})  # type: ignore[call-overload]
        return plans

    monkeypatch.setattr(sim.core.sources.routing, "plan_pending", record)
    sim.fail_link("a0_0", "c1")
    assert planned[0] & {a, c} and len(planned[0]) == 1  # an end of the link first
    assert sim.core.busy
    sim.advance(3.0)
    assert not sim.core.busy
    assert len(planned) > 2 and set().union(*planned) >= {a, c}
    assert sim.fake.reachability().ok
