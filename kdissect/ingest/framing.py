"""Stage 4: Kafka's 4-byte size prefix, turning byte streams into frames.

`read_frames` is the whole first half of the pipeline: capture records, TCP
segments, reassembly, then framing. Which connections are Kafka is decided
here (a known port, or the first bytes of a stream), as are the client and
server roles. Each direction of a Kafka connection has a `_Framer` that cuts
its bytes at the size prefixes; after a gap, or when the capture starts in the
middle of a connection, it scans for the next plausible Kafka header instead of
reading garbage as sizes (resynchronisation).
"""

from __future__ import annotations

import enum
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, BinaryIO

from kdissect.ingest.capture import Record, read_records
from kdissect.ingest.detect import (
    REQUEST_HEADER_LENGTH,
    RESPONSE_HEADER_LENGTH,
    looks_like_tls,
    plausible_request,
    request_candidates,
    response_candidates,
    response_header,
)
from kdissect.ingest.net import (
    Address,
    decode_tcp,
    format_address,
    supported_linktype,
    unsupported_linktype_note,
)
from kdissect.ingest.reassembly import ConnectionTracker, TcpConnection
from kdissect.notes import Note, chat, error, warn

if TYPE_CHECKING:
    from kdissect.ingest.tls import KeyLog, TlsLayer

DEFAULT_PORTS = (9092,)
MAX_FRAME_SIZE = 100 * 1024 * 1024
RESYNC_WAIT = 256 * 1024  # bytes a resynchronisation candidate may wait for its confirmation
HOLD_LIMIT = 64 * 1024  # bytes held per connection while deciding whether it is Kafka
MAX_IN_FLIGHT = 1024  # correlation ids remembered per connection for resynchronisation
CORRELATION_STEP = 64  # how far apart consecutive responses' correlation ids may plausibly be

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
Report = Callable[[Note], None]


class Direction(enum.Enum):
    REQUEST = "request"  # client to broker
    RESPONSE = "response"  # broker to client

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Connection:
    index: int  # 0-based, in order of first appearance (like tshark's tcp.stream)
    client: Address
    server: Address
    tls: bool = False  # the bytes were decrypted from TLS records

    def __str__(self) -> str:
        return f"{format_address(self.client)} -> {format_address(self.server)}"


# Not frozen only because a frozen dataclass costs a microsecond more to build
# and every Kafka message makes one; treat frames as immutable all the same.
@dataclass(slots=True, eq=False)
class Frame:
    connection: Connection
    direction: Direction
    stream_offset: int  # where the size prefix starts in this direction's byte stream
    data: bytes  # the whole frame, size prefix included (a prefix of it if incomplete)
    first_packet: int
    first_time: float
    last_packet: int
    last_time: float
    complete: bool = True  # False when the frame straddles a gap or the capture's end
    notes: tuple[Note, ...] = ()


def read_frames(source: str | os.PathLike[str] | BinaryIO, *,
                ports: Iterable[int] = DEFAULT_PORTS, detect: bool = True,
                max_frame_size: int = MAX_FRAME_SIZE,
                report: Report | None = None, tls_keys: KeyLog | None = None) -> Iterator[Frame]:
    """Every Kafka frame of a capture, in the capture order of each frame's last packet.

    A frame's first/last packet are the lowest/highest numbered packets that carried
    its bytes (the last one completed it). Connections are numbered 0, 1, 2... in
    the order their first Kafka bytes appear. Two kinds of frames come out later
    than their last packet: a response found by resynchronisation whose request is
    not in the capture (it waits for the next response to confirm it), and frames
    held behind a hole in the stream until the hole is known to be lost (the peer
    acknowledges the missing bytes, the connection ends, or the out-of-order buffer
    fills). Raises CaptureError, on the first iteration, only when the source is
    not a readable capture at all; other problems become notes on the frames or go
    to `report`.
    """
    records = read_records(source, report)
    return frames_from_records(records, ports=ports, detect=detect,
                               max_frame_size=max_frame_size, report=report, tls_keys=tls_keys)


def frames_from_records(records: Iterable[Record], *, ports: Iterable[int] = DEFAULT_PORTS,
                        detect: bool = True, max_frame_size: int = MAX_FRAME_SIZE,
                        report: Report | None = None,
                        tls_keys: KeyLog | None = None) -> Iterator[Frame]:
    """read_frames over records already read (number, timestamp, linktype, data, length).

    With `tls_keys`, TLS connections are decrypted and Kafka is looked for in the plaintext.
    """
    context = _Context(frozenset(ports), detect, max_frame_size, report or _ignore)
    context.tls_keys = tls_keys
    tracker = ConnectionTracker(context.open_connection)
    out = context.out
    segment = tracker.segment
    for number, timestamp, linktype, data, original_length in records:
        raw = decode_tcp(linktype, data, original_length)
        if raw is None:
            context.check_linktype(linktype)
            continue
        segment(number, timestamp, raw)
        if out:
            yield from out
            out.clear()
    tracker.finish()
    yield from out
    out.clear()


def _ignore(_note: Note) -> None:
    pass


class _Context:
    """What every connection of one read shares: settings, numbering, the output queue."""

    def __init__(self, ports: frozenset[int], detect: bool, max_frame_size: int,
                 report: Report) -> None:
        self.ports, self.detect, self.report = ports, detect, report
        self.max_frame_size = max_frame_size
        self.out: list[Frame] = []
        self.next_index = 0
        self.linktypes_seen: set[int] = set()
        self.request_candidates = request_candidates(max_frame_size)
        self.response_candidates = response_candidates(max_frame_size)
        self.tls_keys: KeyLog | None = None
        self.tls_sessions: dict[bytes, bytes] = {}  # TLS 1.2 session id -> master secret

    def open_connection(self, tcp: TcpConnection) -> _KafkaConnection | None:
        (_ip0, port0), (_ip1, port1) = tcp.addresses
        on_port = (port0 in self.ports, port1 in self.ports)
        if not (self.detect or any(on_port)):
            return None
        return _KafkaConnection(self, tcp, on_port)

    def new_connection(self, client: Address, server: Address, tls: bool = False) -> Connection:
        self.next_index += 1
        return Connection(self.next_index - 1, client, server, tls)

    def check_linktype(self, linktype: int) -> None:
        if linktype not in self.linktypes_seen:
            self.linktypes_seen.add(linktype)
            if not supported_linktype(linktype):
                self.report(unsupported_linktype_note(linktype))


class _Verdict(enum.Enum):
    WAIT = "wait"
    KAFKA = "kafka"
    OTHER = "other"
    TLS = "tls"


class _KafkaConnection:
    """A TCP connection that may be Kafka: decides, then frames both directions."""

    def __init__(self, context: _Context, tcp: TcpConnection | TlsLayer,
                 on_port: tuple[bool, bool], tls: bool = False) -> None:
        self.context, self.tcp, self.on_port, self.tls = context, tcp, on_port, tls
        self.decrypted: tuple[TlsLayer, _KafkaConnection] | None = None
        self.verdict = _Verdict.WAIT
        self.heads = (bytearray(), bytearray())  # first bytes of each direction, for the decision
        self.head_closed = [False, False]  # a gap came before enough bytes
        self.held: list[tuple[str, int, tuple]] = []  # events kept until the decision
        self.held_bytes = 0
        self.framers: list[_Framer] = []
        self.in_flight: dict[int, None] = {}  # correlation ids of requests not yet answered

    # --- events from reassembly, until the decision (then the framers get them directly) ---

    def sinks(self) -> tuple[_Undecided, _Undecided]:
        return _Undecided(self, 0), _Undecided(self, 1)

    def data(self, side: int, offset: int, payload: bytes, number: int, timestamp: float,
             notes: tuple[Note, ...]) -> None:
        if self.verdict is _Verdict.WAIT:
            self._hold("data", side, (offset, payload, number, timestamp, notes), len(payload))
            head = self.heads[side]
            if not self.head_closed[side] and len(head) < REQUEST_HEADER_LENGTH:
                head += payload[:REQUEST_HEADER_LENGTH - len(head)]
            self._decide(final=False)

    def gap(self, side: int, offset: int, size: int, number: int, timestamp: float,
            reason: str) -> None:
        if self.verdict is _Verdict.WAIT:
            self._hold("gap", side, (offset, size, number, timestamp, reason), 0)
            self.head_closed[side] = True
            self._decide(final=False)

    def close(self) -> None:
        if self.verdict is _Verdict.WAIT and self.held:
            self._decide(final=True)
        if self.verdict is _Verdict.KAFKA:
            for framer in self.framers:
                framer.finish()
        if self.decrypted is not None:
            self.decrypted[1].close()
            self.decrypted[0].close()
        self.held.clear()

    # --- deciding ---

    def _hold(self, kind: str, side: int, event: tuple, size: int) -> None:
        self.held.append((kind, side, event))
        self.held_bytes += size

    def _decide(self, *, final: bool) -> None:
        final = final or self.held_bytes > HOLD_LIMIT
        verdict, client = self._classify(final)
        if verdict is _Verdict.WAIT and final:
            verdict = _Verdict.OTHER
        self.verdict = verdict
        if verdict is _Verdict.TLS and self.context.tls_keys is not None:
            self._decrypt(self.context.tls_keys)
            return
        if verdict is _Verdict.TLS:
            first, second = (format_address(a) for a in self.tcp.addresses)
            self.context.report(warn(f"{first} <-> {second}: TLS, no keys (no key log given)"))
        if verdict is _Verdict.KAFKA and client is not None:
            self._start(client)
        elif verdict is not _Verdict.WAIT:
            self.tcp.streams = None  # not Kafka: reassembly stops, the tracker drops its packets
        if verdict is not _Verdict.WAIT:
            self.held.clear()

    def _classify(self, final: bool) -> tuple[_Verdict, int | None]:
        heads = self.heads
        ready = [len(h) >= REQUEST_HEADER_LENGTH or self.head_closed[i] or final
                 for i, h in enumerate(heads)]
        if not self.tls and (any(self.on_port) or self.context.tls_keys is not None) and any(
                looks_like_tls(head) for head in heads):
            return _Verdict.TLS, None
        if any(self.on_port) and not any(
                len(h) >= 3 or self.head_closed[i] or final for i, h in enumerate(heads)):
            return _Verdict.WAIT, None
        client = self.tcp.syn_sender
        if client is None and self.on_port[0] != self.on_port[1]:
            client = 0 if self.on_port[1] else 1
        if client is None:
            client = _requesting_side(heads, self.context.max_frame_size)
        if any(self.on_port):
            if client is None:
                if not all(ready):
                    return _Verdict.WAIT, None
                client = _higher_port_side(self.tcp.addresses)
            return _Verdict.KAFKA, client
        return self._detected(client, ready)

    def _detected(self, client: int | None, ready: list[bool]) -> tuple[_Verdict, int | None]:
        """Kafka on an unknown port: the client's first bytes must be a request header."""
        if client is None:
            return (_Verdict.OTHER if all(ready) else _Verdict.WAIT), None
        plausible = plausible_request(self.heads[client], 0, self.context.max_frame_size)
        if plausible is None:
            return (_Verdict.OTHER if ready[client] else _Verdict.WAIT), None
        return (_Verdict.KAFKA if plausible else _Verdict.OTHER), client

    def _start(self, client: int) -> None:
        addresses = self.tcp.addresses
        connection = self.context.new_connection(addresses[client], addresses[1 - client],
                                                 self.tls)
        streams = self.tcp.streams
        starts = [bool(streams and streams[side].from_start) for side in (0, 1)]
        self.framers = [
            _Framer(self, connection, Direction.REQUEST if side == client else Direction.RESPONSE,
                    synced=starts[side])
            for side in (0, 1)
        ]
        if streams is not None:
            for side, framer in enumerate(self.framers):
                streams[side].sink = framer
        for kind, side, event in self.held:
            if kind == "data":
                self.framers[side].data(*event)
            else:
                self.framers[side].gap(*event)

    def _decrypt(self, keys: KeyLog) -> None:
        """TLS with a key log: a TLS layer takes the ciphertext, and a connection of its
        own decides on the plaintext whether it is Kafka, then frames it."""
        from kdissect.ingest.tls import TlsLayer

        first, second = (format_address(a) for a in self.tcp.addresses)
        layer = TlsLayer(self.tcp, keys, f"{first} <-> {second}", self.context.report,
                         self.context.tls_sessions, quiet=not any(self.on_port))
        inner = _KafkaConnection(self.context, layer, self.on_port, tls=True)
        for plain, sink in zip(layer.plain_streams, inner.sinks(), strict=True):
            plain.sink = sink
        streams = self.tcp.streams
        if streams is not None:
            for side, reader in enumerate(layer.sinks()):
                streams[side].sink = reader
        self.decrypted = (layer, inner)
        held, self.held = self.held, []
        for kind, side, event in held:
            getattr(layer.sinks()[side], kind)(*event)

    # --- correlation ids, for resynchronising responses ---

    def request_seen(self, correlation_id: int) -> None:
        self.in_flight[correlation_id] = None
        if len(self.in_flight) > MAX_IN_FLIGHT:
            del self.in_flight[next(iter(self.in_flight))]


class _Undecided:
    """One side of a connection not yet known to be Kafka: events go to the connection."""

    def __init__(self, owner: _KafkaConnection, side: int) -> None:
        self.owner, self.side = owner, side

    def data(self, offset: int, payload: bytes, number: int, timestamp: float,
             notes: tuple[Note, ...]) -> None:
        self.owner.data(self.side, offset, payload, number, timestamp, notes)

    def gap(self, offset: int, size: int, number: int, timestamp: float, reason: str) -> None:
        self.owner.gap(self.side, offset, size, number, timestamp, reason)

    def duplicate(self, offset: int, size: int, number: int, differs: bool) -> None:
        pass  # nothing decided yet: nothing to annotate


def _requesting_side(heads: tuple[bytearray, bytearray], max_size: int) -> int | None:
    """The side whose first bytes are a request header.

    A response with a small correlation id also reads as a Produce request (key 0,
    version = the id), so when both sides qualify, the client is the side whose
    correlation id the other side's first bytes answer.
    """
    plausible = [plausible_request(head, 0, max_size) is True for head in heads]
    if plausible[0] != plausible[1]:
        return 0 if plausible[0] else 1
    if not plausible[0]:
        return None
    for side in (0, 1):
        if heads[side][8:12] == heads[1 - side][4:8]:
            return side
    return 0  # the side that spoke first


def _higher_port_side(addresses: tuple[Address, Address]) -> int:
    """Last resort for roles: clients usually have the higher (ephemeral) port."""
    return 0 if addresses[0][1] >= addresses[1][1] else 1


class _Framer:
    """One direction of a Kafka connection: in-order bytes and gaps in, frames out."""

    def __init__(self, owner: _KafkaConnection, connection: Connection, direction: Direction, *,
                 synced: bool) -> None:
        self.owner, self.connection, self.direction = owner, connection, direction
        self.requests = direction is Direction.REQUEST
        self.max_size = owner.context.max_frame_size
        self.out = owner.context.out
        self.buffer = bytearray()
        self.buffer_offset = 0  # stream offset of buffer[0]
        # start, end, packet, time, notes of the buffered bytes, in stream order
        self.chunks: deque[tuple[int, int, int, float, tuple[Note, ...]]] = deque()
        self.synced = synced  # the buffer starts at a frame boundary
        self.skip_to = 0  # bytes before this offset belong to an incomplete frame already yielded
        self.notes: list[Note] = []  # for the next frame
        self.scan = 0  # resynchronisation: buffer position where scanning goes on
        self.skipped = 0  # bytes discarded while resynchronising

    # --- input ---

    def data(self, offset: int, payload: bytes, number: int, timestamp: float,
             notes: tuple[Note, ...]) -> None:
        if offset < self.skip_to:
            cut = self.skip_to - offset
            if cut >= len(payload):
                return
            payload, offset, notes = payload[cut:], self.skip_to, ()
        if self.synced and not self.buffer:
            self._frames_in(offset, payload, number, timestamp, notes)
        else:
            self._append(offset, payload, number, timestamp, notes)
            self._drain()

    def gap(self, offset: int, size: int, number: int, timestamp: float, reason: str) -> None:
        if offset < self.skip_to:
            cut = min(self.skip_to - offset, size)
            offset, size = offset + cut, size - cut
            if not size:
                return
        frame_end = self._frame_end()
        if frame_end is not None:
            where = offset - self.buffer_offset
            self._take(len(self.buffer), complete=False, extra=warn(
                f"{size} bytes missing from offset 0x{where:x} of this frame ({reason}); "
                f"frame incomplete ({frame_end - self.buffer_offset} bytes long)", where))
            if frame_end >= offset + size:  # the next frame starts where this one ends
                self.skip_to = frame_end
                self.buffer_offset = frame_end
                return
        else:
            self.notes.append(warn(f"{size} bytes missing before this frame, at stream offset "
                                   f"{offset} ({reason})"))
        self._lose_sync(offset + size)

    def duplicate(self, offset: int, size: int, number: int, differs: bool) -> None:
        if self.buffer and offset >= self.buffer_offset:
            self.notes.append(chat(f"packet {number}: {size} bytes retransmitted (delivered once)"))
        elif differs:
            self.owner.context.report(warn(
                f"{self.connection} {self.direction}: packet {number} retransmits bytes of an "
                f"earlier frame with different content (first copy kept)"))

    def finish(self) -> None:
        """The connection ended: what is left is an incomplete frame or unframed bytes."""
        if not self.synced and self.buffer and self._resync(final=True):
            self._drain()
        frame_end = self._frame_end()
        if frame_end is not None and self.synced:
            missing = frame_end - self.buffer_offset - len(self.buffer)
            self._take(len(self.buffer), complete=False, extra=warn(
                f"the capture ends {missing} bytes before the end of this frame", len(self.buffer)))
        elif self.buffer:
            self.owner.context.report(warn(
                f"{self.connection} {self.direction}: {len(self.buffer)} bytes at stream offset "
                f"{self.buffer_offset} could not be framed"))

    # --- framing ---

    def _frames_in(self, offset: int, payload: bytes, number: int, timestamp: float,
                   notes: tuple[Note, ...]) -> None:
        """The fast path: frames cut straight from a payload that starts at a frame boundary."""
        position, length = 0, len(payload)
        while length - position >= 4:
            size = _SIZE.unpack_from(payload, position)[0]
            end = position + 4 + size
            if size <= 0 or size > self.max_size or end > length:
                break
            data = payload if end - position == length else payload[position:end]
            if notes or self.notes:
                notes, extra = (), (*self.notes, *notes)
                self.notes.clear()
            else:
                extra = ()
            self._emit(offset + position, data, number, timestamp, number, timestamp, True, extra)
            position = end
        if position < length:
            self._append(offset + position, payload[position:] if position else payload,
                         number, timestamp, notes)
            self._drain()

    def _append(self, offset: int, payload: bytes, number: int, timestamp: float,
                notes: tuple[Note, ...]) -> None:
        if not self.buffer:
            self.buffer_offset = offset
            self.chunks.clear()
        self.buffer += payload
        self.chunks.append((offset, offset + len(payload), number, timestamp, notes))

    def _drain(self) -> None:
        buffer = self.buffer
        while True:
            if not self.synced and not self._resync(final=False):
                return
            if len(buffer) < 4:
                return
            size = _SIZE.unpack_from(buffer, 0)[0]
            if size <= 0 or size > self.max_size:
                self.notes.append(error(f"size prefix {size} at stream offset {self.buffer_offset} "
                                        f"is not a frame size (limit {self.max_size})"))
                self._lose_sync(self.buffer_offset, keep=True)
                self.scan = 1
                continue
            if len(buffer) < 4 + size:
                return
            self._take(4 + size, complete=True)

    def _frame_end(self) -> int | None:
        """Stream offset where the frame being buffered ends, when its size is known."""
        if not self.synced or len(self.buffer) < 4:
            return None
        size = _SIZE.unpack_from(self.buffer, 0)[0]
        return self.buffer_offset + 4 + size if 0 < size <= self.max_size else None

    def _take(self, length: int, *, complete: bool, extra: Note | None = None) -> None:
        """Yield the first `length` buffered bytes as a frame."""
        start, end = self.buffer_offset, self.buffer_offset + length
        notes = list(self.notes)
        self.notes.clear()
        first = last = None
        chunks = self.chunks  # in stream order: only those the frame covers are visited
        while chunks and chunks[0][0] < end:
            chunk = chunks[0]
            chunk_start, chunk_end, number, _timestamp, chunk_notes = chunk
            first = chunk if first is None or number < first[2] else first
            last = chunk if last is None or number > last[2] else last
            if chunk_start >= start:
                notes.extend(replace(n, offset=chunk_start - start) for n in chunk_notes)
            if chunk_end > end:  # runs on into the next frame: kept
                break
            chunks.popleft()
        if extra is not None:
            notes.append(extra)
        data = bytes(self.buffer[:length])
        del self.buffer[:length]
        self.buffer_offset = end
        if first is None or last is None:  # no bytes: nothing to yield
            return
        self._emit(start, data, first[2], first[3], last[2], last[3], complete, tuple(notes))

    def _emit(self, offset: int, data: bytes, first_packet: int, first_time: float,
              last_packet: int, last_time: float, complete: bool, notes: tuple[Note, ...]) -> None:
        if self.requests:
            if len(data) >= 12:
                self.owner.request_seen(_CORRELATION.unpack_from(data, 8)[0])
        elif len(data) >= 8:
            self.owner.in_flight.pop(_CORRELATION.unpack_from(data, 4)[0], None)
        self.out.append(Frame(self.connection, self.direction, offset, data, first_packet,
                              first_time, last_packet, last_time, complete, notes))

    # --- resynchronisation ---

    def _lose_sync(self, offset: int, *, keep: bool = False) -> None:
        """Framing no longer knows where frames start: scan from `offset` (or the buffer)."""
        if not keep:
            self.skipped += len(self.buffer)
            self.buffer.clear()
            self.chunks.clear()
            self.buffer_offset = offset
        self.synced = False
        self.scan = 0

    def _resync(self, *, final: bool) -> bool:
        """Look for the next frame start; True when found (the buffer then starts there).

        Candidates are tried in stream order; one that needs more bytes to be judged
        holds the scan (bytes before it are dropped) until they come or RESYNC_WAIT
        bytes have piled up behind it.
        """
        pattern = (self.owner.context.request_candidates if self.requests
                   else self.owner.context.response_candidates)
        header = REQUEST_HEADER_LENGTH if self.requests else RESPONSE_HEADER_LENGTH
        position = self.scan
        while True:
            match = pattern.search(self.buffer, position)
            if match is None:
                self._discard(max(position, len(self.buffer) - header + 1))
                self.scan = 0
                return False
            position = match.start()
            verdict = self._candidate(position, final)
            if verdict is None:
                self._discard(position)
                self.scan = 0
                return False
            if verdict:
                self._discard(position)
                if self.skipped:
                    self.notes.append(warn(f"resynchronised: skipped {self.skipped} bytes before this frame"))
                self.synced, self.skipped, self.scan = True, 0, 0
                return True
            position += 1

    def _candidate(self, position: int, final: bool) -> bool | None:
        """Whether a frame starts at `position`: True, False, or None (wait for more bytes).

        `final`: no more bytes will come, so a frame that ends exactly where the data
        ends, or a request header that runs past it, is taken.
        """
        final = final or len(self.buffer) - position > RESYNC_WAIT
        if self.requests:
            verdict = self._request_candidate(position)
            return (verdict is not False) if final and plausible_request(
                self.buffer, position, self.max_size) else verdict
        verdict = self._response_candidate(position)
        if verdict is None and final:
            header = response_header(self.buffer, position, self.max_size)
            return header is not None and position + 4 + header[0] == len(self.buffer)
        return verdict

    def _request_candidate(self, position: int) -> bool | None:
        """A plausible request header, followed by another one or by the end of the data."""
        buffer = self.buffer
        plausible = plausible_request(buffer, position, self.max_size)
        if not plausible:
            return plausible
        end = position + 4 + _SIZE.unpack_from(buffer, position)[0]
        if end >= len(buffer):
            return True
        return plausible_request(buffer, end, self.max_size)

    def _response_candidate(self, position: int) -> bool | None:
        """A plausible size whose correlation id a request used, or which is followed by
        a response whose correlation id comes soon after (ids grow per connection)."""
        buffer = self.buffer
        header = response_header(buffer, position, self.max_size)
        if header is None:
            return None if len(buffer) - position < RESPONSE_HEADER_LENGTH else False
        size, correlation_id = header
        end = position + 4 + size
        known = correlation_id in self.owner.in_flight
        if end >= len(buffer):
            return True if known else None
        following = response_header(buffer, end, self.max_size)
        if following is None:
            return None if len(buffer) - end < RESPONSE_HEADER_LENGTH else False
        next_id = following[1]
        return (known or next_id in self.owner.in_flight
                or 0 < next_id - correlation_id <= CORRELATION_STEP)

    def _discard(self, count: int) -> None:
        if count <= 0:
            return
        del self.buffer[:count]
        self.buffer_offset += count
        self.skipped += count
        chunks = self.chunks
        while chunks and chunks[0][1] <= self.buffer_offset:
            chunks.popleft()
