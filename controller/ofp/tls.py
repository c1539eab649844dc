"""OpenFlow over TLS as Ryu's own options set it up, with two of its faults mended.

``ryu-manager --ctl-privkey K --ctl-cert C --ca-certs CA --ofp-ssl-listen-port P`` makes
the OpenFlow listener TLS only and, with ``--ca-certs``, requires a client certificate
signed by that CA. Ryu 4.34's listener, though, builds its TLS context from arguments it
consumes on the first connection: every later switch fails its handshake ("no shared
cipher"). And a failed handshake is an uncaught exception in the log, with no count.

``install`` replaces the framework's listener class by one that builds the context once
(TLS 1.2 at least, the same key, certificate and CA) and reports each refused handshake
to ``refused(address, reason)``; a peer that hangs up before its first word is not one.
Plain TCP listeners are left as they were, but for one more fault: a listener that cannot
bind its port (another controller has it) was an uncaught exception too, and the
controller went on without its switches; here it says so and ends (``cannot_listen``).
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import ssl
from collections.abc import Callable
from typing import Any, NoReturn

from controller.ofp.compat import FRAMEWORK

HANDSHAKE_SECONDS = 10.0  # a peer that connects and says nothing is not waited on forever
Refused = Callable[[tuple[str, int], str], None]
# Closed before saying anything: a cluster peer's liveness probe, not a switch refused.
HUNG_UP = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError)
EXIT_CANNOT_LISTEN = 2
log = logging.getLogger("loom.ofp")


def cannot_listen(listen_info: Any, exc: OSError, stop: Callable[[int], NoReturn]) -> NoReturn:
    """The OpenFlow port could not be bound: no switch could ever connect, so the
    controller ends (``stop``: the process's exit) rather than run without them."""
    host, port = (*tuple(listen_info), "?", "?")[:2]
    log.critical(
        "cannot listen for switches on %s:%s: %s; is another controller running there?"
        " (--ofp-tcp-listen-port, --ofp-ssl-listen-port)",
        host or "0.0.0.0",
        port,
        exc.strerror or exc,
    )
    stop(EXIT_CANNOT_LISTEN)


def server_context(ssl_args: dict[str, Any]) -> ssl.SSLContext:
    """The server's context from the arguments the framework passes its listener."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(ssl_args["certfile"], ssl_args["keyfile"])
    if ssl_args.get("ca_certs"):
        ctx.load_verify_locations(ssl_args["ca_certs"])
        ctx.verify_mode = ssl_args.get("cert_reqs", ssl.CERT_REQUIRED)
    return ctx


def accept(
    ctx: ssl.SSLContext, handle: Callable[[Any, Any], None], refused: Refused, sock: Any, addr: Any
) -> None:
    """A new connection: ``handle`` it once its TLS handshake succeeds, else close it."""
    try:
        sock.settimeout(HANDSHAKE_SECONDS)  # the datapath sets its own after
        conn = ctx.wrap_socket(sock, server_side=True)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        sock.close()
        if not isinstance(exc, HUNG_UP):
            refused(addr, str(exc) or type(exc).__name__)
        return
    handle(conn, addr)


def install(refused: Refused, stop: Callable[[int], NoReturn] = os._exit) -> None:
    """Make the framework's OpenFlow listener the one below (idempotent: the last
    ``refused`` is the one called; ``stop`` ends the process when the port is taken)."""
    module: Any = importlib.import_module(f"{FRAMEWORK}.controller.controller")
    base = getattr(module.StreamServer, "framework_server", module.StreamServer)

    class TlsStreamServer(base):  # type: ignore[misc,valid-type]
        framework_server = base

        def __init__(self, listen_info: Any, handle: Any = None, **ssl_args: Any) -> None:
            try:
                super().__init__(listen_info, handle)  # a plain listener; TLS added below
            except OSError as exc:
                cannot_listen(listen_info, exc, stop)
            if not ssl_args:
                return
            ctx = server_context(ssl_args)
            self.handle = functools.partial(accept, ctx, handle, refused)

    module.StreamServer = TlsStreamServer
