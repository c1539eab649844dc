"""One rank of a real ``torch.distributed`` (gloo) collective, run inside a Mininet host.

``python -m mininet_scenarios.workloads.collectives.worker --rank R --world N --master IP
--port 29500 --op all_reduce --mib 16 --iters 3 --warmup 1 --ifname hX-eth0 --out FILE
[--go FILE ...] [--progress FILE] [--tcp-every-iter] [--max-iters 10000]``

:func:`~mininet_scenarios.workloads.collectives.runner.run_collective` starts one of these per
host. Why each choice:

* ``GLOO_SOCKET_IFNAME`` is set before gloo starts: without it gloo binds the address its
  hostname resolves to (127.0.0.1 in a Mininet host) and the ranks never meet.
* One compute thread (``torch.set_num_threads(1)`` and the ``OMP``/``MKL`` variables): 16
  ranks share 2 cores with ``ovs-vswitchd``, which does all the switching; a rank that spins
  threads steals cycles from the fabric it is measuring.
* ``--mib`` is the *per-rank buffer* of nccl-tests: all-reduce reduces a tensor of that size;
  all-gather fills an output of that size (each rank contributes ``1/N`` of it);
  reduce-scatter reduces an input of that size and keeps ``1/N`` of it; all-to-all sends
  ``1/N`` of it to every rank. So the bytes each rank must put on its link are ``2(N-1)/N``
  (all-reduce) or ``(N-1)/N`` (the others) of ``--mib``, and busbw is comparable to the
  link rate for every op (see :mod:`.model`).
* Reduce-scatter is ``dist.reduce_scatter_single`` (``reduce_scatter_tensor`` before torch
  2.13 named it so). gloo runs it, but not as a reduce-scatter: in torch 2.13.0+cpu each
  rank sends ``2(N-1)/N`` of the buffer, all-reduce's bytes, on all-reduce's ring (rank i
  to i-1), and keeps its chunk of the sum; measured on 4 loopback ranks (1.50 buffer per
  rank, as all-reduce; all-gather 0.75) and in the fabric (``wire_factor`` of the
  benchmark's runs). Its busbw by the nccl-tests convention is therefore at most half the
  link: the figure measures gloo's algorithm, not the fabric, and is reported as it is.
* A barrier before every timed iteration, so an iteration measures the collective and not
  the skew of the ranks' start.
* After the last iteration, the bytes each TCP connection of this process sent and received
  (``ss -tin``: ``bytes_acked``/``bytes_received``, per peer address) are written to the
  output too: that is how the runner tells which way a ring really sends (gloo's tcp
  transport keeps one connection per pair of ranks), without trusting the library's docs.

Phases (``--go FILE``, repeatable; for several jobs at once, see :mod:`.multijob`): the rank
starts, joins its group and then waits, idle, for each ``FILE`` in turn; on it, the job runs
a phase: the warm-up and at least ``--iters`` timed iterations, then more until
``FILE.stop`` exists (rank 0 looks after each timed iteration and broadcasts the answer, so
every rank stops at the same one; create ``FILE.stop`` first for exactly ``--iters``). One
process group serves every phase, so a job run alone and then beside others keeps its TCP
connections, hence its ECMP hashes: a ratio of the two phases is contention, not hashing
luck. ``--progress FILE``: rank 0 rewrites it after joining and after every iteration
(phase, iterations done), so a driver can act between iterations. ``--tcp-every-iter``:
the retransmitted bytes of each iteration (``ss``, outside the timed part).

The output is one JSON document (written atomically) with the per-iteration seconds (and
wall-clock start and end), per phase under ``phases``; the top-level ``seconds``,
``timed_start``, ``timed_end`` and ``tcp_by_peer`` are the last phase's.
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
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
GO_POLL = 0.05  # seconds between looks for a phase's go file
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
    p.add_argument(
        "--go",
        type=Path,
        action="append",
        default=[],
        help="run a phase when this file exists (repeatable: one phase each, in order);"
        " the phase goes on after --iters until FILE.stop exists",
    )
    p.add_argument("--progress", type=Path, help="rank 0 rewrites this JSON every iteration")
    p.add_argument(
        "--tcp-every-iter", action="store_true", help="retransmitted bytes of every iteration"
    )
    p.add_argument("--max-iters", type=int, default=10000, help="timed iterations per phase, most")
    args = p.parse_args(argv)
    if not 0 <= args.rank < args.world or args.world < 2:
        p.error(f"need 0 <= rank < world and world >= 2, got rank {args.rank} world {args.world}")
    if args.iters < 1 or args.warmup < 0 or args.mib <= 0 or args.max_iters < args.iters:
        p.error("need iters >= 1, warmup >= 0, mib > 0 and max-iters >= iters")
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


def stop_file(go: Path) -> Path:
    """The file that ends the phase started by ``go`` after its ``--iters``."""
    return go.with_name(go.name + ".stop")


def _wait_for_file(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear in {timeout:.0f} s")
        time.sleep(GO_POLL)


def _retrans(snapshot: dict[str, dict[str, int]]) -> int:
    return sum(c.get("retrans", 0) for c in snapshot.values())


Op = tuple[Callable[[], None], Callable[[], None], Callable[[], bool]]  # step, reset, check


def make_op(op: str, n: int, world: int, rank: int) -> Op:
    """``(step, reset, check)`` of ``op`` on a per-rank buffer of ``n`` float32 elements:
    one collective; what to do before each; whether the last result is right."""
    import torch
    import torch.distributed as dist

    chunk = n // world
    buf = torch.ones(n, dtype=torch.float32)
    out = torch.empty(chunk if op == "reduce_scatter" else n, dtype=torch.float32)
    mine = torch.full((chunk,), float(rank), dtype=torch.float32)
    gathered = [buf[r * chunk : (r + 1) * chunk] for r in range(world)]
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

    def step() -> None:
        if op == "all_reduce":
            dist.all_reduce(buf)
        elif op == "all_gather":
            dist.all_gather(gathered, mine)
        elif op == "reduce_scatter":
            scatter(out, buf)
        else:
            dist.all_to_all_single(out, buf)

    def reset() -> None:
        if op == "all_reduce":
            buf.fill_(1.0)  # so the result is exactly N after every iteration

    def check() -> bool:
        if op == "all_reduce":  # every rank held ones: the sum is N everywhere
            return bool(torch.all(buf == float(world)))
        if op == "all_gather":
            return all(bool(torch.all(o == float(r))) for r, o in enumerate(gathered))
        if op == "reduce_scatter":  # this rank's chunk of the sum of ones
            return bool(torch.all(out == float(world)))
        return bool(torch.all(out == 1.0))

    return step, reset, check


def run_phase(
    args: argparse.Namespace, phase: int, go: Path | None, op: Op, progress: Path | None
) -> dict[str, Any]:
    """The warm-up and the timed iterations of one phase (see the module docstring)."""
    import torch
    import torch.distributed as dist

    step, reset, check = op
    stop = stop_file(go) if go is not None else None
    flag = torch.zeros(1, dtype=torch.int32)
    before = _tcp_snapshot()
    last = _retrans(before)
    seconds: list[float] = []
    walls: list[list[float]] = []
    retrans: list[int] = []
    out: dict[str, Any] = {"phase": phase, "go": str(go) if go else None, "warmup": args.warmup}
    if go is not None:
        out["go_seen"] = time.time()
    i = 0
    while True:
        reset()
        dist.barrier()
        wall, start = time.time(), time.monotonic()
        step()
        took = time.monotonic() - start
        walls.append([wall, wall + took])
        timed = i >= args.warmup
        if timed:
            seconds.append(took)
            if len(seconds) == 1:
                out["timed_start"] = wall
        if args.tcp_every_iter:
            now = _retrans(_tcp_snapshot())
            retrans.append(now - last)
            last = now
        i += 1
        label = f"phase {phase} " if go is not None else ""
        kind = "iter" if timed else "warmup"
        say(args.rank, f"{label}{kind} {i}/{args.warmup + args.iters}: {took:.2f} s")
        if progress is not None:
            _write(
                progress,
                {"ready": True, "phase": phase, "iterations": i, "timed": len(seconds)},
            )
        if len(seconds) < args.iters:
            continue
        if stop is None or len(seconds) >= args.max_iters:
            break
        flag[0] = int(args.rank == 0 and stop.exists())
        dist.broadcast(flag, 0)
        if int(flag[0]):
            break
    out["check_ok"] = check()
    out["timed_end"] = time.time()
    after = _tcp_snapshot()
    out["seconds"] = seconds
    out["iter_wall"] = walls  # every iteration, warm-up first: [start, end] wall clock
    if args.tcp_every_iter:
        out["retrans_iter"] = retrans
    out["tcp_by_peer"] = {
        ip: {k: v - before.get(ip, {}).get(k, 0) for k, v in c.items()} for ip, c in after.items()
    }
    return out


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
    op = make_op(args.op, n, args.world, args.rank)
    doc["bytes"] = n * FLOAT_BYTES  # the per-rank buffer (nccl-tests' "size")
    doc["elements"] = n
    if args.go:
        dist.barrier()  # "ready" means every rank has joined, not only rank 0
        doc["joined_seconds"] = time.monotonic() - t1
    progress = args.progress if args.rank == 0 else None
    if progress is not None:
        _write(progress, {"ready": True, "phase": -1, "iterations": 0, "timed": 0})
    phases = []
    for phase, go in enumerate(args.go or [None]):
        if go is not None:
            _wait_for_file(go, args.timeout)
        phases.append(run_phase(args, phase, go, op, progress))
        if progress is not None:
            done = phases[-1]["seconds"]
            _write(
                progress,
                {
                    "ready": True,
                    "phase": phase,
                    "phase_done": phase,
                    "timed": len(done),
                    "seconds": done,
                },
            )
    last = phases[-1]
    doc["phases"] = phases
    doc["check_ok"] = all(p["check_ok"] for p in phases)
    doc["seconds"] = last["seconds"]
    doc["timed_start"] = last["timed_start"]
    doc["timed_end"] = last["timed_end"]
    doc["tcp_by_peer"] = last["tcp_by_peer"]
    dist.barrier()  # nobody tears its connections down while a peer still reads
    dist.destroy_process_group()
    doc["finished"] = time.time()
    _write(args.out, doc)
    say(args.rank, f"done: {' '.join(f'{s:.2f}' for p in phases for s in p['seconds'])} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
