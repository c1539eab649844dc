"""A small client for Loom's REST API, shared by ``loom-run`` and ``loom-job``.

JSON in and out over urllib, a bearer token when one is set, a timeout on every call.
Anything but a 2xx is a ``LoomError`` that carries the URL, the HTTP status and Loom's own
``error`` message (which names the offending key), so the tools can say exactly why a
job was refused, or that Loom could not be reached at all.
"""

from __future__ import annotations

import argparse
import http.client
import json
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

DEFAULT_API = "http://127.0.0.1:8080"
PREFIX = "/loom/v1"
ACTIVE = "active"


def monotonic() -> float:
    """The launcher's one clock: a client process waiting in real time, not the core."""
    return time.monotonic()


class LoomError(Exception):
    """A call Loom refused (``status`` is the HTTP status, ``message`` Loom's ``error``)
    or one that never reached it (``status`` is None)."""

    def __init__(
        self, method: str, url: str, status: int | None, message: str, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.method = method
        self.url = url
        self.status = status
        self.message = message
        self.field = field

    @property
    def unreachable(self) -> bool:
        return self.status is None

    def __str__(self) -> str:
        if self.status is None:
            return f"cannot reach Loom at {self.url}: {self.message}"
        named = "" if not self.field or self.message.startswith(self.field) else f" ({self.field})"
        return f"Loom refused {self.method} {self.url} (HTTP {self.status}): {self.message}{named}"


class Order(NamedTuple):
    hosts: list[str]  # every host asked about, in the advised rank order
    unknown: list[str]  # those Loom has not learned (at the end of ``hosts``)


class LoomClient:
    def __init__(
        self,
        api: str,
        token: str | None = None,
        timeout: float = 5.0,
        context: ssl.SSLContext | None = None,
    ) -> None:
        self.api = api.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.context = context  # for an https:// API: the CA it is checked against

    def call(self, method: str, path: str, body: object = None) -> dict[str, Any]:
        """One request; the answer's JSON object, or a ``LoomError`` saying why not."""
        url = f"{self.api}{PREFIX}/{path.lstrip('/')}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(
                request, timeout=self.timeout, context=self.context
            ) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            message, field = _refusal(exc.read())
            raise LoomError(method, url, exc.code, message, field) from None
        except urllib.error.URLError as exc:
            raise LoomError(method, url, None, str(exc.reason)) from None
        except TimeoutError:
            raise LoomError(method, url, None, f"no answer within {self.timeout:g} s") from None
        except (OSError, http.client.HTTPException) as exc:
            raise LoomError(method, url, None, str(exc) or type(exc).__name__) from None
        try:
            answer = json.loads(raw or b"{}")
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise LoomError(method, url, 200, f"expected a JSON object, got {_snippet(raw)}")
        return answer

    # -- the calls the tools make ------------------------------------------------------
    def order(self, hosts: Sequence[str]) -> Order:
        """Loom's topology-aware rank order for these hosts."""
        query = urllib.parse.quote(",".join(hosts), safe=",.:")
        answer = self.call("GET", f"order?hosts={query}")
        return Order(
            [str(h) for h in answer.get("hosts", [])], [str(h) for h in answer.get("unknown", [])]
        )

    def register(self, job: Mapping[str, object]) -> dict[str, Any]:
        return self.call("POST", "jobs", dict(job))

    def job(self, name: str) -> dict[str, Any]:
        return self.call("GET", f"jobs/{_quoted(name)}")

    def renew(self, name: str) -> dict[str, Any]:
        return self.call("POST", f"jobs/{_quoted(name)}/renew")

    def delete(self, name: str) -> dict[str, Any]:
        return self.call("DELETE", f"jobs/{_quoted(name)}")

    def wait_active(self, name: str, timeout: float, poll: float = 0.2) -> dict[str, Any]:
        """The job as last seen, once active or when ``timeout`` seconds have passed."""
        deadline = monotonic() + timeout
        pause = threading.Event()
        while True:
            job = self.job(name)
            if job.get("status") == ACTIVE or monotonic() >= deadline:
                return job
            pause.wait(poll)


def _quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _refusal(raw: bytes) -> tuple[str, str | None]:
    """Loom's ``error`` and ``field`` from a refusal; the raw text if it is not Loom's."""
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        field = body.get("field")
        return body["error"], field if isinstance(field, str) else None
    return _snippet(raw) or "(no message)", None


def _snippet(raw: bytes, limit: int = 200) -> str:
    text = raw.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- the options both tools share ----------------------------------------------------------
def add_api_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api", help=f"Loom's REST API (default: $LOOM_API, else {DEFAULT_API})")
    parser.add_argument("--token-file", help="a file holding the API token (default: $LOOM_TOKEN)")
    parser.add_argument(
        "--ca-file",
        help="PEM CA certificates an https:// API is checked against (default: $LOOM_CA_FILE, "
        "else the system's)",
    )
    parser.add_argument(
        "--cert-file",
        help="PEM client certificate, for an API that asks for one (default: $LOOM_CERT_FILE)",
    )
    parser.add_argument(
        "--key-file", help="its private key (default: $LOOM_KEY_FILE, else in --cert-file)"
    )


def client_from(
    args: argparse.Namespace, environ: Mapping[str, str], parser: argparse.ArgumentParser
) -> LoomClient:
    """The client ``--api``/``--token-file``/``--ca-file``/``--cert-file`` (or ``LOOM_API``/
    ``LOOM_TOKEN``/``LOOM_CA_FILE``/``LOOM_CERT_FILE``) describe; an unreadable token,
    CA or certificate file is a usage error."""
    api = args.api or environ.get("LOOM_API") or DEFAULT_API
    token = environ.get("LOOM_TOKEN") or None
    if args.token_file:
        try:
            token = Path(args.token_file).read_text().strip() or None
        except OSError as exc:
            parser.error(f"--token-file: {exc.strerror or exc}: {args.token_file}")
    return LoomClient(api, token, context=_tls_context(api, args, environ, parser))


def _tls_context(
    api: str, args: argparse.Namespace, environ: Mapping[str, str], parser: argparse.ArgumentParser
) -> ssl.SSLContext | None:
    """What ``--ca-file`` and ``--cert-file``/``--key-file`` (or their variables) ask of an
    https:// API: its CA, and a certificate of ours where the API asks for one."""
    ca_file = args.ca_file or environ.get("LOOM_CA_FILE") or None
    cert_file = args.cert_file or environ.get("LOOM_CERT_FILE") or None
    key_file = args.key_file or environ.get("LOOM_KEY_FILE") or None
    if ca_file is None and cert_file is None:
        if key_file is not None:
            parser.error("--key-file goes with --cert-file")
        return None
    option = "--ca-file" if ca_file is not None else "--cert-file"
    if not api.startswith("https://"):
        parser.error(f"{option} is for an https:// API, not {api}")
    try:
        context = ssl.create_default_context(cafile=ca_file)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        parser.error(f"--ca-file: expected PEM CA certificates: {ca_file} ({exc})")
    if cert_file is not None:
        try:
            context.load_cert_chain(cert_file, key_file)
        except (OSError, ValueError) as exc:
            parser.error(
                f"--cert-file: expected a PEM certificate and its key: {cert_file} ({exc})"
            )
    return context
