"""``loom-job`` against the real REST API over HTTP (``LoomApi`` on the fake fabric):
register, renew, delete and order as a prolog and an epilog use them; exit codes 0, 2
and 3; a refusal names the key Loom objected to."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator

import pytest

from controller.launcher.jobcli import main
from controller.policy import parse_policy
from tests.unit.test_launcher import BIN, CLEAN_ENV, TOKEN, LoomServer, free_port


@pytest.fixture
def loom(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoomServer]:
    server = LoomServer()
    monkeypatch.setenv("LOOM_API", server.url)
    monkeypatch.setenv("LOOM_TOKEN", TOKEN)
    yield server
    server.close()


def loom_job(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``loom-job ARGV`` in this process: (exit status, stdout, stderr)."""
    try:
        status = main(argv)
    except SystemExit as stop:  # argparse's usage errors
        status = int(stop.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def test_register_renew_delete_as_a_prolog_and_epilog_would(
    loom: LoomServer, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = loom.ips(4)
    advised = loom.handle("GET", "/loom/v1/order", {"hosts": ",".join(hosts)}).body["hosts"]
    assert advised != hosts
    args = ["--tenant", "t", "--job", "slurm-7", "--hosts", ",".join(hosts), "--order"]
    shares = ["--priority", "4", "--weight", "2"]
    status, out, _ = loom_job(capsys, "register", *args, *shares, "--lease", "5")
    assert status == 0 and out.strip().endswith(f"rank order {','.join(advised)}"), out
    job = loom.job("slurm-7")
    assert job is not None and job["hosts"] == advised and job["lease_seconds"] == 5
    assert (job["priority"], job["weight"]) == (4, 2)
    assert job["status"] == "active"
    for _ in range(3):  # 12 s on a 5 s lease, renewed every 4 s: kept
        loom.advance(4.0)
        status, out, _ = loom_job(capsys, "renew", "--job", "slurm-7")
        assert status == 0 and "expires in 5" in out, out
    assert loom.job("slurm-7") is not None
    status, out, _ = loom_job(capsys, "delete", "--job", "slurm-7")
    assert (status, out) == (0, "job slurm-7: deleted\n")
    assert loom.job("slurm-7") is None
    status, out, _ = loom_job(capsys, "delete", "--job", "slurm-7")  # epilog after a failure
    assert status == 0 and "nothing to delete" in out


def test_a_lease_left_alone_expires_and_no_lease_stays(
    loom: LoomServer, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, c, d = loom.ips(4)
    leased = f"register --tenant t --job short --hosts {a},{b} --lease 2"
    unleased = f"register --tenant t --job kept --hosts {c},{d} --no-lease"
    assert loom_job(capsys, *leased.split())[0] == 0
    assert loom_job(capsys, *unleased.split())[0] == 0
    loom.advance(2.5)
    assert loom.job("short") is None
    kept = loom.job("kept")
    assert kept is not None and "lease_seconds" not in kept
    status, _, err = loom_job(capsys, "renew", "--job", "kept")
    assert status == 3 and "HTTP 409" in err and "no lease" in err, err


def test_order_prints_the_advised_order_unknown_hosts_last(
    loom: LoomServer, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = [*loom.ips(6, seed=9), "10.9.9.9"]
    expected = loom.handle("GET", "/loom/v1/order", {"hosts": ",".join(hosts)}).body["hosts"]
    status, out, err = loom_job(capsys, "order", "--hosts", ",".join(hosts))
    assert status == 0 and out == ",".join(expected) + "\n"
    assert expected[-1] == "10.9.9.9" and "has not learned 10.9.9.9" in err, err


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"--job": "twice"}, "(HTTP 409): name: a job named 'twice' exists"),
        ({"--tenant": "Research"}, "(HTTP 400): tenant: 'Research' is not a tenant name"),
        ({"--lease": "90000"}, "--lease: expected 1 to 86400 seconds"),
    ],
)
def test_refusals_say_why_and_exit_3(
    loom: LoomServer, capsys: pytest.CaptureFixture[str], change: dict[str, str], said: str
) -> None:
    a, b, c, d = loom.ips(4)
    first = ["--tenant", "t", "--job", "twice", "--hosts", f"{a},{b}"]
    assert loom_job(capsys, "register", *first)[0] == 0
    options = {"--tenant": "t", "--job": "other", "--hosts": f"{c},{d}", **change}
    status, _, err = loom_job(capsys, "register", *[x for kv in options.items() for x in kv])
    assert status == (2 if change.keys() == {"--lease"} else 3), err
    assert said in err, err
    assert "other" not in {j["name"] for j in loom.handle("GET", "/loom/v1/jobs", {}).body["jobs"]}


def test_without_the_token_loom_refuses(
    loom: LoomServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOOM_TOKEN")
    status, _, err = loom_job(capsys, "delete", "--job", "any")
    assert status == 3 and "(HTTP 401)" in err and "Authorization: Bearer" in err, err


def test_a_tenant_token_changes_its_own_tenants_jobs_alone(
    loom: LoomServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = loom.sim.graph
    members = {"red": range(1, 9), "blue": range(9, 17)}
    text = "tenants:\n"
    for tenant, numbers in members.items():
        hosts = ", ".join(f"{{ip: {graph.nodes[f'h{i}']['ip']}}}" for i in numbers)
        secret = hashlib.sha256(f"{tenant}-token".encode()).hexdigest()
        text += f"  - name: {tenant}\n    hosts: [{hosts}]\n"
        text += f"    tokens: [{{name: slurm, digest: 'sha256:{secret}'}}]\n"
    with loom.lock:
        loom.sim.apply(loom.sim.core.apply_policy(loom.sim.now, parse_policy(text)))

    def shown(job: str) -> int:  # as the admin sees it
        return loom.handle("GET", f"/loom/v1/jobs/{job}", {}, b"", f"Bearer {TOKEN}").status

    red = ",".join(graph.nodes[f"h{i}"]["ip"] for i in (1, 2))
    blue = ",".join(graph.nodes[f"h{i}"]["ip"] for i in (9, 10))
    monkeypatch.setenv("LOOM_TOKEN", "red-token")
    assert loom_job(capsys, "register", "--tenant", "red", "--job", "r", "--hosts", red)[0] == 0
    status, _, err = loom_job(capsys, "register", "--tenant", "blue", "--job", "b", "--hosts", blue)
    assert status == 3 and "(HTTP 403)" in err and "tenant 'blue'" in err, err
    monkeypatch.setenv("LOOM_TOKEN", "blue-token")
    assert loom_job(capsys, "register", "--tenant", "blue", "--job", "b", "--hosts", blue)[0] == 0
    status, out, _ = loom_job(capsys, "delete", "--job", "r")  # red's, unseen by blue
    assert status == 0 and "not on Loom, nothing to delete" in out and shown("r") == 200, out
    monkeypatch.setenv("LOOM_TOKEN", "red-token")
    assert loom_job(capsys, "delete", "--job", "r")[0] == 0 and shown("r") == 404


def test_loom_unreachable_exits_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    api = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("LOOM_API", api)
    status, _, err = loom_job(capsys, "delete", "--job", "gone")
    assert status == 3 and f"cannot reach Loom at {api}/loom/v1/jobs/gone" in err, err


@pytest.mark.parametrize(
    "argv",
    [
        "register --tenant t --hosts 10.0.0.2,10.0.0.3",  # no --job
        "register --tenant t --job j --hosts 10.0.0.2,nope",
        "register --tenant t --job j --hosts 10.0.0.2,10.0.0.3 --lease 5 --no-lease",
        "register --tenant t --job j --hosts 10.0.0.2,10.0.0.3 --weight 0",
        "register --tenant t --job j --hosts 10.0.0.2,10.0.0.3 --priority 1001",
        "order",
        "resize --job j",
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: str) -> None:
    status, _, err = loom_job(capsys, *argv.split())
    assert status == 2 and "usage: loom-job" in err, err


def test_the_console_script_is_installed(loom: LoomServer) -> None:
    hosts = ",".join(loom.ips(2))
    done = subprocess.run(
        [str(BIN / "loom-job"), "order", "--hosts", hosts, "--api", loom.url],
        env=CLEAN_ENV,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.strip().split(",")) == sorted(hosts.split(","))
