"""The tc commands of an emulated port: HTB classes, DSCP filters and bounded leaf queues."""

from __future__ import annotations

import pytest

from mininet_scenarios.harness.shaping import DEFAULT_CLASSES, shaping_commands


def test_leaf_queues_bounded_in_packets_or_in_bytes() -> None:
    packets = shaping_commands("s1-eth1", 10.0, DEFAULT_CLASSES, queue_packets=30)
    assert sum("pfifo limit 30" in c for c in packets) == len(DEFAULT_CLASSES)
    in_bytes = shaping_commands("s1-eth1", 10.0, DEFAULT_CLASSES, queue_bytes=270_420)
    leaves = [c for c in in_bytes if "bfifo" in c]
    assert [c.split()[6] for c in leaves] == ["1:10", "1:20", "1:30"]
    assert all(c.endswith("bfifo limit 270420") for c in leaves)
    assert not any("pfifo" in c for c in in_bytes)
    assert not any("fifo" in c for c in shaping_commands("s1-eth1", 10.0, DEFAULT_CLASSES))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"queue_packets": 0}, "queue_packets must be positive"),
        ({"queue_bytes": 1000}, "queue_bytes must be >= 1600"),
        ({"queue_bytes": 9000, "queue_packets": 30}, "give queue_packets or queue_bytes, not both"),
    ],
)
def test_bad_queue_limits_are_refused_naming_the_port(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=f"s1-eth1: {message}"):
        shaping_commands("s1-eth1", 10.0, DEFAULT_CLASSES, **kwargs)


def test_host_queues_must_be_bounded_or_kernel() -> None:
    from mininet_scenarios.harness.network import FabricNet
    from mininet_scenarios.harness.ovs import FabricError
    from topologies import fat_tree

    assert FabricNet(fat_tree(4), host_queues="kernel").host_queues == "kernel"
    with pytest.raises(FabricError, match="bounded or kernel"):
        FabricNet(fat_tree(4), host_queues="deep")
