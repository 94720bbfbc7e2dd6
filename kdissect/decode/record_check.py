"""Whether a `records` field decodes without a single note, answered without decoding it.

The fast path takes a body only when its record batches decode cleanly (see
`generated.check_records`): the interpreter's notes on them (a CRC mismatch,
data that does not decompress, a record cut short) must not be lost. Building
every `Record` to learn that nothing is wrong costs more than the rest of the
body. `records_clean` checks the same conditions as `records.decode_records`,
in the same order, without building anything: CRCs, decompression, and a walk
over each record's varints. It answers exactly as `decode_records` would
(a test compares them on real and damaged batches); legacy message sets (magic
0 and 1), rare and cheap, are decoded as usual.

The walk over a batch's records (`_records_clean`), and over a field's record batches
(`_entries_clean` but for legacy message sets, calling back for CRCs and decompression),
are also in C (`_record_check_c`), used where it is built unless KDISSECT_PURE=1
(`native`): the same answers, which a test compares.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from kdissect.decode.compression import DecompressionProblem, decompress
from kdissect.decode.records import (
    _BATCH,
    BATCH_CRC_FROM,
    BATCH_HEADER,
    LOG_OVERHEAD,
    LegacyMessage,
    _checked,
    crc32c,
    decode_legacy,
    zigzag_varint,
)
from kdissect.native import PURE, native_or

_CONTROL_KEY_SIZE = 4  # version int16 + type int16


def records_clean(data: bytes, start: int, end: int, cap: int) -> bool:
    """Whether `decode_records(data, start, end, max_decompressed=cap)` gives no entry a note."""
    if _native_entries is not None:
        clean = _native_entries(data, start, end, cap)
        if clean is not None:
            return clean
    return _entries_clean(data, start, end, cap)


def _entries_clean(data: bytes, start: int, end: int, cap: int) -> bool:
    """`records_clean` in Python: the C (`entries_clean`) leaves it legacy message sets."""
    pos = start
    while pos < end:
        if _checked(data, pos, end) is not None:  # cut short or malformed: always a note
            return False
        if data[pos + 16] == 2:
            if not _batch_clean(data, pos, cap):
                return False
        elif not _legacy_clean(decode_legacy(data, pos, cap)):
            return False
        pos += LOG_OVERHEAD + int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
    return True


def _legacy_clean(message: LegacyMessage) -> bool:
    return not message.notes and all(not inner.notes for inner in message.inner)


def _batch_clean(data: bytes, pos: int, cap: int) -> bool:
    """`records.decode_batch` without a note, for a batch `_checked` found to fit."""
    fields = _BATCH.unpack_from(data, pos)
    end = pos + LOG_OVERHEAD + fields[1]
    if crc32c(memoryview(data)[pos + BATCH_CRC_FROM:end]) != fields[4]:
        return False
    count, control = fields[12], bool(fields[5] & 0x20)
    if count < 0:
        return False
    codec = fields[5] & 0x07
    if not codec:
        return _walk(data, pos + BATCH_HEADER, end, count, control)
    body = _decompressed(data, pos + BATCH_HEADER, end, codec, cap)
    return body is not None and _walk(body, 0, len(body), count, control)


def _decompressed(data: bytes, start: int, end: int, codec: int, cap: int) -> bytes | None:
    """The records decompressed from data[start:end], kept for `decompressed`; None where they
    do not decompress (a note)."""
    try:
        body = decompress(codec, memoryview(data)[start:end], cap=cap)
    except DecompressionProblem:
        return None
    if _frame[0] is not data:
        _frame[0] = data
        _bodies.clear()
    _bodies[start] = body
    return body


# The records of the last frame's compressed batches, by where their data starts: the -V
# writer, which reads a frame right after its check, need not decompress them again.
_frame: list[bytes | None] = [None]
_bodies: dict[int, bytes] = {}


def decompressed(data: bytes, start: int) -> bytes | None:
    """The records decompressed from the batch data at `start` of `data`, when the last frame
    checked was `data` and a batch's data began there; None otherwise."""
    return _bodies.get(start) if _frame[0] is data else None


def _records_clean(data: bytes, pos: int, end: int, count: int, control: bool) -> bool:
    """`records._batch_records` without a note: `count` records exactly filling data[pos:end]."""
    done = 0
    while pos < end and done < count:
        pos = _record_end(data, pos, end, control)
        if pos < 0:
            return False
        done += 1
    return done == count and pos == end


def _record_end(data: bytes, pos: int, end: int, control: bool) -> int:
    """Where the record at `pos` ends when `records._record` reads it without complaint; -1 else.

    Varints of one byte (most) are read in line; the others by `zigzag_varint`."""
    byte = data[pos] if pos < end else 0x80
    length, at = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else zigzag_varint(data, pos, end, 5)
    if at < 0:
        return -1
    record_end = at + length
    if length < 6 or record_end > end:
        return -1
    at += 1  # attributes
    byte = data[at]  # within the record: it is 6 bytes or more
    at = at + 1 if byte < 0x80 else zigzag_varint(data, at, record_end, 10)[1]  # timestamp delta
    if at < 0:
        return -1
    byte = data[at] if at < record_end else 0x80
    at = at + 1 if byte < 0x80 else zigzag_varint(data, at, record_end, 5)[1]  # offset delta
    if at < 0:
        return -1
    key_length, at = _bytes_end(data, at, record_end)
    if at < 0 or (control and (key_length < _CONTROL_KEY_SIZE)):
        return -1
    _, at = _bytes_end(data, at, record_end)  # the value
    if at < 0:
        return -1
    byte = data[at] if at < record_end else 0x80
    headers, at = ((byte >> 1) ^ -(byte & 1), at + 1) if byte < 0x80 else zigzag_varint(data, at, record_end, 5)
    if at < 0 or headers < 0 or 2 * headers > record_end - at:
        return -1
    for _ in range(headers):
        key_length, at = _bytes_end(data, at, record_end)
        if at < 0 or key_length < 0:  # a header key may not be null
            return -1
        _, at = _bytes_end(data, at, record_end)
        if at < 0:
            return -1
    return record_end if at == record_end else -1


def _bytes_end(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(length, end) of varint-length bytes (-1: null); (0, -1) where `records._varbytes` objects."""
    byte = data[pos] if pos < end else 0x80
    length, at = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else zigzag_varint(data, pos, end, 5)
    if at < 0 or length < -1:
        return 0, -1
    if length == -1:
        return -1, at
    if at + length > end:
        return 0, -1
    return length, at + length


# the walk over a batch's records `_batch_clean` takes: in C where it is built (`kdissect.native`)
_walk = native_or("kdissect.decode._record_check_c", "records_clean", _records_clean)


def _native_entries_clean() -> Callable[[bytes, int, int, int], bool | None] | None:
    """`_entries_clean` in C (`_record_check_c.entries_clean`: None where it meets a legacy
    message set), where it is built and KDISSECT_PURE is not set (`native`); else None."""
    if PURE:
        return None
    try:
        from kdissect.decode import _record_check_c
    except ImportError:
        return None
    return configured(_record_check_c)


def configured(native: ModuleType) -> Callable[[bytes, int, int, int], bool | None]:
    """`entries_clean` of the C module `native`, given the Python it calls back into."""
    native.configure(crc32c, _decompressed)
    entries_clean: Callable[[bytes, int, int, int], bool | None] = native.entries_clean
    return entries_clean


_native_entries = _native_entries_clean()

__all__ = ["decompressed", "records_clean"]
