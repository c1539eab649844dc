"""Loom's emulation harness: any Loom topology graph as a running Mininet network.

* :mod:`.fabric_net`: ``FabricNet``, a context manager that builds the graph with userspace
  Open vSwitch (OpenFlow 1.3, the graph's dpids and port numbers), shapes it, and on exit
  removes exactly what it created.
* :mod:`.shaping`: HTB per link end, optionally with DSCP-steered traffic classes.
* :mod:`.controller_proc`: a ryu-manager child process for the lifetime of a ``with`` block.
* :mod:`.traffic`: pingall, iperf3 flows, CPU idle sampling.
* :mod:`.run`: the ``loom-scenario`` command.

Needs root, Open vSwitch with the userspace datapath and Debian's Mininet; see
/work/shared/ENVIRONMENT.md for why each choice was made.
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
