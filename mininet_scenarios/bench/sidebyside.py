"""Equipped and plain fabrics side by side in one run (``docs/benchmarks.md``, "Plain and
equipped fabrics"): one benchmark run twice in one invocation, on the equipped fabric and
then on the plain one, with the same arguments, and one table of both.

    python -m mininet_scenarios.bench.sidebyside patterns|collectives|collectives-jobs
        [ARGS ...] [--out results/BENCH-both]

``ARGS`` are the benchmark's own (``--plain`` and ``--out`` excepted: set here). Each
fabric's run is the benchmark's whole run, with its own non-blocking (or link-rate)
denominator measured on that fabric, in ``OUT/equipped`` and ``OUT/plain``; the combined
figures go to ``OUT/side_by_side.json`` and ``side_by_side.txt``. Wrap it in
``flock /tmp/loom-emulation.lock`` where other emulations may run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

KINDS = ("equipped", "plain")
Figures = dict[str, dict[str, float | None]]  # row (pattern or scenario) -> mode -> figure


def pattern_figures(doc: dict[str, Any]) -> Figures:
    """``pattern -> mode -> median ratio to nonblocking`` of a patterns run."""
    return {
        pattern: {mode: s.get("median") for mode, s in modes.items() if mode != "nonblocking"}
        for pattern, modes in doc.get("summary", {}).items()
    }


def collective_figures(doc: dict[str, Any]) -> Figures:
    from mininet_scenarios.bench.collectives_report import figures

    return figures(doc["runs"])


def jobs_figures(doc: dict[str, Any]) -> Figures:
    """Of a collectives-jobs run: each mix's worst job (busbw in the mix / alone) and the
    churn's worst long-job iteration / median before, per mode."""
    from mininet_scenarios.bench.collectives_jobs_report import figures

    figs = figures(doc["runs"])
    out: Figures = {
        f"{mix} worst job mix/alone": {mode: f["min"] for mode, f in modes.items()}
        for mix, modes in figs["mixes"].items()
    }
    if figs["churn"]:
        out["churn worst iter/before"] = {
            mode: c["worst_over_before"] for mode, c in figs["churn"].items()
        }
    return out


BENCHES: dict[str, tuple[str, Callable[[dict[str, Any]], Figures]]] = {
    "patterns": ("mininet_scenarios.bench.patterns", pattern_figures),
    "collectives": ("mininet_scenarios.bench.collectives", collective_figures),
    "collectives-jobs": ("mininet_scenarios.bench.collectives_jobs", jobs_figures),
}


def combine(both: dict[str, Figures]) -> tuple[dict[str, Any], str]:
    """Rows of every fabric's figures, a column per (mode, fabric)."""
    rows = list(dict.fromkeys(r for figs in both.values() for r in figs))
    modes = list(dict.fromkeys(m for figs in both.values() for r in figs.values() for m in r))
    table = {
        row: {
            mode: {kind: both.get(kind, {}).get(row, {}).get(mode) for kind in both}
            for mode in modes
        }
        for row in rows
    }
    head = ["", *(f"{m} {k}" for m in modes for k in both)]
    lines = [head]
    for row in rows:
        cells = [table[row][m][k] for m in modes for k in both]
        lines.append([row, *("-" if v is None else f"{v:.2f}" for v in cells)])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    text = "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines
    )
    return table, text


def split_out(args: list[str], default: Path) -> tuple[list[str], Path]:
    rest, out = [], default
    it = iter(args)
    for a in it:
        if a == "--out":
            out = Path(next(it))
        elif a.startswith("--out="):
            out = Path(a.split("=", 1)[1])
        elif a != "--plain":
            rest.append(a)
    return rest, out


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in BENCHES:
        print(f"usage: sidebyside {{{'|'.join(BENCHES)}}} [ARGS ...]", file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    module_name, read = BENCHES[name]
    rest, out = split_out(rest, Path("results") / f"{name}-both")
    module = __import__(module_name, fromlist=["main"])
    codes, both = {}, {}
    for kind in KINDS:
        print(f"[sidebyside] {name} on the {kind} fabric ...", flush=True)
        codes[kind] = module.main(
            [*rest, "--out", str(out / kind), *(["--plain"] * (kind == "plain"))]
        )
        results = out / kind / "results.json"
        if results.exists():
            both[kind] = read(json.loads(results.read_text()))
    table, text = combine(both)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": name, "args": rest, "exit_codes": codes, "figures": table}
    (out / "side_by_side.json").write_text(json.dumps(doc, indent=1))
    (out / "side_by_side.txt").write_text(text + "\n")
    print(f"[sidebyside] {name}, equipped and plain, one run:\n{text}", flush=True)
    return max(codes.values(), default=1)


if __name__ == "__main__":
    sys.exit(main())
