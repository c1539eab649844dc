"""The emulation harness against real Open vSwitch (userspace datapath) and Mininet.

One shared 3-switch tree with Ryu's ``simple_switch_13`` carries the read-only and traffic
tests; the others build their own small fabrics. Every test uses its own two-letter name
prefix (``hx``, ``hq``, ``hw``, ...), so nothing here can touch another person's network.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import networkx as nx
import pytest

from mininet_scenarios.bench.patterns import cport_base
from mininet_scenarios.harness.controller import ControllerError, ControllerProcess
from mininet_scenarios.harness.cpu import cpu_idle_sampler
from mininet_scenarios.harness.network import EPHEMERAL_PORTS, FabricNet
from mininet_scenarios.harness.ovs import FabricError, ovs_bridges, root_interfaces
from mininet_scenarios.harness.processes import REPO_ROOT, ChildProcess, free_port
from mininet_scenarios.harness.shaping import DEFAULT_CLASSES, class_counters, root_run
from mininet_scenarios.workloads.collectives.background import BACKGROUND_CPORT
from mininet_scenarios.workloads.collectives.hosts import GLOO_PORTS
from mininet_scenarios.workloads.iperf import iperf3_flows
from mininet_scenarios.workloads.ping import ping_stats

pytestmark = pytest.mark.emulation


def vsctl(*args: str) -> str:
    return subprocess.run(
        ["ovs-vsctl", *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def ofctl_ports(switch: str) -> dict[int, str]:
    out = subprocess.run(
        ["ovs-ofctl", "-O", "OpenFlow13", "show", switch],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\s*(\d+)\((\S+)\):", out, re.M)}


def mininet_shells(prefix: str) -> list[int]:
    """PIDs of Mininet node shells (``bash ... mininet:<name>``) whose name has ``prefix``."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(a.startswith(f"mininet:{prefix}".encode()) for a in argv):
                pids.append(int(entry))
    return pids


def assert_clean(graph: nx.MultiGraph, prefix: str) -> None:
    names = set(graph.nodes)
    intfs = {f"{n}-eth{d['ports'][n]}" for a, b, d in graph.edges(data=True) for n in (a, b)}
    assert not ovs_bridges() & names
    assert not root_interfaces() & (names | intfs)
    assert not mininet_shells(prefix)


@pytest.fixture(scope="module")
def fabric(
    ryu_switch: tuple[str, int], graphs: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FabricNet]:
    g = graphs.tree("hx", rate_mbps=10.0)
    with FabricNet(g, controller=ryu_switch, run_dir=tmp_path_factory.mktemp("tree")) as fnet:
        assert fnet.wait_connected(30), "switches did not connect to simple_switch_13"
        yield fnet
    assert not fnet.leftovers, f"net.stop() left {fnet.leftovers}"
    assert_clean(g, "hx")


def test_bridges_match_graph(fabric: FabricNet) -> None:
    g = fabric.graph
    for sw in fabric.switch_names:
        assert vsctl("get", "Bridge", sw, "datapath_type") == "netdev"
        assert vsctl("get", "Bridge", sw, "fail_mode") == "secure"
        assert vsctl("get", "Bridge", sw, "protocols") == "[OpenFlow13]"
        assert vsctl("get", "Bridge", sw, "other_config:disable-in-band") == '"true"'
        assert int(vsctl("get", "Bridge", sw, "datapath_id").strip('"'), 16) == g.nodes[sw]["dpid"]
        want = {d["ports"][sw]: f"{sw}-eth{d['ports'][sw]}" for _, _, d in g.edges(sw, data=True)}
        assert ofctl_ports(sw) == want
    assert fabric.intf("hxs1", 7) == "hxs1-eth7"
    assert set(fabric.links_between("hxs3", "hxs1")) == {("hxs3-eth1", "hxs1-eth7")}


def test_hosts_have_graph_addresses_and_no_ipv6(fabric: FabricNet) -> None:
    for name in fabric.host_names:
        d = fabric.graph.nodes[name]
        host = fabric.host(name)
        link = host.cmd(f"ip -o link show {name}-eth0")
        assert d["mac"] in link
        assert f"inet {d['ip']}/8" in host.cmd(f"ip -o -4 addr show {name}-eth0")
        assert host.cmd("ip -6 addr show").strip() == ""
        assert host.cmd("cat /proc/sys/net/ipv6/conf/all/disable_ipv6").strip() == "1"
        assert "tx-checksumming: off" in host.cmd(f"ethtool -k {name}-eth0")


def test_pingall_without_loss(fabric: FabricNet) -> None:
    result = fabric.pingall(timeout=2.0)
    assert len(result.pairs) == 12
    assert result.loss_pct == 0.0, f"failed pairs: {result.failed}"
    assert all(r.rtt_ms is not None and r.rtt_ms > 0 for r in result.pairs.values())


def test_hosts_pick_unpinned_ports_above_every_pinned_one(fabric: FabricNet) -> None:
    # An iperf3 client pinned to --cport 40000 failed "Address already in use" when its
    # control connection had been given 40000 from the kernel's default range.
    out = fabric.host("hxh1").cmd("sysctl -n net.ipv4.ip_local_port_range")
    assert [int(p) for p in out.split()] == list(EPHEMERAL_PORTS)
    pinned = (
        GLOO_PORTS[1],
        BACKGROUND_CPORT,
        max(cport_base(f"p{i}", 1) for i in range(3000)) + 63,
    )
    assert EPHEMERAL_PORTS[0] > max(pinned)


def test_iperf3_reaches_shaped_rate(fabric: FabricNet) -> None:
    # hxh1 -> hxh3 crosses hxs1, hxs3 and hxs2; every link end is shaped at 10 Mbit/s.
    with cpu_idle_sampler() as cpu:
        run = iperf3_flows(fabric, [("hxh1", "hxh3")], 5.0, interval=0.5)
    flow = run.flows[0]
    print(
        f"iperf3 hxh1->hxh3: {flow.mbps:.2f} Mbit/s (sender {flow.sender_mbps:.2f}),"
        f" retransmits {flow.retransmits}, CPU idle {cpu.mean:.0f} %"
    )
    assert flow.error is None
    assert 9.0 <= flow.mbps <= 10.5
    assert len(flow.series) >= 9
    assert run.aggregate == pytest.approx(flow.mbps)
    assert cpu.samples
    # The switch port towards the core carried it, and HTB saw it in the link class.
    assert fabric.port_counters("hxs1")[7].tx_bytes > 5e6
    assert class_counters(root_run, "hxs1-eth7")["link"].bytes > 5e6
    assert "OFPST_FLOW reply" in fabric.dump_flows("hxs1")
    assert "OFPST_GROUP_DESC reply" in fabric.dump_groups("hxs1")


def test_set_link_sends_port_status_and_cuts_traffic(fabric: FabricNet, run_dir: Path) -> None:
    log = run_dir / "monitor.txt"
    monitor = ChildProcess(["ovs-ofctl", "-O", "OpenFlow13", "monitor", "hxs1", "128"], log)
    with monitor:
        time.sleep(0.5)
        assert ping_stats(fabric, "hxh1", "hxh3", count=2, interval=0.2).received == 2
        touched = fabric.set_link("hxs1", "hxs3", up=False)
        assert sorted(touched) == ["hxs1-eth7", "hxs3-eth1"]
        time.sleep(0.5)
        show = fabric.show("hxs1")
        assert re.search(r"7\(hxs1-eth7\).*?config:\s+PORT_DOWN\s+state:\s+LINK_DOWN", show, re.S)
        assert ping_stats(fabric, "hxh1", "hxh3", count=2, interval=0.2, timeout=0.5).received == 0
        fabric.set_link("hxs1", "hxs3", up=True)
        time.sleep(0.5)
        assert ping_stats(fabric, "hxh1", "hxh3", count=3, interval=0.2).received >= 2
    text = log.read_text()
    assert re.search(r"OFPT_PORT_STATUS.*7\(hxs1-eth7\).*\n\s+config:\s+PORT_DOWN", text)
    assert re.search(r"OFPT_PORT_STATUS.*7\(hxs1-eth7\).*\n\s+config:\s+0\n\s+state:\s+LIVE", text)


def test_dscp_marked_traffic_lands_in_collective_class(
    ryu_switch: tuple[str, int], graphs: SimpleNamespace, run_dir: Path
) -> None:
    g = graphs.pair("hq", rate_mbps=10.0)
    collective_tos = 26 << 2
    with FabricNet(
        g, controller=ryu_switch, run_dir=run_dir, queue_classes=DEFAULT_CLASSES
    ) as fnet:
        assert fnet.wait_connected(30)
        assert fnet.pingall(timeout=2.0).loss_pct == 0.0
        alone = iperf3_flows(
            fnet, [("hqh1", "hqh2")], 3.0, tos=collective_tos, out_dir=run_dir / "alone"
        )
        after_alone = class_counters(root_run, "hqs1-eth2")
        # Marked (DSCP 26) and unmarked traffic compete for the same 10 Mbit/s links.
        both = iperf3_flows(
            fnet,
            [("hqh1", "hqh2", collective_tos), ("hqh1", "hqh2", None)],
            4.0,
            port_base=5301,
            out_dir=run_dir / "both",
        )
        host_side = class_counters(fnet.host("hqh1").cmd, "hqh1-eth0")
        switch_side = class_counters(root_run, "hqs1-eth2")
    # An idle class lends everything: the collective class alone fills the link.
    assert alone.flows[0].error is None
    assert alone.flows[0].mbps > 9.0
    assert after_alone["collective"].bytes > 3e6
    assert after_alone["bulk"].bytes < 0.02 * after_alone["collective"].bytes
    marked, unmarked = both.flows
    print(f"collective {marked.mbps:.2f} Mbit/s vs bulk {unmarked.mbps:.2f} Mbit/s")
    assert marked.error is None and unmarked.error is None
    assert marked.mbps > 2 * unmarked.mbps
    assert 9.0 <= marked.mbps + unmarked.mbps <= 10.5
    for counters in (host_side, switch_side):
        assert set(counters) == {"link", "collective", "control", "bulk"}
        assert counters["collective"].bytes > counters["bulk"].bytes > 0
    assert_clean(g, "hq")


def test_queue_classes_and_limits_on_every_link_end(graphs: SimpleNamespace, run_dir: Path) -> None:
    g = graphs.pair("ht", rate_mbps=250.0)
    with FabricNet(
        g,
        controller=("127.0.0.1", free_port()),
        run_dir=run_dir,
        queue_classes=DEFAULT_CLASSES,
        queue_packets=64,
    ) as fnet:
        for node, port in (("hth1", 0), ("hts1", 1), ("hts1", 2), ("hts2", 2)):
            intf = fnet.intf(node, port)
            run = fnet.runner(node)
            classes = run(f"tc class show dev {intf}")
            assert re.search(r"class htb 1:1 root rate 250Mbit ceil 250Mbit", classes)
            assert re.search(
                r"class htb 1:10 parent 1:1 .*prio 0 rate 225Mbit ceil 250Mbit", classes
            )
            assert re.search(r"class htb 1:30 parent 1:1 .*prio 2 rate 12500Kbit", classes)
            qdiscs = run(f"tc qdisc show dev {intf}")
            assert "default 0x30" in qdiscs
            assert qdiscs.count("pfifo") == 3 and "limit 64p" in qdiscs
            filters = run(f"tc filter show dev {intf}")
            assert "flowid 1:10" in filters and "flowid 1:20" in filters
            assert "match 00680000/00fc0000" in filters  # TOS 0x68 = DSCP 26
    assert_clean(g, "ht")


def test_exception_inside_with_cleans_up(graphs: SimpleNamespace, run_dir: Path) -> None:
    g = graphs.pair("hz")
    fnet = FabricNet(g, controller=("127.0.0.1", free_port()), run_dir=run_dir)
    shells: dict[str, int] = {}
    sleeper = 0

    def fail_inside() -> None:
        nonlocal sleeper
        with fnet:
            shells.update(fnet._shells)
            sleeper = int(fnet.host("hzh1").cmd("sleep 600 >/dev/null 2>&1 & echo $!").split()[-1])
            assert vsctl("get", "Bridge", "hzs1", "external_ids:loom-pid") == f'"{os.getpid()}"'
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside()
    assert sleeper
    assert not any(Path(f"/proc/{pid}").exists() for pid in [*shells.values(), sleeper])
    assert not fnet.leftovers
    assert_clean(g, "hz")


def test_second_fabric_with_the_same_names_in_one_process_is_refused(
    graphs: SimpleNamespace, run_dir: Path
) -> None:
    """Its shells would look like stale leftovers of the first one's and be killed."""
    g = graphs.pair("hw")
    with FabricNet(g, controller=("127.0.0.1", free_port()), run_dir=run_dir) as first:
        with pytest.raises(FabricError, match="already used by a running FabricNet"):
            FabricNet(g, controller=("127.0.0.1", free_port()), run_dir=run_dir / "2").__enter__()
        assert first.pingall(timeout=0.5).pairs  # the first fabric's shells still answer
    assert_clean(g, "hw")


def _cmdline(pid: int) -> bytes:
    """A process's command line; empty once it has exited (or is a zombie)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_stale_names_are_removed_but_live_ones_refused(
    graphs: SimpleNamespace, run_dir: Path
) -> None:
    g = graphs.pair("hw")
    # Leftovers of a crashed run: a bridge and a veth with exactly our names.
    vsctl("--may-exist", "add-br", "hws1", "--", "set", "Bridge", "hws1", "datapath_type=netdev")
    if "hws2-eth2" not in root_interfaces():
        subprocess.run(
            ["ip", "link", "add", "hws2-eth2", "type", "veth", "peer", "name", "hwx"], check=True
        )
    # A live Mininet node shell named hws2 (another emulation's network): refuse, touch nothing.
    # (Not our child: shells whose parent is this process count as our own leftovers.)
    out = subprocess.run(
        ["bash", "-c", "bash -c 'sleep 60; true' mininet:hws2 >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    impostor = int(out)
    deadline = time.monotonic() + 5
    while b"mininet:hws2" not in Path(f"/proc/{impostor}/cmdline").read_bytes():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        with (
            pytest.raises(FabricError, match="in use by a running network"),
            FabricNet(g, controller=("127.0.0.1", free_port()), run_dir=run_dir),
        ):
            pass
        assert "hws1" in ovs_bridges()
        assert "hws2-eth2" in root_interfaces()
    finally:
        os.kill(impostor, signal.SIGKILL)
    # kill() returns before the process is gone; until then it still owns the name.
    deadline = time.monotonic() + 5
    while b"mininet:hws2" in _cmdline(impostor):
        assert time.monotonic() < deadline, "the impostor outlived SIGKILL"
        time.sleep(0.01)
    with FabricNet(g, controller=("127.0.0.1", free_port()), run_dir=run_dir, shape=False):
        assert ofctl_ports("hws2") == {1: "hws2-eth1", 2: "hws2-eth2"}
        assert "hwx" not in root_interfaces()
    assert_clean(g, "hw")


def _write_fabric(graph: nx.MultiGraph, path: Path) -> Path:
    from topologies.custom import dump_fabric

    path.write_text(dump_fabric(graph))
    return path


def test_loom_scenario_runs_commands(
    graphs: SimpleNamespace,
    run_dir: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mininet_scenarios.cli import main

    spec = _write_fabric(graphs.pair("hv"), run_dir / "hv.yaml")
    code = main(
        [
            str(spec),
            "--start-controller",
            "--app",
            "ryu.app.simple_switch_13",
            "--run-dir",
            str(run_dir),
            "--rate",
            "20",
            "--cmd",
            "pingall",
            "--cmd",
            "hvh1 echo hello-hv",
            "--cmd",
            "iperf hvh1 hvh2",
        ]
    )
    assert code == 0
    # Mininet's CLI prints through its own logger (which also propagates to caplog).
    assert "Results: 0% dropped" in caplog.text
    assert "hello-hv" in caplog.text
    # `iperf` is ours (iperf3): Mininet's hangs with iperf 2.1.
    match = re.search(r"iperf3 hvh1 -> hvh2: ([\d.]+) Mbit/s", capsys.readouterr().out)
    assert match and 18.0 <= float(match.group(1)) <= 21.0
    assert (run_dir / "controller.txt").exists()
    assert_clean(graphs.pair("hv"), "hv")


def test_sigterm_to_loom_scenario_cleans_up(graphs: SimpleNamespace, run_dir: Path) -> None:
    g = graphs.pair("hy")
    spec = _write_fabric(g, run_dir / "hy.yaml")
    log = run_dir / "scenario.txt"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mininet_scenarios",
                str(spec),
                "--start-controller",
                "--app",
                "ryu.app.simple_switch_13",
                "--run-dir",
                str(run_dir),
                "--cmd",
                "hyh1 sleep 120",
            ],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while "switches connected" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        while not _running(b"sleep\x00120\x00"):  # the CLI is inside "hyh1 sleep 120"
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        children = _children(proc.pid)
        assert any(b"ryu-manager" in c for c in children.values())
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        # Usually gone in seconds; in some full-suite runs it has waited for the host's
        # command to end first (at most its 120 s), which still must clean up fully.
        assert proc.wait(150) == 143, log.read_text()
        print(f"exited {time.monotonic() - signalled:.1f} s after SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not any(Path(f"/proc/{pid}").exists() for pid in children), children
    assert_clean(g, "hy")
    assert "nothing left" in log.read_text()


def _running(cmdline: bytes) -> bool:
    """Whether any process runs exactly this command line (NUL-separated, as in /proc)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/cmdline").read_bytes() == cmdline:
                    return True
            except OSError:
                continue
    return False


def _children(pid: int) -> dict[int, bytes]:
    """Direct children of ``pid`` and their command lines."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
    return out


def test_iperf3_outputs_are_json(fabric: FabricNet) -> None:
    run = iperf3_flows(
        fabric, [("hxh2", "hxh4"), ("hxh4", "hxh2")], 2.0, interval=0.5, port_base=5401
    )
    for f in run.flows:
        doc = json.loads(
            (run.outputs / f"{f.sender}-{f.receiver}-{f.port}.client.json").read_text()
        )
        assert doc["end"]["sum_sent"]["bytes"] > 0
        assert f.mbps > 5.0


def test_controller_process_death_is_reported_with_its_log(run_dir: Path) -> None:
    ctl = ControllerProcess(
        "ryu.app.no_such_app_here",
        ofp_port=free_port(),
        log_path=run_dir / "bad.txt",
        start_timeout=20,
    )
    with pytest.raises(ControllerError, match="exited with code") as info, ctl:
        pass
    assert "no_such_app_here" in str(info.value)
    assert not ctl.alive()
