"""Loom's lab: any Loom topology graph as a running Mininet network, what runs on it, and
what is measured. Three layers, each importing only from the ones before it:

* :mod:`.harness`: the emulated network and everything around it. ``FabricNet`` (builds the
  graph with userspace Open vSwitch, OpenFlow 1.3, the graph's dpids and port numbers; shapes
  it; on exit removes exactly what it created), HTB shaping, OVS state, the one lifecycle of
  host-side child processes (the controller, Faucet, Prometheus), processes inside the
  emulated hosts, the REST client, metrics scraping, the whole stack in one ``with``, faults.
* :mod:`.workloads`: what runs in the hosts. Ping, iperf3 flows, UDP streams, hand-made
  frames and floods, traffic matrices, gloo collectives.
* :mod:`.bench` (the benchmarks and their reports) and :mod:`.demo` (``make demo``).

:mod:`.cli` is the ``loom-scenario`` command (``python -m mininet_scenarios``).

Needs root, Open vSwitch with the userspace datapath and Debian's Mininet; see
``docs/environment.md`` for why each choice was made.
"""

import logging


def emulation_logger() -> logging.Logger:
    """The ``loom.emulation`` logger, as a plain ``logging.Logger``.

    Importing ``mininet.log`` calls ``logging.setLoggerClass(MininetLogger)``, so every logger
    created afterwards gets its own stderr handler that drops newlines (and prints everything
    twice once the root logger has a handler too). Create ours with the stock class, and strip
    such a handler if an earlier import order already made it a MininetLogger.
    """
    previous = logging.getLoggerClass()
    logging.setLoggerClass(logging.Logger)
    try:
        logger = logging.getLogger("loom.emulation")
    finally:
        logging.setLoggerClass(previous)
    if type(logger) is not logging.Logger:
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
    return logger
