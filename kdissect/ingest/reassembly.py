"""Stage 3: TCP reassembly, per connection and per direction.

Each direction of a connection is a `TcpStream`: it turns segments, in whatever
order the capture holds them, into in-order byte chunks at known stream offsets,
and into explicit gap events for bytes that never arrive (lost segments, a snap
length that cut a packet). Nothing is zero-filled: a consumer always knows which
bytes it did not see.

Sequence numbers are compared with 32-bit serial arithmetic relative to the
next expected byte, so a stream may wrap past 2^32 (or run past 4 GiB) freely.

Data beyond a hole is held until the hole is filled or can no longer be. The
hole is declared lost (a gap) when
- the bytes held by the connection exceed its bound (`max_held`, both
  directions together, default `MAX_HELD_BYTES`);
- the connection has ended (FIN both ways) and every byte after the hole has
  arrived, once `acked_wait` more capture time has passed (capture reordering
  can put a data segment behind the FINs);
- a RST ends the connection, or the capture ends;
- the hole is older than `hole_wait` nanoseconds of capture time (default
  `HOLE_WAIT`), or than the shorter `acked_wait` (default `ACKED_WAIT`) once the
  peer has acknowledged the missing bytes: a retransmission will not come then,
  only capture reordering can still bring them.
Capture time is any packet's, not only the connection's own: a connection that falls
silent with bytes held is woken when the wait runs out (`TcpConnection.wake`,
`ConnectionTracker.tick`), and they come out there, not at the end of the capture.
An acknowledgement of bytes the capture has not shown (Wireshark's "ACKed unseen
segment") is only a hint: in captures an ACK routinely comes before the data it
acknowledges. It is remembered on the stream, shortens the wait, and names the
reason when the hole is declared lost, but never by itself turns bytes that arrive
later into retransmissions.

`ConnectionTracker` follows the lifecycle: a SYN opens a connection (a SYN on a
4-tuple that already carried data opens a new one), FIN from both sides or a
RST closes it; a connection first seen in the middle (no SYN) starts at its
first data byte. Closed connections are released at once, so memory follows
the number of open connections only. What one connection does never depends on
the others but through capture time (`tick`, every packet moves it on), and
connections close in an order their own packets fix: this lets several
processes each follow a share of the connections and give exactly the events
one process would (`kdissect.parallel`).

The consumer of the events is a `ConnectionHandler`, which gives a `StreamSink`
per direction; sinks can be chained (a decrypting layer between reassembly and
framing is just another sink). Timestamps are integer nanoseconds since the epoch.
"""

from __future__ import annotations

import heapq
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kdissect.ingest.net import ACK, FIN, RST, SYN, Address, RawSegment
from kdissect.notes import Note, chat, warn

MASK, HALF = 0xFFFFFFFF, 0x80000000
MAX_HELD_BYTES = 8 * 1024 * 1024  # bytes held beyond holes per connection before one is declared lost
MAX_PENDING_SEGMENTS = 4096  # segments held per direction, likewise
HOLE_WAIT = 3_000_000_000  # ns of capture time a hole may stay open without other evidence
NEVER = 1 << 63  # a capture time no packet reaches
ACKED_WAIT = 500_000_000  # ns, once the peer has acknowledged the missing bytes
RECENT_SEGMENTS = 32  # delivered payloads kept to compare retransmissions against
RECENT_ACKS = 64  # acknowledgements of unseen bytes remembered per direction
RECENTLY_CLOSED = 4096  # closed 4-tuples remembered, so their stray packets open nothing
CLOSED_BUCKETS = 64  # ... in this many buckets by connection hash, each keeping its share

LOST = "segments lost (never captured)"
OVERFLOW = "segments lost (out-of-order buffer full)"
SNAPLEN = "cut by the snap length"
ACKED = "segments lost (acknowledged, never captured)"

FlowKey = tuple[bytes, int, bytes, int]  # src ip, src port, dst ip, dst port
_CONTROL_FLAGS = SYN | FIN | RST


class StreamSink(Protocol):
    """What one direction's stream tells its consumer (times in integer nanoseconds)."""

    def data(self, offset: int, payload: bytes, number: int, timestamp: int,
             notes: tuple[Note, ...]) -> None: ...

    def gap(self, offset: int, size: int, number: int, timestamp: int, reason: str) -> None: ...

    def duplicate(self, offset: int, size: int, number: int, differs: bool) -> None: ...


class ConnectionHandler(Protocol):
    """The consumer of one connection: a sink per side (side 0 is the address seen first)."""

    def sinks(self) -> tuple[StreamSink, StreamSink]: ...

    def close(self) -> None: ...

    def expire(self, now: int) -> None:
        """Capture time is `now`, past a time the handler asked to be woken at (`wake`)."""


@dataclass(frozen=True, slots=True)
class HoldLimits:
    """How long and how much data beyond a hole is held (see the module's docstring)."""

    max_held: int = MAX_HELD_BYTES
    hole_wait: int = HOLE_WAIT
    acked_wait: int = ACKED_WAIT


class HeldBytes:
    """The bytes one connection holds beyond holes, both directions together; and how its
    streams ask to be woken when a hole's wait runs out (`TcpConnection.wake`)."""

    __slots__ = ("held", "limits", "wake")

    def __init__(self, limits: HoldLimits, wake: Callable[[int, int], None] | None = None) -> None:
        self.limits = limits
        self.held = 0
        self.wake = wake


class TcpStream:
    """One direction of a TCP connection, delivering its bytes in order, exactly once."""

    __slots__ = ("acks", "armed", "base", "budget", "fin_offset", "from_start", "offset", "pending",
                 "recent", "sink")

    def __init__(self, sink: StreamSink, budget: HeldBytes | None = None) -> None:
        self.sink = sink
        self.budget = budget or HeldBytes(HoldLimits())
        self.base: int | None = None  # sequence number of stream offset 0
        self.from_start = False  # offset 0 is the first byte after the SYN
        self.offset = 0  # stream offset of the next byte to deliver
        self.pending: list[tuple[int, bytes, int, int, int]] = []  # heap: offset, payload, missing, packet, time
        self.recent: deque[tuple[int, bytes]] = deque(maxlen=RECENT_SEGMENTS)
        self.acks: deque[tuple[int, int]] | None = None  # (acked end, time) beyond offset, once any
        self.fin_offset: int | None = None
        self.armed = -1  # the capture time a wake-up was last asked for (`_arm`)

    def feed(self, sink: StreamSink) -> None:
        """Send this stream's events to `sink` from now on."""
        self.sink = sink

    def start(self, isn: int) -> None:
        """The stream's first byte is the one after sequence number `isn` (its SYN)."""
        if self.base is None or (self.offset == 0 and not self.pending):
            self.base, self.from_start = (isn + 1) & MASK, True

    def segment(self, seq: int, payload: bytes, missing: int, number: int, timestamp: int) -> None:
        if self.base is None:  # first seen in the middle: start at this byte
            self.base = seq
        distance = ((seq - self.base - self.offset + HALF) & MASK) - HALF
        if distance == 0 and not self.pending:  # (ConnectionTracker.segment does this one inline)
            self._deliver(payload, missing, number, timestamp, ())
        elif distance > 0:
            self._hold(self.offset + distance, payload, missing, number, timestamp)
        else:
            self._accept(distance, payload, missing, number, timestamp)
            self._drain()
        if self.pending:
            self._expire(timestamp)
            self._arm()

    def fin(self, seq: int) -> None:
        if self.base is None:
            self.base = seq
        distance = ((seq - self.base - self.offset + HALF) & MASK) - HALF
        self.fin_offset = self.offset + distance

    def acknowledged(self, ack: int, number: int, timestamp: int) -> None:
        """The peer acknowledged up to `ack`, beyond the bytes seen: remembered, as a hint."""
        if self.base is None:
            return
        end = self.offset + ((ack - self.base - self.offset + HALF) & MASK) - HALF
        if self.fin_offset is not None:
            end = min(end, self.fin_offset)  # the FIN's own sequence number is no data
        if end <= self.offset:
            return
        acks = self.acks
        if acks is None:
            acks = self.acks = deque(maxlen=RECENT_ACKS)
        if not acks or end > acks[-1][0]:
            acks.append((end, timestamp))
        if self.pending:
            self._expire(timestamp)
            self._arm()

    def acked_unseen(self) -> bool:
        """Whether the peer has acknowledged bytes of this stream not yet seen."""
        acks = self.acks
        if not acks:
            return False
        while acks and acks[0][0] <= self.offset:
            acks.popleft()
        return bool(acks)

    def owes(self) -> bool:
        """Whether bytes of this stream are known to be on their way: held or acknowledged."""
        return bool(self.pending) or self.acked_unseen()

    def flush(self) -> None:
        """Deliver everything held, each hole before it as a gap (the end of the connection)."""
        while self.pending:
            self._skip_to_pending(ACKED if self.acked_unseen() else LOST)

    def expire(self, now: int) -> None:
        """Capture time is `now` (a wake-up: the connection may have fallen silent)."""
        if self.pending:
            self._expire(now)
            self._arm()

    def _expire(self, now: int) -> None:
        """Declare holes lost that are older than their wait."""
        while self.pending:
            since, wait, reason = self._wait()
            if now - since <= wait:
                return
            self._skip_to_pending(reason)

    def _wait(self) -> tuple[int, int, str]:
        """Since when the first hole waits, how long it may, and why it is lost after."""
        limits = self.budget.limits
        since = self.pending[0][4]
        if self.acked_unseen() and self.acks:
            return min(since, self.acks[0][1]), limits.acked_wait, ACKED
        return since, limits.hole_wait, LOST

    def _arm(self) -> None:
        """Bytes are held behind a hole: be woken when its wait runs out, should no packet
        of this connection come by then."""
        wake = self.budget.wake
        if self.pending and wake is not None:
            since, wait, _reason = self._wait()
            if since + wait != self.armed:
                self.armed = since + wait
                wake(since + wait, self.pending[0][3])

    def reaches_fin(self) -> bool:
        """Whether the FIN is seen and every byte before it arrived, but for holes before
        the data held (those can then only be lost)."""
        if self.fin_offset is None:
            return False
        reached = self.offset
        for offset, payload, missing, _number, _time in sorted(self.pending):
            if offset > reached and reached != self.offset:
                return False
            reached = max(reached, offset + len(payload) + missing)
        return reached >= self.fin_offset

    def _hold(self, offset: int, payload: bytes, missing: int, number: int, timestamp: int) -> None:
        heapq.heappush(self.pending, (offset, payload, missing, number, timestamp))
        budget = self.budget
        budget.held += len(payload)
        while self.pending and (budget.held > budget.limits.max_held
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
            self.budget.held -= len(payload)
            self._accept(offset - self.offset, payload, missing, number, timestamp)

    def _accept(self, distance: int, payload: bytes, missing: int, number: int,
                timestamp: int) -> None:
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
            return warn(f"{overlap} retransmitted bytes differ from the first copy (first copy kept)",
                        id="tcp.retransmission_differs")
        return chat(f"{overlap} bytes retransmitted (delivered once)", id="tcp.retransmission")

    def _deliver(self, payload: bytes, missing: int, number: int, timestamp: int,
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

    __slots__ = ("addresses", "first_packet", "handler", "limits", "streams", "syn_sender", "waker")

    def __init__(self, first: Address, second: Address, syn_sender: int | None,
                 limits: HoldLimits | None = None, first_packet: int = 0) -> None:
        self.addresses = (first, second)
        self.first_packet = first_packet  # the number of the packet that opened it
        self.syn_sender = syn_sender  # side that sent the SYN (the client), when seen
        self.limits = limits or HoldLimits()
        self.handler: ConnectionHandler | None = None
        self.streams: tuple[TcpStream, TcpStream] | None = None
        self.waker: Callable[[TcpConnection, int, int], None] | None = None  # its tracker's

    def wake(self, at: int, number: int) -> None:
        """Have the handler's `expire` called at the first packet after capture time `at`
        (of whichever connection), if the connection is still open then; `number`: the
        packet that made it wait."""
        if self.waker is not None:
            self.waker(self, at, number)

    def attach(self, handler: ConnectionHandler) -> None:
        self.handler = handler
        first, second = handler.sinks()
        budget = HeldBytes(self.limits, self.wake)
        self.streams = (TcpStream(first, budget), TcpStream(second, budget))

    def expire(self, now: int) -> None:
        """Capture time is `now`, past a wake-up asked for: holes whose wait ran out are
        lost, then the handler hears of it (a response waiting for its request)."""
        for stream in self.streams or ():
            stream.expire(now)
        if self.streams is not None and self.handler is not None:
            self.handler.expire(now)

    def stop(self) -> None:
        """Not interesting after all: reassembly stops, later packets are dropped."""
        self.streams = None

    def stream(self, side: int) -> TcpStream | None:
        return None if self.streams is None else self.streams[side]

    def opened(self) -> bool:
        """Whether any byte has been seen (a repeated SYN then starts a new connection)."""
        return self.streams is not None and any(
            stream.offset or stream.pending for stream in self.streams)

    def finished(self) -> bool:
        """FIN from both sides, and every byte before them arrived (but for holes that
        can then only be lost)."""
        return self.streams is not None and all(stream.reaches_fin() for stream in self.streams)

    def complete(self) -> bool:
        """FIN from both sides, and every byte before them arrived, no hole left."""
        return self.streams is not None and all(
            stream.fin_offset is not None and stream.offset >= stream.fin_offset
            for stream in self.streams)


Opener = Callable[[TcpConnection], ConnectionHandler | None]


def flow_bucket(key: FlowKey) -> int:
    """A connection's bucket, 0 to CLOSED_BUCKETS - 1: the same for both directions of its
    4-tuple and in every process (a CRC of its two endpoints, lower one first)."""
    src, src_port, dst, dst_port = key
    first, second = sorted(((src, src_port), (dst, dst_port)))
    return zlib.crc32(b"%b%d %b%d" % (first[0], first[1], second[0], second[1])) % CLOSED_BUCKETS


CLOSING_END = 0  # what `ConnectionTracker.closing` hears at the end of the capture (a tick: its round)


class ConnectionTracker:
    """All TCP connections of a capture: finds each segment's stream and keeps the lifecycle.

    `open_connection` is asked once per new connection for its handler; None means
    "not interesting": the connection's packets are then dropped at the cost of one
    dictionary lookup (as after the handler calls `TcpConnection.stop`).

    `closing`, when set, hears why each connection the capture's clock or end closes
    is closed, or woken (`TcpConnection.wake`), just before: `(round, time, packet)` for
    a grace after both FINs that began at that packet and ran out, or for a wake-up asked
    for that time at that packet (`tick`'s round, from 1); `(CLOSING_END, first packet,
    0)` at the end of the capture. Those keys order the closings as one tracker of every
    connection does them.

    `due` is the capture time after which a packet has something for `tick` to do.
    """

    def __init__(self, open_connection: Opener, limits: HoldLimits | None = None) -> None:
        self.open_connection = open_connection
        self.limits = limits or HoldLimits()
        self.ending: list[tuple[int, int, TcpConnection]] = []  # heap: FIN both ways, holes left
        self.wakes: list[tuple[int, int, int, TcpConnection]] = []  # heap: time, packet, order, connection
        self.woken = 0  # wake-ups asked for: their order among equal times and packets
        self.due = NEVER
        self.table: dict[FlowKey, tuple[TcpConnection, int]] = {}
        self.closed = [OrderedDict[FlowKey, None]() for _ in range(CLOSED_BUCKETS)]
        self.closing: Callable[[tuple[int, int, int]], None] | None = None

    def segment(self, number: int, timestamp: int, raw: RawSegment) -> None:
        src, src_port, dst, dst_port, seq, ack, flags, payload, missing = raw
        entry = self.table.get((src, src_port, dst, dst_port))
        if entry is None or flags & _CONTROL_FLAGS:
            self._control(number, timestamp, raw, entry)
            return
        connection, side = entry
        streams = connection.streams
        if streams is None:
            return
        peer = streams[1 - side]  # the acknowledgement first: it tells what the data answers
        base = peer.base
        if base is not None and flags & ACK and 0 < (ack - base - peer.offset) & MASK < HALF:
            peer.acknowledged(ack, number, timestamp)  # acks bytes not seen (yet)
        if payload or missing:
            stream = streams[side]
            offset = stream.offset
            if (not missing and not stream.pending and stream.base is not None
                    and not (seq - stream.base - offset) & MASK):  # the next bytes, nothing held:
                stream.recent.append((offset, payload))          # straight through (the usual case)
                stream.offset = offset + len(payload)
                stream.sink.data(offset, payload, number, timestamp, ())
            else:
                stream.segment(seq, payload, missing, number, timestamp)
            if stream.fin_offset is not None and connection.complete():  # a late segment
                self._close(connection)
        if timestamp > self.due:
            self.tick(timestamp)

    def tick(self, now: int) -> None:
        """Capture time is `now` (any packet says so, of whichever connection): close the
        connections whose grace after both FINs has run out (holes are lost), and wake
        those that asked to be woken before `now`, in the order of their times; then, in
        another round, what that asked for before `now` (a response released from a
        hole asks to wait from its own time), until nothing is due. So a tick does all
        that capture time `now` does, whichever packet brought it, and however many
        times it is called for it."""
        ending, wakes, grace = self.ending, self.wakes, self.limits.acked_wait
        round_ = 0
        while (ending and now - ending[0][0] > grace) or (wakes and now > wakes[0][0]):
            round_ += 1
            due: list[tuple[int, int, int, int, TcpConnection]] = []
            while ending and now - ending[0][0] > grace:
                ended, number, connection = heapq.heappop(ending)
                due.append((ended, number, 0, 0, connection))
            while wakes and now > wakes[0][0]:
                at, number, order, connection = heapq.heappop(wakes)
                due.append((at, number, 1, order, connection))
            due.sort(key=lambda event: event[:4])
            for at, number, kind, _order, connection in due:
                if connection.streams is None:  # closed since
                    continue
                if self.closing is not None:
                    self.closing((round_, at, number))
                if kind == 0:
                    self._close(connection)
                else:
                    connection.expire(now)
        self._due()

    def _wake(self, connection: TcpConnection, at: int, number: int) -> None:
        self.woken += 1
        heapq.heappush(self.wakes, (at, number, self.woken, connection))
        self.due = min(self.due, at)

    def _due(self) -> None:
        self.due = min(self.ending[0][0] + self.limits.acked_wait if self.ending else NEVER,
                       self.wakes[0][0] if self.wakes else NEVER)

    def finish(self) -> None:
        """The end of the capture: every connection still open is flushed and closed."""
        for connection in list({id(c): c for c, _side in self.table.values()}.values()):
            if self.closing is not None:
                self.closing((CLOSING_END, connection.first_packet, 0))
            self._close(connection)

    def _control(self, number: int, timestamp: int, raw: RawSegment,
                 entry: tuple[TcpConnection, int] | None) -> None:
        src, src_port, dst, dst_port, seq, ack, flags, payload, missing = raw
        if flags & RST:
            if entry is not None:
                self._close(entry[0])
            return
        if flags & SYN:
            entry = self._syn(number, raw, entry)
            seq = (seq + 1) & MASK
        elif entry is None:
            key: FlowKey = (src, src_port, dst, dst_port)
            if not (payload or missing) or key in self.closed[flow_bucket(key)]:
                return
            entry = self._open(number, (src, src_port), (dst, dst_port), None), 0
        connection, side = entry
        if connection.streams is None:  # not interesting: forget it when it ends
            if flags & FIN:
                self._close(connection)
            return
        streams = connection.streams  # the handler may drop them (not Kafka) as it reads
        if flags & ACK and not flags & SYN:
            streams[1 - side].acknowledged(ack, number, timestamp)
        if payload or missing:
            streams[side].segment(seq, payload, missing, number, timestamp)
        if flags & FIN:
            streams[side].fin((seq + len(payload) + missing) & MASK)
            if connection.streams is None or connection.complete():
                self._close(connection)
            elif connection.finished():  # only holes left: a grace for late segments
                heapq.heappush(self.ending, (timestamp, number, connection))
                self._due()

    def _syn(self, number: int, raw: RawSegment, entry: tuple[TcpConnection, int] | None
             ) -> tuple[TcpConnection, int]:
        src, src_port, dst, dst_port, seq, ack, flags, _payload, _missing = raw
        if entry is not None and flags & ACK == 0 and (entry[0].opened() or entry[0].streams is None):
            self._close(entry[0])  # the 4-tuple is reused by a new connection
            entry = None
        if entry is None:
            client_first = flags & ACK == 0
            connection = self._open(number, (src, src_port), (dst, dst_port), 0 if client_first else 1)
            entry = connection, 0
        connection, side = entry
        if connection.streams is not None:
            connection.streams[side].start(seq)
            client_stream = connection.streams[1 - side]
            if flags & ACK and client_stream.base is None:  # SYN missed: the SYN+ACK acks it
                client_stream.start((ack - 1) & MASK)
        return entry

    def _open(self, number: int, first: Address, second: Address, syn_sender: int | None
              ) -> TcpConnection:
        connection = TcpConnection(first, second, syn_sender, self.limits, number)
        connection.waker = self._wake
        handler = self.open_connection(connection)
        if handler is not None:
            connection.attach(handler)
        forward: FlowKey = (*first, *second)
        backward: FlowKey = (*second, *first)
        self.table[forward] = (connection, 0)
        self.table[backward] = (connection, 1)
        closed = self.closed[flow_bucket(forward)]
        closed.pop(forward, None)
        closed.pop(backward, None)
        return connection

    def _close(self, connection: TcpConnection) -> None:
        first, second = connection.addresses
        forward: FlowKey = (*first, *second)
        closed = self.closed[flow_bucket(forward)]
        for key in (forward, (*second, *first)):
            if self.table.get(key, (None, 0))[0] is connection:
                del self.table[key]
            closed[key] = None
        while len(closed) > RECENTLY_CLOSED // CLOSED_BUCKETS:
            closed.popitem(last=False)
        if connection.streams is not None and connection.handler is not None:
            for stream in connection.streams:
                stream.flush()
            connection.handler.close()
            connection.streams = None
