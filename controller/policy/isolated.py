"""Check a policy file in a child process, with a hard time and memory bound.

The controller runs one event loop for every switch; parsing YAML and validating a
large policy is CPU work that would hold that loop for as long as it takes. Reloads
therefore check the file in a child Python (``python -m controller.policy.isolated
FILE``), which prints the validated policy as JSON (exit 0) or its problems (exit 1).
Waiting for the child yields to the event loop (under ``ryu-manager`` ``subprocess``
is eventlet's green one), and a child that runs past ``timeout`` or its memory limit
is killed and the file refused. The parent re-reads only the JSON of a policy that
validated, with pydantic's JSON parser.

The child runs at the lowest CPU priority (``nice``), so a busy controller host gives it
what is left; and it is started without a ``preexec_fn``, so Python spawns it with
``vfork``: a ``fork`` would let the controller share its pages copy-on-write with a
child that, starved at low priority before its ``exec``, makes every page the
controller writes meanwhile a page fault (hundreds of milliseconds on a busy host).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from controller.policy.loader import PolicyError, PolicyIssue, load_policy
from controller.policy.schema import Policy

TIMEOUT_S = 10.0
MEMORY_BYTES = 2 * 1024**3
_REPO = str(Path(__file__).resolve().parents[2])


def load_isolated(
    path: str | Path,
    timeout: float = TIMEOUT_S,
    read: Callable[[bytes], Policy] = Policy.model_validate_json,
) -> Policy:
    """``load_policy`` in a child process; raises ``PolicyError`` as it would, and
    also when the check takes longer than ``timeout`` seconds or dies. ``read`` turns
    the child's JSON into a ``Policy`` (the controller runs it off its event loop)."""
    file = str(path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([_REPO, os.environ.get("PYTHONPATH", "")]))
    try:
        done = subprocess.run(
            ["nice", "-n", "19", sys.executable, "-m", "controller.policy.isolated", file],
            capture_output=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _refused(file, f"checking it took longer than {timeout:g} s; refused") from None
    except OSError as exc:
        raise _refused(file, f"cannot start the policy checker: {exc}") from None
    if done.returncode == 0:
        try:
            return read(done.stdout)
        except ValueError:
            raise _refused(file, "the policy checker answered nonsense") from None
    if done.returncode == 1:
        try:
            issues = [PolicyIssue(**i) for i in json.loads(done.stdout)]
        except (ValueError, TypeError):
            issues = []
        if issues:
            raise PolicyError(issues)
    tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
    raise _refused(file, f"the policy checker failed (exit {done.returncode}: {tail[0][:200]})")


def _refused(file: str, message: str) -> PolicyError:
    return PolicyError([PolicyIssue(file, 1, "(file)", message)])


def main(argv: list[str]) -> int:
    """The child: validate ``argv[0]``, print the policy (exit 0) or its problems (1)."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    try:
        policy = load_policy(argv[0])
    except PolicyError as err:
        sys.stdout.write(json.dumps([vars(i) for i in err.issues]))
        return 1
    sys.stdout.write(policy.model_dump_json())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
