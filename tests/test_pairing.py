"""Pairing responses to requests by correlation id, per connection, in FIFO order."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kdissect.ingest.framing import Connection, Direction, Frame
from kdissect.pair.message import Message, message_from_frame
from kdissect.pair.pairing import Pairer, Sequencer, pair_messages, release_notes

CLIENT = (bytes([127, 0, 0, 1]), 50000)
SERVER = (bytes([127, 0, 0, 1]), 9092)


def request_bytes(api_key: int, version: int, correlation_id: int, client_id: bytes = b"c",
                  body: bytes = b"") -> bytes:  # fmt: skip
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def response_bytes(correlation_id: int, body: bytes = b"\x00\x00") -> bytes:
    payload = struct.pack(">i", correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


def frame(data: bytes, direction: Direction, packet: int, time: float, stream: int = 0) -> Frame:
    connection = Connection(stream, CLIENT, (SERVER[0], SERVER[1] + stream))
    ns = round(time * 1e9)  # frames carry integer nanoseconds
    return Frame(connection, direction, 0, data, packet, ns, packet, ns)


def run(frames: list[Frame]) -> list[Message]:
    parsed = (message_from_frame(n, f) for n, f in enumerate(frames, 1))
    return list(pair_messages(parsed))


def test_response_pairs_with_request_and_takes_its_api_and_latency():
    out = run([
        frame(request_bytes(3, 1, 7), Direction.REQUEST, 1, 10.0),
        frame(response_bytes(7), Direction.RESPONSE, 2, 10.0125),
    ])  # fmt: skip
    request, response = out
    assert request.pair is response and response.pair is request
    assert (response.api_key, response.api_version) == (3, 1)
    assert response.latency is not None and abs(response.latency - 0.0125) < 1e-9
    assert request.client_id == "c"
    assert not request.all_notes() and not response.all_notes()


def test_correlation_ids_are_per_connection():
    out = run([
        frame(request_bytes(3, 1, 1), Direction.REQUEST, 1, 1.0, stream=0),
        frame(request_bytes(18, 0, 1), Direction.REQUEST, 2, 1.1, stream=1),
        frame(response_bytes(1), Direction.RESPONSE, 3, 1.2, stream=1),
        frame(response_bytes(1), Direction.RESPONSE, 4, 1.3, stream=0),
    ])  # fmt: skip
    assert [m.number for m in out] == [1, 2, 3, 4]
    assert out[2].pair is out[1] and out[2].api_key == 18
    assert out[3].pair is out[0] and out[3].api_key == 3


def test_response_without_request_keeps_header_and_says_request_missing():
    (response,) = run([frame(response_bytes(42), Direction.RESPONSE, 1, 1.0)])
    assert response.correlation_id == 42 and response.api_key is None
    assert any("request missing" in n.message for n in response.all_notes())


def test_unanswered_request_gets_a_note_at_the_end():
    out = run([
        frame(request_bytes(3, 1, 1), Direction.REQUEST, 1, 1.0),
        frame(request_bytes(3, 1, 2), Direction.REQUEST, 2, 1.1),
        frame(response_bytes(2), Direction.RESPONSE, 3, 1.2),
    ])  # fmt: skip
    first = next(m for m in out if m.number == 1)
    assert first.pair is None
    assert any("never answered" in n.message for n in first.notes)
    response = next(m for m in out if m.number == 3)
    assert any("out of FIFO order" in n.message for n in response.notes)


def test_produce_with_acks_zero_expects_no_response():
    # Produce v3 body: transactional_id (null), acks=0, timeout, no topics.
    body = struct.pack(">hhii", -1, 0, 1000, 0)
    (request,) = run([frame(request_bytes(0, 3, 5, body=body), Direction.REQUEST, 1, 1.0)])
    assert not request.expects_response
    assert not request.notes


def test_produce_with_acks_one_expects_a_response():
    body = struct.pack(">hhii", -1, 1, 1000, 0)
    (request,) = run([frame(request_bytes(0, 3, 5, body=body), Direction.REQUEST, 1, 1.0)])
    assert request.expects_response
    assert [n.id for n in request.notes] == ["kafka.unanswered"]


def test_duplicate_correlation_id_in_flight_is_noted():
    out = run([
        frame(request_bytes(3, 1, 9), Direction.REQUEST, 1, 1.0),
        frame(request_bytes(3, 1, 9), Direction.REQUEST, 2, 1.1),
        frame(response_bytes(9), Direction.RESPONSE, 3, 1.2),
    ])  # fmt: skip
    second = next(m for m in out if m.number == 2)
    assert any("duplicate correlation id 9" in n.message for n in second.notes)
    assert next(m for m in out if m.number == 3).pair is second


def test_requests_leave_in_capture_order_already_paired():
    frames = [frame(request_bytes(3, 1, i), Direction.REQUEST, i, float(i)) for i in range(1, 4)]
    frames += [frame(response_bytes(i), Direction.RESPONSE, 3 + i, 3.0 + i) for i in range(1, 4)]
    pairer, sequencer = Pairer(), Sequencer()
    released: list[Message] = []
    for number, item in enumerate(frames, 1):
        message = message_from_frame(number, item)
        pairer.add(message)
        released.extend(sequencer.push(message))
        assert all(m.pair is not None for m in released)
    assert [m.number for m in released] == [1, 2, 3, 4, 5, 6]


def test_holding_is_bounded_by_capture_time():
    sequencer = Sequencer(hold_seconds=5.0)
    pairer = Pairer()
    stuck = message_from_frame(1, frame(request_bytes(3, 1, 1), Direction.REQUEST, 1, 0.0))
    pairer.add(stuck)
    assert list(sequencer.push(stuck)) == []
    later = message_from_frame(2, frame(request_bytes(3, 1, 2), Direction.REQUEST, 2, 6.0))
    pairer.add(later)
    assert list(sequencer.push(later)) == [stuck]
    overdue = [n for n in stuck.notes if n.id == "kafka.response_overdue"]
    assert len(overdue) == 1 and "6.000 s and 1 later message:" in overdue[0].message


def test_holding_is_bounded_in_count():
    sequencer = Sequencer(hold_messages=3)
    released = []
    for i in range(1, 6):
        message = message_from_frame(i, frame(request_bytes(3, 1, i), Direction.REQUEST, i, 0.0))
        released.extend(sequencer.push(message))
    assert [m.number for m in released] == [1, 2]


def test_holding_is_bounded_in_bytes():
    sequencer = Sequencer(hold_bytes=100)
    stuck = message_from_frame(1, frame(request_bytes(3, 1, 1), Direction.REQUEST, 1, 0.0))
    assert list(sequencer.push(stuck)) == []
    big = message_from_frame(2, frame(response_bytes(99, body=bytes(200)), Direction.RESPONSE, 2, 0.1))
    assert list(sequencer.push(big)) == [stuck, big]  # the head leaves before memory grows further


def test_a_client_id_cut_short_is_noted_even_when_the_whole_id_was_seen_before():
    whole = request_bytes(3, 1, 1, client_id=b"cut-me-client")
    cut = request_bytes(3, 1, 2, client_id=b"cut-me-client")
    cut = cut[:4] + cut[4:-6]  # the frame ends inside the client id
    first, second = (message_from_frame(n, frame(data, Direction.REQUEST, n, 1.0))
                     for n, data in ((1, whole), (2, cut)))
    assert first.client_id == "cut-me-client" and not first.notes
    assert second.client_id == "cut-me-"
    assert [n.message for n in second.notes] == ["request header cut inside client_id"]


def test_a_negative_client_id_length_is_a_null_client_id():
    data = request_bytes(3, 1, 1, client_id=b"")
    data = data[:12] + struct.pack(">h", -1) + data[14:]
    assert message_from_frame(1, frame(data, Direction.REQUEST, 1, 1.0)).client_id is None


def _flexible_produce(acks: int, *, tagged: bytes = b"\x00", transactional_id: bytes = b"\x00") -> bytes:
    """Produce v9: the header's tagged fields, then a compact nullable transactional id and acks."""
    return request_bytes(0, 9, 5, client_id=b"p",
                         body=tagged + transactional_id + struct.pack(">hi", acks, 1000) + b"\x01\x00")


def test_flexible_produce_acks_read_past_tagged_fields_and_long_transactional_ids():
    long_id = b"t" * 200  # its compact length takes two varint bytes
    cases = [
        (_flexible_produce(0), False),
        (_flexible_produce(1), True),
        (_flexible_produce(0, tagged=b"\x01\x05\x02ab"), False),  # one tagged field of 2 bytes
        (_flexible_produce(0, transactional_id=b"\xc9\x01" + long_id), False),
        (_flexible_produce(-1, transactional_id=b"\x04abc"), True),
        (_flexible_produce(0)[:17], True),  # cut before acks: unreadable, so a response is expected
    ]
    for data, expects in cases:
        assert message_from_frame(1, frame(data, Direction.REQUEST, 1, 1.0)).expects_response is expects


RELEASE_BOUNDS = (2.0, 5, 400)  # seconds, messages, bytes: small, so that every bound is met


@st.composite
def exchanges(draw: st.DrawFn) -> tuple[list[Frame], bool]:
    """Requests and responses on three connections: answered in order, out of order or never,
    correlation ids reused, bodies of any size, time going on (or, `backwards`, at times back)."""
    backwards = draw(st.booleans())
    frames: list[Frame] = []
    in_flight: list[list[int]] = [[], [], []]
    time = 0.0
    for packet in range(1, draw(st.integers(1, 40)) + 1):
        stream = draw(st.integers(0, 2))
        time += draw(st.floats(-1.0 if backwards else 0.0, 3.0))
        body = b"\x00" * draw(st.integers(0, 150))
        flight = in_flight[stream]
        if flight and draw(st.booleans()):
            correlation = flight.pop(draw(st.integers(0, len(flight) - 1)) if draw(st.booleans()) else 0)
            frames.append(frame(response_bytes(correlation, b"\x00\x00" + body), Direction.RESPONSE, packet, time,
                                stream))
        else:
            correlation = draw(st.integers(0, 6))
            flight.append(correlation)
            frames.append(frame(request_bytes(18, 0, correlation, body=body), Direction.REQUEST, packet, time, stream))
    return frames, backwards


@given(exchanges())
@settings(max_examples=300, deadline=None)
def test_release_notes_are_those_of_releasing_in_capture_order(drawn: tuple[list[Frame], bool]) -> None:
    frames, _backwards = drawn
    pairer, sequencer = Pairer(), Sequencer(*RELEASE_BOUNDS)
    released: list[Message] = []
    for number, found in enumerate(frames, 1):
        message = message_from_frame(number, found)
        pairer.add(message)
        released += sequencer.push(message)
    released += sequencer.finish()
    messages = sorted(released, key=lambda m: m.number)
    place = {id(m): index for index, m in enumerate(messages)}
    releasing = {"kafka.response_overdue", "kafka.unanswered"}
    expected = [(index, note) for index, m in enumerate(messages) for note in m.notes if note.id in releasing]
    waiting = [m.is_request and m.expects_response and m.correlation_id is not None for m in messages]
    answered = [place[id(m.pair)] if m.is_request and m.pair is not None else len(messages) for m in messages]
    assert release_notes(waiting, answered, [m.frame.last_ns for m in messages], [m.size for m in messages],
                         *RELEASE_BOUNDS) == expected
