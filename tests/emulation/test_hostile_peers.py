"""Hostile hosts and a hostile switch against the real controller, kind after kind.

Issue "Hostile input everywhere", item 3: the app must survive every kind of garbage a
peer can send and keep forwarding. Loom runs as ``ryu-manager controller/app.py`` on
real userspace Open vSwitch switches (the ``tree`` fabric of ``conftest.py``, prefix
``hp``); then, in turn:

1. **A hostile host** (``hph1``, on ``hps1``) sends raw frames through an AF_PACKET socket:
   Ethernet shorter than a header and header-only, frames as large as the MTU (and
   larger: the kernel refuses those), ARP with bad hardware/protocol lengths and types
   and opcodes, ARP from broadcast/multicast/zero/the controller's MAC, truncated ARP,
   IPv4 with a wrong version, IHL, total length, checksum or options, LLDP with broken
   TLVs, LLDP with forged Loom signatures, and genuine signed LLDP captured at host ports
   and replayed (also with another switch's chassis: a loop). Some frames never reach
   the controller (the kernel or OVS drops them, or a route forwards them); which did is
   recorded, not asserted.
2. **A hostile switch**: a fake OpenFlow 1.3 switch (a TCP client of this process,
   :class:`~tests.emulation.hostile_support.FakeSwitch`) joins the same controller, then
   sends statistics replies nobody asked for (and repeats of answered ones), port counters
   of ports it does not have, ERROR messages with random xids, types and codes, an echo
   request, random bytes after valid headers, truncated messages and messages with a
   wrong version. Ryu closes the connection on some of these; the switch reconnects.

After **each** kind: the controller process is alive; pings work between two hosts away
from the attacker and between the attacker and its neighbour; the switches and links the
controller knows are those of the fabric; ``loom_handler_errors_total`` is 0 (absent or
zero: a handler error is a bug, even if ``guarded`` kept the app alive). At the end of
part 1 the forged and broken LLDP frames must have been counted as undecodable; at the end
of part 2 ``loom_input_dropped_total{reason="unsolicited_reply"}``,
``{reason="unmatched_error"}`` and ``{reason="stats_unknown_port"}`` must have grown while
``loom_switch_repairs_total`` did not; a control (an error naming a rule the controller
did send) must repair, so that "did not grow" is not a blind counter.

Figures (counter deltas per kind, kernel refusals, hosts learned, reconnects):
``results/hostile_peers.json``, also printed with ``pytest -s``.
"""

from __future__ import annotations

import functools
import json
import random
import re
import secrets
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mininet_scenarios.harness.metrics import Samples, sample, scrape
from mininet_scenarios.harness.stack import LoomStack, expected_links
from tests.emulation.hostile_frames import (
    CONTROLLER_MAC,
    PREFIX,
    ZERO_MAC,
    as_built,
    frame_kinds,
    node,
    replay_frames,
)
from tests.emulation.hostile_support import (
    BARRIER_REPLY,
    ECHO_REPLY,
    ECHO_REQUEST,
    ERROR,
    FEATURES_REPLY,
    FLOW_REMOVED,
    MP_FLOW,
    MP_GROUP,
    MP_PORT_DESC,
    MP_PORT_STATS,
    MULTIPART_REPLY,
    PACKET_IN,
    PORT_STATUS,
    FakeSwitch,
    error_message,
    flow_stats_entry,
    group_stats_entry,
    multipart_reply,
    ofp_message,
    port_stats_entry,
    send_raw,
)

pytestmark = pytest.mark.emulation

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS = REPO_ROOT / "results" / "hostile_peers.json"
ATTACKER, NEIGHBOUR, FAR_A, FAR_B = (f"{PREFIX}h{i}" for i in (1, 2, 3, 4))
PING_PAIRS = ((FAR_A, FAR_B), (FAR_B, FAR_A), (ATTACKER, NEIGHBOUR), (NEIGHBOUR, ATTACKER))
UNKNOWN_MAC, UNKNOWN_IP = "02:de:ad:00:00:01", "10.9.9.9"
FAKE_DPID = 0x00FA_CE00_0000_0BAD
UNKNOWN_PORTS = (77, 4242, 0xFFFFFF00)
HANDLER_FAILED = "failed; the event is dropped"


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def report() -> Iterator[dict[str, Any]]:
    figures: dict[str, Any] = {}
    yield figures
    if figures:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(figures, indent=1) + "\n")
        print(f"\nhostile peers ({RESULTS}):\n{json.dumps(figures, indent=1)}")


@pytest.fixture(scope="module")
def loom(
    graphs: SimpleNamespace,
    tmp_path_factory: pytest.TempPathFactory,
    report: dict[str, Any],
) -> Iterator[LoomStack]:
    started = time.monotonic()
    with LoomStack(graphs.tree(PREFIX), tmp_path_factory.mktemp("loom-hostile")) as stack:
        report["discovery_s"] = round(stack.discovery_seconds, 1)
        try:
            yield stack
        finally:
            report["module_s"] = round(time.monotonic() - started, 1)
            report["controller_log"] = str(stack.run_dir / "controller.txt")


# --------------------------------------------------------------------------- checks


def ping(stack: LoomStack, src: str, dst: str, tries: int = 3) -> bool:
    """One echo request answered within a second, in at most ``tries`` attempts."""
    for _ in range(tries):
        out = stack.net.host(src).cmd(f"ping -n -q -c 1 -W 1 {node(stack, dst)[1]}")
        m = re.search(r"(\d+) received", out)
        if m and int(m.group(1)) > 0:
            return True
    return False


def handler_errors(samples: Samples) -> dict[str, float]:
    return {
        dict(labels).get("handler", "?"): v
        for (name, labels), v in samples.items()
        if name == "loom_handler_errors_total" and v
    }


COUNTERS = {
    "dropped": ("loom_input_dropped_total", "reason"),
    "packet_in": ("loom_packet_in_total", "kind"),
    "isolation": ("loom_isolation_drops_total", "kind"),
}


def deltas(before: Samples, after: Samples) -> dict[str, Any]:
    """What moved between two scrapes: dropped input, packet-ins, repairs, rejections."""
    out: dict[str, Any] = {}
    for key, (metric, label) in COUNTERS.items():
        moved = {}
        for (name, labels), v in after.items():
            if name == metric:
                d = v - before.get((name, labels), 0.0)
                if d:
                    moved[dict(labels).get(label, "")] = d
        out[key] = moved
    for key, metric in (
        ("repairs", "loom_switch_repairs_total"),
        ("rejections", "loom_switch_rejections_total"),
    ):
        out[key] = sample(after, metric) - sample(before, metric)
    return out


class Checker:
    """The checks after every kind, with the controller log lines each kind caused."""

    def __init__(self, stack: LoomStack, report: dict[str, Any], section: str) -> None:
        self.stack = stack
        self.figures: dict[str, Any] = report.setdefault(section, {})
        self.failures: list[str] = []
        self.switches = set(stack.api.topology()["switches"])
        self.links = expected_links(stack.graph)
        self._log_at = len(stack.controller_log())

    def new_log(self) -> str:
        text = self.stack.controller_log()
        new, self._log_at = text[self._log_at :], len(text)
        return new

    def after(
        self, kind: str, before: Samples, extra_switches: set[int] | None = None, **figures: Any
    ) -> Samples:
        """Check the controller after ``kind``; record figures; return a fresh scrape."""
        time.sleep(0.5)  # packet-ins and statistics in flight
        stack, fail = self.stack, self.failures
        ctl = stack.ctl
        if ctl is None or not ctl.alive():
            tail = ctl.log_tail(60) if ctl else ""
            pytest.fail(f"{kind}: the controller process died\n{tail}")
        pings = {f"{a}->{b}": ping(stack, a, b) for a, b in PING_PAIRS}
        topo = stack.api.topology()
        samples = scrape(stack.metrics_url)
        errors = handler_errors(samples)
        log = self.new_log()
        failed_lines = [line for line in log.splitlines() if HANDLER_FAILED in line]
        tracebacks = log.count("Traceback")
        want_switches = self.switches | (extra_switches or set())
        for pair, ok in pings.items():
            if not ok:
                fail.append(f"{kind}: ping {pair} failed")
        if set(topo["switches"]) != want_switches:
            fail.append(f"{kind}: switches {topo['switches']}, expected {sorted(want_switches)}")
        if len(topo["links"]) != self.links:
            fail.append(f"{kind}: {len(topo['links'])} links, expected {self.links}: {topo}")
        if errors or failed_lines:
            fail.append(f"{kind}: handler errors {errors}; log:\n" + "\n".join(failed_lines))
        self.figures[kind] = {
            **figures,
            **deltas(before, samples),
            "hosts": len(topo["hosts"]),
            "pings_ok": all(pings.values()),
            "handler_errors": errors,
            "log_tracebacks": tracebacks,
            "log_ryu_parse_errors": log.count("Encountered an error while parsing"),
        }
        if failed_lines or tracebacks:
            self.figures[kind]["log_excerpt"] = log[-3000:]
        return samples


# --------------------------------------------------------------------------- part 1


def test_hostile_host_frames(loom: LoomStack, report: dict[str, Any]) -> None:
    a_host, a_intf = loom.net.host(ATTACKER), loom.net.intf(ATTACKER, 0)
    for a, b in (*PING_PAIRS, (FAR_A, NEIGHBOUR), (FAR_B, NEIGHBOUR)):
        assert ping(loom, a, b), f"before any attack: ping {a}->{b} failed"
    check = Checker(loom, report, "host_frames")
    start = before = scrape(loom.metrics_url)
    check.figures["hosts_before"] = len(loom.api.topology()["hosts"])
    undecodable: dict[str, tuple[float, int]] = {}
    kinds: list[tuple[str, Callable[[], tuple[list[bytes], dict[str, Any]]]]] = [
        (name, functools.partial(as_built, frames)) for name, frames in frame_kinds(loom)
    ]
    kinds.append(("lldp: genuine frames replayed (own port, neighbours', another chassis)",
                  lambda: replay_frames(loom)))  # fmt: skip
    for name, build in kinds:
        frames, extra = build()
        results = send_raw(a_host, a_intf, frames)
        refused = {r: results.count(r) for r in sorted(set(results)) if r != "ok"}
        before_kind = before
        before = check.after(name, before, sent=results.count("ok"), refused=refused, **extra)
        d = sample(before, "loom_input_dropped_total", reason="undecodable_frame") - sample(
            before_kind, "loom_input_dropped_total", reason="undecodable_frame"
        )
        undecodable[name] = (d, results.count("ok"))
    topo = loom.api.topology()
    check.figures["total"] = deltas(start, before)
    odd = [h for h in topo["hosts"] if int(h["mac"].split(":")[0], 16) & 1 or h["mac"] in (
        ZERO_MAC, CONTROLLER_MAC)]  # fmt: skip
    check.figures["hosts_after"] = topo["hosts"]
    check.figures["hosts_with_group_zero_or_controller_mac"] = odd
    bad_tlv = undecodable["lldp: bad TLV lengths and contents"]
    forged = undecodable["lldp: forged signatures"]
    if bad_tlv[0] < 1:
        check.failures.append(f"LLDP with bad TLVs: no undecodable frame counted {bad_tlv}")
    if forged[0] < forged[1]:
        check.failures.append(f"forged LLDP: {forged[0]:g} counted undecodable of {forged[1]}")
    if odd:
        check.failures.append(f"hosts learned with a group, zero or the controller's MAC: {odd}")
    assert not check.failures, "\n".join(check.failures)


# --------------------------------------------------------------------------- part 2


def unsolicited(fake: FakeSwitch, rng: random.Random, rounds: int = 5) -> int:
    """Statistics replies with xids the controller never used, in one or several parts,
    and repeats of replies it already had; returns how many were sent."""
    own = fake.ports
    sent = 0
    for i in range(rounds):
        more = 1 if i % 2 else 0  # OFPMPF_REPLY_MORE: "more parts follow"
        bodies = (
            (MP_PORT_STATS, b"".join(port_stats_entry(p, 10**6) for p in own)),
            (MP_PORT_STATS, b"".join(port_stats_entry(p, 10**9) for p in UNKNOWN_PORTS)),
            (MP_FLOW, flow_stats_entry(0x4C4F_0300_0000_0001, 10**6)),
            (MP_GROUP, group_stats_entry(1, 10**6)),
        )
        for mp_type, body in bodies:
            sent += fake.send(multipart_reply(fake.fresh_xid(rng), mp_type, body, flags=more))
    answered = [x for x, t in fake.requests.items() if t == MP_PORT_STATS][-3:]
    for xid in answered:  # the same xid again: each request is answered once
        sent += fake.send(multipart_reply(xid, MP_PORT_STATS, port_stats_entry(own[0], 10**9)))
    return sent


def random_errors(fake: FakeSwitch, rng: random.Random, n: int) -> int:
    """ERRORs with fresh xids and random types (1-13: known ones), codes and data."""
    sent = 0
    for _ in range(n):
        type_ = rng.randint(1, 13)
        data = rng.randbytes(rng.randint(0, 80))
        sent += fake.send(error_message(fake.fresh_xid(rng), type_, rng.getrandbits(16), data))
    return sent


def garbage_after_headers(fake: FakeSwitch, rng: random.Random, n: int) -> dict[str, int]:
    """Messages of many types, each a valid header and random bytes; reconnects when the
    controller hangs up. Returns sent/reconnects counts."""
    kinds = [PACKET_IN, PORT_STATUS, MULTIPART_REPLY, ERROR, FLOW_REMOVED, BARRIER_REPLY,
             ECHO_REPLY, FEATURES_REPLY, 4, 8, 23, 25, 27, 0x42, 0xFF]  # fmt: skip
    sent = reconnects = 0
    for i in range(n):
        reconnects += fake.ensure()
        kind = kinds[i % len(kinds)]
        body = rng.randbytes(rng.choice((0, 1, 4, 16, 40, 100, 300)))
        if kind == MULTIPART_REPLY:
            body = struct.pack("!HH4x", rng.choice((0, 1, 4, 6, 7, 10, 13, 0xFFFF)), 0) + body
        elif kind == ERROR:  # type 0 (HELLO_FAILED) makes Ryu decode data as ASCII: avoid
            body = struct.pack("!H", rng.randint(1, 0xFFFF)) + body
        sent += fake.send(ofp_message(kind, fake.fresh_xid(rng), body))
        time.sleep(0.01)
    fake.wait_closed(0.3)
    return {"sent": sent, "reconnects": reconnects + fake.ensure()}


def truncated(fake: FakeSwitch, rng: random.Random) -> dict[str, Any]:
    """Messages shorter than their type needs, a length below the header's, and one cut
    off by the end of the connection."""
    port_status = struct.pack("!B7x", 2) + rng.randbytes(64)
    cases = {
        "length 4 (< header)": struct.pack("!BBHI", 4, ECHO_REQUEST, 4, fake.fresh_xid(rng)),
        "port status, 8 of 72 body bytes": ofp_message(PORT_STATUS, 1, port_status[:8]),
        "packet-in, 10 body bytes": ofp_message(PACKET_IN, 2, rng.randbytes(10)),
        "packet-in, match longer than the message": ofp_message(
            PACKET_IN, 3, struct.pack("!IHBBQHH", 0xFFFFFFFF, 60, 0, 0, 0, 1, 200) + bytes(8)
        ),
        "port stats reply, half an entry": multipart_reply(
            fake.fresh_xid(rng), MP_PORT_STATS, port_stats_entry(1, 1)[:50]
        ),
        "port desc reply, half a port": multipart_reply(
            fake.fresh_xid(rng), MP_PORT_DESC, rng.randbytes(30)
        ),
        "error, no type/code": ofp_message(ERROR, fake.fresh_xid(rng), b"\x00"),
        "header only, length 100, then the connection ends": struct.pack(
            "!BBHI", 4, PACKET_IN, 100, 5
        )
        + bytes(20),
    }
    closed: dict[str, bool] = {}
    reconnects = 0
    for name, data in cases.items():
        reconnects += fake.ensure()
        fake.send(data)
        closed[name] = fake.wait_closed(0.5)
    fake.close()  # the last one: a message cut off by the end of the connection
    return {"closed_connection": closed, "reconnects": reconnects}


def wrong_versions(fake: FakeSwitch, rng: random.Random) -> dict[str, bool]:
    closed = {}
    for version in (1, 5, 0x83, 0xFF):
        fake.ensure()
        fake.send(ofp_message(ECHO_REQUEST, fake.fresh_xid(rng), b"v", version=version))
        closed[f"version {version:#x}"] = fake.wait_closed(2.0)
    return closed


def test_hostile_switch(loom: LoomStack, report: dict[str, Any]) -> None:
    rng = random.Random(11)
    check = Checker(loom, report, "switch")
    fake = FakeSwitch(("127.0.0.1", loom.ofp_port), FAKE_DPID)
    extra = {FAKE_DPID}
    start = before = scrape(loom.metrics_url)
    try:
        joined_s = fake.connect()
        before = check.after("handshake", before, extra, connect_s=round(joined_s, 2))

        sent = unsolicited(fake, rng)
        unsolicited_sent = sent
        before = check.after("unsolicited statistics replies", before, extra, sent=sent)

        polls = fake.polls()
        fake.port_stats_ports = UNKNOWN_PORTS  # answer the controller's polls with these
        answered = fake.wait(lambda: fake.polls() >= polls + 2, 5.0)
        fake.port_stats_ports = None
        before = check.after(
            "port statistics for ports the switch does not have",
            before,
            extra,
            polls_answered=fake.polls() - polls,
            answered_in_time=answered,
        )

        errors_sent = random_errors(fake, rng, 40)
        before = check.after("errors with random xids, types, codes", before, extra,
                             sent=errors_sent)  # fmt: skip

        xid, data = fake.fresh_xid(rng), secrets.token_bytes(16)
        fake.send(ofp_message(ECHO_REQUEST, xid, data))
        echoed = fake.wait(lambda: fake.echo_replies.get(xid) == data, 3.0)
        before = check.after("echo request", before, extra, echoed=echoed)
        if not echoed:
            check.failures.append("echo request: no echo reply with the same xid and data")

        garbage = garbage_after_headers(fake, rng, 60)
        before = check.after("random bytes after valid headers", before, extra, **garbage)

        cut = truncated(fake, rng)
        fake.connect()
        before = check.after("truncated messages", before, extra, **cut)

        closed = wrong_versions(fake, rng)
        fake.ensure()
        before = check.after("wrong OpenFlow version", before, extra, closed_connection=closed)

        hostile = deltas(start, before)
        check.figures["total_hostile"] = hostile

        # Control: an error naming a rule the controller did send repairs the switch.
        rules = fake.rule_xids()
        fake.send(error_message(rules[-1], 5, 0, b""))  # OFPET_FLOW_MOD_FAILED/UNKNOWN
        repaired = fake.wait(
            lambda: (
                sample(scrape(loom.metrics_url), "loom_switch_repairs_total")
                > sample(before, "loom_switch_repairs_total")
            ),
            5.0,
        )
        before = check.after("control: error for a rule the controller sent", before, extra,
                             repaired=repaired)  # fmt: skip
    finally:
        fake.close()
    gone = fake.wait(lambda: FAKE_DPID not in loom.api.topology()["switches"], 10.0)
    check.after("fake switch gone", before, None if gone else extra)
    dropped = hostile["dropped"]
    if dropped.get("unsolicited_reply", 0) < unsolicited_sent:
        check.failures.append(f"unsolicited_reply grew by {dropped.get('unsolicited_reply')},"
                              f" {unsolicited_sent} sent")  # fmt: skip
    if dropped.get("unmatched_error", 0) < errors_sent:
        check.failures.append(
            f"unmatched_error grew by {dropped.get('unmatched_error')}, {errors_sent} sent"
        )
    if dropped.get("stats_unknown_port", 0) < 1:
        check.failures.append(f"stats_unknown_port did not grow: {dropped}")
    if hostile["repairs"] or hostile["rejections"]:
        check.failures.append(f"bogus input caused repairs/rejections: {hostile}")
    if not repaired:
        check.failures.append("control: an error for a rule we sent did not repair the switch")
    assert not check.failures, "\n".join(check.failures)
