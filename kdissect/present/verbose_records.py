"""`-V` lines of a `records` field, written straight from its decoded batches.

The same lines `render_rows` writes from `record_rows` (and so the interpreter
from `record_nodes`), without building a row: the layout of a magic 2 batch
and its records is fixed, so each record is one f-string of several lines (the
text is the same once the lines are joined). A body reaches here only when the
fast path took it, so its batches decoded without a note. Legacy message sets
(magic 0 and 1, rare) are laid out by `record_rows` and written as rows, as
are tagged-field blocks that are not empty (`tagged_lines`); anything else is
refused and the message is written the old way.
"""

from __future__ import annotations

from collections.abc import Mapping

from kdissect.decode import records as rec
from kdissect.decode.record_nodes import (
    BATCH_FIELDS,
    DECOMPRESSED_ABOUT,
    attribute_bits,
    attributes_display,
    batch_display,
    count_text,
    hex_value,
    record_display,
    timestamp_display,
    value_display,
)
from kdissect.decode.record_rows import entries_rows
from kdissect.decode.records import Record, RecordBatch, RecordHeader
from kdissect.decode.rows import _Layout, uvarint_size  # _Layout: rows of a tagged-field block
from kdissect.decode.schema.plan import StructPlan
from kdissect.decode.tree import printable
from kdissect.dissectors import Display
from kdissect.present.lines import GENERATED_TAILS, about_tail, generated_tail, node_text, row_lines


class Refused(Exception):
    """The `-V` writers have no lines for this message: it is written from rows or the tree."""


class _Hexes(dict[int, str]):
    """`0x%04x` of an offset, kept for the offsets of ordinary frames."""

    def __missing__(self, offset: int) -> str:
        text = f"0x{offset:04x}"
        if 0 <= offset < 1 << 16:
            self[offset] = text
        return text


HEXES = _Hexes()
_H = HEXES

# name type, size and tail of the batch header's fields, in wire order
_BATCH_LINES = [(f"{name} {kind}", size, about_tail(about)) for name, kind, size, about in BATCH_FIELDS]
_ATTRIBUTES = 5  # the attributes' place among them: their bits follow as generated lines
_CREATE_TIME_TAIL = generated_tail("baseTimestamp plus timestampDelta")
_LOG_APPEND_TAIL = generated_tail("LogAppendTime: the batch's maxTimestamp")
_OFFSET_TAIL = generated_tail("baseOffset plus offsetDelta")
_UNDECODED_TAIL = about_tail("bytes not decoded after a problem (see the notes)")


def tagged_lines(lines: list[str], data: bytes, pos: int, branch: str, below: str, plan: StructPlan,
                 displays: Mapping[str, Display]) -> int:
    """A tagged-field block that is not empty, laid out as rows (the fast path checked it); its end."""
    row = _Layout(data, displays, {}).tagged_fields(plan, pos)
    name, kind, _, display, offset, size, about, children, _ = row
    lines.append(branch + node_text(name, kind, display, offset, size, about, False, False))
    if children:
        row_lines(children, below, lines)
    return pos + size


def records_lines(lines: list[str], data: bytes, value: bytes | None, pos: int, branch: str, below: str,
                  name: str, label: str, about: str, compact: bool) -> int:
    """The lines of a `records` field at `pos` (its line, its length, its batches); the end."""
    tail = about_tail(about)
    append = lines.append
    if value is None:
        shown, size = ("null (compact, len+1=0)", 1) if compact else ("null (int32 len=-1)", 4)
        append(f"{branch}{name} {label} = {shown} [{_H[pos]}, {size}B]{tail}")
        return pos + size
    length = len(value)
    if compact:
        prefix = uvarint_size(length + 1)
        length_line = f"{below}+-- length uvarint = {length + 1} (compact, len+1) [{_H[pos]}, {prefix}B]"
        form = f"(compact, len+1={length + 1})"
    else:
        prefix = 4
        length_line = f"{below}+-- length int32 = {length} [{_H[pos]}, 4B]"
        form = f"(int32 len={length})"
    start = pos + prefix
    entries = rec.decode_records(data, start, start + length, max_decompressed=rec.MAX_DECOMPRESSED_BYTES)
    count = len(entries)
    append(f"{branch}{name} {label} = {length} bytes, {count} batch{'' if count == 1 else 'es'} {form} "
           f"[{_H[pos]}, {prefix + length}B]{tail}\n{length_line} {length} bytes of records follow")
    if not all(type(entry) is RecordBatch and not entry.notes for entry in entries):
        rows = entries_rows(data, start, start + length)  # legacy messages: as rows
        if rows is None:
            raise Refused("entries with notes")
        if rows:
            row_lines(rows, below, lines)
        return start + length
    entry_branch, continued, ended = below + "+-- ", below + "|   ", below + "    "
    last = count - 1
    for index, batch in enumerate(entries):
        assert isinstance(batch, RecordBatch)
        _batch_lines(lines, batch, data, index, entry_branch, continued if index < last else ended)
    return start + length


def _batch_lines(lines: list[str], batch: RecordBatch, data: bytes, index: int, branch: str, prefix: str) -> None:
    pos = batch.position
    child = prefix + "+-- "
    shown = (str(batch.base_offset), str(batch.batch_length), str(batch.partition_leader_epoch), str(batch.magic),
             f"0x{batch.crc:08x} (correct)", attributes_display(batch), str(batch.last_offset_delta),
             timestamp_display(batch.base_timestamp), timestamp_display(batch.max_timestamp),
             str(batch.producer_id), str(batch.producer_epoch), str(batch.base_sequence), str(batch.record_count))
    text = [f"{branch}RecordBatch[{index}] RecordBatch = {batch_display(batch)} [{_H[pos]}, {batch.size}B]"
            " record batch, magic 2"]
    at = pos
    for place, ((head, size, tail), display) in enumerate(zip(_BATCH_LINES, shown, strict=True)):
        text.append(f"{child}{head} = {display} [{_H[at]}, {size}B]{tail}")
        if place == _ATTRIBUTES:  # its bits, as generated lines below it
            bit = f"{prefix}|   +-- ["
            for name, kind, value, about in attribute_bits(batch):
                shown_bit = str(value).lower() if isinstance(value, bool) else str(value)
                bit_tail = GENERATED_TAILS.get(about) or generated_tail(about)
                text.append(f"{bit}{name} {kind} = {shown_bit}] [{_H[at]}, 0B]{bit_tail}")
        at += size
    lines.append("\n".join(text))
    _batch_records_lines(lines, batch, data, at, child, prefix + "    ")


def _batch_records_lines(lines: list[str], batch: RecordBatch, data: bytes, pos: int, branch: str,
                         prefix: str) -> None:
    end = batch.position + batch.size
    count = len(batch.records)
    if batch.compression == "none" or batch.attributes & 0x07 == 0:
        lines.append(f"{branch}records []Record = {count_text(count)} [{_H[pos]}, {end - pos}B]"
                     " the records of the batch")
        _record_lines(lines, batch, data, end, prefix)
        return
    display = f"{end - pos} bytes of {batch.compression} data"
    body = batch.decompressed
    if body is not None:
        display += f", {len(body)} bytes decompressed"
    lines.append(f"{branch}records bytes = {display} [{_H[pos]}, {end - pos}B] the records of the batch, compressed")
    if body is not None:
        tail = generated_tail(DECOMPRESSED_ABOUT.format(codec=batch.compression))
        lines.append(f"{prefix}+-- [decompressed []Record = {count_text(count)}] [0x0000, {len(body)}B]{tail}")
        _record_lines(lines, batch, body, len(body), prefix + "    ")


def _record_lines(lines: list[str], batch: RecordBatch, body: bytes, end: int, prefix: str) -> None:
    branch, continued, ended = prefix + "+-- ", prefix + "|   ", prefix + "    "
    timestamp_tail = _LOG_APPEND_TAIL if batch.timestamp_type == "LogAppendTime" else _CREATE_TIME_TAIL
    undecoded = batch.records_end < end
    last = len(batch.records) - (0 if undecoded else 1)
    for index, record in enumerate(batch.records):
        _record(lines, record, index, timestamp_tail, branch, continued if index < last else ended)
    if undecoded:
        start = batch.records_end
        lines.append(f"{branch}undecoded bytes = {hex_value(body[start:end])} [{_H[start]}, {end - start}B]"
                     f"{_UNDECODED_TAIL}")


def _record(lines: list[str], record: Record, index: int, timestamp_tail: str, branch: str, prefix: str) -> None:
    """A record's lines but its headers' in one string, then its headers'."""
    b = record.bounds
    pos = record.position
    key, value = record.key, record.value
    key_shown, value_shown = value_display(key), value_display(value)
    control = record.control
    display = (f"offset {record.offset}, key {key_shown}, value {value_shown}" if control is None
               else record_display(record))
    key_length, value_length = record.key_length, record.value_length
    c = prefix + "+-- "
    text = (f"{branch}Record[{index}] Record = {display} [{_H[pos]}, {record.size}B] a record\n"
            f"{c}length varint = {record.length} [{_H[pos]}, {b[0] - pos}B] bytes of the record after this field\n"
            f"{c}attributes int8 = {record.attributes} [{_H[b[0]]}, 1B] unused\n"
            f"{c}timestampDelta varlong = {record.timestamp_delta} [{_H[b[1]]}, {b[2] - b[1]}B]"
            " timestamp minus the batch's base timestamp\n"
            f"{c}[timestamp int64 = {timestamp_display(record.timestamp)}] [{_H[b[2]]}, 0B]{timestamp_tail}\n"
            f"{c}offsetDelta varint = {record.offset_delta} [{_H[b[2]]}, {b[3] - b[2]}B]"
            " offset minus the batch's base offset\n"
            f"{c}[offset int64 = {record.offset}] [{_H[b[3]]}, 0B]{_OFFSET_TAIL}\n"
            f"{c}keyLength varint = {'-1 (null)' if key_length < 0 else key_length} [{_H[b[3]]}, {b[4] - b[3]}B]"
            " bytes of the key, -1 for null")
    if key is not None:
        text += f"\n{c}key bytes = {key_shown} [{_H[b[4]]}, {b[5] - b[4]}B] the record's key"
    text += (f"\n{c}valueLength varint = {'-1 (null)' if value_length < 0 else value_length} "
             f"[{_H[b[5]]}, {b[6] - b[5]}B] bytes of the value, -1 for null")
    if value is not None:
        text += f"\n{c}value bytes = {value_shown} [{_H[b[6]]}, {b[7] - b[6]}B] the record's value"
    if control is not None:
        text += "\n" + c + node_text("controlType", "int16", f"{control.type} ({control.name})", b[7], 0,
                                     "0 abort, 1 commit", True, False)
        if control.coordinator_epoch is not None:
            text += "\n" + c + node_text("coordinatorEpoch", "int32", str(control.coordinator_epoch), b[7], 0,
                                         "epoch of the transaction coordinator that wrote the marker", True, False)
    lines.append(text)
    _headers_lines(lines, record, b[7], b[8], c, prefix + "    ")


def _headers_lines(lines: list[str], record: Record, pos: int, count_end: int, branch: str, prefix: str) -> None:
    headers = record.headers
    count = len(headers)
    end = headers[-1].bounds[3] if headers else count_end
    c = prefix + "+-- "
    lines.append(f"{branch}headers []Header = {count_text(count, 'header')} [{_H[pos]}, {end - pos}B] record headers\n"
                 f"{c}length varint = {count} [{_H[pos]}, {count_end - pos}B] number of headers that follow")
    last = count - 1
    for index, header in enumerate(headers):
        lines.append(_header_text(header, index, c, prefix + ("|   " if index < last else "    ")))


def _header_text(header: RecordHeader, index: int, branch: str, prefix: str) -> str:
    b = header.bounds
    pos = header.position
    key = f'"{printable(header.key)}"'
    value = header.value
    value_shown = value_display(value)
    length = header.value_length
    c = prefix + "+-- "
    text = (f"{branch}Header[{index}] Header = {key} = {value_shown} [{_H[pos]}, {header.size}B] a record header\n"
            f"{c}headerKeyLength varint = {header.key_length} [{_H[pos]}, {b[0] - pos}B] bytes of the key\n"
            f"{c}headerKey string = {key} [{_H[b[0]]}, {b[1] - b[0]}B] the header's key\n"
            f"{c}headerValueLength varint = {'-1 (null)' if length < 0 else length} [{_H[b[1]]}, {b[2] - b[1]}B]"
            " bytes of the headerValue, -1 for null")
    if value is not None:
        text += f"\n{c}headerValue bytes = {value_shown} [{_H[b[2]]}, {b[3] - b[2]}B] the record's headerValue"
    return text


__all__ = ["HEXES", "Refused", "records_lines", "tagged_lines"]
