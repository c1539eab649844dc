"""A small etcd v3 client over etcd's JSON gateway (``POST /v3/...``).

Loom runs under eventlet with the standard library monkey-patched, where gRPC clients do
not work; ``http.client`` does, and goes green there on its own. The gateway speaks the v3
API as JSON: keys and values base64-encoded, int64 fields as strings, and every reply
carries the revision the store was at (``header.revision``).

Reads are linearizable (etcd's default): a member that cannot reach a quorum does not
answer from its possibly stale copy but fails or stalls, and both surface here as
:class:`StoreUnavailable`, the one error a caller must expect from a healthy program.

Each request is a fresh connection, so concurrent green threads never share a socket.

A secured etcd (:class:`EtcdAccess`) is reached over HTTPS, the members' certificates
checked against a CA, with a client certificate when etcd asks for one, and as an etcd
user: ``/v3/auth/authenticate`` gives a token sent with every request, and a token etcd no
longer accepts (expired, or lost by a restarted member) is renewed once and the request
sent again. A refusal of who we are is :class:`StoreAccessDenied`, a kind of
:class:`StoreUnavailable` (the store cannot be used), named so a start can stop at once.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

DEFAULT_PREFIX = "/loom/"
URL_FORM = "etcd[s]://HOST:PORT[,HOST:PORT...][/PREFIX]"
SCHEMES = {"etcd": "http", "etcds": "https"}
_NOT_FOUND = 5  # gRPC's NOT_FOUND: an unknown lease
_DENIED = 7  # gRPC's PERMISSION_DENIED: the user's roles do not cover the key
_UNAUTHENTICATED = 16  # an invalid or expired token
_OLD_AUTH = "auth store is old"  # etcd changed users or roles since the token was given
_PLAIN = -1  # not a gateway's reply: etcd's HTTP server refused the request itself
_NO_USER = "user name is empty"  # auth is on and the request came as nobody
_AUTHENTICATE = "/v3/auth/authenticate"
_BUSY = 429  # "too many requests": the member is overloaded, another may not be

# The store client is I/O at the edge, as the shim is: it times its own round trips.
_clock = time.monotonic

Reply = dict[str, Any]


class StoreUnavailable(Exception):
    """No endpoint answered in time, or the cluster has no quorum."""


class StoreAccessDenied(StoreUnavailable):
    """etcd refused who we are: our certificate, our user's password, or our rights."""


class _Refused(ValueError):
    """etcd answered and refused the request; ``code`` is its gRPC status code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int


@dataclass(frozen=True)
class Snapshot:
    """A prefix as it stood at one revision; ``items`` sorted by key."""

    revision: int
    raft_term: int
    items: tuple[KeyValue, ...]


@dataclass(frozen=True)
class EtcdAccess:
    """How to reach a secured etcd; the default is plain HTTP as nobody."""

    ca: str | None = None  # PEM CA certificates for the members'; None: the system's
    cert: str | None = None  # the client certificate, for etcd's --client-cert-auth
    key: str | None = None  # its private key
    user: str | None = None  # the etcd user; None: no authentication
    password: str = field(default="", repr=False)

    def context(self) -> ssl.SSLContext:
        """The TLS context of every HTTPS request (loads the files: errors surface here)."""
        context = ssl.create_default_context(cafile=self.ca)
        if self.cert is not None:  # an encrypted key fails rather than ask a terminal
            context.load_cert_chain(self.cert, self.key, password=_no_passphrase)
        return context


def _no_passphrase() -> bytes:
    return b""


def _stale_token(exc: _Refused) -> bool:
    return exc.code == _UNAUTHENTICATED or _OLD_AUTH in str(exc)


def _who_we_are(exc: _Refused) -> bool:
    """A refusal of our user, rights or certificate, rather than of the request."""
    return exc.code in (_DENIED, _PLAIN) or _NO_USER in str(exc)


def _bad_url(url: str, why: str) -> ValueError:
    return ValueError(f"bad etcd URL {url!r}: {why}; expected {URL_FORM}")


def parse_url(url: str) -> tuple[list[str], str]:
    """``etcd://h1:p1,h2:p2/loom`` -> ``(["http://h1:p1", "http://h2:p2"], "/loom/")``;
    ``etcds://`` gives ``https://`` endpoints."""
    scheme, sep, rest = url.partition("://")
    if scheme not in SCHEMES or not sep:
        raise _bad_url(url, "the scheme must be etcd:// or etcds:// (TLS)")
    hosts, _, path = rest.partition("/")
    if not hosts:
        raise _bad_url(url, "no host")
    endpoints = []
    for item in hosts.split(","):
        host, colon, port = item.rpartition(":")
        if not colon or not host:
            raise _bad_url(url, f"{item!r} is not HOST:PORT")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise _bad_url(url, f"bad port {port!r}")
        endpoints.append(f"{SCHEMES[scheme]}://{host}:{int(port)}")
    path = path.strip("/")
    return endpoints, f"/{path}/" if path else DEFAULT_PREFIX


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _key(key: str) -> str:
    return _b64(key.encode("utf-8", "surrogateescape"))


def _prefix_end(prefix: bytes) -> bytes:
    """The first key after every key starting with ``prefix`` (b"\\0": no end)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b"\0"
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _key_value(kv: Reply) -> KeyValue:
    return KeyValue(
        key=base64.b64decode(kv.get("key", "")).decode("utf-8", "surrogateescape"),
        value=base64.b64decode(kv.get("value", "")),
        create_revision=int(kv.get("create_revision", 0)),
        mod_revision=int(kv.get("mod_revision", 0)),
        lease=int(kv.get("lease", 0)),
    )


def _by_key(kv: KeyValue) -> str:
    return kv.key


class EtcdClient:
    """Requests go to the endpoint that answered last; on a connection error, a timeout or
    a 5xx the next endpoints are tried in turn, once each, then :class:`StoreUnavailable`.

    A write that timed out may still have been applied: retried elsewhere, a ``create``
    can then find its own key and return None. Callers that care read the key back.
    """

    def __init__(
        self, endpoints: Sequence[str], timeout: float = 0.5, access: EtcdAccess | None = None
    ) -> None:
        if not endpoints:
            raise ValueError("no etcd endpoints")
        self.access = access or EtcdAccess()
        secured = self.access != EtcdAccess()
        for endpoint in endpoints:
            parts = urlsplit(endpoint)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.port is None:
                raise ValueError(f"bad etcd endpoint {endpoint!r}: expected http[s]://HOST:PORT")
            if secured and parts.scheme != "https":
                raise ValueError(f"etcd endpoint {endpoint!r}: certificates and users need https")
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self.last_rtt = 0.0  # seconds of the last successful request
        self.revision = 0  # highest header.revision seen
        self.authentications = 0  # tokens obtained: the first, then each renewal
        self._current = 0
        https = any(e.startswith("https") for e in endpoints)
        self._tls = self.access.context() if https else None
        self._token: str | None = None

    # ------------------------------------------------------------- transport

    def _connection(self, endpoint: str) -> http.client.HTTPConnection:
        netloc = urlsplit(endpoint).netloc
        if endpoint.startswith("https"):
            return http.client.HTTPSConnection(netloc, timeout=self.timeout, context=self._tls)
        return http.client.HTTPConnection(netloc, timeout=self.timeout)

    def _post(self, endpoint: str, path: str, body: Reply, stream: bool) -> tuple[int, Reply]:
        headers = {"Content-Type": "application/json"}
        if self._token is not None and path != _AUTHENTICATE:
            headers["Authorization"] = self._token
        conn = self._connection(endpoint)
        try:
            conn.request("POST", path, json.dumps(body), headers=headers)
            response = conn.getresponse()
            # A stream (lease keepalive) answers one object per line: the first is ours.
            data = response.readline() if stream else response.read()
        finally:
            conn.close()
        try:
            reply = json.loads(data)
        except ValueError as exc:
            if 400 <= response.status < 500:  # refused in plain text before the gateway
                text = data[:300].decode("utf-8", "replace").strip()
                return response.status, {
                    "message": f"HTTP {response.status}: {text}",
                    "code": _PLAIN,
                }
            raise http.client.HTTPException(f"unreadable reply ({exc})") from None
        if not isinstance(reply, dict):
            raise http.client.HTTPException(f"unexpected reply {data[:80]!r}")
        if stream:  # {"result": {...}} or {"error": {"http_code": ..., "message": ...}}
            error = reply.get("error")
            if isinstance(error, dict):
                reply = {"message": error.get("message", ""), "code": error.get("grpc_code", 2)}
                return int(error.get("http_code", 500)), reply
            return response.status, reply.get("result", {})
        return response.status, reply

    def _send(self, path: str, body: Reply, stream: bool) -> Reply:
        failures: list[str] = []
        handshakes = 0  # endpoints that failed the TLS handshake: our certificate, or theirs
        count = len(self.endpoints)
        for step in range(count):
            index = (self._current + step) % count
            endpoint = self.endpoints[index]
            started = _clock()
            try:
                status, reply = self._post(endpoint, path, body, stream)
            except TimeoutError:
                failures.append(f"{endpoint} (no answer within {self.timeout:g} s)")
                continue
            except (OSError, http.client.HTTPException) as exc:
                handshakes += isinstance(exc, ssl.SSLError)
                failures.append(f"{endpoint} ({exc or type(exc).__name__})")
                continue
            if status >= 500 or status == _BUSY:
                failures.append(f"{endpoint} (HTTP {status}: {reply.get('message', '')})")
                continue
            self._current = index
            self.last_rtt = _clock() - started
            if status != 200:
                raise _Refused(str(reply.get("message", reply)), int(reply.get("code", 2)))
            revision = int(reply.get("header", {}).get("revision", 0))
            self.revision = max(self.revision, revision)
            return reply
        tried = ", ".join(failures)
        if handshakes == count:
            raise StoreAccessDenied(f"etcd refused TLS: tried {tried}")
        raise StoreUnavailable(f"etcd unavailable: tried {tried}")

    def _authenticate(self) -> None:
        user = self.access.user
        body = {"name": user, "password": self.access.password}
        try:
            reply = self._send(_AUTHENTICATE, body, stream=False)
        except _Refused as exc:
            raise StoreAccessDenied(f"etcd refused user {user!r}: {exc}") from None
        self._token = str(reply.get("token", ""))
        self.authentications += 1

    def _call(self, path: str, body: Reply, stream: bool = False) -> Reply:
        """One request, as the configured user: a token first if there is none yet, and
        a new one (then the request again) when etcd no longer takes ours."""
        if self.access.user is not None and self._token is None:
            self._authenticate()
        token = self._token
        try:
            return self._send(path, body, stream)
        except _Refused as exc:
            if self.access.user is not None and _stale_token(exc):
                if self._token == token:  # not renewed by another green thread meanwhile
                    self._authenticate()
                return self._again(path, body, stream)
            if _who_we_are(exc):
                raise StoreAccessDenied(f"etcd refused {path} to {self._who()}: {exc}") from None
            raise

    def _again(self, path: str, body: Reply, stream: bool) -> Reply:
        """The request again with a fresh token: a second refusal is no expiry."""
        try:
            return self._send(path, body, stream)
        except _Refused as exc:
            if _stale_token(exc) or _who_we_are(exc):
                raise StoreAccessDenied(f"etcd refused {path} to {self._who()}: {exc}") from None
            raise

    def _who(self) -> str:
        return f"user {self.access.user!r}" if self.access.user is not None else "nobody"

    # ------------------------------------------------------------- keys

    def get_prefix(self, prefix: str) -> Snapshot:
        start = prefix.encode("utf-8", "surrogateescape") or b"\0"
        body = {"key": _b64(start), "range_end": _b64(_prefix_end(start))}
        reply = self._call("/v3/kv/range", body)
        header = reply.get("header", {})
        items = tuple(sorted((_key_value(kv) for kv in reply.get("kvs", ())), key=_by_key))
        return Snapshot(int(header.get("revision", 0)), int(header.get("raft_term", 0)), items)

    def get(self, key: str) -> KeyValue | None:
        kvs = self._call("/v3/kv/range", {"key": _key(key)}).get("kvs", ())
        return _key_value(kvs[0]) if kvs else None

    def put(self, key: str, value: bytes, lease: int = 0) -> int:
        """Returns the revision of the write."""
        body = {"key": _key(key), "value": _b64(value), "lease": str(lease)}
        return int(self._call("/v3/kv/put", body)["header"]["revision"])

    def create(self, key: str, value: bytes, lease: int = 0) -> int | None:
        """Put only if ``key`` does not exist: the write's revision, or None if it did."""
        put = {"key": _key(key), "value": _b64(value), "lease": str(lease)}
        compare = {"key": _key(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
        reply = self._call("/v3/kv/txn", {"compare": [compare], "success": [{"request_put": put}]})
        return int(reply["header"]["revision"]) if reply.get("succeeded") else None

    def delete(self, key: str) -> int:
        """Returns the store's revision after the delete."""
        return int(self._call("/v3/kv/deleterange", {"key": _key(key)})["header"]["revision"])

    def delete_if_value(self, key: str, value: bytes) -> bool:
        """Delete ``key`` only if it holds ``value`` (a claim only its owner releases)."""
        compare = {"key": _key(key), "target": "VALUE", "result": "EQUAL", "value": _b64(value)}
        delete = {"request_delete_range": {"key": _key(key)}}
        reply = self._call("/v3/kv/txn", {"compare": [compare], "success": [delete]})
        return bool(reply.get("succeeded"))

    # ------------------------------------------------------------- leases

    def lease_grant(self, ttl: int) -> int:
        return int(self._call("/v3/lease/grant", {"TTL": str(ttl), "ID": "0"})["ID"])

    def lease_keepalive(self, lease: int) -> int:
        """Refresh ``lease``: its TTL in seconds again, 0 if it is gone.

        The gateway serves keepalive as a stream; a plain POST carries one request, and
        the first line of the reply is its answer.
        """
        return int(self._call("/v3/lease/keepalive", {"ID": str(lease)}, stream=True).get("TTL", 0))

    def lease_revoke(self, lease: int) -> None:
        """Revoke ``lease`` and delete its keys; an unknown lease is already revoked."""
        try:
            self._call("/v3/lease/revoke", {"ID": str(lease)})
        except _Refused as exc:
            if exc.code != _NOT_FOUND:
                raise
