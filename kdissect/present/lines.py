"""One node's line of the text tree: the parts every `-V` writer shares.

    name type = display [0xoffset, sizeB] about

Descriptions are cut to `ABOUT_LIMIT` characters unless wide; generated nodes are
bracketed and say so after their description. Wire strings are escaped where they
are decoded; `node_text` escapes whatever else is not printable.
"""

from __future__ import annotations

from kdissect.decode.tree import Row, printable

ABOUT_LIMIT = 78  # longer descriptions are cut to 75 characters plus "..."
BARE_TYPES = ("frame", "header")  # types the line does not repeat
SPACED_DISPLAY = ("message", "header")  # "v2" follows the name without "="


def node_text(name: str, kind: str, display: str, offset: int, size: int, about: str, generated: bool,
              wide: bool) -> str:
    """One node's line, without the tree prefix."""
    head = name if kind in BARE_TYPES else f"{name} {kind}"
    if display:
        head += (" " if kind in SPACED_DISPLAY else " = ") + display
    if generated:
        head = f"[{head}]"
        about = f"{cut(about, wide)} (generated)" if about else "(generated)"
        tail = " " + about
    elif wide:
        tail = " " + about if about else ""
    else:
        tail = TAILS.get(about) or about_tail(about)
    line = f"{head} [0x{offset:04x}, {size}B]{tail}"
    # Wire strings are escaped when decoded; this guards everything else.
    return line if line.isprintable() else printable(line)


TAILS: dict[str, str] = {}  # about text -> " about" cut to the limit and escaped; schema texts repeat
GENERATED_TAILS: dict[str, str] = {}  # the same for generated nodes, "(generated)" added


def about_tail(about: str) -> str:
    """What follows the offset and size of a line: " about", cut and escaped ("" for none)."""
    tail = printable(" " + cut(about, False)) if about else ""
    if len(TAILS) < 4096:
        TAILS[about] = tail
    return tail


def generated_tail(about: str) -> str:
    """The same for a generated node: its description and "(generated)"."""
    tail = printable(f" {cut(about, False)} (generated)" if about else " (generated)")
    if len(GENERATED_TAILS) < 4096:
        GENERATED_TAILS[about] = tail
    return tail


def cut(about: str, wide: bool) -> str:
    if wide or len(about) <= ABOUT_LIMIT:
        return about
    return about[:ABOUT_LIMIT - 3] + "..."


def row_lines(children: list[Row], child_prefix: str, lines: list[str]) -> None:
    """The lines of `children` (rows, `kdissect.decode.rows`) and all below them, every row
    shown and descriptions cut, as `render_rows` writes them: each line in one f-string."""
    branch, tails, append, plain, hexes = child_prefix + "+-- ", TAILS, lines.append, _PLAIN, _hexes()
    last = children[-1]
    for child in children:
        name, kind, _, display, offset, size, about, grandchildren, generated = child
        if kind in BARE_TYPES or kind in SPACED_DISPLAY:
            append(branch + node_text(name, kind, display, offset, size, about, generated, False))
        else:
            at = hexes[offset] if offset < _HEX_CACHED else f"0x{offset:04x}"
            if generated:  # bracketed, and said so after its description
                tail = GENERATED_TAILS.get(about) or generated_tail(about)
                if display:
                    line = f"{branch}[{name} {kind} = {display}] [{at}, {size}B]{tail}"
                else:
                    line = f"{branch}[{name} {kind}] [{at}, {size}B]{tail}"
            else:
                cached = tails.get(about)
                tail = about_tail(about) if cached is None else cached
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
            row_lines(grandchildren, child_prefix + ("    " if child is last else "|   "), lines)


_PLAIN: set[str] = set()  # names and types known to print as they are
_HEX_CACHED = 1 << 16
_HEXES: list[str] = []  # "0x%04x" of the offsets below _HEX_CACHED, made on first use


def _hexes() -> list[str]:
    if not _HEXES:  # each "0x" and its high byte, then its low byte: a concatenation, not a format
        highs, lows = [f"0x{high:02x}" for high in range(256)], [f"{low:02x}" for low in range(256)]
        _HEXES.extend([high + low for high in highs for low in lows])
        assert len(_HEXES) == _HEX_CACHED
    return _HEXES


def _plain(text: str) -> bool:
    """Whether `text` prints as it is; remembered (up to a bound) when it does."""
    if not text.isprintable():
        return False
    if len(_PLAIN) < 65536:
        _PLAIN.add(text)
    return True


__all__ = ["ABOUT_LIMIT", "BARE_TYPES", "GENERATED_TAILS", "SPACED_DISPLAY", "TAILS", "about_tail", "cut",
           "generated_tail", "node_text", "row_lines"]
