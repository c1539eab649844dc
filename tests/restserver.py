"""Loom's REST API served as a user meets it, without switches: Ryu's WSGI server with
``LoomRestController`` over a ``LoomApi``, on a free loopback port, in a thread of its
own with its own eventlet hub (nothing is monkey-patched). Needs Ryu: tests that use it
skip first where it is missing. With ``tls`` the server is the one ``ryu-manager`` starts,
made HTTPS as the controller makes it (``serve_https``)."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from controller.api import LoomApi
from controller.metrics import ShimCounts
from controller.model import Messages


class ShimApp:
    """What ``LoomRestController`` uses of ``FabricApp``: its counts and its sender, which
    keeps what it was given and hands it on (to a fake fabric, say)."""

    def __init__(
        self, counts: ShimCounts, deliver: Callable[[Messages], None] | None = None
    ) -> None:
        self.counts = counts
        self.sent: list[Messages] = []
        self.deliver = deliver

    def send(self, messages: Messages) -> None:
        self.sent.append(messages)
        if self.deliver is not None:
            self.deliver(messages)


class Contexts:
    """What ``start_service`` reads of Ryu's application manager: its contexts."""

    def __init__(self, wsgi: Any) -> None:
        self.contexts = {"wsgi": wsgi}


def _serve(
    wsgi: Any,
    ready: threading.Event,
    stop: threading.Event,
    port: list[int],
    tls: ssl.SSLContext | None,
    counts: ShimCounts,
) -> None:
    import eventlet
    from ryu.lib import hub

    if tls is None:
        server = hub.WSGIServer(("127.0.0.1", 0), wsgi)
    else:
        from ryu import cfg
        from ryu.app import wsgi as framework

        from controller.ofp.rest import serve_https

        cfg.CONF.set_override("wsapi_port", 0)
        serve_https(tls, counts)
        try:
            server = framework.start_service(Contexts(wsgi))
        finally:
            framework.start_service = framework.start_service.framework_start
            cfg.CONF.clear_override("wsapi_port")
    port.append(server.server.getsockname()[1])
    thread = eventlet.spawn(server.serve_forever)
    ready.set()
    while not stop.is_set():
        eventlet.sleep(0.01)
    thread.kill()
    server.server.close()


@contextmanager
def serving(api: LoomApi, app: ShimApp, tls: ssl.SSLContext | None = None) -> Iterator[int]:
    """The API served until the block ends (over HTTPS with ``tls``); yields its port."""
    from ryu.app.wsgi import WSGIApplication

    from controller.ofp.rest import API_INSTANCE, APP_INSTANCE, LoomRestController

    wsgi = WSGIApplication()
    wsgi.register(LoomRestController, {API_INSTANCE: api, APP_INSTANCE: app})
    ready, stop = threading.Event(), threading.Event()
    port: list[int] = []
    args = (wsgi, ready, stop, port, tls, app.counts)
    thread = threading.Thread(target=_serve, args=args, daemon=True)
    thread.start()
    assert ready.wait(5), "the WSGI server did not start"
    try:
        yield port[0]
    finally:
        stop.set()
        thread.join(5)
