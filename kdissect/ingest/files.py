"""Several capture files read as one capture: a rotated set, merged by packet time.

`tcpdump -C/-G/-W` cuts one capture into files. Read together, their packets are
merged by timestamp (ties keep the order the files were given) and numbered as one
capture, so a connection that runs across files continues with no false gap and
numbering runs on. `PacketOrigins` answers which file a packet number came from,
keeping one entry per change of file rather than one per packet.

Every file is opened (and checked to be a capture) before the first packet is
merged; a file that is not readable is reported through `unreadable` and left out,
and the others are still read.
"""

from __future__ import annotations

import bisect
import heapq
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import BinaryIO

from kdissect.ingest.capture import CaptureError, CaptureRecord, Report, read_records

CaptureSource = str | os.PathLike[str] | BinaryIO
MAX_RUNS = 1 << 16  # file changes remembered; the oldest half goes when more pile up


class PacketOrigins:
    """Which file each packet number came from: one (first packet number, file) run per change."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self._starts: list[int] = []
        self._files: list[int] = []

    def add(self, number: int, file: int) -> None:
        if not self._files or self._files[-1] != file:
            if len(self._starts) >= MAX_RUNS:  # messages only ask about recent packets
                del self._starts[:MAX_RUNS // 2], self._files[:MAX_RUNS // 2]
            self._starts.append(number)
            self._files.append(file)

    def name_of(self, number: int) -> str | None:
        """The name of the file packet `number` came from (None when no longer known)."""
        if len(self.names) == 1:
            return self.names[0]
        where = bisect.bisect_right(self._starts, number) - 1
        return None if where < 0 else self.names[self._files[where]]


def source_name(source: CaptureSource) -> str:
    """How a source is named in output: its path, the name of an open file, "standard
    input", or "stream" for a stream without a name (an `io.BytesIO`)."""
    if isinstance(source, str | os.PathLike):
        return os.fspath(source)
    name = getattr(source, "name", None)
    if name == "<stdin>" or source is getattr(sys.stdin, "buffer", None):
        return "standard input"
    return name if isinstance(name, str) else "stream"


def merged_records(sources: Sequence[CaptureSource], origins: PacketOrigins,
                   report: Report | None = None,
                   unreadable: Callable[[int, CaptureError], None] | None = None,
                   ) -> Iterator[CaptureRecord]:
    """The records of every source as one capture: merged by time, numbered from 1.

    With one source this is that source's records (and origins name it). Raises
    CaptureError (on the first iteration) when a source is unreadable and no
    `unreadable` handler is given.
    """
    if len(sources) == 1:
        return read_records(sources[0], report)  # as read, with no generator of ours between
    return _merged(sources, origins, report, unreadable)


def _merged(sources: Sequence[CaptureSource], origins: PacketOrigins, report: Report | None,
            unreadable: Callable[[int, CaptureError], None] | None) -> Iterator[CaptureRecord]:
    streams = []
    for index, source in enumerate(sources):
        records = read_records(source, _naming(origins.names[index], report))
        try:
            first = next(records, None)
        except CaptureError as problem:
            if unreadable is None:
                raise CaptureError(named(source_name(source), problem)) from None
            unreadable(index, problem)
            continue
        if first is not None:
            streams.append(_tagged(first, records, index))
    merged = heapq.merge(*streams, key=_merge_key)
    for number, (_timestamp, index, record) in enumerate(merged, 1):
        origins.add(number, index)
        yield (number, *record[1:])


def named(name: str, problem: object) -> str:
    """What went wrong with capture file `name`, said with its name once (an error opening
    it names it already)."""
    said = str(problem)
    return said if said.startswith(f"{name}: ") else f"{name}: {said}"


def _naming(name: str, report: Report | None) -> Report | None:
    """Capture-level notes of one file of a set say which file they are about."""
    if report is None:
        return None
    return lambda note: report(replace(note, message=f"{name}: {note.message}"))


def _tagged(first: CaptureRecord, rest: Iterator[CaptureRecord], index: int
            ) -> Iterator[tuple[float, int, CaptureRecord]]:
    yield first[1], index, first
    for record in rest:
        yield record[1], index, record


def _merge_key(item: tuple[float, int, CaptureRecord]) -> tuple[float, int]:
    return item[0], item[1]
