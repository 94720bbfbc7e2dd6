"""`-V` lines of a `records` field, written straight from its batches' bytes.

The same lines `render_rows` writes from `record_rows` (and so the interpreter
from `record_nodes`), without building a row or a `Record`: a body reaches here
only when the fast path took it, so its batches decode without a note
(`record_check.records_clean`) and are read here as `records.decode_batch`
reads them, with no check left to make. The layout of a magic 2 batch and its
records is fixed, so a batch header is one f-string and so is each record (the
text is the same once the lines are joined). Legacy message sets
(magic 0 and 1, rare) are laid out by `record_rows` and written as rows, as
are tagged-field blocks that are not empty (`tagged_lines`); anything else is
refused and the message is written the old way.

A batch that is not a control batch is written by C where it is built
(`_verbose_records_c`, mirroring `_batch_lines` and `_plain_records`; KDISSECT_PURE=1
turns it off, see `kdissect.native`): the same text, which a test compares.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kdissect.decode import records as rec
from kdissect.decode.compression import COMPRESSION_NAMES, decompress
from kdissect.decode.record_check import decompressed
from kdissect.decode.record_nodes import (
    BATCH_FIELDS,
    DECOMPRESSED_ABOUT,
    MAX_VALUE_BYTES,
    count_text,
    timestamp_display,
    value_display,
)
from kdissect.decode.record_rows import entries_rows
from kdissect.decode.rows import _Layout, length_prefix  # _Layout: rows of a tagged-field block
from kdissect.decode.schema.plan import StructPlan
from kdissect.decode.tree import printable
from kdissect.dissectors import Display
from kdissect.native import PURE
from kdissect.present.lines import (
    GENERATED_TAILS,
    _hexes,
    about_tail,
    generated_tail,
    node_text,
    row_lines,
)


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
Hexes = _Hexes | list[str]


def hexes(size: int) -> Hexes:
    """`0x%04x` of every offset in data of `size` bytes, as the fastest lookup that has them all:
    the list of the 65536 first (shared with `row_lines`) for most frames, `HEXES` beyond."""
    return _hexes() if size < _LISTED else HEXES


_LISTED = 1 << 16  # as many as `_hexes()` lists

# name type, size and tail of the batch header's fields, in wire order
_BATCH_LINES = [(f"{name} {kind}", size, about_tail(about)) for name, kind, size, about in BATCH_FIELDS]
_ATTRIBUTES = 5  # the attributes' place among them: their bits follow as generated lines
_CREATE_TIME_TAIL = generated_tail("baseTimestamp plus timestampDelta")
_LOG_APPEND_TAIL = generated_tail("LogAppendTime: the batch's maxTimestamp")
_OFFSET_TAIL = generated_tail("baseOffset plus offsetDelta")


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
                  name: str, label: str, about: str, compact: bool, H: Hexes) -> int:
    """The lines of a `records` field at `pos` (its line, its length, its batches); the end.
    `H` gives the text of the frame's offsets (`hexes`).

    The fast path took the body, so every entry decodes without a note (`records_clean`):
    batches are read here as `records.decode_batch` reads them, with no check left to
    make; message sets of magic 0 and 1 are laid out by `record_rows`.
    """
    tail = about_tail(about)
    append = lines.append
    if value is None:
        shown, size = ("null (compact, len+1=0)", 1) if compact else ("null (int32 len=-1)", 4)
        append(f"{branch}{name} {label} = {shown} [{H[pos]}, {size}B]{tail}")
        return pos + size
    length = len(value)
    prefix, form = length_prefix(length, compact, 4)
    if compact:
        length_line = f"{below}+-- length uvarint = {length + 1} (compact, len+1) [{H[pos]}, {prefix}B]"
    else:
        length_line = f"{below}+-- length int32 = {length} [{H[pos]}, 4B]"
    start = end = pos + prefix
    stop = start + length
    batches = []
    while end < stop:
        batches.append(end)
        if data[end + 16] != 2:
            batches = []
            break
        end += rec.LOG_OVERHEAD + _INT32.unpack_from(data, end + 8)[0]
    rows = None
    if not batches and length:  # message sets of magic 0 and 1, as rows
        rows = entries_rows(data, start, stop)
        if rows is None:
            raise Refused("entries with notes")
    count = len(batches) if rows is None else len(rows)
    append(f"{branch}{name} {label} = {length} bytes, {count} batch{'' if count == 1 else 'es'} {form} "
           f"[{H[pos]}, {prefix + length}B]{tail}\n{length_line} {length} bytes of records follow")
    if rows:
        row_lines(rows, below, lines)
        return stop
    entry_branch, continued, ended = below + "+-- ", below + "|   ", below + "    "
    last, native = count - 1, _native_batch
    for index, at in enumerate(batches):
        inner = continued if index < last else ended
        if native is None or (text := native(data, at, index, entry_branch, inner)) is None:
            _batch_lines(lines, data, at, index, entry_branch, inner, H)
        else:
            lines.append(text)
    return stop


_INT32 = struct.Struct(">i")
_BATCH = struct.Struct(">qiibIhiqqqhii")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")
_BIT_ABOUTS = ("bits 0-2: compression codec", "bit 3", "bit 4", "bit 5: transaction markers",
               "bit 6: baseTimestamp is the delete horizon")
_BIT_TAILS = [generated_tail(about) for about in _BIT_ABOUTS]
_BIT_NAMES = ("compression string", "timestampType string", "isTransactional bool", "isControl bool",
              "hasDeleteHorizon bool")  # the bits' name and type: their values are the batch's


def _batch_header_writer() -> Callable[..., str]:
    """One f-string for the 13 lines of a batch header and the 5 of its attributes' bits,
    made once from `BATCH_FIELDS`: (child prefix, bits' prefix, position, offsets' text,
    the 13 displays, then compression, timestamp type and the 3 flags as text) -> text."""
    def literal(text: str) -> str:
        assert text.isprintable()
        return text.replace("\\", "\\\\").replace('"', '\\"').replace("{", "{{").replace("}", "}}")

    parts, at = [], 0
    bits = [f"{name} = {{{value}}}" for name, value in zip(
        _BIT_NAMES, ("compression", "timestamp_type", "transactional", "control", "horizon"), strict=True)]
    for place, (head, size, tail) in enumerate(_BATCH_LINES):
        parts.append(f"{{child}}{literal(head)} = {{d{place}}} [{{H[p + {at}]}}, {size}B]{literal(tail)}")
        if place == _ATTRIBUTES:
            parts.extend(f"{{bit}}{line}] [{{H[p + {at}]}}, 0B]{literal(bit_tail)}"
                         for line, bit_tail in zip(bits, _BIT_TAILS, strict=True))
        at += size
    displays = ", ".join(f"d{place}" for place in range(len(_BATCH_LINES)))
    body = "\\n".join(parts)
    source = (f"def batch_header(child, bit, p, H, {displays}, compression, timestamp_type, transactional, "
              f'control, horizon):\n    return f"{body}"')
    namespace: dict[str, Any] = {}
    exec(compile(source, "<kdissect -V batch header>", "exec"), namespace)
    function: Callable[..., str] = namespace["batch_header"]
    return function


_batch_header = _batch_header_writer()


class _Attributes(dict[int, tuple[Any, ...]]):
    """What a batch's lines take from its attributes, by their (int16) value: (codec, compression,
    the attributes' display, what the batch's display adds, the bits'
    texts, whether timestamps are LogAppendTime, whether it is a control batch)."""

    def __missing__(self, attributes: int) -> tuple[Any, ...]:
        codec = attributes & 0x07
        compression = COMPRESSION_NAMES[codec]  # clean: a codec that decompressed
        timestamp_type = rec.TIMESTAMP_TYPES[(attributes >> 3) & 1]
        transactional, control = bool(attributes & 0x10), bool(attributes & 0x20)
        added = (f", {compression}" if codec else "") + (
            ", control" if control else ", transactional" if transactional else "")
        found = self[attributes] = (
            codec, compression, f"0x{attributes:04x} ({compression}, {timestamp_type})", added,
            (compression, timestamp_type, _TRUTH[transactional], _TRUTH[control], _TRUTH[bool(attributes & 0x40)]),
            bool(attributes & 0x08), control)
        return found


_TRUTH = ("false", "true")
_ATTRIBUTE_TEXTS = _Attributes()


def _batch_lines(lines: list[str], data: bytes, pos: int, index: int, branch: str, prefix: str,
                 H: Hexes) -> None:
    """A clean magic 2 batch: its header's lines in one string, then its records'."""
    fields = _BATCH.unpack_from(data, pos)
    (base_offset, batch_length, _, _, crc, attributes, _, base_time, max_time, _, _, _, count) = fields
    codec, compression, shown, added, bits, log_append, control = _ATTRIBUTE_TEXTS[attributes]
    end = pos + rec.LOG_OVERHEAD + batch_length
    at = pos + rec.BATCH_HEADER
    child, records_prefix, counted = prefix + "+-- ", prefix + "    ", count_text(count)
    header = _batch_header(child, f"{prefix}|   +-- [", pos, H, *fields[:4], f"0x{crc:08x} (correct)",
                           shown,
                           fields[6], _timestamp(base_time), _timestamp(max_time), *fields[9:], *bits)
    head = (f"{branch}RecordBatch[{index}] RecordBatch = {counted}, offset {base_offset}{added} "
            f"[{H[pos]}, {end - pos}B] record batch, magic 2\n{header}\n")
    if not codec:
        lines.append(f"{head}{child}records []Record = {counted} [{H[at]}, {end - at}B] the records of the batch")
        body, records_prefix = data, records_prefix
    else:
        body = decompressed(data, at) or decompress(codec, memoryview(data)[at:end], cap=rec.MAX_DECOMPRESSED_BYTES)
        lines.append(f"{head}{child}records bytes = {end - at} bytes of {compression} data, {len(body)} bytes "
                     f"decompressed [{H[at]}, {end - at}B] the records of the batch, compressed\n"
                     f"{records_prefix}+-- [decompressed []Record = {counted}] [0x0000, {len(body)}B]"
                     f"{_decompressed_tail(compression)}")
        at, end, records_prefix, H = 0, len(body), records_prefix + "    ", hexes(len(body))
    base = max_time if log_append else base_time
    if control:  # transaction markers, rare: their lines follow the value's
        _control_records(lines, _Batch(base_offset, base, log_append, control), body, at, count, records_prefix, H)
    elif _native_records is None or (
            text := _native_records(body, at, count, base_offset, base, log_append, records_prefix)) is None:
        _plain_records(lines.append, body, at, count, base_offset, base, log_append, records_prefix, H)
    elif text:  # the records' lines joined: no line at all for none
        lines.append(text)


def _decompressed_tail(codec: str) -> str:
    tail = _DECOMPRESSED_TAILS.get(codec)
    if tail is None:
        about = DECOMPRESSED_ABOUT.format(codec=codec)
        tail = _DECOMPRESSED_TAILS[codec] = GENERATED_TAILS.get(about) or generated_tail(about)
    return tail


_DECOMPRESSED_TAILS: dict[str, str] = {}  # by codec name: four at most


@dataclass(frozen=True, slots=True)
class _Batch:
    """What a batch's records take from its header."""

    base_offset: int
    base_time: int  # LogAppendTime: the batch's maxTimestamp
    log_append: bool
    control: bool


def _control_records(lines: list[str], batch: _Batch, body: bytes, pos: int, count: int, prefix: str,
                     H: Hexes) -> None:
    """The records of a control batch (transaction markers, rare), one by one."""
    branch, continued, ended = prefix + "+-- ", prefix + "|   ", prefix + "    "
    tail = _LOG_APPEND_TAIL if batch.log_append else _CREATE_TIME_TAIL
    for index in range(count):
        pos = _record(lines, batch, body, pos, index, tail, branch, continued if index < count - 1 else ended, H)


def _plain_records(append: Callable[[str], None], body: bytes, pos: int, count: int, base_offset: int,
                   base_time: int, log_append: bool, prefix: str, H: Hexes) -> None:
    """The records of a batch that is not a control batch, each in one f-string: varints of
    one byte (most) read in line, keys and values of printable ASCII (most) quoted in line."""
    varint, size, timestamp = rec.zigzag_varint, len(body), _timestamp
    timestamp_tail = _LOG_APPEND_TAIL if log_append else _CREATE_TIME_TAIL
    branch, last = prefix + "+-- ", count - 1
    middle, final = (prefix + "|   +-- ", prefix + "|       +-- "), (prefix + "    +-- ", prefix + "        +-- ")
    key_text: int | str  # a length, or "-1 (null)"
    value_text: int | str
    # The key and the value are read alike, written out twice rather than through a helper:
    # this loop runs once per record, and a call per field costs more than its lines.
    for index in range(count):
        c, h = middle if index < last else final
        byte = body[pos]
        length, b0 = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else varint(body, pos, size, 10)
        byte = body[b0 + 1]
        delta, b2 = ((byte >> 1) ^ -(byte & 1), b0 + 2) if byte < 0x80 else varint(body, b0 + 1, size, 10)
        byte = body[b2]
        offset_delta, b3 = ((byte >> 1) ^ -(byte & 1), b2 + 1) if byte < 0x80 else varint(body, b2, size, 10)
        byte = body[b3]
        key_length, b4 = ((byte >> 1) ^ -(byte & 1), b3 + 1) if byte < 0x80 else varint(body, b3, size, 10)
        if key_length < 0:
            b5, key_shown, key_text = b4, "null", "-1 (null)"
            key_line = ""
        else:
            b5 = b4 + key_length
            key_shown, key_text = _bytes_shown(body[b4:b5]), key_length
            key_line = f"\n{c}key bytes = {key_shown} [{H[b4]}, {key_length}B] the record's key"
        byte = body[b5]
        value_length, b6 = ((byte >> 1) ^ -(byte & 1), b5 + 1) if byte < 0x80 else varint(body, b5, size, 10)
        if value_length < 0:
            b7, value_shown, value_text = b6, "null", "-1 (null)"
            value_line = ""
        else:
            b7 = b6 + value_length
            value_shown, value_text = _bytes_shown(body[b6:b7]), value_length
            value_line = f"\n{c}value bytes = {value_shown} [{H[b6]}, {value_length}B] the record's value"
        offset = base_offset + offset_delta
        end = b0 + length
        if body[b7]:  # headers
            headers_count, b8 = _varint(body, b7)
            headers, _ = _headers_text(body, b7, b8, headers_count, c, h[:-4], H)
        else:
            headers = (f"{c}headers []Header = 0 headers [{H[b7]}, 1B] record headers\n"
                       f"{h}length varint = 0 [{H[b7]}, 1B] number of headers that follow")
        append(f"{branch}Record[{index}] Record = offset {offset}, key {key_shown}, value {value_shown} "
               f"[{H[pos]}, {end - pos}B] a record\n"
               f"{c}length varint = {length} [{H[pos]}, {b0 - pos}B] bytes of the record after this field\n"
               f"{c}attributes int8 = {body[b0]} [{H[b0]}, 1B] unused\n"
               f"{c}timestampDelta varlong = {delta} [{H[b0 + 1]}, {b2 - b0 - 1}B]"
               " timestamp minus the batch's base timestamp\n"
               f"{c}[timestamp int64 = {timestamp(base_time if log_append else base_time + delta)}] "
               f"[{H[b2]}, 0B]{timestamp_tail}\n"
               f"{c}offsetDelta varint = {offset_delta} [{H[b2]}, {b3 - b2}B] offset minus the batch's base offset\n"
               f"{c}[offset int64 = {offset}] [{H[b3]}, 0B]{_OFFSET_TAIL}\n"
               f"{c}keyLength varint = {key_text} [{H[b3]}, {b4 - b3}B] bytes of the key, -1 for null{key_line}\n"
               f"{c}valueLength varint = {value_text} [{H[b5]}, {b6 - b5}B] bytes of the value, -1 for null"
               f"{value_line}\n{headers}")
        pos = end


def _bytes_shown(raw: bytes) -> str:
    """`value_display` of a key or value that is not null: printable ASCII (most) quoted here."""
    if len(raw) <= MAX_VALUE_BYTES:
        if raw.isascii():
            text = raw.decode("ascii")
            if text.isprintable():
                return f'"{text}"'
    else:
        head = raw[:MAX_VALUE_BYTES]
        if head.isascii():
            text = head.decode("ascii")
            if text.isprintable():
                return f'"{text}"... ({len(raw)} bytes)'
    return value_display(raw)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint known to be well formed: (value, end)."""
    byte = data[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    return rec.zigzag_varint(data, pos, len(data), 10)


def _record(lines: list[str], batch: _Batch, body: bytes, pos: int, index: int, timestamp_tail: str,
            branch: str, prefix: str, H: Hexes) -> int:
    """A record's lines but its headers' in one string, then its headers'; the record's end."""
    length, b0 = _varint(body, pos)
    timestamp_delta, b2 = _varint(body, b0 + 1)
    offset_delta, b3 = _varint(body, b2)
    key_length, b4 = _varint(body, b3)
    b5 = b4 + max(key_length, 0)
    value_length, b6 = _varint(body, b5)
    b7 = b6 + max(value_length, 0)
    key = None if key_length < 0 else body[b4:b5]
    value = None if value_length < 0 else body[b6:b7]
    offset = batch.base_offset + offset_delta
    timestamp = batch.base_time if batch.log_append else batch.base_time + timestamp_delta
    key_shown, value_shown = value_display(key), value_display(value)
    control = _control(key, value) if batch.control else None
    display = (f"offset {offset}, key {key_shown}, value {value_shown}" if control is None
               else f"offset {offset}, {control[0]} marker")
    c = prefix + "+-- "
    size = b0 + length - pos
    text = (f"{branch}Record[{index}] Record = {display} [{H[pos]}, {size}B] a record\n"
            f"{c}length varint = {length} [{H[pos]}, {b0 - pos}B] bytes of the record after this field\n"
            f"{c}attributes int8 = {body[b0]} [{H[b0]}, 1B] unused\n"
            f"{c}timestampDelta varlong = {timestamp_delta} [{H[b0 + 1]}, {b2 - b0 - 1}B]"
            " timestamp minus the batch's base timestamp\n"
            f"{c}[timestamp int64 = {_timestamp(timestamp)}] [{H[b2]}, 0B]{timestamp_tail}\n"
            f"{c}offsetDelta varint = {offset_delta} [{H[b2]}, {b3 - b2}B] offset minus the batch's base offset\n"
            f"{c}[offset int64 = {offset}] [{H[b3]}, 0B]{_OFFSET_TAIL}\n"
            f"{c}keyLength varint = {'-1 (null)' if key_length < 0 else key_length} [{H[b3]}, {b4 - b3}B]"
            " bytes of the key, -1 for null")
    if key is not None:
        text += f"\n{c}key bytes = {key_shown} [{H[b4]}, {b5 - b4}B] the record's key"
    text += (f"\n{c}valueLength varint = {'-1 (null)' if value_length < 0 else value_length} "
             f"[{H[b5]}, {b6 - b5}B] bytes of the value, -1 for null")
    if value is not None:
        text += f"\n{c}value bytes = {value_shown} [{H[b6]}, {b7 - b6}B] the record's value"
    if control is not None:
        text += "\n" + c + node_text("controlType", "int16", control[1], b7, 0, "0 abort, 1 commit", True, False)
        if control[2] is not None:
            text += "\n" + c + node_text("coordinatorEpoch", "int32", str(control[2]), b7, 0,
                                         "epoch of the transaction coordinator that wrote the marker", True, False)
    count, b8 = _varint(body, b7)
    headers, end = _headers_text(body, b7, b8, count, c, prefix + "    ", H)
    lines.append(f"{text}\n{headers}")
    return end


def _control(key: bytes | None, value: bytes | None) -> tuple[str, str, int | None]:
    """A control record's (name, type display, coordinator epoch) as `records._control` reads it."""
    assert key is not None  # clean: a key of version int16 + type int16
    _, kind = _CONTROL_KEY.unpack_from(key)
    name = rec.CONTROL_TYPES.get(kind, f"unknown control type {kind}")
    epoch = None if value is None or len(value) < _CONTROL_VALUE.size else _CONTROL_VALUE.unpack_from(value)[1]
    return name, f"{kind} ({name})", epoch


def _headers_text(body: bytes, pos: int, at: int, count: int, branch: str, prefix: str,
                  H: Hexes) -> tuple[str, int]:
    """A record's headers (their count is at `pos`, the first at `at`): their lines, the record's end."""
    c, count_end, text = prefix + "+-- ", at, ""
    middle, final, last = prefix + "|   +-- ", prefix + "    +-- ", count - 1
    for index in range(count):
        start = at
        byte = body[at]
        key_length, b0 = ((byte >> 1) ^ -(byte & 1), at + 1) if byte < 0x80 else _varint(body, at)
        b1 = b0 + key_length  # clean: a header key is never null
        byte = body[b1]
        value_length, b2 = ((byte >> 1) ^ -(byte & 1), b1 + 1) if byte < 0x80 else _varint(body, b1)
        raw = body[b0:b1]
        key = raw.decode("ascii") if raw.isascii() else raw.decode("utf-8", "replace")
        key = f'"{key}"' if key.isprintable() else f'"{printable(key)}"'
        h = middle if index < last else final
        if value_length < 0:
            b3, value_shown, value_line = b2, "null", ""
        else:
            b3 = b2 + value_length
            value_shown = _bytes_shown(body[b2:b3])
            value_line = f"\n{h}headerValue bytes = {value_shown} [{H[b2]}, {value_length}B] the record's headerValue"
        text += (f"\n{c}Header[{index}] Header = {key} = {value_shown} [{H[start]}, {b3 - start}B] a record header\n"
                 f"{h}headerKeyLength varint = {key_length} [{H[start]}, {b0 - start}B] bytes of the key\n"
                 f"{h}headerKey string = {key} [{H[b0]}, {key_length}B] the header's key\n"
                 f"{h}headerValueLength varint = {'-1 (null)' if value_length < 0 else value_length} "
                 f"[{H[b1]}, {b2 - b1}B] bytes of the headerValue, -1 for null{value_line}")
        at = b3
    return (f"{branch}headers []Header = {count_text(count, 'header')} [{H[pos]}, {at - pos}B] record headers\n"
            f"{c}length varint = {count} [{H[pos]}, {count_end - pos}B] number of headers that follow{text}"), at


_TIMESTAMPS: dict[int, str] = {}  # milliseconds -> display: records of a batch share most


def _timestamp(milliseconds: int) -> str:
    shown = _TIMESTAMPS.get(milliseconds)
    if shown is None:
        if len(_TIMESTAMPS) >= 4096:
            _TIMESTAMPS.clear()
        shown = _TIMESTAMPS[milliseconds] = timestamp_display(milliseconds)
    return shown


# (body, position, count, base offset, base timestamp, LogAppendTime, prefix) -> the records'
# lines joined, or None: `plain_records` of `_verbose_records_c`
PlainRecords = Callable[[bytes, int, int, int, int, bool, str], str | None]


# (frame, position, index, branch, prefix) -> the batch's lines joined, or None: `plain_batch`
# of `_verbose_records_c`
PlainBatch = Callable[[bytes, int, int, str, str], str | None]


def _native() -> tuple[PlainRecords, PlainBatch] | tuple[None, None]:
    """`_plain_records` and `_batch_lines` in C (`_verbose_records_c`), where it is built and
    KDISSECT_PURE is not set (`native`): the text, or None where they leave it to the Python."""
    if PURE:
        return None, None
    try:
        from kdissect.present import _verbose_records_c
    except ImportError:
        return None, None
    return configured(_verbose_records_c), configured_batches(_verbose_records_c)


def configured(native: ModuleType) -> PlainRecords:
    """`plain_records` of the C module `native`, given the Python it calls back into."""
    native.configure(_timestamp, value_display, printable, _CREATE_TIME_TAIL, _LOG_APPEND_TAIL, _OFFSET_TAIL)
    plain_records: PlainRecords = native.plain_records
    return plain_records


def configured_batches(native: ModuleType) -> PlainBatch:
    """`plain_batch` of the C module `native` (configured by `configured`), given what it writes
    beside the records: the header's lines, the attributes' bits, each codec's name and tail."""
    codecs = tuple((COMPRESSION_NAMES[codec], _decompressed_tail(COMPRESSION_NAMES[codec]))
                   for codec in range(len(COMPRESSION_NAMES)))
    native.configure_batches(decompressed, tuple(_BATCH_LINES), tuple(zip(_BIT_NAMES, _BIT_TAILS, strict=True)),
                             codecs, rec.TIMESTAMP_TYPES)
    plain_batch: PlainBatch = native.plain_batch
    return plain_batch


_native_records, _native_batch = _native()


# (elements' values, frame, position, size, flexible, branch, middle and last elements' field
# branch, template) -> their lines joined, or None: `fixed_elements` of `_verbose_records_c`,
# for `verbose._Generator.fixed_elements` (None where the C is not used)
FixedElements = Callable[[list[dict[str, int]], bytes, int, int, bool, str, str, str, tuple[str | int, ...]],
                         str | None]
native_fixed_elements: FixedElements | None = None
if _native_batch is not None:
    from kdissect.present import _verbose_records_c as _c

    native_fixed_elements = getattr(_c, "fixed_elements", None)  # None from a module built before it

__all__ = ["HEXES", "Hexes", "Refused", "hexes", "records_lines", "tagged_lines"]
