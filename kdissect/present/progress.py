"""A progress bar on stderr for long runs, shown only to a human at a terminal."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any, BinaryIO

REFRESH_SECONDS = 0.25
SHOW_AFTER_SECONDS = 1.0  # short runs never flash a bar


class Progress:
    """Wraps a capture stream; `reader` is what the pipeline should read from.

    When stderr is not a terminal (pipes, files, CI) the stream is passed
    through untouched, so there is no cost and no stray output.
    """

    def __init__(self, stream: BinaryIO | None, name: str, total: int = 0) -> None:
        self.stream = stream
        self.reader: Any = stream
        self.shown = False
        if not _wanted():
            return
        self.total = total if stream is None else _size(stream)
        self.name = "stdin" if name == "-" else os.path.basename(name)
        self.started = self.last = time.monotonic()
        self.done = 0
        if stream is not None:
            self.reader = _CountingReader(stream, self)

    @classmethod
    def of_bytes(cls, name: str, total: Callable[[], int]) -> Progress | None:
        """A bar for a capture read elsewhere (by worker processes), moved on by `reach`:
        `total()` bytes (0: not known, asked only for a bar); None when no bar is wanted."""
        return cls(None, name, total()) if _wanted() else None

    def reach(self, done: int) -> None:
        """`done` bytes of the capture are read."""
        self.advance(done - self.done)

    def advance(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if now - self.last < REFRESH_SECONDS or now - self.started < SHOW_AFTER_SECONDS:
            return
        self.last = now
        self.shown = True
        sys.stderr.write("\r" + self._line(now))
        sys.stderr.flush()

    def _line(self, now: float) -> str:
        rate = self.done / max(now - self.started, 1e-9) / 1e6
        mib = self.done / (1 << 20)
        if not self.total:
            return f"{self.name}: {mib:.1f} MiB read, {rate:.1f} MB/s "
        fraction = min(self.done / self.total, 1.0)
        bar = "#" * int(fraction * 30)
        return f"{self.name}: [{bar:<30}] {fraction:6.1%} {mib:.1f} MiB {rate:.1f} MB/s "

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


class _CountingReader:
    def __init__(self, stream: BinaryIO, progress: Progress) -> None:
        self._stream, self._progress = stream, progress

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._progress.advance(len(data))
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _wanted() -> bool:
    return sys.stderr.isatty() and not os.environ.get("CI")


def _size(stream: BinaryIO) -> int:
    try:
        return os.fstat(stream.fileno()).st_size
    except (OSError, ValueError, AttributeError):
        return 0
