"""Kafka records as tree nodes, built from the values `records.decode_records` returns.

Every entry of a `records` field becomes a node whose children tile it: a
magic 2 `RecordBatch` (its 61-byte header field by field, then its records),
a legacy `Message`, a `PartialBatch` at the end of a fetch response, or the
`malformed` rest. Attributes, absolute offsets and timestamps, and control
markers are added as generated nodes (size 0), as Wireshark marks computed values.

The records of a compressed batch are not bytes of the frame. They hang under
one generated node, `decompressed`, whose offsets count from the start of the
decompressed data: that node spans [0, its size) of that buffer, and its
children tile it exactly, so `Node.tiling_errors()` checks the decompressed
records as strictly as the frame (the generated node itself is outside the
frame's tiling, like every generated node).

Keys and values are shown as text when they are printable UTF-8, else as hex,
cut at `MAX_VALUE_BYTES` bytes (a module setting); the node's value is always
the full bytes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from kdissect.decode import records as rec
from kdissect.decode.records import (
    BadEntry,
    Entry,
    LegacyMessage,
    PartialEntry,
    Record,
    RecordBatch,
    RecordHeader,
)
from kdissect.decode.tree import Node, printable
from kdissect.dissectors import format_timestamp

MAX_VALUE_BYTES = 64  # of a key or value shown in a display; the value keeps them all
DECOMPRESSED_ABOUT = ("records decompressed from the {codec} data: offsets in this subtree "
                      "count from the start of the decompressed bytes, not the frame")
_LAST_MILLISECOND = 253402300799999
_TEXT_CONTROLS = frozenset("\t\n\r")

BATCH_FIELDS = (  # name, type, size, about: the magic 2 header in wire order
    ("baseOffset", "int64", 8, "offset of the first record of the batch"),
    ("batchLength", "int32", 4, "bytes of the batch after this field"),
    ("partitionLeaderEpoch", "int32", 4, "leader epoch of the partition when the batch was written"),
    ("magic", "int8", 1, "record format version (2)"),
    ("crc", "uint32", 4, "CRC-32C of the batch from the attributes to its end"),
    ("attributes", "int16", 2, "compression, timestamp type, transactional, control, delete horizon"),
    ("lastOffsetDelta", "int32", 4, "offset of the last record minus the base offset"),
    ("baseTimestamp", "int64", 8, "timestamp of the first record (or the delete horizon)"),
    ("maxTimestamp", "int64", 8, "largest timestamp of the batch"),
    ("producerId", "int64", 8, "idempotent or transactional producer id, -1 for none"),
    ("producerEpoch", "int16", 2, "epoch of the producer id, -1 for none"),
    ("baseSequence", "int32", 4, "sequence number of the first record, -1 for none"),
    ("recordCount", "int32", 4, "number of records in the batch"),
)


_UNEXPANDED: ContextVar[bool] = ContextVar("records_unexpanded", default=False)


@contextlib.contextmanager
def records_unexpanded() -> Iterator[None]:
    """Within it, trees keep each `records` content as one raw node: for callers (the
    tables) that decode the values themselves and need the tree only around them."""
    token = _UNEXPANDED.set(True)
    try:
        yield
    finally:
        _UNEXPANDED.reset(token)


def entries_nodes(data: bytes, start: int, end: int) -> list[Node]:
    """The entries of the `records` content data[start:end] as nodes tiling it."""
    if _UNEXPANDED.get():
        raw = data[start:end]
        return [Node("batches", "bytes", raw, hex_value(raw), start, end - start,
                     "record batches, not expanded")] if raw else []
    entries = rec.decode_records(data, start, end, max_decompressed=rec.MAX_DECOMPRESSED_BYTES)
    return [entry_node(entry, data, index) for index, entry in enumerate(entries)]


def entry_node(entry: Entry, data: bytes, index: int) -> Node:
    if isinstance(entry, RecordBatch):
        return batch_node(entry, data, index)
    if isinstance(entry, LegacyMessage):
        return message_node(entry, data, f"Message[{index}]")
    raw = data[entry.position:entry.position + entry.size]
    if isinstance(entry, PartialEntry):
        shown = f"{entry.size} of {'?' if entry.declared is None else entry.declared} bytes"
        node = Node("PartialBatch", "bytes", raw, shown, entry.position, entry.size,
                    "the last batch, cut short")
    else:
        assert isinstance(entry, BadEntry)
        node = Node("malformed", "bytes", raw, hex_value(raw), entry.position, entry.size,
                    "not a record batch or message")
    node.notes.extend(entry.notes)
    return node


# -- magic 2 ---------------------------------------------------------------------------


def batch_node(batch: RecordBatch, data: bytes, index: int) -> Node:
    values = (batch.base_offset, batch.batch_length, batch.partition_leader_epoch, batch.magic,
              batch.crc, batch.attributes, batch.last_offset_delta, batch.base_timestamp,
              batch.max_timestamp, batch.producer_id, batch.producer_epoch, batch.base_sequence,
              batch.record_count)
    node = Node(f"RecordBatch[{index}]", "RecordBatch", None, batch_display(batch),
                batch.position, batch.size, "record batch, magic 2")
    pos = batch.position
    for (name, kind, size, about), value in zip(BATCH_FIELDS, values, strict=True):
        node.children.append(Node(name, kind, value, str(value), pos, size, about))
        pos += size
    _annotate_header(node, batch)
    node.children.append(_batch_records_node(batch, data, pos))
    node.notes.extend(batch.notes)
    return node


def batch_display(batch: RecordBatch) -> str:
    count = len(batch.records)
    parts = [f"{count} record{'' if count == 1 else 's'}", f"offset {batch.base_offset}"]
    if batch.compression != "none":
        parts.append(batch.compression)
    if batch.control:
        parts.append("control")
    elif batch.transactional:
        parts.append("transactional")
    if not batch.crc_ok:
        parts.append("bad CRC")
    return ", ".join(parts)


def attributes_display(batch: RecordBatch) -> str:
    return f"0x{batch.attributes:04x} ({batch.compression}, {batch.timestamp_type})"


def attribute_bits(batch: RecordBatch) -> list[tuple[str, str, object, str]]:
    """What a batch's attribute bits say, as (name, type, value, about) of generated fields."""
    return [("compression", "string", batch.compression, "bits 0-2: compression codec"),
            ("timestampType", "string", batch.timestamp_type, "bit 3"),
            ("isTransactional", "bool", batch.transactional, "bit 4"),
            ("isControl", "bool", batch.control, "bit 5: transaction markers"),
            ("hasDeleteHorizon", "bool", batch.delete_horizon, "bit 6: baseTimestamp is the delete horizon")]


def _annotate_header(node: Node, batch: RecordBatch) -> None:
    crc, attributes = node["crc"], node["attributes"]
    crc.display = f"0x{batch.crc:08x} ({'correct' if batch.crc_ok else f'wrong, content gives 0x{batch.computed_crc:08x}'})"
    attributes.display = attributes_display(batch)
    at = attributes.offset
    attributes.children = [_generated(name, kind, value, at, about) for name, kind, value, about in attribute_bits(batch)]
    for name in ("baseTimestamp", "maxTimestamp"):
        field = node[name]
        field.display = timestamp_display(field.value)


def _batch_records_node(batch: RecordBatch, data: bytes, pos: int) -> Node:
    end = batch.position + batch.size
    if batch.compression == "none" or batch.attributes & 0x07 == 0:
        node = Node("records", "[]Record", len(batch.records), count_text(len(batch.records)), pos,
                    end - pos, "the records of the batch")
        node.children = _record_nodes(batch, data, pos, end)
        return node
    raw = data[pos:end]
    node = Node("records", "bytes", raw, f"{len(raw)} bytes of {batch.compression} data",
                pos, end - pos, "the records of the batch, compressed")
    if batch.decompressed is not None:
        body = batch.decompressed
        node.display += f", {len(body)} bytes decompressed"
        inner = Node("decompressed", "[]Record", len(batch.records), count_text(len(batch.records)),
                     0, len(body), DECOMPRESSED_ABOUT.format(codec=batch.compression),
                     _record_nodes(batch, body, 0, len(body)), generated=True)
        node.children.append(inner)
    return node


def _record_nodes(batch: RecordBatch, body: bytes, start: int, end: int) -> list[Node]:
    nodes = [record_node(batch, record, body, f"Record[{i}]") for i, record in enumerate(batch.records)]
    if batch.records_end < end:
        nodes.append(_undecoded(body, batch.records_end, end))
    return nodes


def record_node(batch: RecordBatch, record: Record, body: bytes, name: str) -> Node:
    b = record.bounds
    node = Node(name, "Record", None, record_display(record), record.position, record.size,
                "a record")
    add = node.children.append
    add(Node("length", "varint", record.length, str(record.length), record.position,
             b[0] - record.position, "bytes of the record after this field"))
    add(Node("attributes", "int8", record.attributes, str(record.attributes), b[0], 1, "unused"))
    add(Node("timestampDelta", "varlong", record.timestamp_delta, str(record.timestamp_delta), b[1],
             b[2] - b[1], "timestamp minus the batch's base timestamp"))
    add(_generated("timestamp", "int64", record.timestamp, b[2],
                   "LogAppendTime: the batch's maxTimestamp" if batch.timestamp_type == "LogAppendTime"
                   else "baseTimestamp plus timestampDelta", timestamp_display(record.timestamp)))
    add(Node("offsetDelta", "varint", record.offset_delta, str(record.offset_delta), b[2], b[3] - b[2],
             "offset minus the batch's base offset"))
    add(_generated("offset", "int64", record.offset, b[3], "baseOffset plus offsetDelta"))
    _add_bytes(node, "key", record.key_length, record.key, b[3], b[4], b[5])
    _add_bytes(node, "value", record.value_length, record.value, b[5], b[6], b[7])
    if record.control is not None:
        control = record.control
        add(_generated("controlType", "int16", control.type, b[7], "0 abort, 1 commit",
                       f"{control.type} ({control.name})"))
        if control.coordinator_epoch is not None:
            add(_generated("coordinatorEpoch", "int32", control.coordinator_epoch, b[7],
                           "epoch of the transaction coordinator that wrote the marker"))
    add(_headers_node(record, b[7], b[8]))
    return node


def record_display(record: Record) -> str:
    if record.control is not None:
        return f"offset {record.offset}, {record.control.name} marker"
    return (f"offset {record.offset}, key {value_display(record.key)}, "
            f"value {value_display(record.value)}")


def _add_bytes(node: Node, name: str, length: int, value: bytes | None, pos: int,
               content: int, end: int) -> None:
    node.children.append(Node(f"{name}Length", "varint", length,
                              "-1 (null)" if length < 0 else str(length), pos, content - pos,
                              f"bytes of the {name}, -1 for null"))
    if value is not None:
        node.children.append(Node(name, "bytes", value, value_display(value), content,
                                  end - content, f"the record's {name}"))


def _headers_node(record: Record, pos: int, count_end: int) -> Node:
    count = len(record.headers)
    end = record.headers[-1].bounds[3] if record.headers else count_end
    node = Node("headers", "[]Header", count, count_text(count, "header"), pos, end - pos,
                "record headers")
    node.children.append(Node("length", "varint", count, str(count), pos, count_end - pos,
                              "number of headers that follow"))
    node.children.extend(_header_node(header, f"Header[{i}]") for i, header in enumerate(record.headers))
    return node


def _header_node(header: RecordHeader, name: str) -> Node:
    b = header.bounds
    key = f'"{printable(header.key)}"'
    node = Node(name, "Header", None, f"{key} = {value_display(header.value)}", header.position,
                header.size, "a record header")
    node.children.append(Node("headerKeyLength", "varint", header.key_length, str(header.key_length),
                              header.position, b[0] - header.position, "bytes of the key"))
    node.children.append(Node("headerKey", "string", header.key, key, b[0], b[1] - b[0],
                              "the header's key"))
    _add_bytes(node, "headerValue", header.value_length, header.value, b[1], b[2], b[3])
    return node


# -- magic 0 and 1 ---------------------------------------------------------------------


def message_node(message: LegacyMessage, data: bytes, name: str) -> Node:
    pos = message.position
    node = Node(name, "Message", None, message_display(message), pos, message.size,
                f"legacy message, magic {message.magic}")
    fields: list[tuple[str, str, int, object, str]] = [
        ("offset", "int64", 8, message.offset, "offset (relative inside a magic 1 wrapper)"),
        ("message_size", "int32", 4, message.message_size, "bytes of the message after this field"),
        ("crc", "uint32", 4, message.crc, "CRC32 of the message from the magic to its end"),
        ("magic", "int8", 1, message.magic, "message format version"),
        ("attributes", "int8", 1, message.attributes, "compression, timestamp type"),
    ]
    if message.magic == 1:
        fields.append(("timestamp", "int64", 8, message.timestamp, "creation or log append time"))
    for field, kind, size, value, about in fields:
        node.children.append(Node(field, kind, value, str(value), pos, size, about))
        pos += size
    _annotate_message(node, message)
    if message.key_end > pos:
        node.children.append(_legacy_bytes_node("key", message.key, data, pos, message.key_end))
        if message.key_end < message.position + message.size:
            node.children.append(_legacy_value_node(message, data))
    elif pos < message.position + message.size:
        node.children.append(_undecoded(data, pos, message.position + message.size))
    node.notes.extend(message.notes)
    return node


def message_display(message: LegacyMessage) -> str:
    if message.is_wrapper:
        return f"offset {message.offset}, {message.compression} wrapper of {count_text(len(message.inner), 'message')}"
    return f"offset {message.absolute_offset}, key {value_display(message.key)}, value {value_display(message.value)}"


def _annotate_message(node: Node, message: LegacyMessage) -> None:
    crc = node["crc"]
    crc.display = f"0x{message.crc:08x} ({'correct' if message.crc_ok else f'wrong, content gives 0x{message.computed_crc:08x}'})"
    attributes = node["attributes"]
    at = attributes.offset
    attributes.children.append(_generated("compression", "string", message.compression, at,
                                          "bits 0-2: compression codec"))
    if message.timestamp_type is not None:
        attributes.children.append(_generated("timestampType", "string", message.timestamp_type, at, "bit 3"))
        stamp = node["timestamp"]
        stamp.display = timestamp_display(stamp.value)
    if message.absolute_offset != message.offset:
        node.children.append(_generated("absoluteOffset", "int64", message.absolute_offset, node["offset"].offset,
                                        "the wrapper's offset minus the last inner offset, plus this one"))
    if message.effective_timestamp != message.timestamp and message.effective_timestamp is not None:
        node.children.append(_generated("logAppendTime", "int64", message.effective_timestamp, at,
                                        "the wrapper's LogAppendTime, which applies to its messages",
                                        timestamp_display(message.effective_timestamp)))


def _legacy_bytes_node(name: str, value: bytes | None, data: bytes, pos: int, end: int) -> Node:
    length = int.from_bytes(data[pos:pos + 4], "big", signed=True)
    shown = f"{value_display(value)} (int32 len={length})"
    return Node(name, "nullable_bytes", value, shown, pos, end - pos, f"the message's {name}")


def _legacy_value_node(message: LegacyMessage, data: bytes) -> Node:
    end = message.position + message.size
    node = _legacy_bytes_node("value", message.value, data, message.key_end, end)
    if not message.is_wrapper:
        return node
    node.display = f"{node.size - 4} bytes of {message.compression} data"
    body = message.decompressed
    if body is not None:
        node.display += f", {len(body)} bytes decompressed"
        inner = [message_node(m, body, f"Message[{i}]") for i, m in enumerate(message.inner)]
        stop = message.inner[-1].position + message.inner[-1].size if message.inner else 0
        if stop < len(body):
            inner.append(_undecoded(body, stop, len(body)))
        node.children.append(Node("decompressed", "[]Message", len(message.inner),
                                  count_text(len(message.inner), "message"), 0, len(body),
                                  DECOMPRESSED_ABOUT.format(codec=message.compression), inner,
                                  generated=True))
    return node


# -- displays --------------------------------------------------------------------------


def value_display(raw: bytes | None, limit: int | None = None) -> str:
    """A key or value for a display: quoted text when printable UTF-8, else hex; cut at `limit`."""
    if raw is None:
        return "null"
    limit = MAX_VALUE_BYTES if limit is None else limit
    head = raw[:limit]
    more = f"... ({len(raw)} bytes)" if len(raw) > limit else ""
    text = _text(head, cut=bool(more))
    if text is None:
        return (head.hex() or "empty") + more
    return f'"{printable(text)}"{more}'


def _text(head: bytes, *, cut: bool) -> str | None:
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as problem:  # a character split by the cut is still text
        if not cut or problem.reason != "unexpected end of data":
            return None
        text = head[:problem.start].decode("utf-8", "replace")
    if text.isprintable() or all(ch.isprintable() or ch in _TEXT_CONTROLS for ch in text):
        return text
    return None


def hex_value(raw: bytes) -> str:
    shown = raw[:16].hex()
    return (shown or "empty") if len(raw) <= 16 else f"{shown}... ({len(raw)} bytes)"


def timestamp_display(milliseconds: int | None) -> str:
    if milliseconds is None:
        return "null"
    if milliseconds == -1:
        return "-1 (none)"
    if not 0 <= milliseconds <= _LAST_MILLISECOND:
        return str(milliseconds)
    return f"{milliseconds} ({format_timestamp(milliseconds)})"


def _generated(name: str, kind: str, value: object, at: int, about: str, display: str | None = None) -> Node:
    shown = display if display is not None else (str(value).lower() if isinstance(value, bool) else str(value))
    return Node(name, kind, value, shown, at, 0, about, generated=True)


def _undecoded(body: bytes, start: int, end: int) -> Node:
    raw = body[start:end]
    return Node("undecoded", "bytes", raw, hex_value(raw), start, end - start,
                "bytes not decoded after a problem (see the notes)")


def count_text(count: int, noun: str = "record") -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


__all__ = ["BATCH_FIELDS", "DECOMPRESSED_ABOUT", "MAX_VALUE_BYTES", "attribute_bits", "attributes_display",
           "batch_display", "count_text", "entries_nodes",
           "entry_node", "hex_value", "message_display", "record_display", "records_unexpanded", "timestamp_display",
           "value_display"]
