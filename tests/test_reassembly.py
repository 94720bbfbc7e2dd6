"""TCP reassembly: in-order bytes exactly once, explicit gaps, connection lifecycle."""

from __future__ import annotations

import random

import pytest
from streams import Chunk, Closed, Duplicate, Gap, StreamEvent, reassemble

from kdissect.ingest.net import ACK, FIN, PSH, RST, SYN, Segment
from kdissect.ingest.reassembly import MAX_HELD_BYTES, OVERFLOW, SNAPLEN
from kdissect.notes import Severity

CLIENT = (bytes([10, 0, 0, 1]), 40000)
SERVER = (bytes([10, 0, 0, 2]), 9092)
DATA = bytes(range(256)) * 4  # 1024 distinct-ish bytes


class Flow:
    """Segments of one connection, numbered like capture packets."""

    def __init__(self, client_isn: int = 1000, server_isn: int = 90000) -> None:
        self.isn = {True: client_isn, False: server_isn}
        self.segments: list[Segment] = []

    def add(self, from_client: bool, offset: int, payload: bytes = b"", flags: int = PSH | ACK,
            missing: int = 0, seq: int | None = None) -> Flow:
        src, dst = (CLIENT, SERVER) if from_client else (SERVER, CLIENT)
        number = len(self.segments) + 1
        if seq is None:
            seq = (self.isn[from_client] + 1 + offset) % 2**32
        self.segments.append(Segment(number, number * 1_000_000, src, dst, seq, 0, flags, payload, missing))
        return self

    def syn(self) -> Flow:
        self.add(True, -1, flags=SYN)
        return self.add(False, -1, flags=SYN | ACK)

    def events(self) -> list[StreamEvent]:
        return list(reassemble(self.segments))


def _bytes(events: list[StreamEvent], src: tuple[bytes, int] = CLIENT) -> bytes:
    """Concatenated chunk bytes of one direction, checking offsets are contiguous."""
    out = b""
    position = None
    for event in events:
        if isinstance(event, Chunk) and event.src == src:
            assert position is None or event.offset == position
            out += event.data
            position = event.offset + len(event.data)
        elif isinstance(event, Gap) and event.src == src:
            position = event.offset + event.size
    return out


def _gaps(events: list[StreamEvent]) -> list[tuple[int, int, str]]:
    return [(e.offset, e.size, e.reason) for e in events if isinstance(e, Gap)]


def test_in_order_bytes_with_offsets_and_packets() -> None:
    events = Flow().syn().add(True, 0, DATA[:100]).add(False, 0, DATA[:10]).add(True, 100, DATA[100:150]).events()
    chunks = [(e.src, e.offset, e.data, e.packet_number) for e in events if isinstance(e, Chunk)]
    assert chunks == [(CLIENT, 0, DATA[:100], 3), (SERVER, 0, DATA[:10], 4),
                      (CLIENT, 100, DATA[100:150], 5)]
    assert events[-1] == Closed(CLIENT, SERVER)  # flushed at the end of the capture


def test_reordered_segments_are_delivered_in_order() -> None:
    flow = Flow().syn()
    pieces = [(i, DATA[i:i + 100]) for i in range(0, 1000, 100)]
    random.Random(5).shuffle(pieces)
    for offset, piece in pieces:
        flow.add(True, offset, piece)
    events = flow.events()
    assert _bytes(events) == DATA[:1000]
    assert _gaps(events) == []


def test_exact_retransmission_delivered_once() -> None:
    flow = Flow().syn().add(True, 0, DATA[:100]).add(True, 100, DATA[100:200]).add(True, 0, DATA[:100])
    events = flow.events()
    assert _bytes(events) == DATA[:200]
    assert [e for e in events if isinstance(e, Duplicate)] == [
        Duplicate(CLIENT, SERVER, 0, 100, 5, False)]


def test_overlapping_retransmission_delivers_only_new_bytes_with_a_note() -> None:
    flow = Flow().syn().add(True, 0, DATA[:100]).add(True, 50, DATA[50:180])
    events = flow.events()
    assert _bytes(events) == DATA[:180]
    second = [e for e in events if isinstance(e, Chunk)][1]
    assert (second.offset, second.data) == (100, DATA[100:180])
    assert [(n.severity, n.message) for n in second.notes] == [
        (Severity.CHAT, "50 bytes retransmitted (delivered once)")]


def test_overlap_with_different_bytes_keeps_the_first_copy_and_warns() -> None:
    changed = bytes(b ^ 0xFF for b in DATA[50:100]) + DATA[100:180]
    events = Flow().syn().add(True, 0, DATA[:100]).add(True, 50, changed).events()
    assert _bytes(events) == DATA[:180]
    second = [e for e in events if isinstance(e, Chunk)][1]
    assert second.notes[0].severity is Severity.WARN
    assert "differ from the first copy" in second.notes[0].message
    duplicate = Flow().syn().add(True, 0, DATA[:100]).add(True, 0, changed[:100]).events()
    assert [e.differs for e in duplicate if isinstance(e, Duplicate)] == [True]


def test_out_of_order_overlaps_are_resolved() -> None:
    flow = Flow().syn().add(True, 100, DATA[100:300]).add(True, 200, DATA[200:400]).add(True, 0, DATA[:150])
    assert _bytes(flow.events()) == DATA[:400]


def test_one_byte_segments() -> None:
    flow = Flow().syn()
    for offset in range(300):
        flow.add(True, offset, DATA[offset:offset + 1])
    events = flow.events()
    assert _bytes(events) == DATA[:300]
    assert len([e for e in events if isinstance(e, Chunk)]) == 300


def test_lost_segment_is_an_explicit_gap() -> None:
    flow = Flow().syn().add(True, 0, DATA[:100]).add(True, 250, DATA[250:400])
    events = flow.events()
    assert _gaps(events) == [(100, 150, "segments lost (never captured)")]
    chunks = [(e.offset, e.data) for e in events if isinstance(e, Chunk)]
    assert chunks == [(0, DATA[:100]), (250, DATA[250:400])]  # never joined, never zero-filled


def test_hole_filled_late_is_not_a_gap() -> None:
    flow = Flow().syn().add(True, 0, DATA[:100]).add(True, 200, DATA[200:300]).add(True, 100, DATA[100:200])
    events = flow.events()
    assert _gaps(events) == [] and _bytes(events) == DATA[:300]


def test_out_of_order_buffer_is_bounded() -> None:
    flow = Flow().syn().add(True, 0, b"x")
    piece = b"y" * 60000
    count = MAX_HELD_BYTES // len(piece) + 2
    for i in range(count):
        flow.add(True, 1000 + i * len(piece), piece)  # bytes 1..999 never come
    events = flow.events()
    gaps = _gaps(events)
    assert gaps[0] == (1, 999, OVERFLOW)
    delivered = sum(len(e.data) for e in events if isinstance(e, Chunk))
    assert delivered == 1 + count * len(piece)


def test_sequence_numbers_wrap_around() -> None:
    isn = 2**32 - 150
    flow = Flow(client_isn=isn).syn()
    for offset in range(0, 1000, 100):
        flow.add(True, offset, DATA[offset:offset + 100])
    assert [s.seq for s in flow.segments[2:5]] == [2**32 - 149, 2**32 - 49, 51]
    events = flow.events()
    assert _bytes(events) == DATA[:1000] and _gaps(events) == []


def test_wrap_around_with_reordering_across_the_wrap() -> None:
    flow = Flow(client_isn=2**32 - 51).syn()
    flow.add(True, 100, DATA[100:200]).add(True, 0, DATA[:100])
    assert _bytes(flow.events()) == DATA[:200]


def test_mid_stream_start_begins_at_the_first_byte_seen() -> None:
    flow = Flow()
    flow.add(True, 5000, DATA[:100]).add(False, 7000, DATA[:20]).add(True, 5100, DATA[100:200])
    events = flow.events()
    chunks = [(e.src, e.offset, e.data) for e in events if isinstance(e, Chunk)]
    assert chunks == [(CLIENT, 0, DATA[:100]), (SERVER, 0, DATA[:20]), (CLIENT, 100, DATA[100:200])]


def test_snaplen_cut_is_a_gap_after_the_bytes_present() -> None:
    flow = Flow().syn().add(True, 0, DATA[:40], missing=60).add(True, 100, DATA[100:150])
    events = flow.events()
    assert _gaps(events) == [(40, 60, SNAPLEN)]
    assert [(e.offset, e.data) for e in events if isinstance(e, Chunk)] == [
        (0, DATA[:40]), (100, DATA[100:150])]


def test_fin_from_both_sides_closes_and_later_packets_open_nothing() -> None:
    flow = Flow().syn().add(True, 0, DATA[:10])
    flow.add(True, 10, flags=FIN | ACK).add(False, 0, flags=FIN | ACK)
    flow.add(True, 0, DATA[:10])  # a stray retransmission after the close
    events = flow.events()
    assert [type(e).__name__ for e in events] == ["Chunk", "Closed"]


def test_rst_closes_and_flushes_held_data_behind_a_gap() -> None:
    flow = Flow().syn().add(True, 0, DATA[:10]).add(True, 50, DATA[50:60]).add(False, 0, flags=RST)
    events = flow.events()
    assert [type(e).__name__ for e in events] == ["Chunk", "Gap", "Chunk", "Closed"]
    assert _gaps(events) == [(10, 40, "segments lost (never captured)")]


def test_end_of_capture_flushes_held_data_behind_a_gap() -> None:
    events = Flow().syn().add(True, 0, DATA[:10]).add(True, 30, DATA[30:40]).events()
    assert _gaps(events) == [(10, 20, "segments lost (never captured)")]
    assert _bytes(events) == DATA[:10] + DATA[30:40]


def test_new_syn_on_a_used_four_tuple_is_a_new_connection() -> None:
    flow = Flow().syn().add(True, 0, DATA[:10])
    second = Flow(client_isn=777777, server_isn=5)
    second.syn().add(True, 0, DATA[10:30])
    for segment in second.segments:
        flow.segments.append(Segment(len(flow.segments) + 1, 1.0, segment.src, segment.dst,
                                     segment.seq, segment.ack, segment.flags, segment.payload))
    events = flow.events()
    assert [type(e).__name__ for e in events] == ["Chunk", "Closed", "Chunk", "Closed"]
    chunks = [(e.offset, e.data) for e in events if isinstance(e, Chunk)]
    assert chunks == [(0, DATA[:10]), (0, DATA[10:30])]  # each starts at offset 0


def test_repeated_syn_before_data_is_the_same_connection() -> None:
    flow = Flow()
    flow.add(True, -1, flags=SYN).add(True, -1, flags=SYN).add(False, -1, flags=SYN | ACK)
    flow.add(True, 0, DATA[:10])
    events = flow.events()
    assert [type(e).__name__ for e in events] == ["Chunk", "Closed"]


def test_syn_ack_without_syn_fixes_the_client_start() -> None:
    flow = Flow()
    flow.add(False, -1, flags=SYN | ACK, seq=90000)
    flow.segments[-1] = Segment(1, 0.001, SERVER, CLIENT, 90000, 1001, SYN | ACK, b"")
    flow.add(True, 100, DATA[100:200]).add(True, 0, DATA[:100])  # reordered first bytes
    assert _bytes(flow.events()) == DATA[:200]


@pytest.mark.parametrize("seed", range(5))
def test_random_schedules_deliver_every_byte_once(seed: int) -> None:
    rng = random.Random(seed)
    flow = Flow(client_isn=rng.randrange(2**32)).syn()
    pieces = []
    offset = 0
    while offset < len(DATA):
        size = rng.randint(1, 120)
        pieces.append((offset, DATA[offset:offset + size]))
        offset += size
    schedule = pieces + rng.sample(pieces, len(pieces) // 3)  # retransmissions
    rng.shuffle(schedule)
    for start, piece in schedule:
        flow.add(True, start, piece)
    events = flow.events()
    assert _bytes(events) == DATA and _gaps(events) == []


class _Waking:
    """A connection as `ConnectionTracker.tick` sees one: woken, it asks once to be woken
    again at `again` (as a response a hole released asks to wait from its own time)."""

    def __init__(self, tracker: object, name: str, again: int | None, heard: list[str]) -> None:
        self.tracker, self.name, self.again, self.heard = tracker, name, again, heard
        self.streams = ()  # open

    def expire(self, now: int) -> None:
        self.heard.append(self.name)
        if self.again is not None:
            at, self.again = self.again, None
            self.tracker._wake(self, at, 7)  # type: ignore[attr-defined]


def test_one_tick_does_all_that_its_time_does_however_often_it_is_called() -> None:
    """What a wake-up asks for before the tick's time is done in the same call, in a round
    of its own after the first (which `closing` is told): so a tracker that sees only some
    connections' packets (a `--jobs` worker, ticking once for another's packet) does at
    each time what one tracker of every connection does, whose packet ticks twice."""
    from kdissect.ingest.reassembly import ConnectionTracker

    for calls in (1, 2):
        tracker = ConnectionTracker(lambda _connection: None)
        heard: list[str] = []
        told: list[tuple[int, int, int]] = []
        tracker.closing = told.append
        first = _Waking(tracker, "first", 150, heard)
        second = _Waking(tracker, "second", None, heard)
        tracker._wake(first, 100, 3)  # type: ignore[arg-type]
        tracker._wake(second, 120, 4)  # type: ignore[arg-type]
        for _ in range(calls):
            tracker.tick(200)
        assert heard == ["first", "second", "first"]
        assert told == [(1, 100, 3), (1, 120, 4), (2, 150, 7)]
        assert tracker.due > 200
