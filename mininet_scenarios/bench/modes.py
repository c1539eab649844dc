"""What the collective benchmarks share around their runs: one network per mode, the
results document saved after every run (an interrupted benchmark keeps what it
measured), progress lines, and the report written whatever happens.

Used by :mod:`.collectives`, :mod:`.collectives_jobs` and :mod:`.rails`, each with its own
``run_mode`` and its report's ``figures``, ``table`` and ``plot``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol


class _Run(Protocol):
    @property
    def mode(self) -> str: ...


Figures = Callable[[Sequence[dict[str, Any]]], Any]
RunMode = Callable[[str, Sequence[Any], argparse.Namespace, dict[str, Any], dict[str, Any]], None]


def say(text: str) -> None:
    print(f"[bench] {time.strftime('%H:%M:%S')} {text}", flush=True)


def begin(
    name: str, argv: Sequence[str] | None, parse_args: Callable[[list[str]], argparse.Namespace]
) -> tuple[list[str], argparse.Namespace] | None:
    """The arguments as given and as parsed, logging on and ``args.out`` made; None, having
    said why, where not root (Mininet and Open vSwitch need it)."""
    used = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(used)
    if os.geteuid() != 0:
        print(f"{name}: needs root (Mininet, Open vSwitch)", file=sys.stderr)
        return None
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", datefmt="%X")
    args.out.mkdir(parents=True, exist_ok=True)
    return used, args


def save(doc: dict[str, Any], out: Path) -> None:
    """``results.json`` under ``out``, replaced whole (never half written)."""
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(out / "results.json")


def record_run(
    doc: dict[str, Any],
    record: dict[str, Any],
    figures: Figures,
    args: argparse.Namespace,
    progress: dict[str, Any],
    stack: Any,
    t0: float,
) -> None:
    """Add a finished run to the document (its wall time from ``t0``, whether the
    controller of ``stack`` is still alive), save it with fresh figures, say how far, and
    leave the fabric quiet for ``args.drain`` seconds."""
    record["wall_s"] = round(time.monotonic() - t0, 1)
    record["controller_alive"] = bool(stack.ctl and stack.ctl.alive())
    doc["runs"].append(record)
    doc["figures"] = figures(doc["runs"])
    save(doc, args.out)
    progress["done"] += 1
    left = (time.time() - progress["t0"]) / progress["done"]
    left *= progress["total"] - progress["done"]
    say(f"progress {progress['done']}/{progress['total']}, ~{left / 60:.0f} min left")
    time.sleep(args.drain)


def run_all(
    modes: Sequence[str],
    runs: Sequence[_Run],
    run_mode: RunMode,
    args: argparse.Namespace,
    doc: dict[str, Any],
    report: tuple[Figures, Callable[[dict[str, Any]], str], Callable[..., Path | None]],
) -> None:
    """Each mode's runs (``run_mode``: one network for all of them), modes in order; then,
    even after a failure, the document finished and saved, the table printed and saved
    as ``table.txt``, the plot drawn. ``report``: ``(figures, table, plot)``."""
    figures, table, plot = report
    progress = {"done": 0, "total": len(runs), "t0": time.time()}
    t0 = time.monotonic()
    try:
        for mode in modes:
            mine = [r for r in runs if r.mode == mode]
            if mine:
                run_mode(mode, mine, args, doc, progress)
    finally:
        doc["finished"] = dt.datetime.now().astimezone().isoformat(timespec="seconds")
        doc["wall_s"] = round(time.monotonic() - t0, 1)
        doc["figures"] = figures(doc["runs"])
        save(doc, args.out)
        text = table(doc)
        (args.out / "table.txt").write_text(text + "\n")
        png = plot(doc, args.out)
        print(text, flush=True)
        say(
            f"done in {doc['wall_s'] / 60:.1f} min; results: {args.out / 'results.json'}"
            + (f", figure: {png}" if png else "")
        )
