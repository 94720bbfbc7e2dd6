"""Stage 3: TCP reassembly, per connection and per direction.

Each direction of a connection is a `TcpStream`: it turns segments, in whatever
order the capture holds them, into in-order byte chunks at known stream offsets,
and into explicit gap events for bytes that never arrive (lost segments, a snap
length that cut a packet, an out-of-order buffer that overflowed). Nothing is
zero-filled: a consumer always knows which bytes it did not see.

Sequence numbers are compared with 32-bit serial arithmetic relative to the
next expected byte, so a stream may wrap past 2^32 (or run past 4 GiB) freely.

Bytes that the peer acknowledges but the capture never showed are declared
lost as soon as the acknowledgement is seen (Wireshark's "ACKed segment that
wasn't captured"), so frames after a loss are not held back until the end.

`ConnectionTracker` follows the lifecycle: a SYN opens a connection (a SYN on a
4-tuple that already carried data opens a new one), FIN from both sides or a
RST closes it; a connection first seen in the middle (no SYN) starts at its
first data byte. On close and at the end of the capture, out-of-order data held
behind a hole is delivered after an explicit gap. Closed connections are
released at once, so memory follows the number of open connections only.

The consumer of the events is a `ConnectionHandler` (framing.py's Kafka layer,
or `reassemble()` below, which turns them into plain `Chunk`/`Gap` objects).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from kdissect.ingest.net import ACK, FIN, RST, SYN, Address, RawSegment, Segment
from kdissect.notes import Note, chat, warn

MASK, HALF = 0xFFFFFFFF, 0x80000000
MAX_PENDING_BYTES = 4 * 1024 * 1024  # out-of-order bytes held per direction before a gap is declared
MAX_PENDING_SEGMENTS = 4096
RECENT_SEGMENTS = 32  # delivered payloads kept to compare retransmissions against
RECENTLY_CLOSED = 4096  # closed 4-tuples remembered, so their stray packets open nothing

LOST = "segments lost (never captured)"
OVERFLOW = "segments lost (out-of-order buffer full)"
SNAPLEN = "cut by the snap length"
ACKED = "segments lost (acknowledged, never captured)"

FlowKey = tuple[bytes, int, bytes, int]  # src ip, src port, dst ip, dst port


class StreamSink(Protocol):
    """What one direction's stream tells its consumer."""

    def data(self, offset: int, payload: bytes, number: int, timestamp: float,
             notes: tuple[Note, ...]) -> None: ...

    def gap(self, offset: int, size: int, number: int, timestamp: float, reason: str) -> None: ...

    def duplicate(self, offset: int, size: int, number: int, differs: bool) -> None: ...


class ConnectionHandler(Protocol):
    """The consumer of one connection: a sink per side (side 0 is the address seen first)."""

    def sinks(self) -> tuple[StreamSink, StreamSink]: ...

    def close(self) -> None: ...


class TcpStream:
    """One direction of a TCP connection, delivering its bytes in order, exactly once."""

    __slots__ = ("base", "fin_offset", "from_start", "offset", "pending", "pending_bytes",
                 "recent", "sink")

    def __init__(self, sink: StreamSink) -> None:
        self.sink = sink  # a consumer may replace it at any time
        self.base: int | None = None  # sequence number of stream offset 0
        self.from_start = False  # offset 0 is the first byte after the SYN
        self.offset = 0  # stream offset of the next byte to deliver
        self.pending: list[tuple[int, bytes, int, int, float]] = []  # heap: offset, payload, missing, packet, time
        self.pending_bytes = 0
        self.recent: deque[tuple[int, bytes]] = deque(maxlen=RECENT_SEGMENTS)
        self.fin_offset: int | None = None

    def start(self, isn: int) -> None:
        """The stream's first byte is the one after sequence number `isn` (its SYN)."""
        if self.base is None or (self.offset == 0 and not self.pending):
            self.base, self.from_start = (isn + 1) & MASK, True

    def segment(self, seq: int, payload: bytes, missing: int, number: int, timestamp: float) -> None:
        if self.base is None:  # first seen in the middle: start at this byte
            self.base = seq
        offset = self.offset
        distance = ((seq - self.base - offset + HALF) & MASK) - HALF
        if distance == 0 and not self.pending and not missing:  # the usual case, inlined
            self.recent.append((offset, payload))
            self.offset = offset + len(payload)
            self.sink.data(offset, payload, number, timestamp, ())
        elif distance == 0 and not self.pending:
            self._deliver(payload, missing, number, timestamp, ())
        elif distance > 0:
            self._hold(self.offset + distance, payload, missing, number, timestamp)
        else:
            self._accept(distance, payload, missing, number, timestamp)
            self._drain()

    def fin(self, seq: int) -> None:
        if self.base is None:
            self.base = seq
        distance = ((seq - self.base - self.offset + HALF) & MASK) - HALF
        self.fin_offset = self.offset + distance

    def acknowledged(self, ack: int, number: int, timestamp: float) -> None:
        """The peer acknowledged up to `ack`: bytes before it that were never seen are lost."""
        if self.base is None:
            return
        end = self.offset + ((ack - self.base - self.offset + HALF) & MASK) - HALF
        if self.fin_offset is not None:
            end = min(end, self.fin_offset)  # the FIN's own sequence number is no data
        if self.pending:
            end = min(end, self.pending[0][0])
        if end > self.offset:
            self.sink.gap(self.offset, end - self.offset, number, timestamp, ACKED)
            self.offset = end
            self._drain()

    def flush(self) -> None:
        """Deliver everything held, each hole before it as a gap (the end of the capture)."""
        while self.pending:
            self._skip_to_pending(LOST)

    def _hold(self, offset: int, payload: bytes, missing: int, number: int, timestamp: float) -> None:
        heapq.heappush(self.pending, (offset, payload, missing, number, timestamp))
        self.pending_bytes += len(payload)
        while self.pending and (self.pending_bytes > MAX_PENDING_BYTES
                                or len(self.pending) > MAX_PENDING_SEGMENTS):
            self._skip_to_pending(OVERFLOW)

    def _skip_to_pending(self, reason: str) -> None:
        offset, _payload, _missing, number, timestamp = self.pending[0]
        if offset > self.offset:
            self.sink.gap(self.offset, offset - self.offset, number, timestamp, reason)
            self.offset = offset
        self._drain()

    def _drain(self) -> None:
        pending = self.pending
        while pending and pending[0][0] <= self.offset:
            offset, payload, missing, number, timestamp = heapq.heappop(pending)
            self.pending_bytes -= len(payload)
            self._accept(offset - self.offset, payload, missing, number, timestamp)

    def _accept(self, distance: int, payload: bytes, missing: int, number: int,
                timestamp: float) -> None:
        """A segment starting `distance` (<= 0) bytes before the next expected byte."""
        if distance + len(payload) + missing <= 0:
            if payload or missing:
                differs = self._differs(self.offset + distance, payload)
                self.sink.duplicate(self.offset + distance, len(payload) + missing,
                                       number, differs)
            return
        notes: tuple[Note, ...] = ()
        if distance < 0:
            overlap = -distance
            notes = (self._overlap_note(overlap, payload[:overlap]),)
            if overlap <= len(payload):
                payload = payload[overlap:]
            else:
                missing -= overlap - len(payload)
                payload = b""
        self._deliver(payload, missing, number, timestamp, notes)

    def _overlap_note(self, overlap: int, old: bytes) -> Note:
        if self._differs(self.offset - overlap, old):
            return warn(f"{overlap} retransmitted bytes differ from the first copy (first copy kept)")
        return chat(f"{overlap} bytes retransmitted (delivered once)")

    def _deliver(self, payload: bytes, missing: int, number: int, timestamp: float,
                 notes: tuple[Note, ...]) -> None:
        if payload:
            offset = self.offset
            self.recent.append((offset, payload))
            self.offset = offset + len(payload)
            self.sink.data(offset, payload, number, timestamp, notes)
        if missing:
            self.sink.gap(self.offset, missing, number, timestamp, SNAPLEN)
            self.offset += missing

    def _differs(self, offset: int, data: bytes) -> bool:
        """Whether `data` at stream `offset` contradicts recently delivered bytes."""
        end = offset + len(data)
        for start, payload in self.recent:
            low, high = max(start, offset), min(start + len(payload), end)
            if low < high and payload[low - start:high - start] != data[low - offset:high - offset]:
                return True
        return False


class TcpConnection:
    """Both directions of one TCP connection; side 0 is the address whose packet came first."""

    __slots__ = ("addresses", "handler", "streams", "syn_sender")

    def __init__(self, first: Address, second: Address, syn_sender: int | None) -> None:
        self.addresses = (first, second)
        self.syn_sender = syn_sender  # side that sent the SYN (the client), when seen
        self.handler: ConnectionHandler | None = None
        self.streams: tuple[TcpStream, TcpStream] | None = None

    def attach(self, handler: ConnectionHandler) -> None:
        self.handler = handler
        first, second = handler.sinks()
        self.streams = (TcpStream(first), TcpStream(second))

    def opened(self) -> bool:
        """Whether any byte has been seen (a repeated SYN then starts a new connection)."""
        return self.streams is not None and any(
            stream.offset or stream.pending for stream in self.streams)

    def finished(self) -> bool:
        return self.streams is not None and all(
            stream.fin_offset is not None and stream.offset >= stream.fin_offset
            for stream in self.streams)


Opener = Callable[[TcpConnection], ConnectionHandler | None]


class ConnectionTracker:
    """All TCP connections of a capture: finds each segment's stream and keeps the lifecycle.

    `open_connection` is asked once per new connection for its handler; None means
    "not interesting": the connection's packets are then dropped at the cost of one
    dictionary lookup.
    """

    def __init__(self, open_connection: Opener) -> None:
        self.open_connection = open_connection
        self.table: dict[FlowKey, tuple[TcpConnection, int]] = {}
        self.closed: OrderedDict[FlowKey, None] = OrderedDict()

    def segment(self, number: int, timestamp: float, raw: RawSegment) -> None:
        src, src_port, dst, dst_port, seq, ack, flags, payload, missing = raw
        entry = self.table.get((src, src_port, dst, dst_port))
        if entry is None or flags & (SYN | FIN | RST):
            self._control(number, timestamp, raw, entry)
            return
        connection, side = entry
        streams = connection.streams
        if streams is None:
            return
        if payload or missing:
            streams[side].segment(seq, payload, missing, number, timestamp)
        peer = streams[1 - side]
        base = peer.base
        if base is not None and flags & ACK and 0 < (ack - base - peer.offset) & MASK < HALF:
            peer.acknowledged(ack, number, timestamp)  # acks bytes never seen

    def finish(self) -> None:
        """The end of the capture: every connection still open is flushed and closed."""
        for connection in list({id(c): c for c, _side in self.table.values()}.values()):
            self._close(connection)

    def _control(self, number: int, timestamp: float, raw: RawSegment,
                 entry: tuple[TcpConnection, int] | None) -> None:
        src, src_port, dst, dst_port, seq, ack, flags, payload, missing = raw
        if flags & RST:
            if entry is not None:
                self._close(entry[0])
            return
        if flags & SYN:
            entry = self._syn(raw, entry)
            seq = (seq + 1) & MASK
        elif entry is None:
            if not (payload or missing) or (src, src_port, dst, dst_port) in self.closed:
                return
            entry = self._open((src, src_port), (dst, dst_port), None), 0
        connection, side = entry
        if connection.streams is None:  # not interesting: forget it when it ends
            if flags & FIN:
                self._close(connection)
            return
        streams = connection.streams  # the handler may drop them (not Kafka) as it reads
        if payload or missing:
            streams[side].segment(seq, payload, missing, number, timestamp)
        if flags & ACK and not flags & SYN:
            streams[1 - side].acknowledged(ack, number, timestamp)
        if flags & FIN:
            streams[side].fin((seq + len(payload) + missing) & MASK)
            if connection.streams is None or connection.finished():
                self._close(connection)

    def _syn(self, raw: RawSegment, entry: tuple[TcpConnection, int] | None) -> tuple[TcpConnection, int]:
        src, src_port, dst, dst_port, seq, ack, flags, _payload, _missing = raw
        if entry is not None and flags & ACK == 0 and (entry[0].opened() or entry[0].streams is None):
            self._close(entry[0])  # the 4-tuple is reused by a new connection
            entry = None
        if entry is None:
            client_first = flags & ACK == 0
            connection = self._open((src, src_port), (dst, dst_port), 0 if client_first else 1)
            entry = connection, 0
        connection, side = entry
        if connection.streams is not None:
            connection.streams[side].start(seq)
            client_stream = connection.streams[1 - side]
            if flags & ACK and client_stream.base is None:  # SYN missed: the SYN+ACK acks it
                client_stream.start((ack - 1) & MASK)
        return entry

    def _open(self, first: Address, second: Address, syn_sender: int | None) -> TcpConnection:
        connection = TcpConnection(first, second, syn_sender)
        handler = self.open_connection(connection)
        if handler is not None:
            connection.attach(handler)
        forward: FlowKey = (*first, *second)
        backward: FlowKey = (*second, *first)
        self.table[forward] = (connection, 0)
        self.table[backward] = (connection, 1)
        self.closed.pop(forward, None)
        self.closed.pop(backward, None)
        return connection

    def _close(self, connection: TcpConnection) -> None:
        first, second = connection.addresses
        for key in ((*first, *second), (*second, *first)):
            if self.table.get(key, (None, 0))[0] is connection:
                del self.table[key]
            self.closed[key] = None
        while len(self.closed) > RECENTLY_CLOSED:
            self.closed.popitem(last=False)
        if connection.streams is not None and connection.handler is not None:
            for stream in connection.streams:
                stream.flush()
            connection.handler.close()
            connection.streams = None


# --- plain-data form, for tests and for anyone who wants the byte streams ---

@dataclass(frozen=True, slots=True)
class Chunk:
    """In-order bytes of one direction: `data` starts at `offset` of the direction's stream."""

    src: Address
    dst: Address
    offset: int
    data: bytes
    packet_number: int
    timestamp: float
    notes: tuple[Note, ...] = ()


@dataclass(frozen=True, slots=True)
class Gap:
    """`size` bytes at `offset` of the direction's stream were never seen."""

    src: Address
    dst: Address
    offset: int
    size: int
    packet_number: int
    timestamp: float
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


class _SideCollector:
    def __init__(self, src: Address, dst: Address, events: list[StreamEvent]) -> None:
        self.src, self.dst, self.events = src, dst, events

    def data(self, offset: int, payload: bytes, number: int, timestamp: float,
             notes: tuple[Note, ...]) -> None:
        self.events.append(Chunk(self.src, self.dst, offset, payload, number, timestamp, notes))

    def gap(self, offset: int, size: int, number: int, timestamp: float, reason: str) -> None:
        self.events.append(Gap(self.src, self.dst, offset, size, number, timestamp, reason))

    def duplicate(self, offset: int, size: int, number: int, differs: bool) -> None:
        self.events.append(Duplicate(self.src, self.dst, offset, size, number, differs))


def reassemble(segments: Iterable[Segment]) -> Iterator[StreamEvent]:
    """Every connection's byte streams as plain events, in the order they become known."""
    events: list[StreamEvent] = []
    tracker = ConnectionTracker(lambda connection: _Collector(connection, events))
    for segment in segments:
        raw = (*segment.src, *segment.dst, segment.seq, segment.ack, segment.flags,
               segment.payload, segment.missing)
        tracker.segment(segment.packet_number, segment.timestamp, raw)
        yield from events
        events.clear()
    tracker.finish()
    yield from events
