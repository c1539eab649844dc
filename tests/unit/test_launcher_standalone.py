"""The launcher on a GPU node: ``loom-run`` and ``loom-job`` need Python's standard
library alone (no Ryu, no controller requirements), so a node without the controller's
packages can run them from a checkout (``docs/launcher.md``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
