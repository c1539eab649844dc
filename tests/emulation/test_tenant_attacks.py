"""Tenant isolation on real switches, attacked with hand-made frames.

Every intra-tenant pair pings and no other pair does. A red host (h6) and h16 (in no tenant)
inject crafted frames (ARP spoofing, spoofed IPs and MACs, broadcast, multicast, VLAN tags,
plain cross-tenant unicast, floods) at a blue victim (h7); counters in the victim's and
bystanders' namespaces count the frames carrying each case's marker. Every frame addressed
to the victim goes once to its real MAC and once to its Loom address (the format is no
secret), and a flood tries guessed Loom addresses of its tenant. None may arrive, while
control frames built the same way and sent where the policy allows, to the Loom address a
kernel would use, do arrive (so a zero is a drop, not a blind counter), blue's own traffic
keeps flowing and the controller stays responsive. Figures:
``results/tenants/attacks.json`` (sent and received per case).
"""

from __future__ import annotations

import secrets
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.addressing import parse, pmac
from mininet_scenarios.harness.stack import LoomStack
from mininet_scenarios.workloads.frames import (
    BROADCAST,
    Counter,
    UdpProbe,
    arp_frame,
    ethernet,
    send_frames,
    tcp_frame,
    udp_frame,
)
from tests.emulation.tenant_support import (
    TENANTS,
    check_pingall,
    h,
    host_addr,
    host_ip,
    loom_address,
    loom_addresses,
    ping_ok,
    policy_status,
    poll_health,
    scrape,
)

pytestmark = pytest.mark.emulation
ZERO_MAC = "00:00:00:00:00:00"
GATEWAY = "10.0.0.1"  # an address no host has: what an attacker would claim as gateway
ATTACKER, OUTSIDER, VICTIM = 6, 16, 7
WATCHED = (7, 8, 9, 5, 6, 16)  # victim, blue bystanders, red, the attackers


def test_pingall_follows_tenants(tenant_loom: LoomStack, tenant_report: dict[str, Any]) -> None:
    status = policy_status(tenant_loom)
    assert status["enforcing"] and status["last_reload_ok"], status
    assert {t["name"] for t in status["tenants"]} == set(TENANTS)
    answered = check_pingall(tenant_loom, TENANTS, timeout=2.0)
    assert answered == sum(len(m) * (len(m) - 1) for m in TENANTS.values())  # 30+20+12
    tenant_report["pingall_answered"] = f"{answered}/240"


@dataclass
class Attack:
    name: str
    sender: int
    build: Callable[[bytes], list[bytes]]  # the case's marker token -> frames
    rounds: int = 5
    refused_arps: int = 0  # ARP frames per round the controller must refuse
    expect: dict[str, int] = field(default_factory=dict)  # controls: receiver -> frames
    token: bytes = b""


def attack_cases(stack: LoomStack) -> list[Attack]:
    a_mac, a_ip = host_addr(stack, ATTACKER)  # red, on e1_0
    v_mac, v_ip = host_addr(stack, VICTIM)  # blue, on e1_1
    p_mac, p_ip = host_addr(stack, 8)  # blue peer (the victim's "gateway")
    r_ip = host_ip(stack, 5)  # red, the attacker's neighbour
    u_mac, u_ip = host_addr(stack, OUTSIDER)
    # What kernels send to: Loom's ARP replies carry these, not the real MACs (a frame to a
    # real MAC is routed nowhere). The attacker cannot learn the victim's, but can guess it.
    r_addr, v_addr = loom_address(stack, 5), loom_address(stack, VICTIM)
    probe = struct.pack("!Qd", 0, 0.0)  # what the UdpProbe receiver expects first

    def udp(
        src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, **kw: Any
    ) -> Callable[[bytes], list[bytes]]:
        return lambda t: [udp_frame(src_mac, dst_mac, src_ip, dst_ip, probe + t, **kw)]

    def arp(*fields: str, vlan: int | None = None) -> Callable[[bytes], list[bytes]]:
        eth_src, eth_dst, op, sha, spa, tha, tpa = fields
        return lambda t: [arp_frame(eth_src, eth_dst, int(op), sha, spa, tha, tpa, t, vlan)]

    def flood(t: bytes, dst: Callable[[int], tuple[str, str]]) -> list[bytes]:
        """3000 UDP datagrams, the i-th to ``dst(i)`` (MAC, IP)."""
        frames = []
        for i in range(3000):
            dst_mac, dst_ip = dst(i)
            frames.append(udp_frame(a_mac, dst_mac, a_ip, dst_ip, probe + t, sport=20000 + i))
        return frames

    def unknown(i: int) -> tuple[str, str]:
        hi, lo = i >> 8 & 0xFF, i & 0xFF
        return f"02:99:00:{hi:02x}:{lo:02x}:01", f"10.99.{hi}.{lo}"

    blue = parse(v_addr)
    assert blue is not None, v_addr

    def guessed(i: int) -> tuple[str, str]:
        """Addresses in the victim's tenant, switch index and slot guessed (32 x 94): its
        own and its tenant peers' among them."""
        return pmac(blue[0], i % 32, i // 32), v_ip

    victim = "the victim"

    def unicast(v: str, to: str) -> list[Attack]:
        """Every attack addressed to the victim, to ``v`` (its real MAC or its Loom
        address); ``to`` names it in the case names."""
        return [
            Attack(
                f"arp: reply to {victim}'s MAC claiming blue peer h8's IP{to}",
                ATTACKER,
                arp(a_mac, v, "2", a_mac, p_ip, v, v_ip),
                rounds=3,
                refused_arps=1,
            ),
            Attack(
                f"arp: reply to {victim}'s MAC and a request claiming gateway {GATEWAY}{to}",
                ATTACKER,
                lambda t: [
                    arp_frame(a_mac, v, 2, a_mac, GATEWAY, v, v_ip, t),
                    arp_frame(a_mac, BROADCAST, 1, a_mac, GATEWAY, ZERO_MAC, GATEWAY, t),
                ],
                rounds=3,
                refused_arps=2,
            ),
            Attack(
                f"arp: VLAN 7 tagged reply to {victim}'s MAC claiming h8's IP{to}",
                ATTACKER,
                arp(a_mac, v, "2", a_mac, p_ip, v, v_ip, vlan=7),
                rounds=3,
            ),
            # IPv4 and Ethernet
            Attack(
                f"ip spoof: UDP from h8's IP to {victim}{to}",
                ATTACKER,
                udp(a_mac, v, p_ip, v_ip),
            ),
            Attack(
                f"mac spoof: UDP from h8's MAC to {victim}{to}",
                ATTACKER,
                udp(p_mac, v, a_ip, v_ip),
            ),
            Attack(
                f"mac+ip spoof: UDP with h8's MAC and IP to {victim}{to}",
                ATTACKER,
                udp(p_mac, v, p_ip, v_ip),
            ),
            Attack(
                f"802.1Q: VLAN 0 priority tag (PCP 5) to {victim}{to}",
                ATTACKER,
                udp(a_mac, v, a_ip, v_ip, vlan=0, pcp=5),
            ),
            Attack(
                f"802.1Q: VLAN 7 to {victim}{to}",
                ATTACKER,
                udp(a_mac, v, a_ip, v_ip, vlan=7),
            ),
            Attack(
                f"unicast: UDP to {victim} with the attacker's own addresses{to}",
                ATTACKER,
                udp(a_mac, v, a_ip, v_ip),
            ),
            Attack(
                f"unicast: TCP SYN to {victim}'s port 22 with the attacker's own addresses{to}",
                ATTACKER,
                lambda t: [tcp_frame(a_mac, v, a_ip, v_ip, t)],
            ),
            Attack(
                f"non-IP: ethertype 0x88b5 to {victim}{to}",
                ATTACKER,
                lambda t: [ethernet(v, a_mac, 0x88B5, t)],
            ),
            Attack(
                f"flood: 3000 UDP to {victim}{to}",
                ATTACKER,
                lambda t: flood(t, lambda i: (v, v_ip)),
                rounds=1,
            ),
            Attack(f"h16: UDP to {victim}{to}", OUTSIDER, udp(u_mac, v, u_ip, v_ip)),
        ]

    return [
        # Controls: the same machinery delivers where the policy allows, so zeros mean drops.
        # They go to the Loom address, as the sender's kernel would.
        Attack(
            "control: crafted UDP red h6 -> red h5 (its kernel accepts the checksums)",
            ATTACKER,
            udp(a_mac, r_addr, a_ip, r_ip, dport=9200),
            expect={h(5): 5, "th5/udp": 5},
        ),
        Attack(
            "control: crafted TCP SYN red h6 -> red h5",
            ATTACKER,
            lambda t: [tcp_frame(a_mac, r_addr, a_ip, r_ip, t)],
            rounds=3,
            expect={h(5): 3},
        ),
        Attack(
            "control: crafted UDP blue h8 -> victim h7",
            8,
            udp(p_mac, v_addr, p_ip, v_ip),
            expect={h(VICTIM): 5},
        ),
        # ARP spoofing
        Attack(
            f"arp: gratuitous request claiming {victim}'s IP, broadcast",
            ATTACKER,
            arp(a_mac, BROADCAST, "1", a_mac, v_ip, ZERO_MAC, v_ip),
            rounds=3,
            refused_arps=1,
        ),
        Attack(
            f"arp: gratuitous reply claiming {victim}'s IP, broadcast",
            ATTACKER,
            arp(a_mac, BROADCAST, "2", a_mac, v_ip, BROADCAST, v_ip),
            rounds=3,
            refused_arps=1,
        ),
        Attack(
            f"arp: request for {victim} with blue h8's MAC and IP (host hijack)",
            ATTACKER,
            arp(p_mac, BROADCAST, "1", p_mac, p_ip, ZERO_MAC, v_ip),
            rounds=3,
            refused_arps=1,
        ),
        Attack(
            f"arp: request for {victim}'s IP with the attacker's own addresses",
            ATTACKER,
            arp(a_mac, BROADCAST, "1", a_mac, a_ip, ZERO_MAC, v_ip),
            rounds=3,
        ),
        # Unicast to the victim: to its real MAC, and to its Loom address (the format is no
        # secret): the ADMIT table passes only addresses of the sender's own tenant.
        *unicast(v_mac, ""),
        *unicast(v_addr, " [to its Loom address]"),
        Attack(
            f"flood: 3000 UDP to guessed Loom addresses in {victim}'s tenant",
            ATTACKER,
            lambda t: flood(t, guessed),
            rounds=1,
        ),
        Attack(
            "broadcast: UDP to ff:ff:ff:ff:ff:ff (10.255.255.255 and 255.255.255.255)",
            ATTACKER,
            lambda t: [
                *udp(a_mac, BROADCAST, a_ip, "10.255.255.255")(t),
                *udp(a_mac, BROADCAST, a_ip, "255.255.255.255")(t),
            ],
        ),
        Attack(
            "multicast: UDP to 224.0.0.1 and 239.1.2.3",
            ATTACKER,
            lambda t: [
                *udp(a_mac, "01:00:5e:00:00:01", a_ip, "224.0.0.1")(t),
                *udp(a_mac, "01:00:5e:01:02:03", a_ip, "239.1.2.3")(t),
            ],
        ),
        Attack("flood: 3000 UDP to unknown hosts", ATTACKER, lambda t: flood(t, unknown), rounds=1),
        # h16, in no tenant
        Attack(
            f"h16: ARP request for {victim}'s IP",
            OUTSIDER,
            arp(u_mac, BROADCAST, "1", u_mac, u_ip, ZERO_MAC, v_ip),
            rounds=3,
            refused_arps=1,
        ),
        Attack(
            f"h16: gratuitous ARP claiming {victim}'s IP",
            OUTSIDER,
            arp(u_mac, BROADCAST, "1", u_mac, v_ip, ZERO_MAC, v_ip),
            rounds=3,
            refused_arps=1,
        ),
        Attack("h16: UDP broadcast", OUTSIDER, udp(u_mac, BROADCAST, u_ip, "10.255.255.255")),
    ]


def run_cases(stack: LoomStack, cases: list[Attack]) -> dict[str, Any]:
    """Send every case in turn; what each watched host received, and side measurements."""
    # A host's true ARP sender MACs: its real one (its own frames) and its Loom address
    # (Loom's replies about it). h16, in no tenant, may have no Loom address.
    loom = loom_addresses(stack)

    def macs(i: int) -> list[str]:
        return [host_addr(stack, i)[0], *([loom[i]] if i in loom else [])]

    truth = {host_ip(stack, i): macs(i) for i in range(1, 17)}
    attackers = [m for i in (ATTACKER, OUTSIDER) for m in macs(i)]
    blue_macs = [m for i in TENANTS["blue"] for m in macs(i)]
    # The attacker's own tenant may hear its real ARP (its kernel probes red h5 after the
    # control cases); from the outsider nothing, and lies from nobody.
    outsider = macs(OUTSIDER)
    counters: dict[str, Counter] = {}
    blue_flow: UdpProbe | None = None
    control_udp: UdpProbe | None = None
    out: dict[str, Any] = {"cases": {}, "health_ms": []}
    try:
        for i in WATCHED:
            # On the attackers: ARP naming a blue host means the controller answered them.
            red = i in TENANTS["red"] and i != ATTACKER
            sha = blue_macs if i in (ATTACKER, OUTSIDER) else outsider if red else attackers
            tokens = [c.token for c in cases]
            node = stack.net.host(h(i))
            counters[h(i)] = Counter(node, stack.net.intf(h(i), 0), tokens, sha, truth)
        # Blue's own traffic during the attacks: 200 datagrams/s from h10 (pod 2) to h7.
        net = stack.net
        blue_flow = UdpProbe(net.host(h(10)), net.host(h(7)), host_ip(stack, 7), 9300, 200)
        control_udp = UdpProbe(None, net.host(h(5)), host_ip(stack, 5), 9200)
        for case in cases:
            stop = threading.Event()
            poller = threading.Thread(target=poll_health, args=(stack, stop, out["health_ms"]))
            poller.start()
            t0 = time.monotonic()
            try:
                sender = h(case.sender)
                sent = send_frames(
                    net.host(sender), net.intf(sender, 0), case.build(case.token), case.rounds, 0.05
                )
            finally:
                send_s = time.monotonic() - t0
                time.sleep(0.4)  # frames in flight, packet-ins, controller replies
                stop.set()
                poller.join()
            got = {}
            for name, counter in counters.items():
                snap = counter.snapshot()
                got[name] = {
                    "marked": snap["tokens"].get(case.token.hex(), 0),
                    "arp_lies": snap["arp_lies"],
                    "arp_from": snap["arp_from"],
                }
            if "th5/udp" in case.expect and control_udp is not None:
                got["th5/udp"] = {"marked": control_udp.stop()["received"]}
                control_udp = None
            out["cases"][case.name] = {"sent": sent, "send_s": round(send_s, 2), "received": got}
        out["blue"] = blue_flow.stop()
        blue_flow = None
    finally:
        for counter in counters.values():
            counter.close()
        for probe in (blue_flow, control_udp):
            if probe is not None:
                probe.stop()
    return out


def test_attacks_on_another_tenant_deliver_nothing(
    tenant_loom: LoomStack, tenant_report: dict[str, Any]
) -> None:
    loom = tenant_loom
    cases = attack_cases(loom)
    for i, case in enumerate(cases):
        case.token = b"LOOM-ATK" + bytes([i]) + secrets.token_bytes(5)
    before = scrape(loom)
    run = run_cases(loom, cases)
    t0 = time.monotonic()
    loom.api.health()
    health_after_ms = (time.monotonic() - t0) * 1e3
    after = scrape(loom)
    neigh = loom.net.host(h(VICTIM)).cmd("ip neigh show")

    def drops(kind: str) -> float:
        key = ("loom_isolation_drops_total", kind)
        return after.get(key, 0.0) - before.get(key, 0.0)

    refused = sum(c.refused_arps * c.rounds for c in cases)
    blue, health_ms = run["blue"], run["health_ms"]
    tenant_report["cases"] = {
        name: {
            "sent": r["sent"],
            "victim_received": r["received"][h(VICTIM)]["marked"],
            "received": {n: g["marked"] for n, g in r["received"].items() if g["marked"]},
            "arp_lies_or_from_attacker": {
                n: g["arp_lies"] + g["arp_from"]
                for n, g in r["received"].items()
                if g.get("arp_lies") or g.get("arp_from")
            },
        }
        for name, r in run["cases"].items()
    }
    tenant_report["blue_flow_h10_to_h7"] = {
        k: blue[k] for k in ("received", "lost", "reordered", "max_gap_ms")
    }
    tenant_report["health_ms"] = {
        "during_max": round(max(health_ms), 1) if health_ms else None,
        "after": round(health_after_ms, 1),
    }
    tenant_report["isolation_drops"] = {
        "arp": drops("arp"),
        "route": drops("route"),
        "arp_refusals_expected_at_least": refused,
    }
    tenant_report["victim_neighbours"] = neigh.strip().splitlines()
    failures = []
    for case in cases:
        for name, g in run["cases"][case.name]["received"].items():
            wanted = case.expect.get(name, 0)
            # The sender may see its own frames quoted back in ICMP errors (port unreachable).
            if g["marked"] != wanted and name != h(case.sender):
                failures.append(f"{case.name}: {name} got {g['marked']} marked, expected {wanted}")
            if g.get("arp_lies") or g.get("arp_from"):
                failures.append(f"{case.name}: {name} got ARP lies/from-attacker {g}")
    assert not failures, "\n".join(failures)
    # Blue kept talking: every datagram of the 200/s stream arrived, without a long pause.
    assert blue["received"] > 0 and blue["lost"] == 0, blue
    assert blue["max_gap_ms"] < 250, blue
    # The victim's ARP cache holds only true entries (no attacker MAC or Loom address, no
    # gateway); h8's, if any, is the Loom address Loom handed out.
    p_mac, p_ip = host_addr(loom, 8)
    addresses = loom_addresses(loom)
    for i in (ATTACKER, OUTSIDER):
        assert host_addr(loom, i)[0] not in neigh, neigh
        assert i not in addresses or addresses[i] not in neigh, neigh
    assert GATEWAY + " " not in neigh, neigh
    for line in neigh.splitlines():
        if line.startswith(p_ip + " ") and "lladdr" in line:
            assert addresses[8] in line, neigh
    # The victim still talks to its tenant; the hijack attempt left h8 where it is.
    assert ping_ok(loom, 8, VICTIM) and ping_ok(loom, VICTIM, 9)
    h8 = loom.api.get(f"/loom/v1/routes?mac={p_mac}")["host"]
    tenant_report["h8_as_learned"] = h8
    assert (h8["ip"], h8["dpid"], h8["port"]) == (p_ip, loom.graph.nodes["te1_1"]["dpid"], 2), h8
    # The controller answers at once and counted the refused ARPs.
    assert health_after_ms < 500, health_after_ms
    assert drops("arp") >= refused, tenant_report["isolation_drops"]
