"""Hostile REST requests: job bodies with wrong types per field, unknown and duplicate
keys, deep nesting, huge numbers, NaN/Infinity, unicode oddities and absurd sizes;
malformed JSON and raw bytes; odd paths, methods, queries and Authorization headers."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.checks_rest import AUTH, RestCase
from tests.fuzz.strategies_frames import HOST_IPS, HOST_MACS

ODD = (
    "\ud800", "\udfff", "\x00", "\u202e", "\u200f", "\ufeff", "é", "𝓁𝑜𝑜𝓂", "", " ", "../..",
    "%00", "%2e%2e", "a" * 100_000, "resident", "research", "guests", "default", "10.0.0.2",
    "ring", "all_reduce", "all_to_all", "collective", "bulk", "backward", "both",
)  # fmt: skip
FIELDS = (
    "name", "tenant", "hosts", "pattern", "traffic_class", "ring_direction", "priority",
    "lease_seconds",
)  # fmt: skip
PATHS = (
    "/loom/v1/health", "/loom/v1/topology", "/loom/v1/routes", "/loom/v1/flows",
    "/loom/v1/jobs", "/loom/v1/jobs/resident", "/loom/v1/jobs/nope", "/loom/v1/policy",
    "/loom/v1/policy/reload", "/loom/v1/policy/unload", "/loom/v1/", "/loom/v2/jobs", "/",
    "", "//loom//v1//jobs//", "/loom/v1/jobs/resident/extra", "/loom/v1/jobs/../jobs",
    "/loom/v1/jobs/%00", "/loom/v1/jobs/\ud800", "/loom/v1/jobs/" + "x" * 100_000,
    "/LOOM/V1/JOBS", "/loom/v1/jobs?name=x", "loom/v1/jobs", "/loom/v1/jobs/\u202eboj",
    "/loom/v1/jobs/resident/renew", "/loom/v1/jobs/nope/renew", "/loom/v1/jobs/resident/order",
    "/loom/v1/order", "/loom/v1/topology/hosts", "/loom/v1/topology/slurm-conf",
    "/loom/v1/topology/slurm-yaml", "/loom/v1/topology/x", "/loom/v1/jobs/resident/order/x",
)  # fmt: skip
METHODS = ("GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS", "get", "post", "dElEtE")
AUTHS = (
    AUTH, AUTH, AUTH, "", "Bearer", "Bearer ", "bearer fuzz-token", "Bearer fuzz-token ",
    "Bearer fuzz-tokeN", "Basic Zm9vOmJhcg==", "Bearer fuzz-token\x00", "Bearer \ud800",
    "Bearer fuzz-tökén", "Bearer " + "x" * 10_000,
)  # fmt: skip

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.sampled_from(ODD), st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=10,
)


def either(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(good, good, json_values)


job_hosts = st.lists(st.sampled_from(HOST_IPS), min_size=0, max_size=17)
jobs = st.fixed_dictionaries(
    {
        "name": either(st.sampled_from(("llm", "resident", "a-b.c_d", "x" * 64, "x" * 65, "-x"))),
        "hosts": either(job_hosts),
    },
    optional={
        "tenant": either(st.sampled_from(("research", "guests", "default", "nobody"))),
        "pattern": either(st.sampled_from(("ring", "all_reduce", "all_to_all", "tree"))),
        "traffic_class": either(st.sampled_from(("collective", "control", "bulk", "gold"))),
        "ring_direction": either(st.sampled_from(("forward", "backward", "both", "up"))),
        "extra": json_values,
    },
)


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode("utf-8", "surrogatepass")  # json writes NaN as NaN


@st.composite
def bodies(draw: st.DrawFn) -> tuple[str, bytes]:
    kind = draw(st.integers(0, 12))
    if kind <= 4:
        return "job", dumps(draw(jobs))
    if kind == 5:
        return "json", dumps(draw(json_values))
    if kind == 6:
        return "raw", draw(st.binary(max_size=300))
    if kind == 7:
        n = draw(st.integers(100, 200_000))
        closed = draw(st.booleans())
        return f"deep-{n}", b"[" * n + (b"]" * n if closed else b"")
    if kind == 8:
        doc = draw(jobs)
        key = draw(st.sampled_from(FIELDS))
        text = dumps(doc)[:-1] + b', "' + key.encode() + b'": ' + dumps(draw(json_values)) + b"}"
        return "duplicate-key", text
    if kind == 9:
        token = draw(st.sampled_from((b"NaN", b"Infinity", b"-Infinity", b"1e999", b"9" * 5000,
                                      b"-" + b"1" * 4301, b"1" * 4300, b"0.1e-99999")))  # fmt: skip
        field = draw(st.sampled_from(FIELDS)).encode()
        return (
            "number",
            b'{"name": "llm", "hosts": ["10.0.0.2", "10.0.0.3"], "' + field + b'": ' + token + b"}",
        )
    if kind == 10:
        esc = draw(st.sampled_from((b'"\\ud800"', b'"\\udfff\\ud800"', b'"\\u0000"', b'"\xff\xfe"',
                                    b'"\xed\xa0\x80"', b'"\\u202e"', b'"\\x41"')))  # fmt: skip
        field = draw(st.sampled_from(FIELDS)).encode()
        return (
            "unicode",
            b'{"hosts": ["10.0.0.2", "10.0.0.3"], "name": "u", "' + field + b'": ' + esc + b"}",
        )
    if kind == 11:
        size = draw(
            st.sampled_from(("2MiB", "1MiB+1", "1MiB", "name-1e5", "hosts-1e6", "hosts-5000"))
        )
        return f"size-{size}", cached_sized_body(size)
    broken = dumps(draw(jobs))
    cut = draw(st.integers(0, len(broken)))
    return "truncated", broken[:cut]


def sized_body(size: str) -> bytes:
    if size == "2MiB":
        return b'{"name": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    if size == "1MiB+1":
        return b" " * (1024 * 1024 + 1)
    if size == "1MiB":
        return b'{"name": "big", "hosts": ["10.0.0.2", "10.0.0.3"]}' + b" " * (1024 * 1024 - 50)
    if size == "name-1e5":
        return dumps({"name": "n" * 100_000, "hosts": ["10.0.0.2", "10.0.0.3"]})
    n = 10**6 if size == "hosts-1e6" else 5000
    hosts = [f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}" for i in range(n)]
    return dumps({"name": "huge", "tenant": "research", "hosts": hosts})


_SIZED: dict[str, bytes] = {}


def cached_sized_body(size: str) -> bytes:
    if size not in _SIZED:
        _SIZED[size] = sized_body(size)
    return _SIZED[size]


queries: st.SearchStrategy[dict[str, str]] = st.one_of(
    st.just({}),
    st.fixed_dictionaries({"mac": st.sampled_from(HOST_MACS) | st.sampled_from(ODD) | st.text()}),
    st.dictionaries(st.sampled_from(("mac", "name", "", "\ud800")), st.text(max_size=10)),
    st.fixed_dictionaries(
        {"hosts": st.sampled_from(("", ",", "10.0.0.2,10.0.0.2", "10.0.0.2,x")) | st.text()}
    ),
)


@st.composite
def rest_cases(draw: st.DrawFn) -> RestCase:
    shape, body = draw(bodies())
    if draw(st.integers(0, 2)):  # mostly aimed at the job endpoint
        method, path = "POST", "/loom/v1/jobs"
    else:
        method = draw(st.sampled_from(METHODS) | st.text(max_size=8))
        path = draw(st.sampled_from(PATHS) | st.text(max_size=40))
    auth = draw(st.sampled_from(AUTHS) | st.text(max_size=20))
    return RestCase(f"{shape}@{method[:8]}", method, path, draw(queries), body, auth)
