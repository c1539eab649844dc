"""Reloading the policy file: validate first, keep the old policy on any error.

``PolicyManager`` is shared by every way a reload starts (the file changed, SIGHUP, the
REST call) so they behave the same: a file that does not validate changes nothing in
the fabric, and its problems are kept for the API, the log and the metrics.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from controller.conductor import Conductor
from controller.model import Messages
from controller.policy.loader import PolicyError, load_policy
from controller.policy.schema import Policy

log = logging.getLogger("loom.policy")
DEFAULT_POLICY = "/etc/loom/policy.yaml"


@dataclass
class PolicyStatus:
    path: str | None
    loaded: bool = False
    ok: bool = True
    errors: list[str] = field(default_factory=list)
    reloads_ok: int = 0
    reloads_failed: int = 0
    mtime: float | None = None
    rules_changed: int = 0


class PolicyManager:
    """``load`` reads and validates a file: ``load_policy`` in this process by default;
    the controller passes ``isolated.load_isolated`` so a reload never holds its event
    loop."""

    def __init__(
        self, fabric: Conductor, path: str | None, load: Callable[[str], Policy] = load_policy
    ) -> None:
        self.fabric = fabric
        self.status = PolicyStatus(path)
        self.load = load

    @staticmethod
    def path_from_env(env: os._Environ[str] | dict[str, str] = os.environ) -> str | None:
        """LOOM_POLICY names the file; without it, /etc/loom/policy.yaml if it exists; else
        no policy (an open fabric)."""
        path = env.get("LOOM_POLICY")
        if path:
            return path
        return DEFAULT_POLICY if Path(DEFAULT_POLICY).exists() else None

    def reload(self, now: float, path: str | None = None) -> Messages:
        """Load and apply the file (or ``path``: a cluster's published policy); on error
        keep what is in force and record why."""
        st = self.status
        source = path or st.path
        if source is None:
            return {}
        if path is None:
            try:
                st.mtime = Path(source).stat().st_mtime
            except OSError:
                st.mtime = None
        try:
            policy = self.load(source)
        except PolicyError as err:
            st.ok, st.errors = False, [str(i) for i in err.issues]
            st.reloads_failed += 1
            log.error("policy %s rejected; the running policy stays in force:\n%s", source, err)
            return {}
        messages = self.fabric.apply_policy(now, policy)
        st.loaded, st.ok, st.errors = True, True, []
        st.reloads_ok += 1
        st.rules_changed = sum(len(m) for m in messages.values())
        log.info(
            "policy %s in force: %d tenants, %d jobs; %d rule changes sent",
            source,
            len(policy.tenants),
            len(policy.jobs),
            st.rules_changed,
        )
        return messages

    def changed_on_disk(self) -> bool:
        if self.status.path is None:
            return False
        try:
            return Path(self.status.path).stat().st_mtime != self.status.mtime
        except OSError:
            return False

    def describe(self) -> dict[str, object]:
        st, view = self.status, self.fabric.inputs.tenants
        tenants = []
        if view.policy is not None:
            for t in view.policy.tenants:
                members = [h for h in self.fabric.topo.hosts.values() if h.tenant == t.name]
                tenants.append(
                    {
                        "name": t.name,
                        "id": view.id_of(t.name),
                        "declared_hosts": len(t.hosts),
                        "learned_hosts": len(members),
                        "traffic_classes": t.traffic_classes,
                        "bandwidth_mbps": t.bandwidth_mbps,
                        "tokens": [token.name for token in t.tokens],
                    }
                )
        return {
            "file": st.path,
            "enforcing": view.enforcing,
            "in_force": st.loaded,
            "last_reload_ok": st.ok,
            "errors": st.errors,
            "reloads_ok": st.reloads_ok,
            "reloads_failed": st.reloads_failed,
            "last_rule_changes": st.rules_changed,
            "tenants": tenants,
            "unassigned_hosts": view.policy.fabric.unassigned_hosts if view.policy else "allow",
        }
