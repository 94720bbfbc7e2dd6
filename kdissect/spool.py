"""Output bytes a worker process made, handed to the merging process in shared memory.

With `--jobs`, each worker makes the whole text (or JSON) of its messages; the merging
process writes them, in capture order, each after what only it knows (the message's
number). Sent through a pipe, every byte of that text is copied five times (pickled,
into the pipe, out of it, unpickled, joined) and the merging process spends as much CPU
receiving it as on the rest of its work. Instead each worker copies its text once into
a ring of memory it shares with the merging process (`Ring`: anonymous shared memory,
made before the workers are forked), and sends only where each text lies; the merging
process writes the text to its output straight from there (`SpooledOutput`: one
`os.writev` for many messages, its own bytes between them), and says how far it has
written (`Ring.written`), which frees that part of the ring for the worker.

A worker never waits for room: a text that does not fit (the merging process is behind,
as when pairing holds messages back, or the text is longer than the ring) is sent as
bytes through the pipe, as before. So the memory is the rings', fixed, plus what the
pipe path holds.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from collections.abc import Iterable
from typing import IO, Any

from kdissect.native import native_or

RING_BYTES = 128 * 1024 * 1024  # the workers' rings together (2 jobs: about what the parent reads ahead)
HEADER_BYTES = 64  # before the ring: how far the merging process has written out


def rings(jobs: int, least: int = 0) -> list[Ring] | None:
    """A ring for each of `jobs` workers, `RING_BYTES` together, each for texts of at least
    `least` bytes; None if there is no memory for them (the text then goes through the pipes)."""
    try:
        return [Ring(RING_BYTES // jobs, least) for _ in range(jobs)]
    except (OSError, ValueError):
        return None


class Ring:
    """A worker's text ring. Offsets are logical (they only grow); a text lies whole
    at its offset modulo the size. Made in the merging process before the worker is
    forked: both see the same memory. A text shorter than `least` is not worth a place in
    it: it goes with its event (`put_lines` leaves it to the caller)."""

    def __init__(self, size: int, least: int = 0) -> None:
        self.size, self.least = size, least
        self.memory = mmap.mmap(-1, HEADER_BYTES + size)  # MAP_SHARED: shared with forked children
        # An aligned 8-byte word, stored and loaded whole: the worker may read an older
        # value than the merging process just stored, never a torn one.
        self.written = ctypes.c_int64.from_buffer(self.memory)
        self.view = memoryview(self.memory)[HEADER_BYTES:]
        self.end = 0  # in the worker: where its next text goes

    def __reduce__(self) -> Any:
        raise TypeError("a Ring is shared with forked workers only")

    def put_lines(self, lines: list[str]) -> tuple[int, int] | None:
        """In the worker: `"\n".join(lines)` copied into the ring as it is joined, and where
        it lies (offset, length); None when it is not ASCII, shorter than `least`, or the
        ring has no room for it now (the caller then joins it itself)."""
        placed = _place_lines(self.memory, HEADER_BYTES, self.end, lines, self.least)
        if placed is not None:
            self.end = placed[0] + placed[1]
        return placed

    def put(self, text: bytes | str) -> tuple[int, int] | bytes:
        """In the worker: `text` (bytes, or a str of ASCII characters only, which are its
        bytes) copied into the ring, and where it lies (offset, length); or its bytes when
        the ring has no room for it now."""
        start = _place(self.memory, HEADER_BYTES, self.end, text)
        if start < 0:
            return text if isinstance(text, bytes) else text.encode("ascii")
        length = len(text)
        self.end = start + length
        return start, length


def place(memory: Any, header: int, end: int, text: bytes | str) -> int:
    """Where the ring in `memory` (`header` bytes, the first eight how far the merging process
    has written it out, then the ring) puts `text` (bytes, or a str of ASCII characters only)
    when its next text goes at logical offset `end`, and `text` copied there; -1, and nothing
    copied, when it has no room for it now. A text lies whole: one that would pass the
    ring's end starts the next turn. The reference of `_spool_c.place` (`Ring.put`)."""
    if isinstance(text, str) and not text.isascii():
        raise ValueError("a text is bytes, or a str of ASCII characters")
    size, length = len(memory) - header, len(text)
    start = end
    at = start % size
    if at + length > size:
        start += size - at
        at = 0
    if start + length - ctypes.c_int64.from_buffer(memory).value > size:
        return -1
    _put(memoryview(memory)[header:], at, text)
    return start


def place_lines(memory: Any, header: int, end: int, lines: list[str], least: int) -> tuple[int, int] | None:
    """As `place`, the text `"\n".join(lines)`, when `lines` is a list of ASCII strs whose
    text has at least `least` characters: where it lies (offset, length); else, or when the
    ring has no room for it now, None, and nothing copied. The reference of
    `_spool_c.place_lines`, which joins it straight into the ring (the text of a -V message
    is some twenty lines: a str of them, joined first, is a copy of it that this saves)."""
    if type(lines) is not list or not all(isinstance(line, str) and line.isascii() for line in lines):
        return None
    text = "\n".join(lines)
    if len(text) < least:
        return None
    start = place(memory, header, end, text)
    return None if start < 0 else (start, len(text))


def put(memory: Any, at: int, text: bytes | str) -> None:
    """`text` (bytes, or a str of ASCII characters only) copied into the writable buffer
    `memory` at `at`: the reference of `_spool_c.put`, which copies a str without encoding
    it first, past the caches."""
    data = text if isinstance(text, bytes) else text.encode("ascii")
    if at < 0 or at + len(data) > len(memory):
        raise ValueError("a text beyond the ring")
    memory[at:at + len(data)] = data


_put = native_or("kdissect._spool_c", "put", put)
_place = native_or("kdissect._spool_c", "place", place)
_place_lines = native_or("kdissect._spool_c", "place_lines", place_lines)


class Piece:
    """Text a worker put in its ring: `length` bytes at logical offset `start`."""

    __slots__ = ("length", "ring", "start")

    def __init__(self, ring: Ring, start: int, length: int) -> None:
        self.ring, self.start, self.length = ring, start, length

    def read(self) -> bytes:
        """Its bytes, copied out of the ring, which is then the worker's again up to their
        end (the pieces of a ring are written out in the order the worker put them)."""
        ring, start, length = self.ring, self.start, self.length
        at = start % ring.size
        data = bytes(ring.view[at:at + length])
        ring.written.value = start + length
        return data


def number_text(number: int) -> bytes:
    """What the merging process writes before a message's text: its number in the capture,
    as one process writes it."""
    return b"%6d" % number


def read_all(item: Any) -> bytes:
    """The bytes of a worker's text, given as bytes or as a `Piece`."""
    return item if type(item) is bytes else item.read()


IOV_MAX = 1024  # buffers one writev takes (POSIX's least IOV_MAX is 16; Linux's 1024)


class SpooledOutput:
    """Writes bytes and `Piece`s, in order, to a binary output: with `os.writev` on its
    file descriptor, straight from the rings, else copied and joined."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.writev = None
        try:
            out.fileno()
        except (AttributeError, OSError, ValueError):
            return
        self.writev = getattr(os, "writev", None)

    def write(self, items: Iterable[bytes | Piece]) -> None:
        """`items` written, after what was written to the output before."""
        out, writev = self.out, self.writev
        if writev is None:
            out.write(b"".join([read_all(item) for item in items]))
            return
        out.flush()  # what was written before, first
        write_items(out.fileno(), items, writev)


def write_items(fd: int, items: Iterable[bytes | Piece], writev: Any = None) -> None:
    """`items` (bytes and `Piece`s) written in order to file descriptor `fd`, straight from
    the rings, IOV_MAX at a time (with `writev`, `os.writev` by default); each ring then
    marked written up to its last piece's end."""
    writev = writev or os.writev
    buffers: list[Any] = []
    append = buffers.append
    total = 0  # the bytes in `buffers`
    ends: dict[Ring, int] = {}  # how far each ring is written out
    for item in items:
        if type(item) is bytes:
            append(item)
            total += len(item)
        else:
            ring, start, length = item.ring, item.start, item.length  # type: ignore[union-attr]
            at = start % ring.size
            append(ring.view[at:at + length])
            total += length
            ends[ring] = start + length
        if len(buffers) == IOV_MAX:
            _write_all(writev, fd, buffers, total)
            buffers, total = [], 0
            append = buffers.append
    if buffers:
        _write_all(writev, fd, buffers, total)
    for ring, end in ends.items():
        ring.written.value = end


def _write_all(writev: Any, fd: int, buffers: list[Any], left: int) -> None:
    """`buffers`, of `left` bytes together, written whole to `fd` (writev may write
    less: to a pipe, on a signal)."""
    while True:
        sent = writev(fd, buffers)
        left -= sent
        if not left:
            return
        while sent >= len(buffers[0]):  # what went whole
            sent -= len(buffers[0])
            buffers = buffers[1:]
        buffers[0] = memoryview(buffers[0])[sent:]
