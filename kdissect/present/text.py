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

if TYPE_CHECKING:
    from kdissect.pair.message import Message

ABOUT_LIMIT = 78  # longer descriptions are cut to 75 characters plus "..."
_BARE_TYPES = ("frame", "header")  # types the line does not repeat
_SPACED_DISPLAY = ("message", "header")  # "v2" follows the name without "="


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
    """A message's tree as text: laid out from flat values when the body took the fast
    path, from the interpreter's tree (with its notes) otherwise; the same text either way."""
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
            _child_lines(children, "", lines)
    else:
        _render_row(root, "", "", lines, show_generated, wide)
    return "\n".join(lines)


def _child_lines(children: list[Row], child_prefix: str, lines: list[str]) -> None:
    """The lines of `children` and all below them, as `_render_row` writes them with every
    row shown and descriptions cut: the common line formatted here, in one f-string."""
    branch, tails, append, plain, hexes = child_prefix + "+-- ", _TAILS, lines.append, _PLAIN, _hexes()
    last = children[-1]
    for child in children:
        name, kind, _, display, offset, size, about, grandchildren, generated = child
        if kind in _BARE_TYPES or kind in _SPACED_DISPLAY:
            append(branch + _line(name, kind, display, offset, size, about, generated, False))
        else:
            at = hexes[offset] if offset < _HEX_CACHED else f"0x{offset:04x}"
            if generated:  # bracketed, and said so after its description
                tail = _GENERATED_TAILS.get(about) or _generated_tail(about)
                if display:
                    line = f"{branch}[{name} {kind} = {display}] [{at}, {size}B]{tail}"
                else:
                    line = f"{branch}[{name} {kind}] [{at}, {size}B]{tail}"
            else:
                cached = tails.get(about)
                tail = _tail(about) if cached is None else cached
                if display:
                    line = f"{branch}{name} {kind} = {display} [{at}, {size}B]{tail}"
                else:
                    line = f"{branch}{name} {kind} [{at}, {size}B]{tail}"
            # Every part but the display, the name and the type is printable (the tails are
            # escaped when cached); escaping is per character, so a line escaped whole is
            # the same as one escaped in parts.
            if display.isprintable() and (name in plain or _plain(name)) and (kind in plain or _plain(kind)):
                append(line)
            else:
                append(printable(line))
        if grandchildren:
            _child_lines(grandchildren, child_prefix + ("    " if child is last else "|   "), lines)


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
    """`_line`, with the common case (not generated, not wide, a typed node) inline."""
    if generated or wide or kind in _BARE_TYPES:
        return _line(name, kind, display, offset, size, about, generated, wide)
    tail = _TAILS.get(about) or _tail(about)
    if display:
        line = f"{name} {kind}{' ' if kind in _SPACED_DISPLAY else ' = '}{display} [0x{offset:04x}, {size}B]{tail}"
    else:
        line = f"{name} {kind} [0x{offset:04x}, {size}B]{tail}"
    return line if line.isprintable() else printable(line)


def node_line(node: Node, *, wide: bool = False) -> str:
    """One node's line, without the tree prefix."""
    return _line(node.name, node.type, node.display, node.offset, node.size, node.about, node.generated, wide)


def _line(name: str, kind: str, display: str, offset: int, size: int, about: str, generated: bool,
          wide: bool) -> str:
    head = name if kind in _BARE_TYPES else f"{name} {kind}"
    if display:
        head += (" " if kind in _SPACED_DISPLAY else " = ") + display
    if generated:
        head = f"[{head}]"
        about = f"{_cut(about, wide)} (generated)" if about else "(generated)"
        tail = " " + about
    elif wide:
        tail = " " + about if about else ""
    else:
        tail = _TAILS.get(about) or _tail(about)
    line = f"{head} [0x{offset:04x}, {size}B]{tail}"
    # Wire strings are escaped when decoded; this guards everything else.
    return line if line.isprintable() else printable(line)


_TAILS: dict[str, str] = {}  # about text -> " about" cut to the limit and escaped; schema texts repeat
_PLAIN: set[str] = set()  # names and types known to print as they are
_HEX_CACHED = 1 << 16
_HEXES: list[str] = []  # "0x%04x" of the offsets below _HEX_CACHED, made on first use


def _hexes() -> list[str]:
    if not _HEXES:
        _HEXES.extend(f"0x{offset:04x}" for offset in range(_HEX_CACHED))
    return _HEXES


def _plain(text: str) -> bool:
    """Whether `text` prints as it is; remembered (up to a bound) when it does."""
    if not text.isprintable():
        return False
    if len(_PLAIN) < 65536:
        _PLAIN.add(text)
    return True


_GENERATED_TAILS: dict[str, str] = {}  # the same for generated nodes, "(generated)" added


def _generated_tail(about: str) -> str:
    tail = printable(f" {_cut(about, False)} (generated)" if about else " (generated)")
    if len(_GENERATED_TAILS) < 4096:
        _GENERATED_TAILS[about] = tail
    return tail


def _tail(about: str) -> str:
    tail = printable(" " + _cut(about, False)) if about else ""
    if len(_TAILS) < 4096:
        _TAILS[about] = tail
    return tail


def _cut(about: str, wide: bool) -> str:
    if wide or len(about) <= ABOUT_LIMIT:
        return about
    return about[:ABOUT_LIMIT - 3] + "..."
