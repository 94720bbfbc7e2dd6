"""The annotated field tree: one node type for every field of a Kafka message.

A node knows its name, Kafka type, decoded value, display text, byte offset
from the start of the frame, size, and the schema's description. Children
tile their parent exactly (no gap, no overlap) unless they are *generated*:
values computed by a dissector (a voter's lag, an error name) rather than read
from the wire, which have size 0 and are skipped by the tiling invariant.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kdissect.notes import Note

# A node laid out as a plain tuple, for writers that need no `Node` object (`kdissect.decode.rows`):
#     (name, type, value, display, offset, size, about, children, generated)
Row = tuple[str, str, Any, str, int, int, str, "list[Row] | None", bool]

# How objects of this tier and the pair tier show in Jupyter (HTML) and at a Python
# prompt (text), by type. The presentation layer fills them when imported
# (kdissect.present.html): this tier imports nothing above it.
HTML_VIEWS: dict[type, Callable[[Any], str]] = {}
TEXT_VIEWS: dict[type, Callable[[Any], str]] = {}


def html_view(item: object) -> str | None:
    """The registered HTML of `item`, or None (Jupyter then shows its text)."""
    view = HTML_VIEWS.get(type(item))
    return None if view is None else view(item)


def text_view(item: object) -> str | None:
    """The registered text of `item` (the tree as `-V` prints it), or None."""
    view = TEXT_VIEWS.get(type(item))
    return None if view is None else view(item)


class Role(enum.Enum):
    """What a node is in the tree, said once where it is made (never guessed from its type)."""

    FIELD = "field"  # a field, element, header part or anything else read from the wire
    BODY = "body"  # a message's decoded body struct
    ARRAY = "array"  # an array field: a `length` child, then its elements
    LENGTH = "length"  # an array's length prefix
    GENERATED = "generated"  # computed from other values, size 0
    MALFORMED = "malformed"  # bytes that could not be decoded, or should not be there


@dataclass(slots=True, eq=False, repr=False)
class Node:
    name: str
    type: str
    value: Any = None
    display: str = ""
    offset: int = 0
    size: int = 0
    about: str = ""
    children: list[Node] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    generated: bool = False
    role: Role = Role.FIELD

    @property
    def end(self) -> int:
        return self.offset + self.size

    def child(self, name: str) -> Node | None:
        """The first direct child called `name`, or None."""
        for node in self.children:
            if node.name == name:
                return node
        return None

    def __getitem__(self, name: str) -> Node:
        found = self.child(name)
        if found is None:
            raise KeyError(f"{self.name} has no child {name!r}")
        return found

    def walk(self, depth: int = 0, path: str = "") -> Iterator[tuple[Node, int, str]]:
        """Yield (node, depth, path) depth-first, the node itself first.

        Paths join names with dots; array elements keep their `[i]` suffix,
        so a partition reads `Topics[0].Partitions[2].LeaderId`.
        """
        stack: list[tuple[Node, int, str]] = [(self, depth, path or self.name)]
        while stack:
            node, level, node_path = stack.pop()
            yield node, level, node_path
            for child in reversed(node.children):
                stack.append((child, level + 1, _join(node_path, node, child)))

    def __repr__(self) -> str:  # the text tree at a Python prompt, as `-V` prints it
        return text_view(self) or f"<Node {self.name} {self.type} [{self.offset}, {self.size}B]>"

    def _repr_html_(self) -> str | None:  # a collapsible tree in Jupyter
        return html_view(self)

    def nodes(self) -> Iterator[Node]:
        """Every node of the subtree, the node itself first, without building paths."""
        stack = [self]
        pop, extend = stack.pop, stack.extend
        while stack:
            node = pop()
            yield node
            if node.children:
                extend(reversed(node.children))

    def all_notes(self) -> Iterator[Note]:
        for node in self.nodes():
            if node.notes:
                yield from node.notes

    def tiling_errors(self) -> list[str]:
        """Where the children of a node fail to tile it; empty when sound."""
        problems = []
        for node, _, path in self.walk():
            wire = [c for c in node.children if not c.generated]
            if not wire:
                continue
            cursor = node.offset
            for child in wire:
                if child.offset != cursor:
                    problems.append(f"{path}: child {child.name} at {child.offset}, expected {cursor}")
                cursor = child.end
            if cursor != node.end:
                problems.append(f"{path}: children end at {cursor}, node ends at {node.end}")
        return problems


def generated(name: str, kind: str, value: int, offset: int, about: str) -> Node:
    """A value computed from others, not read: size 0, shown in brackets, skipped by tiling."""
    return Node(name, kind, value, str(value), offset, 0, about, generated=True, role=Role.GENERATED)


def elements(array: Node | None) -> list[Node]:
    """The element nodes of an array node (its children after `length`)."""
    if array is None or array.role is not Role.ARRAY:
        return []
    return [c for c in array.children if c.role is Role.FIELD]


def _join(parent_path: str, parent: Node, child: Node) -> str:
    # Array elements are named `TopicRequest[0]`; in a path the element index
    # attaches to the array field instead: `Topics[0]`.
    name = child.name
    bracket = name.find("[")
    if bracket > 0 and parent.role is Role.ARRAY:
        return parent_path + name[bracket:]
    return f"{parent_path}.{name}" if parent_path else name


def printable(text: str) -> str:
    """Text from the wire made safe for a terminal: control and format characters escaped.

    A hostile client id or topic name must not be able to move the cursor,
    recolour the terminal or reorder what is shown (bidi overrides), so every
    C0/C1 control, DEL and Unicode format character becomes a visible escape.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
