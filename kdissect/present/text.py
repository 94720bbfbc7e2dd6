"""The annotated tree as text, one line per node, in the seed pages' format.

    DescribeProducersRequest message v0 [0x0000, 24B]
    +-- Frame [0x0000, 4B] length-delimited framing
    |   +-- size int32 = 20 [0x0000, 4B] number of bytes that follow, patched after encoding

Generated nodes are bracketed, Wireshark-style, and marked in their description:
`+-- [lag int64 = 5] [0x003b, 0B] high watermark minus log end offset (generated)`.
Notes follow the line of the node they belong to, as `!! error: ... at 0x001d`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kdissect.decode.rows import Row
from kdissect.decode.tree import Node, printable
from kdissect.present.lines import (
    BARE_TYPES,
    SPACED_DISPLAY,
    TAILS,
    about_tail,
    node_text,
    row_lines,
)
from kdissect.present.verbose import message_lines, message_text

if TYPE_CHECKING:
    from kdissect.pair.message import Message


def render_tree(root: Node, *, show_generated: bool = True, wide: bool = False,
                show_notes: bool = True) -> str:
    """The tree under `root` as text lines joined by newlines (no trailing newline)."""
    lines: list[str] = []
    _render_node(root, "", "", lines, show_generated, wide, show_notes)
    return "\n".join(lines)


def _render_node(node: Node, prefix: str, child_prefix: str, lines: list[str], show_generated: bool,
                 wide: bool, show_notes: bool) -> None:
    lines.append(prefix + _common_line(node.name, node.type, node.display, node.offset, node.size, node.about,
                                       node.generated, wide))
    children = node.children
    if not show_generated and children:
        children = [c for c in children if not c.generated]
    if show_notes and node.notes:
        bar = "|   " if children else "    "
        lines.extend(f"{child_prefix}{bar}!! {printable(str(n))}" for n in node.notes)
    if not children:
        return
    branch, continued, ended = child_prefix + "+-- ", child_prefix + "|   ", child_prefix + "    "
    last = children[-1]
    for child in children:
        if child.children or child.notes:
            _render_node(child, branch, ended if child is last else continued, lines, show_generated, wide,
                         show_notes)
        else:  # most nodes: a leaf, inline
            lines.append(branch + _common_line(child.name, child.type, child.display, child.offset, child.size,
                                               child.about, child.generated, wide))


def render_message(message: Message, *, wide: bool = False) -> str:
    """A message's tree as text: written straight from flat values when the body took the
    fast path (`kdissect.present.verbose`), else laid out as rows or, failing that, from the
    interpreter's tree (with its notes); the same text either way."""
    if not wide:
        text = message_text(message)
        if text is not None:
            return text
    return _slow_text(message, wide)


def render_message_lines(message: Message, lines: list[str], *, wide: bool = False) -> None:
    """`render_message`'s text appended to `lines` in pieces that, joined by newlines, are
    that text: a writer joining them with its own lines copies the text once."""
    if wide or not message_lines(message, lines):
        lines.append(_slow_text(message, wide))


def _slow_text(message: Message, wide: bool) -> str:
    rows = message.rows(records=True)
    return render_tree(message.tree(), wide=wide) if rows is None else render_rows(rows, wide=wide)


def render_rows(root: Row, *, show_generated: bool = True, wide: bool = False) -> str:
    """The same text as `render_tree`, from a tree laid out as rows (`kdissect.decode.rows`).

    Rows come from bodies the fast path took, which carry no notes.
    """
    lines: list[str] = []
    if show_generated and not wide:  # what -V prints: the fast loop
        name, kind, _, display, offset, size, about, children, generated = root
        lines.append(_common_line(name, kind, display, offset, size, about, generated, False))
        if children:
            row_lines(children, "", lines)
    else:
        _render_row(root, "", "", lines, show_generated, wide)
    return "\n".join(lines)


def _render_row(row: Row, prefix: str, child_prefix: str, lines: list[str], show_generated: bool,
                wide: bool) -> None:
    name, kind, _, display, offset, size, about, children, generated = row
    lines.append(prefix + _common_line(name, kind, display, offset, size, about, generated, wide))
    if children and not show_generated:
        children = [c for c in children if not c[8]]
    if not children:
        return
    branch, continued, ended = child_prefix + "+-- ", child_prefix + "|   ", child_prefix + "    "
    last = children[-1]
    for child in children:
        if child[7]:
            _render_row(child, branch, ended if child is last else continued, lines, show_generated, wide)
        else:  # most rows: a leaf, inline
            name, kind, _, display, offset, size, about, _, generated = child
            lines.append(branch + _common_line(name, kind, display, offset, size, about, generated, wide))


def _common_line(name: str, kind: str, display: str, offset: int, size: int, about: str, generated: bool,
                 wide: bool) -> str:
    """`node_text`, with the common case (not generated, not wide, a typed node) inline."""
    if generated or wide or kind in BARE_TYPES:
        return node_text(name, kind, display, offset, size, about, generated, wide)
    tail = TAILS.get(about) or about_tail(about)
    if display:
        line = f"{name} {kind}{' ' if kind in SPACED_DISPLAY else ' = '}{display} [0x{offset:04x}, {size}B]{tail}"
    else:
        line = f"{name} {kind} [0x{offset:04x}, {size}B]{tail}"
    return line if line.isprintable() else printable(line)


def node_line(node: Node, *, wide: bool = False) -> str:
    """One node's line, without the tree prefix."""
    return node_text(node.name, node.type, node.display, node.offset, node.size, node.about, node.generated, wide)
