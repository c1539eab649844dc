"""The fuzz benchmark: >= N generated cases per input kind (policy files, REST requests,
frames) through the same checkers as ``tests/fuzz``, with the ``bench`` profile.

    .venv/bin/python -m tests.fuzz.bench [--cases 10000] [--kinds policy,rest,frames] [--seed N]

Failures are recorded, not raised, so every case runs: per kind it prints the cases
tried, each distinct failure (exception type and first line) with its smallest input,
the slowest case and p50/p99 times; results/fuzz/results.json and results/fuzz/times.png.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import given, seed, settings
from hypothesis import strategies as st

from tests.fuzz import common
from tests.fuzz.budget import register_profiles

KINDS = ("policy", "rest", "frames")
OUT = Path("results/fuzz")
ROUND = 1000  # examples per Hypothesis run, each run with its own seed (--seed + round)


@dataclass
class KindResult:
    kind: str
    cases: int = 0
    examples: int = 0
    seconds: float = 0.0
    times: list[float] = field(default_factory=list)
    slowest: tuple[float, str] = (0.0, "")
    failures: dict[str, dict[str, Any]] = field(default_factory=dict)

    def fail(self, exc: BaseException, example: Any) -> None:
        lines = str(exc).strip().splitlines() or [""]
        where = traceback.extract_tb(exc.__traceback__)
        site = next(
            (f"{f.filename}:{f.lineno}" for f in reversed(where) if "/tests/" not in f.filename),
            f"{where[-1].filename}:{where[-1].lineno}" if where else "?",
        )
        key = f"{type(exc).__name__}: {re.sub(r'[0-9]+', 'N', lines[0])[:160]}"
        shown = repr(example)
        old = self.failures.get(key)
        if old is None or len(shown) < len(old["example"]):
            self.failures[key] = {"count": (old or {}).get("count", 0), "example": shown,
                                  "where": site}  # fmt: skip
        self.failures[key]["count"] += 1

    def summary(self) -> dict[str, Any]:
        ts = sorted(self.times)

        def q(p: float) -> float:
            return ts[min(len(ts) - 1, int(p * len(ts)))] if ts else 0.0

        return {
            "kind": self.kind,
            "cases": self.cases,
            "examples": self.examples,
            "seconds": round(self.seconds, 1),
            "p50_ms": round(q(0.5) * 1e3, 3),
            "p99_ms": round(q(0.99) * 1e3, 3),
            "max_ms": round(self.slowest[0] * 1e3, 3),
            "slowest_case": self.slowest[1][:2000],
            "failures": self.failures,
        }


def runner(kind: str, tmp: Path) -> tuple[st.SearchStrategy[Any], Callable[[Any], object]]:
    """The strategy and the check of one kind (the same ones the tests use)."""
    if kind == "policy":
        from tests.fuzz.checks_policy import check_policy_file
        from tests.fuzz.strategies_policy import policy_cases

        return policy_cases(), lambda case: check_policy_file(case.data, tmp)
    if kind == "rest":
        from tests.fuzz.checks_rest import RestWorld, check_rest
        from tests.fuzz.strategies_rest import rest_cases

        world = RestWorld(tmp)
        return rest_cases(), lambda case: check_rest(world, case)
    from tests.fuzz.checks_frames import FrameWorld, check_forwarding, check_frame
    from tests.fuzz.strategies_frames import frame_batches

    fworld = FrameWorld()

    def frames_batch(batch: list[Any]) -> None:
        fworld.reset_if_dirty()
        for case in batch:
            check_frame(fworld, case)
        check_forwarding(fworld)

    return frame_batches, frames_batch


def run_kind(kind: str, cases: int, base_seed: int, tmp: Path) -> KindResult:
    result = KindResult(kind)
    strategy, check = runner(kind, tmp)
    current: list[Any] = [None]
    last = [time.monotonic(), 0]

    def on_case(k: str, seconds: float) -> None:
        if k != kind:
            return
        result.cases += 1
        result.times.append(seconds)
        if seconds > result.slowest[0]:
            result.slowest = (seconds, repr(current[0]))
        now = time.monotonic()
        if result.cases - last[1] >= 1000 or now - last[0] >= 10:
            print(f"  {kind}: {result.cases} cases, {len(result.failures)} distinct failures",
                  flush=True)  # fmt: skip
            last[0], last[1] = now, result.cases

    def body(example: Any) -> None:
        current[0] = example
        result.examples += 1
        try:
            check(example)
        except Exception as exc:  # recorded: the benchmark runs every case
            result.fail(exc, example)

    common.observe(on_case)
    start = time.monotonic()
    try:
        round_ = 0
        while result.cases < cases:  # an example may hold several cases (a frame batch)
            todo = cases - result.cases
            per_example = result.cases / result.examples if result.examples else 0
            examples = min(todo, 500) if not per_example else max(1, int(todo / per_example))
            # Hypothesis keeps every choice of a run in memory (gigabytes by 10,000 examples of
            # kilobyte inputs, and GC pauses that look like slow cases): rounds of <= 1,000.
            examples = min(examples, ROUND)
            test = settings(max_examples=examples)(given(strategy)(body))
            before = result.cases
            seed(base_seed + round_)(test)()
            round_ += 1
            if result.cases == before:
                break
    finally:
        common.unobserve(on_case)
    result.seconds = time.monotonic() - start
    return result


def plot(results: list[KindResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in results:
        ts = sorted(t * 1e3 for t in r.times)
        if ts:
            ax.plot(
                ts, [(i + 1) / len(ts) for i in range(len(ts))], label=f"{r.kind} (n={len(ts)})"
            )
    ax.axvline(1000, color="red", linestyle="--", label="1 s bound")
    ax.set_xscale("log")
    ax.set_xlabel("time per case (ms, log scale)")
    ax.set_ylabel("share of cases (CDF)")
    ax.set_title("Loom fuzz benchmark: time to answer each hostile input")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests.fuzz.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases per kind (10000)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="policy,rest,frames")
    parser.add_argument("--seed", type=int, default=None, help="seed (default: random)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = set(kinds) - set(KINDS)
    if unknown:
        parser.error(f"unknown kinds {sorted(unknown)}; expected {','.join(KINDS)}")
    base = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    register_profiles()
    settings.load_profile("bench")
    print(f"fuzz bench: {args.cases} cases per kind, kinds {','.join(kinds)}, --seed {base}")
    results = []
    with tempfile.TemporaryDirectory(prefix="loom-fuzz-bench-") as d:
        for kind in kinds:
            print(f"{kind}: running", flush=True)
            r = run_kind(kind, args.cases, base, Path(d))
            results.append(r)
            s = r.summary()
            print(f"{kind}: {s['cases']} cases ({s['examples']} examples) in {s['seconds']} s; "
                  f"p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms, slowest {s['max_ms']} ms; "
                  f"{sum(f['count'] for f in r.failures.values())} failing examples, "
                  f"{len(r.failures)} distinct")  # fmt: skip
            print(f"  slowest case: {s['slowest_case'][:400]}")
            for key, f in r.failures.items():
                print(f"  FAIL x{f['count']} at {f['where']}: {key}")
                print(f"    smallest: {f['example'][:600]}")
    args.out.mkdir(parents=True, exist_ok=True)
    doc = {"seed": base, "cases_per_kind": args.cases, "kinds": [r.summary() for r in results]}
    (args.out / "results.json").write_text(json.dumps(doc, indent=1))
    plot(results, args.out / "times.png")
    print(f"wrote {args.out / 'results.json'} and {args.out / 'times.png'}")
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
