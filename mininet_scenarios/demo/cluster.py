"""``make cluster-demo``: three Loom instances on a three-member etcd share a k=4 fat-tree,
and one of them dies under traffic.

1. etcd and three instances start on loopback; every switch connects to all three and each
   switch gets one master: the shares, as ``GET /loom/v1/cluster`` shows them;
2. a job posted to one instance is seen by the other two;
3. that instance is SIGKILLed under a 1,000 datagram/s UDP stream and a gloo all-reduce:
   the time until its switches have new masters, datagrams lost, the largest gap, the job;
4. it starts again and gets its share of the switches back;
5. one etcd member dies: nothing changes; a second: the stream still flows and changes are
   refused with a clear error until the quorum returns.

etcd runs over TLS, every client and member showing a certificate of the lab's CA (``make
pki``, in ``--pki``), with authentication on and Loom as the etcd user ``loom``;
``--plain-etcd``: plain HTTP and no users instead.

Exits non-zero if a check fails; everything it started is stopped and removed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mininet_scenarios.harness.client import LoomApiError
from mininet_scenarios.harness.cluster import LoomCluster
from mininet_scenarios.harness.pki import ETCD, ensure
from mininet_scenarios.workloads.cluster_kill import kill_once
from mininet_scenarios.workloads.collectives.runner import job_request
from mininet_scenarios.workloads.streams import Stream
from topologies import fat_tree


class Checks:
    def __init__(self) -> None:
        self.results: dict[str, tuple[bool, str]] = {}

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.results[name] = (ok, detail)
        print(f"  [{'ok' if ok else 'FAILED'}] {name}: {detail}", flush=True)


def step(n: int, title: str) -> None:
    print(f"\n=== step {n}/5: {title} ===", flush=True)


def show_shares(cluster: LoomCluster) -> dict[str, int]:
    shares = cluster.shares()
    for name, count in sorted(shares.items()):
        print(f"  {name}: masters {count} switches")
    return shares


def run(args: argparse.Namespace) -> dict[str, Any]:
    checks = Checks()
    run_dir: Path = args.out
    secure = not args.plain_etcd
    names = (("controller", "switch") if args.tls else ()) + (ETCD if secure else ())
    pki = ensure(args.pki, names) if names else None  # make pki: kept if already there
    with LoomCluster(
        fat_tree(4),
        run_dir / "run",
        shape=False,
        etcd_base_port=args.etcd_port,
        tls=pki if args.tls else None,
        etcd_pki=pki if secure else None,
        etcd_auth=secure,
    ) as c:
        how = "TLS both ways, as etcd user loom" if secure else "plain HTTP, no users"
        print(f"etcd: {c.etcd.url}, {how}", flush=True)
        step(1, "three instances share the fabric")
        shares = show_shares(c)
        spread = max(shares.values()) - min(shares.values())
        checks.check("shared within one of even", spread <= 1, f"{shares}")
        ping = c.net.pingall(timeout=2.0)
        checks.check("pingall", ping.loss_pct == 0.0, f"{ping.loss_pct:.1f} % loss")

        step(2, "a job posted to one instance is seen by all")
        first, *others = c.live()
        ips = [c.graph.nodes[h]["ip"] for h in ("h3", "h7")]
        first.api.request("POST", "/loom/v1/jobs", job_request("demo", "t", ips, "all_reduce"))
        time.sleep(0.5)
        seen = [
            o.name
            for o in others
            if any(j["name"] == "demo" for j in o.api.get("/loom/v1/jobs")["jobs"])
        ]
        checks.check(
            "job seen by the others",
            len(seen) == len(others),
            f"posted to {first.name}, seen by {seen}",
        )
        first.api.request("DELETE", "/loom/v1/jobs/demo")

        step(3, "the master of h1's edge switch is killed under traffic")
        kill_args = argparse.Namespace(
            stream_rate=1000.0, mib=4.0, iters=4, lead=1.0, settle=2.0, timeout=120.0
        )
        res = kill_once(c, kill_args, run_dir, 0)
        checks.check(
            "new masters within 1 s", res["remaster_s"] <= 1.0, f"{res['remaster_s'] * 1e3:.0f} ms"
        )
        checks.check(
            "no datagram lost",
            res["stream"]["lost"] == 0,
            f"{res['stream']['lost']} of {res['stream']['sent']}",
        )
        checks.check(
            "largest gap",
            True,
            f"{res['gap']['gap_ms']:.1f} ms (before the kill: {res['baseline']['gap_ms']:.1f} ms)",
        )
        checks.check(
            "all-reduce completed", res["collective"]["completed"], json.dumps(res["collective"])
        )
        checks.check("job kept after its instance died", res["job_intact"], res["victim"])

        step(4, "the killed instance is back")
        print(f"  (kill_once restarted {res['victim']})")
        show_shares(c)

        step(5, "etcd members die")
        before = c.masters()
        c.etcd.kill(1)
        time.sleep(3.0)
        checks.check("one etcd member down: nothing changes", c.masters() == before, "same masters")
        with Stream(c.net, "h5", "h12", run_dir / "streams", 1000.0, 9400, 43000) as stream:
            time.sleep(1.0)
            c.etcd.kill(2)
            time.sleep(3.0)
            try:
                c.live()[0].api.request(
                    "POST", "/loom/v1/jobs", job_request("late", "t", ips, "all_reduce")
                )
                checks.check("no quorum: changes refused", False, "accepted")
            except LoomApiError as exc:
                checks.check(
                    "no quorum: changes refused",
                    exc.status == 503,
                    f"HTTP {exc.status}: {exc.body.get('error')}",
                )
            c.etcd.restart(1)
            c.etcd.restart(2)
            time.sleep(2.0)
        trace = stream.trace
        assert trace is not None
        checks.check(
            "no quorum: the fabric forwards",
            trace.lost == 0,
            f"{trace.lost} of {trace.sent_count} lost",
        )
        rejoin_s = rejoin_ok(c)
        checks.check("quorum back: every switch mastered", rejoin_s is not None, f"{rejoin_s}")
    failed = [n for n, (ok, _) in checks.results.items() if not ok]
    summary = {
        "checks": {n: {"ok": ok, "detail": d} for n, (ok, d) in checks.results.items()},
        "failed": failed,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    passed = len(checks.results) - len(failed)
    print(f"\n{passed}/{len(checks.results)} checks passed; {run_dir / 'summary.json'}")
    return summary


def rejoin_ok(cluster: LoomCluster) -> float | None:
    try:
        return round(cluster.wait_balanced(30.0), 2)
    except TimeoutError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m mininet_scenarios.demo.cluster", description=(__doc__ or "").splitlines()[0]
    )
    ap.add_argument("--out", type=Path, default=Path("results/cluster-demo"))
    ap.add_argument("--etcd-port", type=int, default=21379)
    ap.add_argument("--tls", action="store_true", help="OpenFlow over TLS (certificates in --pki)")
    ap.add_argument("--plain-etcd", action="store_true", help="etcd over plain HTTP with no users")
    ap.add_argument("--pki", type=Path, default=Path("pki"), help="certificates (default: pki/)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    return 1 if run(args)["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
