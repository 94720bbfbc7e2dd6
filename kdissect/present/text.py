"""The annotated tree as text, one line per node, in the seed pages' format.

    DescribeProducersRequest message v0 [0x0000, 24B]
    +-- Frame [0x0000, 4B] length-delimited framing
    |   +-- size int32 = 20 [0x0000, 4B] number of bytes that follow, patched after encoding

Generated nodes are bracketed, Wireshark-style, and marked in their description:
`+-- [lag int64 = 5] [0x003b, 0B] high watermark minus log end offset (generated)`.
Notes follow the line of the node they belong to, as `!! error: ... at 0x001d`.
"""

from __future__ import annotations

from kdissect.decode.tree import Node, printable

ABOUT_LIMIT = 78  # longer descriptions are cut to 75 characters plus "..."
_BARE_TYPES = ("frame", "header")  # types the line does not repeat
_SPACED_DISPLAY = ("message", "header")  # "v2" follows the name without "="


def render_tree(root: Node, *, show_generated: bool = True, wide: bool = False,
                show_notes: bool = True) -> str:
    """The tree under `root` as text lines joined by newlines (no trailing newline)."""
    lines: list[str] = []
    append = lines.append
    stack: list[tuple[Node, str, str]] = [(root, "", "")]
    while stack:
        node, prefix, child_prefix = stack.pop()
        append(prefix + node_line(node, wide=wide))
        children = node.children
        if not show_generated and children:
            children = [c for c in children if not c.generated]
        if show_notes and node.notes:
            bar = "|   " if children else "    "
            lines.extend(f"{child_prefix}{bar}!! {printable(str(n))}" for n in node.notes)
        if children:
            last = len(children) - 1
            branch, continued, ended = child_prefix + "+-- ", child_prefix + "|   ", child_prefix + "    "
            stack.extend((children[i], branch, ended if i == last else continued)
                         for i in range(last, -1, -1))
    return "\n".join(lines)


def node_line(node: Node, *, wide: bool = False) -> str:
    """One node's line, without the tree prefix."""
    kind = node.type
    head = node.name if kind in _BARE_TYPES else f"{node.name} {kind}"
    if node.display:
        head += (" " if kind in _SPACED_DISPLAY else " = ") + node.display
    about = node.about
    if node.generated:
        head = f"[{head}]"
        about = f"{_cut(about, wide)} (generated)" if about else "(generated)"
        tail = " " + about
    elif wide:
        tail = " " + about if about else ""
    else:
        tail = _TAILS.get(about) or _tail(about)
    line = f"{head} [0x{node.offset:04x}, {node.size}B]{tail}"
    # Wire strings are escaped when decoded; this guards everything else.
    return line if line.isprintable() else printable(line)


_TAILS: dict[str, str] = {}  # about text -> " about" cut to the limit; schema texts repeat


def _tail(about: str) -> str:
    tail = " " + _cut(about, False) if about else ""
    if len(_TAILS) < 4096:
        _TAILS[about] = tail
    return tail


def _cut(about: str, wide: bool) -> str:
    if wide or len(about) <= ABOUT_LIMIT:
        return about
    return about[:ABOUT_LIMIT - 3] + "..."
