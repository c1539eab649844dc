"""What the cluster tests share: a real etcd is needed (installed by `make setup`), and
an instance's shared state on it over a simulated fabric."""

from __future__ import annotations

import os
import shutil

import pytest

from controller.api import LoomApi
from controller.cluster.etcd import EtcdAccess, EtcdClient, parse_url
from controller.cluster.shared import SharedState
from controller.model import Messages
from controller.policy.manager import PolicyManager
from tests.sim import LoomSim
from topologies import fat_tree

TOKEN = "s3cret"

# Skipped only where etcd is missing and the whole suite is not required (as `make test`
# requires it: there a missing etcd fails the tests instead).
needs_etcd = pytest.mark.skipif(
    shutil.which("etcd") is None and not os.environ.get("LOOM_REQUIRE_EMULATION"),
    reason="etcd missing: run `make setup`",
)


class Instance:
    """One Loom instance's shared state and API over a simulated fabric, on etcd."""

    def __init__(
        self,
        url: str,
        timeout: float = 0.5,
        policy: str | None = None,
        access: EtcdAccess | None = None,
    ) -> None:
        endpoints, prefix = parse_url(url)
        self.sim = LoomSim(fat_tree(4)).start()
        self.client = EtcdClient(endpoints, timeout=timeout, access=access)
        self.sent: list[Messages] = []
        self.policy = PolicyManager(self.sim.core, policy)
        self.shared = SharedState(self.client, prefix, self.sim.core, self.sent.append, self.policy)
        self.shared.share_token(TOKEN)
        self.api = LoomApi(
            self.sim.core, lambda: self.sim.now, None, self.policy, shared=self.shared
        )

    def sync(self) -> None:
        self.shared.apply(self.sim.now, self.client.get_prefix(self.shared.prefix))
