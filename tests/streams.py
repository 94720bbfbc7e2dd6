"""Reassembly as plain data, for tests: every connection's byte streams as events.

`reassemble(segments)` runs the real `ConnectionTracker` over `Segment`s and turns
what its sinks hear into `Chunk`, `Gap`, `Duplicate` and `Closed` values.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kdissect.ingest.net import Address, Segment
from kdissect.ingest.reassembly import ConnectionTracker, HoldLimits, StreamSink, TcpConnection
from kdissect.notes import Note


@dataclass(frozen=True, slots=True)
class Chunk:
    """In-order bytes of one direction: `data` starts at `offset` of the direction's stream."""

    src: Address
    dst: Address
    offset: int
    data: bytes
    packet_number: int
    timestamp: int
    notes: tuple[Note, ...] = ()


@dataclass(frozen=True, slots=True)
class Gap:
    """`size` bytes at `offset` of the direction's stream were never seen."""

    src: Address
    dst: Address
    offset: int
    size: int
    packet_number: int
    timestamp: int
    reason: str


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A retransmission of bytes already delivered (dropped)."""

    src: Address
    dst: Address
    offset: int
    size: int
    packet_number: int
    differs: bool


@dataclass(frozen=True, slots=True)
class Closed:
    """A connection ended (FIN from both sides, RST, or the end of the capture)."""

    first: Address
    second: Address


StreamEvent = Chunk | Gap | Duplicate | Closed


class _Collector:
    """Turns one connection's events into plain objects."""

    def __init__(self, connection: TcpConnection, events: list[StreamEvent]) -> None:
        self.addresses, self.events = connection.addresses, events

    def sinks(self) -> tuple[StreamSink, StreamSink]:
        first, second = self.addresses
        return _SideCollector(first, second, self.events), _SideCollector(second, first, self.events)

    def close(self) -> None:
        self.events.append(Closed(*self.addresses))

    def expire(self, now: int) -> None:
        pass  # the streams' holes are the connection's to expire; nothing waits here


class _SideCollector:
    def __init__(self, src: Address, dst: Address, events: list[StreamEvent]) -> None:
        self.src, self.dst, self.events = src, dst, events

    def data(self, offset: int, payload: bytes, number: int, timestamp: int,
             notes: tuple[Note, ...]) -> None:
        self.events.append(Chunk(self.src, self.dst, offset, payload, number, timestamp, notes))

    def gap(self, offset: int, size: int, number: int, timestamp: int, reason: str) -> None:
        self.events.append(Gap(self.src, self.dst, offset, size, number, timestamp, reason))

    def duplicate(self, offset: int, size: int, number: int, differs: bool) -> None:
        self.events.append(Duplicate(self.src, self.dst, offset, size, number, differs))


def reassemble(segments: Iterable[Segment], limits: HoldLimits | None = None) -> Iterator[StreamEvent]:
    """Every connection's byte streams as plain events, in the order they become known."""
    events: list[StreamEvent] = []
    tracker = ConnectionTracker(lambda connection: _Collector(connection, events), limits)
    for segment in segments:
        raw = (*segment.src, *segment.dst, segment.seq, segment.ack, segment.flags,
               segment.payload, segment.missing)
        tracker.segment(segment.packet_number, segment.timestamp, raw)
        yield from events
        events.clear()
    tracker.finish()
    yield from events
