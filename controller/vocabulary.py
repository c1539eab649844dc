"""The words the policy file and the REST API share: names, job patterns, ring directions
and path policies. Kept free of heavy imports, so that the child process that checks a
policy file (``controller.policy.isolated``) starts in a fraction of a second."""

from __future__ import annotations

import re

PATTERNS = {
    "ring": "ring",
    "ring_allreduce": "ring",
    "allreduce": "ring",
    "all_reduce": "ring",
    "all_gather": "ring",
    "allgather": "ring",
    "reduce_scatter": "ring",
    "all_to_all": "all_to_all",
    "alltoall": "all_to_all",
}
DIRECTIONS = ("forward", "backward", "both")
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9_.-]{0,62}[a-z0-9])?$")
POLICIES = ("adaptive", "minimal", "valiant")  # dragonfly path choice
