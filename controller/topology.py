"""The learned fabric: switches, ports, links (from LLDP) and hosts (from ARP).

Nothing here is configured: the graph is what the switches report. A link is a
directed observation "an LLDP frame sent on (a, pa) arrived on (b, pb)"; it lives while
both ports are up and frames keep arriving within the timeout. Any port that has
carried LLDP is a fabric port and never hosts a host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import networkx as nx

from controller.model import MAX_PHYSICAL_PORT, OFPP_LOCAL, PortDesc, PortRef

GRAPH_LOG_KEPT = 64  # graph changes remembered for ``changes_since``
# Switches changed at once from which the graph is built afresh over several calls
# (``graph_ready``) rather than relinked in place in one (about 0.25 ms a switch at k=48).
GRAPH_REBUILD_AT = 256
EARLY_LLDP = 5.0  # seconds an LLDP heard on a port believed down waits for its PortStatus
MAX_EARLY = 65536  # ... and how many such frames are kept at most


@dataclass(frozen=True)
class Link:
    src: PortRef
    dst: PortRef
    last_seen: float
    sent: float = 0.0  # when the frame that last showed it was sent (0: not known)


@dataclass(frozen=True)
class Host:
    mac: str
    ip: str | None
    dpid: int
    port: int
    last_seen: float
    tenant: str = ""


@dataclass
class Switch:
    dpid: int
    ports: dict[int, PortDesc] = field(default_factory=dict)

    def live_ports(self) -> list[int]:
        return sorted(p for p, d in self.ports.items() if d.up)

    @property
    def name(self) -> str:
        """The switch's own name (its LOCAL port's, e.g. an OVS bridge), else its dpid."""
        local = self.ports.get(OFPP_LOCAL)
        return local.name if local is not None and local.name else f"{self.dpid:016x}"


class Topology:
    """Mutable learned state with small, explicit update methods.

    Each update returns whether the routed graph changed, so the caller knows when to
    recompute paths.
    """

    def __init__(self) -> None:
        self.switches: dict[int, Switch] = {}
        self.links: dict[PortRef, Link] = {}
        self.hosts: dict[str, Host] = {}
        self.fabric_ports: set[PortRef] = set()
        # Indexes for questions asked per packet (a fabric holds tens of thousands of
        # hosts): rebuilt when ports change; host indexes are hints checked on use.
        self._edge: dict[int, list[int]] = {}
        self._mac_at: dict[PortRef, str] = {}
        self._mac_of_ip: dict[str, str] = {}
        self._macs_on: dict[int, set[str]] = {}
        self._silent: dict[int, set[int]] = {}  # edge ports no host spoke from, per switch
        self._unheard: set[int] = set()  # ... switches whose entry is to be found again
        # The live switch graph, kept up to date switch by switch when asked for: a link
        # event on a fabric of 110,592 links rebuilds the out-links of its two switches,
        # not the graph. ``version`` counts the changes, ``_log`` says which switches
        # each changed (None: rebuilt), so a consumer redoes only what they touched.
        self._graph: nx.MultiDiGraph | None = None
        self._stale: set[int] = set()  # switches whose out-links changed since the graph
        self._building: nx.MultiDiGraph | None = None  # a fresh graph built over calls
        self._regraph = False  # switches came or went: the next graph is built afresh
        self.version = 0
        self._log: list[tuple[int, frozenset[int] | None]] = []
        # Bumped when switches come or go or two switches are first seen linked: what
        # dragonfly groups are inferred from (a failed link, or one back, changes neither)
        self.shape = 0
        # per switch, bumped when its ports or fabric ports change (what skeletons follow)
        self.port_stamps: dict[int, int] = {}
        self._fabric_of: dict[int, set[int]] = {}  # fabric ports per switch
        self._into: dict[PortRef, set[PortRef]] = {}  # far end -> links ending there
        # per switch, bumped when a host there comes, goes or changes (not when it refreshes)
        self.host_stamps: dict[int, int] = {}
        self._host_switches: frozenset[int] | None = None
        self._pairs: set[tuple[int, int]] = set()
        # LLDP heard on a port believed down (its PortStatus up not in yet): port -> frame
        self._early: dict[PortRef, tuple[PortRef, PortRef, float]] = {}
        self._away: dict[int, list[Host]] = {}  # hosts of switches that went, until back
        # per switch, the latest send time of the LLDP read from it: how far the controller
        # has read that switch's connection (frames from all its neighbours share it)
        self.heard_at: dict[int, float] = {}
        # No link was last seen before this (a lower bound: links are only ever seen
        # again later, added now or removed), so expiry need not walk every link per tick.
        self._oldest_seen = float("inf")

    # -- switches and ports -------------------------------------------------
    def add_switch(self, dpid: int, ports: list[PortDesc]) -> None:
        self.shape += dpid not in self.switches
        self._regraph |= dpid not in self.switches
        self.switches[dpid] = Switch(dpid, {p.port_no: p for p in ports})
        self._ports_changed(dpid)
        self._stale.add(dpid)  # and its neighbours: links into a port now down go
        for g in (self._graph, self._building):
            if g is not None and dpid in g:
                self._stale.update(g.predecessors(dpid))
        for host in self._away.pop(dpid, []):  # back (say, rebooted): so are its hosts
            if host.mac not in self.hosts:
                self.learn_host(host.last_seen, host.mac, host.ip, dpid, host.port, host.tenant)

    def remove_switch(self, dpid: int) -> bool:
        """Forget a switch, its links (both directions) and its hosts (kept aside: a
        switch that comes back has them again, where they were, unless they moved)."""
        switch = self.switches.pop(dpid, None)
        if switch is None:
            return False
        self.shape += 1
        self._regraph = True
        self._pairs = {p for p in self._pairs if dpid not in p}
        self._ports_changed(dpid)
        self._stale.add(dpid)
        ends = [(dpid, p) for p in sorted(set(switch.ports) | self._fabric_of.get(dpid, set()))]
        dead = {ref for ref in ends if ref in self.links}
        dead.update(src for ref in ends for src in self._into.get(ref, ()))
        for ref in sorted(dead):
            self._unlink(ref)
        self._away[dpid] = [h for h in self.hosts.values() if h.dpid == dpid]
        for host in self._away[dpid]:
            del self.hosts[host.mac]
            self.host_changed(dpid)
        return True

    def port_changed(
        self, dpid: int, desc: PortDesc, deleted: bool = False, now: float | None = None
    ) -> bool:
        """Record a PortStatus; a port going down takes its links down at once. A port
        coming up takes the link whose LLDP it heard, up to ``EARLY_LLDP`` s before, while
        still believed down (the two ends' PortStatus race their LLDP)."""
        switch = self.switches.get(dpid)
        if switch is None:
            return False
        if deleted:
            switch.ports.pop(desc.port_no, None)
        else:
            switch.ports[desc.port_no] = desc
        self._ports_changed(dpid)
        self._stale.add(dpid)
        early = self._early.pop((dpid, desc.port_no), None)
        if deleted or not desc.up:
            return self._drop_links_at((dpid, desc.port_no))
        if early is not None and now is not None and now - early[2] <= EARLY_LLDP:
            return self.link_seen(now, early[0], early[1])
        return False

    def reported_bps(self, ref: PortRef) -> float:
        """The speed a switch reports for its port, in bits/s (0: none)."""
        switch = self.switches.get(ref[0])
        desc = switch.ports.get(ref[1]) if switch else None
        return desc.speed_kbps * 1e3 if desc else 0.0

    def port_up(self, ref: PortRef) -> bool:
        switch = self.switches.get(ref[0])
        desc = switch.ports.get(ref[1]) if switch else None
        return bool(desc and desc.up)

    # -- links ----------------------------------------------------------------
    def link_seen(self, now: float, src: PortRef, dst: PortRef, sent: float = 0.0) -> bool:
        """Record an LLDP observation; True when it adds or moves a link. A claim on a
        port where a host lives, or from a port to itself, is refused: only a host
        replaying frames it was sent could make one. So is a link from a switch to itself
        (a looped cable or a replay): it carries nothing a route could use."""
        if src[0] not in self.switches or dst[0] not in self.switches or src[0] == dst[0]:
            return False
        self.heard_at[dst[0]] = max(self.heard_at.get(dst[0], 0.0), sent)
        if max(src[1], dst[1]) > MAX_PHYSICAL_PORT:  # LOCAL, CONTROLLER...: no cable there
            return False
        if not (self.port_up(src) and self.port_up(dst)):
            if len(self._early) >= MAX_EARLY:
                self._early = {p: e for p, e in self._early.items() if now - e[2] <= EARLY_LLDP}
            for ref in (src, dst):
                if not self.port_up(ref) and len(self._early) < MAX_EARLY:
                    self._early[ref] = (src, dst, now)
            return False
        if self.host_on(src) is not None or self.host_on(dst) is not None:
            return False
        old = self.links.get(src)
        self.links[src] = Link(src, dst, now, sent)
        self._oldest_seen = min(self._oldest_seen, now)
        if old is None or old.dst != dst:
            self._stale.add(src[0])
            if old is not None:
                self._into.get(old.dst, set()).discard(src)
            self._into.setdefault(dst, set()).add(src)
            pair = (min(src[0], dst[0]), max(src[0], dst[0]))
            if pair not in self._pairs:
                self._pairs.add(pair)
                self.shape += 1
        for ref in (src, dst):
            if ref not in self.fabric_ports:
                self._became_fabric(ref)
        return not (old is not None and old.dst == dst)

    def expire_links(
        self,
        now: float,
        timeout: float,
        receiving: set[PortRef] | Callable[[], set[PortRef]] | None = None,
        asked: Callable[[Link], bool] | None = None,
    ) -> list[Link]:
        """Drop links whose LLDP stopped arriving. A link whose far end is still
        ``receiving`` traffic is alive whatever LLDP says: under congestion the frames
        can queue behind data for longer than the timeout. (``receiving`` may be a
        function: asked only when some link is past its timeout.) ``asked(link)``: whether
        LLDP that should have shown the link again went out and had time to be read back;
        a link nobody asked about is kept, silent or not (a controller too busy to send
        LLDP, or to read what came back, learns nothing from hearing none)."""
        if now - self._oldest_seen <= timeout:  # no link can be past it yet
            return []
        old = [
            link
            for link in self.links.values()
            if now - link.last_seen > timeout and (asked is None or asked(link))
        ]
        if callable(receiving):
            receiving = receiving() if old else None
        dead = []
        for link in old:
            if receiving and link.dst in receiving:
                self.links[link.src] = replace(link, last_seen=now)
            else:
                dead.append(link)
                self._unlink(link.src)
        self._oldest_seen = min((link.last_seen for link in self.links.values()), default=now)
        return dead

    def excuse(self, now: float, seconds: float) -> None:
        """Every link counts as seen now: the controller was not there to send or hear
        LLDP (see ``controller.cadence.Away``); a link that did go meanwhile took its
        port down (PortStatus) or stays silent for a timeout from now."""
        for src, link in list(self.links.items()):
            self.links[src] = replace(link, last_seen=now)
        self._oldest_seen = now if self.links else self._oldest_seen

    def ends_at(self, ref: PortRef) -> dict[int, frozenset[int]]:
        """The ports at both ends of the links at ``ref``, per switch."""
        refs = {ref, *self._into.get(ref, set())}
        if ref in self.links:
            refs.add(self.links[ref].dst)
        out: dict[int, set[int]] = {}
        for dpid, port in refs:
            out.setdefault(dpid, set()).add(port)
        return {d: frozenset(p) for d, p in out.items()}

    def _drop_links_at(self, ref: PortRef) -> bool:
        dead = sorted(self._into.get(ref, set()) | ({ref} if ref in self.links else set()))
        for src in dead:
            self._unlink(src)
        return bool(dead)

    def _unlink(self, src: PortRef) -> None:
        link = self.links.pop(src)
        self._into.get(link.dst, set()).discard(src)
        self._stale.add(src[0])

    def _ports_changed(self, dpid: int) -> None:
        """A switch came, went or reported a port: its edge and silent ports are found
        again at once (one switch's ports, in the call that changed them, so no later
        call finds a whole fabric's afresh)."""
        self._edge.pop(dpid, None)
        self._unheard.add(dpid)
        self._listen()
        self.edge_ports(dpid)
        self.port_stamps[dpid] = self.port_stamps.get(dpid, 0) + 1

    def _became_fabric(self, ref: PortRef) -> None:
        """A port carried LLDP: it leaves its switch's edge and silent ports in place
        (discovery finds 110,592 of them at k=48, one at a time)."""
        dpid, port = ref
        self.fabric_ports.add(ref)
        self._fabric_of.setdefault(dpid, set()).add(port)
        edge = self._edge.get(dpid)
        if edge is not None and port in edge:
            edge.remove(port)
        silent = self._silent.get(dpid)
        if silent is not None:
            silent.discard(port)
            if not silent:
                del self._silent[dpid]
        self.port_stamps[dpid] = self.port_stamps.get(dpid, 0) + 1

    def fabric_ports_of(self, dpid: int) -> list[int]:
        """A switch's ports that have carried LLDP, sorted."""
        return sorted(self._fabric_of.get(dpid, ()))

    def is_fabric_port(self, ref: PortRef) -> bool:
        return ref in self.fabric_ports

    def edge_ports(self, dpid: int) -> list[int]:
        """Live ports that have never carried LLDP: where hosts can be."""
        cached = self._edge.get(dpid)
        if cached is not None:
            return list(cached)
        switch = self.switches.get(dpid)
        if switch is None:
            return []
        found = [
            p
            for p in switch.live_ports()
            if p <= MAX_PHYSICAL_PORT and (dpid, p) not in self.fabric_ports
        ]
        self._edge[dpid] = found
        return list(found)

    def graph(self) -> nx.MultiDiGraph:
        """Live switch graph: nodes are dpids, edge key is the source port, data the far
        port. The same object, updated in place (callers must not modify it): only the
        out-links of switches that changed are rebuilt."""
        if self._graph is None or self._building is not None or self._regraph:
            self.graph_ready(len(self.switches) + len(self._stale))
        elif self._stale:
            for dpid in sorted(self._stale):
                self._relink(self._graph, dpid)
            self._record(frozenset(self._stale))
        self._stale = set()
        assert self._graph is not None
        return self._graph

    def graph_ready(self, limit: int) -> bool:
        """Whether ``graph()`` is cheap now. If most of the fabric changed (it came up:
        2,880 switches' links cost a second) or switches came or went (every route is
        computed afresh then), a fresh graph is built instead, ``limit`` switches a call;
        the graph in use, which routes in force are on, stays as it was until then
        (built over several calls: False until the call after the last)."""
        if self._building is None:
            small = self._graph is not None and len(self._stale) < GRAPH_REBUILD_AT
            if small and not self._regraph:
                return True
            self._building, self._regraph = nx.MultiDiGraph(), False
            self._stale.update(self.switches)
            first = True
        else:
            first = False
        batch = sorted(self._stale)[:limit]
        for dpid in batch:
            self._relink(self._building, dpid)
        self._stale.difference_update(batch)
        if self._stale:
            return False
        self._graph, self._building = self._building, None
        self._record(None)
        return first  # (built over calls: what follows is for the next one)

    def snapshot(self) -> nx.MultiDiGraph:
        """A new graph of the links as they are now, for readers (the API) that must
        not move the planned graph ahead of the routes computed on it."""
        g = nx.MultiDiGraph()
        g.add_nodes_from(sorted(self.switches))
        g.add_edges_from(e for u in sorted(self.switches) for e in self._out(u))
        return g

    def _relink(self, g: nx.MultiDiGraph, dpid: int) -> None:
        if dpid in g:
            g.remove_edges_from(list(g.out_edges(dpid, keys=True)))
        if dpid not in self.switches:
            if dpid in g:
                g.remove_node(dpid)  # (its neighbours' links to it went: they are stale too)
            return
        g.add_node(dpid)
        g.add_edges_from(self._out(dpid))

    def linked_ports(self, dpid: int) -> set[int]:
        """A switch's ports with a live link out of them (what routes may use)."""
        return {port for _, _, port, _ in self._out(dpid)} if dpid in self.switches else set()

    def _out(self, dpid: int) -> list[tuple[int, int, int, dict[str, int]]]:
        """A switch's live out-links as graph edges: both ports up."""
        edges = []
        for port, desc in sorted(self.switches[dpid].ports.items()):
            link = self.links.get((dpid, port))
            if desc.up and link is not None and self.port_up(link.dst):
                edges.append((dpid, link.dst[0], port, {"dst_port": link.dst[1]}))
        return edges

    def _record(self, changed: frozenset[int] | None) -> None:
        self.version += 1
        self._log.append((self.version, changed))
        del self._log[:-GRAPH_LOG_KEPT]

    def neighbour_pairs(self) -> set[tuple[int, int]]:
        """Pairs of known switches ever seen linked (a failed link stays): the fabric's
        shape, which dragonfly groups are inferred from."""
        return self._pairs

    def changes_since(self, version: int) -> set[int] | None:
        """Switches whose out-links changed in the graph since ``version`` (what
        ``graph()`` had then); None when unknown: rebuilt since, or too long ago."""
        entries = [changed for v, changed in self._log if v > version]
        if len(entries) != self.version - version or any(c is None for c in entries):
            return None
        return set().union(*entries)  # type: ignore[arg-type]

    # -- hosts ----------------------------------------------------------------
    def learn_host(
        self, now: float, mac: str, ip: str | None, dpid: int, port: int, tenant: str = ""
    ) -> bool:
        """Learn or refresh a host seen at an edge port; True when it is new, moved, or
        its address or tenant changed."""
        switch = self.switches.get(dpid)
        if switch is None or port not in switch.ports or port > MAX_PHYSICAL_PORT:
            return False
        if (dpid, port) in self.fabric_ports:
            return False
        old = self.hosts.get(mac)
        self._mac_at[(dpid, port)] = mac
        if port in self._silent.get(dpid, ()):
            self._silent[dpid].discard(port)
        self._macs_on.setdefault(dpid, set()).add(mac)
        if ip is not None:
            self._mac_of_ip[ip] = mac
        if old is not None and (old.dpid, old.port) == (dpid, port):
            self.hosts[mac] = replace(old, ip=ip or old.ip, last_seen=now, tenant=tenant)
            changed = (ip is not None and ip != old.ip) or tenant != old.tenant
            if changed:
                self.host_changed(dpid)
            return changed
        self.hosts[mac] = Host(mac, ip, dpid, port, now, tenant)
        self.host_changed(dpid)
        if old is not None:
            self.host_changed(old.dpid)
            self._unheard.add(old.dpid)  # the port it left is silent again
            self._listen()
        return True

    def host_changed(self, dpid: int) -> None:
        """Note that a host on ``dpid`` came, went or changed (what is planned per switch
        from its hosts is kept until then)."""
        self.host_stamps[dpid] = self.host_stamps.get(dpid, 0) + 1
        self._host_switches = None

    def host_switches(self) -> frozenset[int]:
        """The switches hosts are learned on (kept until a host comes, goes or moves)."""
        if self._host_switches is None:
            self._host_switches = frozenset(h.dpid for h in self.hosts.values())
        return self._host_switches

    def dest_switches(self) -> list[int]:
        """Switches hosts can be on: those with edge ports (or hosts)."""
        dests = set(self.host_switches())
        dests.update(d for d in self.switches if self.edge_ports(d))
        return sorted(dests)

    def silent_ports(self) -> dict[int, set[int]]:
        """Edge ports where no host has been learned, per switch (kept up to date as
        hosts speak and ports become fabric ports; a switch whose ports changed is looked
        at again, and a port whose host went is found silent again then)."""
        self._listen()
        return self._silent

    def _listen(self) -> None:
        for dpid in self._unheard:
            switch = self.switches.get(dpid)
            fabric = self._fabric_of.get(dpid, ())
            ports = {
                p
                for p, desc in (switch.ports.items() if switch else ())
                if desc.up and p <= MAX_PHYSICAL_PORT and p not in fabric
            }
            ports = {p for p in ports if self.host_on((dpid, p)) is None}
            if ports:
                self._silent[dpid] = ports
            else:
                self._silent.pop(dpid, None)
        self._unheard = set()

    def host_on(self, ref: PortRef) -> Host | None:
        """The host learned on a switch port, if any."""
        host = self.hosts.get(self._mac_at.get(ref, ""))
        return host if host is not None and (host.dpid, host.port) == ref else None

    def host_by_ip(self, ip: str) -> Host | None:
        """The host with address ``ip``: every address a host is learned with is indexed
        (the last host to claim it wins), so no search is needed."""
        host = self.hosts.get(self._mac_of_ip.get(ip, ""))
        return host if host is not None and host.ip == ip else None

    def unlinked_ports(self, dpid: int) -> list[int]:
        """Live ports no link was learned out of and no host is on: an LLDP frame out of
        one may still find a link (its far end's frames may have been heard already)."""
        switch = self.switches.get(dpid)
        if switch is None:
            return []
        hosts = {h.port for h in self.hosts_at(dpid)}
        return [
            p
            for p in switch.live_ports()
            if p <= MAX_PHYSICAL_PORT and (dpid, p) not in self.links and p not in hosts
        ]

    def hosts_at(self, dpid: int) -> list[Host]:
        """Hosts on a switch in a stable order (port, then MAC)."""
        macs = self._macs_on.get(dpid, set())
        found = [h for m in macs if (h := self.hosts.get(m)) is not None and h.dpid == dpid]
        macs.intersection_update(h.mac for h in found)
        return sorted(found, key=lambda h: (h.port, h.mac))
