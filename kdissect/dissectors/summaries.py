"""Summary info from flat values: a few words per message, as Wireshark's Info column.

Two generic layers and one table. What a definition says a field is (its
`entityType`) names the topics, groups and transactional ids of any body
(`entities`). An API's summary is a small table of rules, each a label, the path
of the values it reads and how it reads them (`Rule`): `("partitions",
"TopicData.PartitionData", count)` counts the partitions a Produce request
writes to. A path steps through structs and arrays by field name; `|` separates
the paths of different versions (`GroupId|Groups.GroupId`), the first that is
present wins. A rule whose values are absent, null or say nothing is left out,
so every label on a line counts exactly what it names.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kdissect.decode.records import decode_records, record_rows
from kdissect.decode.schema.plan import Kind, StructPlan
from kdissect.decode.walks import PathWalk, first_path_walk, path_exists, path_walk

Values = dict[str, Any]
Reader = Callable[[list[Any]], str | None]
Rule = tuple[str, str, Reader]  # label, path(s), how the values read
MAX_SHOWN = 3  # distinct values shown before "(+N)"
# A magic-2 batch header's length (at 8), magic (at 16) and record count (at 57).
_BATCH_COUNTS = struct.Struct(">8xi4xb40xi")
_MAGIC_2_HEADER = 61


def found(values: Values, paths: str) -> list[Any]:
    """Every value at the first of `paths` present in `values` (arrays flattened)."""
    for path in paths.split("|"):
        items = _walk([values], path.split(".")) if path else [values]
        if items:
            return items
    return []


def _walk(level: list[Any], names: Sequence[str]) -> list[Any]:
    for name in names:
        below: list[Any] = []
        for item in level:
            if isinstance(item, dict) and name in item:
                below.append(item[name])
        level = _flatten(below)
    return level


def _flatten(items: list[Any]) -> list[Any]:
    flat: list[Any] = []
    for item in items:
        if isinstance(item, list):
            flat.extend(item)
        elif item is not None:
            flat.append(item)
    return flat


class RuleSummary:
    """The summary function of a rule table: `label=value` for each rule that has something.

    Called with a body's values it follows each rule's paths by field name; `for_plan`
    gives the same function for the bodies of one plan, its paths compiled into walks
    (`walks.path_walk`) that read only the fields on them.
    """

    __slots__ = ("_compiled", "rules")

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        self._compiled: dict[int, tuple[StructPlan, Callable[[Values], str]]] = {}

    def __call__(self, body: Values) -> str:
        parts = []
        for label, paths, read in self.rules:
            shown = read(found(body, paths))
            if shown is not None:
                parts.append(f"{label}={shown}")
        return " ".join(parts)

    def for_plan(self, plan: StructPlan) -> Callable[[Values], str]:
        cached = self._compiled.get(id(plan))
        if cached is not None and cached[0] is plan:
            return cached[1]
        rules = []
        for label, paths, read in self.rules:
            alternatives = tuple(tuple(path.split(".")) if path else () for path in paths.split("|"))
            if read([]) is None and not any(not path or path_exists(plan, path) for path in alternatives):
                continue  # no body of this plan holds the values: the rule never says anything
            rules.append((label + "=", first_path_walk(plan, alternatives), read))

        def summary(body: Values) -> str:
            parts = []
            for label, walk, read in rules:
                shown = read(walk(body))
                if shown is not None:
                    parts.append(label + shown)
            return " ".join(parts)

        self._compiled[id(plan)] = (plan, summary)
        return summary


def _alternative(plan: StructPlan, path: str) -> PathWalk:
    """The walk of one of a rule's paths; the empty path is the body itself."""
    return path_walk(plan, tuple(path.split("."))) if path else _itself


def _itself(values: Values) -> list[Any]:
    return [values]


def summarize(rules: Sequence[Rule]) -> RuleSummary:
    """The summary function of a rule table: `label=value` for each rule that has something."""
    return RuleSummary(rules)


# -- readers: how the values found at a path read -----------------------------------


def value(items: list[Any]) -> str | None:
    """The first value; empty strings say nothing."""
    if not items or items[0] == "":
        return None
    first = items[0]
    return ("true" if first else "false") if isinstance(first, bool) else str(first)


def known(items: list[Any]) -> str | None:
    """The first value, unless it is Kafka's -1 "none"."""
    return None if items and items[0] == -1 else value(items)


def nonzero(items: list[Any]) -> str | None:
    """The first value, unless it is zero (no throttle, no session)."""
    return None if items and items[0] == 0 else value(items)


def milliseconds(items: list[Any]) -> str | None:
    shown = value(items)
    return None if shown is None else f"{shown}ms"


def nonzero_milliseconds(items: list[Any]) -> str | None:
    return None if items and items[0] == 0 else milliseconds(items)


def count(items: list[Any]) -> str | None:
    """How many elements the path holds (arrays at every level flattened)."""
    return str(len(items)) if items else None


def distinct(items: list[Any]) -> str | None:
    """The distinct values in order, the first few shown: `18,20,31 (+2)`."""
    seen = list(dict.fromkeys(str(item) for item in items if item != ""))
    if not seen:
        return None
    more = len(seen) - MAX_SHOWN
    return ",".join(seen[:MAX_SHOWN]) + (f" (+{more})" if more > 0 else "")


def records(items: list[Any]) -> str | None:
    """How many records the `records` fields hold."""
    total, found = 0, False
    for item in items:
        if type(item) is bytes:  # the usual case: no copy
            total += record_count(item)
            found = True
        elif isinstance(item, bytes | bytearray):
            total += record_count(bytes(item))
            found = True
    return str(total) if found else None


def size(items: list[Any]) -> str | None:
    """Bytes of the `records` fields on the wire."""
    total, found = 0, False
    for item in items:
        if isinstance(item, bytes | bytearray):
            total += len(item)
            found = True
    return str(total) if found else None


def record_count(data: bytes) -> int:
    """Records in a `records` field: read from magic-2 batch headers (nothing decompressed);
    legacy message sets are decoded (bounded), as is anything that does not fit."""
    total = pos = 0
    limit = len(data) - _MAGIC_2_HEADER
    while pos <= limit:
        length, magic, records_in = _BATCH_COUNTS.unpack_from(data, pos)
        end = pos + 12 + length
        if magic != 2 or length < _MAGIC_2_HEADER - 12 or end > len(data):
            break
        total += records_in
        pos = end
    if pos < len(data):
        total += sum(1 for _ in record_rows(decode_records(data, pos)))
    return total


def coordinators(items: list[Any]) -> str | None:
    """`1@broker-1:9092`, or `key->1@broker-1:9092` for each coordinator of a batched answer;
    `none` where there is none (the answer's error says why)."""
    shown = []
    for item in items:
        if isinstance(item, dict) and item.get("NodeId") is not None:
            node = "none" if item["NodeId"] == -1 else f"{item['NodeId']}@{item.get('Host')}:{item.get('Port')}"
            shown.append(f"{item['Key']}->{node}" if "Key" in item else node)
    return distinct(shown)


def named(names: dict[int, str]) -> Reader:
    """Distinct values, each read by its name where it has one: `latest`, `group`."""

    def read(items: list[Any]) -> str | None:
        return distinct([names.get(item, item) if isinstance(item, int) else item for item in items])

    return read


def committed(items: list[Any]) -> str | None:
    return None if not items else ("commit" if items[0] else "abort")


# -- what a definition says a field is ------------------------------------------------


def entities(plan: StructPlan, values: Values, entity_type: str) -> list[Any]:
    """Every value of the fields whose definition names `entity_type` (`topicName`,
    `groupId`, ...), anywhere in a body, in order; nulls left out."""
    items: list[Any] = []
    for walk in entity_walks(plan, entity_type):
        items.extend(walk(values))
    return items


@functools.cache
def entity_walks(plan: StructPlan, entity_type: str) -> tuple[PathWalk, ...]:
    """The compiled walks of `entity_paths`, in the same order."""
    return tuple(path_walk(plan, path) for path in entity_paths(plan, entity_type))


@functools.cache
def entity_paths(plan: StructPlan, entity_type: str) -> tuple[tuple[str, ...], ...]:
    """The field-name paths of a body's fields of one entity type (plans are cached, so is this)."""
    return tuple(_paths(plan, entity_type, (), set()))


def _paths(plan: StructPlan, entity_type: str, prefix: tuple[str, ...], active: set[int]
           ) -> Iterator[tuple[str, ...]]:
    if id(plan) in active:  # a struct that contains itself
        return
    active.add(id(plan))
    for field in (*plan.fields, *plan.tagged.values()):
        path = (*prefix, field.name)
        if field.entity_type == entity_type:
            yield path
        inner = field.struct if field.kind is Kind.STRUCT else (
            field.element.struct if field.kind is Kind.ARRAY and field.element is not None else None)
        if inner is not None:
            yield from _paths(inner, entity_type, path, active)
    active.discard(id(plan))


__all__ = [
    "MAX_SHOWN",
    "Rule",
    "RuleSummary",
    "committed",
    "coordinators",
    "count",
    "distinct",
    "entities",
    "entity_paths",
    "entity_walks",
    "found",
    "known",
    "milliseconds",
    "named",
    "nonzero",
    "nonzero_milliseconds",
    "record_count",
    "records",
    "size",
    "summarize",
    "value",
]
