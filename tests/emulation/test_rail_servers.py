"""GPU servers with two NICs each on a real rail-optimized fabric, under Loom.

``rail_optimized(servers=2, nics=2, spines=2)``: each server is one namespace with one
interface per NIC (``rys1-eth0``, ``rys1-eth1``), each NIC in its rail's /16 with the ARP
and reverse-path sysctls of a multi-NIC server (``mininet_scenarios.harness.servers``).
The policy puts every NIC in one tenant and declares the servers. What must hold: every
NIC reaches the other server's NIC on its rail; Loom learns each NIC, with its own IP, on
the leaf port it is cabled to; the topology says the fabric is rail-optimized; the rank
order of the four NICs uses the rails; a gloo all-reduce of four NIC-bound workers (two
per server, rank order from Loom) completes, its same-server hops over the loopback.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from typing import Any

import networkx as nx
import pytest

from mininet_scenarios.harness.servers import MULTI_NIC_SYSCTLS
from mininet_scenarios.harness.stack import LoomStack
from mininet_scenarios.workloads.collectives.model import wire_bytes_per_rank
from mininet_scenarios.workloads.collectives.runner import run_collective
from topologies import rail_optimized
from topologies.graph import dpid_of, host_list, prefixed

pytestmark = pytest.mark.emulation
PREFIX = "ry"
SERVERS = {f"{PREFIX}s{s}": [f"{PREFIX}s{s}n{i}" for i in (0, 1)] for s in (1, 2)}
RAIL_PEERS = [
    (f"{PREFIX}s{a}n{i}", f"{PREFIX}s{b}n{i}") for i in (0, 1) for a, b in ((1, 2), (2, 1))
]


def graph() -> nx.MultiGraph:
    return prefixed(rail_optimized(servers=2, nics=2, spines=2), PREFIX)


def policy_yaml(g: nx.MultiGraph) -> str:
    """One tenant with every NIC (by MAC and IP), unassigned hosts denied, and the
    servers with their NICs in NIC order (by MAC)."""
    lines = ["version: 1", "fabric: {unassigned_hosts: deny}", "tenants:", "  - name: train"]
    lines.append("    hosts:")
    for h in host_list(g):
        lines.append(f'      - {{mac: "{g.nodes[h]["mac"]}", ip: {g.nodes[h]["ip"]}}}')
    lines.append("servers:")
    for server, nics in SERVERS.items():
        lines += [f"  - name: {server}", "    nics:"]
        lines += [f'      - {{mac: "{g.nodes[n]["mac"]}"}}' for n in nics]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoomStack]:
    g = graph()
    run_dir = tmp_path_factory.mktemp("loom-rail-servers")
    policy = run_dir / "policy.yaml"
    policy.write_text(policy_yaml(g))
    with LoomStack(g, run_dir, env={"LOOM_POLICY": str(policy)}) as st:
        yield st


def ip(st: LoomStack, nic: str) -> str:
    return str(st.graph.nodes[nic]["ip"])


def attached(st: LoomStack, nic: str) -> tuple[int, int]:
    """The (dpid, port) of the leaf port ``nic`` is cabled to."""
    leaf = st.graph.nodes[nic]["switch"]
    ((_, _, d),) = st.graph.edges(nic, data=True)
    return dpid_of(st.graph, leaf), int(d["ports"][leaf])


def learned(st: LoomStack, timeout: float = 30.0) -> dict[str, Any]:
    """The topology once Loom shows every declared NIC attached (pinging rail peers
    meanwhile, so each NIC speaks); the last one seen after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        body = st.api.topology()
        nics = [n for s in SERVERS for n in body.get("servers", {}).get(s, {}).get("nics", [])]
        if len(nics) == 4 and all(n["dpid"] is not None for n in nics):
            return body
        if time.monotonic() > deadline:
            return body
        for src, dst in RAIL_PEERS:
            nic = st.net.nic(src)
            st.net.host(src).cmd(f"ping -n -q -c1 -W1 -I {nic.intf} {ip(st, dst)}")


def dev_counters(st: LoomStack, server: str, dev: str) -> list[int]:
    """``dev``'s counters in the server's namespace (``/proc/net/dev``: receive bytes,
    packets, ... then transmit bytes at 8, packets at 9)."""
    out = st.net.server(server).cmd("cat /proc/net/dev")
    for line in out.splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == dev:
            return [int(c) for c in counters.split()]
    raise AssertionError(f"{server}: no {dev} in {out}")


def lo_bytes(st: LoomStack, server: str) -> int:
    """Bytes the server's loopback has carried."""
    return dev_counters(st, server, "lo")[0]


def test_each_server_is_one_namespace_with_a_nic_per_rail(stack: LoomStack) -> None:
    net = stack.net
    assert net.mn_host_names == list(SERVERS)
    netns = {s: os.stat(f"/proc/{net.server(s).pid}/ns/net").st_ino for s in SERVERS}
    assert len(set(netns.values())) == 2
    for server, nics in SERVERS.items():
        host = net.server(server)
        assert all(net.host(n) is host for n in nics)  # a NIC's commands run on its server
        addrs = dict(re.findall(r"^\d+: (\S+)\s+inet (\S+)", host.cmd("ip -o -4 addr"), re.M))
        want = {f"{server}-eth{i}": f"{ip(stack, n)}/16" for i, n in enumerate(nics)}
        assert addrs == {"lo": "127.0.0.1/8", **want}
        for i, nic in enumerate(nics):
            intf = f"{server}-eth{i}"
            assert net.nic(nic).intf == intf
            assert f"link/ether {stack.graph.nodes[nic]['mac']} " in host.cmd(
                f"ip -o link show {intf}"
            )
            keys = " ".join(f"net.ipv4.conf.{intf}.{k}" for k, _ in MULTI_NIC_SYSCTLS)
            assert host.cmd(f"sysctl -n {keys}").split() == [str(v) for _, v in MULTI_NIC_SYSCTLS]
            # rail i's addresses leave by NIC i (the other server's NIC i, say)
            peer = ip(stack, SERVERS[next(s for s in SERVERS if s != server)][i])
            assert f"dev {intf} src {ip(stack, nic)}" in host.cmd(f"ip -o route get {peer}")


def tx_packets(st: LoomStack, nic: str) -> int:
    """Packets the NIC's interface has sent."""
    port = st.net.nic(nic)
    return dev_counters(st, port.server, port.intf)[9]


def test_a_silent_nic_is_found_on_its_own_interface_only(stack: LoomStack) -> None:
    """Before any other traffic: NIC 0 of server 1 pings NIC 0 of server 2, which has not
    spoken, so Loom probes the silent edge ports for it, server 2's NIC 1 among them.
    Only NIC 0 may answer (arp_ignore=1; by default NIC 1 answers for every address of
    its server, with its own MAC)."""
    src, dst, other = f"{PREFIX}s1n0", f"{PREFIX}s2n0", f"{PREFIX}s2n1"
    before = tx_packets(stack, other)
    out = stack.net.host(src).cmd(
        f"ping -n -q -c3 -i0.3 -W2 -I {stack.net.nic(src).intf} {ip(stack, dst)}"
    )
    assert " 0% packet loss" in out, out
    assert tx_packets(stack, other) == before  # server 2's NIC 1 stayed silent
    seen = {h["mac"]: h["ip"] for h in stack.api.topology()["hosts"]}
    assert seen == {stack.graph.nodes[n]["mac"]: ip(stack, n) for n in (src, dst)}


def test_every_nic_pings_the_other_servers_nic_on_its_rail(stack: LoomStack) -> None:
    ping = stack.net.pingall(timeout=2.0)
    if ping.loss_pct:  # a second round forgives a ping lost to a busy machine
        ping = stack.net.pingall(timeout=3.0)
    assert sorted(ping.pairs) == sorted(RAIL_PEERS)
    assert ping.loss_pct == 0.0, ping.failed


def test_loom_learns_every_nic_on_its_leaf_port(stack: LoomStack) -> None:
    body = learned(stack)
    for server, nics in SERVERS.items():
        shown = body["servers"][server]["nics"]
        want = [
            {
                "mac": stack.graph.nodes[n]["mac"],
                "ip": ip(stack, n),
                "dpid": attached(stack, n)[0],
                "port": attached(stack, n)[1],
            }
            for n in nics
        ]
        assert shown == want, server
    macs = {stack.graph.nodes[n]["mac"]: ip(stack, n) for n in host_list(stack.graph)}
    hosts = {h["mac"]: h["ip"] for h in body["hosts"] if h["mac"] in macs}
    assert hosts == macs  # each NIC once, with its own IP (no NIC answered for another)
    rails = body["rails"]
    assert rails["status"] == "rail-optimized", rails["reasons"]
    assert rails["broken"] == []


def order(stack: LoomStack) -> dict[str, Any]:
    learned(stack)
    ips = [ip(stack, n) for s in reversed(SERVERS) for n in SERVERS[s]]  # any order
    return dict(stack.api.get("/loom/v1/order?hosts=" + ",".join(ips)))


def test_the_rank_order_of_the_four_nics_uses_the_rails(stack: LoomStack) -> None:
    body = order(stack)
    assert body["rails"] == "used", body.get("rail_reasons")
    assert body["cross_rail_hops"] == []
    by_ip = {ip(stack, n): n for n in host_list(stack.graph)}
    ranks = [by_ip[a] for a in body["hosts"]]
    servers = [stack.graph.nodes[n]["server"] for n in ranks]
    one, two = SERVERS
    assert servers in ([one, one, two, two], [two, two, one, one])  # each server's together
    for a, b in zip(ranks, ranks[1:] + ranks[:1], strict=True):  # hops between servers
        if stack.graph.nodes[a]["server"] != stack.graph.nodes[b]["server"]:
            assert stack.graph.nodes[a]["nic"] == stack.graph.nodes[b]["nic"], ranks


def test_gloo_all_reduce_on_nic_bound_workers(stack: LoomStack) -> None:
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        if os.environ.get("LOOM_REQUIRE_EMULATION"):
            pytest.fail("torch is not installed in this venv (make torch)")
        pytest.skip("torch is not installed (make torch)")
    by_ip = {ip(stack, n): n for n in host_list(stack.graph)}
    ranks = [by_ip[a] for a in order(stack)["hosts"]]
    lo_before = {s: lo_bytes(stack, s) for s in SERVERS}
    res = run_collective(stack, ranks, "all_reduce", 0.25, 1, warmup=0, timeout=300)
    lo_after = {s: lo_bytes(stack, s) for s in SERVERS}
    assert res.check_ok, "the all-reduce computed a wrong sum"
    nodes = stack.graph.nodes
    sent = {tuple(k.split(">")): v for k, v in res.tcp_sent.items()}
    # The ring's hops carry 2(N-1)/N of the buffer each; other pairs only barriers.
    hops = {
        k: v for k, v in sent.items() if v >= wire_bytes_per_rank("all_reduce", 4, res.bytes) / 2
    }
    assert len(hops) == 4 and all(a != b for a, b in hops), res.tcp_sent
    assert res.ring_direction == "backward", hops  # gloo's ring: rank i -> i-1
    inside = [k for k in hops if nodes[k[0]]["server"] == nodes[k[1]]["server"]]
    assert len(inside) == 2, hops  # one hop inside each server, two between them
    for a, b in hops:
        if (a, b) not in inside:  # every hop between servers stays on one rail
            assert nodes[a]["nic"] == nodes[b]["nic"], hops
    for a, b in inside:  # and a hop inside a server rides its loopback
        server = nodes[a]["server"]
        assert lo_after[server] - lo_before[server] >= hops[(a, b)], (server, lo_before, lo_after)
