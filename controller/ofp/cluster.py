"""The cluster inside the Ryu app: role requests and replies, and the node's loops.

Every switch connects to every instance. On connection an instance asks to be a slave
(with the newest store revision it has seen as generation id, so it is never left in the
default *equal* role that could write) and asks for packet-ins and port status as a
slave too, so its core learns the whole fabric. The node (``controller.cluster.node``)
decides when to ask for mastership; the switch's role reply makes it so, and the switch
is then read back before anything is written to it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

from controller.cluster.etcd import (
    EtcdAccess,
    EtcdClient,
    StoreAccessDenied,
    StoreUnavailable,
    parse_url,
)
from controller.cluster.metrics import ClusterFigures
from controller.cluster.node import POLL, ClusterNode
from controller.cluster.roles import Phase, Roles
from controller.cluster.shared import SharedState
from controller.ofp import encode, frames
from controller.ofp.compat import hub, ofp

log = logging.getLogger("loom.cluster")
START_TRIES = 50  # reads of the store at start before giving up (0.2 s apart)


class ClusterGlue:
    def __init__(
        self,
        app: Any,
        url: str,
        me: str,
        address: str,
        of_port: int,
        api: str,
        access: EtcdAccess | None = None,
    ) -> None:
        endpoints, prefix = parse_url(url)
        self.app = app
        self.roles: Roles = app.roles
        self.roles.clustered = True
        self.client = EtcdClient(endpoints, access=access)
        self.shared = SharedState(self.client, prefix, app.fabric, app.send, app.policy)
        self.node = ClusterNode(
            self.client,
            prefix,
            me,
            self.roles,
            self,
            self.shared,
            probe=f"{address}:{of_port}",
            api=api,
        )
        self.unranked: set[int] = set()  # switches still to be told we are a slave
        self._ready = False
        self._start(app.settings.api_token)
        hub.spawn(self._run)
        hub.spawn(self._probe)

    def _start(self, token: str | None) -> None:
        for attempt in range(START_TRIES):
            try:
                frames.set_lldp_key(self.shared.secret())
                self.shared.share_token(token)
                self.shared.offer_policy()
                return
            except StoreAccessDenied as exc:  # waiting will not change who we are
                raise SystemExit(f"LOOM_CLUSTER: {exc}") from None
            except StoreUnavailable as exc:
                if attempt == START_TRIES - 1:
                    raise SystemExit(f"LOOM_CLUSTER: {exc}") from None
                time.sleep(0.2)

    # -- the node's view of the switches ------------------------------------------
    def connected(self) -> list[int]:
        return sorted(self.app.datapaths)

    def ready(self) -> bool:
        """Once the core has learned the whole fabric (and for good): only then may this
        instance take switches another masters."""
        self._ready = self._ready or (bool(self.app.datapaths) and self.app.fabric.settled)
        return self._ready

    def request_role(self, dpid: int, master: bool, generation: int) -> None:
        dp = self.app.datapaths.get(dpid)
        if dp is not None:
            self.app.outbox.put(dpid, dp, encode.role_request(dp, master, generation))

    def take_over(self, dpid: int) -> None:
        self.app.send(self.app.fabric.take_over(time.monotonic(), dpid))

    # -- OpenFlow events (called by the app) ---------------------------------------
    def switch_connected(self, dpid: int, dp: Any) -> None:
        self.roles.forget(dpid)
        self.app.outbox.put(dpid, dp, encode.async_config(dp))
        self.request_role(dpid, False, self.node.slave_generation(dpid))
        self.unranked.add(dpid)

    def switch_gone(self, dpid: int) -> None:
        self.roles.forget(dpid)
        self.unranked.discard(dpid)

    def role_reply(self, dpid: int, role: int, generation: int) -> None:
        if role == ofp.OFPCR_ROLE_SLAVE:
            self.unranked.discard(dpid)
        self.node.role_replied(dpid, role == ofp.OFPCR_ROLE_MASTER, generation)

    def refused(self, dpid: int, msg: Any) -> bool:
        """An error that is about roles: a stale generation id, or a write refused
        because the switch has another master. True when handled here."""
        stale = msg.type == ofp.OFPET_ROLE_REQUEST_FAILED
        slave = msg.type == ofp.OFPET_BAD_REQUEST and msg.code == ofp.OFPBRC_IS_SLAVE
        if not (stale or slave):
            return False
        if self.roles.phase.get(dpid, Phase.SLAVE) is not Phase.SLAVE:
            log.warning("switch %016x refused this instance as master: another is", dpid)
            self.node.refused(dpid)
        elif stale:
            self.unranked.add(dpid)  # asked again with a newer generation
        return True

    # -- loops ---------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            hub.sleep(POLL)
            try:
                self.node.step(time.monotonic())
                for dpid in sorted(self.unranked):
                    if self.roles.phase.get(dpid, Phase.SLAVE) is Phase.SLAVE:
                        self.request_role(dpid, False, self.node.slave_generation(dpid))
            except Exception:  # the loop must outlive a bug; logged with its trace
                log.exception("cluster round failed")

    def _probe(self) -> None:
        while True:
            hub.sleep(POLL)
            try:
                self.node.probe_peers()
            except Exception:
                log.exception("cluster probe failed")

    def figures(self) -> ClusterFigures:
        st, view = self.node.status, self.node.status.view
        return ClusterFigures(
            self.node.me,
            len(view.members),
            view.live_claims(),
            len(self.roles.masters()),
            len(view.unmastered()),
            dict(st.changes),
            st.store_up,
            self.client.last_rtt,
            self.shared.revision,
            st.term_changes,
            dict(self.roles.dropped),
        )

    def describe(self) -> dict[str, object]:
        st, view = self.node.status, self.node.status.view
        return {
            "mode": "etcd",
            "member": self.node.me,
            "store": {"up": st.store_up, "rtt_ms": round(self.client.last_rtt * 1e3, 3)},
            "revision": {"store": view.revision, "applied": self.shared.revision},
            "members": {
                m.id: {"api": m.api, "switches": len(m.switches)} for m in view.members.values()
            },
            "masters": {f"{d:016x}": m for d, m in sorted(view.live_claims().items())},
            "unmastered": [f"{d:016x}" for d in view.unmastered()],
            "mine": [f"{d:016x}" for d in self.roles.masters()],
            "changes": dict(st.changes),
        }


def member_id(env: dict[str, str] | os._Environ[str] = os.environ) -> str:
    return env.get("LOOM_CLUSTER_ID") or f"{socket.gethostname()}-{os.getpid()}"


def listening() -> tuple[int, str]:
    """This process's OpenFlow port (peers probe it) and its API's URL."""
    from ryu import cfg

    conf = cfg.CONF
    host = conf.wsapi_host if conf.wsapi_host not in ("", "0.0.0.0") else "127.0.0.1"
    tls = conf.ctl_privkey and conf.ctl_cert  # then Ryu listens for TLS only
    port = conf.ofp_ssl_listen_port if tls else conf.ofp_tcp_listen_port
    return int(port), f"http://{host}:{conf.wsapi_port}"
