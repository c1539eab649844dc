"""The policy loader's invariants, for one input: ``parse_policy`` on text,
``load_policy`` on a file holding the raw bytes, and ``loom-check`` (``cli.main``) on it.

Each answers within the bound and raises nothing but ``PolicyError``, whose every issue
names the file and a line within it (>= 1); the CLI returns 0 or 1 and agrees with the
loader, naming the file on stderr when it rejects.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from controller.policy import cli
from controller.policy.loader import PolicyError, load_policy, parse_policy
from controller.policy.schema import Policy
from tests.fuzz.common import assert_bounded, record, short, stopwatch

KIND = "policy"
_BREAKS = ("\r\n", "\n", "\r", "\x85", "\u2028", "\u2029")


def max_line(data: bytes | str) -> int:
    """An upper bound on the lines a YAML reader can see in ``data`` (every break counted
    in every plausible decoding), plus one: PyYAML puts the end of the input on the line
    after the last one, where a syntax error at the end (an unclosed ``{``) is reported."""
    texts: list[str] = []
    if isinstance(data, str):
        texts.append(data)
    else:
        for codec in ("utf-8", "utf-16", "utf-32", "latin-1"):
            with contextlib.suppress(UnicodeDecodeError, UnicodeError):
                texts.append(data.decode(codec, "replace"))
    return 2 + max((sum(t.count(b) for b in _BREAKS) for t in texts), default=0)


def _assert_located(err: PolicyError, file: str, data: bytes | str) -> None:
    assert isinstance(err.issues, list) and err.issues, f"PolicyError without issues: {err!r}"
    top = max_line(data)
    for issue in err.issues:
        assert issue.file == file, f"issue names {issue.file!r}, not the file {file!r}: {issue}"
        assert isinstance(issue.line, int) and 1 <= issue.line <= top, (
            f"issue line {issue.line} outside 1..{top}: {short(str(issue))}"
        )
        assert isinstance(issue.key, str) and issue.key, f"issue without a key: {issue!r}"
        assert isinstance(issue.message, str) and issue.message, f"issue without text: {issue!r}"
    str(err)  # the CLI prints it


def check_policy_text(text: str, file: str = "fuzz.yaml") -> float:
    """``parse_policy(text, file)``: a Policy or a located PolicyError, within the bound."""
    result: Policy | PolicyError
    with stopwatch() as t:
        try:
            result = parse_policy(text, file)
        except PolicyError as err:
            result = err
    record(KIND, t[0])
    assert_bounded(KIND, t[0], f"parse_policy of {len(text)} chars")
    if isinstance(result, PolicyError):
        _assert_located(result, file, text)
    else:
        assert isinstance(result, Policy), short(result)
    return t[0]


def check_policy_file(data: bytes, directory: Path, name: str = "fuzz-policy.yaml") -> float:
    """``load_policy`` and ``loom-check`` on a file holding ``data``; returns the slower
    of the two."""
    path = directory / name
    path.write_bytes(data)
    loaded: Policy | PolicyError
    with stopwatch() as t:
        try:
            loaded = load_policy(path)
        except PolicyError as err:
            loaded = err
    record(KIND, t[0])
    assert_bounded(KIND, t[0], f"load_policy of {len(data)} bytes")
    if isinstance(loaded, PolicyError):
        _assert_located(loaded, str(path), data)
    else:
        assert isinstance(loaded, Policy), short(loaded)
    out, errors = io.StringIO(), io.StringIO()
    with stopwatch() as c, contextlib.redirect_stdout(out), contextlib.redirect_stderr(errors):
        status = cli.main([str(path)])
    assert_bounded(KIND, c[0], f"loom-check of {len(data)} bytes")
    want = 1 if isinstance(loaded, PolicyError) else 0
    assert status == want, f"loom-check returned {status!r}, the loader says {want}"
    if want:
        text = errors.getvalue()
        assert str(path) in text, f"loom-check's stderr does not name the file: {short(text)}"
        assert "Traceback" not in text, text
    return max(t[0], c[0])
