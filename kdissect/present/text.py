"""The annotated tree as text, one line per node, in the seed pages' format.

    DescribeProducersRequest message v0 [0x0000, 24B]
    +-- Frame [0x0000, 4B] length-delimited framing
    |   +-- size int32 = 20 [0x0000, 4B] number of bytes that follow, patched after encoding

Generated nodes are bracketed, Wireshark-style, and marked in their description:
`+-- [lag int64 = 5] [0x003b, 0B] high watermark minus log end offset (generated)`.
Notes follow the line of the node they belong to, as `!! error: ... at 0x001d`.
"""

from __future__ import annotations

from kdissect.tree import Node, printable

ABOUT_LIMIT = 78  # longer descriptions are cut to 75 characters plus "..."
_BARE_TYPES = ("frame", "header")  # types the line does not repeat
_SPACED_DISPLAY = ("message", "header")  # "v2" follows the name without "="


def render_tree(root: Node, *, show_generated: bool = True, wide: bool = False,
                show_notes: bool = True) -> str:
    """The tree under `root` as text lines joined by newlines (no trailing newline)."""
    lines: list[str] = []
    _render(root, "", "", lines, show_generated, wide, show_notes)
    return "\n".join(lines)


def _render(node: Node, prefix: str, child_prefix: str, lines: list[str],
            show_generated: bool, wide: bool, show_notes: bool) -> None:
    lines.append(prefix + node_line(node, wide=wide))
    shown = [c for c in node.children if show_generated or not c.generated]
    if show_notes:
        bar = "|   " if shown else "    "
        lines.extend(f"{child_prefix}{bar}!! {_safe(str(n))}" for n in node.notes)
    for index, child in enumerate(shown):
        last = index == len(shown) - 1
        _render(child, child_prefix + "+-- ", child_prefix + ("    " if last else "|   "),
                lines, show_generated, wide, show_notes)


def node_line(node: Node, *, wide: bool = False) -> str:
    """One node's line, without the tree prefix."""
    head = node.name if node.type in _BARE_TYPES else f"{node.name} {node.type}"
    if node.display:
        head += (" " if node.type in _SPACED_DISPLAY else " = ") + node.display
    if node.generated:
        head = f"[{head}]"
    about = _cut(node.about, wide)
    if node.generated:
        about = f"{about} (generated)" if about else "(generated)"
    line = f"{head} [0x{node.offset:04x}, {node.size}B]"
    return _safe(f"{line} {about}" if about else line)


def _cut(about: str, wide: bool) -> str:
    if wide or len(about) <= ABOUT_LIMIT:
        return about
    return about[:ABOUT_LIMIT - 3] + "..."


def _safe(text: str) -> str:
    # Displays of wire strings are escaped when decoded; this guards everything else.
    return printable(text)
