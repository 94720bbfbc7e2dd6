"""The `records` and `batches` tables: every record and batch carried in `records` fields.

Rows come from decoded values, never from tree nodes: the body's flat values
(`Message.values`) are walked down to each `records` field, to learn its topic
and partition, and the field's bytes are decoded into plain values
(`kdissect.decode.records`) from which the columns are filled. Messages whose definition has no `records`
field (checked once per API, version and direction on the compiled plan) are
skipped without decoding.

`offset` is the offset on the wire (in a Produce request, as the producer
numbered it, from 0); `log_offset` is where the record sits in the partition's
log: a Fetch response's offset, or for a Produce request the BaseOffset its
paired response gave, plus the record's place in the field.

Both tables start with the context columns every table shares
(`kdissect.present.table_spec.CONTEXT_DTYPES`), then name the topic (`topic_name`,
or `topic_id` where the version names topics by id only, as Fetch v13+ does)
and the partition (`partition_index`) the `records` field sits under.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kdissect.decode.records import (
    MAX_DECOMPRESSED_BYTES,
    BadEntry,
    Entry,
    LegacyMessage,
    PartialEntry,
    RecordBatch,
    decode_records,
    record_rows,
)
from kdissect.decode.schema.plan import Kind, StructPlan, message_plan
from kdissect.pair.message import Message
from kdissect.present.table_spec import CONTEXT_DTYPES, context_values

Columns = dict[str, list[Any]]
Topic = tuple[str | None, str | None]  # (name, id as text): what a records field sits under
PRODUCE = 0

TOPIC_FIELDS = ("Name", "Topic", "TopicName")  # the topic of the records, by API
TOPIC_ID_FIELDS = ("TopicId",)  # Fetch v13+ names topics by id only
PARTITION_FIELDS = ("Index", "PartitionIndex", "Partition")

RECORD_DTYPES = {
    **CONTEXT_DTYPES, "api_name": "category", "direction": "category",
    "topic_name": "category", "topic_id": "string", "partition_index": "Int64",
    "offset": "Int64", "log_offset": "Int64",
    "timestamp": "utc_ms",
    "timestamp_type": "category", "key": "object", "value": "object", "headers": "object",
    "producer_id": "Int64", "producer_epoch": "Int64", "sequence": "Int64",
    "transactional": "boolean", "control_type": "category", "compression": "category",
    "magic": "Int64", "batch_crc_ok": "boolean", "key_size": "Int64", "value_size": "Int64",
}  # fmt: skip

BATCH_DTYPES = {
    **CONTEXT_DTYPES, "api_name": "category", "direction": "category",
    "topic_name": "category", "topic_id": "string", "partition_index": "Int64", "batch": "int64", "position": "int64",
    "size": "int64", "kind": "category", "magic": "Int64", "base_offset": "Int64",
    "last_offset": "Int64", "partition_leader_epoch": "Int64", "crc_ok": "boolean",
    "compression": "category", "timestamp_type": "category", "transactional": "boolean",
    "control": "boolean", "base_timestamp": "utc_ms", "max_timestamp": "utc_ms",
    "producer_id": "Int64", "producer_epoch": "Int64", "base_sequence": "Int64",
    "record_count": "Int64", "records": "Int64", "compressed_bytes": "Int64",
    "decompressed_bytes": "Int64", "notes": "string",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class RecordsField:
    """One `records` field of a message: where it sits, and its decoded entries."""

    message: Message
    topic: Topic
    partition: int | None
    entries: tuple[Entry, ...]
    log_base: int | None = None  # where the broker put the first record, when known


def records_fields(messages: list[Message], *, max_decompressed: int | None = None
                   ) -> Iterator[RecordsField]:
    """Every non-null `records` field of every message whose definition has one."""
    cap = MAX_DECOMPRESSED_BYTES if max_decompressed is None else max_decompressed
    for message in messages:
        if not carries_records(message):
            continue
        values = message.values(keep=False)
        plan = _body_plan(message)
        if values is None or plan is None:
            continue
        bases = _assigned_bases(message)
        for topic, partition, data in _in_context(values, plan, _RECORDS):
            if isinstance(data, bytes):
                entries = decode_records(data, max_decompressed=cap)
                base = bases.get((topic, partition)) if message.is_request else None
                yield RecordsField(message, topic, partition, entries, base)


def _assigned_bases(request: Message) -> dict[tuple[Topic, int | None], int]:
    """(topic, partition) -> the BaseOffset a paired Produce response gave the request's records."""
    response = request.pair if request.is_request and request.api_key == PRODUCE else None
    plan = None if response is None else _body_plan(response)
    values = None if response is None or plan is None else response.values(keep=False)
    if values is None or plan is None:
        return {}
    bases = {}
    for topic, partition, found in _in_context(values, plan, _BASE_OFFSET):
        base, error = found["BaseOffset"], found.get("ErrorCode")
        if isinstance(base, int) and base >= 0 and (error is None or error == 0):
            bases[topic, partition] = base
    return bases


def _body_plan(message: Message) -> StructPlan | None:
    if message.api_key is None or message.api_version is None:
        return None
    plan = message_plan(message.api_key, message.api_version, message.kind)
    return None if plan is None else plan.body


def carries_records(message: Message) -> bool:
    if message.api_key is None or message.api_version is None:
        return False
    if not message.is_request and message.pair is None:
        return False  # a response decodes only through its request
    kind = "request" if message.is_request else "response"
    return _plan_has_records(message.api_key, message.api_version, kind)


@functools.cache
def _plan_has_records(api_key: int, version: int, kind: str) -> bool:
    plan = message_plan(api_key, version, kind)
    return plan is not None and plan.body.holds_records


_RECORDS, _BASE_OFFSET = "records", "BaseOffset"  # what `_in_context` looks for


def _in_context(values: dict[str, Any], plan: StructPlan, wanted: str, topic: Topic = (None, None),
                partition: int | None = None) -> Iterator[tuple[Topic, int | None, Any]]:
    """(topic, partition, what) of each `records` field's value (`_RECORDS`), or of each
    struct's values holding a BaseOffset (`_BASE_OFFSET`), in the body's order, each with
    the topic and partition the structs around it name (a struct's own fields first)."""
    topic, partition = _context(values, topic, partition)
    if wanted is _BASE_OFFSET and _BASE_OFFSET in values:
        yield topic, partition, values
        return
    for field in plan.fields:
        found = values.get(field.name)
        if found is None:  # null, or not decoded (a damaged body's values stop at the problem)
            continue
        element = field.element
        if field.kind is Kind.RECORDS:
            if wanted is _RECORDS:
                yield topic, partition, found
        elif field.struct is not None:
            yield from _in_context(found, field.struct, wanted, topic, partition)
        elif element is not None and element.struct is not None:
            for item in found:
                if item is not None:
                    yield from _in_context(item, element.struct, wanted, topic, partition)
        elif element is not None and element.kind is Kind.RECORDS and wanted is _RECORDS:
            for item in found:
                yield topic, partition, item


def _context(values: dict[str, Any], topic: Topic, partition: int | None) -> tuple[Topic, int | None]:
    for name, value in values.items():
        if name in TOPIC_FIELDS and isinstance(value, str):
            topic = (value, topic[1])
        elif name in TOPIC_ID_FIELDS and value is not None:
            topic = (topic[0], str(value))
        elif name in PARTITION_FIELDS and isinstance(value, int):
            partition = value
    return topic, partition


# -- rows ------------------------------------------------------------------------------


def record_columns(fields: Iterator[RecordsField]) -> Columns:
    columns: Columns = {name: [] for name in RECORD_DTYPES}
    adders = [columns[name].append for name in RECORD_DTYPES]
    for found in fields:
        _add_records(adders, found)
    return columns


def batch_columns(fields: Iterator[RecordsField]) -> Columns:
    columns: Columns = {name: [] for name in BATCH_DTYPES}
    for found in fields:
        _add_batches(columns, found)
    return columns


def record_and_batch_columns(fields: Iterator[RecordsField]) -> tuple[Columns, Columns]:
    """`record_columns` and `batch_columns` in one pass: each field's records decoded once."""
    records: Columns = {name: [] for name in RECORD_DTYPES}
    batches: Columns = {name: [] for name in BATCH_DTYPES}
    adders = [records[name].append for name in RECORD_DTYPES]
    for found in fields:
        _add_records(adders, found)
        _add_batches(batches, found)
    return records, batches


def _add_records(adders: list[Callable[[Any], None]], found: RecordsField) -> None:
    message = found.message
    common = (*context_values(message), message.api_name,
              "request" if message.is_request else "response", *found.topic, found.partition)
    response = not message.is_request
    for index, row in enumerate(record_rows(found.entries)):
        log_offset = row.offset if response else None if found.log_base is None else found.log_base + index
        values = (*common, row.offset, log_offset, row.timestamp, row.timestamp_type, row.key, row.value,
                  list(row.headers), row.producer_id, row.producer_epoch, row.sequence,
                  row.transactional, row.control, row.compression, row.magic, row.batch_crc_ok,
                  None if row.key is None else len(row.key),
                  None if row.value is None else len(row.value))
        for add, value in zip(adders, values, strict=True):
            add(value)


def _add_batches(columns: Columns, found: RecordsField) -> None:
    message = found.message
    common = {**dict(zip(CONTEXT_DTYPES, context_values(message), strict=True)),
              "api_name": message.api_name,
              "direction": "request" if message.is_request else "response",
              "topic_name": found.topic[0], "topic_id": found.topic[1],
              "partition_index": found.partition}
    for index, entry in enumerate(found.entries):
        row = {**common, "batch": index, "position": entry.position, "size": entry.size,
               **_BATCH_ROWS[type(entry)](entry),
               "notes": "; ".join(str(n) for n in entry.notes) or None}
        for name in BATCH_DTYPES:
            columns[name].append(row.get(name))


def _v2_row(batch: Any) -> dict[str, Any]:
    assert isinstance(batch, RecordBatch)
    compressed = batch.attributes & 0x07 != 0
    return {
        "kind": "batch", "magic": 2, "base_offset": batch.base_offset,
        "last_offset": batch.base_offset + batch.last_offset_delta,
        "partition_leader_epoch": batch.partition_leader_epoch, "crc_ok": batch.crc_ok,
        "compression": batch.compression, "timestamp_type": batch.timestamp_type,
        "transactional": batch.transactional, "control": batch.control,
        "base_timestamp": batch.base_timestamp, "max_timestamp": batch.max_timestamp,
        "producer_id": batch.producer_id, "producer_epoch": batch.producer_epoch,
        "base_sequence": batch.base_sequence, "record_count": batch.record_count,
        "records": len(batch.records),
        "compressed_bytes": batch.size - 61 if compressed else None,
        "decompressed_bytes": None if batch.decompressed is None else len(batch.decompressed),
    }


def _legacy_row(message: Any) -> dict[str, Any]:
    assert isinstance(message, LegacyMessage)
    inner = message.inner if message.is_wrapper else (message,)
    offsets = [m.absolute_offset for m in inner]
    return {
        "kind": "message", "magic": message.magic,
        "base_offset": min(offsets, default=None), "last_offset": max(offsets, default=None),
        "crc_ok": message.crc_ok and all(m.crc_ok for m in inner),
        "compression": message.compression, "timestamp_type": message.timestamp_type,
        "transactional": False, "control": False,
        "base_timestamp": message.timestamp, "max_timestamp": message.timestamp,
        "record_count": len(inner), "records": len(inner),
        "compressed_bytes": len(message.value or b"") if message.is_wrapper else None,
        "decompressed_bytes": None if message.decompressed is None else len(message.decompressed),
    }


def _partial_row(entry: Any) -> dict[str, Any]:
    return {"kind": "partial" if isinstance(entry, PartialEntry) else "malformed", "records": 0}


_BATCH_ROWS: dict[type, Callable[[Any], dict[str, Any]]] = {
    RecordBatch: _v2_row, LegacyMessage: _legacy_row, PartialEntry: _partial_row, BadEntry: _partial_row,
}


def frame_records(message: Message) -> tuple[int, int]:
    """(records, bytes of their keys and values) a message carries: for summaries."""
    count = size = 0
    for found in records_fields([message]):
        for row in record_rows(found.entries):
            count += 1
            size += len(row.key or b"") + len(row.value or b"")
    return count, size
