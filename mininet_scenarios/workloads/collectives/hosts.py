"""The emulated hosts of a collective: processes in their namespaces, the NIC's priority, MTU.

The host's own egress queue: Mininet hosts' interfaces are shaped with the same DSCP classes
as the switch ports, but gloo cannot set a TOS, so its packets would leave the host in the
bulk class and share it with any background flow from the same host. A RoCE NIC classifies
training traffic into its own priority itself; :func:`prepare_rank_hosts` emulates that NIC
by pinning each rank host's ephemeral ports (``ip_local_port_range``, which gloo's sockets
use for both ends) to :data:`GLOO_PORTS` and adding a ``u32`` filter on the host interface
that sends TCP from that range to the collective class. This is the host, not the fabric:
it is applied the same way in every mode compared (``ecmp``, ``no-qos``, ``loom``).
Background bulk clients bind ports outside that range.

GPU servers (:mod:`mininet_scenarios.harness.servers`): the ranks are NICs, one worker per
NIC in its server's namespace, gloo bound to the NIC's interface (``GLOO_SOCKET_IFNAME``,
:func:`host_intf`): each rank listens on its NIC's address and the ranks connect to those.
gloo binds only its listening socket, so a connection leaves by the NIC of the peer's rail
with that NIC's address (the kernel routes by destination): a peer on the rank's own rail
is reached by its NIC; a peer on another rail (only a barrier's bytes when the ranks are
in Loom's rail order) by the server's NIC on that rail, a source address Loom admits.
Ranks of one server share its namespace: gloo connects each pair to the address the peer
bound, a local address here, which the kernel delivers over the namespace's loopback (the
stand-in for NVLink) without touching a NIC. Each rank's rendezvous address
(:func:`rendezvous`) is on its own rail too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mininet_scenarios.harness.host_procs import HostProcessError, start_job

if TYPE_CHECKING:
    from mininet_scenarios.harness.network import FabricNet
    from mininet_scenarios.harness.stack import LoomStack

GLOO_PORTS = (40960, 49151)  # 0xa000-0xbfff: one u32 mask (0xe000) matches the range
HOST_FILTER_PRIO = 7  # our own tc filter priority on host interfaces, so we can replace it


class CollectiveError(RuntimeError):
    """The collective did not complete (a rank failed or the timeout passed)."""


def fabric_of(target: LoomStack | FabricNet) -> FabricNet:
    """The network of a ``LoomStack``, or ``target`` itself."""
    net = getattr(target, "fnet", None)
    if net is not None:  # a LoomStack
        return net  # type: ignore[no-any-return]
    return target  # type: ignore[return-value]


def start_in_host(fnet: FabricNet, host: str, cmd: str) -> int:
    """Start ``cmd`` in ``host``'s namespace in the background; its PID (exec'd subshell)."""
    try:
        return start_job(fnet.host(host), f"( exec {cmd} )")
    except HostProcessError as exc:
        raise CollectiveError(str(exc)) from None


def host_intf(fnet: FabricNet, host: str) -> str:
    """The host's one fabric interface (``<host>-eth0`` in the graphs we build)."""
    for a, b, d in fnet.graph.edges(host, data=True):
        other = b if a == host else a
        if other != host:
            return fnet.intf(host, d["ports"][host])
    raise CollectiveError(f"{host} has no link")


def rendezvous(fnet: FabricNet, hosts: Sequence[str]) -> list[str]:
    """Each rank's rendezvous address (torch's ``MASTER_ADDR``, the worker's ``--master``):
    rank 0's IP; on GPU servers, rank 0's server's NIC with the rank's own NIC index when
    it has one, so a worker bound to NIC ``i`` reaches the store on rail ``i`` (over the
    loopback on rank 0's own server). torch's store listens on every address of rank 0's
    namespace, so each of these reaches it."""
    first = fnet.nics.get(hosts[0])
    ips = host_ips(fnet, hosts)
    if first is None:
        return [ips[0]] * len(hosts)
    on_rail = {fnet.nics[n].nic: fnet.nics[n].ip for n in fnet.servers[first.server]}
    own = [fnet.nics.get(h) for h in hosts]
    return [on_rail.get(nic.nic, ips[0]) if nic is not None else ips[0] for nic in own]


def prepare_rank_hosts(fnet: FabricNet, hosts: Sequence[str]) -> None:
    """Pin gloo's ports and, on hosts shaped with classes, put them in the collective class
    at the host's own egress (the emulated NIC priority; see the module docstring)."""
    lo, hi = GLOO_PORTS
    classes = fnet.queue_classes or ()
    coll = next((qc for qc in classes if qc.name == "collective"), None)
    for h in hosts:
        run = fnet.host(h).cmd
        out = run(f"sysctl -qw net.ipv4.ip_local_port_range='{lo} {hi}' 2>&1")
        if out.strip():
            raise CollectiveError(f"{h}: could not pin ephemeral ports: {out.strip()}")
        if coll is None:
            continue
        intf = host_intf(fnet, h)
        run(f"tc filter del dev {intf} parent 1: protocol ip prio {HOST_FILTER_PRIO} 2>/dev/null")
        out = run(
            f"tc filter add dev {intf} parent 1: protocol ip prio {HOST_FILTER_PRIO} u32"
            f" match ip protocol 6 0xff match ip sport {lo} 0x{0xFFFF & ~(hi - lo):04x}"
            f" flowid 1:{coll.minor:x} 2>&1; echo __rc=$?"
        )
        if "__rc=0" not in out:
            raise CollectiveError(f"{h}: tc filter for gloo failed: {out.strip()}")


def set_mtu(fnet: FabricNet, mtu: int) -> None:
    """Set ``mtu`` on every link end (switch ports and host interfaces).

    Why: the userspace datapath forwards every packet of every port on ovs-vswitchd's one
    main thread, and at a few Mbit/s per link a 16-rank collective already keeps that thread
    near 100 %; the cost is per packet, so jumbo frames (as RoCE and TCP AI fabrics use)
    cut it about sixfold. The HTB+TCP ceiling becomes ``(mtu - 52) / (mtu + 14)``."""
    if not 576 <= mtu <= 9000:
        raise ValueError(f"mtu must be in 576..9000, got {mtu}")
    for (node, _port), intf in fnet.intf_names.items():
        out = fnet.runner(node)(f"ip link set dev {intf} mtu {mtu} 2>&1")
        if out.strip():
            raise CollectiveError(f"{node}: ip link set {intf} mtu {mtu}: {out.strip()}")


def host_ips(fnet: FabricNet, hosts: Sequence[str]) -> list[str]:
    return [str(fnet.graph.nodes[h]["ip"]) for h in hosts]


def link_rate(fnet: FabricNet, hosts: Sequence[str]) -> float:
    """The slowest host link among ``hosts`` (Mbit/s): what busbw is divided by."""
    rates = [float(d["rate_mbps"]) for h in hosts for _a, _b, d in fnet.graph.edges(h, data=True)]
    return min(rates)
