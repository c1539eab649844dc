"""A raw OpenFlow 1.3 "switch" for the TLS and duplicate-id tests: it connects from a
chosen address (optionally over TLS), names itself with a chosen datapath id and answers
what a controller asks during and after the handshake with empty replies, recording
every message type the controller sends until it closes the connection."""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import threading
from pathlib import Path

HELLO, ECHO_REQUEST, ECHO_REPLY, FEATURES_REQUEST, FEATURES_REPLY = 0, 2, 3, 5, 6
MULTIPART_REQUEST, MULTIPART_REPLY, BARRIER_REQUEST, BARRIER_REPLY = 18, 19, 20, 21
# What a controller sends a switch it has not accepted yet: no rule, no packet.
HANDSHAKE = {HELLO, ECHO_REQUEST, FEATURES_REQUEST, MULTIPART_REQUEST}


def message(kind: int, xid: int, body: bytes = b"") -> bytes:
    return struct.pack("!BBHI", 4, kind, 8 + len(body), xid) + body


def client_context(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    """A switch's TLS side: trusts ``ca``; presents ``cert`` if given."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # as Open vSwitch: the CA's signature is the check
    ctx.load_verify_locations(ca)
    if cert is not None and key is not None:
        ctx.load_cert_chain(cert, key)
    return ctx


class RawSwitch:
    """``with RawSwitch(address, dpid, source="127.0.0.2") as sw:`` connects and says
    HELLO; ``sw.closed`` is set once the controller ends the connection (or TLS fails)."""

    def __init__(
        self,
        address: tuple[str, int],
        dpid: int,
        source: str = "127.0.0.2",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.address, self.dpid, self.source, self.tls = address, dpid, source, tls
        self.received: list[int] = []  # every message type from the controller, in order
        self.error = ""  # why the connection ended, if not a clean close
        self.closed = threading.Event()
        self._sock: socket.socket | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> RawSwitch:
        raw = socket.create_connection(self.address, timeout=5, source_address=(self.source, 0))
        try:  # TLS 1.3: a refused client certificate may only show at the first read
            self._sock = self.tls.wrap_socket(raw) if self.tls is not None else raw
            self._sock.sendall(message(HELLO, 1))
        except (OSError, ValueError) as exc:
            raw.close()
            self.error = str(exc)
            self.closed.set()
            return self
        self._sock.settimeout(None)
        self._reader = threading.Thread(target=self._read, args=(self._sock,), daemon=True)
        self._reader.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
        if self._reader is not None:
            self._reader.join(timeout=5)

    def wait_closed(self, timeout: float) -> bool:
        return self.closed.wait(timeout)

    def _read(self, sock: socket.socket) -> None:
        buf = b""
        try:
            while True:
                while len(buf) >= 8:
                    _v, kind, length, xid = struct.unpack("!BBHI", buf[:8])
                    if len(buf) < length:
                        break
                    body, buf = buf[8:length], buf[length:]
                    self.received.append(kind)
                    reply = self._answer(kind, xid, body)
                    if reply:
                        sock.sendall(reply)
                data = sock.recv(65536)
                if not data:
                    return
                buf += data
        except (OSError, ValueError) as exc:  # ssl.SSLError: the controller's TLS alert
            self.error = str(exc)
        finally:
            self.closed.set()

    def _answer(self, kind: int, xid: int, body: bytes) -> bytes:
        if kind == FEATURES_REQUEST:  # dpid, buffers, tables, aux id, pad, capabilities
            return message(FEATURES_REPLY, xid, struct.pack("!QIBB2xII", self.dpid, 0, 1, 0, 0, 0))
        if kind == MULTIPART_REQUEST:  # an empty reply of the asked type, no more to come
            return message(MULTIPART_REPLY, xid, body[:2] + b"\x00" * 6)
        if kind == ECHO_REQUEST:
            return message(ECHO_REPLY, xid, body)
        if kind == BARRIER_REQUEST:
            return message(BARRIER_REPLY, xid)
        return b""
