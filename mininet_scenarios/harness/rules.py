"""Did a controller restart touch the switches? ``dump-flows``/``dump-groups``/
``dump-meters`` of every switch before and after, compared without counters. A rule present
in both dumps whose age did not grow by the time between them was deleted and re-added: a
gap the text alone would hide.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

OFCTL = ("ovs-ofctl", "-O", "OpenFlow13")

_VOLATILE = re.compile(r"\b(duration|n_packets|n_bytes|idle_age|hard_age)=[^,\s]*,?\s*")
_DURATION = re.compile(r"\bduration=([\d.]+)s")
_COOKIE = re.compile(r"\bcookie=(0x[0-9a-f]+)")


@dataclass
class SwitchDump:
    """A switch's flows (normalised text -> age in seconds when dumped), group and meter
    lines, and when the dump was taken (monotonic)."""

    flows: dict[str, float]
    groups: set[str]
    meters: set[str]
    at: float


def rule_snapshot(switches: Iterable[str]) -> dict[str, SwitchDump]:
    """``dump-flows``/``dump-groups``/``dump-meters`` of each switch, without counters."""
    out = {}
    for sw in switches:
        at = time.monotonic()
        flows: dict[str, float] = {}
        for line in _ofctl("dump-flows", sw).splitlines():
            line = line.strip()
            if not line or line.startswith(("OFPST_", "NXST_")):
                continue
            m = _DURATION.search(line)
            flows[_VOLATILE.sub("", line)] = float(m.group(1)) if m else 0.0
        groups = {
            line.strip()
            for line in _ofctl("dump-groups", sw).splitlines()
            if line.strip() and not line.strip().startswith("OFPST_")
        }
        meters = {
            " ".join(block.split())
            for block in re.split(r"\n(?=meter=)", _ofctl("dump-meters", sw))
            if block.strip().startswith("meter=")
        }
        out[sw] = SwitchDump(flows, groups, meters, at)
    return out


def _ofctl(cmd: str, sw: str) -> str:
    proc = subprocess.run([*OFCTL, cmd, sw], capture_output=True, text=True, timeout=30)
    if proc.returncode:
        raise RuntimeError(f"ovs-ofctl {cmd} {sw}: {proc.stderr.strip()}")
    return proc.stdout


def cookie_kind_of(rule: str) -> str:
    """Loom's rule kind from a dump line's cookie (``other`` for rules Loom did not write)."""
    from controller.model import cookie_kind

    m = _COOKIE.search(rule)
    kind = cookie_kind(int(m.group(1), 16)) if m else None
    return kind.name.lower() if kind is not None else "other"


@dataclass
class RuleDiff:
    """Rules that disappeared, appeared, or were deleted and re-added (same text, but
    younger than the time between the dumps allows), per switch; groups and meters that
    changed."""

    removed: dict[str, list[str]] = field(default_factory=dict)
    added: dict[str, list[str]] = field(default_factory=dict)
    readded: dict[str, list[str]] = field(default_factory=dict)
    groups_changed: dict[str, int] = field(default_factory=dict)
    meters_changed: dict[str, int] = field(default_factory=dict)
    flows_before: int = 0

    @property
    def unchanged(self) -> bool:
        return not (
            self.removed or self.added or self.readded or self.groups_changed or self.meters_changed
        )

    def by_kind(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        kinds = (("removed", self.removed), ("added", self.added), ("readded", self.readded))
        for what, per in kinds:
            for rules in per.values():
                for r in rules:
                    kind = cookie_kind_of(r)
                    out.setdefault(what, {})[kind] = out.setdefault(what, {}).get(kind, 0) + 1
        return out

    def summary(self) -> dict[str, Any]:
        def count(d: Mapping[str, Sequence[str]]) -> int:
            return sum(len(v) for v in d.values())

        kinds = (("removed", self.removed), ("added", self.added), ("re-added", self.readded))
        examples = [
            f"{what} {sw}: {rules[0]}"
            for what, per in kinds
            for sw, rules in sorted(per.items())[:2]
        ]
        return {
            "flows_before": self.flows_before,
            "unchanged": self.unchanged,
            "removed": count(self.removed),
            "added": count(self.added),
            "readded": count(self.readded),
            "groups_changed": sum(self.groups_changed.values()),
            "meters_changed": sum(self.meters_changed.values()),
            "by_kind": self.by_kind(),
            "examples": examples[:6],
        }


def compare_rules(
    before: Mapping[str, SwitchDump], after: Mapping[str, SwitchDump], slack: float = 1.0
) -> RuleDiff:
    """What changed between two :func:`rule_snapshot` s of the same switches. A rule in
    both whose age grew by less than the time between its two dumps minus ``slack``
    seconds (``duration`` is printed with ms resolution) was replaced."""
    diff = RuleDiff()
    for sw, b in before.items():
        a = after[sw]
        diff.flows_before += len(b.flows)
        removed = sorted(set(b.flows) - set(a.flows))
        added = sorted(set(a.flows) - set(b.flows))
        elapsed = a.at - b.at
        readded = sorted(
            r for r in set(a.flows) & set(b.flows) if a.flows[r] + slack < b.flows[r] + elapsed
        )
        if removed:
            diff.removed[sw] = removed
        if added:
            diff.added[sw] = added
        if readded:
            diff.readded[sw] = readded
        if b.groups != a.groups:
            diff.groups_changed[sw] = len(b.groups ^ a.groups)
        if b.meters != a.meters:
            diff.meters_changed[sw] = len(b.meters ^ a.meters)
    return diff
