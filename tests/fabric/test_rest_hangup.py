"""A REST client that hangs up in the middle of its body, met as a user meets it: Ryu's
WSGI server on loopback, a raw socket that announces 1,000 bytes, sends 10 and closes.
The request is counted (``loom_api_aborted_requests_total``), logged in one line
without a traceback, answered with nothing, and changes nothing; the server goes on."""

from __future__ import annotations

import json
import logging
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest

from controller.api import LoomApi
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.metrics import LoomMetrics
from tests.restserver import ShimApp, serving
from tests.sim import LoomSim
from topologies import fat_tree

pytest.importorskip("ryu.app.wsgi")

HEAD = (
    b"POST /loom/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 1000\r\n\r\n"
)
PARTIAL = b'{"name": "'  # 10 of the 1,000 bytes announced


class Served:
    def __init__(self, sim: LoomSim, metrics: LoomMetrics, app: ShimApp, port: int) -> None:
        self.sim, self.metrics, self.app, self.port = sim, metrics, app, port

    def aborted(self) -> float | None:
        return self.metrics.registry.get_sample_value("loom_api_aborted_requests_total")


@pytest.fixture
def served() -> Iterator[Served]:
    sim = LoomSim(fat_tree(4), FabricConfig(te=TeConfig(enabled=False))).start()
    metrics = LoomMetrics(sim.core)
    app = ShimApp(metrics.shim)
    with serving(LoomApi(sim.core, lambda: sim.now), app) as port:
        yield Served(sim, metrics, app, port)


def _request(port: int, data: bytes, hang_up: str = "half-close") -> bytes:
    """Send ``data`` and hang up: ``half-close`` only our side, so whatever the server
    answers is still read back; ``close`` the socket, as a client that gave up; ``reset``
    it (RST), as a client that crashed."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        if hang_up == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.sendall(data)
        if hang_up != "half-close":
            return b""
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


def _wait_for(condition: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _access_log(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The server's access-log lines for the job request: written once it is done."""
    said = [r.getMessage() for r in caplog.records if r.name == "ryu.lib.hub"]
    return [line for line in said if "POST /loom/v1/jobs" in line]


@pytest.mark.parametrize("hang_up", ["half-close", "close", "reset"])
def test_a_client_hanging_up_mid_body_is_counted_logged_once_and_not_answered(
    served: Served, caplog: pytest.LogCaptureFixture, hang_up: str
) -> None:
    caplog.set_level(logging.DEBUG)
    jobs = dict(served.sim.view.jobs)
    answer = _request(served.port, HEAD + PARTIAL, hang_up)
    _wait_for(lambda: bool(_access_log(caplog)))
    assert answer == b"", f"answered a client that hung up: {answer[:200]!r}"
    assert '" 499 0 ' in _access_log(caplog)[0]  # nothing written, and not called a 200
    records = [r for r in caplog.records if r.name.startswith(("loom", "ryu", "eventlet"))]
    assert not any(r.exc_info or "Traceback" in r.getMessage() for r in records), [
        r.getMessage() for r in records
    ]
    said = [r.getMessage() for r in records if r.name.startswith("loom")]
    assert len(said) == 1 and "hung up" in said[0] and "/loom/v1/jobs" in said[0], said
    assert served.aborted() == 1
    assert served.metrics.shim.handler_errors["rest"] == 0  # not a bug of Loom's
    assert dict(served.sim.view.jobs) == jobs and served.app.sent == []
    health = _request(served.port, b"GET /loom/v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
    head, _, body = health.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head  # the server goes on
    assert json.loads(body)["switches"] == 20
