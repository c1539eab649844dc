"""``loom-run``: its options and pure parts, then the real thing as a subprocess against
the real REST API over HTTP (``LoomApi`` on the fake fabric, its clock following real
time so leases run out as they would): the job is active while the command runs, gone
after it, left to expire when the launcher is killed, and Loom being down never stops
the command unless ``--strict``. Two launchers meet through a real TCPStore."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from controller.api import LoomApi, Response
from controller.conductor import FabricConfig
from controller.engineer import TeConfig
from controller.launcher.child import Placement
from controller.launcher.client import LoomClient, LoomError
from controller.launcher.options import parse_run
from controller.launcher.rendezvous import RendezvousError, source_address
from tests.sim import LoomSim
from topologies import fat_tree
from topologies.graph import host_list

TOKEN = "s3cret"
BIN = Path(sys.executable).parent
CLEAN_ENV = {
    k: v
    for k, v in os.environ.items()
    if not k.startswith(("LOOM_", "SLURM_", "MASTER_")) and k not in ("WORLD_SIZE", "NODE_RANK")
}


class LoomServer:
    """The real ``LoomApi`` on a fake fat-tree, served over HTTP on 127.0.0.1. While
    ``clock_running`` the sim's clock follows real time (so leases expire); every
    request is recorded as (method, path, status)."""

    def __init__(self) -> None:
        self.sim = LoomSim(
            fat_tree(4), FabricConfig(link_capacity_mbps=10.0, te=TeConfig(enabled=False))
        ).start()
        self.lock = threading.Lock()
        self.api = LoomApi(self.sim.core, lambda: self.sim.now, TOKEN)
        self.requests: list[tuple[str, str, int]] = []
        self.clock_running = threading.Event()
        self._closed = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._threads = [
            threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True),
            threading.Thread(target=self._follow_real_time, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                auth = self.headers.get("Authorization", "")
                res = server.handle(self.command, url.path, query, body, auth)
                server.requests.append((self.command, url.path, res.status))
                payload = json.dumps(res.body).encode()
                self.send_response(res.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def handle(
        self, method: str, path: str, query: dict[str, str], body: bytes = b"", auth: str = ""
    ) -> Response:
        with self.lock:
            res = self.api.handle(method, path, query, body, auth)
            self.sim.apply(res.messages)
            return res

    def _follow_real_time(self, step: float = 0.1) -> None:
        owed, last = 0.0, time.monotonic()
        while not self._closed.wait(step / 2):
            now = time.monotonic()
            owed, last = (owed + now - last if self.clock_running.is_set() else 0.0), now
            if owed >= step:
                steps = int(owed / step)
                owed -= steps * step
                self.advance(steps * step)

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.sim.advance(seconds)

    def job(self, name: str) -> dict[str, Any] | None:
        res = self.handle("GET", f"/loom/v1/jobs/{name}", {})
        return res.body if res.status == 200 else None

    def ips(self, count: int, seed: int = 1) -> list[str]:
        """``count`` host addresses from all over the fabric, in no useful order."""
        names = host_list(self.sim.graph)
        random.Random(seed).shuffle(names)
        return [self.sim.graph.nodes[h]["ip"] for h in names[:count]]

    def close(self) -> None:
        self._closed.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def loom() -> Iterator[LoomServer]:
    server = LoomServer()
    yield server
    server.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# The command loom-run starts: records what it sees of itself and of its job on Loom, at
# its start and at its end (after HOLD seconds or at SIGTERM), then exits with CODE.
CHILD = r"""
import json, os, signal, sys, time, urllib.error, urllib.request
rank_arg, api, out = sys.argv[1:4]
hold, code = float(sys.argv[4]), int(sys.argv[5])
def job():
    try:
        with urllib.request.urlopen(f"{api}/loom/v1/jobs/{os.environ['LOOM_JOB']}", timeout=5) as r:
            return json.load(r)
    except urllib.error.HTTPError as exc:
        return {"http": exc.code}
    except OSError as exc:
        return {"unreachable": str(exc)}
seen = {"env": {k: v for k, v in os.environ.items() if k.startswith("LOOM_")},
        "rank_arg": rank_arg, "pid": os.getpid(), "at_start": job()}
def finish(signum=None, frame=None):
    seen["signal"], seen["at_end"] = signum, job()
    with open(out + ".tmp", "w") as f:
        json.dump(seen, f)
    os.replace(out + ".tmp", out)
    sys.exit(code)
signal.signal(signal.SIGTERM, finish)
with open(out + ".started", "w") as f:
    f.write(str(os.getpid()))
time.sleep(hold)
finish()
"""


def loom_run(
    options: str, api: str, out: Path, hold: float = 0.0, code: int = 0, **env: str
) -> subprocess.Popen[str]:
    """``loom-run --api API OPTIONS -- python -c CHILD``, with only ``env`` added to a
    clean environment (no scheduler's or Loom's variables from the test's own)."""
    command = [sys.executable, "-c", CHILD, "{loom_rank}", api, str(out), str(hold), str(code)]
    return subprocess.Popen(
        [str(BIN / "loom-run"), "--api", api, *options.split(), "--", *command],
        env={**CLEAN_ENV, **env},
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def seen_by(out: Path) -> dict[str, Any]:
    return dict(json.loads(out.read_text()))


# -- options and pure parts ------------------------------------------------------------------
def test_defaults_come_from_the_scheduler_environment() -> None:
    env = {
        "SLURM_NNODES": "4",
        "SLURM_NODEID": "2",
        "SLURM_JOB_ID": "77",
        "WORLD_SIZE": "99",
        "NODE_RANK": "98",
        "MASTER_ADDR": "10.0.0.9",
        "MASTER_PORT": "29400",
        "LOOM_API": "http://loom:9000",
        "LOOM_TOKEN": "tok",
    }
    options, client = parse_run(["--tenant", "t", "--", "train"], env)
    assert (options.nnodes, options.node_rank, options.job) == (4, 2, "slurm-77")
    assert (options.rdzv_host, options.store_port) == ("10.0.0.9", 29401)
    assert (client.api, client.token) == ("http://loom:9000", "tok")
    assert options.command == ("train",) and options.lease == 30 and options.order


def test_torchrun_variables_then_flags_win(tmp_path: Path) -> None:
    env = {"WORLD_SIZE": "3", "NODE_RANK": "1", "MASTER_ADDR": "h0", "LOOM_TOKEN": "env"}
    options, _ = parse_run(["--tenant", "t", "--", "x", "--", "y"], env)
    assert (options.nnodes, options.node_rank, options.rdzv_host) == (3, 1, "h0")
    assert options.command == ("x", "--", "y") and options.job is None
    token = tmp_path / "token"
    token.write_text("from-file\n")
    flags = ["--tenant", "t", "--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "h1:500"]
    options, client = parse_run([*flags, "--token-file", str(token), "--", "x"], env)
    assert (options.nnodes, options.node_rank, options.rdzv_host) == (2, 0, "h1")
    assert options.store_port == 501 and client.token == "from-file"


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h"], "node rank 2 is not in"),
        (["--nnodes", "2"], "--rdzv-endpoint (or $MASTER_ADDR) or --hosts is needed"),
        (["--nnodes", "0"], "--nnodes: expected 1 or more"),
        (["--nnodes", "3", "--hosts", "10.0.0.2,10.0.0.3"], "--hosts lists 2 addresses"),
        (["--hosts", "10.0.0.2,10.0.0.2"], "appears more than once"),
        (["--hosts", "10.0.0.2,10.0.0.3", "--node-rank", "1"], "needs --job"),
        (["--address", "host1"], "'host1' is not an IPv4 address"),
        (["--lease", "0"], "--lease: expected 1 to 86400"),
        (["--weight", "101"], "--weight: expected a whole number 1-100, got '101'"),
        (["--priority", "high"], "--priority: expected a whole number 0-1000"),
        (["--token-file", "/nonexistent/token"], "--token-file"),
    ],
)
def test_usage_errors_exit_2_and_say_why(
    argv: list[str], why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        parse_run(["--tenant", "t", *argv, "--", "train"], {})
    assert stop.value.code == 2
    assert why in capsys.readouterr().err


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_run(["--tenant", "t"], {})
    assert "expected -- COMMAND" in capsys.readouterr().err


def test_tokens_in_arguments_and_environment() -> None:
    placement = Placement("llm", ("10.0.1.2", "10.0.0.2", "10.2.0.3"), 2)
    args = ["--node-rank", "{loom_rank}", "--master-addr={loom_master}", "{loom_world_size}"]
    assert placement.substitute([*args, "{loom_job}", "{other}"]) == [
        "--node-rank",
        "2",
        "--master-addr=10.0.1.2",
        "3",
        "llm",
        "{other}",
    ]
    assert placement.environment() == {
        "LOOM_JOB": "llm",
        "LOOM_RANK": "2",
        "LOOM_WORLD_SIZE": "3",
        "LOOM_HOSTS": "10.0.1.2,10.0.0.2,10.2.0.3",
        "LOOM_MASTER": "10.0.1.2",
    }


def test_address_is_the_kernels_source_towards_the_rendezvous() -> None:
    assert source_address("127.0.0.1") == "127.0.0.1"
    with pytest.raises(RendezvousError, match="pass --address"):
        source_address("no-such-host.invalid")


def test_client_errors_carry_url_status_and_the_key(loom: LoomServer) -> None:
    client = LoomClient(loom.url, TOKEN)
    with pytest.raises(LoomError) as refused:
        client.register({"name": "j", "tenant": "t", "hosts": ["10.0.0.2", "10.0.0.300"]})
    text = str(refused.value)
    assert refused.value.status == 400 and refused.value.field == "hosts[1]"
    assert f"POST {loom.url}/loom/v1/jobs (HTTP 400)" in text and "hosts[1]" in text, text
    with pytest.raises(LoomError) as unauthorized:
        LoomClient(loom.url).delete("j")
    assert unauthorized.value.status == 401 and "Authorization" in str(unauthorized.value)
    port = free_port()
    with pytest.raises(LoomError) as down:
        LoomClient(f"http://127.0.0.1:{port}").order(["10.0.0.2"])
    assert down.value.unreachable
    assert f"cannot reach Loom at http://127.0.0.1:{port}/loom/v1/order" in str(down.value)


# -- loom-run against the real API ---------------------------------------------------------
def test_job_is_active_while_the_command_runs_and_gone_after(
    loom: LoomServer, tmp_path: Path
) -> None:
    loom.clock_running.set()
    hosts = loom.ips(4)
    advised = loom.handle("GET", "/loom/v1/order", {"hosts": ",".join(hosts)}).body["hosts"]
    assert advised != hosts  # else the test could not tell that the order was asked for
    token, out = tmp_path / "token", tmp_path / "seen.json"
    token.write_text(TOKEN)
    options = f"--tenant research --job llm --hosts {','.join(hosts)} --node-rank 0 --lease 2"
    options += " --weight 3"
    run = loom_run(f"{options} --token-file {token}", loom.url, out, hold=3.0, code=5)
    _, err = run.communicate(timeout=20)
    assert run.returncode == 5, err
    seen = seen_by(out)
    assert seen["at_start"]["status"] == "active", seen
    assert seen["at_start"]["hosts"] == advised and seen["at_start"]["lease_seconds"] == 2
    assert (seen["at_start"]["priority"], seen["at_start"]["weight"]) == (0, 3)
    assert seen["at_end"]["status"] == "active", seen  # 3 s on a 2 s lease: renewed
    assert ("POST", "/loom/v1/jobs/llm/renew", 200) in loom.requests
    rank = advised.index(hosts[0])  # node rank 0 is hosts[0], wherever Loom ranks it
    assert seen["env"] == {
        "LOOM_JOB": "llm",
        "LOOM_RANK": str(rank),
        "LOOM_WORLD_SIZE": "4",
        "LOOM_HOSTS": ",".join(advised),
        "LOOM_MASTER": advised[0],
    }
    assert seen["rank_arg"] == str(rank)
    assert loom.job("llm") is None
    assert ("DELETE", "/loom/v1/jobs/llm", 200) in loom.requests


def test_sigterm_reaches_the_command_then_the_job_is_deleted(
    loom: LoomServer, tmp_path: Path
) -> None:
    out = tmp_path / "seen.json"
    options = f"--tenant t --job cancelled --hosts {','.join(loom.ips(2))}"
    run = loom_run(options, loom.url, out, hold=30, code=143, LOOM_TOKEN=TOKEN)
    wait_for(Path(f"{out}.started"))
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=10)
    assert run.returncode == 143, err
    seen = seen_by(out)
    assert seen["signal"] == signal.SIGTERM and seen["at_end"]["status"] == "active"
    assert loom.job("cancelled") is None


def test_a_killed_launcher_leaves_the_job_to_its_lease(loom: LoomServer, tmp_path: Path) -> None:
    loom.clock_running.set()
    out = tmp_path / "seen.json"
    options = f"--tenant t --job orphan --hosts {','.join(loom.ips(4))} --lease 3"
    run = loom_run(options, loom.url, out, hold=30, LOOM_TOKEN=TOKEN)
    started = Path(f"{out}.started")
    wait_for(started)
    child = int(started.read_text())
    try:
        run.kill()
        run.wait(timeout=5)
        loom.clock_running.clear()
        job = loom.job("orphan")
        assert job is not None and job["status"] == "active"  # nobody deleted it
        assert 0 < job["expires_in"] <= 3
        loom.advance(job["expires_in"] - 0.2)
        assert loom.job("orphan") is not None
        loom.advance(0.5)  # the lease ran out with no renewal: Loom deleted the job
        assert loom.job("orphan") is None
    finally:
        os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize("strict", [False, True])
def test_loom_down_runs_the_command_unless_strict(tmp_path: Path, strict: bool) -> None:
    api = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "seen.json"
    options = "--tenant t --hosts 10.0.0.2,10.0.0.3" + " --strict" * strict
    run = loom_run(options, api, out, code=4)
    _, err = run.communicate(timeout=10)
    assert f"cannot reach Loom at {api}/loom/v1/order" in err and "refused" in err, err
    if strict:
        assert run.returncode == 3 and not out.exists(), err
    else:
        assert run.returncode == 4, err
        assert seen_by(out)["env"]["LOOM_HOSTS"] == "10.0.0.2,10.0.0.3"


def test_a_refused_job_is_explained_and_the_command_still_runs(
    loom: LoomServer, tmp_path: Path
) -> None:
    out = tmp_path / "seen.json"
    options = f"--tenant Research --job x --hosts {','.join(loom.ips(2))}"
    run = loom_run(options, loom.url, out, LOOM_TOKEN=TOKEN)
    _, err = run.communicate(timeout=10)
    assert run.returncode == 0, err
    assert f"Loom refused POST {loom.url}/loom/v1/jobs (HTTP 400): tenant:" in err, err
    assert seen_by(out)["at_start"] == {"http": 404}


def test_two_nodes_meet_through_a_tcp_store(loom: LoomServer, tmp_path: Path) -> None:
    if importlib.util.find_spec("torch") is None:  # looked up, not imported: 3 s saved
        pytest.skip("PyTorch is not installed: no TCPStore")
    a, b = loom.ips(2, seed=5)
    endpoint = f"127.0.0.1:{free_port() - 1}"  # the store takes the port after it
    common = f"--tenant t --nnodes 2 --rdzv-endpoint {endpoint} --rdzv-timeout 20"
    runs = [  # the follower first: it waits for node rank 0's store
        loom_run(
            f"{common} --node-rank {rank} --address {address}",
            loom.url,
            tmp_path / f"node{rank}.json",
            hold=1.5,
            LOOM_TOKEN=TOKEN,
            SLURM_JOB_ID="4242",
        )
        for rank, address in ((1, b), (0, a))
    ]
    for run in runs:
        _, err = run.communicate(timeout=30)
        assert run.returncode == 0, err
    seen = [seen_by(tmp_path / f"node{rank}.json") for rank in (0, 1)]
    hosts = seen[0]["env"]["LOOM_HOSTS"].split(",")
    assert sorted(hosts) == sorted([a, b])
    assert {s["env"]["LOOM_HOSTS"] for s in seen} == {",".join(hosts)}
    assert [s["env"]["LOOM_RANK"] for s in seen] == [str(hosts.index(a)), str(hosts.index(b))]
    for s in seen:  # registered before either command started, by node rank 0 alone
        assert s["env"]["LOOM_JOB"] == "slurm-4242" and s["env"]["LOOM_MASTER"] == hosts[0]
        assert s["at_start"]["status"] == "active" and s["at_start"]["hosts"] == hosts
    registrations = [r for r in loom.requests if r[:2] == ("POST", "/loom/v1/jobs")]
    assert registrations == [("POST", "/loom/v1/jobs", 201)]
    assert loom.job("slurm-4242") is None
