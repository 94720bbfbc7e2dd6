"""Presentation: the tree as text and the frame as a hex dump (more formats live beside them).

The names below are imported on first use: importing one presentation module (the summary
line, say) does not load the tree writers and, through them, the whole decode tier.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kdissect.present.hexdump import hexdump
    from kdissect.present.text import node_line, render_tree


def __getattr__(name: str) -> Any:
    if name == "hexdump":
        from kdissect.present.hexdump import hexdump

        return hexdump
    if name in ("node_line", "render_tree"):
        from kdissect.present import text

        return getattr(text, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["hexdump", "node_line", "render_tree"]
