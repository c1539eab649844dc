"""Mininet's CLI on a running :class:`~mininet_scenarios.harness.network.FabricNet`, with
``iperf`` done by iperf3 flows (:func:`~mininet_scenarios.workloads.iperf.iperf3_flows`): the
interactive end of ``loom-scenario`` and of ``make demo ARGS=--keep``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mininet_scenarios.workloads.iperf import iperf3_flows

if TYPE_CHECKING:
    from mininet_scenarios.harness.network import FabricNet


def loom_cli(fnet: FabricNet, **kwargs: Any) -> None:
    """Mininet's CLI, with ``iperf`` done by iperf3 (see LoomCLI.do_iperf)."""
    from mininet.cli import CLI

    class LoomCLI(CLI):  # type: ignore[misc]
        def do_iperf(self, line: str) -> None:
            """TCP throughput between two hosts with iperf3 (5 s), e.g. ``iperf h1 h16``.

            Replaces Mininet's version, which hangs with iperf >= 2.0.14 (mininet#1060): it
            waits for a server report line that iperf 2.1 no longer prints.
            """
            names = line.split() or [fnet.host_names[0], fnet.host_names[-1]]
            if len(names) != 2 or not all(n in fnet.host_names for n in names):
                print("usage: iperf HOST HOST")
                return
            run = iperf3_flows(fnet, [(names[0], names[1])], 5.0)
            flow = run.flows[0]
            print(
                f"*** iperf3 {names[0]} -> {names[1]}: {flow.mbps:.2f} Mbit/s (receiver, "
                f"middle 80 %), retransmits {flow.retransmits}"
                + (f", error: {flow.error}" if flow.error else "")
            )

    LoomCLI(fnet.net, **kwargs)
