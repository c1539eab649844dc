"""YAML that cannot run away: size, encoding, nesting and alias expansion are bounded.

PyYAML's safe loader is safe against code execution but not against work: nine anchors
of nine aliases each expand to 9⁹ nodes when walked, deep nesting exhausts Python's
recursion limit, and bytes that are not text fail with a ``UnicodeDecodeError``. Here
every such input is refused *before* composing the document, in one pass over the
parser's event stream (which PyYAML produces without recursion), and each refusal says
where: the byte offset for bad bytes, the line for the YAML that breaks a bound.
Only then is the document composed and constructed, so the work after this point is
linear in ``MAX_NODES``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import ConstructorError

MAX_BYTES = 4 * 1024 * 1024  # a k=48 fat-tree's 27,648 hosts in flow style fit in ~1.5 MiB
MAX_DEPTH = 24  # the policy schema nests 5 deep
MAX_ALIASES = 1000
MAX_NODES = 500_000  # after expanding aliases: 27,648 hosts of {mac, ip} are 140,000

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present


@dataclass(frozen=True)
class YamlRefusal(Exception):
    """A document refused before or while it was read; ``line`` is 1-based."""

    line: int
    message: str

    def __str__(self) -> str:
        return self.message


def decode(data: bytes) -> str:
    """A file's bytes as text, if they are UTF-8; raises ``YamlRefusal``."""
    if len(data) > MAX_BYTES:
        raise YamlRefusal(1, f"larger than {MAX_BYTES:,} bytes, the most a policy may be")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise YamlRefusal(
            line, f"not UTF-8 text: byte 0x{data[exc.start]:02x} at byte offset {exc.start}"
        ) from None
    return text


def check_text(text: str) -> str:
    """``text`` without a byte-order mark, if it is small enough and has only the
    characters YAML allows; raises ``YamlRefusal``."""
    if len(text) > MAX_BYTES:
        raise YamlRefusal(1, f"larger than {MAX_BYTES:,} bytes, the most a policy may be")
    text = text.removeprefix("\ufeff")
    bad = _NOT_PRINTABLE.search(text)
    if bad is not None:
        offset = bad.start()
        raise YamlRefusal(
            text.count("\n", 0, offset) + 1,
            f"control character U+{ord(bad.group()):04X} at byte offset "
            f"{len(text[:offset].encode(errors='replace'))}; "
            "YAML allows tab, newline and printable text only",
        )
    return text


# YAML 1.1's printable set (section 5.1), complemented.
_NOT_PRINTABLE = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def check_events(text: str) -> None:
    """Walk the event stream once and refuse what would be too deep, too large once
    aliases expand, or cyclic; raises ``YamlRefusal`` naming the line."""
    walk = _EventWalk()
    for event in yaml.parse(text, Loader=_Loader):
        line = event.start_mark.line + 1 if event.start_mark else 1
        size = walk.step(event, line)
        if size is not None:
            walk.count(size, line)


@dataclass
class _EventWalk:
    """What ``check_events`` tracks between events, so each kind of event is one method."""

    depth: int = 0
    aliases: int = 0
    documents: int = 0
    sizes: dict[str, int] = field(default_factory=dict)  # anchor -> expanded node count
    # Open collections: [anchor, expanded size]; the first is the document itself.
    stack: list[list[Any]] = field(default_factory=lambda: [[None, 0]])
    open_anchors: set[str] = field(default_factory=set)

    def step(self, event: yaml.Event, line: int) -> int | None:
        """The expanded size ``event`` adds to the collection it is in, or None when it
        adds nothing to count (collection starts, stream and document ends)."""
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                raise YamlRefusal(line, "a second YAML document; a policy is one document")
            return 0
        if isinstance(event, yaml.CollectionStartEvent):
            self._open(event, line)
            return None
        if isinstance(event, yaml.CollectionEndEvent):
            return self._close()
        if isinstance(event, yaml.ScalarEvent):
            if event.anchor:
                self.sizes[event.anchor] = 1
            return 1
        if isinstance(event, yaml.AliasEvent):
            return self._alias(event, line)
        return None

    def _open(self, event: yaml.CollectionStartEvent, line: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise YamlRefusal(line, f"nested more than {MAX_DEPTH} levels deep")
        if event.anchor:
            self.open_anchors.add(event.anchor)
        self.stack.append([event.anchor, 1])

    def _close(self) -> int:
        """The closed collection's expanded size, remembered under its anchor."""
        self.depth -= 1
        anchor, size = self.stack.pop()
        if anchor:
            self.open_anchors.discard(anchor)
            self.sizes[anchor] = size
        return int(size)

    def _alias(self, event: yaml.AliasEvent, line: int) -> int:
        """The aliased node's expanded size; an alias inside its own anchor is a cycle."""
        self.aliases += 1
        if self.aliases > MAX_ALIASES:
            raise YamlRefusal(line, f"more than {MAX_ALIASES} aliases")
        if event.anchor in self.open_anchors:
            raise YamlRefusal(line, f"alias *{event.anchor} refers to a node that contains it")
        return self.sizes.get(str(event.anchor), 1)

    def count(self, size: int, line: int) -> None:
        """Add ``size`` to the innermost open collection; refuse once the document or
        that collection expands past ``MAX_NODES``."""
        self.stack[-1][1] += size
        if self.stack[0][1] > MAX_NODES or self.stack[-1][1] > MAX_NODES:
            raise YamlRefusal(
                line, f"more than {MAX_NODES:,} values once aliases are expanded (an alias bomb?)"
            )


class _Constructor(yaml.SafeLoader):
    """Safe construction from an already composed node; a value Python cannot hold
    (an integer of 5,000 digits) becomes a located error instead of a ``ValueError``."""

    def __init__(self) -> None:
        super().__init__("")

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, OverflowError) as exc:
            problem = f"value cannot be read: {exc}"
            raise ConstructorError(None, None, problem, node.start_mark) from None


def load(text: str) -> tuple[yaml.Node | None, Any]:
    """The document's node tree (for line numbers) and its data; bounded work.
    Raises ``YamlRefusal`` or ``yaml.YAMLError``."""
    text = check_text(text)
    check_events(text)
    root = yaml.compose(text, Loader=_Loader)
    if root is None:
        return None, None
    return root, _Constructor().construct_document(root)


def error_line(exc: yaml.YAMLError) -> tuple[int, str]:
    """(line, problem) of a PyYAML error, whichever kind it is."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc)
    return (mark.line + 1 if mark is not None else 1), str(problem)
