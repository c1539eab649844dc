"""Ryu WSGI glue for ``controller.api``: one catch-all route, JSON in and out; over HTTPS
when the settings ask (``serve_https``)."""

from __future__ import annotations

import errno
import importlib
import json
import logging
import ssl
import time
from collections.abc import Iterable
from typing import Any

from controller.api import MAX_BODY_BYTES, LoomApi
from controller.jobspec import brief
from controller.metrics import ShimCounts
from controller.ofp.compat import FRAMEWORK

log = logging.getLogger("loom.api")

if FRAMEWORK == "ryu":
    import eventlet.wsgi
    from ryu import cfg
    from ryu.app.wsgi import ControllerBase, Response, WSGIApplication, route

    # The API changes the fabric: serve it on loopback unless --wsapi-host says otherwise.
    cfg.CONF.set_default("wsapi_host", "127.0.0.1")
else:  # pragma: no cover - os-ken ships no WSGI: the API is off there
    ControllerBase, WSGIApplication = object, None

API_INSTANCE = "loom_api"
APP_INSTANCE = "loom_app"


class LoomRestController(ControllerBase):  # type: ignore[misc]
    def __init__(self, req: Any, link: Any, data: dict[str, Any], **config: Any) -> None:
        super().__init__(req, link, data, **config)
        self.api: LoomApi = data[API_INSTANCE]
        self.app: Any = data[APP_INSTANCE]

    @staticmethod
    def contexts() -> dict[str, Any]:
        return {"wsgi": WSGIApplication} if WSGIApplication is not None else {}

    if FRAMEWORK == "ryu":

        @route("loom", "/loom/{path:.*}", methods=["GET", "POST", "PUT", "DELETE"])
        def dispatch(self, req: Any, **kwargs: Any) -> Any:
            auth = req.headers.get("Authorization", "")
            length = req.content_length or 0
            try:
                if length > MAX_BODY_BYTES:  # refused unread
                    body = b"\0" * (MAX_BODY_BYTES + 1)
                else:
                    body = req.body_file.read(MAX_BODY_BYTES + 1) if length else b""
            except OSError as exc:  # webob's DisconnectionError, or a reset
                self.app.counts.api_aborted += 1
                log.warning(
                    "%s %s from %s: the client hung up mid-body (%s); not answered",
                    brief(req.method),
                    brief(req.path),
                    req.remote_addr,
                    exc,
                )
                return _unanswered
            res = self.api.handle(req.method, req.path, dict(req.GET), body, auth)
            if res.status >= 500:
                self.app.counts.handler_errors["rest"] += 1
            self.app.send(res.messages)
            body = json.dumps(res.body, indent=1, sort_keys=True).encode()
            return Response(
                status=res.status, content_type="application/json", charset="utf-8", body=body
            )


def _unanswered(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    """A WSGI answer of nothing: eventlet closes the connection without writing, where an
    exception would log a traceback and write a 500 to a peer that is gone. The status,
    never sent, is for the access log: 499, a client that closed (nginx's use)."""
    start_response("499 Client Closed Request", [])
    eventlet.wsgi.WSGI_LOCAL.already_handled = True
    return []


def register_rest(
    kwargs: dict[str, Any], app: Any, token: str | None, tls: ssl.SSLContext | None = None
) -> None:
    """Mount the API on Ryu's WSGI server (listening where --wsapi-host/port say), over
    HTTPS with ``tls``."""
    wsgi = kwargs.get("wsgi")
    if wsgi is not None:
        if tls is not None:
            serve_https(tls, app.counts)
        cluster = app.cluster
        api = LoomApi(
            app.fabric,
            time.monotonic,
            token,
            app.policy,
            shared=cluster.shared if cluster is not None else None,
            cluster=cluster.describe if cluster is not None else None,
            audit=app.audit,
        )
        wsgi.register(LoomRestController, {API_INSTANCE: api, APP_INSTANCE: app})


def serve_https(ctx: ssl.SSLContext, counts: ShimCounts | None = None) -> None:
    """Make Ryu's WSGI server listen with TLS (``ctx``, server side). Ryu has no option
    for it: ``ryu-manager`` starts the server with ``start_service`` once the apps are
    made, and this replaces it by one whose server's listening socket is wrapped
    (idempotent: the last ``ctx`` is the one used). Each connection's handshake is done
    in that connection's green thread, so a silent or refused client holds up no other; a
    refused one is counted in ``counts``."""
    module: Any = importlib.import_module(f"{FRAMEWORK}.app.wsgi")
    start = getattr(module.start_service, "framework_start", module.start_service)

    def start_service(app_mgr: Any) -> Any:
        server = start(app_mgr)
        if server is not None:
            server.server = https_listener(server.server, ctx, counts)
        return server

    start_service.framework_start = start  # type: ignore[attr-defined]
    module.start_service = start_service


def https_listener(sock: Any, ctx: ssl.SSLContext, counts: ShimCounts | None = None) -> Any:
    """A green listening socket, TLS on every connection it accepts (eventlet's own).

    eventlet does each handshake on the connection's first read, in its own green thread;
    one that fails would print a traceback there. Here it is one warning line instead
    (none for a peer that hangs up first), and the connection closed as one reset."""
    from eventlet.green.ssl import GreenSSLSocket

    class Connection(GreenSSLSocket):  # type: ignore[misc]
        def recv_into(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return super().recv_into(*args, **kwargs)
            except ssl.SSLError as exc:
                if not isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
                    log.warning("REST TLS from %s refused: %s", _peer(self), exc)
                    if counts is not None:
                        counts.api_tls_refused += 1
                raise ConnectionResetError(errno.ECONNRESET, str(exc)) from None

    return Listener(GreenSSLSocket(sock, server_side=True, _context=ctx), Connection)


class Listener:
    """A listening socket whose accepted connections are of class ``connection`` (a
    subclass of theirs adding no slots) and know their ``peer``; all else is the socket's."""

    def __init__(self, sock: Any, connection: type) -> None:
        self.sock, self.connection = sock, connection

    def accept(self) -> tuple[Any, Any]:
        conn, addr = self.sock.accept()
        conn.__class__ = self.connection
        conn.peer = addr  # for the warning: a refused peer may be gone before it is written
        return conn, addr

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


def _peer(conn: Any) -> str:
    host, port = getattr(conn, "peer", ("?", 0))[:2]
    return f"{host}:{port}"
