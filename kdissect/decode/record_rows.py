"""Kafka records laid out as rows, straight from the values `records.decode_records` returns.

The same layout as `record_nodes` (the reference, which the interpreter's tree
uses), node for node, without building a `Node`: what `-V` and JSON write for a
`records` field of a body the fast path took. Such a body's batches decoded
without a single note (the fast path refuses any other), so rows need carry
none; a test compares these rows with the interpreter's tree on every record
batch of every capture.

    Row = (name, type, value, display, offset, size, about, children, generated)
"""

from __future__ import annotations

from kdissect.decode import records as rec
from kdissect.decode.record_nodes import (
    BATCH_FIELDS,
    DECOMPRESSED_ABOUT,
    attribute_bits,
    attributes_display,
    batch_display,
    count_text,
    hex_value,
    message_display,
    record_display,
    timestamp_display,
    value_display,
)
from kdissect.decode.records import Entry, LegacyMessage, Record, RecordBatch, RecordHeader
from kdissect.decode.tree import Row, printable

_CREATE_TIME_ABOUT = "baseTimestamp plus timestampDelta"
_LOG_APPEND_ABOUT = "LogAppendTime: the batch's maxTimestamp"


def entries_rows(data: bytes, start: int, end: int) -> list[Row] | None:
    """The entries of the `records` content data[start:end] as rows tiling it; None when
    any entry is not a clean batch or message (then only the tree can say what it holds)."""
    entries = rec.decode_records(data, start, end, max_decompressed=rec.MAX_DECOMPRESSED_BYTES)
    rows: list[Row] = []
    for index, entry in enumerate(entries):
        if not clean_entry(entry):
            return None
        if isinstance(entry, RecordBatch):
            rows.append(_batch_row(entry, data, index))
        else:
            assert isinstance(entry, LegacyMessage)
            rows.append(_message_row(entry, data, f"Message[{index}]"))
    return rows


def clean_entry(entry: Entry) -> bool:
    if entry.notes or not isinstance(entry, RecordBatch | LegacyMessage):
        return False
    return not isinstance(entry, LegacyMessage) or all(clean_entry(inner) for inner in entry.inner)


# -- magic 2 ---------------------------------------------------------------------------


def _batch_row(batch: RecordBatch, data: bytes, index: int) -> Row:
    values = (batch.base_offset, batch.batch_length, batch.partition_leader_epoch, batch.magic,
              batch.crc, batch.attributes, batch.last_offset_delta, batch.base_timestamp,
              batch.max_timestamp, batch.producer_id, batch.producer_epoch, batch.base_sequence,
              batch.record_count)
    children: list[Row] = []
    pos = batch.position
    for (name, kind, size, about), value in zip(BATCH_FIELDS, values, strict=True):
        children.append((name, kind, value, str(value), pos, size, about, None, False))
        pos += size
    _annotate_header(children, batch)
    children.append(_batch_records_row(batch, data, pos))
    return (f"RecordBatch[{index}]", "RecordBatch", None, batch_display(batch), batch.position, batch.size,
            "record batch, magic 2", children, False)


def _annotate_header(children: list[Row], batch: RecordBatch) -> None:
    """The CRC, attributes (with their bits as generated rows) and timestamps as `record_nodes` shows them."""
    name, kind, value, _, at, size, about, _, _ = children[4]
    children[4] = (name, kind, value, f"0x{batch.crc:08x} (correct)", at, size, about, None, False)
    name, kind, value, _, at, size, about, _, _ = children[5]
    bits = [_generated(bit, bit_kind, bit_value, at, bit_about)
            for bit, bit_kind, bit_value, bit_about in attribute_bits(batch)]
    children[5] = (name, kind, value, attributes_display(batch), at, size, about, bits, False)
    for index in (7, 8):  # baseTimestamp, maxTimestamp
        name, kind, value, _, at, size, about, _, _ = children[index]
        children[index] = (name, kind, value, timestamp_display(value), at, size, about, None, False)


def _batch_records_row(batch: RecordBatch, data: bytes, pos: int) -> Row:
    end = batch.position + batch.size
    count = len(batch.records)
    if batch.compression == "none" or batch.attributes & 0x07 == 0:
        return ("records", "[]Record", count, count_text(count), pos, end - pos, "the records of the batch",
                _record_rows(batch, data, pos, end), False)
    raw = data[pos:end]
    display = f"{len(raw)} bytes of {batch.compression} data"
    children: list[Row] | None = None
    if batch.decompressed is not None:
        body = batch.decompressed
        display += f", {len(body)} bytes decompressed"
        children = [("decompressed", "[]Record", count, count_text(count), 0, len(body),
                     DECOMPRESSED_ABOUT.format(codec=batch.compression), _record_rows(batch, body, 0, len(body)),
                     True)]
    return ("records", "bytes", raw, display, pos, end - pos, "the records of the batch, compressed", children,
            False)


def _record_rows(batch: RecordBatch, body: bytes, start: int, end: int) -> list[Row]:
    log_append = batch.timestamp_type == "LogAppendTime"
    rows = [_record_row(record, f"Record[{i}]", log_append) for i, record in enumerate(batch.records)]
    if batch.records_end < end:
        rows.append(_undecoded(body, batch.records_end, end))
    return rows


def _record_row(record: Record, name: str, log_append: bool) -> Row:
    b = record.bounds
    position = record.position
    children: list[Row] = [
        ("length", "varint", record.length, str(record.length), position, b[0] - position,
         "bytes of the record after this field", None, False),
        ("attributes", "int8", record.attributes, str(record.attributes), b[0], 1, "unused", None, False),
        ("timestampDelta", "varlong", record.timestamp_delta, str(record.timestamp_delta), b[1], b[2] - b[1],
         "timestamp minus the batch's base timestamp", None, False),
        ("timestamp", "int64", record.timestamp, timestamp_display(record.timestamp), b[2], 0,
         _LOG_APPEND_ABOUT if log_append else _CREATE_TIME_ABOUT, None, True),
        ("offsetDelta", "varint", record.offset_delta, str(record.offset_delta), b[2], b[3] - b[2],
         "offset minus the batch's base offset", None, False),
        ("offset", "int64", record.offset, str(record.offset), b[3], 0, "baseOffset plus offsetDelta", None, True),
    ]
    _add_bytes(children, "key", record.key_length, record.key, b[3], b[4], b[5])
    _add_bytes(children, "value", record.value_length, record.value, b[5], b[6], b[7])
    control = record.control
    if control is not None:
        children.append(_generated("controlType", "int16", control.type, b[7], "0 abort, 1 commit",
                                   f"{control.type} ({control.name})"))
        if control.coordinator_epoch is not None:
            children.append(_generated("coordinatorEpoch", "int32", control.coordinator_epoch, b[7],
                                       "epoch of the transaction coordinator that wrote the marker"))
    children.append(_headers_row(record, b[7], b[8]))
    return (name, "Record", None, record_display(record), position, record.size, "a record", children, False)


_BYTES_ABOUT = {name: (f"bytes of the {name}, -1 for null", f"the record's {name}")
                for name in ("key", "value", "headerValue")}


def _add_bytes(children: list[Row], name: str, length: int, value: bytes | None, pos: int, content: int,
               end: int) -> None:
    length_about, about = _BYTES_ABOUT[name]
    children.append((f"{name}Length", "varint", length, "-1 (null)" if length < 0 else str(length), pos,
                     content - pos, length_about, None, False))
    if value is not None:
        children.append((name, "bytes", value, value_display(value), content, end - content, about, None, False))


def _headers_row(record: Record, pos: int, count_end: int) -> Row:
    headers = record.headers
    count = len(headers)
    end = headers[-1].bounds[3] if headers else count_end
    children: list[Row] = [("length", "varint", count, str(count), pos, count_end - pos,
                            "number of headers that follow", None, False)]
    children.extend(_header_row(header, f"Header[{i}]") for i, header in enumerate(headers))
    return ("headers", "[]Header", count, count_text(count, "header"), pos, end - pos, "record headers",
            children, False)


def _header_row(header: RecordHeader, name: str) -> Row:
    b = header.bounds
    key = f'"{printable(header.key)}"'
    children: list[Row] = [
        ("headerKeyLength", "varint", header.key_length, str(header.key_length), header.position,
         b[0] - header.position, "bytes of the key", None, False),
        ("headerKey", "string", header.key, key, b[0], b[1] - b[0], "the header's key", None, False),
    ]
    _add_bytes(children, "headerValue", header.value_length, header.value, b[1], b[2], b[3])
    return (name, "Header", None, f"{key} = {value_display(header.value)}", header.position, header.size,
            "a record header", children, False)


# -- magic 0 and 1 ---------------------------------------------------------------------


def _message_row(message: LegacyMessage, data: bytes, name: str) -> Row:
    pos = message.position
    at = pos + 17  # the attributes, where their bits are shown
    attributes: list[Row] = [_generated("compression", "string", message.compression, at,
                                        "bits 0-2: compression codec")]
    children: list[Row] = [
        ("offset", "int64", message.offset, str(message.offset), pos, 8,
         "offset (relative inside a magic 1 wrapper)", None, False),
        ("message_size", "int32", message.message_size, str(message.message_size), pos + 8, 4,
         "bytes of the message after this field", None, False),
        ("crc", "uint32", message.crc, f"0x{message.crc:08x} (correct)", pos + 12, 4,
         "CRC32 of the message from the magic to its end", None, False),
        ("magic", "int8", message.magic, str(message.magic), pos + 16, 1, "message format version", None, False),
        ("attributes", "int8", message.attributes, str(message.attributes), pos + 17, 1,
         "compression, timestamp type", attributes, False),
    ]
    pos += 18
    if message.magic == 1:
        children.append(("timestamp", "int64", message.timestamp, timestamp_display(message.timestamp), pos, 8,
                         "creation or log append time", None, False))
        pos += 8
    if message.timestamp_type is not None:
        attributes.append(_generated("timestampType", "string", message.timestamp_type, at, "bit 3"))
    if message.absolute_offset != message.offset:
        children.append(_generated("absoluteOffset", "int64", message.absolute_offset, message.position,
                                   "the wrapper's offset minus the last inner offset, plus this one"))
    if message.effective_timestamp != message.timestamp and message.effective_timestamp is not None:
        children.append(_generated("logAppendTime", "int64", message.effective_timestamp, at,
                                   "the wrapper's LogAppendTime, which applies to its messages",
                                   timestamp_display(message.effective_timestamp)))
    end = message.position + message.size
    if message.key_end > pos:
        children.append(_legacy_bytes_row("key", message.key, data, pos, message.key_end))
        if message.key_end < end:
            children.append(_legacy_value_row(message, data))
    elif pos < end:
        children.append(_undecoded(data, pos, end))
    return (name, "Message", None, message_display(message), message.position, message.size,
            f"legacy message, magic {message.magic}", children, False)


def _legacy_bytes_row(name: str, value: bytes | None, data: bytes, pos: int, end: int,
                      children: list[Row] | None = None, display: str | None = None) -> Row:
    if display is None:
        length = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        display = f"{value_display(value)} (int32 len={length})"
    return (name, "nullable_bytes", value, display, pos, end - pos, f"the message's {name}", children, False)


def _legacy_value_row(message: LegacyMessage, data: bytes) -> Row:
    end = message.position + message.size
    if not message.is_wrapper:
        return _legacy_bytes_row("value", message.value, data, message.key_end, end)
    display = f"{end - message.key_end - 4} bytes of {message.compression} data"
    body = message.decompressed
    children: list[Row] | None = None
    if body is not None:
        display += f", {len(body)} bytes decompressed"
        inner = [_message_row(m, body, f"Message[{i}]") for i, m in enumerate(message.inner)]
        stop = message.inner[-1].position + message.inner[-1].size if message.inner else 0
        if stop < len(body):
            inner.append(_undecoded(body, stop, len(body)))
        count = len(message.inner)
        children = [("decompressed", "[]Message", count, count_text(count, "message"), 0, len(body),
                     DECOMPRESSED_ABOUT.format(codec=message.compression), inner, True)]
    return _legacy_bytes_row("value", message.value, data, message.key_end, end, children, display)


# -- shared ----------------------------------------------------------------------------


def _generated(name: str, kind: str, value: object, at: int, about: str, display: str | None = None) -> Row:
    shown = display if display is not None else (str(value).lower() if isinstance(value, bool) else str(value))
    return (name, kind, value, shown, at, 0, about, None, True)


def _undecoded(body: bytes, start: int, end: int) -> Row:
    raw = body[start:end]
    return ("undecoded", "bytes", raw, hex_value(raw), start, end - start,
            "bytes not decoded after a problem (see the notes)", None, False)


batch_row = _batch_row
legacy_message_row = _message_row

__all__ = ["batch_row", "clean_entry", "entries_rows", "legacy_message_row"]
