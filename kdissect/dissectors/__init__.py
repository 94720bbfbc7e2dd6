"""Per-API meaning on top of the generic tree: names for numbers, and derived values.

The interpreter already decoded every field; a dissector only rewrites the
display of some of them (error codes, the authorized-operations bitfield,
timestamps, -1 sentinels) and adds generated nodes (values computed from the
wire, not read from it). Each API module exports one `Dissector`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kdissect.decode.tree import Node
from kdissect.error_codes import error_name

if TYPE_CHECKING:
    from kdissect.pair.message import Message

Columns = dict[str, list[Any]]

Annotator = Callable[[Node], None]
NOT_REQUESTED = -(2**31)  # authorized operations were not asked for
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_LAST_MILLISECOND = 253402300799999  # 9999-12-31 23:59:59.999 UTC

# Kafka's AclOperation codes: bit N of an authorized-operations field grants operation N.
ACL_OPERATIONS: dict[int, str] = {
    0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE",
    7: "ALTER", 8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
    12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS", 15: "TWO_PHASE_COMMIT",
}


@dataclass(frozen=True, slots=True)
class Dissector:
    """The meaning one API adds to the decoded bodies of its requests and responses."""

    api_key: int
    request: Callable[[Node, int], None]  # (body struct node, version)
    response: Callable[[Node, int], None]
    # A few words for the summary line from a decoded response body.
    response_summary: Callable[[Node], str] | None = None


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A tidy table an API contributes: which messages feed it and how rows are made.

    `rows(message, body, columns)` appends one value per column for each row;
    the DataFrame layer turns the columns into typed pandas columns
    (`dtypes`: a pandas dtype, or "utc" for epoch seconds, "utc_ms" for Kafka
    millisecond timestamps, "object" for lists).
    """

    name: str
    api_key: int
    request: bool  # rows come from requests (True) or from paired responses
    dtypes: Mapping[str, str]
    rows: Callable[[Message, Node, Columns], None]


def field_values(struct: Node) -> dict[str, Any]:
    """A struct's wire fields by name: their values, arrays as lists of element values."""
    values: dict[str, Any] = {}
    for child in struct.children:
        if child.generated or child.name in ("tagged_fields", "presence"):
            continue
        if child.type.startswith("[]") and child.value is not None:
            values[child.name] = [e.value for e in elements(child)]
        else:
            values[child.name] = child.value
    return values


def known(value: Any) -> Any:
    """None for Kafka's -1 "unknown / none" sentinel, the value otherwise."""
    return None if value == -1 else value


def add_row(columns: Columns, **row: Any) -> None:
    for name, value in row.items():
        columns[name].append(value)


def message_context(message: Message) -> dict[str, Any]:
    """The columns every per-API table starts with: when, which message, which connection."""
    return {"time": message.time, "message": message.number,
            "stream": message.frame.connection.index, "file": message.file}


CONTEXT_DTYPES = {"time": "utc", "message": "int64", "stream": "int64", "file": "category"}


def no_meaning(body: Node, version: int) -> None:
    """For bodies whose fields need no more than the generic decoding."""


def annotate(body: Node, rules: Mapping[str, Annotator]) -> None:
    """Apply the rule named like each integer field of `body` (lengths and counts excluded)."""
    for node in body.nodes():
        rule = rules.get(node.name)
        if rule is not None and _is_integer(node) and node.type != "uvarint":
            rule(node)


def _is_integer(node: Node) -> bool:
    return isinstance(node.value, int) and not isinstance(node.value, bool) and not node.generated


def error_code(node: Node) -> None:
    """`3 (UNKNOWN_TOPIC_OR_PARTITION)`; zero stays `0`."""
    if node.value:
        node.display = f"{node.value} ({error_name(node.value)})"


def sentinel(meaning: str) -> Annotator:
    """Label -1 with what it means for this field: `-1 (unknown)`."""
    def label(node: Node) -> None:
        if node.value == -1:
            node.display = f"-1 ({meaning})"
    return label


def timestamp(minus_one: str) -> Annotator:
    """Milliseconds since the epoch as a UTC datetime; -1 labelled with `minus_one`."""
    def label(node: Node) -> None:
        if node.value == -1:
            node.display = f"-1 ({minus_one})"
        elif 0 < node.value <= _LAST_MILLISECOND:
            node.display = f"{node.value} ({format_timestamp(node.value)})"
    return label


def format_timestamp(milliseconds: int) -> str:
    moment = _EPOCH + datetime.timedelta(milliseconds=milliseconds)
    return f"{moment:%Y-%m-%d %H:%M:%S}.{milliseconds % 1000:03d} UTC"


def authorized_operations(node: Node) -> None:
    """The bitfield as operation names; -2147483648 means they were not requested."""
    value = node.value
    if value == NOT_REQUESTED:
        node.display = f"{value} (not requested)"
    elif value:
        node.display = f"{value} ({', '.join(operation_names(value))})"


def operation_names(bits: int) -> list[str]:
    bits &= 0xFFFFFFFF
    return [ACL_OPERATIONS.get(bit, f"bit {bit}") for bit in range(32) if bits >> bit & 1]


def generated(name: str, kind: str, value: int, offset: int, about: str) -> Node:
    """A value computed by a dissector: size 0, shown in brackets, skipped by tiling."""
    return Node(name, kind, value, str(value), offset, 0, about, generated=True)


def elements(array: Node | None) -> list[Node]:
    """The element nodes of an array node (its children after `length`)."""
    if array is None or not array.type.startswith("[]"):
        return []
    return [c for c in array.children if c.name != "length" and not c.generated and c.type != "bytes"]


__all__ = [
    "ACL_OPERATIONS",
    "CONTEXT_DTYPES",
    "NOT_REQUESTED",
    "Annotator",
    "Columns",
    "Dissector",
    "TableSpec",
    "add_row",
    "annotate",
    "authorized_operations",
    "elements",
    "error_code",
    "field_values",
    "format_timestamp",
    "generated",
    "known",
    "message_context",
    "no_meaning",
    "operation_names",
    "sentinel",
    "timestamp",
]
