"""One rank of a real ``torch.distributed`` (gloo) collective, run inside a Mininet host.

``python -m mininet_scenarios.workloads.collectives.worker --rank R --world N --master IP
--port 29500 --op all_reduce --mib 16 --iters 3 --warmup 1 --ifname hX-eth0 --out FILE``

:func:`~mininet_scenarios.workloads.collectives.runner.run_collective` starts one of these per
host. Why each choice:

* ``GLOO_SOCKET_IFNAME`` is set before gloo starts: without it gloo binds the address its
  hostname resolves to (127.0.0.1 in a Mininet host) and the ranks never meet.
* One compute thread (``torch.set_num_threads(1)`` and the ``OMP``/``MKL`` variables): 16
  ranks share 2 cores with ``ovs-vswitchd``, which does all the switching; a rank that spins
  threads steals cycles from the fabric it is measuring.
* ``--mib`` is the *per-rank buffer* of nccl-tests: all-reduce reduces a tensor of that size;
  all-gather fills an output of that size (each rank contributes ``1/N`` of it); all-to-all
  sends ``1/N`` of it to every rank. So the bytes each rank must put on its link are
  ``2(N-1)/N`` (all-reduce) or ``(N-1)/N`` (the others) of ``--mib``, and busbw is
  comparable to the link rate for every op (see :mod:`.model`).
* A barrier before every timed iteration, so an iteration measures the collective and not
  the skew of the ranks' start.
* After the last iteration, the bytes each TCP connection of this process sent and received
  (``ss -tin``: ``bytes_acked``/``bytes_received``, per peer address) are written to the
  output too: that is how the runner tells which way a ring really sends (gloo's tcp
  transport keeps one connection per pair of ranks), without trusting the library's docs.

The output is one JSON document (written atomically) with the per-iteration seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

OPS = ("all_reduce", "all_gather", "all_to_all")
FLOAT_BYTES = 4
_SS_PEER_RE = re.compile(r"^\S+\s+\d+\s+\d+\s+(\S+):(\d+)\s+(\S+):(\d+)")
_SS_BYTES_RE = re.compile(r"\b(bytes_acked|bytes_received|bytes_retrans):(\d+)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--master", required=True, help="rank 0's IPv4 address (rendezvous)")
    p.add_argument("--port", type=int, default=29500, help="rendezvous TCP port on rank 0")
    p.add_argument("--op", choices=OPS, default="all_reduce")
    p.add_argument("--mib", type=float, default=16.0, help="per-rank buffer, MiB")
    p.add_argument("--iters", type=int, default=3, help="timed iterations")
    p.add_argument("--warmup", type=int, default=1, help="untimed iterations first")
    p.add_argument("--ifname", required=True, help="the host interface gloo must use")
    p.add_argument("--out", required=True, type=Path, help="JSON result file")
    p.add_argument("--timeout", type=float, default=900.0, help="gloo operation timeout, s")
    args = p.parse_args(argv)
    if not 0 <= args.rank < args.world or args.world < 2:
        p.error(f"need 0 <= rank < world and world >= 2, got rank {args.rank} world {args.world}")
    if args.iters < 1 or args.warmup < 0 or args.mib <= 0:
        p.error("need iters >= 1, warmup >= 0 and mib > 0")
    return args


def elements(mib: float, world: int) -> int:
    """Float32 elements in the per-rank buffer, rounded down to a multiple of ``world``
    (all-gather and all-to-all split it into ``world`` equal chunks)."""
    n = int(mib * 2**20) // FLOAT_BYTES
    return max(world, n - n % world)


def tcp_bytes_by_peer(text: str, pid: int | None = None) -> dict[str, dict[str, int]]:
    """``peer IP -> {"sent": bytes_acked, "received": bytes_received, "retrans":
    bytes_retrans}`` summed over the connections in ``ss -tinH`` output (each socket: one
    address line, one info line). Retransmitted bytes show loss the HTB counters cannot
    (e.g. a full socket buffer inside ovs-vswitchd). With ``pid`` (``ss -p`` output), only
    that process's sockets count: a background flow in the same host is not the rank's."""
    out: dict[str, dict[str, int]] = {}
    peer: str | None = None
    for line in text.splitlines():
        m = _SS_PEER_RE.match(line.strip())
        if m:
            mine = pid is None or f"pid={pid}," in line
            peer = m.group(3).strip("[]") if mine else None
            continue
        if peer is None:
            continue
        counts = dict(_SS_BYTES_RE.findall(line))
        if counts:
            entry = out.setdefault(peer, {"sent": 0, "received": 0, "retrans": 0})
            entry["sent"] += int(counts.get("bytes_acked", 0))
            entry["received"] += int(counts.get("bytes_received", 0))
            entry["retrans"] += int(counts.get("bytes_retrans", 0))
            peer = None
    return out


def _tcp_snapshot() -> dict[str, dict[str, int]]:
    try:
        proc = subprocess.run(
            ["ss", "-tinpH", "state", "established"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    # `ss state established` drops the State column; put a placeholder back for the regex.
    lines = [f"ESTAB {ln}" if ln[:1].isdigit() else ln for ln in proc.stdout.splitlines()]
    return tcp_bytes_by_peer("\n".join(lines), pid=os.getpid())


def _write(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)


def say(rank: int, msg: str) -> None:
    print(f"[rank {rank} {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ["GLOO_SOCKET_IFNAME"] = args.ifname
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    doc: dict[str, Any] = {
        "rank": args.rank,
        "world": args.world,
        "op": args.op,
        "mib": args.mib,
        "ifname": args.ifname,
        "hostname": socket.gethostname(),
        "started": time.time(),
    }
    t0 = time.monotonic()
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    doc["torch"] = torch.__version__
    doc["import_seconds"] = time.monotonic() - t0
    say(args.rank, f"torch {torch.__version__} imported in {doc['import_seconds']:.1f} s")
    t1 = time.monotonic()
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{args.master}:{args.port}",
        rank=args.rank,
        world_size=args.world,
        timeout=timedelta(seconds=args.timeout),
    )
    doc["init_seconds"] = time.monotonic() - t1
    say(args.rank, f"gloo group of {args.world} up in {doc['init_seconds']:.1f} s")

    n = elements(args.mib, args.world)
    chunk = n // args.world
    buf = torch.ones(n, dtype=torch.float32)
    if args.op == "all_reduce":

        def step() -> None:
            dist.all_reduce(buf)

    elif args.op == "all_gather":
        mine = torch.full((chunk,), float(args.rank), dtype=torch.float32)
        outs = [buf[r * chunk : (r + 1) * chunk] for r in range(args.world)]

        def step() -> None:
            dist.all_gather(outs, mine)

    else:
        recv = torch.empty_like(buf)

        def step() -> None:
            dist.all_to_all_single(recv, buf)

    doc["bytes"] = n * FLOAT_BYTES  # the per-rank buffer (nccl-tests' "size")
    doc["elements"] = n
    before = _tcp_snapshot()
    seconds: list[float] = []
    for i in range(args.warmup + args.iters):
        if args.op == "all_reduce":
            buf.fill_(1.0)  # so the result is exactly N after every iteration
        dist.barrier()
        start = time.monotonic()
        step()
        took = time.monotonic() - start
        kind = "warmup" if i < args.warmup else "iter"
        if i == args.warmup:
            doc["timed_start"] = time.time() - took
        if i >= args.warmup:
            seconds.append(took)
        say(args.rank, f"{kind} {i + 1}/{args.warmup + args.iters}: {took:.2f} s")
    if args.op == "all_reduce":
        # Every rank held ones: the sum is N everywhere (a wrong collective shows here).
        doc["check_ok"] = bool(torch.all(buf == float(args.world)))
    elif args.op == "all_gather":
        doc["check_ok"] = all(bool(torch.all(o == float(r))) for r, o in enumerate(outs))
    else:
        doc["check_ok"] = bool(torch.all(recv == 1.0))
    doc["timed_end"] = time.time()
    after = _tcp_snapshot()
    doc["seconds"] = seconds
    doc["tcp_by_peer"] = {
        ip: {k: v - before.get(ip, {}).get(k, 0) for k, v in c.items()} for ip, c in after.items()
    }
    dist.barrier()  # nobody tears its connections down while a peer still reads
    dist.destroy_process_group()
    doc["finished"] = time.time()
    _write(args.out, doc)
    say(args.rank, f"done: {' '.join(f'{s:.2f}' for s in seconds)} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
