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
    (b"\x28\xb5\x2f\xfd", "zstd"),
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
    match kind:
        case "gzip":
            inner: Any = gzip.GzipFile(fileobj=stream, mode="rb")
        case "bzip2":
            inner = bz2.BZ2File(stream, mode="rb")
        case "xz":
            inner = lzma.LZMAFile(stream, mode="rb")  # noqa: SIM115
        case "zstd":
            import zstandard  # only zstd captures need it

            inner = zstandard.ZstdDecompressor().stream_reader(stream, read_across_frames=True)
        case _:
            raise ValueError(f"unknown compression {kind!r}")
    return Decompressed(inner, kind, report)


class Decompressed:
    """Reads decompressed bytes; corruption or a cut becomes one note and the end of input."""

    def __init__(self, inner: Any, kind: str, report: Report) -> None:
        self.inner, self.kind, self.report = inner, kind, report
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
        return data

    def _stop(self, problem: BaseException) -> bytes:
        self.ended = True
        self.report(warn(f"{self.kind}-compressed capture is cut short or corrupt "
                         f"({problem or type(problem).__name__}); the rest cannot be read", id="pcap.cut_short"))
        return b""

    def close(self) -> None:
        self.inner.close()
