"""Stage 4: Kafka's 4-byte size prefix, turning byte streams into frames.

Each direction of a Kafka connection has a `Framer` that cuts its in-order bytes
at the size prefixes. After a gap, or when the capture starts in the middle of
a connection, it scans for the next frame start instead of reading garbage as
sizes (resynchronisation), using everything the connection has told so far:

- a response candidate's correlation id must be that of a request still in
  flight on the connection (with none known: the next response's id must follow
  it closely), and its size plausible for that request's API;
- a request candidate needs a known API key and version, a printable client id,
  a well-formed tagged section in a flexible header, and a plausible size for
  its API;
- either way the next frame boundary must parse too, or the data end exactly
  there; a candidate larger than `RESYNC_WAIT` cannot be confirmed and is not taken.

The two framers of a connection share an `Exchange`, which follows the
correlation ids in flight and emits frames. A response whose request is still
on its way (the request stream holds data behind a hole, or the peer has
acknowledged request bytes the capture has not shown yet) waits, boundedly, so
that it comes out after its request, as it was sent: up to `RESPONSE_WAIT` of
capture time, which any packet moves on, not only the connection's own (a
connection that falls silent is woken: `TcpConnection.wake`).
"""

from __future__ import annotations

import enum
import struct
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from kdissect.ingest.detect import (
    REQUEST_HEADER_LENGTH,
    RESPONSE_HEADER_LENGTH,
    largest_plausible,
    request_candidates,
    request_header_check,
    response_candidates,
    response_header,
)
from kdissect.ingest.net import Address, format_address
from kdissect.notes import Note, chat, error, warn

DEFAULT_PORTS = (9092,)
MAX_FRAME_SIZE = 100 * 1024 * 1024
RESYNC_WAIT = 4 * 1024 * 1024  # bytes a resynchronisation candidate may wait for its confirmation
MAX_IN_FLIGHT = 1024  # correlation ids remembered per connection for resynchronisation
CORRELATION_STEP = 64  # how far apart consecutive responses' correlation ids may plausibly be
MAX_WAITING = 256  # responses held per connection until their request comes
RESPONSE_WAIT = 1_000_000_000  # ns of capture time a response waits for its request

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
_REQUEST_IDS = struct.Struct(">hhi")  # API key, version, correlation id
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
    first_ns: int  # capture time of the first packet, integer nanoseconds since the epoch
    last_packet: int
    last_ns: int
    complete: bool = True  # False when the frame straddles a gap or the capture's end
    notes: tuple[Note, ...] = ()

    @property
    def first_time(self) -> float:
        """Seconds since the epoch (a float: nanoseconds beyond 2^53 are rounded)."""
        return self.first_ns / 1e9

    @property
    def last_time(self) -> float:
        return self.last_ns / 1e9


@dataclass(frozen=True, slots=True)
class FramingSettings:
    """What every framer of one read shares."""

    max_frame_size: int
    report: Report
    request_pattern: object = field(init=False)
    response_pattern: object = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "request_pattern", request_candidates(self.max_frame_size))
        object.__setattr__(self, "response_pattern", response_candidates(self.max_frame_size))


_NOTHING_WAITING: deque[Frame] = deque(maxlen=0)  # shared until a response must wait


class RequestStream(Protocol):
    """What an exchange asks of its request stream (TCP, or the plaintext of TLS)."""

    def owes(self) -> bool: ...


class Exchange:
    """One Kafka connection's two framers: correlation ids in flight, frames out."""

    def __init__(self, connection: Connection, settings: FramingSettings, out: list[Frame],
                 request_stream: RequestStream | None, wake: Callable[[int, int], None] | None = None) -> None:
        self.connection, self.settings, self.out = connection, settings, out
        self.request_stream = request_stream
        self.wake = wake  # (capture time, packet): `expire` is called once a packet is past that time
        self.armed = -1  # the time a wake-up was last asked for
        self.in_flight: OrderedDict[int, int] = OrderedDict()  # correlation id: API key
        self.waiting: deque[Frame] = _NOTHING_WAITING  # responses whose request is on its way
        self.request_framer: Framer | None = None
        self.answered = -1  # the highest correlation id answered (of a request seen)

    def request(self, frame: Frame) -> None:
        data = frame.data
        if len(data) >= 12:
            api_key, _version, correlation_id = _REQUEST_IDS.unpack_from(data, 4)
            in_flight = self.in_flight
            in_flight[correlation_id] = api_key
            if len(in_flight) > MAX_IN_FLIGHT:
                in_flight.popitem(last=False)
        self.out.append(frame)
        if self.waiting:
            self._release(frame.last_ns)

    def response(self, frame: Frame) -> None:
        data = frame.data
        if not self.waiting and len(data) >= 8:  # the usual case: it answers a request in flight
            correlation_id = _CORRELATION.unpack_from(data, 4)[0]
            in_flight = self.in_flight
            if correlation_id in in_flight:
                self._answered(correlation_id)
                self.out.append(frame)
                return
        if self.waiting or (self._unknown(frame) and self._request_owed()):
            if self.waiting is _NOTHING_WAITING:
                self.waiting = deque()
            self.waiting.append(frame)
            self._release(frame.last_ns)
        else:
            self._answer(frame)

    def request_lost(self) -> None:
        """The request stream lost bytes or ended: no response waits for it any more."""
        while self.waiting:
            self._answer(self.waiting.popleft())

    def expire(self, now: int) -> None:
        """Capture time is `now`: a response that waited long enough for its request goes."""
        if self.waiting:
            self._release(now)

    def _release(self, now: int) -> None:
        waiting = self.waiting
        while waiting:
            head = waiting[0]
            if (self._unknown(head) and self._request_owed() and len(waiting) <= MAX_WAITING
                    and now - head.last_ns <= RESPONSE_WAIT):
                at = head.last_ns + RESPONSE_WAIT
                if self.wake is not None and at != self.armed:  # woken then, if nothing comes sooner
                    self.armed = at
                    self.wake(at, head.last_packet)
                return
            self._answer(waiting.popleft())

    def _unknown(self, frame: Frame) -> bool:
        return len(frame.data) >= 8 and _CORRELATION.unpack_from(frame.data, 4)[0] not in self.in_flight

    def _request_owed(self) -> bool:
        framer = self.request_framer
        stream = self.request_stream
        return bool(framer is not None and framer.buffer) or (stream is not None and stream.owes())

    def _answer(self, frame: Frame) -> None:
        if len(frame.data) >= 8:
            correlation_id = _CORRELATION.unpack_from(frame.data, 4)[0]
            if correlation_id in self.in_flight:
                self._answered(correlation_id)
        self.out.append(frame)

    def _answered(self, correlation_id: int) -> None:
        """A request in flight is answered; the ones before it lost their answers (Kafka
        answers in order)."""
        if correlation_id > self.answered:
            self.answered = correlation_id
        in_flight = self.in_flight
        while in_flight:
            oldest, _api = in_flight.popitem(last=False)
            if oldest == correlation_id:
                break


class Framer:
    """One direction of a Kafka connection: in-order bytes and gaps in, frames out."""

    def __init__(self, exchange: Exchange, direction: Direction, *, synced: bool) -> None:
        self.exchange, self.direction = exchange, direction
        self.connection = exchange.connection
        self.requests = direction is Direction.REQUEST
        self.emit = exchange.request if self.requests else exchange.response
        self.max_size = exchange.settings.max_frame_size
        self.buffer = bytearray()
        self.buffer_offset = 0  # stream offset of buffer[0]
        # start, end, packet, time, notes of the buffered bytes, in stream order
        self.chunks: deque[tuple[int, int, int, int, tuple[Note, ...]]] = deque()
        self.synced = synced  # the buffer starts at a frame boundary
        self.skip_to = 0  # bytes before this offset belong to an incomplete frame already yielded
        self.notes: list[Note] = []  # for the next frame
        self.scan = 0  # resynchronisation: buffer position where scanning goes on
        self.skipped = 0  # bytes discarded while resynchronising
        self.lookahead = 0  # stream offset where scanning past a waiting candidate goes on
        if self.requests:
            exchange.request_framer = self

    # --- input ---

    def data(self, offset: int, payload: bytes, number: int, timestamp: int,
             notes: tuple[Note, ...]) -> None:
        if offset < self.skip_to:
            cut = self.skip_to - offset
            if cut >= len(payload):
                return
            payload, offset, notes = payload[cut:], self.skip_to, ()
        if not self.synced or self.buffer:
            self._append(offset, payload, number, timestamp, notes)
            self._drain()
            return
        # The fast path: frames cut straight from a payload that starts at a frame boundary.
        position, length = 0, len(payload)
        if length >= 4 and not notes and not self.notes:
            size = _SIZE.unpack_from(payload)[0]
            if size + 4 == length and 0 < size <= self.max_size:  # one whole frame: most packets
                self.emit(Frame(self.connection, self.direction, offset, payload, number, timestamp,
                                number, timestamp, True, ()))
                return
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
            self.emit(Frame(self.connection, self.direction, offset + position, data, number,
                            timestamp, number, timestamp, True, extra))
            position = end
        if position < length:
            self._append(offset + position, payload[position:] if position else payload,
                         number, timestamp, notes)
            self._drain()

    def gap(self, offset: int, size: int, number: int, timestamp: int, reason: str) -> None:
        if offset < self.skip_to:
            cut = min(self.skip_to - offset, size)
            offset, size = offset + cut, size - cut
            if not size:
                return
        if not self.synced and self.buffer:  # no more bytes will come before the gap
            self._drain(final=True)
        frame_end = self._frame_end()
        if frame_end is not None:
            where = offset - self.buffer_offset
            self._take(len(self.buffer), complete=False, extra=warn(
                f"{size} bytes missing from offset 0x{where:x} of this frame ({reason}); "
                f"frame incomplete ({frame_end - self.buffer_offset} bytes long)", where, "tcp.lost_bytes"))
            if frame_end >= offset + size:  # the next frame starts where this one ends
                self.skip_to = frame_end
                self.buffer_offset = frame_end
                return
        else:
            self.notes.append(warn(f"{size} bytes missing before this frame, at stream offset "
                                   f"{offset} ({reason})", id="tcp.lost_bytes"))
        self._lose_sync(offset + size)

    def duplicate(self, offset: int, size: int, number: int, differs: bool) -> None:
        if self.buffer and offset >= self.buffer_offset:
            self.notes.append(chat(f"packet {number}: {size} bytes retransmitted (delivered once)",
                                    id="tcp.retransmission"))
        elif differs:
            self.exchange.settings.report(warn(
                f"{self.connection} {self.direction}: packet {number} retransmits bytes of an "
                f"earlier frame with different content (first copy kept)", id="tcp.retransmission_differs"))

    def finish(self) -> None:
        """The connection ended: what is left is an incomplete frame or unframed bytes."""
        if not self.synced and self.buffer and self._resync(final=True):
            self._drain(final=True)
        frame_end = self._frame_end()
        if frame_end is not None and self.synced:
            missing = frame_end - self.buffer_offset - len(self.buffer)
            self._take(len(self.buffer), complete=False, extra=warn(
                f"the capture ends {missing} bytes before the end of this frame", len(self.buffer),
                "kafka.frame_incomplete"))
        elif self.buffer:
            self.exchange.settings.report(warn(
                f"{self.connection} {self.direction}: {len(self.buffer)} bytes at stream offset "
                f"{self.buffer_offset} could not be framed", id="kafka.unframed"))
        if self.requests:
            self.exchange.request_lost()

    # --- framing ---

    def _append(self, offset: int, payload: bytes, number: int, timestamp: int,
                notes: tuple[Note, ...]) -> None:
        if not self.buffer:
            self.buffer_offset = offset
            self.chunks.clear()
        self.buffer += payload
        self.chunks.append((offset, offset + len(payload), number, timestamp, notes))

    def _drain(self, *, final: bool = False) -> None:
        buffer = self.buffer
        while True:
            if not self.synced and not self._resync(final=final):
                return
            if len(buffer) < 4:
                return
            size = _SIZE.unpack_from(buffer, 0)[0]
            if size <= 0 or size > self.max_size:
                self.notes.append(error(f"size prefix {size} at stream offset {self.buffer_offset} "
                                        f"is not a frame size (limit {self.max_size})",
                                        id="kafka.bad_frame_size"))
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
        """Emit the first `length` buffered bytes as a frame."""
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
        if first is None or last is None:  # no bytes: nothing to emit
            return
        self.emit(Frame(self.connection, self.direction, start, data, first[2], first[3],
                        last[2], last[3], complete, tuple(notes)))

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

        Candidates are tried in stream order. One that needs more bytes to be judged
        holds the scan (bytes before it are dropped) until they come, or until it
        could only be confirmed beyond RESYNC_WAIT bytes; but a response that answers
        no known request holds it only until a later candidate that does is confirmed
        (one in flight, or one whose request fell into a hole: see `_expected`).
        """
        settings = self.exchange.settings
        pattern = settings.request_pattern if self.requests else settings.response_pattern
        position, waiting, later = self.scan, None, None
        while True:
            match = pattern.search(self.buffer, position)  # type: ignore[attr-defined]
            if match is None:
                break
            position = match.start()
            verdict = self._candidate(position, final)
            if verdict and (waiting is None or self._expected(position)):
                self._discard(position)
                if self.skipped:
                    self.notes.append(warn(f"resynchronised: skipped {self.skipped} bytes before this frame",
                                           id="kafka.resync"))
                self.synced, self.skipped, self.scan, self.lookahead = True, 0, 0, 0
                return True
            if verdict is None and waiting is not None and later is None and self._expected(position):
                later = position  # worth judging again when its bytes come
            if verdict is None and waiting is None:
                waiting = position
                if self._expected(position):
                    break
                position = max(position, self.lookahead - self.buffer_offset - 1)
            position += 1
        header = REQUEST_HEADER_LENGTH if self.requests else RESPONSE_HEADER_LENGTH
        if waiting is None:
            self._discard(max(position, len(self.buffer) - header + 1))
        else:  # the lookahead goes on next time from the first later candidate left open
            self.lookahead = self.buffer_offset + (later if later is not None else max(
                waiting + 1, len(self.buffer) - header + 1))
            self._discard(waiting)
        self.scan = 0
        return False

    def _in_flight(self, position: int) -> bool:
        return self.requests or _CORRELATION.unpack_from(
            self.buffer, position + 4)[0] in self.exchange.in_flight

    def _expected(self, position: int) -> bool:
        """A candidate that answers a known request: one in flight, or one whose request
        the capture lost (its id lies between the last answered and the newest in flight,
        as ids grow per connection)."""
        if self.requests:
            return True
        correlation_id = _CORRELATION.unpack_from(self.buffer, position + 4)[0]
        in_flight = self.exchange.in_flight
        return correlation_id in in_flight or (
            bool(in_flight) and self.exchange.answered < correlation_id < next(reversed(in_flight)))

    def _candidate(self, position: int, final: bool) -> bool | None:
        """Whether a frame starts at `position`: True, False, or None (wait for more bytes).

        `final`: no more bytes will come, so a candidate still unconfirmed is refused.
        """
        buffer = self.buffer
        if self.requests:
            start = request_header_check(buffer, position, self.max_size,
                                         strict=self.buffer_offset + position > 0)
        else:
            start = self._response_start(position)
        if start is None:
            return False if final else None
        if not start:
            return False
        end = position + 4 + _SIZE.unpack_from(buffer, position)[0]
        stream_start = self.buffer_offset + position == 0  # the first byte the capture shows
        if end == len(buffer) and (final or self.requests or (stream_start and self._in_flight(position))):
            return True
        if end - position > RESYNC_WAIT:
            return False
        if self.requests:
            following = request_header_check(buffer, end, self.max_size)
        else:
            following = self._response_follows(position, end, final=final)
        if following is None:
            return False if final else None
        return following

    def _response_start(self, position: int) -> bool | None:
        """A response header of a plausible size for the API of its correlation id."""
        header = response_header(self.buffer, position, self.max_size)
        if header is None:
            return None if len(self.buffer) - position < RESPONSE_HEADER_LENGTH else False
        size, correlation_id = header
        api_key = self.exchange.in_flight.get(correlation_id)
        if api_key is None and correlation_id < 0:
            return False
        return size + 4 <= largest_plausible(api_key, False, self.max_size)

    def _response_follows(self, position: int, end: int, *, final: bool = False) -> bool | None:
        """Whether the next two frame boundaries hold response headers that vouch for this one.

        Each next response answers another request: one in flight, or one with a
        slightly higher correlation id (ids grow per connection; its request may still
        be held behind a hole). A candidate whose own request is not known must also
        come after every id answered so far. The second boundary may also be the end
        of the data.
        """
        exchange = self.exchange
        correlation_id = _CORRELATION.unpack_from(self.buffer, position + 4)[0]
        if correlation_id not in exchange.in_flight and correlation_id <= exchange.answered:
            return False
        for _step in range(2):
            if end == len(self.buffer) and _step:
                return True
            following = response_header(self.buffer, end, self.max_size)
            if following is None:
                return None if len(self.buffer) - end < RESPONSE_HEADER_LENGTH else False
            size, next_id = following
            if next_id == correlation_id or not (
                    next_id in exchange.in_flight
                    or correlation_id < next_id <= correlation_id + CORRELATION_STEP):
                return False
            correlation_id, end = next_id, end + 4 + size
            if final and len(self.buffer) - end < RESPONSE_HEADER_LENGTH:
                return True  # no second boundary will come
        return True

    def _discard(self, count: int) -> None:
        if count <= 0:
            return
        del self.buffer[:count]
        self.buffer_offset += count
        self.skipped += count
        chunks = self.chunks
        while chunks and chunks[0][1] <= self.buffer_offset:
            chunks.popleft()
