"""The README stays short and the docs stay true: every link between them resolves, and
the metrics and REST references list exactly what the code declares and answers."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from controller import api
from controller.jobspec import Job
from controller.metrics import METRICS
from controller.policy import schema

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
MENTION = re.compile(r"(?<![\w/.])docs/[\w-]+\.md")


def anchors(doc: Path) -> set[str]:
    """The anchors a Markdown renderer gives a file's headings (GitHub's rule: lower case,
    punctuation dropped, spaces as hyphens, a repeated heading suffixed -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in doc.read_text().splitlines():
        fenced ^= line.startswith("```")
        heading = re.match(r"#{1,6} (.+)", line)
        if heading is None or fenced:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_the_readme_stays_short() -> None:
    assert len(README.read_text().splitlines()) <= 250


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_every_link_to_a_file_of_the_repository_resolves(doc: Path) -> None:
    text = doc.read_text()
    targets = [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]
    broken = []
    for target in targets:
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists() or (file.suffix == ".md" and anchor and anchor not in anchors(file)):
            broken.append(target)
    missing = [m for m in MENTION.findall(text) if not (ROOT / m).exists()]
    assert broken == [] and missing == []


def test_the_readme_points_into_the_docs() -> None:
    linked = {Path(t.partition("#")[0]).name for t in LINK.findall(README.read_text())}
    for name in ("operator.md", "rest.md", "policy.md", "metrics.md", "settings.md", "results.md"):
        assert name in linked


def test_the_metrics_reference_matches_the_declared_metrics() -> None:
    doc = (ROOT / "docs" / "metrics.md").read_text()
    rows = re.findall(r"^\| `(loom_[a-z_]+)` \| (\w+) \| ([^|]+) \|", doc, re.MULTILINE)
    assert rows, "no metrics table in docs/metrics.md"
    documented = {name: (kind, labels.strip()) for name, kind, labels in rows}
    declared = {m.name: (m.kind, ", ".join(m.labels) or "-") for m in METRICS}
    assert documented == declared


def the_apis_calls() -> set[tuple[str, str, str | None]]:
    """(method, resource, shape) of every call ``LoomApi`` routes, read from its source."""
    calls: set[tuple[str, str, str | None]] = set()
    for node in ast.walk(ast.parse(inspect.getsource(api))):
        if isinstance(node, ast.Tuple) and len(node.elts) == 3:
            parts = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if parts[0] in ("GET", "POST", "PUT", "DELETE"):
                shape = parts[2]
                calls.add((str(parts[0]), str(parts[1]), None if shape is None else str(shape)))
    return calls


def test_the_rest_reference_names_every_call_and_no_other() -> None:
    doc = (ROOT / "docs" / "rest.md").read_text()
    documented = set()
    for method, path in re.findall(r"`(GET|POST|PUT|DELETE) ([A-Za-z/_-]+)", doc):
        resource, *rest = path.split("/")
        shape = None if not rest else "*" if len(rest) == 1 else f"*/{rest[1]}"
        documented.add((method, resource, shape))
    assert the_apis_calls() and documented == the_apis_calls()


def test_the_policy_reference_names_every_key_of_the_schema() -> None:
    doc = (ROOT / "docs" / "policy.md").read_text()
    models = [m for m in vars(schema).values() if isinstance(m, type) and issubclass(m, BaseModel)]
    keys = {f.alias or k for m in models for k, f in m.model_fields.items()}
    keys |= set(Job.model_fields) - {"hosts"}  # a policy's jobs are REST's jobs
    assert keys and [k for k in sorted(keys) if not re.search(rf"\b{k}\b", doc)] == []
