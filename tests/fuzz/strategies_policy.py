"""Hostile policy files: policy-shaped YAML with wrong types, odd values and unicode,
then mutated as text (alias and merge-key bombs, recursive aliases, deep nesting, Python
and other tags, duplicate keys, tabs, several documents, truncation) and as bytes
(encodings, BOMs, invalid UTF-8, NUL and control bytes); plus raw bytes and text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from hypothesis import strategies as st

from tests.fuzz.common import short


@dataclass(frozen=True)
class PolicyCase:
    shape: str
    data: bytes

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # Hypothesis's printer
        printer.text(repr(self))

    def __repr__(self) -> str:
        return f"PolicyCase(shape={self.shape!r}, data={short(self.data, 2000)})"


ODD_STRINGS = (
    "\ud800", "\udfff", "\x00", "\u202e", "\u200f", "\ufeff", "\x1b[31m", "\u2028", "é",
    "𝓁𝑜𝑜𝓂", "ﬁ", "02:00:00:00:00:01", "02:00:00:00:00:0A", "ff:ff:ff:ff:ff:ff",
    "01:00:5e:00:00:01", "00:00:00:00:00:00", "0e:00:4c:4f:4f:4d", "10.0.0.2", "10.0.0.2/24",
    "::1", "0.0.0.0", "255.255.255.255", "010.000.000.002", "1e999", "-0", ".inf", "~", "yes",
    "0x10", "1_000", "12:34:56", "", " ", "research", "all_reduce", "backward", "collective",
)  # fmt: skip
HUGE = (10**40, -(10**40), 2**64, 2**64 - 1, -1, 0, 0xFFFFFF00, 0xFFFFFF01, 10**300)
scalars = st.one_of(
    st.sampled_from(ODD_STRINGS),
    st.text(max_size=30),
    st.integers(),
    st.sampled_from(HUGE),
    st.floats(),
    st.booleans(),
    st.none(),
    st.binary(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def either(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value, sometimes anything at all."""
    return st.one_of(good, good, good, values)


host_ips = st.sampled_from([f"10.{p}.{e}.{h}" for p in range(4) for e in range(2) for h in (2, 3)])
host_macs = st.integers(1, 16).map(lambda i: f"02:00:00:00:00:{i:02x}")
names = st.sampled_from(["research", "guests", "prod", "a", "a" * 64, "a" * 65, "Bad", "x.y-z_1"])
hosts = st.fixed_dictionaries(
    {},
    optional={
        "mac": either(host_macs),
        "ip": either(host_ips),
        "switch": either(st.integers(1, 20)),
        "port": either(st.integers(1, 4)),
        "nick": values,
    },
)
tenants = st.fixed_dictionaries(
    {"name": either(names), "hosts": either(st.lists(hosts, max_size=5))},
    optional={
        "traffic_classes": either(st.lists(st.sampled_from(["collective", "control", "bulk"]))),
        "bandwidth_mbps": either(st.floats(0.001, 1e5)),
    },
)
jobs = st.fixed_dictionaries(
    {"name": either(names), "tenant": either(names), "hosts": either(st.lists(host_ips))},
    optional={
        "pattern": either(st.sampled_from(["ring", "all_reduce", "all_to_all", "tree"])),
        "traffic_class": either(st.sampled_from(["collective", "control", "bulk"])),
        "ring_direction": either(st.sampled_from(["forward", "backward", "both"])),
    },
)
fabric = st.fixed_dictionaries(
    {},
    optional={
        "poll_interval": either(st.floats(0.01, 10)),
        "elephant_share": either(st.floats(0.01, 1)),
        "link_capacity_mbps": either(st.floats(1, 1e6)),
        "te": either(st.booleans()),
        "qos": either(st.booleans()),
        "path_policy": either(st.sampled_from(["adaptive", "minimal", "valiant"])),
        "unassigned_hosts": either(st.sampled_from(["deny", "allow"])),
        "queues": either(st.fixed_dictionaries({}, optional={"collective": st.floats(0, 1)})),
    },
)
documents = st.fixed_dictionaries(
    {},
    optional={
        "version": either(st.just(1)),
        "fabric": either(fabric),
        "tenants": either(st.lists(tenants, max_size=4)),
        "jobs": either(st.lists(jobs, max_size=3)),
        "extra": values,
    },
)


def render(doc: Any, flow: bool, unicode: bool) -> str:
    return yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=unicode, sort_keys=False)


def alias_bomb(width: int, depth: int, key: str) -> str:
    lines = [f"b0: &b0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, depth):
        lines.append(f"b{i}: &b{i} [{', '.join([f'*b{i - 1}'] * width)}]")
    return "\n".join(lines) + f"\n{key}: *b{depth - 1}\n"


def merge_bomb(width: int, depth: int, key: str) -> str:
    lines = ["m0: &m0 {" + ", ".join(f"k{j}: {j}" for j in range(width)) + "}"]
    for i in range(1, depth):
        vals = ", ".join(f"v{i}_{j}: *m{i - 1}" for j in range(width))
        lines.append(f"m{i}: &m{i} {{<<: *m{i - 1}, {vals}}}")
    return "\n".join(lines) + f"\n{key}:\n  <<: *m{depth - 1}\n"


TAGS = (
    '!!python/object/apply:os.system ["true"]', "!!python/name:os.system",
    "!!python/object/new:subprocess.Popen [[true]]", "!!binary //79", "!!set {a, b}",
    "!!omap [a: 1]", "!!timestamp 2001-12-14", "!!float nan", "!!int 0x", "!loom/x y",
    "!!str", "!!null", "!!map", "!<tag:yaml.org,2002:python/tuple> [1]",
)  # fmt: skip
MUTATIONS = (
    "alias-bomb", "merge-bomb", "recursive-alias", "deep-lists", "deep-maps", "tag",
    "duplicate", "tabs", "documents", "truncate", "insert-char", "long-line", "anchor-cycle-key",
)  # fmt: skip
TOP_KEYS = ("tenants", "jobs", "fabric", "version", "extra")


@st.composite
def text_mutation(draw: st.DrawFn, text: str) -> tuple[str, str]:
    """One hostile change to policy text: (shape, new text)."""
    kind = draw(st.sampled_from(MUTATIONS))
    key = draw(st.sampled_from(TOP_KEYS))
    pos = draw(st.integers(0, len(text)))
    if kind == "alias-bomb":
        w, d = draw(st.integers(2, 10)), draw(st.integers(2, 10))
        return f"alias-bomb-{w}x{d}", alias_bomb(w, d, key) + text
    if kind == "merge-bomb":
        w, d = draw(st.integers(2, 10)), draw(st.integers(2, 10))
        return f"merge-bomb-{w}x{d}", merge_bomb(w, d, key) + text
    if kind == "recursive-alias":
        form = draw(st.sampled_from(("&a [*a]", "&a {x: *a}", "&a [1, [2, *a]]", "&a {<<: *a}")))
        return "recursive-alias", f"{key}: {form}\n" + text
    if kind == "deep-lists":
        n = draw(st.integers(50, 6000))
        closed = draw(st.booleans())
        return f"deep-lists-{n}", f"{key}: " + "[" * n + ("]" * n if closed else "") + "\n"
    if kind == "deep-maps":
        n = draw(st.integers(50, 3000))
        return f"deep-maps-{n}", f"{key}: " + "{a: " * n + "1" + "}" * n + "\n"
    if kind == "tag":
        return "tag", f"{key}: {draw(st.sampled_from(TAGS))}\n" + text
    if kind == "duplicate":
        lines = text.splitlines(keepends=True) or ["version: 1\n"]
        i = draw(st.integers(0, len(lines) - 1))
        return "duplicate-line", "".join([*lines[: i + 1], *lines[i:]])
    if kind == "tabs":
        return "tabs", text.replace("  ", "\t")
    if kind == "documents":
        return "documents", text + "---\n" + text
    if kind == "truncate":
        return "truncate", text[:pos]
    if kind == "long-line":
        n = draw(st.integers(1000, 100_000))
        return "long-line", f"{key}: " + draw(st.sampled_from(("x", "[1, ", "é"))) * n + "\n" + text
    if kind == "anchor-cycle-key":
        return "anchor-key", "? &k [*k]\n: 1\n" + text
    ch = draw(st.sampled_from(ODD_STRINGS[:9]) | st.characters())
    return "insert-char", text[:pos] + ch + text[pos:]


ENCODINGS = ("utf-8", "utf-8", "utf-8", "utf-8-sig", "utf-16", "utf-32", "latin-1", "cesu")


@st.composite
def policy_cases(draw: st.DrawFn) -> PolicyCase:
    """A policy file's bytes, and what kind of hostility it holds."""
    route = draw(st.integers(0, 9))
    if route == 0:
        return PolicyCase("raw-bytes", draw(st.binary(max_size=2000)))
    if route == 1:
        return PolicyCase("raw-text", draw(st.text(max_size=500)).encode("utf-8", "surrogatepass"))
    doc = draw(documents)
    text = render(doc, draw(st.booleans()), draw(st.booleans()))
    shapes = ["structured"]
    for _ in range(draw(st.sampled_from((0, 1, 1, 1, 2)))):
        shape, text = draw(text_mutation(text))
        shapes.append(shape)
    codec = draw(st.sampled_from(ENCODINGS))
    if codec == "cesu":
        data = text.encode("utf-8", "surrogatepass")
    else:
        data = text.encode(codec, "surrogatepass" if codec.startswith("utf-8") else "replace")
    if draw(st.integers(0, 5)) == 0:
        at = draw(st.integers(0, len(data)))
        data = (
            data[:at]
            + draw(st.sampled_from((b"\xff", b"\x00", b"\xc3", b"\xed\xa0\x80")))
            + data[at:]
        )
        shapes.append("bad-byte")
    return PolicyCase("+".join([*shapes, codec]), data)


policy_texts = st.one_of(
    st.text(max_size=400),
    st.builds(lambda d, f: render(d, f, True), documents, st.booleans()),
)
