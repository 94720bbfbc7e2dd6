"""Presentation: the tree as text and the frame as a hex dump (more formats live beside them)."""

from kdissect.present.hexdump import hexdump
from kdissect.present.text import node_line, render_tree

__all__ = ["hexdump", "node_line", "render_tree"]
