"""Real gloo collectives in the emulated hosts: the run (:mod:`.runner`), the rank process
(:mod:`.worker`, run in each host), the hosts' preparation (:mod:`.hosts`), background bulk
flows (:mod:`.background`), the numbers without a network (:mod:`.model`) and the
diagnostics recorded with every run (:mod:`.diag`)."""
