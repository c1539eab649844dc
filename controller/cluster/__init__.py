"""Loom as a cluster of instances coordinated by etcd: mastership, shared state."""
