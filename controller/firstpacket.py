"""New flows at their first packet: admitted under a bound, pinned onto the least-loaded
path, and counted as load on that path until their rate is measured.

Elephant placement runs every ``te_interval`` and needs a flow's measured rate, so a flow
that starts on a busy path would stay there a round or more (a job's step is often
shorter). Placing each new flow at once, on the equal-cost path whose links the counters
and the flows placed just before it load least, spreads a burst of new flows from the
start; each such young flow is assumed to fill its path (``YOUNG_SHARE``) until the port
counters show what it does.
"""

from __future__ import annotations

import logging
from collections import Counter

from controller.ackstreams import AckStreams
from controller.flows import FlowKey, FlowTable
from controller.leastloaded import least_loaded_path
from controller.linkloads import LinkLoads
from controller.model import PortRef
from controller.placement import Path, is_minimal
from controller.routing import Routes

log = logging.getLogger("loom.te")
# What a flow placed at its first packet is assumed to add to each link of its path, as a
# share of the link, until its rate is first measured (then the port counters show it):
YOUNG_SHARE = 1.0  # any new flow may be an elephant
ACK_SHARE = 0.05  # the reverse of a tracked TCP flow: its ACK stream, about 1/20 of the data


class FirstPacketPlacer:
    def __init__(
        self,
        flows: FlowTable,
        paths: dict[FlowKey, Path],
        acks: AckStreams,
        bounds: tuple[int, int],
        events: Counter[str],
    ) -> None:
        self.flows = flows
        self.paths = paths  # shared with elephant placement: every pinned flow's path
        self.acks = acks
        self.max_flows, self.flows_per_host = bounds
        self.events = events
        self.young: dict[FlowKey, tuple[Path, float]] = {}  # placed, rate not yet measured
        self.young_load: dict[PortRef, float] = {}  # per link: the young flows' shares
        self._pairs: dict[tuple[str, str], FlowKey] = {}  # host pair -> its young flow

    def full(self, key: FlowKey, hosts: int) -> bool:
        """Whether ``key`` would go over the tracked flows' bound: ``max_flows``, or
        ``flows_per_host`` a host on a larger fabric (a host with a bulk transfer opens
        a control connection too; iperf3 does). The ACK stream of a tracked TCP flow
        (its first packet comes from the receiver) counts apart, against a bound of its
        own: counted together, the ACK streams of half the flows would keep the other
        half's data untracked."""
        limit = max(self.max_flows, self.flows_per_host * hosts)
        acks = len(self.acks.streams)
        if self.acks.is_stream(key):
            return acks >= limit
        return len(self.flows.flows) - acks >= limit

    def place(self, key: FlowKey, src: int, dst: int, routes: Routes, links: LinkLoads) -> None:
        """The equal-cost path whose busiest link is least loaded (measured share plus the
        young flows placed on it since), then the least loaded in sum, over every such
        path (``least_loaded_path``); ties go by the flow's id, so equal paths share new
        flows evenly and repeatably. A flow between two hosts that already have a young
        flow joins it (``_pair_path``); an ACK stream takes its data's way back
        (``AckStreams.way_back``)."""
        young = self.young_load
        acks = self.acks.is_stream(key)
        back = self.acks.way_back(key, routes, src, dst) if acks else None
        path = back or self._pair_path(key, routes, src, dst)
        if path is None:
            found = least_loaded_path(
                routes, src, dst, lambda link: links.share(link) + young.get(link, 0.0), key.ident
            )
            if found is None or not found[1]:
                return  # one way only (or none): the default route is that way
            path = found[0]
        share = ACK_SHARE if acks else YOUNG_SHARE
        self.paths[key] = path
        log.debug("placed %s on %s", key, path)
        self.events["flows_placed"] += 1
        self.young[key] = (path, share)
        for link in path:
            young[link] = young.get(link, 0.0) + share
        if not acks:
            self._pairs[(key.ipv4_src, key.ipv4_dst)] = key

    def _pair_path(self, key: FlowKey, routes: Routes, src: int, dst: int) -> Path | None:
        """The path of the young flow between the same two hosts, which hands its assumed
        share over to ``key``. Both hosts' own links bound such flows together, so until
        measured they are one link's demand at most, and a fabric path of the same rate
        carries them together at no cost. Counted apart, a short connection just before a
        bulk one (iperf3's control connection, an RPC before a transfer) would count as a
        second elephant and push the next host pair's bulk flow onto the first's path.
        A mate already measured as a mouse is joined as well (its share is its measured
        rate): on a busy host the bulk connection can follow its control connection by
        longer than the mate stays young."""
        mate = self._pairs.get((key.ipv4_src, key.ipv4_dst))
        if mate is None:
            return None
        held = self.young.get(mate)
        if held is None:
            grown = self.flows.flows.get(mate)
            path = self.paths.get(mate) if grown is not None and not grown.elephant else None
            return path if path is not None and is_minimal(routes, path, src, dst) else None
        if not is_minimal(routes, held[0], src, dst):
            return None
        path, share = held
        self.young[mate] = (path, 0.0)
        for link in path:
            self.young_load[link] -= share
        return path

    def grown_up(self, key: FlowKey, gone: bool = False) -> None:
        """A placed flow's rate is measured (or it is ``gone``): the counters show it now.
        A measured flow stays its host pair's mate (``_pair_path``) until it is gone."""
        placed = self.young.pop(key, None)
        if gone and self._pairs.get((key.ipv4_src, key.ipv4_dst)) == key:
            del self._pairs[(key.ipv4_src, key.ipv4_dst)]
        if placed is None:
            return
        if not self.young:
            self.young_load.clear()  # (no drift from the running sums)
            return
        path, share = placed
        for link in path:
            self.young_load[link] = self.young_load.get(link, 0.0) - share
