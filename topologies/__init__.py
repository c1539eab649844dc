"""Fabric graph generators (pure: no I/O beyond reading a YAML file) and ``by_name``,
the short spec that command lines and test fixtures use to pick a fabric."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import networkx as nx

from topologies.custom import FabricFileError, dump_fabric, load_fabric, parse_fabric
from topologies.dragonfly import dragonfly
from topologies.fat_tree import fat_tree
from topologies.graph import TopologyError, shuffle_ids, validate
from topologies.leaf_spine import leaf_spine
from topologies.rail_optimized import rail_optimized

__all__ = [
    "GENERATORS",
    "FabricFileError",
    "TopologyError",
    "by_name",
    "dragonfly",
    "dump_fabric",
    "fat_tree",
    "leaf_spine",
    "load_fabric",
    "parse_fabric",
    "rail_optimized",
    "shuffle_ids",
    "validate",
]

GENERATORS: dict[str, Callable[..., nx.MultiGraph]] = {
    "fat_tree": fat_tree,
    "dragonfly": dragonfly,
    "leaf_spine": leaf_spine,
    "rail_optimized": rail_optimized,
}
YAML_SUFFIXES = (".yaml", ".yml")
SPEC_HELP = (
    "a spec is NAME[:ARGS] with NAME one of "
    + ", ".join(GENERATORS)
    + " and ARGS comma-separated values or key=value pairs (e.g. fat_tree:k=4, fat-tree:4, "
    "dragonfly:a=4,p=2,h=2,g=5), or a path to a .yaml fabric file (optionally "
    "PATH:rate_mbps=5)"
)


def _value(text: str) -> object:
    """``4`` -> int, ``2.5`` -> float, ``none`` -> None, anything else stays text."""
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return None if text.lower() == "none" else text


def _parse_args(where: str, args: str, names: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    keyword_seen = False
    positional = 0
    for item in (a.strip() for a in args.split(",")):
        if not item:
            continue
        key, eq, text = item.partition("=")
        if eq:
            keyword_seen = True
            key = key.strip().replace("-", "_")
        elif keyword_seen:
            raise TopologyError(f"{where}: positional value {item!r} after key=value pairs")
        elif positional >= len(names):
            raise TopologyError(f"{where}: too many values (parameters: {', '.join(names)})")
        else:
            key, text = names[positional], item
            positional += 1
        if key not in names:
            raise TopologyError(f"{where}: unknown parameter {key!r} (allowed: {', '.join(names)})")
        if key in out:
            raise TopologyError(f"{where}: parameter {key!r} given twice")
        out[key] = _value(text.strip())
    return out


def by_name(spec: str) -> nx.MultiGraph:
    """Build the fabric ``spec`` names; see ``SPEC_HELP``. Raises ``TopologyError``."""
    spec = spec.strip()
    head, _, args = spec.partition(":")
    if spec.lower().endswith(YAML_SUFFIXES):
        head, args = spec, ""
    if head.lower().endswith(YAML_SUFFIXES):
        opts = _parse_args(head, args, ["rate_mbps"])
        rate = opts.get("rate_mbps")
        if rate is not None and (not isinstance(rate, int | float) or isinstance(rate, bool)):
            raise TopologyError(f"{head}: rate_mbps must be a number, got {rate!r}")
        return load_fabric(head, rate_mbps=rate)
    name = head.strip().lower().replace("-", "_")
    if name not in GENERATORS:
        raise TopologyError(f"unknown topology {head!r}: {SPEC_HELP}")
    build = GENERATORS[name]
    params = list(inspect.signature(build).parameters)
    return build(**_parse_args(name, args, params))
