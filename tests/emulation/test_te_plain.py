"""Traffic engineering on a plain fabric, told nothing: ports report the 10 Gbit/s of a
veth, links are shaped below it, no DSCP class tree, and the controller is started as
docs/operator.md says with no ``LOOM_*`` hint of the links' rate. Loom learns what the links
carry from what it measures, and an induced collision of two elephants on one uplink is
resolved. Placement at the first packet is switched off here (``LOOM_PLACE_NEW_FLOWS``),
else the collision would never form: this is the case of flows placed before the fabric
changed under them. ``test_fat_tree`` shows the placement on the same plain fabric."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from mininet_scenarios.harness.stack import LoomStack
from tests.emulation.collision_support import collide
from topologies import fat_tree

pytestmark = pytest.mark.emulation
RATE = 10.0  # Mbit/s, shaped; the ports report 10,000
VETH_BPS = 10e9


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomStack]:
    run_dir = tmp_path_factory.mktemp("loom-te-plain")
    graph = fat_tree(4, rate_mbps=RATE)
    with LoomStack(graph, run_dir, env={"LOOM_PLACE_NEW_FLOWS": "off"}) as stack:
        assert stack.net.pingall(timeout=2.0).loss_pct == 0.0
        yield stack


def test_ports_report_the_veth_speed_and_nothing_is_learned_while_idle(plain: LoomStack) -> None:
    links = plain.api.topology()["links"]
    assert links and all(link["reported_bps"] == VETH_BPS for link in links), links[:2]
    assert {link["capacity_source"] for link in links} == {"reported"}, links[:2]


def test_a_collision_of_two_elephants_is_resolved_without_any_hint(plain: LoomStack) -> None:
    rates, run = collide(plain, seconds=15)
    links = plain.api.topology()["links"]
    learned = sorted({(lk["capacity_source"], round(lk["capacity_bps"] / 1e6, 2)) for lk in links})
    busy_both = [t for t, a, b in rates if a > 0.6 * RATE and b > 0.6 * RATE]
    one_only = [t for t, a, b in rates[:4] if (a > 0.6 * RATE) != (b > 0.6 * RATE)]
    (plain.run_dir / "collision.json").write_text(
        json.dumps({"rates": rates, "flows": [f.mbps for f in run.flows], "learned": learned})
    )
    assert one_only, f"expected the flows to start on one uplink: {rates[:6]}"
    assert busy_both, f"the collision was never resolved: {rates}; capacities {learned}"
    # what Loom believes now: every link below the 10 Gbit/s its port reports, near RATE
    beliefs = [link["capacity_bps"] for link in links]
    assert max(beliefs) < 2 * RATE * 1e6, learned
    assert min(beliefs) > 0.8 * RATE * 1e6, learned
    record = {
        "collision_resolved_after_s": round(busy_both[0], 2),
        "flows_mbps": [round(f.mbps, 2) for f in run.flows],
        "capacities": learned,
    }
    (plain.run_dir / "figures.json").write_text(json.dumps(record))
