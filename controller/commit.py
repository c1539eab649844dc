"""The commit path: plans computed in full beforehand go to the rule store, which sends
their differences, so an error while planning leaves what was sent and what the store
believes in agreement.

On the way every plan runs through the commit filters (``controller.hooks.CommitFilter``:
fast failover's guard), then what switch sync lets be written (``controller.sync``);
optional rules that would overflow a switch's flow table are refused. The source that
owns a changed plan hears that it was sent (``PlanSource.committed``). Switches read
back after a reconnect are released (what no plan claimed goes) once their routes are in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from controller.hooks import CommitFilter, PlanSource
from controller.limits import Limits
from controller.model import Messages, merge
from controller.owners import Owner, OwnerKind, Plan, Plans
from controller.rulestore import RuleStore
from controller.sync import SwitchSync
from controller.topology import Topology

# Rules a switch may go without (forwarding falls back to its routes): where a switch's
# profile caps flow entries, these are refused rather than overflow its tables.
OPTIONAL = (OwnerKind.FLOW, OwnerKind.JOB, OwnerKind.QUIET)


class Committer:
    """Sends plans through ``store``, as ``sync`` allows, filtered by ``filters``."""

    def __init__(
        self,
        store: RuleStore,
        sync: SwitchSync,
        sources: Iterable[PlanSource],
        filters: Sequence[CommitFilter],
        topo: Topology,
        events: Counter[str],
    ) -> None:
        self.store, self.sync, self.filters, self.topo = store, sync, filters, topo
        self.events = events
        self._owned = {kind: source for source in sources for kind in source.kinds}
        self._releasing: set[int] = set()  # read-back switches to release once routed

    def commit(self, plans: Plans, limits: Limits) -> Messages:
        """Apply ``plans``; the messages that do it, in a safe order."""
        out: Messages = {}
        if not (self.sync.reading or self.sync.holding):  # what is sent as is and was: done
            held = self.store.parts
            plans = {o: p for o, p in plans.items() if o[0].follows_routes or held.get(o) is not p}
        staged = {o: self.sync.writable(self._filtered(o, p)) for o, p in plans.items()}
        for owner in [o for o in staged if o[0] in OPTIONAL]:
            if not self.store.fits(owner, staged[owner], lambda dpid: limits.of(dpid).flows):
                del staged[owner]  # what it had stays (a pinned flow keeps its old path)
                self.events[f"limit_refused.{owner[0]}"] += 1
        for owner, plan in staged.items():  # failover groups first: routes point at them
            for commit_filter in self.filters:
                first = commit_filter.first_pass(owner, plan, self.store.parts.get(owner, {}))
                if first is not None:
                    merge(out, self.store.replace(owner, first))
        for owner, plan in staged.items():
            same = self.store.parts.get(owner) is plan
            merge(out, self.store.replace(owner, plan))
            source = self._owned.get(owner[0])
            if source is not None and not same:
                source.committed(self.topo, owner, plan)
        return self.store.ordered(out)

    def _filtered(self, owner: Owner, plan: Plan) -> Plan:
        for commit_filter in self.filters:
            plan = commit_filter.guard(owner, plan)
        return plan

    def release(self, settled: Iterable[int], queued: Iterable[Owner]) -> Messages:
        """Drop what no plan claimed on ``settled`` read-back switches (and those settled
        before), once their routes are planned (not ``queued``)."""
        self._releasing.update(d for d in settled if d in self.store.adopted)
        routing = {o[1] for o in queued if o[0] is OwnerKind.ROUTE}
        out: Messages = {}
        for dpid in sorted(d for d in self._releasing if d not in routing):
            self._releasing.discard(dpid)
            if dpid in self.store.adopted:
                out[dpid] = self.store.release(dpid)
        return out
