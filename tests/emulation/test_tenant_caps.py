"""Per-tenant bandwidth caps with meters, on real switches.

Blue gets a 3 Mbit/s cap (a meter on every edge switch of the tenant); a blue TCP flow
stays near the cap while a green one, uncapped and at the same time, reaches the 10 Mbit/s
link rate. Removing the cap lets blue through at the link rate again. Figures:
``results/tenants/caps.json`` (measured rates against the cap).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from mininet_scenarios.harness.ovs import OFCTL, sh
from mininet_scenarios.harness.stack import LoomStack
from mininet_scenarios.workloads.iperf import iperf3_flows
from tests.emulation.tenant_support import (
    BLUE_CAP,
    RATE,
    TENANTS,
    ensure_policy,
    h,
    policy_status,
    policy_yaml,
)

pytestmark = pytest.mark.emulation
SECONDS = 8.0


def meter_bands(switch: str) -> list[int]:
    """The drop-band rates (kbit/s) of ``switch``'s bit-rate meters (not the packet-rate
    meters guarding the controller)."""
    dump = sh([*OFCTL, "dump-meters", switch])
    return [int(r) for r in re.findall(r"meter=\d+ kbps[^=]*bands=\s*type=drop rate=(\d+)", dump)]


def test_capped_tenant_stays_at_its_cap_uncapped_reaches_the_link(
    tenant_loom: LoomStack, tenant_report: dict[str, Any]
) -> None:
    loom = tenant_loom
    ensure_policy(loom, policy_yaml(loom.graph, TENANTS, {"blue": BLUE_CAP}))
    blue = next(t for t in policy_status(loom)["tenants"] if t["name"] == "blue")
    assert blue["bandwidth_mbps"] == BLUE_CAP
    run = iperf3_flows(loom.net, [(h(7), h(9)), (h(13), h(15))], seconds=SECONDS, interval=0.5)
    capped, free = run.flows
    bands = meter_bands("te1_1")  # h7's edge switch, once the flow has run
    ensure_policy(loom, policy_yaml(loom.graph, TENANTS))
    uncapped = iperf3_flows(loom.net, [(h(7), h(9))], seconds=SECONDS, interval=0.5).flows[0]
    bands_after = meter_bands("te1_1")
    tenant_report["cap_mbps"] = BLUE_CAP
    tenant_report["link_mbps"] = RATE
    tenant_report["blue_capped_h7_to_h9_mbps"] = round(capped.mbps, 2)
    tenant_report["blue_capped_retransmits"] = capped.retransmits
    tenant_report["green_uncapped_h13_to_h15_mbps"] = round(free.mbps, 2)
    tenant_report["blue_after_cap_removed_mbps"] = round(uncapped.mbps, 2)
    tenant_report["te1_1_meter_kbps"] = {"capped": bands, "after_removal": bands_after}
    for flow in (capped, free, uncapped):
        assert flow.error is None, flow.error
    assert int(BLUE_CAP * 1000) in bands, bands
    assert int(BLUE_CAP * 1000) not in bands_after, bands_after
    assert 0.5 * BLUE_CAP <= capped.mbps <= 1.1 * BLUE_CAP, tenant_report
    assert free.mbps >= 0.85 * RATE, tenant_report
    assert uncapped.mbps >= 0.85 * RATE, tenant_report
