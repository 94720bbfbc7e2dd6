"""Compressed captures (gzip, bzip2, xz, zstd), recognised by content and read as a stream.

`tcpdump -z gzip` and log shippers leave captures compressed. They are recognised
by their first bytes, never by their names, and decompressed while they are read:
nothing is copied to disk, and a pipe works as well as a file. A compressed file
that is cut short or corrupt ends the capture there with one note, like a capture
file that is cut short.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
from collections.abc import Callable
from typing import Any

from kdissect.notes import Note, warn

Report = Callable[[Note], None]

# The first bytes of each compressed format, and its name in messages.
MAGICS: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (ZSTD_MAGIC := b"\x28\xb5\x2f\xfd", "zstd"),
)


def compression_of(head: bytes) -> str | None:
    """The compression format whose magic starts `head` (at least 4 bytes), or None.

    Four bytes decide: no capture format starts like these, and xz's six-byte
    magic is already unmistakable after four.
    """
    for magic, name in MAGICS:
        if head[:len(magic)] == magic[:len(head)]:
            return name
    return None


def decompressing(stream: Any, kind: str, report: Report) -> Decompressed:
    """A reader of the decompressed bytes of `stream` (positioned at its first byte)."""
    # The readers outlive this function: Decompressed.close() closes them.
    frames = None
    match kind:
        case "gzip":
            inner: Any = gzip.GzipFile(fileobj=stream, mode="rb")
        case "bzip2":
            inner = bz2.BZ2File(stream, mode="rb")
        case "xz":
            inner = lzma.LZMAFile(stream, mode="rb")  # noqa: SIM115
        case "zstd":
            import zstandard  # only zstd captures need it

            frames = ZstdFrames(stream)
            source: Any = frames  # a file to the reader, which asks only `read` of it
            inner = zstandard.ZstdDecompressor().stream_reader(source, read_across_frames=True)
        case _:
            raise ValueError(f"unknown compression {kind!r}")
    return Decompressed(inner, kind, report, frames)


class Decompressed:
    """Reads decompressed bytes; corruption or a cut becomes one note and the end of input."""

    def __init__(self, inner: Any, kind: str, report: Report, frames: ZstdFrames | None = None) -> None:
        self.inner, self.kind, self.report = inner, kind, report
        self.frames = frames  # zstd's, followed: its reader ends a cut frame without a word
        self.ended = False

    def read(self, size: int = -1, /) -> bytes:
        if self.ended:
            return b""
        try:
            data: bytes = self.inner.read(size)
        except (OSError, EOFError, lzma.LZMAError, ValueError) as problem:
            return self._stop(problem)
        except Exception as problem:  # zstandard.ZstdError, which needs no import here
            if type(problem).__name__ != "ZstdError":
                raise
            return self._stop(problem)
        if not data and size and self.frames is not None and not self.frames.whole():
            return self._stop(EOFError("the input ends inside a frame"))
        return data

    def _stop(self, problem: BaseException) -> bytes:
        self.ended = True
        self.report(warn(f"{self.kind}-compressed capture is cut short or corrupt "
                         f"({problem or type(problem).__name__}); the rest cannot be read", id="pcap.cut_short"))
        return b""

    def close(self) -> None:
        self.inner.close()


class ZstdFrames:
    """A zstd stream as its decompressor reads it, followed frame by frame through the
    headers alone (a block's bytes are passed over, never decoded), so that where the
    input ends says whether its last frame was whole.

    python-zstandard's stream reader ends quietly when its input stops inside a frame: a
    cut file would read as shorter and whole. Following the frames costs a few steps a
    block (a block holds up to 128 KiB).
    """

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.state = "magic"  # what the next header is: magic, descriptor, skippable, block
        self.need = 4  # its size
        self.pending = b""  # its bytes so far
        self.skip = 0  # bytes to pass over before it (a header's rest, a block, a checksum)
        self.checksum = False  # the frame ends with a 4-byte checksum
        self.lost = False  # bytes no frame format explains: the decompressor says what is wrong

    def read(self, size: int = -1, /) -> bytes:
        data: bytes = self.stream.read(size)
        if not self.lost:
            self._follow(memoryview(data))
        return data

    def whole(self) -> bool:
        """Whether what was read so far ends where a frame ends."""
        return self.lost or (self.state == "magic" and not self.pending and not self.skip)

    def _follow(self, data: memoryview) -> None:
        at, end = 0, len(data)
        while at < end and not self.lost:
            if self.skip:
                passed = min(self.skip, end - at)
                self.skip -= passed
                at += passed
                continue
            taken = min(self.need - len(self.pending), end - at)
            self.pending += data[at:at + taken].tobytes()
            at += taken
            if len(self.pending) == self.need:
                header, self.pending = int.from_bytes(self.pending, "little"), b""
                self._header(header)

    def _header(self, value: int) -> None:
        if self.state == "magic":
            if value == FRAME_MAGIC:
                self.state, self.need = "descriptor", 1
            elif value & ~0xF == SKIPPABLE_MAGIC:
                self.state, self.need = "skippable", 4
            else:
                self.lost = True
        elif self.state == "skippable":
            self.skip, self.state, self.need = value, "magic", 4
        elif self.state == "descriptor":
            single_segment = value >> 5 & 1
            self.checksum = bool(value & 4)
            self.skip = ((0 if single_segment else 1)  # the window descriptor
                         + (0, 1, 2, 4)[value & 3]  # the dictionary id
                         + (single_segment, 2, 4, 8)[value >> 6])  # the content size
            self.state, self.need = "block", 3
        else:  # a block header: last-block bit, type (raw, RLE, compressed, reserved), size
            kind, size = value >> 1 & 3, value >> 3
            if kind == 3:
                self.lost = True
                return
            self.skip = 1 if kind == 1 else size
            if value & 1:
                self.skip += 4 if self.checksum else 0
                self.state, self.need = "magic", 4


FRAME_MAGIC = int.from_bytes(ZSTD_MAGIC, "little")
SKIPPABLE_MAGIC = 0x184D2A50  # 0x184D2A50 to 0x184D2A5F
