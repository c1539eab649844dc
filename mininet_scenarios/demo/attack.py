"""Step 4 of ``make demo``: a host of one tenant sends crafted frames (spoofed ARP,
spoofed IP and MAC, broadcast, plain unicast, to the victim's real MAC and to its Loom
address) at a host of the other; a capture in the victim's namespace counts the marked
frames that arrive, while a same-tenant peer's frames, crafted the same way and sent to the
victim's Loom address (what the peer's kernel learns by ARP), must arrive.
"""

from __future__ import annotations

import ipaddress
import secrets
import time
from collections.abc import Callable

from mininet_scenarios.demo.story import Demo, say
from mininet_scenarios.workloads.frames import BROADCAST, Counter, arp_frame, send_frames, udp_frame

ZERO_MAC = "00:00:00:00:00:00"


def attack_frames(
    demo: Demo, attacker: str, victim: str, peer: str
) -> dict[str, Callable[[bytes], list[bytes]]]:
    a_mac, a_ip = demo.mac(attacker), demo.ip(attacker)
    v_mac, v_ip = demo.mac(victim), demo.ip(victim)
    p_mac, p_ip = demo.mac(peer), demo.ip(peer)
    v_addr = demo.address(victim)  # never told to the attacker, but the format is no secret
    bcast = str(ipaddress.IPv4Network(f"{v_ip}/8", strict=False).broadcast_address)
    return {
        "spoofed ARP: gratuitous, claims the victim's IP": lambda t: [
            arp_frame(a_mac, BROADCAST, 1, a_mac, v_ip, ZERO_MAC, v_ip, t)
        ],
        "spoofed ARP: reply to the victim, claims its peer's IP": lambda t: [
            arp_frame(a_mac, v_mac, 2, a_mac, p_ip, v_mac, v_ip, t)
        ],
        "spoofed IP: UDP from the peer's IP": lambda t: [udp_frame(a_mac, v_mac, p_ip, v_ip, t)],
        "spoofed MAC+IP: UDP as the peer": lambda t: [udp_frame(p_mac, v_mac, p_ip, v_ip, t)],
        "broadcast UDP": lambda t: [udp_frame(a_mac, BROADCAST, a_ip, bcast, t)],
        "cross-tenant unicast UDP": lambda t: [udp_frame(a_mac, v_mac, a_ip, v_ip, t)],
        "cross-tenant UDP to the victim's Loom address": lambda t: [
            udp_frame(a_mac, v_addr, a_ip, v_ip, t)
        ],
        "spoofed MAC+IP as the peer, to victim's Loom address": lambda t: [
            udp_frame(p_mac, v_addr, p_ip, v_ip, t)
        ],
    }


def step_attack(demo: Demo, rounds: int = 20) -> None:
    research, production = demo.tenants["research"], demo.tenants["production"]
    victim, peer, attacker = research[2], research[4], production[0]
    net = demo.stack.net
    say(
        f"attacker {attacker} ({demo.tenant(attacker)}) sends crafted frames at {victim}"
        f" ({demo.tenant(victim)}); a capture on {victim} counts what arrives"
    )
    before = demo.metric("sum by (kind) (loom_isolation_drops_total)")
    cases = attack_frames(demo, attacker, victim, peer)
    tokens = {name: b"LOOM-DEMO" + secrets.token_bytes(6) for name in cases}
    control = b"LOOM-DEMO" + secrets.token_bytes(6)
    # A true ARP frame about a host gives its real MAC (its own) or its Loom address (Loom's).
    addresses = demo.addresses()

    def macs(h: str) -> list[str]:
        return [demo.mac(h), *([addresses[h]] if h in addresses else [])]

    truth = {demo.ip(h): macs(h) for h in net.host_names}
    counter = Counter(
        net.host(victim),
        f"{victim}-eth0",
        [*tokens.values(), control],
        arp_sha=macs(attacker),
        truth=truth,
    )
    try:
        sent = {}
        for name, build in cases.items():
            sent[name] = send_frames(
                net.host(attacker),
                f"{attacker}-eth0",
                build(tokens[name]),
                count=rounds,
                interval=0.01,
            )
        # The peer's kernel would send to the victim's Loom address (its real MAC is routed
        # nowhere): so does the crafted same-tenant frame.
        own = udp_frame(demo.mac(peer), addresses[victim], demo.ip(peer), demo.ip(victim), control)
        sent_own = send_frames(net.host(peer), f"{peer}-eth0", [own], count=rounds, interval=0.01)
        time.sleep(1.0)
        got = counter.snapshot()
    finally:
        counter.close()
    ping_own = "0 received" not in net.host(peer).cmd(f"ping -n -q -c3 -i0.2 -W1 {demo.ip(victim)}")
    time.sleep(2.5)
    after = demo.metric("sum by (kind) (loom_isolation_drops_total)")
    delta = {k: after[k] - before.get(k, 0.0) for k in after if after[k] - before.get(k, 0.0)}
    rows = {
        name: {"sent": sent[name], "received": got["tokens"][tokens[name].hex()]} for name in cases
    }
    for name, r in rows.items():
        print(f"  {name:<52} sent {r['sent']:>4}  victim received {r['received']}")
    received_own = got["tokens"][control.hex()]
    print(
        f"  {'same tenant: ' + peer + ' -> ' + victim + ' crafted UDP':<52} sent {sent_own:>4}"
        f"  victim received {received_own}"
    )
    leaked = sum(r["received"] for r in rows.values()) + got["arp_from"] + got["arp_lies"]
    demo.summary["attack"] = {
        "attacker": attacker,
        "victim": victim,
        "cases": rows,
        "attack_frames_sent": sum(sent.values()),
        "attack_frames_received": leaked,
        "same_tenant_received": f"{received_own}/{sent_own}",
        "same_tenant_ping": ping_own,
        "loom_isolation_drops_total_delta": delta,
    }
    say(
        f"loom_isolation_drops_total during the attack: {delta or 'no controller-side drops'}"
        " (frames that never reach the controller are dropped in the switch's ADMIT table)"
    )
    demo.check("attack frames received by the victim", leaked == 0, f"{leaked} received")
    demo.check(
        "same-tenant traffic flows",
        received_own >= 0.9 * sent_own and ping_own,
        f"{received_own}/{sent_own} crafted, ping {'ok' if ping_own else 'lost'}",
    )
