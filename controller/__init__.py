"""Loom: an SDN controller for AI training fabrics."""
