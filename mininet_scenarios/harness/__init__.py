"""The emulation harness: the network, its shaping and state, the processes around it
(controller, Faucet, Prometheus, children in the hosts), the REST client, metrics, faults.
Imports nothing from the workloads, benchmarks or demo."""
