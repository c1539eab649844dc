"""The benchmarks and their reports (``docs/benchmarks.md``): fabric patterns and dragonfly
(:mod:`.patterns`), collectives (:mod:`.collectives`), failover (:mod:`.failover`). Each runs
as ``python -m mininet_scenarios.bench.<name>``; each report module re-renders saved
results without a network."""
