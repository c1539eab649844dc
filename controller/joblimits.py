"""The bounds of a job's priority and weight: checked by the job model and by the
launcher's options alike. Standard library only, so the launcher stays installable on a
GPU node without the controller's packages."""

from __future__ import annotations

MAX_PRIORITY = 1000
MAX_WEIGHT = 100
