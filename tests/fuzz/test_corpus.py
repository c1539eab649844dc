"""The checked-in corpus of the nastiest inputs (tests/fuzz/corpus/README.md), run every
time with the same checks as the properties and a 1 s bound per input; each policy file
also through ``python -m controller.policy.cli`` in a subprocess (10 s timeout)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from controller.policy.loader import PolicyError, load_policy
from tests.fuzz.checks_frames import FrameCase, FrameWorld, check_forwarding, check_frame
from tests.fuzz.checks_policy import check_policy_file
from tests.fuzz.checks_rest import RestCase, RestWorld, check_rest
from tests.fuzz.strategies_rest import cached_sized_body

CORPUS = Path(__file__).parent / "corpus"
ROOT = Path(__file__).resolve().parents[2]
POLICIES = sorted((CORPUS / "policy").glob("*.yaml"))
REQUESTS: list[dict[str, Any]] = json.loads((CORPUS / "rest" / "requests.json").read_text())


def _frames() -> list[tuple[str, str, str]]:
    out, comment = [], ""
    for line in (CORPUS / "frames" / "frames.txt").read_text().splitlines():
        if line.startswith("#"):
            comment = line[1:].strip()
        elif line.strip():
            where, _, data = line.partition(" ")
            out.append((comment, where, data.strip()))
    return out


FRAMES = _frames()


def test_the_corpus_is_there() -> None:
    assert len(POLICIES) >= 40 and len(REQUESTS) >= 40 and len(FRAMES) >= 30
    assert all(p.stat().st_size < 20 * 1024 for p in POLICIES)


@pytest.mark.parametrize("path", POLICIES, ids=[p.name for p in POLICIES])
def test_policy_corpus_file_is_rejected_with_a_location(path: Path, tmp_path: Path) -> None:
    valid = path.name.startswith("valid-")
    check_policy_file(path.read_bytes(), tmp_path, path.name)
    if not valid:
        with pytest.raises(PolicyError):
            load_policy(tmp_path / path.name)


def _loom_check(path: Path) -> subprocess.CompletedProcess[str] | None:
    """``python -m controller.policy.cli FILE``; None when it ran over 10 s."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "controller.policy.cli", str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=10,
        )
    except subprocess.TimeoutExpired:
        return None


@pytest.fixture(scope="module")
def loom_check_runs() -> Iterator[dict[Path, Future[subprocess.CompletedProcess[str] | None]]]:
    """Every corpus file through loom-check, started at once (each takes ~0.5 s)."""
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        yield {path: pool.submit(_loom_check, path) for path in POLICIES}


@pytest.mark.parametrize("path", POLICIES, ids=[p.name for p in POLICIES])
def test_policy_corpus_file_through_loom_check(
    path: Path, loom_check_runs: dict[Path, Future[subprocess.CompletedProcess[str] | None]]
) -> None:
    done = loom_check_runs[path].result()
    assert done is not None, f"loom-check {path.name} ran over 10 s"
    want = 0 if path.name.startswith("valid-") else 1
    assert done.returncode == want, done.stderr[-2000:] or done.stdout[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    if want:
        assert str(path) in done.stderr


@pytest.fixture(scope="module")
def rest_world(tmp_path_factory: pytest.TempPathFactory) -> RestWorld:
    return RestWorld(tmp_path_factory.mktemp("corpus-rest"))


def _body(entry: dict[str, Any]) -> bytes:
    gen = entry.get("body_gen")
    if isinstance(gen, dict):
        return str(gen["repeat"]).encode() * int(gen["times"])
    if gen == "deep-closed-5000":
        return b"[" * 5000 + b"]" * 5000
    if isinstance(gen, str):
        return cached_sized_body(gen)
    return base64.b64decode(entry["body_b64"])


@pytest.mark.parametrize("entry", REQUESTS, ids=[str(r["name"]) for r in REQUESTS])
def test_rest_corpus_request_is_refused_cleanly(
    rest_world: RestWorld, entry: dict[str, Any]
) -> None:
    case = RestCase(
        f"corpus:{entry['name']}",
        str(entry["method"]),
        str(entry["path"]),
        {str(k): str(v) for k, v in entry["query"].items()},
        _body(entry),
        str(entry["auth"]),
    )
    check_rest(rest_world, case)


@pytest.fixture(scope="module")
def frame_world() -> FrameWorld:
    return FrameWorld()


def _cases(world: FrameWorld, where: str, data: str) -> list[FrameCase]:
    if data.startswith("genuine:"):
        _, role, index, *edit = data.split(":")
        ports = world.fabric_ports if role == "fabric" else world.host_ports
        origin = world.all_ports.index(ports[int(index)])
        edits: tuple[tuple[str, int, bytes], ...] = ()
        if edit:
            op, _, pos = edit[0].partition("@")
            length = len(world.resolve(FrameCase("", b"", genuine=True, origin=origin))[2])
            byte = int(pos) % length
            edits = (("flip", byte, b"\xff"),) if op == "flip" else (("cut", byte, b""),)
        at = {"loop-same-port": "same-port", "loop-same-switch": "same-switch"}.get(where, where)
        return [FrameCase(data, b"", at, 0, True, origin, edits)]
    raw = bytes.fromhex(data)
    wheres = ("host", "fabric") if where == "both" else (where,)
    return [FrameCase(data[:20], raw, w, 3) for w in wheres]


@pytest.mark.parametrize("entry", FRAMES, ids=[f[0][:60] for f in FRAMES])
def test_frame_corpus_changes_no_forwarding(
    frame_world: FrameWorld, entry: tuple[str, str, str]
) -> None:
    frame_world.reset_if_dirty()
    for case in _cases(frame_world, entry[1], entry[2]):
        check_frame(frame_world, case)
    check_forwarding(frame_world)
