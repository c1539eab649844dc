"""Client-side tools that register training jobs with Loom: ``loom-run`` wraps a training
command on every node, ``loom-job`` serves schedulers' prolog and epilog scripts.

Stdlib only (PyTorch is imported lazily, for the multi-node rendezvous alone), so the
tools run wherever the training does, without the controller's dependencies.
"""
