"""A local certificate authority for OpenFlow and etcd over TLS (``make pki``).

``python -m mininet_scenarios.harness.pki [DIR]`` makes, with the ``openssl`` command, a CA
and the certificates it signs: one for the controller and one for the switches (Open
vSwitch takes one key and certificate for all its bridges). Both sides check the other's
certificate against the CA, so a switch without a certificate of this CA cannot connect.
etcd's members get one for clients (``etcd-server``) and one for each other
(``etcd-peer``), both for 127.0.0.1 and localhost, and Loom one to show etcd
(``etcd-client``).

Idempotent: files already there are kept (delete the directory to start over). Keys are
readable by their owner only. Meant for the lab and the demo; a production fabric's
certificates come from its own CA.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DIR = Path("pki")
DAYS = 825
KEY = ("-newkey", "rsa:2048", "-nodes")
CA_EXTENSIONS = (
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
)
# A leaf serves (the controller) and is a client (the switch): OVS and Ryu each check
# the purpose their side expects.
LEAF_EXTENSIONS = (
    "basicConstraints=critical,CA:FALSE\n"
    "keyUsage=critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage=serverAuth,clientAuth\n"
)
LOOPBACK = "subjectAltName=DNS:localhost,IP:127.0.0.1\n"  # where the lab's etcd listens
ETCD = ("etcd-server", "etcd-peer", "etcd-client")  # its members', and Loom's as its client
API = ("api", "api-client")  # the REST API over HTTPS (LOOM_API_*; dialled on loopback), a caller


@dataclass(frozen=True)
class Pki:
    """Where a CA's files are: ``ca.pem`` and each party's ``<name>.key``/``<name>.pem``."""

    root: Path

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    def key(self, name: str) -> Path:
        return self.root / f"{name}.key"

    def cert(self, name: str) -> Path:
        return self.root / f"{name}.pem"


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, text=True)


def make_ca(pki: Pki, subject: str = "Loom lab CA") -> None:
    """A self-signed CA, unless ``pki`` has one already."""
    if pki.ca_cert.exists() and pki.ca_key.exists():
        return
    pki.root.mkdir(parents=True, exist_ok=True)
    old = os.umask(0o077)
    try:
        openssl(
            "req", "-x509", *KEY, "-keyout", str(pki.ca_key), "-out", str(pki.ca_cert),
            "-days", str(DAYS), "-subj", f"/CN={subject}", *CA_EXTENSIONS,
        )  # fmt: skip
    finally:
        os.umask(old)
    pki.ca_cert.chmod(0o644)


def _subject(name: str, subject: str | None) -> str:
    """etcd's gateway refuses a client certificate with a common name once auth is on (it
    could not pass the name on as the user): etcd's client certificate has none."""
    if name == "etcd-client":
        return f"/O={subject or 'Loom'}/OU=loom-{name}"
    return f"/CN={subject or f'loom-{name}'}"


def issue(pki: Pki, name: str, subject: str | None = None, loopback: bool = False) -> None:
    """``<name>.key`` and ``<name>.pem`` signed by ``pki``'s CA, unless both exist;
    ``loopback``: valid for 127.0.0.1 and localhost (clients check the name they dial)."""
    if pki.key(name).exists() and pki.cert(name).exists():
        return
    old = os.umask(0o077)
    try:
        with tempfile.TemporaryDirectory(dir=pki.root) as tmp:
            csr, ext = Path(tmp) / "req.csr", Path(tmp) / "ext.cnf"
            ext.write_text(LEAF_EXTENSIONS + (LOOPBACK if loopback else ""))
            openssl(
                "req", "-new", *KEY, "-keyout", str(pki.key(name)), "-out", str(csr),
                "-subj", _subject(name, subject),
            )  # fmt: skip
            openssl(
                "x509", "-req", "-in", str(csr), "-CA", str(pki.ca_cert),
                "-CAkey", str(pki.ca_key), "-CAcreateserial", "-days", str(DAYS),
                "-extfile", str(ext), "-out", str(pki.cert(name)),
            )  # fmt: skip
    finally:
        os.umask(old)
    pki.cert(name).chmod(0o644)


def ensure(root: Path = DEFAULT_DIR, names: tuple[str, ...] = ("controller", "switch")) -> Pki:
    """The CA and a certificate for each of ``names`` under ``root`` (made if missing)."""
    pki = Pki(root.resolve())
    make_ca(pki)
    for name in names:
        issue(pki, name, loopback=name in (*ETCD, API[0]))
    return pki


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="loom-pki", description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR, help="default: pki/")
    names = ("controller", "switch", *ETCD, *API)
    pki = ensure(ap.parse_args(argv).dir, names)
    for path in (pki.ca_cert, *map(pki.cert, names)):
        print(f"pki: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
