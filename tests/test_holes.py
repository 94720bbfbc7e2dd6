"""Holes in a TCP stream: held until filled or known lost, never lost to an early ACK.

Reassembly-level tests feed segments with explicit acknowledgement numbers;
framing-level tests write real capture files of crafted Kafka conversations
whose packets are reordered or dropped, and read them through the pipeline.
"""

from __future__ import annotations

from pathlib import Path

from craft import (
    Conversation,
    ethernet,
    kafka_request,
    kafka_response,
    metadata_request,
    records,
    write_pcap,
)
from scapy.layers.inet import TCP
from scapy.packet import Packet as ScapyPacket
from streams import Chunk, Closed, Duplicate, Gap, StreamEvent, reassemble

from kdissect.ingest.framing import Frame
from kdissect.ingest.net import ACK, FIN, PSH, RST, SYN, Address, Segment
from kdissect.ingest.reassembly import ACKED, HOLE_WAIT, LOST, OVERFLOW, HoldLimits
from kdissect.notes import Note
from kdissect.pipeline import read_frames, read_messages

CLIENT: Address = (bytes([10, 0, 0, 1]), 40000)
SERVER: Address = (bytes([10, 0, 0, 2]), 9092)
OTHER: Address = (bytes([10, 0, 0, 3]), 40001)
DATA = bytes(range(256)) * 40
MS = 1_000_000  # nanoseconds


class Wire:
    """Segments of one connection with explicit acknowledgements, 1 ms apart."""

    def __init__(self) -> None:
        self.isn = {True: 1000, False: 90000}
        self.segments: list[Segment] = []

    def add(self, from_client: bool, offset: int, payload: bytes = b"", *, acked: int = 0,
            flags: int = PSH | ACK, src: Address | None = None) -> Wire:
        """A segment at stream `offset`, acknowledging the peer's bytes up to `acked`."""
        source, destination = (CLIENT, SERVER) if from_client else (SERVER, CLIENT)
        number = len(self.segments) + 1
        seq = (self.isn[from_client] + 1 + offset) % 2**32
        ack = (self.isn[not from_client] + 1 + acked) % 2**32
        self.segments.append(Segment(number, number * MS, src or source, destination, seq, ack,
                                     flags, payload, 0))
        return self

    def handshake(self) -> Wire:
        self.add(True, -1, flags=SYN)
        return self.add(False, -1, flags=SYN | ACK)

    def fin(self, from_client: bool, offset: int, acked: int) -> Wire:
        return self.add(from_client, offset, acked=acked, flags=FIN | ACK)

    def events(self, limits: HoldLimits | None = None) -> list[StreamEvent]:
        return list(reassemble(self.segments, limits))


def _stream(events: list[StreamEvent], src: Address) -> bytes:
    chunks = [e for e in events if isinstance(e, Chunk) and e.src == src]
    assert [c.offset for c in chunks] == [sum(len(c.data) for c in chunks[:i]) for i in range(len(chunks))]
    return b"".join(c.data for c in chunks)


def _gaps(events: list[StreamEvent]) -> list[tuple[int, int, str]]:
    return [(e.offset, e.size, e.reason) for e in events if isinstance(e, Gap)]


# --- reassembly ---

def test_ack_before_data_in_both_directions_over_several_segments() -> None:
    wire = Wire().handshake()
    wire.add(False, 0, acked=3000, flags=ACK)  # the broker acknowledges three segments not yet seen
    for i in range(3):
        wire.add(True, i * 1000, DATA[i * 1000:(i + 1) * 1000])
    wire.add(True, 3000, acked=2000, flags=ACK)  # the client acknowledges the answer first
    wire.add(False, 0, DATA[:1000], acked=3000)
    wire.add(True, 3000, acked=2000, flags=ACK)  # again: still ahead of the data
    wire.add(False, 1000, DATA[1000:2000], acked=3000)
    events = wire.events()
    assert _gaps(events) == []
    assert not any(isinstance(e, Duplicate) for e in events)
    assert _stream(events, CLIENT) == DATA[:3000] and _stream(events, SERVER) == DATA[:2000]


def test_hole_filled_100_packets_later_is_no_gap() -> None:
    wire = Wire().handshake()
    wire.add(True, 0, DATA[:100])
    wire.add(True, 200, DATA[200:300])  # 100..200 is missing
    for _ in range(100):  # the broker acknowledges everything, over and over
        wire.add(False, 0, acked=300, flags=ACK)
    wire.add(True, 100, DATA[100:200])
    events = wire.events()
    assert _gaps(events) == [] and not any(isinstance(e, Duplicate) for e in events)
    assert _stream(events, CLIENT) == DATA[:300]


def test_bytes_after_an_ack_of_them_are_data_not_retransmissions() -> None:
    wire = Wire().handshake()
    wire.add(False, 0, acked=500, flags=ACK)
    wire.add(True, 0, DATA[:500])
    events = wire.events()
    assert [type(e) for e in events] == [Chunk, Closed]


def test_hole_never_filled_before_fin_is_lost_after_the_grace() -> None:
    wire = Wire().handshake()
    wire.add(True, 0, DATA[:100]).add(True, 200, DATA[200:300])  # 100..200 never comes
    wire.add(False, 0, acked=300, flags=ACK)
    wire.fin(True, 300, acked=0).fin(False, 0, acked=301)
    quiet = HoldLimits().acked_wait // MS + 5
    for _ in range(quiet):  # another connection goes on; this one's grace runs out
        wire.add(True, 0, b"x", src=OTHER)
    wire.add(True, 1, flags=RST, src=OTHER)
    events = wire.events()
    assert _gaps(events) == [(100, 100, ACKED)]
    assert [(e.offset, e.data) for e in events if isinstance(e, Chunk) and e.src == CLIENT] == [
        (0, DATA[:100]), (200, DATA[200:300])]
    closed = [e for e in events if isinstance(e, Closed)]
    assert closed[0].first == CLIENT  # closed after the grace, before the other connection's RST
    assert closed[1].first == OTHER


def test_late_segment_after_both_fins_still_fills_the_hole() -> None:
    wire = Wire().handshake()
    wire.add(True, 0, DATA[:100]).add(True, 200, DATA[200:300])
    wire.fin(True, 300, acked=0).fin(False, 0, acked=301)
    wire.add(True, 100, DATA[100:200])  # reordered behind the FINs
    events = wire.events()
    assert _gaps(events) == [] and _stream(events, CLIENT) == DATA[:300]


def test_hole_older_than_the_window_is_lost_before_the_end() -> None:
    wire = Wire().handshake()
    wire.add(True, 0, DATA[:100]).add(True, 200, DATA[200:300])  # no ACK says anything
    wire.segments.append(Segment(len(wire.segments) + 1, HOLE_WAIT + 10 * MS, CLIENT, SERVER,
                                 1001 + 300, 90001, PSH | ACK, DATA[300:400], 0))
    wire.add(True, 100, DATA[100:200])  # too late: the hole was declared lost
    events = wire.events()
    assert _gaps(events) == [(100, 100, LOST)]
    assert [e.offset for e in events if isinstance(e, Duplicate)] == [100]


def test_held_bytes_are_bounded_per_connection_both_directions_together() -> None:
    wire = Wire().handshake()
    wire.add(True, 0, b"x").add(False, 0, b"y")
    wire.add(True, 1001, DATA[:3000])  # each direction holds 3000 bytes behind a hole
    wire.add(False, 1001, DATA[:3000])
    events = wire.events(HoldLimits(max_held=5000))
    assert (1, 1000, OVERFLOW) in _gaps(events)
    assert _gaps(events)[0] == (1, 1000, OVERFLOW)  # the second direction overflowed the bound


# --- framing: real capture files ---

RESPONSE_SIZE = 10_000
SEGMENT = 1448


def _fetch_like_response(correlation_id: int) -> bytes:
    """A 10 KB response whose body is full of bytes that look like size prefixes."""
    unit = kafka_response(correlation_id + 1, b"\x00" * 8)  # a header of a later response
    body = (unit * (RESPONSE_SIZE // len(unit)))[:RESPONSE_SIZE - 8]
    return kafka_response(correlation_id, body)


def _busy_conversation(count: int) -> Conversation:
    talk = Conversation.between(("10.0.0.1", 40000), ("10.0.0.2", 9092))
    talk.handshake()
    for i in range(1, count + 1):
        talk.send(True, kafka_request(1, 4, i, b"consumer-1", b"\x00" * 30))
        talk.send(False, _fetch_like_response(i), chunk=SEGMENT)
    talk.close()
    return talk


def _read(tmp_path: Path, packets: list[ScapyPacket]) -> tuple[list[Frame], list[Note]]:
    path = write_pcap(tmp_path / "c.pcap", records(packets, wrap=ethernet))
    notes: list[Note] = []
    return list(read_frames(path, report=notes.append)), notes


def _correlation(frame: Frame) -> int:
    return int.from_bytes(frame.data[4:8] if str(frame.direction) == "response" else frame.data[8:12],
                          "big", signed=True)


def _response_packet(packets: list[ScapyPacket], correlation_id: int, index: int) -> int:
    """Position of the `index`-th data segment of response `correlation_id` (the i-th
    response is the i-th run of segments from the broker)."""
    per_response = -(-RESPONSE_SIZE // SEGMENT)
    wanted = (correlation_id - 1) * per_response + index
    data = [i for i, p in enumerate(packets) if p[TCP].sport == 9092 and bytes(p[TCP].payload)]
    return data[wanted]


def test_resynchronisation_across_a_gap_in_a_stream_of_10kb_responses(tmp_path: Path) -> None:
    talk = _busy_conversation(12)
    lost = _response_packet(talk.packets, 5, 0)  # the head of response 5, its size prefix
    frames, _ = _read(tmp_path, talk.packets[:lost] + talk.packets[lost + 1:])
    responses = [(_correlation(f), len(f.data), f.complete) for f in frames
                 if str(f.direction) == "response"]
    assert responses == [(i, RESPONSE_SIZE, True) for i in range(1, 13) if i != 5]
    resynchronised = next(f for f in frames if str(f.direction) == "response" and _correlation(f) == 6)
    assert any("resynchronised" in n.message for n in resynchronised.notes)


def test_false_size_prefixes_right_after_a_gap_are_not_taken(tmp_path: Path) -> None:
    talk = _busy_conversation(6)
    last_of_3 = _response_packet(talk.packets, 3, -(-RESPONSE_SIZE // SEGMENT) - 1)
    head_of_4 = _response_packet(talk.packets, 4, 0)
    packets = [p for i, p in enumerate(talk.packets) if i not in (last_of_3, head_of_4)]
    frames, _ = _read(tmp_path, packets)
    # After the gap, response 4's body reads everywhere as headers of 12-byte responses
    # to request 5 (in flight), and its last 8 bytes as one that would swallow the
    # header of response 5: none is taken, framing resumes at response 5.
    responses = [(_correlation(f), len(f.data), f.complete) for f in frames
                 if str(f.direction) == "response"]
    assert responses == [(1, RESPONSE_SIZE, True), (2, RESPONSE_SIZE, True),
                         (3, RESPONSE_SIZE - RESPONSE_SIZE % SEGMENT, False),
                         (5, RESPONSE_SIZE, True), (6, RESPONSE_SIZE, True)]


def test_response_whose_request_was_lost_is_reported_with_request_missing(tmp_path: Path) -> None:
    talk = Conversation.between(("10.0.0.1", 40000), ("10.0.0.2", 9092))
    talk.handshake()
    for i in range(1, 4):
        talk.send(True, metadata_request(i))
        talk.send(False, kafka_response(i, b"\x00" * 40))
    del talk.packets[5]  # request 2
    path = write_pcap(tmp_path / "c.pcap", records(talk.packets, wrap=ethernet))
    messages = list(read_messages(path))
    answer = next(m for m in messages if not m.is_request and m.correlation_id == 2)
    assert any("request missing" in n.message for n in answer.all_notes())
    assert [(m.is_request, m.correlation_id) for m in messages if m.pair is not None] == [
        (True, 1), (False, 1), (True, 3), (False, 3)]


def test_capture_without_kafka_says_which_ports_it_holds(tmp_path: Path) -> None:
    talk = Conversation.between(("10.0.0.1", 50000), ("10.0.0.2", 8080))
    talk.handshake()
    talk.send(True, b"GET / HTTP/1.1\r\nHost: example\r\n\r\n")
    talk.send(False, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    frames, notes = _read(tmp_path, talk.packets)
    assert frames == []
    assert [n.message for n in notes] == [
        "no Kafka found: 1 TCP connection seen, on port 8080; Kafka ports: 9092; "
        "if Kafka runs on another port, name it with --port"]


def _then_another_connection(tmp_path: Path, quiet: Conversation, exchanges: int) -> Path:
    """A capture of `quiet`'s packets, then, 5 s later, `exchanges` exchanges of another
    connection, whose packets move capture time on."""
    busy = Conversation.between(("10.0.0.3", 40001), ("10.0.0.2", 9092))
    busy.handshake()
    for i in range(1, exchanges + 1):
        busy.send(True, metadata_request(i))
        busy.send(False, kafka_response(i, b"\x00" * 40))
    return write_pcap(tmp_path / "c.pcap", records(quiet.packets, wrap=ethernet)
                      + records(busy.packets, start=1_700_000_005.0, wrap=ethernet))


def _order(path: Path, jobs: int) -> list[tuple[int, bool, int | None]]:
    """Each message's connection, direction and correlation id, read with `jobs` processes."""
    from kdissect import parallel

    messages = read_messages(path) if jobs == 1 else (m for m, _prepared in parallel.read_messages([path], jobs))
    return [(m.frame.connection.index, m.is_request, m.correlation_id) for m in messages]


def test_a_response_waiting_for_its_request_on_a_silent_connection_goes_once_capture_time_passes(
        tmp_path: Path) -> None:
    """Response 2 acknowledges request bytes the capture lost, so it waits for them (they
    may still come, reordered), up to a second of capture time. Its connection then falls
    silent; another one's packets, 5 s later, move capture time on: the response comes out
    at its own place, before them, not at the end of the capture. Two jobs agree."""
    quiet = Conversation.between(("10.0.0.1", 40000), ("10.0.0.2", 9092))
    quiet.handshake()
    for i in (1, 2):
        quiet.send(True, metadata_request(i))
        quiet.send(False, kafka_response(i, b"\x00" * 40))
    del quiet.packets[5]  # request 2: its bytes are acknowledged by the response, never seen
    path = _then_another_connection(tmp_path, quiet, 3)
    expected = [(0, True, 1), (0, False, 1), (0, False, 2),
                (1, True, 1), (1, False, 1), (1, True, 2), (1, False, 2), (1, True, 3), (1, False, 3)]
    assert _order(path, 1) == expected and _order(path, 2) == expected


def test_bytes_held_behind_a_hole_on_a_silent_connection_go_once_its_wait_runs_out(
        tmp_path: Path) -> None:
    """A segment of response 1 is lost; response 2 comes whole behind it, and the client's
    next request acknowledges the lost bytes. The connection then falls silent, with no
    FIN; another one's packets, 5 s later, move capture time on: the hole is declared lost
    at once, and both responses come out there, before that connection's messages, not at
    the end of the capture. Two jobs agree."""
    quiet = Conversation.between(("10.0.0.1", 40000), ("10.0.0.2", 9092))
    quiet.handshake()
    quiet.send(True, metadata_request(1))
    lost = len(quiet.packets) + 1  # the second of response 1's three segments
    quiet.send(False, kafka_response(1, b"\x00" * 3000), chunk=1024)
    quiet.send(True, metadata_request(2))
    quiet.send(False, kafka_response(2, b"\x00" * 40))
    del quiet.packets[lost]
    path = _then_another_connection(tmp_path, quiet, 2)
    expected = [(0, True, 1), (0, True, 2), (0, False, 1), (0, False, 2),
                (1, True, 1), (1, False, 1), (1, True, 2), (1, False, 2)]
    assert _order(path, 1) == expected and _order(path, 2) == expected
    messages = list(read_messages(path))
    assert not messages[2].frame.complete and messages[3].frame.complete
