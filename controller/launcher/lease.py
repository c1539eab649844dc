"""Keeping a job's lease alive while its command runs.

A job registered with a lease is deleted by Loom unless renewed within the lease; the
renewals come from ``loom-run`` itself, so a launcher that dies (SIGKILL, a node lost)
stops renewing and Loom frees the job's paths with no epilog needed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from controller.launcher.client import LoomClient, LoomError


class LeaseKeeper:
    """Renews one job's lease every third of it, from a daemon thread."""

    def __init__(
        self, client: LoomClient, job: str, lease: float, say: Callable[[str], None]
    ) -> None:
        self.client = client
        self.job = job
        self.interval = lease / 3
        self.say = say
        self.renewals = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_until_stopped, daemon=True)

    def start(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.client.timeout + 1)

    def _renew_until_stopped(self) -> None:
        failing = False
        while not self._stop.wait(self.interval):
            try:
                self.client.renew(self.job)
            except LoomError as exc:
                if exc.status == 404:
                    self.say(f"job {self.job} is gone from Loom (expired or deleted): {exc}")
                    return
                if not failing:  # once per outage, not once per attempt
                    self.say(f"renewing the lease of job {self.job}: {exc}; retrying")
                failing = True
                continue
            if failing:
                self.say(f"lease of job {self.job} renewed again")
            failing = False
            self.renewals += 1
