"""Fabrics described in YAML, for labs that match no generator, and the way back
(``dump_fabric``) so any generated fabric can be saved, edited and reloaded::

    name: lab                  # optional (default: the file's stem)
    defaults: {rate_mbps: 10}  # optional
    switches:
      - {name: s1, dpid: 1, role: leaf, group: 0}  # dpid/role/group optional
    hosts:
      - {name: h1, switch: s1, ip: 10.0.0.1, mac: "02:00:00:00:00:01", port: 1, rate_mbps: 10}
    links:
      - {a: s1, b: s2, rate_mbps: 10, a_port: 3, b_port: 1, scope: fabric}

Missing dpids count up from 1 past the ones given; missing ports take the lowest port
the switch does not use explicitly, in file order; missing MACs derive from the host
index; a host's group defaults to its switch's. The file is read with ``yaml.compose``
rather than ``safe_load`` so every error names the line it is about, and so a MAC such as
``12:34:56:00:00:01`` (a base-60 integer to YAML 1.1) still reads as the text written.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import networkx as nx
import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from topologies.graph import (
    MAX_DPID,
    MAX_IFNAME,
    TopologyError,
    add_host,
    add_link,
    add_switch,
    host_list,
    link_ends,
    mac_for_index,
    new_graph,
    switches,
    validate,
)

TAG = "tag:yaml.org,2002:"
TYPE_NAMES = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "null": "nothing (null)",
    "timestamp": "a date",
}
NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
MAC_RE = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}\Z")
HOST_NET = ipaddress.IPv4Network("10.0.0.0/8")
MAX_PORT = 65535
SCOPES = ("fabric", "global")
DEFAULT_RATE = 10.0
# libyaml when present: ~10x faster on big fabrics (fat_tree(64) is 12 MB of YAML).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class FabricFileError(TopologyError):
    """A fabric file is unreadable or wrong; ``line`` is 1-based (None: the whole file)."""

    def __init__(self, path: str, line: int | None, key: str, message: str) -> None:
        self.path, self.line, self.key, self.reason = path, line, key, message
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")


@dataclass
class _Entry:
    """One switch, host or link as read, with the YAML nodes kept for error lines."""

    key: str
    fields: dict[str, Node]

    def at(self, field: str) -> tuple[Node, str]:
        """The value node of ``field`` and its full key, e.g. ``links[3].b``."""
        return self.fields[field], f"{self.key}.{field}"


class _Reader:
    """Typed access to composed YAML nodes; every failure raises ``FabricFileError``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._construct = SafeConstructor()

    def fail(self, node: Node | int | None, key: str, message: str) -> NoReturn:
        line = node.start_mark.line + 1 if isinstance(node, Node) else node
        raise FabricFileError(self.path, line, key, message)

    def kind(self, node: Node) -> str:
        if isinstance(node, MappingNode):
            return "a mapping"
        if isinstance(node, SequenceNode):
            return "a list"
        return TYPE_NAMES.get(node.tag.removeprefix(TAG), node.tag)

    def mapping(
        self, node: Node, key: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()
    ) -> _Entry:
        if not isinstance(node, MappingNode):
            self.fail(
                node,
                key,
                f"expected a mapping with keys {', '.join(allowed)}, got {self.kind(node)}",
            )
        fields: dict[str, Node] = {}
        prefix = f"{key}." if key else ""
        for k_node, v_node in node.value:
            label = k_node.value if isinstance(k_node, ScalarNode) else "?"
            name = self.string(k_node, f"{prefix}{label}")
            if name not in allowed:
                self.fail(
                    k_node, prefix + name, f"unknown key '{name}' (allowed: {', '.join(allowed)})"
                )
            if name in fields:
                self.fail(
                    k_node,
                    prefix + name,
                    f"duplicate key '{name}' (first on line {fields[name].start_mark.line + 1})",
                )
            fields[name] = v_node
        for name in required:
            if name not in fields:
                self.fail(
                    node, prefix + name, f"missing key '{name}' (required: {', '.join(required)})"
                )
        return _Entry(key, fields)

    def sequence(self, node: Node, key: str) -> list[Node]:
        if isinstance(node, ScalarNode) and node.tag == TAG + "null":
            return []
        if not isinstance(node, SequenceNode):
            self.fail(node, key, f"expected a list, got {self.kind(node)}")
        return list(node.value)

    def string(self, node: Node, key: str) -> str:
        if not isinstance(node, ScalarNode) or node.tag != TAG + "str":
            hint = " (quote it)" if isinstance(node, ScalarNode) else ""
            self.fail(node, key, f"expected a string{hint}, got {self.kind(node)}")
        return str(node.value)

    def name(self, node: Node, key: str) -> str:
        value = self.string(node, key)
        if not NAME_RE.match(value):
            self.fail(
                node, key, f"bad name {value!r} (expected a letter, then letters, digits or '_')"
            )
        return value

    def integer(self, node: Node, key: str, low: int, high: int) -> int:
        if not isinstance(node, ScalarNode) or node.tag != TAG + "int":
            self.fail(node, key, f"expected an integer, got {self.kind(node)}")
        value = int(self._construct.construct_object(node))
        if not low <= value <= high:
            self.fail(node, key, f"expected an integer from {low} to {high}, got {value}")
        return value

    def group(self, node: Node, key: str) -> int | None:
        if isinstance(node, ScalarNode) and node.tag == TAG + "null":
            return None
        return self.integer(node, key, 0, 2**31)

    def rate(self, node: Node, key: str) -> float:
        if not isinstance(node, ScalarNode) or node.tag not in (TAG + "int", TAG + "float"):
            self.fail(node, key, f"expected a positive number of Mbit/s, got {self.kind(node)}")
        value = float(self._construct.construct_object(node))
        if not 0 < value < float("inf"):
            self.fail(node, key, f"expected a positive number of Mbit/s, got {node.value}")
        return value


def load_fabric(path: str | Path, rate_mbps: float | None = None) -> nx.MultiGraph:
    """Read a fabric file; ``rate_mbps`` (if given) overrides every link's rate."""
    if rate_mbps is not None and not rate_mbps > 0:
        raise TopologyError(f"rate_mbps must be positive, got {rate_mbps}")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise FabricFileError(str(path), None, "", f"cannot read: {err}") from err
    return parse_fabric(text, str(path), rate_mbps, default_name=Path(path).stem)


def parse_fabric(
    text: str, path: str = "<string>", rate_mbps: float | None = None, default_name: str = "custom"
) -> nx.MultiGraph:
    """Build the fabric described by ``text``; ``path`` only labels error messages."""
    rd = _Reader(path)
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        rd.fail(None if mark is None else mark.line + 1, "", f"not valid YAML: {err.problem}")
    except yaml.YAMLError as err:
        rd.fail(None, "", f"not valid YAML: {err}")
    if root is None:
        rd.fail(1, "", "empty file (expected a mapping with a 'switches' list)")
    top = rd.mapping(root, "", ("name", "defaults", "switches", "hosts", "links"), ("switches",))
    f = top.fields
    name = rd.string(f["name"], "name") if "name" in f else default_name
    default_rate = DEFAULT_RATE
    if "defaults" in f:
        defaults = rd.mapping(f["defaults"], "defaults", ("rate_mbps",))
        if "rate_mbps" in defaults.fields:
            default_rate = rd.rate(defaults.fields["rate_mbps"], "defaults.rate_mbps")
    switch_nodes = rd.sequence(f["switches"], "switches")
    if not switch_nodes:
        rd.fail(f["switches"], "switches", "expected a list of at least one switch")
    g = new_graph(name, "custom", path=path)
    _Builder(rd, g, default_rate).build(
        [
            rd.mapping(n, f"switches[{i}]", ("name", "dpid", "role", "group"), ("name",))
            for i, n in enumerate(switch_nodes)
        ],
        [
            rd.mapping(
                n,
                f"hosts[{i}]",
                ("name", "switch", "ip", "mac", "port", "rate_mbps", "group"),
                ("name", "switch", "ip"),
            )
            for i, n in enumerate(rd.sequence(f["hosts"], "hosts") if "hosts" in f else [])
        ],
        [
            rd.mapping(
                n, f"links[{i}]", ("a", "b", "rate_mbps", "a_port", "b_port", "scope"), ("a", "b")
            )
            for i, n in enumerate(rd.sequence(f["links"], "links") if "links" in f else [])
        ],
    )
    if rate_mbps is not None:
        for _, _, d in g.edges(data=True):
            d["rate_mbps"] = float(rate_mbps)
    validate(g)  # belt and braces: everything it checks was checked above, with lines
    return g


_SwitchRow = tuple[str, int | None, str, int | None]  # name, dpid, role, group
# name, switch, ip, mac, port, rate_mbps, group
_HostRow = tuple[str, str, str, str | None, int | None, float, int | None]
_LinkRow = tuple[str, str, int | None, int | None, float, str]  # a, b, a_port, b_port, rate, scope


class _Builder:
    """Checks cross-references and uniqueness, fills in defaults, then adds to ``g``."""

    def __init__(self, rd: _Reader, g: nx.MultiGraph, default_rate: float) -> None:
        self.rd, self.g, self.default_rate = rd, g, default_rate
        self.names: dict[str, tuple[str, Node]] = {}  # node name -> (key, node) defining it
        self.switch_group: dict[str, int | None] = {}
        self.ports: dict[tuple[str, int], str] = {}  # (switch, port) -> key that claimed it
        self.seen: dict[tuple[str, object], tuple[str, int]] = {}  # (what, value) -> key, line

    def _unique(self, what: str, value: object, node: Node, key: str) -> None:
        if (what, value) in self.seen:
            other, line = self.seen[(what, value)]
            self.rd.fail(
                node, key, f"duplicate {what} {value} (already used by {other} on line {line})"
            )
        self.seen[(what, value)] = (key, node.start_mark.line + 1)

    def _node_name(self, e: _Entry) -> str:
        node, key = e.at("name")
        name = self.rd.name(node, key)
        if name in self.names:
            other, first = self.names[name]
            self.rd.fail(
                node,
                key,
                f"duplicate name '{name}' (already used by {other} on "
                f"line {first.start_mark.line + 1})",
            )
        self.names[name] = (key, node)
        return name

    def _switch_ref(self, e: _Entry, field: str) -> str:
        name = self.rd.string(*e.at(field))
        if name not in self.switch_group:
            why = (
                "is a host; hosts attach through their 'switch' key"
                if name in self.names
                else "unknown switch"
            )
            self.rd.fail(*e.at(field), f"{why} '{name}' (expected one of the switch names)")
        return name

    def _port(self, e: _Entry, field: str, switch: str) -> int | None:
        if field not in e.fields:
            return None
        node, key = e.at(field)
        port = self.rd.integer(node, key, 1, MAX_PORT)
        if (switch, port) in self.ports:
            self.rd.fail(
                node,
                key,
                f"duplicate port {port} on switch '{switch}' (already "
                f"used by {self.ports[(switch, port)]})",
            )
        self.ports[(switch, port)] = key
        return port

    def _rate(self, e: _Entry) -> float:
        return self.rd.rate(*e.at("rate_mbps")) if "rate_mbps" in e.fields else self.default_rate

    def _group(self, e: _Entry, default: int | None) -> int | None:
        return self.rd.group(*e.at("group")) if "group" in e.fields else default

    def build(self, sw: list[_Entry], hs: list[_Entry], ls: list[_Entry]) -> None:
        """Read every entry first, so explicit dpids, ports and MACs are all claimed
        before any default is chosen; then add switches, hosts and links to ``g``."""
        self._add_switches([self._switch_row(e) for e in sw])
        host_rows = [self._host_row(e) for e in hs]
        link_rows = [self._link_row(e) for e in ls]
        # Only now are all explicit ports and MACs known, so defaults cannot collide.
        free: dict[str, int] = {}
        for index, (name, switch, ip, mac, port, rate, group) in enumerate(host_rows):
            mac = self._default_mac(mac, index)
            add_host(self.g, name, switch, ip, rate, group, self._take(free, switch, port), mac)
        for a, b, pa, pb, rate, scope in link_rows:
            add_link(self.g, a, b, rate, scope, self._take(free, a, pa), self._take(free, b, pb))
        self._check_interface_names()

    def _switch_row(self, e: _Entry) -> _SwitchRow:
        name, dpid = self._node_name(e), None
        if "dpid" in e.fields:
            dpid = self.rd.integer(*e.at("dpid"), 1, MAX_DPID)
            self._unique("dpid", dpid, *e.at("dpid"))
        role = self.rd.string(*e.at("role")) if "role" in e.fields else "switch"
        self.switch_group[name] = self._group(e, None)
        return (name, dpid, role, self.switch_group[name])

    def _add_switches(self, rows: list[_SwitchRow]) -> None:
        """Add the switches; missing dpids count up from 1, skipping those given."""
        auto = 0
        for name, dpid, role, group in rows:
            while dpid is None:
                auto += 1
                dpid = None if ("dpid", auto) in self.seen else auto
            add_switch(self.g, name, dpid, role, group)

    def _host_row(self, e: _Entry) -> _HostRow:
        name, switch = self._node_name(e), self._switch_ref(e, "switch")
        ip = self._ip(*e.at("ip"))
        self._unique("IP", ip, *e.at("ip"))
        mac = None
        if "mac" in e.fields:
            mac = self._mac(*e.at("mac"))
            self._unique("MAC", mac, *e.at("mac"))
        return (
            name,
            switch,
            ip,
            mac,
            self._port(e, "port", switch),
            self._rate(e),
            self._group(e, self.switch_group[switch]),
        )

    def _link_row(self, e: _Entry) -> _LinkRow:
        a, b = self._switch_ref(e, "a"), self._switch_ref(e, "b")
        if a == b:
            self.rd.fail(*e.at("b"), f"link from '{a}' to itself")
        scope = self.rd.string(*e.at("scope")) if "scope" in e.fields else "fabric"
        if scope not in SCOPES:
            self.rd.fail(
                *e.at("scope"), f"unknown scope '{scope}' (expected one of {', '.join(SCOPES)})"
            )
        return (a, b, self._port(e, "a_port", a), self._port(e, "b_port", b), self._rate(e), scope)

    def _take(self, free: dict[str, int], switch: str, port: int | None) -> int:
        """``port``, or else the lowest port of ``switch`` neither claimed nor taken yet."""
        while port is None:
            free[switch] = free.get(switch, 0) + 1
            port = None if (switch, free[switch]) in self.ports else free[switch]
        return port

    def _default_mac(self, mac: str | None, index: int) -> str:
        """``mac``, or else the MAC of host ``index`` (or of the next index that is free);
        either way it is claimed, so a later default cannot reuse it."""
        candidate = index
        while mac is None:
            mac = mac_for_index(candidate)
            if ("MAC", mac) in self.seen:
                mac, candidate = None, candidate + 1
        self.seen[("MAC", mac)] = ("default", 0)
        return mac

    def _check_interface_names(self) -> None:
        """Every ``<node>-eth<highest port>`` must fit Linux's interface-name limit."""
        for node in self.g.nodes:
            port = max((end.port for end in link_ends(self.g, node)), default=0)
            if len(f"{node}-eth{port}") > MAX_IFNAME:
                key, name_node = self.names[node]
                self.rd.fail(
                    name_node,
                    key,
                    f"name '{node}' too long: interface {node}-eth{port} "
                    f"exceeds {MAX_IFNAME} characters",
                )

    def _ip(self, node: Node, key: str) -> str:
        text = self.rd.string(node, key)
        try:
            ip = ipaddress.IPv4Address(text)
        except ValueError:
            self.rd.fail(
                node, key, f"bad IP address {text!r} (expected a dotted quad such as 10.0.0.1)"
            )
        if ip not in HOST_NET or ip in (HOST_NET.network_address, HOST_NET.broadcast_address):
            self.rd.fail(
                node,
                key,
                f"IP {ip} is outside the hosts' subnet (expected a host address in {HOST_NET})",
            )
        return str(ip)

    def _mac(self, node: Node, key: str) -> str:
        # The raw text, not the resolved value: YAML 1.1 reads 12:34:56:00:00:01 as base 60.
        text = str(node.value) if isinstance(node, ScalarNode) else ""
        if not MAC_RE.match(text):
            self.rd.fail(
                node,
                key,
                f"bad MAC address {text or self.rd.kind(node)!r} "
                "(expected six hex pairs such as 02:00:00:00:00:01)",
            )
        if int(text[:2], 16) & 1 or text == "00:00:00:00:00:00":
            self.rd.fail(node, key, f"MAC {text} is not a unicast host address")
        return text.lower()


def dump_fabric(g: nx.MultiGraph) -> str:
    """Any Loom graph as fabric YAML that ``load_fabric`` reads back to the same fabric."""
    rates = Counter(float(d["rate_mbps"]) for _, _, d in g.edges(data=True))
    default_rate = rates.most_common(1)[0][0] if rates else DEFAULT_RATE
    sw_rows: list[dict[str, object]] = []
    for s in switches(g):
        d = g.nodes[s]
        row: dict[str, object] = {"name": s, "dpid": d["dpid"], "role": d["role"]}
        if d.get("group") is not None:
            row["group"] = d["group"]
        sw_rows.append(row)
    host_rows: list[dict[str, object]] = []
    for h in host_list(g):
        d, (end,) = g.nodes[h], link_ends(g, h)
        row = {"name": h, "switch": end.peer, "ip": d["ip"], "mac": d["mac"], "port": end.peer_port}
        if end.rate_mbps != default_rate:
            row["rate_mbps"] = end.rate_mbps
        if d.get("group") != g.nodes[end.peer].get("group"):
            row["group"] = d.get("group")
        host_rows.append(row)
    link_rows: list[dict[str, object]] = []
    for a, b, d in g.edges(data=True):
        if d["scope"] == "host":
            continue
        row = {"a": a, "b": b, "a_port": d["ports"][a], "b_port": d["ports"][b]}
        if d["rate_mbps"] != default_rate:
            row["rate_mbps"] = float(d["rate_mbps"])
        if d["scope"] != "fabric":
            row["scope"] = d["scope"]
        link_rows.append(row)
    doc = {
        "name": str(g.graph.get("name", "fabric")),
        "defaults": {"rate_mbps": default_rate},
        "switches": sw_rows,
        "hosts": host_rows,
        "links": link_rows,
    }
    header = (
        f"# Loom fabric {doc['name']}: {len(sw_rows)} switches, {len(host_rows)} hosts, "
        f"{len(link_rows)} switch links.\n"
    )
    body: str = yaml.dump(doc, Dumper=_DUMPER, default_flow_style=None, sort_keys=False, width=1000)
    return header + body
