"""The OpenFlow listener a user's ``ryu-manager controller/app.py`` starts, when its port
is taken (another controller runs there): one clear line and the process ends, where the
framework alone logged a traceback and went on with no switch able to connect."""

from __future__ import annotations

import importlib
import logging
import socket
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest

from controller.ofp.compat import FRAMEWORK
from controller.ofp.tls import EXIT_CANNOT_LISTEN, install

pytest.importorskip(f"{FRAMEWORK}.controller.controller")


class Stopped(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _stop(code: int) -> NoReturn:
    raise Stopped(code)


@pytest.fixture
def framework() -> Iterator[Any]:
    module: Any = importlib.import_module(f"{FRAMEWORK}.controller.controller")
    before = module.StreamServer
    install(lambda addr, why: None, stop=_stop)
    yield module
    module.StreamServer = before


def test_a_taken_openflow_port_ends_the_controller_with_one_clear_line(
    framework: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with caplog.at_level(logging.CRITICAL, logger="loom.ofp"), pytest.raises(Stopped) as end:
            framework.StreamServer(("127.0.0.1", port), lambda sock, addr: None)
    assert end.value.code == EXIT_CANNOT_LISTEN
    said = [r.getMessage() for r in caplog.records if r.name == "loom.ofp"]
    assert said == [
        f"cannot listen for switches on 127.0.0.1:{port}: Address already in use; is another"
        " controller running there? (--ofp-tcp-listen-port, --ofp-ssl-listen-port)"
    ]


def test_a_free_port_is_listened_on_as_before(framework: Any) -> None:
    server = framework.StreamServer(("127.0.0.1", 0), lambda sock, addr: None)
    try:
        assert server.server.getsockname()[1] > 0
    finally:
        server.server.close()
