"""Bounded decompression of Kafka's record codecs: gzip, snappy, lz4 and zstd.

One maintained library, cramjam, does the work for all four. Every call is
bounded: the output buffer never grows past `cap` bytes, nor past
`MAX_RATIO` times the compressed size (more than deflate can reach; only a
stream built to expand, such as a zstd run of repeated blocks, goes further).
A stream that would exceed the bound raises `DecompressionProblem` as soon as
the buffer is full, so a compression bomb costs a bounded amount of memory and
time; corrupt or truncated data raises it too, with the codec's reason.

Kafka's framings on top of the codecs:

- snappy: Java clients write the xerial framing (a 16-byte header, then
  int32-length-prefixed raw snappy blocks); others write one raw block.
- lz4: the LZ4 frame format; Kafka before 0.10 (message format magic 0)
  computed the frame descriptor's header checksum over the magic number too.
  For legacy message sets the checksum is recomputed before decoding, so both
  the wrong and the right one are accepted.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable

import cramjam

COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
MAX_RATIO = 1100  # decompressed bytes per compressed byte, at most
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = 16  # magic, int32 version, int32 compatible version
LZ4_MAGIC = b"\x04\x22\x4d\x18"
_FIRST_BUFFER = 64 << 10
_INT32 = struct.Struct(">i")
_FULL = ("failed to write whole buffer", "smaller than required")


class DecompressionProblem(Exception):
    """The data could not be decompressed within the bound, or is corrupt or truncated."""


def decompress(codec: int, data: bytes | memoryview, *, cap: int, legacy: bool = False) -> bytes:
    """The decompressed bytes of `data` in Kafka's codec `codec` (1 gzip ... 4 zstd)."""
    limit = min(cap, MAX_RATIO * len(data))
    raw = bytes(data)
    if codec == 1:
        return _bounded(cramjam.gzip.decompress_into, raw, limit, "gzip", cap)
    if codec == 2:
        return _snappy(raw, limit, cap)
    if codec == 3:
        return _bounded(cramjam.lz4.decompress_into, fix_lz4_header(raw) if legacy else raw,
                        limit, "lz4", cap)
    if codec == 4:
        return _bounded(cramjam.zstd.decompress_into, raw, limit, "zstd", cap)
    raise DecompressionProblem(f"unknown compression codec {codec}")


def _bounded(into: Callable[[bytes, memoryview], int], data: bytes, limit: int, name: str,
             cap: int) -> bytes:
    """Decompress into a buffer grown fourfold from a guess, never past `limit`."""
    size = min(limit, max(_FIRST_BUFFER, 8 * len(data)))
    while True:
        out = _scratch(size)
        try:
            used = into(data, out)
        except cramjam.DecompressionError as problem:
            if not any(text in str(problem) for text in _FULL):
                raise DecompressionProblem(f"corrupt or truncated {name} data: {problem}") from None
            if size >= limit:
                raise _too_big(name, len(data), limit, cap) from None
            size = min(limit, size * 4)
            continue
        return bytes(out[:used])


_SCRATCH_BYTES = 4 << 20  # buffers up to this size are kept for the next batch
_scratches = threading.local()  # one per thread: Dask's threads decode side by side


def _scratch(size: int) -> memoryview:
    """`size` bytes to decompress into. A new bytearray is zeroed, which for these
    buffers (most batches decompress to a few KiB of a 64 KiB guess) cost more than the
    decompression; so one buffer per thread is reused, and only its first `size` bytes
    are offered, which keeps the codec within the same bound."""
    if size > _SCRATCH_BYTES:
        return memoryview(bytearray(size))
    buffer: bytearray | None = getattr(_scratches, "buffer", None)
    if buffer is None or len(buffer) < size:
        buffer = _scratches.buffer = bytearray(max(size, _FIRST_BUFFER))
    return memoryview(buffer)[:size]


def _too_big(name: str, size: int, limit: int, cap: int) -> DecompressionProblem:
    why = f"the cap of {cap} bytes" if limit == cap else f"{MAX_RATIO} times its size"
    return DecompressionProblem(f"{size} bytes of {name} data decompress to more than {limit} "
                                f"bytes ({why}): a compression bomb, or raise the cap")


def _snappy(data: bytes, limit: int, cap: int) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_block(data, limit, cap)
    if len(data) < XERIAL_HEADER:
        raise DecompressionProblem(f"xerial snappy header cut short: {len(data)} of 16 bytes")
    parts, pos, total = [], XERIAL_HEADER, 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise DecompressionProblem("xerial snappy block length cut short")
        length = _INT32.unpack_from(data, pos)[0]
        if length < 0 or pos + 4 + length > len(data):
            raise DecompressionProblem(f"xerial snappy block of {length} bytes does not fit the "
                                       f"{len(data) - pos - 4} bytes left")
        part = _snappy_block(data[pos + 4:pos + 4 + length], limit - total, cap)
        parts.append(part)
        total += len(part)
        pos += 4 + length
    return b"".join(parts)


def _snappy_block(data: bytes, limit: int, cap: int) -> bytes:
    """One raw snappy block, its declared length checked before anything is allocated."""
    try:
        length = cramjam.snappy.decompress_raw_len(data)
        if length > limit:
            raise _too_big("snappy", len(data), limit, cap)
        out = _scratch(length)
        used = cramjam.snappy.decompress_raw_into(data, out)
    except cramjam.DecompressionError as problem:
        raise DecompressionProblem(f"corrupt or truncated snappy data: {problem}") from None
    return bytes(out[:used])


def fix_lz4_header(data: bytes) -> bytes:
    """An LZ4 frame with its header checksum recomputed (Kafka magic 0 wrote a wrong one)."""
    if not data.startswith(LZ4_MAGIC) or len(data) < 7:
        return data
    flags = data[4]
    checksum_at = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    if len(data) <= checksum_at:
        return data
    checksum = (xxh32(data[4:checksum_at]) >> 8) & 0xFF
    return data[:checksum_at] + bytes((checksum,)) + data[checksum_at + 1:]


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_MASK = 0xFFFFFFFF


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of fewer than 16 bytes (an LZ4 frame descriptor is at most 14)."""
    if len(data) >= 16:
        raise ValueError("xxh32 here covers inputs shorter than 16 bytes only")
    value = (seed + _P5 + len(data)) & _MASK
    pos = 0
    while pos + 4 <= len(data):
        lane = int.from_bytes(data[pos:pos + 4], "little")
        value = (_rotate((value + lane * _P3) & _MASK, 17) * _P4) & _MASK
        pos += 4
    for byte in data[pos:]:
        value = (_rotate((value + byte * _P5) & _MASK, 11) * _P1) & _MASK
    value = ((value ^ (value >> 15)) * _P2) & _MASK
    value = ((value ^ (value >> 13)) * _P3) & _MASK
    return value ^ (value >> 16)


def _rotate(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


__all__ = ["COMPRESSION_NAMES", "MAX_RATIO", "DecompressionProblem", "decompress", "fix_lz4_header", "xxh32"]
