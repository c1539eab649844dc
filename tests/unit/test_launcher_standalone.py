"""The launcher on a GPU node: ``loom-run`` and ``loom-job`` need Python's standard
library alone (no Ryu, no controller requirements), so a node without the controller's
packages can run them from a checkout (``docs/launcher.md``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import importlib, json, pkgutil, sys
sys.path.insert(0, sys.argv[1])
import controller.launcher as launcher
for m in pkgutil.iter_modules(launcher.__path__):
    importlib.import_module("controller.launcher." + m.name)
from controller.launcher import cli, jobcli
for main in (cli.main, jobcli.main):
    try:
        main(["--help"])
    except SystemExit as done:
        assert done.code == 0, done.code
names = sorted(sys.modules)
rest = [n for n in names if n.startswith("controller.") and "launcher" not in n]
print(json.dumps({"controller": rest, "site": [p for p in sys.path if "site-packages" in p]}))
"""


def test_the_launcher_runs_with_python_alone() -> None:
    """``-S -I``: no site-packages and no environment, as on a node with bare Python;
    every launcher module imports, both commands answer ``--help``, and nothing of the
    rest of the controller is loaded but the
    bounds it shares with the job model."""
    run = subprocess.run(
        [sys.executable, "-S", "-I", "-c", PROBE, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen == {"controller": ["controller.joblimits"], "site": []}, seen


def test_the_docs_say_how_to_install_it_on_a_gpu_node() -> None:
    doc = (ROOT / "docs/launcher.md").read_text()
    assert "python3 -m controller.launcher.cli" in doc
    assert "python3 -m controller.launcher.jobcli" in doc


@pytest.mark.slow
def test_the_wheel_installs_on_a_node_with_python_alone(tmp_path: Path) -> None:
    """Loom's wheel, built from the tracked files, installs into a bare venv from no
    index (it requires nothing), and ``loom-run`` and ``loom-job`` answer there with no
    Ryu in reach."""
    src, wheels, node = tmp_path / "src", tmp_path / "wheels", tmp_path / "node"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = ["wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src)]
    subprocess.run([*pip, *build], check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("loom-*.whl")
    subprocess.run(
        ["/usr/bin/python3", "-m", "venv", "--without-pip", str(node)], check=True, timeout=60
    )
    install = ["--python", str(node / "bin/python"), "install", "--no-index", str(wheel)]
    run = subprocess.run([*pip, *install], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    for command in ("loom-run", "loom-job"):
        answer = subprocess.run(
            [str(node / "bin" / command), "--help"], capture_output=True, text=True, timeout=60
        )
        assert answer.returncode == 0 and "usage" in answer.stdout, answer.stderr
    ryu = subprocess.run([str(node / "bin/python"), "-c", "import ryu"], capture_output=True)
    assert ryu.returncode != 0
