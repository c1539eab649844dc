"""OpenFlow over TLS in the lab: the controller's flags and Open vSwitch's SSL setting.

Ryu listens for TLS with its own options (``controller_args``); each bridge connects to an
``ssl:IP:PORT`` target. Open vSwitch, though, takes one key, certificate and CA for the
whole database (``ovs-vsctl set-ssl``), so ``OvsSsl`` sets them for a run and puts back
what was there before (``del-ssl`` if nothing) when the run ends. Bridges with ``tcp:``
targets, such as other runs' on the same OVS, ignore the setting. Nested runs in one
process share it: the outermost restores. Runs in other processes on the same OVS that
also use TLS must use the same CA and switch certificate.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType

from mininet_scenarios import emulation_logger
from mininet_scenarios.harness.ovs import FabricError, sh
from mininet_scenarios.harness.pki import Pki

log = emulation_logger()
SWITCH = "switch"  # the PKI name of the switches' key and certificate
CONTROLLER = "controller"


def controller_args(pki: Pki, port: int) -> list[str]:
    """ryu-manager's (and osken-manager's) flags: TLS only on ``port``, client
    certificates of ``pki``'s CA required."""
    return [
        "--ofp-ssl-listen-port", str(port),
        "--ctl-privkey", str(pki.key(CONTROLLER)),
        "--ctl-cert", str(pki.cert(CONTROLLER)),
        "--ca-certs", str(pki.ca_cert),
    ]  # fmt: skip


@dataclass(frozen=True)
class SslSetting:
    """What ``ovs-vsctl get-ssl`` reports."""

    private_key: str
    certificate: str
    ca_cert: str
    bootstrap: bool = False

    def set_command(self) -> list[str]:
        boot = ["--bootstrap"] if self.bootstrap else []
        return ["ovs-vsctl", *boot, "set-ssl", self.private_key, self.certificate, self.ca_cert]


def parse_get_ssl(text: str) -> SslSetting | None:
    """``Private key: ...`` lines as printed by ``ovs-vsctl get-ssl``; None when empty."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip().lower()] = value.strip()
    if not fields.get("private key"):
        return None
    return SslSetting(
        fields["private key"],
        fields.get("certificate", ""),
        fields.get("ca certificate", ""),
        fields.get("bootstrap", "false") == "true",
    )


def current_ssl() -> SslSetting | None:
    return parse_get_ssl(sh(["ovs-vsctl", "get-ssl"]))


def switch_ssl(pki: Pki) -> SslSetting:
    return SslSetting(str(pki.key(SWITCH)), str(pki.cert(SWITCH)), str(pki.ca_cert))


_HELD: list[SslSetting | None] = []  # what the outermost OvsSsl of this process found


class OvsSsl:
    """``with OvsSsl(pki):`` Open vSwitch presents ``pki``'s switch certificate and
    accepts only controllers certified by its CA; the earlier setting is back after."""

    def __init__(self, pki: Pki) -> None:
        self.setting = switch_ssl(pki)
        self._entered = False

    def __enter__(self) -> OvsSsl:
        before = current_ssl()
        if _HELD and before != self.setting:
            raise FabricError(f"OVS SSL is held by another run of this process: {before}")
        if not _HELD and before != self.setting:
            sh(self.setting.set_command())
            log.info("ovs: SSL set to %s (was %s)", self.setting.certificate, before)
        _HELD.append(before)
        self._entered = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._entered:
            return
        self._entered = False
        before = _HELD.pop()
        if _HELD or before == self.setting:
            return
        if current_ssl() != self.setting:  # changed by someone else meanwhile: theirs now
            log.warning("ovs: SSL changed during the run; left as it is")
            return
        sh(before.set_command() if before is not None else ["ovs-vsctl", "del-ssl"])
        log.info("ovs: SSL restored to %s", before)
