"""Every plan source answers every hook, in the base class's shape: the conductor hands
each event to all of them without naming any. The base class's answers do nothing, so a
source overrides only the hooks its concern needs."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from controller.conductor import Conductor
from controller.hooks import PlanInputs, PlanSource
from controller.model import ETH_TYPE_IPV4, EthFrame
from controller.owners import OwnerKind
from controller.topology import Host

HOST = Host("02:00:00:00:00:01", "10.0.0.1", 1, 1, 0.0)
FRAME = EthFrame(
    HOST.mac, "02:00:00:00:00:02", ETH_TYPE_IPV4, None, "10.0.0.1", "10.0.0.2", 6, 1, 2
)
Call = Callable[[PlanSource, PlanInputs], Any]

# Every hook, called as the conductor and the planner call it, and the type it answers.
HOOKS: dict[str, tuple[Call, type | None]] = {
    "plan_all": (lambda s, i: s.plan_all(i), dict),
    "ahead": (lambda s, i: s.ahead(i), dict),
    "queued": (lambda s, i: s.queued(), set),
    "prepare": (lambda s, i: s.prepare(i), bool),
    "has_work": (lambda s, i: s.has_work(), bool),
    "work": (lambda s, i: s.work(i), dict),
    "host_seen": (lambda s, i: s.host_seen(i, HOST, False), dict),
    "first_packet": (lambda s, i: s.first_packet(0.0, i, (1, 1), FRAME), dict),
    "link_down": (lambda s, i: s.link_down(i, {1: frozenset({1})}), dict),
    "switch_down": (lambda s, i: s.switch_down(1), None),
    "port_stats": (lambda s, i: s.port_stats(0.0, 1, []), None),
    "flow_stats": (lambda s, i: s.flow_stats(0.0, 1, []), None),
    "group_stats": (lambda s, i: s.group_stats(0.0, 1, []), None),
    "tick": (lambda s, i: s.tick(0.0, i), dict),
    "lapsed": (lambda s, i: s.lapsed(0.0), list),
    "excuse": (lambda s, i: s.excuse(0.0, 1.0), None),
    "polled": (lambda s, i: s.polled(i.topo), set),
    "committed": (lambda s, i: s.committed(i.topo, (OwnerKind.DEST, 1), {}), None),
    "drain_timings": (lambda s, i: s.drain_timings(), list),
}


def hooks_of_the_base() -> set[str]:
    return {name for name, member in vars(PlanSource).items() if inspect.isfunction(member)}


def test_the_table_names_every_hook() -> None:
    assert set(HOOKS) == hooks_of_the_base()


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_every_source_answers_every_hook_in_the_base_shape(hook: str) -> None:
    core = Conductor()
    call, answer = HOOKS[hook]
    shape = inspect.signature(getattr(PlanSource, hook)).parameters
    for source in core.sources:
        assert isinstance(source, PlanSource)
        assert inspect.signature(getattr(type(source), hook)).parameters.keys() == shape.keys()
        got = call(source, core.inputs)
        assert got is None if answer is None else isinstance(got, answer), (source, hook, got)


def test_the_base_answers_every_hook_with_nothing_and_changes_nothing() -> None:
    core, source = Conductor(), PlanSource()
    for hook, (call, _) in HOOKS.items():
        assert not call(source, core.inputs), hook
    assert vars(source) == {} and source.kinds == () and not source.eager


def test_a_source_is_one_class_one_kind_and_one_entry() -> None:
    """Each source sweeps kinds of its own; the lineup holds each once, failover last."""
    sources = list(Conductor().sources)
    kinds = [kind for source in sources for kind in source.kinds]
    assert len(kinds) == len(set(kinds)) and all(source.kinds for source in sources)
    assert len({type(source) for source in sources}) == len(sources)
    assert sources[-1].kinds == (OwnerKind.PROTECT,)  # it protects what the others planned
