"""``loom-export``: the fabric Loom learned, in the formats schedulers read.

Fetches ``GET /loom/v1/topology/hosts`` (or reads a saved copy with ``--from-file``),
names nodes from an ``/etc/hosts``-format file (an address not in it keeps its IP) and
writes one of: ``slurm-conf`` (topology.conf, topology/tree), ``slurm-yaml``
(topology.yaml: topology/block and topology/tree), ``k8s-labels`` (``kubectl label``
commands) or ``hosts`` (the host map as JSON, for ``--from-file`` later).

Exit status: 0 written; 1 the output could not be written; 3 Loom unreachable or it
refused; 4 the host map or the hosts file is unreadable or invalid.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from controller.schedulers import (
    HostMap,
    header,
    kubernetes_labels,
    slurm_topology_conf,
    slurm_topology_yaml,
)

DEFAULT_API = "http://127.0.0.1:8080"
HOSTS_PATH = "/loom/v1/topology/hosts"
TIMEOUT_S = 10.0
MAX_BYTES = 64 * 1024 * 1024  # a 100,000-host map is ~15 MB of JSON


class ExportError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def fetch(api: str, timeout: float = TIMEOUT_S) -> object:
    """The host map Loom serves, as parsed JSON; ExportError(3) naming the URL if not."""
    url = api.rstrip("/") + HOSTS_PATH
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            body = reply.read(MAX_BYTES + 1)
    except urllib.error.HTTPError as err:
        detail = err.read(512).decode("utf-8", "replace").strip()
        raise ExportError(3, f"GET {url}: HTTP {err.code} {err.reason}: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise ExportError(3, f"GET {url}: Loom unreachable: {reason}") from None
    if len(body) > MAX_BYTES:
        raise ExportError(4, f"GET {url}: answer larger than {MAX_BYTES} bytes")
    return _json(body, f"GET {url}")


def _json(body: bytes, where: str) -> object:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise ExportError(4, f"{where}: not JSON: {err}") from None


def read_hosts_file(text: str) -> dict[str, str]:
    """IP -> the first name on its line, ``/etc/hosts`` style (the first line wins)."""
    names: dict[str, str] = {}
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 2:
            names.setdefault(words[0], words[1])
    return names


def kubectl_script(hm: HostMap, node_name: Callable[[str], str]) -> str:
    """The Kubernetes labels as ``kubectl label`` commands, one per node."""
    lines = [header(hm).rstrip("\n")]
    for node, labels in kubernetes_labels(hm, node_name).items():
        words = [node, *(f"{k}={v}" for k, v in labels.items())]
        lines.append("kubectl label node --overwrite " + " ".join(shlex.quote(w) for w in words))
    return "\n".join(lines) + "\n"


RENDER: dict[str, Callable[[HostMap, Callable[[str], str]], str]] = {
    "slurm-conf": slurm_topology_conf,
    "slurm-yaml": slurm_topology_yaml,
    "k8s-labels": kubectl_script,
    "hosts": lambda hm, _: json.dumps(hm.as_dict(), indent=2) + "\n",
}


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` in one step (a reader never sees half a file), keeping its mode."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="loom-export",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("format", choices=sorted(RENDER), help="what to write")
    parser.add_argument(
        "--api",
        metavar="URL",
        default=os.environ.get("LOOM_API") or DEFAULT_API,
        help=f"Loom's REST API (default: $LOOM_API, else {DEFAULT_API})",
    )
    parser.add_argument(
        "--from-file",
        type=Path,
        metavar="JSON",
        help="a saved host map (JSON) instead of asking Loom",
    )
    parser.add_argument(
        "--hosts-file", type=Path, metavar="FILE", help="IP -> node name, /etc/hosts format"
    )
    parser.add_argument(
        "--out", type=Path, metavar="FILE", help="write here (atomically) instead of stdout"
    )
    parser.add_argument(
        "--timeout", type=float, default=TIMEOUT_S, metavar="S", help="seconds (default 10)"
    )
    return parser.parse_args(argv)


def _load(args: argparse.Namespace) -> tuple[HostMap, Callable[[str], str]]:
    if args.from_file is not None:
        try:
            data = _json(args.from_file.read_bytes(), str(args.from_file))
        except OSError as err:
            raise ExportError(4, f"{args.from_file}: {err.strerror}") from None
    else:
        data = fetch(args.api, args.timeout)
    try:
        hm = HostMap.from_dict(data)
    except ValueError as err:
        raise ExportError(4, f"{args.from_file or args.api}: not a Loom host map: {err}") from None
    names: dict[str, str] = {}
    if args.hosts_file is not None:
        try:
            names = read_hosts_file(args.hosts_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as err:
            raise ExportError(4, f"{args.hosts_file}: {err}") from None
    return hm, lambda ip: names.get(ip, ip)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        hm, node_name = _load(args)
        try:
            text = RENDER[args.format](hm, node_name)
        except ValueError as err:  # a node name a scheduler cannot take
            raise ExportError(4, str(err)) from None
        if args.out is None:
            sys.stdout.write(text)
            return 0
        try:
            write_atomically(args.out, text)
        except OSError as err:
            raise ExportError(1, f"{args.out}: {err.strerror or err}") from None
    except ExportError as err:
        print(f"loom-export: {err}", file=sys.stderr)
        return err.status
    print(
        f"loom-export: wrote {args.format} ({len(hm.hosts)} hosts) to {args.out}", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
