"""The tracker's straight-through path for the next in-order segment gives exactly the
events of the general path (`TcpStream.segment`), whatever the segment order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from streams import Chunk, Closed, Duplicate, Gap, StreamEvent, reassemble

from kdissect.ingest.net import ACK, PSH, SYN, Segment
from kdissect.ingest.reassembly import TcpStream
from kdissect.notes import Note

CLIENT = (bytes([10, 0, 0, 1]), 40000)
SERVER = (bytes([10, 0, 0, 2]), 9092)


class _General:
    """A sink for one `TcpStream` driven directly: every segment takes the general path."""

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []

    def data(self, offset: int, payload: bytes, number: int, timestamp: int,
             notes: tuple[Note, ...]) -> None:
        self.events.append(Chunk(CLIENT, SERVER, offset, payload, number, timestamp, notes))

    def gap(self, offset: int, size: int, number: int, timestamp: int, reason: str) -> None:
        self.events.append(Gap(CLIENT, SERVER, offset, size, number, timestamp, reason))

    def duplicate(self, offset: int, size: int, number: int, differs: bool) -> None:
        self.events.append(Duplicate(CLIENT, SERVER, offset, size, number, differs))


@st.composite
def _schedules(draw: st.DrawFn) -> tuple[int, list[tuple[int, bytes]]]:
    """An initial sequence number and (stream offset, payload) segments: in order, with some
    shuffled, repeated (possibly with other bytes), overlapping, left out, or cut short."""
    isn = draw(st.integers(0, 2**32 - 1))
    data = draw(st.binary(min_size=1, max_size=600))
    cuts = sorted(set(draw(st.lists(st.integers(1, len(data)), max_size=20))) | {len(data)})
    pieces, start = [], 0
    for end in cuts:
        pieces.append((start, data[start:end]))
        start = end
    extra = draw(st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(1, 80), st.booleans()),
                          max_size=8))
    for begin, size, garbled in extra:  # retransmissions that overlap the original cuts
        piece = data[begin:begin + size]
        pieces.append((begin, bytes(b ^ 0xFF for b in piece) if garbled else piece))
    order = draw(st.permutations(range(len(pieces))))
    swaps = draw(st.integers(0, len(pieces)))  # only the first few moved: mostly in order
    schedule = [pieces[i] for i in sorted(range(len(pieces)), key=lambda i: (i >= swaps, order[i]))]
    dropped = draw(st.sets(st.integers(0, len(schedule) - 1), max_size=2))
    return isn, [piece for index, piece in enumerate(schedule) if index not in dropped]


@settings(max_examples=300, deadline=None)
@given(_schedules())
def test_straight_through_path_matches_the_general_path(schedule: tuple[int, list[tuple[int, bytes]]]
                                                         ) -> None:
    isn, pieces = schedule
    segments = [Segment(1, 1_000, CLIENT, SERVER, isn, 0, SYN, b""),
                Segment(2, 2_000, SERVER, CLIENT, 5000, (isn + 1) % 2**32, SYN | ACK, b"")]
    general = _General()
    stream = TcpStream(general)
    stream.start(isn)
    for number, (offset, payload) in enumerate(pieces, 3):
        seq = (isn + 1 + offset) % 2**32
        segments.append(Segment(number, number * 1_000, CLIENT, SERVER, seq, 5001, PSH | ACK, payload))
        stream.segment(seq, payload, 0, number, number * 1_000)
    stream.flush()
    tracked = [event for event in reassemble(segments) if not isinstance(event, Closed)]
    assert tracked == general.events
