"""The what-if flow model: hand-computed max-min fair cases, and the max-min condition
(no link over capacity; everyone bottlenecked on a saturated link) on generated ones."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mininet_scenarios.bench.whatif_model import Flow, Solution, busbw, max_min


def test_two_free_flows_share_a_link_and_the_second_takes_what_is_left_elsewhere() -> None:
    # a: cap 10, both flows; b: cap 3, flow 1 only -> flow 1 gets 3, flow 0 the rest 7
    sol = max_min([Flow(("a",)), Flow(("a", "b"))], {"a": 10.0, "b": 3.0})
    assert sol.flow_rate == pytest.approx([7.0, 3.0])
    assert sol.load == pytest.approx({"a": 10.0, "b": 3.0})
    assert sol.flow_bottleneck == {0: "a", 1: "b"}


def test_a_ring_job_moves_at_its_slowest_hop() -> None:
    # Four hops of job r; link x carries two of them: every hop gets 1/2, so x is full
    # and the links carrying one hop are half used.
    flows = [Flow(("x", "p"), "r"), Flow(("x", "q"), "r"), Flow(("s",), "r"), Flow(("t",), "r")]
    sol = max_min(flows, dict.fromkeys("xpqst", 1.0))
    assert sol.group_rate == {"r": pytest.approx(0.5)}
    assert sol.flow_rate == pytest.approx([0.5] * 4)
    assert sol.utilisation["x"] == pytest.approx(1.0)
    assert sol.utilisation["s"] == pytest.approx(0.5)
    assert sol.group_bottleneck == {"r": "x"}
    assert busbw("ring", 4, sol.group_rate["r"]) == pytest.approx(0.5)


def test_a_free_flow_takes_what_a_job_bottlenecked_elsewhere_leaves() -> None:
    # Job j: 3 flows on link m (cap 3 -> 1 each) and one of them also on link n (cap 2)
    # with a free flow f: f gets the 1 that j's flow leaves on n.
    flows = [Flow(("m", "n"), "j"), Flow(("m",), "j"), Flow(("m",), "j"), Flow(("n",))]
    sol = max_min(flows, {"m": 3.0, "n": 2.0})
    assert sol.group_rate["j"] == pytest.approx(1.0)
    assert sol.flow_rate[3] == pytest.approx(1.0)
    assert sol.group_bottleneck["j"] == "m"
    assert sol.flow_bottleneck == {3: "n"}


def test_two_jobs_on_one_link_get_equal_per_flow_rates() -> None:
    # Link l (cap 6): job a has 1 flow, job b 2: per-flow fair, 2 each; b's third flow on
    # link k (cap 10) alone runs at b's rate too (lock-step).
    flows = [Flow(("l",), "a"), Flow(("l",), "b"), Flow(("l",), "b"), Flow(("k",), "b")]
    sol = max_min(flows, {"l": 6.0, "k": 10.0})
    assert sol.group_rate == pytest.approx({"a": 2.0, "b": 2.0})
    assert sol.utilisation["k"] == pytest.approx(0.2)


def test_all_to_all_busbw_is_the_pair_rate_times_the_other_ranks() -> None:
    # 3 ranks, 6 pairs; each host's uplink carries its 2 pairs: rate 1/2, busbw 1.0
    ups = {f"up{i}": 1.0 for i in range(3)}
    downs = {f"dn{i}": 1.0 for i in range(3)}
    flows = [Flow((f"up{a}", f"dn{b}"), "a2a") for a in range(3) for b in range(3) if a != b]
    sol = max_min(flows, {**ups, **downs})
    assert sol.group_rate["a2a"] == pytest.approx(0.5)
    assert busbw("all_to_all", 3, sol.group_rate["a2a"]) == pytest.approx(1.0)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="no capacity"):
        max_min([Flow(("a",))], {})
    with pytest.raises(ValueError, match="crosses no link"):
        max_min([Flow(())], {"a": 1.0})
    with pytest.raises(ValueError, match="pattern"):
        busbw("tree", 4, 1.0)


LINKS = [f"l{i}" for i in range(6)]


@st.composite
def networks(draw: st.DrawFn) -> tuple[list[Flow], dict[str, float]]:
    caps = {link: draw(st.floats(0.5, 100.0)) for link in LINKS}
    path = st.lists(st.sampled_from(LINKS), min_size=1, max_size=4, unique=True).map(tuple)
    group = st.one_of(st.none(), st.sampled_from(["j0", "j1", "j2"]))
    flows = draw(st.lists(st.builds(Flow, path, group), min_size=1, max_size=12))
    return flows, caps


def entities(flows: list[Flow], sol: Solution) -> list[tuple[set[str], float]]:
    """(links crossed, per-flow rate) per group and per free flow."""
    out: dict[object, tuple[set[str], float]] = {}
    for i, f in enumerate(flows):
        key: object = f.group if f.group is not None else i
        links, _ = out.get(key, (set(), 0.0))
        out[key] = (links | set(f.path), sol.flow_rate[i])
    return list(out.values())


@settings(max_examples=300, deadline=None)
@given(networks())
def test_max_min_condition(net: tuple[list[Flow], dict[str, float]]) -> None:
    flows, caps = net
    sol = max_min(flows, caps)
    for link, load in sol.load.items():
        assert load <= caps[link] * (1 + 1e-9), f"{link} over capacity: {load} > {caps[link]}"
    for i, f in enumerate(flows):  # a group's flows share one rate
        if f.group is not None:
            assert sol.flow_rate[i] == pytest.approx(sol.group_rate[f.group])
    ents = entities(flows, sol)
    full = sol.saturated()
    for links, rate in ents:
        assert rate > 0
        # bottlenecked: some saturated link it crosses gives nobody a higher per-flow rate
        assert any(
            link in full and all(r <= rate * (1 + 1e-9) for ls, r in ents if link in ls)
            for link in links
        ), f"not bottlenecked: rate {rate} on {sorted(links)}"
