"""Jupyter views: a message tree as collapsible HTML, a capture as a summary.

The decode and pair tiers know nothing of HTML: importing this module registers
the views of their `Node` and `Message` objects in `kdissect.decode.tree.HTML_VIEWS`.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from kdissect.decode.tree import HTML_VIEWS, TEXT_VIEWS, Node
from kdissect.pair.message import Message
from kdissect.present.summary import summary_line

if TYPE_CHECKING:
    from kdissect.present.analysis import Capture

_STYLE = (
    "<style>.kd-tree{font-family:monospace;font-size:12px;line-height:1.4}"
    ".kd-tree details>div,.kd-tree details>details{margin-left:1.5em}"
    ".kd-at{color:#888}.kd-about{color:#555;font-style:italic}.kd-gen{color:#2a7}"
    ".kd-note{color:#c00}</style>"
)
OPEN_DEPTH = 2  # levels expanded when first shown


def tree_html(root: Node) -> str:
    return f"{_STYLE}<div class='kd-tree'>{_node_html(root, 0)}</div>"


def message_html(message: Message) -> str:
    return f"<div><b>{escape(summary_line(message))}</b></div>" + tree_html(message.tree())


# What a capture's preview shows of its first messages: the listing's columns.
PREVIEW_COLUMNS = ("number", "time", "src", "dst", "api_name", "api_version", "direction",
                   "correlation_id", "client_id", "latency_ms", "notes")


def capture_html(capture: Capture) -> str:
    head = "<br>".join(escape(line) for line in capture._summary_lines())
    table = capture.messages.head(20)[list(PREVIEW_COLUMNS)].to_html(index=False)
    more = "" if len(capture) <= 20 else f"<p>... {len(capture) - 20} more messages</p>"
    return f"<div><p>{head}</p>{table}{more}</div>"


def _node_html(node: Node, depth: int) -> str:
    label = _label(node)
    if not node.children:
        return f"<div>{label}</div>"
    inner = "".join(_node_html(child, depth + 1) for child in node.children)
    opened = " open" if depth < OPEN_DEPTH else ""
    return f"<details{opened}><summary>{label}</summary>{inner}</details>"


def _label(node: Node) -> str:
    text = escape(node.name)
    if node.type not in ("frame", "header"):
        text += " " + escape(node.type)
    if node.display:
        separator = " " if node.type in ("message", "header") else " = "
        text += separator + "<b>" + escape(node.display) + "</b>"
    text += f" <span class='kd-at'>[0x{node.offset:04x}, {node.size}B]</span>"
    if node.about:
        text += f" <span class='kd-about'>{escape(node.about)}</span>"
    if node.generated:
        text = f"<span class='kd-gen'>[{text}]</span>"
    for note in node.notes:
        text += f" <span class='kd-note'>{escape(str(note))}</span>"
    return text


def message_text(message: Message) -> str:
    """The summary line and the text tree of a message, as `-V` prints them."""
    from kdissect.present.summary import summary_line
    from kdissect.present.text import render_tree

    return summary_line(message) + "\n" + render_tree(message.tree())


def tree_text(node: Node) -> str:
    from kdissect.present.text import render_tree

    return render_tree(node)


HTML_VIEWS[Node] = tree_html
HTML_VIEWS[Message] = message_html
TEXT_VIEWS[Node] = tree_text
TEXT_VIEWS[Message] = message_text
