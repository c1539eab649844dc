"""What new flows cost the controller (``docs/benchmarks.md`` §8): the core over the scale
benchmark's fake wire (:mod:`~mininet_scenarios.bench.scale_wire`), ``--rate`` new TCP
flows a second between random hosts of a fat-tree, with placement at the first packet
on and off side by side, everything else as ``controller/app.py`` configures it with no
``LOOM_*`` variable.

    python -m mininet_scenarios.bench.newflows [--fabrics fat_tree:k=8,fat_tree:k=16]
        [--rate 1000] [--seconds 20] [--out results/newflows]

Each flow is one first packet (the catch rule's copy, a packet-in) and then stays idle,
so its rules are removed after the idle timeout (10 s): after that long, flows come and
go at the same rate and what is held is steady. Per mode, over the steady second half:
packet-ins and rule messages per second, rules held on the switches (above the settled
fabric's), core time per second and per new flow (the largest call too), and whether
every switch holds exactly what the core believes. Results: ``results.json`` and
``table.txt``. No emulation: no lock.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from controller import heap
from controller.conductor import Conductor
from controller.model import ETH_TYPE_IPV4, CookieKind, EthFrame, PacketIn, make_cookie
from mininet_scenarios.bench.scale import Watch, core_config, phase_tally, settle
from mininet_scenarios.bench.scale_wire import Wire
from topologies import by_name

TICK = 0.1  # simulated seconds, as the app ticks
BUDGET_S = 1800.0


def say(text: str) -> None:
    print(f"[newflows] {text}", flush=True)


def run_mode(spec: str, place_new: bool, rate: float, seconds: float, seed: int) -> dict[str, Any]:
    graph = by_name(spec)
    base = core_config()
    config = dataclasses.replace(base, te=dataclasses.replace(base.te, place_new=place_new))
    wire = Wire(graph, Conductor(config, time.perf_counter))
    heap.start()  # as the app does before the first switch (§7)
    watch = Watch(wire, spec, BUDGET_S)
    wire.watch = watch
    settled = settle(wire, watch, cold=True)
    rules0 = wire.rules_installed
    hosts = [(h, wire.where[h], graph.nodes[h]) for h in wire.hosts]
    rng = random.Random(seed)
    per_tick, sport = rate * TICK, 1024
    owed = 0.0
    calls: list[float] = []
    steady_from = seconds / 2
    tally, rules_mid = phase_tally(wire), rules0
    start = wire.now
    while wire.now - start < seconds:
        if steady_from <= wire.now - start < steady_from + TICK / 2:
            tally, rules_mid = phase_tally(wire), wire.rules_installed
            calls = []
        owed += per_tick
        while owed >= 1.0:
            owed -= 1.0
            (_, (dpid, port), src), (_, _, dst) = rng.sample(hosts, 2)
            sport = sport + 1 if sport < 65535 else 1024
            frame = EthFrame(
                src["mac"], dst["mac"], ETH_TYPE_IPV4, None, src["ip"], dst["ip"], 6, sport, 5201
            )
            pkt = PacketIn(dpid, port, frame, cookie=make_cookie(CookieKind.CATCH, dpid))
            calls.append(wire.run("packet_in.flow", wire.fabric.packet_in, wire.now, pkt).seconds)
        wire.step(TICK)
    span = wire.now - start - steady_from
    te = wire.fabric.sources.te
    out = tally.as_dict()
    rule_msgs = {k: v for k, v in out["messages_out"].items() if k.startswith("flowmod")}
    return {
        "place_new": place_new,
        "settled": settled.get("settled"),
        "steady_s": round(span, 2),
        "new_flows_per_s": round(len(calls) / span, 1),
        "packet_in_per_s": round(len(calls) / span, 1),  # one each: the first packet
        "flow_mods_per_s": {k: round(v / span, 1) for k, v in sorted(rule_msgs.items())},
        "flow_mods_total_per_s": round(sum(rule_msgs.values()) / span, 1),
        "rules_held": wire.rules_installed - rules0,
        "rules_held_mid": rules_mid - rules0,
        "tracked_flows": len(te.flows.flows),
        "pinned_flows": len(te.paths),
        "core_s_per_s": round(tally.core_s / span, 4),
        "per_new_flow_ms": round(1e3 * sum(calls) / max(1, len(calls)), 4),
        "largest_new_flow_ms": round(1e3 * max(calls, default=0.0), 3),
        "largest_call": out["largest_call"],
        "mismatched_switches": len(wire.mismatches()),  # hold other than the core believes
    }


def table(results: list[dict[str, Any]]) -> str:
    head = (
        "fabric           placement  flows/s  packet-in/s  flow-mods/s  rules held"
        "  core s/s  ms per flow (max)"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(
            f"{r['spec']:<16} {'on' if r['place_new'] else 'off':<10} {r['new_flows_per_s']:>7}"
            f"  {r['packet_in_per_s']:>11}  {r['flow_mods_total_per_s']:>11}"
            f"  {r['rules_held']:>10}  {r['core_s_per_s']:>8}"
            f"  {r['per_new_flow_ms']:.3f} ({r['largest_new_flow_ms']:.2f})"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fabrics", default="fat_tree:k=8,fat_tree:k=16")
    p.add_argument("--rate", type=float, default=1000.0, help="new flows a second")
    p.add_argument("--seconds", type=float, default=20.0, help="simulated, per mode")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("results/newflows"))
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for spec in args.fabrics.split(","):
        for place_new in (False, True):
            say(f"{spec}: placement {'on' if place_new else 'off'} ...")
            r = run_mode(spec, place_new, args.rate, args.seconds, args.seed)
            results.append({"spec": spec, **r})
            say(json.dumps(r))
    doc = {"benchmark": "newflows", "rate": args.rate, "seconds": args.seconds, "runs": results}
    (args.out / "results.json").write_text(json.dumps(doc, indent=1))
    text = table(results)
    (args.out / "table.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
