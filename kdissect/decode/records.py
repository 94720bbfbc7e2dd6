"""Kafka records: the bytes of a `records` field decoded into plain values.

A `records` field (Produce requests, Fetch responses, ...) holds a sequence of
entries, each starting with an int64 offset and an int32 size, with the magic
byte at the same place (byte 16) in every format:

- a record batch (magic 2): a 61-byte header, CRC-32C over everything after the
  CRC field, then varint-encoded records (zigzag deltas), compressed as a whole;
- a legacy message (magic 0 or 1): CRC32 over everything after the CRC field,
  key and value as int32-length bytes; a compressed message is a *wrapper* whose
  value is an inner message set.

`decode_records` returns the entries as frozen dataclasses; `record_rows` walks
them as one flat row per record, with absolute offsets and timestamps resolved
as Kafka resolves them. The tree (`record_nodes`) and the tables are built from
these values. Nothing here raises on bad bytes: problems are notes on the entry
they concern, and decoding goes on with the next entry where it can.

Decompression is bounded: a batch may decompress to at most
`max_decompressed` bytes (default `MAX_DECOMPRESSED_BYTES`); beyond that the
batch keeps its header and a note, and its records are not decoded. Positions
of records inside a compressed batch count from the start of the decompressed
data (`RecordBatch.decompressed`), never from the frame.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kdissect.decode.compression import (
    COMPRESSION_NAMES,
    DecompressionProblem,
    decompress,
)
from kdissect.notes import Note, chat, error, warn

MAX_DECOMPRESSED_BYTES = 32 << 20  # per batch; a compression bomb stops here with a note
ENTRY_PREAMBLE = 17  # offset int64, size int32, then 4 bytes (CRC or leader epoch), magic int8
BATCH_HEADER = 61  # the fixed header of a magic 2 record batch
BATCH_CRC_FROM = 21  # the CRC-32C covers attributes to the end of the batch
LOG_OVERHEAD = 12  # offset int64 + size int32, before the size counts
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CONTROL_TYPES = {0: "abort", 1: "commit"}
PARTIAL_NOTE = "partial record batch at the end of the records: {have} of {need} bytes " \
               "(a fetch response may end with one, cut at its size limit)"

_BATCH = struct.Struct(">qiibIhiqqqhii")
_LEGACY_V0 = struct.Struct(">qiIbb")
_LEGACY_V1 = struct.Struct(">qiIbbq")
_INT32 = struct.Struct(">i")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")



def crc32c(data: bytes | memoryview) -> int:
    """CRC-32C (Castagnoli), the checksum of record batches (C, hardware-accelerated)."""
    return int(_crc32c()(data))


@functools.cache
def _crc32c() -> Callable[[bytes | memoryview], int]:
    # imported on first use: the package reads its version from its installed metadata when
    # imported, a tenth of a second that every command would pay, the plain summary too
    from crc32c import crc32c

    return crc32c


# -- values ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordHeader:
    """One header of a record: a string key and a nullable bytes value."""

    key: str
    value: bytes | None
    position: int
    bounds: tuple[int, int, int, int]  # ends of: key length, key, value length, value
    key_length: int
    value_length: int

    @property
    def size(self) -> int:
        return self.bounds[3] - self.position


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """The key and value of a control record: a transaction marker."""

    version: int
    type: int  # 0 abort, 1 commit
    value_version: int | None
    coordinator_epoch: int | None

    @property
    def name(self) -> str:
        return CONTROL_TYPES.get(self.type, f"unknown control type {self.type}")


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a magic 2 batch, with its absolute offset and timestamp resolved."""

    position: int  # in the frame, or in the decompressed data of a compressed batch
    length: int
    attributes: int
    timestamp_delta: int
    offset_delta: int
    key_length: int
    key: bytes | None
    value_length: int
    value: bytes | None
    headers: tuple[RecordHeader, ...]
    # ends of: length, attributes, timestamp delta, offset delta, key length, key,
    # value length, value, header count (headers follow, each with its own bounds)
    bounds: tuple[int, ...]
    offset: int
    timestamp: int
    control: ControlRecord | None = None

    @property
    def size(self) -> int:
        return self.headers[-1].bounds[3] - self.position if self.headers else self.bounds[-1] - self.position


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A record batch of magic 2: its header, its records, and what went wrong."""

    position: int
    size: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    computed_crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    records: tuple[Record, ...]
    decompressed: bytes | None  # the records' bytes of a compressed batch
    records_end: int  # where the decoded records end (frame or decompressed data)
    notes: tuple[Note, ...]

    @property
    def compression(self) -> str:
        return COMPRESSION_NAMES.get(self.attributes & 0x07, f"unknown ({self.attributes & 0x07})")

    @property
    def timestamp_type(self) -> str:
        return TIMESTAMP_TYPES[(self.attributes >> 3) & 1]

    @property
    def transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def control(self) -> bool:
        return bool(self.attributes & 0x20)

    @property
    def delete_horizon(self) -> bool:
        return bool(self.attributes & 0x40)

    @property
    def crc_ok(self) -> bool:
        return self.crc == self.computed_crc

    def sequence(self, offset_delta: int) -> int | None:
        """A record's sequence number: the base sequence plus its delta, wrapping at 2**31."""
        if self.base_sequence < 0:
            return None
        return (self.base_sequence + offset_delta) % (1 << 31)


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """A message of magic 0 or 1; a wrapper's value is a compressed inner message set."""

    position: int
    size: int
    offset: int  # as on the wire (relative inside a magic 1 wrapper)
    message_size: int
    crc: int
    computed_crc: int
    magic: int
    attributes: int
    timestamp: int | None  # magic 1 only
    key: bytes | None
    value: bytes | None
    key_end: int  # where the key ends (the value's length follows)
    inner: tuple[LegacyMessage, ...]  # a wrapper's messages, positions in `decompressed`
    decompressed: bytes | None
    absolute_offset: int  # resolved as Kafka does for an inner message; else `offset`
    effective_timestamp: int | None  # a LogAppendTime wrapper's time applies to its messages
    notes: tuple[Note, ...]

    @property
    def compression(self) -> str:
        return COMPRESSION_NAMES.get(self.attributes & 0x07, f"unknown ({self.attributes & 0x07})")

    @property
    def timestamp_type(self) -> str | None:
        return None if self.magic == 0 else TIMESTAMP_TYPES[(self.attributes >> 3) & 1]

    @property
    def crc_ok(self) -> bool:
        return self.crc == self.computed_crc

    @property
    def is_wrapper(self) -> bool:
        return self.attributes & 0x07 != 0


@dataclass(frozen=True, slots=True)
class PartialEntry:
    """The last entry, cut short: a fetch response's size limit, or a truncated request."""

    position: int
    size: int
    declared: int | None  # the size the entry says it has, when its size field is there
    notes: tuple[Note, ...]


@dataclass(frozen=True, slots=True)
class BadEntry:
    """Bytes that are not a decodable entry (bad size or magic); decoding stops here."""

    position: int
    size: int
    notes: tuple[Note, ...]


Entry = RecordBatch | LegacyMessage | PartialEntry | BadEntry


@dataclass(frozen=True, slots=True)
class RecordRow:
    """One record, flat: what the `records` table holds."""

    offset: int
    timestamp: int | None
    timestamp_type: str | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    producer_id: int | None
    producer_epoch: int | None
    sequence: int | None
    transactional: bool
    control: str | None
    compression: str
    magic: int
    batch_crc_ok: bool


# -- decoding --------------------------------------------------------------------------


class _Bad(Exception):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


def decode_records(data: bytes, position: int = 0, end: int | None = None, *,
                   max_decompressed: int = MAX_DECOMPRESSED_BYTES) -> tuple[Entry, ...]:
    """Every entry of data[position:end] (positions stay absolute in `data`).

    The answers for the last frame asked about are kept: the fast path checks a
    body's batches and `-V` or JSON then lays the same batches out, decoding once.
    """
    end = len(data) if end is None else end
    key = (position, end, max_decompressed)
    kept = _LAST_FRAME.answers if data is _LAST_FRAME.data else None
    if kept is not None and key in kept:
        return kept[key]
    entries: list[Entry] = []
    pos = position
    while pos < end:
        entry = _entry(data, pos, end, max_decompressed)
        entries.append(entry)
        pos += entry.size
    found = tuple(entries)
    if type(data) is bytes:  # immutable: the answer stays true
        if kept is None:
            _LAST_FRAME.data, kept = data, {}
            _LAST_FRAME.answers = kept
        kept[key] = found
    return found


class _LastFrame:
    """The frame `decode_records` last decoded and its answers, by (position, end, cap)."""

    data: bytes | None = None
    answers: dict[tuple[int, int, int], tuple[Entry, ...]] = {}  # noqa: RUF012 (one per process)


_LAST_FRAME = _LastFrame()


def _entry(data: bytes, pos: int, end: int, cap: int) -> Entry:
    problem = _checked(data, pos, end)
    if problem is not None:
        return problem
    if data[pos + 16] == 2:
        return decode_batch(data, pos, cap)
    return decode_legacy(data, pos, cap)


def _checked(data: bytes, pos: int, end: int) -> PartialEntry | BadEntry | None:
    """What is wrong with the entry at `pos` before it is decoded; None when it fits."""
    left = end - pos
    if left < ENTRY_PREAMBLE:
        declared = _INT32.unpack_from(data, pos + 8)[0] + LOG_OVERHEAD if left >= LOG_OVERHEAD else None
        if declared is not None and declared < ENTRY_PREAMBLE:
            return _bad(pos, end, f"entry size {declared - LOG_OVERHEAD} is too small")
        return _partial(pos, end, declared)
    size = _INT32.unpack_from(data, pos + 8)[0]
    magic = data[pos + 16]
    if magic > 2:
        return _bad(pos, end, f"unknown magic {magic} (0, 1 and 2 exist)")
    smallest = BATCH_HEADER if magic == 2 else _LEGACY_V1.size + 8 if magic == 1 else _LEGACY_V0.size + 8
    if size + LOG_OVERHEAD < smallest:
        return _bad(pos, end, f"magic {magic} entry size {size} is too small "
                              f"(at least {smallest - LOG_OVERHEAD})")
    if size + LOG_OVERHEAD > left:
        return _partial(pos, end, size + LOG_OVERHEAD)
    return None


def _partial(pos: int, end: int, declared: int | None) -> PartialEntry:
    need = "?" if declared is None else declared
    return PartialEntry(pos, end - pos, declared, (chat(PARTIAL_NOTE.format(have=end - pos, need=need), pos, "kafka.records_partial"),))


def relocated(notes: list[Note] | tuple[Note, ...], offset: int) -> tuple[Note, ...]:
    """Notes about decompressed bytes, pinned to the compressed data's place in the frame."""
    return tuple(Note(n.severity, f"{n.message} (at byte {n.offset} of the decompressed data)"
                      if n.offset is not None else n.message, offset, n.id) for n in notes)


def _bad(pos: int, end: int, message: str) -> BadEntry:
    return BadEntry(pos, end - pos, (error(f"records: {message}; the rest is not decoded", pos, "kafka.records_malformed"),))


# -- magic 2 ---------------------------------------------------------------------------


def decode_batch(data: bytes, pos: int, cap: int = MAX_DECOMPRESSED_BYTES) -> RecordBatch:
    """The magic 2 batch at `pos`, whose size the caller has checked fits in `data`."""
    fields = _BATCH.unpack_from(data, pos)
    end = pos + LOG_OVERHEAD + fields[1]
    computed = crc32c(memoryview(data)[pos + BATCH_CRC_FROM:end])
    notes: list[Note] = []
    if computed != fields[4]:
        notes.append(error(f"record batch CRC-32C 0x{fields[4]:08x} does not match the "
                           f"content (0x{computed:08x})", pos + 17, "kafka.crc_mismatch"))
    attributes = fields[5]
    codec = attributes & 0x07
    body, start, stop, decompressed = data, pos + BATCH_HEADER, end, None
    if codec:
        try:
            decompressed = decompress(codec, memoryview(data)[start:end], cap=cap)
            body, start, stop = decompressed, 0, len(decompressed)
        except DecompressionProblem as problem:
            notes.append(warn(f"records not decoded: {problem}", start, "kafka.records_not_decompressed"))
            body, start, stop = b"", 0, 0
    if decompressed is None:
        records, records_end = _batch_records(body, start, stop, fields, notes)
    else:
        inner: list[Note] = []
        records, records_end = _batch_records(body, start, stop, fields, inner)
        notes.extend(relocated(inner, pos + BATCH_HEADER))
    return RecordBatch(
        position=pos, size=end - pos, base_offset=fields[0], batch_length=fields[1],
        partition_leader_epoch=fields[2], magic=fields[3], crc=fields[4], computed_crc=computed,
        attributes=attributes, last_offset_delta=fields[6], base_timestamp=fields[7],
        max_timestamp=fields[8], producer_id=fields[9], producer_epoch=fields[10],
        base_sequence=fields[11], record_count=fields[12], records=records,
        decompressed=decompressed, records_end=records_end, notes=tuple(notes))


def _batch_records(body: bytes, pos: int, end: int, fields: tuple[int, ...],
                   notes: list[Note]) -> tuple[tuple[Record, ...], int]:
    """The records of a batch in body[pos:end]; decoding stops at the first bad one."""
    base_offset, count, attributes = fields[0], fields[12], fields[5]
    log_append = attributes & 0x08
    base_time = fields[8] if log_append else fields[7]  # LogAppendTime: the batch's max time
    control = bool(attributes & 0x20)
    records: list[Record] = []
    if count < 0:
        notes.append(error(f"negative record count {count}", pos, "kafka.records_malformed"))
        return (), pos
    try:
        while pos < end and len(records) < count:
            record = _record(body, pos, end, base_offset, base_time, bool(log_append), control)
            records.append(record)
            pos += record.size
    except _Bad as bad:
        notes.append(error(f"record {len(records)}: {bad.message}", bad.offset, "kafka.records_malformed"))
        return tuple(records), pos
    if len(records) < count:
        notes.append(error(f"record count {count}, but the batch holds {len(records)}", pos,
                           "kafka.records_malformed"))
    elif pos < end:
        notes.append(error(f"{end - pos} bytes after the last of {count} records", pos,
                           "kafka.records_malformed"))
    return tuple(records), pos


def _record(data: bytes, pos: int, end: int, base_offset: int, base_time: int,
            log_append: bool, control: bool) -> Record:
    length, at = _varint(data, pos, end, 5, "record length")
    record_end = at + length
    if length < 6 or record_end > end:  # attributes + 4 one-byte varints at the least
        raise _Bad(f"record length {length} does not fit the {end - at} bytes left", pos)
    bounds = [at]
    attributes = data[at]
    bounds.append(at + 1)
    timestamp_delta, at = _varint(data, at + 1, record_end, 10, "timestamp delta")
    bounds.append(at)
    offset_delta, at = _varint(data, at, record_end, 5, "offset delta")
    bounds.append(at)
    key_length, key, at = _varbytes(data, at, record_end, bounds, "key")
    value_length, value, at = _varbytes(data, at, record_end, bounds, "value")
    count, at = _varint(data, at, record_end, 5, "header count")
    bounds.append(at)
    headers = _headers(data, at, record_end, count)
    stop = headers[-1].bounds[3] if headers else at
    if stop != record_end:
        raise _Bad(f"record declares {length} bytes but its fields take {stop - bounds[0]}", pos)
    timestamp = base_time if log_append else base_time + timestamp_delta
    return Record(pos, length, attributes, timestamp_delta, offset_delta, key_length, key,
                  value_length, value, headers, tuple(bounds), base_offset + offset_delta,
                  timestamp, _control(key, value, pos) if control else None)


def _varbytes(data: bytes, pos: int, end: int, bounds: list[int], what: str
              ) -> tuple[int, bytes | None, int]:
    length, at = _varint(data, pos, end, 5, f"{what} length")
    bounds.append(at)
    if length < -1:
        raise _Bad(f"{what} length {length} is negative", pos)
    if length == -1:
        bounds.append(at)
        return length, None, at
    if at + length > end:
        raise _Bad(f"{what} of {length} bytes runs past the record ({end - at} left)", pos)
    bounds.append(at + length)
    return length, bytes(data[at:at + length]), at + length


def _headers(data: bytes, pos: int, end: int, count: int) -> tuple[RecordHeader, ...]:
    if count < 0 or 2 * count > end - pos:
        raise _Bad(f"header count {count} does not fit the {end - pos} bytes left", pos)
    headers = []
    for _ in range(count):
        bounds: list[int] = []
        key_length, key, at = _varbytes(data, pos, end, bounds, "header key")
        value_length, value, at = _varbytes(data, at, end, bounds, "header value")
        if key is None:
            raise _Bad("header key is null", pos)
        text = key.decode("utf-8", "replace")
        headers.append(RecordHeader(text, value, pos, (bounds[0], bounds[1], bounds[2], bounds[3]),
                                    key_length, value_length))
        pos = at
    return tuple(headers)


def _control(key: bytes | None, value: bytes | None, pos: int) -> ControlRecord:
    if key is None or len(key) < _CONTROL_KEY.size:
        raise _Bad("control record key is not version int16 + type int16", pos)
    version, kind = _CONTROL_KEY.unpack_from(key)
    if value is None or len(value) < _CONTROL_VALUE.size:
        return ControlRecord(version, kind, None, None)
    value_version, epoch = _CONTROL_VALUE.unpack_from(value)
    return ControlRecord(version, kind, value_version, epoch)


def zigzag_varint(data: bytes, pos: int, end: int, width: int) -> tuple[int, int]:
    """A zigzag varint of at most `width` bytes (5: int32, 10: int64) within data[:end]:
    (value, end); (0, -1) when it runs past `end` or is longer than `width`."""
    if pos < end:
        byte = data[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
    raw = shift = 0
    for at in range(pos, min(pos + width, end)):
        byte = data[at]
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), at + 1
        shift += 7
    return 0, -1


def _varint(data: bytes, pos: int, end: int, width: int, what: str) -> tuple[int, int]:
    """`zigzag_varint`, or the reason it has no value."""
    value, at = zigzag_varint(data, pos, end, width)
    if at >= 0:
        return value, at
    if pos + width > end:
        raise _Bad(f"{what}: varint runs past the end", pos)
    raise _Bad(f"{what}: varint longer than {width} bytes", pos)


# -- magic 0 and 1 ---------------------------------------------------------------------


def decode_legacy(data: bytes, pos: int, cap: int = MAX_DECOMPRESSED_BYTES, *,
                  unwrap: bool = True) -> LegacyMessage:
    """The legacy message at `pos`, whose size the caller has checked fits in `data`.

    A wrapper's inner set is decompressed and decoded when `unwrap` (inner
    messages are never unwrapped: Kafka forbids nested compression).
    """
    magic = data[pos + 16]
    header = _LEGACY_V1 if magic == 1 else _LEGACY_V0
    offset, size, crc, _, attributes, *rest = header.unpack_from(data, pos)
    end = pos + LOG_OVERHEAD + size
    computed = zlib.crc32(memoryview(data)[pos + 16:end])
    notes: list[Note] = []
    if computed != crc:
        notes.append(error(f"message CRC32 0x{crc:08x} does not match the content (0x{computed:08x})",
                           pos + LOG_OVERHEAD, "kafka.crc_mismatch"))
    at = pos + header.size
    try:
        key, at = _legacy_bytes(data, at, end, "key")
        key_end = at
        value, at = _legacy_bytes(data, at, end, "value")
        if at != end:
            notes.append(error(f"{end - at} bytes after the message's value", at, "kafka.records_malformed"))
    except _Bad as bad:
        notes.append(error(bad.message, bad.offset, "kafka.records_malformed"))
        key, value, key_end = None, None, at
    timestamp = rest[0] if rest else None
    message = LegacyMessage(pos, end - pos, offset, size, crc, computed, magic, attributes,
                            timestamp, key, value, key_end, (), None, offset, timestamp, tuple(notes))
    if unwrap and attributes & 0x07 and value is not None:
        return _unwrap(message, cap)
    return message


def _legacy_bytes(data: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise _Bad(f"message {what} length runs past the message", pos)
    length = _INT32.unpack_from(data, pos)[0]
    if length < -1 or pos + 4 + length > end:
        raise _Bad(f"message {what} length {length} does not fit the {end - pos - 4} bytes left", pos)
    if length == -1:
        return None, pos + 4
    return bytes(data[pos + 4:pos + 4 + length]), pos + 4 + length


def _unwrap(wrapper: LegacyMessage, cap: int) -> LegacyMessage:
    """A wrapper with its inner message set decompressed and decoded."""
    notes = list(wrapper.notes)
    assert wrapper.value is not None
    try:
        inner_bytes = decompress(wrapper.attributes & 0x07, wrapper.value, cap=cap, legacy=True)
    except DecompressionProblem as problem:
        notes.append(warn(f"inner messages not decoded: {problem}", wrapper.key_end,
                          "kafka.records_not_decompressed"))
        return _replace(wrapper, notes=tuple(notes))
    inner = tuple(_inner_notes_relocated(m, wrapper.key_end)
                  for m in _inner_messages(inner_bytes, wrapper, notes, cap))
    return _replace(wrapper, inner=inner, decompressed=inner_bytes, notes=tuple(notes))


def _inner_messages(data: bytes, wrapper: LegacyMessage, notes: list[Note], cap: int
                    ) -> tuple[LegacyMessage, ...]:
    messages: list[LegacyMessage] = []
    pos = 0
    while pos < len(data):
        entry = _checked(data, pos, len(data))
        if entry is None and data[pos + 16] < 2:
            message = decode_legacy(data, pos, cap, unwrap=False)
            if message.is_wrapper:
                notes.append(error("inner message is itself compressed (Kafka forbids it); "
                                   "its value is shown undecompressed", wrapper.key_end,
                                   "kafka.records_malformed"))
            messages.append(message)
            pos += message.size
            continue
        problems = entry.notes if entry is not None else (
            error("inner message set holds a record batch of magic 2", pos, "kafka.records_malformed"),)
        notes.extend(Note(n.severity, f"inner message set: {n.message}"
                          f" (at byte {n.offset} of the decompressed data)", wrapper.key_end, n.id)
                     for n in problems)
        break
    last = messages[-1].offset if messages else 0
    return tuple(_resolve_inner(message, wrapper, last) for message in messages)


def _inner_notes_relocated(message: LegacyMessage, offset: int) -> LegacyMessage:
    return _replace(message, notes=relocated(message.notes, offset)) if message.notes else message


def _resolve_inner(message: LegacyMessage, wrapper: LegacyMessage, last_inner: int) -> LegacyMessage:
    """Absolute offset and timestamp of an inner message, as Kafka's consumer computes them."""
    absolute = message.offset
    base = wrapper.offset - last_inner
    if wrapper.magic >= 1 and base >= 0:  # magic 1: relative to the wrapper's (last) offset
        absolute = base + message.offset
    timestamp = message.timestamp
    if wrapper.magic == 1 and wrapper.attributes & 0x08:
        timestamp = wrapper.timestamp
    return _replace(message, absolute_offset=absolute, effective_timestamp=timestamp)


def _replace(message: LegacyMessage, **changes: object) -> LegacyMessage:
    return dataclasses.replace(message, **changes)  # type: ignore[arg-type]


# -- flat rows -------------------------------------------------------------------------


def record_rows(entries: tuple[Entry, ...]) -> Iterator[RecordRow]:
    """One row per record of every decoded entry, in wire order."""
    for entry in entries:
        if isinstance(entry, RecordBatch):
            yield from _batch_rows(entry)
        elif isinstance(entry, LegacyMessage):
            yield from _legacy_rows(entry)


def _batch_rows(batch: RecordBatch) -> Iterator[RecordRow]:
    producer_id = None if batch.producer_id < 0 else batch.producer_id
    epoch = None if batch.producer_epoch < 0 else batch.producer_epoch
    kind, transactional = batch.timestamp_type, batch.transactional
    compression, crc_ok = batch.compression, batch.crc_ok
    for record in batch.records:
        yield RecordRow(
            record.offset, record.timestamp, kind, record.key, record.value,
            tuple((h.key, h.value) for h in record.headers), producer_id, epoch,
            batch.sequence(record.offset_delta), transactional,
            None if record.control is None else record.control.name, compression, 2, crc_ok)


def _legacy_rows(message: LegacyMessage) -> Iterator[RecordRow]:
    for inner in (message.inner if message.is_wrapper else (message,)):
        yield RecordRow(inner.absolute_offset, inner.effective_timestamp, message.timestamp_type,
                        inner.key, inner.value, (), None, None, None, False, None,
                        message.compression, message.magic, message.crc_ok and inner.crc_ok)


def entries_records(entries: tuple[Entry, ...]) -> tuple[int, int]:
    """(records, bytes of their keys and values) in decoded entries: for summaries."""
    count = size = 0
    for row in record_rows(entries):
        count += 1
        size += len(row.key or b"") + len(row.value or b"")
    return count, size


__all__ = [
    "MAX_DECOMPRESSED_BYTES",
    "BadEntry",
    "ControlRecord",
    "Entry",
    "LegacyMessage",
    "PartialEntry",
    "Record",
    "RecordBatch",
    "RecordHeader",
    "RecordRow",
    "crc32c",
    "decode_batch",
    "decode_legacy",
    "decode_records",
    "entries_records",
    "record_rows",
    "zigzag_varint",
]
