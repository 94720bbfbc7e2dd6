"""Per-API meaning on top of the generic decoding: names for numbers, and derived values.

The decoders already read every field; a dissector only says how some values
read (error codes, the authorized-operations bitfield, timestamps, -1
sentinels), which values are derived from others (generated nodes such as a
quorum replica's lag), and what a response says in a few words. Rules work on
plain values, so the tree, the text and JSON writers and the summary line all
apply the same meaning. Each API module exports one `Dissector`; `registry`
names them all.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kdissect.decode.schema.plan import (
    BROKER_ID,
    DURATION_MS,
    ERROR_CODE,
    PRODUCER_ID,
    TIMESTAMP_MS,
)
from kdissect.decode.tree import Node
from kdissect.error_codes import error_name

Values = dict[str, Any]
# How an integer value reads, or None when its plain number says it all.
Display = Callable[[int], str | None]
NOT_REQUESTED = -(2**31)  # authorized operations were not asked for
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_LAST_MILLISECOND = 253402300799999  # 9999-12-31 23:59:59.999 UTC

# Kafka's AclOperation codes: bit N of an authorized-operations field grants operation N.
ACL_OPERATIONS: dict[int, str] = {
    0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE",
    7: "ALTER", 8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
    12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS", 15: "TWO_PHASE_COMMIT",
}


def no_meaning(body: Node, version: int) -> None:
    """For bodies whose fields need no more than the generic decoding."""


@dataclass(frozen=True, slots=True)
class GeneratedValue:
    """A value computed from others, shown in brackets after the field `after` of its struct."""

    after: str
    name: str
    type: str
    value: int
    about: str


def no_generated_values(body: Values) -> dict[int, list[GeneratedValue]]:
    return {}


@dataclass(frozen=True, slots=True)
class Dissector:
    """The meaning one API adds to the decoded bodies of its requests and responses."""

    api_key: int
    # How integer fields of a response read, by field name (anywhere in the body).
    response_displays: Mapping[str, Display] = field(default_factory=dict)
    # Generated nodes added to a response tree: (body struct node, version).
    response_generated: Callable[[Node, int], None] = no_meaning
    # The same generated values from a body's flat values, by the id() of the struct's values.
    response_generated_values: Callable[[Values], dict[int, list[GeneratedValue]]] = no_generated_values
    # A few words for the summary line from a response body's flat values.
    response_summary: Callable[[Values], str] | None = None
    # ... and from a request body's.
    request_summary: Callable[[Values], str] | None = None

    def summary(self, body: Values, kind: str) -> str:
        """What a body says in a few words (`-i`), or "" when this API has nothing to add."""
        summarize = self.request_summary if kind == "request" else self.response_summary
        return "" if summarize is None else summarize(body)

    def annotate(self, body: Node, kind: str, version: int) -> None:
        """Apply this API's meaning to a decoded body tree."""
        if kind == "response":
            annotate(body, self.response_displays)
            self.response_generated(body, version)


def known(value: Any) -> Any:
    """None for Kafka's -1 "unknown / none" sentinel, the value otherwise."""
    return None if value == -1 else value


def annotate(body: Node, rules: Mapping[str, Display]) -> None:
    """Apply the rule named like each integer field of `body` (lengths and counts excluded).

    An API's rule replaces the schema's meaning of a field (`SCHEMA_DISPLAYS`) entirely:
    where it has nothing to say, the field reads as its plain number.
    """
    if not rules:
        return
    for node in body.nodes():
        rule = rules.get(node.name)
        if rule is not None and _is_integer(node) and node.type != "uvarint":
            shown = rule(node.value)
            node.display = str(node.value) if shown is None else shown


def _is_integer(node: Node) -> bool:
    return isinstance(node.value, int) and not isinstance(node.value, bool) and not node.generated


def error_code(value: int) -> str | None:
    """`3 (UNKNOWN_TOPIC_OR_PARTITION)`; zero stays `0`."""
    return f"{value} ({error_name(value)})" if value else None


def sentinel(meaning: str) -> Display:
    """Label -1 with what it means for this field: `-1 (unknown)`."""
    labelled = f"-1 ({meaning})"

    def label(value: int) -> str | None:
        return labelled if value == -1 else None
    return label


def timestamp(minus_one: str | None) -> Display:
    """Milliseconds since the epoch as a UTC datetime; -1 labelled with `minus_one` when given."""
    labelled = None if minus_one is None else f"-1 ({minus_one})"

    def label(value: int) -> str | None:
        if value == -1:
            return labelled
        if 0 < value <= _LAST_MILLISECOND:
            return f"{value} ({format_timestamp(value)})"
        return None
    return label


_UNITS = ((86_400_000, "d"), (3_600_000, "h"), (60_000, "min"), (1000, "s"))


def duration(value: int) -> str | None:
    """A positive number of milliseconds in the largest unit it fills: `30000 (30 s)`,
    `1500 (1.5 s)`, `250 (250 ms)`; zero and negative values (defaults, "none") stay plain."""
    if value <= 0:
        return None
    for size, unit in _UNITS:
        if value >= size:
            return f"{value} ({value / size:.3g} {unit})"
    return f"{value} ({value} ms)"


def format_timestamp(milliseconds: int) -> str:
    """`2026-11-29 11:44:09.778 UTC` for milliseconds since the epoch (years 1970-9999)."""
    seconds, millis = divmod(milliseconds, 1000)
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    return f"{_day(days)} {hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d} UTC"


@functools.lru_cache(maxsize=4096)
def _day(days: int) -> str:
    return f"{_EPOCH + datetime.timedelta(days=days):%Y-%m-%d}"


# How an integer reads from what the schema says it is (`FieldPlan.meaning`), for every API:
# broker and producer ids (-1: none), error codes by name, UTC timestamps, durations.
SCHEMA_DISPLAYS: dict[str, Display] = {
    BROKER_ID: sentinel("none"),
    PRODUCER_ID: sentinel("none"),
    ERROR_CODE: error_code,
    TIMESTAMP_MS: timestamp(None),
    DURATION_MS: duration,
}


def authorized_operations(value: int) -> str | None:
    """The bitfield as operation names; -2147483648 means they were not requested."""
    if value == NOT_REQUESTED:
        return f"{value} (not requested)"
    if value:
        return f"{value} ({', '.join(operation_names(value))})"
    return None


def operation_names(bits: int) -> list[str]:
    bits &= 0xFFFFFFFF
    return [ACL_OPERATIONS.get(bit, f"bit {bit}") for bit in range(32) if bits >> bit & 1]


def items(values: Values | None, name: str) -> list[Any]:
    """The elements of an array field of flat values; none when absent or null."""
    found = None if values is None else values.get(name)
    return found if isinstance(found, list) else []


__all__ = [
    "ACL_OPERATIONS",
    "NOT_REQUESTED",
    "SCHEMA_DISPLAYS",
    "Display",
    "Dissector",
    "GeneratedValue",
    "Values",
    "annotate",
    "authorized_operations",
    "duration",
    "error_code",
    "format_timestamp",
    "items",
    "known",
    "no_meaning",
    "operation_names",
    "sentinel",
    "timestamp",
]
