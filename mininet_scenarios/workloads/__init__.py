"""What runs on an emulated fabric: ping, iperf3, UDP streams, hand-made frames and floods,
traffic matrices, gloo collectives. Built on :mod:`mininet_scenarios.harness` only.

Modules that also run inside the hosts (``python -m mininet_scenarios.workloads.X``) keep
their child side importable without Mininet."""
