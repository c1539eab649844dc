"""Loom's Ryu application: ``ryu-manager controller/app.py``.

A thin shim: each handler turns a Ryu event into a domain event, calls one method of
the pure core with ``now`` and sends back what it returns. Everything that decides
anything lives in ``controller.conductor`` and below. Settings come from ``LOOM_*``
environment variables (see ``controller.settings``).
"""

from __future__ import annotations

import functools
import logging
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # loaded by path (ryu-manager controller/app.py): find the repo
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller import heap
from controller.audit import AuditTrail
from controller.claims import SwitchClaims, Verdict
from controller.cluster.roles import Roles
from controller.conductor import Conductor
from controller.metrics import LoomMetrics
from controller.model import Messages, PacketOut, StatsKind, StatsRequest
from controller.ofp import decode, encode
from controller.ofp.barriers import MODIFICATIONS, BarrierFences, modified_switches
from controller.ofp.compat import (
    DEAD_DISPATCHER,
    MAIN_DISPATCHER,
    BaseApp,
    hub,
    offload,
    ofp,
    ofp_event,
    set_ev_cls,
)
from controller.ofp.outbox import Outbox
from controller.ofp.rejects import SentMessages, error_name
from controller.ofp.replies import Solicited
from controller.ofp.rest import LoomRestController, register_rest
from controller.ofp.tls import install as install_tls
from controller.policy.isolated import load_isolated
from controller.policy.loader import load_policy
from controller.policy.manager import PolicyManager
from controller.policy.schema import Policy
from controller.settings import Settings

TICK_SECONDS = 0.1
Handler = Callable[[Any, Any], None]
GUARDED = ["rest"]  # what may fail: every guarded handler's name, and REST requests


def guarded(handler: Handler) -> Handler:
    """Nothing a switch or host sends may raise out of a handler: an event whose handling
    fails is counted (``loom_handler_errors_total``), logged once and dropped. Each
    handler yields when done: Ryu's event loop runs a backlog of events without yielding,
    which would keep REST requests and the tick waiting behind hundreds of replies.
    A message from a connection that does not speak for its datapath id (refused, or
    replaced by a reconnect) is dropped unread: it may have been queued before the close."""

    GUARDED.append(handler.__name__.strip("_"))

    @functools.wraps(handler)
    def run(self: FabricApp, ev: Any) -> None:
        msg = getattr(ev, "msg", None)
        if msg is not None and self.datapaths.get(msg.datapath.id) is not msg.datapath:
            self.counts.dropped["refused_connection"] += 1
            return
        try:
            handler(self, ev)
        except Exception:
            self.counts.handler_errors[handler.__name__.strip("_")] += 1
            self.logger.exception("%s failed; the event is dropped", handler.__name__)
        hub.sleep(0)

    return run


class FabricApp(BaseApp):  # type: ignore[misc]
    OFP_VERSIONS = [ofp.OFP_VERSION]
    _CONTEXTS = LoomRestController.contexts()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.logger.setLevel(logging.INFO)
        logging.getLogger("loom").setLevel(logging.INFO)
        path = PolicyManager.path_from_env()
        first = load_policy(path) if path else None  # an invalid file at start: refuse to start
        self.settings = Settings.from_env(base=first.fabric if first else None)
        self.fabric = Conductor(self.settings.fabric, timer=time.perf_counter)
        self.policy = PolicyManager(self.fabric, path, self._load_policy)
        self.policy.reload(time.monotonic())
        self.metrics = LoomMetrics(self.fabric, policy=self.policy.status)
        self.counts = self.metrics.shim  # what the shim drops, and handlers that fail
        drops = ("unsolicited_reply", "unmatched_error", "refused_connection")
        self.counts.dropped.update(dict.fromkeys(drops, 0))
        self.counts.handler_errors.update(dict.fromkeys(GUARDED, 0))
        self.counts.refused.update(dict.fromkeys(("duplicate_dpid", "tls_handshake"), 0))
        self.datapaths: dict[int, Any] = {}
        self.claims: SwitchClaims[Any] = SwitchClaims()
        install_tls(self._tls_refused)  # before the OpenFlow listener starts
        self.reads = decode.StateReads()
        self.fences = BarrierFences()
        self.sent = SentMessages()
        self.outbox = Outbox()
        self.solicited = Solicited()
        self._reload_requested = False
        self.roles = Roles()  # with no cluster every switch is writable
        self.cluster = self._join_cluster()
        self.audit = AuditTrail(time.time)  # wall time: audit lines are read by people
        self.metrics.collector.audit = self.audit
        api_tls = self.settings.api_tls
        register_rest(kwargs, self, self.settings.api_token, api_tls.context() if api_tls else None)
        self._serve_metrics()
        signal.signal(signal.SIGHUP, self._on_sighup)
        self._ticker = hub.spawn(self._tick_loop)
        self._watcher = hub.spawn(self._watch_policy)
        heap.start()  # what is built so far lives as long as the process

    def _join_cluster(self) -> Any:
        """LOOM_CLUSTER set: one instance of a cluster on etcd (``controller.ofp.cluster``)."""
        s = self.settings
        if not s.cluster:
            return None
        from controller.ofp.cluster import ClusterGlue, listening, member_id

        of_port, api = listening()
        glue = ClusterGlue(
            self, s.cluster, member_id(), s.cluster_address, of_port, api, access=s.etcd
        )
        self.logger.info("cluster member %s on %s", glue.node.me, self.settings.cluster)
        self.metrics.collector.cluster = glue.figures
        return glue

    @staticmethod
    def _load_policy(path: str) -> Policy:
        """Reloads: checked in a child process, its answer read in a native thread, so
        neither holds the event loop (a 27,648-host policy takes seconds)."""
        return load_isolated(path, read=lambda raw: offload(Policy.model_validate_json, raw))

    def _serve_metrics(self) -> None:
        host, port = self.settings.metrics_host, self.settings.metrics_port
        if not port:
            return
        from prometheus_client import start_http_server

        try:
            start_http_server(port, addr=host, registry=self.metrics.registry)
        except OSError as exc:  # routing matters more than metrics: keep running, say why
            self.logger.error(
                "metrics endpoint %s:%d not started: %s (set LOOM_METRICS_PORT)", host, port, exc
            )
            return
        self.logger.info("metrics on http://%s:%d/metrics", host, port)

    # -- Ryu events -> core -----------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    @guarded
    def _state_change(self, ev: Any) -> None:
        dp: Any = ev.datapath
        dpid: int | None = dp.id
        if dpid is None:
            return
        if ev.state == MAIN_DISPATCHER:
            if not self._claim(dpid, dp):
                return
            self.datapaths[dpid] = dp
            self.outbox.open(dpid, dp)
            if self.cluster is not None:  # a slave first: nothing written before mastership
                self.cluster.switch_connected(dpid, dp)
            ports = [decode.port_desc(p) for p in dp.ports.values()]
            self.logger.info("switch %016x connected with %d ports", dpid, len(ports))
            self.send(self.fabric.switch_up(time.monotonic(), dpid, ports))
        elif ev.state == DEAD_DISPATCHER and self.claims.release(dpid, dp):
            del self.datapaths[dpid]
            self.outbox.close(dpid)
            self.fences.switch_gone(dpid)
            self.sent.switch_gone(dpid)
            self.solicited.switch_gone(dpid)
            if self.cluster is not None:
                self.cluster.switch_gone(dpid)
            self.logger.info("switch %016x disconnected", dpid)
            self.send(self.fabric.switch_down(time.monotonic(), dpid))

    def _claim(self, dpid: int, dp: Any) -> bool:
        """A connection announcing a datapath id another address holds is closed, not
        obeyed; one from the holder's own address is that switch restarted (``claims``)."""
        address = str(dp.address[0]) if dp.address else ""
        claim = self.claims.claim(dpid, address, dp)
        if claim.verdict is Verdict.REFUSED:
            self.counts.refused["duplicate_dpid"] += 1
            self.logger.warning(
                "switch %016x: connection from %s refused, the id is connected from %s",
                dpid,
                address,
                claim.held_from,
            )
            dp.close()
        elif claim.verdict is Verdict.RECONNECT and claim.held_by is not None:
            self.logger.info("switch %016x reconnected from %s", dpid, address)
            claim.held_by.close()  # its DEAD event finds it no longer the holder
        return claim.accepted

    def _tls_refused(self, address: tuple[str, int], reason: str) -> None:
        self.counts.refused["tls_handshake"] += 1
        self.logger.warning("OpenFlow TLS handshake from %s:%s refused: %s", *address, reason)

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    @guarded
    def _port_status(self, ev: Any) -> None:
        started, msg = time.perf_counter(), ev.msg
        desc, deleted = decode.port_desc(msg.desc), decode.port_status_deleted(msg)
        messages = self.fabric.port_status(time.monotonic(), msg.datapath.id, desc, deleted)
        self.send(messages)
        self.metrics.handled("port_status", time.perf_counter() - started)
        self.fence(messages, started)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    @guarded
    def _barrier_reply(self, ev: Any) -> None:
        done = self.fences.reply(time.perf_counter(), ev.msg.datapath.id, ev.msg.xid)
        if done is not None:
            self.metrics.rerouted(done)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    @guarded
    def _packet_in(self, ev: Any) -> None:
        self.outbox.wait_room(ev.msg.datapath.id)  # before planning: see Outbox
        started = time.perf_counter()
        pkt = decode.packet_in(ev.msg.datapath.id, ev.msg)
        self.send(self.fabric.packet_in(time.monotonic(), pkt))
        self.metrics.handled("packet_in", time.perf_counter() - started)

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    @guarded
    def _port_stats(self, ev: Any) -> None:
        if not self._solicited(ev.msg, StatsKind.PORT):
            return
        stats = decode.port_stats(ev.msg.body)
        self.send(self.fabric.port_stats(time.monotonic(), ev.msg.datapath.id, stats))

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    @guarded
    def _flow_stats(self, ev: Any) -> None:
        if self.reads.take(ev.msg, "flows"):
            return self._state_read(ev.msg.datapath.id)
        if not self._solicited(ev.msg, StatsKind.FLOW):
            return None
        stats = decode.flow_stats(ev.msg.body)
        self.send(self.fabric.flow_stats(time.monotonic(), ev.msg.datapath.id, stats))

    @set_ev_cls(ofp_event.EventOFPGroupDescStatsReply, MAIN_DISPATCHER)
    @guarded
    def _group_desc(self, ev: Any) -> None:
        if self.reads.take(ev.msg, "groups"):
            self._state_read(ev.msg.datapath.id)

    @set_ev_cls(ofp_event.EventOFPMeterConfigStatsReply, MAIN_DISPATCHER)
    @guarded
    def _meter_config(self, ev: Any) -> None:
        if self.reads.take(ev.msg, "meters"):
            self._state_read(ev.msg.datapath.id)

    def _state_read(self, dpid: int) -> None:
        """All of a reconnected switch's contents are in: hand them to the core."""
        parts = self.reads.complete(dpid)
        if parts is not None:
            flows, groups, meters = parts
            self.send(self.fabric.switch_state(time.monotonic(), dpid, flows, groups, meters))

    @set_ev_cls(ofp_event.EventOFPGroupStatsReply, MAIN_DISPATCHER)
    @guarded
    def _group_stats(self, ev: Any) -> None:
        if not self._solicited(ev.msg, StatsKind.GROUP):
            return
        stats = decode.group_stats(ev.msg.body)
        self.send(self.fabric.group_stats(time.monotonic(), ev.msg.datapath.id, stats))

    @set_ev_cls(ofp_event.EventOFPRoleReply, MAIN_DISPATCHER)
    @guarded
    def _role_reply(self, ev: Any) -> None:
        if self.cluster is not None:
            msg = ev.msg
            self.cluster.role_reply(msg.datapath.id, msg.role, msg.generation_id)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, MAIN_DISPATCHER)
    @guarded
    def _error(self, ev: Any) -> None:
        msg, dpid = ev.msg, ev.msg.datapath.id
        if self.cluster is not None and self.cluster.refused(dpid, msg):
            return
        rejected = self.sent.take(dpid, msg.xid)
        if rejected is None:  # not about a rule we sent: nothing to repair
            self.counts.dropped["unmatched_error"] += 1
            self.logger.info(
                "switch %016x sent %s for xid %s, no rule of ours",
                dpid,
                error_name(msg.type, msg.code),
                msg.xid,
            )
            return
        self.logger.warning(
            "switch %016x rejected %s: %s",
            dpid,
            rejected,
            error_name(msg.type, msg.code),
        )
        self.send(self.fabric.rejected(time.monotonic(), dpid))

    def _solicited(self, msg: Any, kind: StatsKind) -> bool:
        more = bool(msg.flags & ofp.OFPMPF_REPLY_MORE)
        if self.solicited.answers(msg.datapath.id, msg.xid, kind, more):
            return True
        self.counts.dropped["unsolicited_reply"] += 1
        return False

    # -- policy reloads: the file changed, SIGHUP, or POST /loom/v1/policy/reload ------
    def _on_sighup(self, signum: int, frame: Any) -> None:
        self._reload_requested = True  # handled in the watcher, not in signal context

    def _watch_policy(self) -> None:
        while True:
            hub.sleep(1.0)
            if self._reload_requested or self.policy.changed_on_disk():
                self._reload_requested = False
                try:
                    self.send(self.policy.reload(time.monotonic()))
                    if self.cluster is not None and self.policy.status.ok:
                        self.cluster.shared.publish_policy()
                except Exception:  # a bug must not stop the watcher; the old policy stays
                    self.logger.exception("policy reload failed")

    # -- timers ---------------------------------------------------------------
    def _tick_loop(self) -> None:
        """A tick every ``TICK_SECONDS`` and, while planning is left, its slices in
        between, other events between slices: the tick's LLDP, ageing and polls keep
        their pace however long a re-plan takes."""
        last = 0.0
        while True:
            hub.sleep(0 if self.fabric.busy else TICK_SECONDS)
            try:
                now = time.monotonic()
                if now - last >= TICK_SECONDS:
                    last = now
                    self.send(self.fabric.tick(now, held=self.roles.fenced(now)))
                else:
                    self.send(self.fabric.work(now))
            except Exception:  # keep the loop alive; the error is logged with its trace
                self.logger.exception("tick failed")

    # -- core -> switches -------------------------------------------------------
    def fence(self, messages: Messages, started: float) -> None:
        """A barrier after ``messages`` on every switch they modified: the last reply
        times the reroute (``loom_reroute_latency_seconds``)."""
        barriers = []
        for dpid in modified_switches(messages):
            dp = self.datapaths.get(dpid)
            if dp is not None:
                barriers.append((dpid, self.outbox.put(dpid, dp, encode.barrier(dp))))
        self.fences.start(time.perf_counter(), started, barriers)

    def send(self, messages: Messages) -> None:
        """Rules first on every switch, then packets, so a packet never beats its route;
        each switch gets its messages in the order the core planned them (``Outbox``)."""
        self.metrics.observe(self.fabric.drain_timings())
        heap.after()
        messages = self.roles.gate(messages, time.monotonic())
        for want_packets in (False, True):
            for dpid, msgs in messages.items():
                dp = self.datapaths.get(dpid)
                if dp is None:
                    continue
                for msg in msgs:
                    if isinstance(msg, PacketOut) == want_packets:
                        for ofmsg in encode.encode(dp, msg):
                            xid = self.outbox.put(dpid, dp, ofmsg)
                            if isinstance(msg, MODIFICATIONS):
                                self.sent.sent(dpid, xid, msg)
                            if isinstance(msg, StatsRequest) and msg.sync:
                                self.reads.expect(dpid, xid, msg.kind)
                            elif isinstance(msg, StatsRequest):
                                self.solicited.asked(dpid, xid, msg.kind)
