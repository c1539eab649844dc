"""The tenant policy file: schema, loader with located errors, and ``loom-check``."""

from controller.policy.loader import PolicyError, PolicyIssue, load_policy, parse_policy
from controller.policy.schema import Policy

__all__ = ["Policy", "PolicyError", "PolicyIssue", "load_policy", "parse_policy"]
