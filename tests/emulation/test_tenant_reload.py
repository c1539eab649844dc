"""Warm policy reloads under a running flow of another tenant.

Red (tenant A) runs an iperf3 TCP flow h1 -> h5 and a 500 datagram/s UDP stream h6 -> h3
while the policy file is rewritten: h11 moves from blue to green and blue gets a bandwidth
cap. Red's rules are left alone, its flows show no gap (TCP segment arrivals are recorded
in h5's namespace, so a gap is known to the millisecond) and the change takes effect. Then
an invalid file is written and also POSTed for reload: both are rejected with the file and
line, red keeps flowing and the previous policy stays in force. Last, SIGHUP reloads the
same file and changes nothing. Figures: ``results/tenants/reload.json``.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from typing import Any

import pytest

from mininet_scenarios.harness.client import LoomApiError
from mininet_scenarios.harness.host_procs import popen_in_host
from mininet_scenarios.harness.stack import LoomStack
from mininet_scenarios.workloads.frames import Arrivals, UdpProbe, max_gap_ms
from tests.emulation.tenant_support import (
    BLUE_CAP,
    MOVED,
    TENANTS,
    check_pingall,
    ensure_policy,
    h,
    host_addr,
    host_ip,
    ping_ok,
    policy_path,
    policy_status,
    policy_yaml,
    scrape,
    wait_status,
    write_atomically,
)

pytestmark = pytest.mark.emulation
FLOW_SECONDS = 20.0
GAP_BOUND_MS = 100.0  # the flows run at 10 Mbit/s: ~1 ms between segments, 2 ms datagrams


def tcp_flow(stack: LoomStack, src: int, dst: int, seconds: float, port: int) -> tuple[Any, Any]:
    """An iperf3 TCP flow reporting every 100 ms; returns (server, client) processes."""
    server = popen_in_host(
        stack.net.host(h(dst)),
        ["iperf3", "-s", "-1", "-J", "-i", "0.1", "-p", str(port)],
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 10
    while f":{port} " not in stack.net.host(h(dst)).cmd("ss -ltnH"):
        assert time.monotonic() < deadline, "iperf3 server did not listen"
        time.sleep(0.05)
    ip = host_ip(stack, dst)
    cmd = ["iperf3", "-c", ip, "-p", str(port), "-t", f"{seconds:g}", "-i", "0.1", "-J"]
    return server, popen_in_host(stack.net.host(h(src)), cmd, stderr=subprocess.STDOUT)


def json_doc(out: bytes) -> dict[str, Any]:
    text = out.decode(errors="replace")
    return dict(json.loads(text[text.index("{") :]))


def tcp_bins(server_out: bytes, started: float) -> list[tuple[float, float, float]]:
    """(start, end, Mbit/s) of each 100 ms bin the receiver saw, on the monotonic clock."""
    return [
        (started + i["sum"]["start"], started + i["sum"]["end"], i["sum"]["bits_per_second"] / 1e6)
        for i in json_doc(server_out)["intervals"]
    ]


_STATS = re.compile(r"\b(cookie|duration|n_packets|n_bytes|idle_age|hard_age)=[^,]*,\s*")


def rule_ages(stack: LoomStack, macs: list[str]) -> dict[tuple[str, str], float]:
    """``(switch, rule) -> age in s`` of the ADMIT and ROUTE rules naming one of ``macs``;
    a rule deleted and added again starts from age 0, one left alone keeps ageing."""
    ages = {}
    for switch in stack.net.switch_names:
        for line in stack.net.dump_flows(switch).splitlines():
            m = re.search(r"duration=([\d.]+)s", line)
            if m and re.search(r"table=[14],", line) and any(mac in line for mac in macs):
                ages[(switch, _STATS.sub("", line).strip())] = float(m.group(1))
    return ages


def test_warm_reload_keeps_red_flowing_and_bad_reload_changes_nothing(
    tenant_loom: LoomStack, tenant_report: dict[str, Any]
) -> None:
    loom = tenant_loom
    ensure_policy(loom, policy_yaml(loom.graph, TENANTS))
    path = policy_path(loom)
    moved = policy_yaml(loom.graph, MOVED, {"blue": BLUE_CAP})
    bad_ip = "10.2.0.300"  # h9's address, mistyped
    bad = moved.replace(f"ip: {host_ip(loom, 9)}}}", f"ip: {bad_ip}}}")
    bad_line = next(n for n, line in enumerate(bad.splitlines(), 1) if bad_ip in line)
    assert bad != moved
    red_macs = [host_addr(loom, i)[0] for i in TENANTS["red"]]
    assert check_pingall(loom, TENANTS) == 62
    net = loom.net
    arrivals = Arrivals(net.host(h(5)), net.intf(h(5), 0), 5301)
    probe = UdpProbe(net.host(h(6)), net.host(h(3)), host_ip(loom, 3), 9100, 500)
    server, client = tcp_flow(loom, 1, 5, FLOW_SECONDS, 5301)
    started = time.monotonic()
    ev: dict[str, float] = {}
    try:
        time.sleep(3.0)
        red_before = rule_ages(loom, red_macs)
        before = policy_status(loom)
        ev["warm_written"] = time.monotonic()
        write_atomically(path, moved)
        warm = wait_status(loom, "reloads_ok", before["reloads_ok"])
        ev["warm_seen"] = time.monotonic()
        time.sleep(1.0)
        red_after = rule_ages(loom, red_macs)
        since_write = time.monotonic() - ev["warm_written"]
        moved_ok = {
            "h11->h12 (green)": ping_ok(loom, 11, 12),
            "h15->h11 (green)": ping_ok(loom, 15, 11),
            "h11->h10 (blue)": ping_ok(loom, 11, 10),
            "h9->h11 (blue)": ping_ok(loom, 9, 11),
        }
        ev["bad_written"] = time.monotonic()
        write_atomically(path, bad)
        rejected = wait_status(loom, "reloads_failed", warm["reloads_failed"])
        try:
            loom.api.request("POST", "/loom/v1/policy/reload")
            post: Any = (200, None)
        except LoomApiError as err:
            post = (err.status, err.body)
        ev["bad_posted"] = time.monotonic()
        time.sleep(2.0)
        assert time.monotonic() < started + FLOW_SECONDS - 1.0, "the red flow ended too early"
    finally:
        udp = probe.stop()
        cli, _ = client.communicate(timeout=FLOW_SECONDS + 15)
        srv, _ = server.communicate(timeout=10)
        segments = arrivals.stop()
    bins = tcp_bins(srv, started)
    inner = [m for b0, _, m in bins if started + 1 <= b0 <= started + FLOW_SECONDS - 1]
    windows = {
        "good_reload": (ev["warm_written"] - 0.2, ev["warm_seen"] + 1.0),
        "bad_reload": (ev["bad_written"] - 0.2, ev["bad_posted"] + 1.0),
        "whole_flow": (started + 1.0, started + FLOW_SECONDS - 1.0),
    }
    tenant_report["red_gap_ms"] = {
        name: {
            "tcp_iperf3_h1_to_h5": round(max_gap_ms(segments, a, b), 1),
            "udp_500pps_h6_to_h3": round(max_gap_ms(udp["times"], a, b), 1),
            "window_s": round(b - a, 2),
        }
        for name, (a, b) in windows.items()
    }
    tenant_report["red_tcp"] = {
        "segments_seen": len(segments),
        "mean_mbps": round(sum(inner) / max(1, len(inner)), 2),
        "min_100ms_bin_mbps": round(min(inner, default=-1.0), 2),
        "retransmits": json_doc(cli)["end"]["sum_sent"].get("retransmits"),
    }
    tenant_report["red_udp"] = {k: udp[k] for k in ("received", "lost", "reordered")}
    tenant_report["good_reload"] = {
        "seen_after_write_s": round(ev["warm_seen"] - ev["warm_written"], 2),
        "rule_changes": warm["last_rule_changes"],
        "h11_moved": moved_ok,
    }
    tenant_report["bad_reload"] = {"errors": rejected["errors"], "post_status": post[0]}
    # Red's rules were left alone: the same rules, none re-added (younger than the reload).
    redone = sorted(k for k, age in red_after.items() if age < since_write + 0.5)
    tenant_report["red_rules"] = {
        "before": len(red_before),
        "after": len(red_after),
        "gone": len(set(red_before) - set(red_after)),
        "new_or_reinstalled": len(set(red_after) - set(red_before)) + len(redone),
    }
    assert red_before and set(red_before) == set(red_after), tenant_report["red_rules"]
    assert not redone, redone[:5]
    # Red never paused: segments and datagrams kept arriving, no datagram was lost.
    assert len(segments) > 1000 and min(inner, default=0.0) > 0, tenant_report["red_tcp"]
    assert udp["lost"] == 0, tenant_report["red_udp"]
    for name, gaps in tenant_report["red_gap_ms"].items():
        assert gaps["tcp_iperf3_h1_to_h5"] < GAP_BOUND_MS, (name, gaps)
        assert gaps["udp_500pps_h6_to_h3"] < GAP_BOUND_MS, (name, gaps)
    # Blue's change took effect: h11 reaches green, not blue.
    assert moved_ok == {
        "h11->h12 (green)": True,
        "h15->h11 (green)": True,
        "h11->h10 (blue)": False,
        "h9->h11 (blue)": False,
    }
    # The bad file: rejected with the file and the line, and so is the REST reload.
    assert not rejected["last_reload_ok"] and rejected["in_force"]
    assert any(e.startswith(f"{path}:{bad_line}:") and bad_ip in e for e in rejected["errors"]), (
        rejected["errors"]
    )
    assert post[0] == 422, post
    assert any(bad_ip in e for e in post[1]["errors"]), post
    metrics = scrape(loom)
    assert metrics[("loom_policy_last_reload_ok", "")] == 0
    assert metrics[("loom_policy_reloads_total", "rejected")] >= 2
    # The previous (moved) policy is still in force everywhere.
    status = policy_status(loom)
    declared = {t["name"]: t["declared_hosts"] for t in status["tenants"]}
    assert declared == {"red": 6, "blue": 4, "green": 5}, declared
    assert next(t for t in status["tenants"] if t["name"] == "blue")["bandwidth_mbps"] == BLUE_CAP
    tenant_report["pingall_after_bad_reload"] = f"{check_pingall(loom, MOVED)}/240"
    # A valid file again, then SIGHUP with the file unchanged: accepted, nothing sent.
    write_atomically(path, moved)
    fixed = wait_status(loom, "reloads_ok", status["reloads_ok"])
    assert fixed["last_reload_ok"] and fixed["errors"] == []
    assert loom.ctl is not None and loom.ctl.proc is not None
    loom.ctl.proc.send_signal(signal.SIGHUP)
    hup = wait_status(loom, "reloads_ok", fixed["reloads_ok"])
    tenant_report["same_policy_again_rule_changes"] = {
        "file": fixed["last_rule_changes"],
        "sighup": hup["last_rule_changes"],
    }
    assert hup["last_reload_ok"] and hup["last_rule_changes"] == 0, hup
