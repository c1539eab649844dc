"""The training command as ``loom-run``'s child: what it is told of its rank, and how
signals reach it.

The child learns its place from ``LOOM_*`` variables and from ``{loom_rank}``-style
tokens in its arguments (so ``torchrun --node-rank {loom_rank}`` needs no wrapper
script). SIGTERM and SIGINT are forwarded to it, so a scheduler's cancel stops the
training and still lets ``loom-run`` delete the job afterwards.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any

FORWARDED = (signal.SIGTERM, signal.SIGINT)
Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


@dataclass(frozen=True)
class Placement:
    """This node's place in the job, as Loom advised it."""

    job: str
    hosts: tuple[str, ...]  # every node's address in rank order
    rank: int

    @property
    def master(self) -> str:
        return self.hosts[0]

    def environment(self) -> dict[str, str]:
        return {
            "LOOM_JOB": self.job,
            "LOOM_RANK": str(self.rank),
            "LOOM_WORLD_SIZE": str(len(self.hosts)),
            "LOOM_HOSTS": ",".join(self.hosts),
            "LOOM_MASTER": self.master,
        }

    def substitute(self, args: Sequence[str]) -> list[str]:
        """Arguments with ``{loom_rank}``, ``{loom_world_size}``, ``{loom_master}`` and
        ``{loom_job}`` replaced; any other brace is left alone (not ``str.format``)."""
        tokens = {
            "{loom_rank}": str(self.rank),
            "{loom_world_size}": str(len(self.hosts)),
            "{loom_master}": self.master,
            "{loom_job}": self.job,
        }
        out = []
        for arg in args:
            for token, value in tokens.items():
                arg = arg.replace(token, value)
            out.append(arg)
        return out


class Interrupted(Exception):
    """SIGTERM or SIGINT before the command started."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_status(returncode: int) -> int:
    """A child's return code as a shell reports it: 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


class Supervisor:
    """Holds SIGTERM and SIGINT while in use: before the command starts they raise
    ``Interrupted`` (so the launcher can undo what it did), afterwards they are forwarded."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self._previous: dict[signal.Signals, Handler] = {}

    def __enter__(self) -> Supervisor:
        for sig in FORWARDED:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.child is None:
            raise Interrupted(signum)
        if self.child.poll() is None:
            self.child.send_signal(signum)

    def run(self, command: Sequence[str], environ: Mapping[str, str]) -> int:
        """Run ``command`` to its end; its exit status (127/126 if it cannot start)."""
        try:
            self.child = subprocess.Popen(list(command), env=dict(environ))
        except OSError as exc:  # as a shell says it: 127 not found, 126 not runnable
            status = 127 if isinstance(exc, FileNotFoundError) else 126
            raise CommandError(status, f"cannot run {command[0]!r}: {exc.strerror}") from None
        return exit_status(self.child.wait())


class CommandError(Exception):
    """The command could not be started; ``status`` is what a shell would exit with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
