"""Kafka framing over crafted captures: every pathology, every link layer, malformed framing.

Each test writes a real capture file (scapy packets, struct file headers), runs
the whole first half of the pipeline over it and asserts the exact frames.
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from craft import (
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
    LINKTYPE_SLL,
    LINKTYPE_SLL2,
    Conversation,
    Record,
    ethernet,
    kafka_request,
    kafka_response,
    metadata_request,
    metadata_response,
    pcap_bytes,
    pcapng_interface,
    pcapng_packet,
    pcapng_section,
    records,
    write_pcap,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.layers.inet6 import IPv6ExtHdrDestOpt, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting
from scapy.layers.l2 import CookedLinux, CookedLinuxV2
from scapy.packet import Packet as ScapyPacket

from kdissect.ingest.capture import CaptureError
from kdissect.ingest.framing import Frame
from kdissect.notes import Note, Severity
from kdissect.pipeline import read_frames

CLIENT, SERVER = ("10.0.0.1", 40000), ("10.0.0.2", 9092)
REQUESTS = [metadata_request(1), metadata_request(2, b"orders"), metadata_request(3, b"x" * 50)]
RESPONSES = [metadata_response(1, 120), metadata_response(2, 64), metadata_response(3, 300)]
Shape = tuple[int, str, int, bytes, int, int, bool]  # index, direction, offset, data, packets, complete


def _shape(frame: Frame) -> Shape:
    return (frame.connection.index, str(frame.direction), frame.stream_offset, frame.data,
            frame.first_packet, frame.last_packet, frame.complete)


def _read(tmp_path: Path, packets: Sequence[ScapyPacket | bytes], *, linktype: int = LINKTYPE_ETHERNET,
          wrap: Callable[[ScapyPacket], ScapyPacket | bytes] | None = ethernet,
          **options: object) -> tuple[list[Frame], list[Note]]:
    path = write_pcap(tmp_path / "c.pcap", records(packets, wrap=wrap), linktype)
    notes: list[Note] = []
    frames = list(read_frames(path, report=notes.append, **options))  # type: ignore[arg-type]
    return frames, notes


def _exchange(conversation: Conversation, count: int = 3, *, chunk: int | None = None) -> None:
    for request, response in zip(REQUESTS[:count], RESPONSES[:count], strict=True):
        conversation.send(True, request, chunk=chunk)
        conversation.send(False, response, chunk=chunk)


def _offsets(items: list[bytes]) -> list[int]:
    out, position = [], 0
    for item in items:
        out.append(position)
        position += len(item)
    return out


def _plain_frames(first_packet: int = 4) -> list[Shape]:
    """The frames of handshake + three exchanges, one segment each."""
    shapes = []
    request_offsets, response_offsets = _offsets(REQUESTS), _offsets(RESPONSES)
    for i in range(3):
        number = first_packet + 2 * i
        shapes.append((0, "request", request_offsets[i], REQUESTS[i], number, number, True))
        shapes.append((0, "response", response_offsets[i], RESPONSES[i], number + 1, number + 1, True))
    return shapes


def _conversation(**isn: int) -> Conversation:
    return Conversation.between(CLIENT, SERVER, **isn)


def test_plain_conversation(tmp_path: Path) -> None:
    talk = _conversation()
    talk.handshake()
    _exchange(talk)
    talk.close()
    frames, notes = _read(tmp_path, talk.packets)
    assert [_shape(f) for f in frames] == _plain_frames()
    assert notes == [] and all(f.notes == () for f in frames)
    connection = frames[0].connection
    assert str(connection) == "10.0.0.1:40000 -> 10.0.0.2:9092"
    assert frames[0].first_ns == 1_700_000_000_003_000_000


def test_reordered_segments(tmp_path: Path) -> None:
    talk = _conversation()
    talk.handshake()
    first, second, third = talk.send(True, REQUESTS[0], chunk=11)
    talk.packets[3:6] = [third, first, second]  # the capture holds them 3, 1, 2
    talk.send(False, RESPONSES[0])
    frames, notes = _read(tmp_path, talk.packets)
    assert [_shape(f) for f in frames] == [
        (0, "request", 0, REQUESTS[0], 4, 6, True),
        (0, "response", 0, RESPONSES[0], 7, 7, True)]
    assert notes == []


def test_exact_retransmission_is_delivered_once(tmp_path: Path) -> None:
    talk = _conversation()
    talk.handshake()
    talk.send(True, REQUESTS[0][:30])
    talk.segment(True, REQUESTS[0][:30], seq=talk.client.seq - 30)  # the same bytes again
    talk.send(True, REQUESTS[0][30:])
    talk.send(False, RESPONSES[0])
    frames, _ = _read(tmp_path, talk.packets)
    assert [_shape(f) for f in frames] == [
        (0, "request", 0, REQUESTS[0], 4, 6, True), (0, "response", 0, RESPONSES[0], 7, 7, True)]
    assert [n.message for n in frames[0].notes] == ["packet 5: 30 bytes retransmitted (delivered once)"]


def test_overlapping_retransmission_is_noted_at_its_offset(tmp_path: Path) -> None:
    talk = _conversation()
    talk.handshake()
    talk.send(True, REQUESTS[0][:30])
    talk.segment(True, REQUESTS[0][20:], seq=talk.client.seq - 10)  # 10 old bytes, then new ones
    frames, _ = _read(tmp_path, talk.packets)
    assert [_shape(f) for f in frames] == [(0, "request", 0, REQUESTS[0], 4, 5, True)]
    assert [(n.severity, n.message, n.offset) for n in frames[0].notes] == [
        (Severity.CHAT, "10 bytes retransmitted (delivered once)", 30)]


def test_one_byte_segments(tmp_path: Path) -> None:
    talk = _conversation()
    talk.handshake()
    talk.send(True, REQUESTS[0], chunk=1)
    talk.send(False, RESPONSES[0], chunk=1)
    frames, notes = _read(tmp_path, talk.packets)
    request_end = 3 + len(REQUESTS[0])
    response_end = request_end + len(RESPONSES[0])
    assert [_shape(f) for f in frames] == [
        (0, "request", 0, REQUESTS[0], 4, request_end, True),
        (0, "response", 0, RESPONSES[0], request_end + 1, response_end, True)]
    assert notes == []


def test_lost_segment_inside_a_frame(tmp_path: Path) -> None:
    talk = _conversation()
    talk.handshake()
    talk.send(True, REQUESTS[0])
    pieces = talk.send(True, REQUESTS[1], chunk=10)
    talk.send(True, REQUESTS[2])
    talk.packets.remove(pieces[1])  # bytes 10..19 of the second request never captured
    frames, _ = _read(tmp_path, talk.packets)
    second_start = len(REQUESTS[0])
    last = 4 + len(pieces)  # packet number of the third request (one packet removed)
    assert [_shape(f) for f in frames] == [
        (0, "request", 0, REQUESTS[0], 4, 4, True),
        (0, "request", second_start, REQUESTS[1][:10], 5, 5, False),
        (0, "request", second_start + len(REQUESTS[1]), REQUESTS[2], last, last, True)]
    (lost,) = frames[1].notes
    assert lost.severity is Severity.WARN and lost.offset == 10
    assert lost.message.startswith("10 bytes missing from offset 0xa of this frame")
    assert frames[2].notes == ()  # the frame boundary was known: no resynchronisation needed


def test_lost_frame_resynchronises_on_the_next_header(tmp_path: Path) -> None:
    talk = _conversation()
    talk.handshake()
    _exchange(talk)
    del talk.packets[5]  # the second request, one whole segment
    frames, _ = _read(tmp_path, talk.packets)
    # The broker acknowledged the lost request's bytes, so the hole might still be filled
    # by a late segment: the request after it is held, and the responses wait for their
    # requests, until the hole is known lost (here: the end of the capture).
    assert [(f.direction.value, f.data) for f in frames] == [
        ("request", REQUESTS[0]), ("response", RESPONSES[0]), ("request", REQUESTS[2]),
        ("response", RESPONSES[1]), ("response", RESPONSES[2])]
    assert frames[2].stream_offset == len(REQUESTS[0]) + len(REQUESTS[1])
    assert [n.message for n in frames[2].notes] == [
        f"{len(REQUESTS[1])} bytes missing before this frame, at stream offset "
        f"{len(REQUESTS[0])} (segments lost (acknowledged, never captured))"]


def test_lost_response_header_resynchronises_on_an_in_flight_correlation_id(tmp_path: Path) -> None:
    responses = [*RESPONSES, metadata_response(4, 90)]
    talk = _conversation()
    talk.handshake()
    for request in [*REQUESTS, metadata_request(4)]:
        talk.send(True, request)
    talk.send(False, responses[0])
    talk.send(False, responses[1][:30])
    (lost,) = talk.send(False, responses[1][30:] + responses[2][:20])
    talk.send(False, responses[2][20:])
    talk.send(False, responses[3])
    talk.packets.remove(lost)
    frames, _ = _read(tmp_path, talk.packets)
    responses_seen = [f for f in frames if f.direction.value == "response"]
    assert [(f.data, f.complete) for f in responses_seen] == [
        (responses[0], True), (responses[1][:30], False), (responses[3], True)]
    assert responses_seen[2].stream_offset == sum(map(len, responses[:3]))
    assert [n.message for n in responses_seen[2].notes] == [
        f"resynchronised: skipped {len(responses[2]) - 20} bytes before this frame"]


def test_response_to_a_lost_request_is_found_past_a_false_candidate(tmp_path: Path) -> None:
    # Request 2 is lost, and so is the head of response 1, whose remaining bytes hold a
    # false header (a large size, an id no request used) that can only be judged
    # megabytes later. Response 2 answers no request in flight, but its id lies between
    # the ids in flight, so it is confirmed as soon as its bytes are in, not skipped for
    # response 3.
    false_header = struct.pack(">ii", 262528, 0x10302D30)
    responses = [kafka_response(1, b"\xff" * 20 + false_header + b"\xff" * 40),
                 kafka_response(2, b"\xff" * 3000), kafka_response(3, b"\xff" * 50),
                 kafka_response(4, b"\xff" * 50)]
    talk = _conversation()
    talk.handshake()
    sent = [talk.send(True, metadata_request(i)) for i in range(1, 5)]
    (head, _rest) = talk.send(False, responses[0][:12]) + talk.send(False, responses[0][12:])
    talk.send(False, responses[1], chunk=1000)
    talk.send(False, responses[2] + responses[3])
    for lost in (*sent[1], head):
        talk.packets.remove(lost)
    frames, _ = _read(tmp_path, talk.packets)
    responses_seen = [f for f in frames if f.direction.value == "response"]
    assert [(f.data, f.complete) for f in responses_seen] == [(r, True) for r in responses[1:]]
    assert [n.message for n in responses_seen[0].notes] == [
        "12 bytes missing before this frame, at stream offset 0 (segments lost (never captured))",
        f"resynchronised: skipped {len(responses[0]) - 12} bytes before this frame"]


def test_mid_stream_start(tmp_path: Path) -> None:
    talk = _conversation(client_isn=7000, server_isn=9000)
    talk.handshake()
    _exchange(talk, chunk=25)
    talk.packets = talk.packets[3 + 1:]  # no handshake, and the first request's first segment gone
    frames, notes = _read(tmp_path, talk.packets)
    # The first response's request was not captured: its header is confirmed only by the
    # next response (correlation id 2 follows 1), so it comes out after request 2.
    assert [(f.direction.value, f.data, f.complete) for f in frames] == [
        ("request", REQUESTS[1], True), ("response", RESPONSES[0], True),
        ("response", RESPONSES[1], True), ("request", REQUESTS[2], True),
        ("response", RESPONSES[2], True)]
    skipped = len(REQUESTS[0]) - 25
    assert [n.message for n in frames[0].notes] == [
        f"resynchronised: skipped {skipped} bytes before this frame"]
    assert frames[0].stream_offset == skipped  # offsets count from the first byte seen
    assert frames[1].stream_offset == 0 and frames[1].notes == ()
    assert notes == []


def test_sequence_wrap_around(tmp_path: Path) -> None:
    talk = _conversation(client_isn=2**32 - 100, server_isn=2**32 - 7)
    talk.handshake()
    _exchange(talk, chunk=30)
    frames, notes = _read(tmp_path, talk.packets)
    assert [(f.direction.value, f.data, f.complete) for f in frames] == [
        (d, m, True) for pair in zip(REQUESTS, RESPONSES, strict=True)
        for d, m in zip(("request", "response"), pair, strict=True)]
    assert notes == []


def _cooked(packet: ScapyPacket) -> ScapyPacket:
    return CookedLinux(pkttype=0, proto=0x86DD if packet.version == 6 else 0x0800) / packet


def _cooked2(packet: ScapyPacket) -> ScapyPacket:
    return CookedLinuxV2(proto=0x86DD if packet.version == 6 else 0x0800) / packet


def _null_big_endian(packet: ScapyPacket) -> bytes:
    return struct.pack(">I", 2) + bytes(packet)


def _null_little_endian(packet: ScapyPacket) -> bytes:
    return struct.pack("<I", 2) + bytes(packet)


Wrap = Callable[[ScapyPacket], ScapyPacket | bytes]
LINK_LAYERS: dict[str, tuple[int, Wrap | None]] = {
    "802.1Q": (LINKTYPE_ETHERNET, lambda p: ethernet(p, tags=[("q", 42)])),
    "QinQ": (LINKTYPE_ETHERNET, lambda p: ethernet(p, tags=[("ad", 7), ("q", 42)])),
    "SLL": (LINKTYPE_SLL, _cooked),
    "SLL2": (LINKTYPE_SLL2, _cooked2),
    "NULL little-endian": (LINKTYPE_NULL, _null_little_endian),
    "NULL big-endian": (LINKTYPE_NULL, _null_big_endian),
    "raw IPv4 (101)": (LINKTYPE_RAW, None),
    "raw IPv4 (228)": (LINKTYPE_IPV4, None),
}


@pytest.mark.parametrize("name", list(LINK_LAYERS))
def test_link_layers(tmp_path: Path, name: str) -> None:
    linktype, wrap = LINK_LAYERS[name]
    talk = _conversation()
    talk.handshake()
    _exchange(talk)
    frames, notes = _read(tmp_path, talk.packets, linktype=linktype, wrap=wrap)
    assert [_shape(f) for f in frames] == _plain_frames()
    assert notes == []


@pytest.mark.parametrize("linktype", [LINKTYPE_RAW, LINKTYPE_IPV6])
def test_raw_ipv6(tmp_path: Path, linktype: int) -> None:
    talk = Conversation.between(("fd00::1", 40000), ("fd00::2", 9092))
    talk.handshake()
    _exchange(talk)
    frames, _ = _read(tmp_path, talk.packets, linktype=linktype, wrap=None)
    assert [_shape(f) for f in frames] == _plain_frames()
    assert str(frames[0].connection) == "[fd00::1]:40000 -> [fd00::2]:9092"


def test_ipv6_extension_headers(tmp_path: Path) -> None:
    talk = Conversation.between(("fd00::1", 40000), ("fd00::2", 9092))
    talk.handshake()
    _exchange(talk)

    def extended(packet: ScapyPacket) -> ScapyPacket:
        ip = packet.copy()
        tcp = ip.payload
        ip.remove_payload()
        ip.nh = None
        return (ip / IPv6ExtHdrHopByHop() / IPv6ExtHdrRouting(addresses=["fd00::9"])
                / IPv6ExtHdrDestOpt() / tcp)

    frames, _ = _read(tmp_path, talk.packets, linktype=LINKTYPE_RAW, wrap=extended)
    assert [_shape(f) for f in frames] == _plain_frames()


def test_pcapng_with_mixed_link_types(tmp_path: Path) -> None:
    first = _conversation()
    first.handshake()
    _exchange(first, 1)
    second = Conversation.between(("10.0.0.3", 40001), SERVER)
    second.handshake()
    _exchange(second, 1)
    blocks = [pcapng_section(), pcapng_interface(LINKTYPE_ETHERNET),
              pcapng_interface(LINKTYPE_SLL2, tsresol=9)]
    for index, (a, b) in enumerate(zip(first.packets, second.packets, strict=True)):
        blocks.append(pcapng_packet(Record(bytes(ethernet(a)), 10.0 + index, interface=0)))
        blocks.append(pcapng_packet(Record(bytes(_cooked2(b)), 10.5 + index, interface=1),
                                    units_per_second=10**9))
    path = tmp_path / "mixed.pcapng"
    path.write_bytes(b"".join(blocks))
    frames = list(read_frames(path))
    assert [(f.connection.index, f.direction.value, f.data, f.first_packet, f.first_ns)
            for f in frames] == [
        (0, "request", REQUESTS[0], 7, 13 * 10**9), (1, "request", REQUESTS[0], 8, 13_500_000_000),
        (0, "response", RESPONSES[0], 9, 14 * 10**9), (1, "response", RESPONSES[0], 10, 14_500_000_000)]
    assert frames[1].connection.client == (bytes([10, 0, 0, 3]), 40001)


@pytest.mark.parametrize(("big_endian", "nanoseconds"), [(True, False), (False, True), (True, True)])
def test_pcap_byte_order_and_resolution(tmp_path: Path, big_endian: bool, nanoseconds: bool) -> None:
    talk = _conversation()
    talk.handshake()
    _exchange(talk)
    path = write_pcap(tmp_path / "c.pcap", records(talk.packets, wrap=ethernet, step=0.000001),
                      big_endian=big_endian, nanoseconds=nanoseconds)
    frames = list(read_frames(path))
    assert [_shape(f) for f in frames] == _plain_frames()
    assert [f.first_ns - 1_700_000_000 * 10**9 for f in frames] == [
        (n - 1) * 1000 for n in range(4, 10)]


def test_snaplen_cut_frame_is_incomplete_and_the_next_one_is_whole(tmp_path: Path) -> None:
    talk = _conversation()
    talk.handshake()
    _exchange(talk)
    items = records(talk.packets, wrap=ethernet)
    snaplen = 14 + 20 + 20 + 100  # 100 bytes of TCP payload survive
    cut = [Record(i.data[:snaplen], i.timestamp, len(i.data)) for i in items]
    path = write_pcap(tmp_path / "snap.pcap", cut, snaplen=snaplen)
    frames = list(read_frames(path))
    expected = []
    for shape in _plain_frames():
        data = shape[3]
        expected.append((*shape[:3], data[:100], shape[4], shape[5], len(data) <= 100))
    assert [_shape(f) for f in frames] == expected
    response = frames[1]
    assert [n.message.split(";")[0] for n in response.notes] == [
        f"{len(RESPONSES[0]) - 100} bytes missing from offset 0x64 of this frame (cut by the snap length)"]


def test_four_tuple_reused_by_a_new_syn(tmp_path: Path) -> None:
    first = _conversation()
    first.handshake()
    _exchange(first, 1)
    second = _conversation(client_isn=123456789, server_isn=42)
    second.handshake()
    _exchange(second, 1)
    frames, _ = _read(tmp_path, first.packets + second.packets)
    assert [(f.connection.index, f.direction.value, f.stream_offset, f.data) for f in frames] == [
        (0, "request", 0, REQUESTS[0]), (0, "response", 0, RESPONSES[0]),
        (1, "request", 0, REQUESTS[0]), (1, "response", 0, RESPONSES[0])]


def test_capture_ends_inside_a_frame(tmp_path: Path) -> None:
    talk = _conversation()
    talk.handshake()
    talk.send(True, REQUESTS[0])
    talk.send(False, RESPONSES[0][:50])
    frames, _ = _read(tmp_path, talk.packets)
    assert [_shape(f) for f in frames] == [
        (0, "request", 0, REQUESTS[0], 4, 4, True), (0, "response", 0, RESPONSES[0][:50], 5, 5, False)]
    assert frames[1].notes[0].message == (
        f"the capture ends {len(RESPONSES[0]) - 50} bytes before the end of this frame")


def test_response_whose_server_spoke_first_gets_its_role_from_the_port(tmp_path: Path) -> None:
    talk = _conversation()
    talk.send(False, RESPONSES[0])  # mid-stream, the broker's bytes come first
    talk.send(True, REQUESTS[1])
    frames, _ = _read(tmp_path, talk.packets)
    # A response without its request is only taken when the data confirms it: here the
    # end of the capture, where it ends exactly with the bytes seen.
    assert [(f.direction.value, f.data, f.first_packet) for f in frames] == [
        ("request", REQUESTS[1], 2), ("response", RESPONSES[0], 1)]
    assert frames[1].connection.server == (bytes([10, 0, 0, 2]), 9092)


# --- which streams are Kafka ---

def test_kafka_detected_on_any_port(tmp_path: Path) -> None:
    talk = Conversation.between(CLIENT, ("10.0.0.2", 36333))
    talk.handshake()
    _exchange(talk)
    frames, notes = _read(tmp_path, talk.packets)
    assert [_shape(f) for f in frames] == _plain_frames()
    assert notes == []
    assert _read(tmp_path, talk.packets, detect=False)[0] == []
    assert len(_read(tmp_path, talk.packets, detect=False, ports=[36333])[0]) == 6


def test_detection_without_handshake_finds_the_client(tmp_path: Path) -> None:
    talk = Conversation.between(CLIENT, ("10.0.0.2", 36333))
    _exchange(talk, 2)
    frames, _ = _read(tmp_path, talk.packets)
    assert [(f.direction.value, f.data) for f in frames] == [
        ("request", REQUESTS[0]), ("response", RESPONSES[0]),
        ("request", REQUESTS[1]), ("response", RESPONSES[1])]


def test_other_traffic_is_ignored_quietly(tmp_path: Path) -> None:
    web = Conversation.between(("10.0.0.5", 50000), ("10.0.0.6", 8080))
    web.handshake()
    web.send(True, b"GET /index.html HTTP/1.1\r\nHost: example\r\n\r\n")
    web.send(False, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
    binary = Conversation.between(("10.0.0.7", 50001), ("10.0.0.8", 5432))
    binary.handshake()
    binary.send(True, bytes(range(256)) * 3)
    kafka = _conversation()
    kafka.handshake()
    _exchange(kafka, 1)
    frames, notes = _read(tmp_path, web.packets + binary.packets + kafka.packets)
    assert [(f.connection.index, f.data) for f in frames] == [(0, REQUESTS[0]), (0, RESPONSES[0])]
    assert notes == []


def test_tls_on_a_kafka_port_is_reported_once_and_skipped(tmp_path: Path) -> None:
    tls = Conversation.between(("10.0.0.9", 41000), SERVER)
    tls.handshake()
    tls.send(True, bytes.fromhex("160301") + b"\x00\x50" + b"\x01" * 80)  # ClientHello record
    tls.send(False, bytes.fromhex("160303") + b"\x00\x30" + b"\x02" * 48)
    tls.send(True, bytes.fromhex("170303") + b"\x00\x20" + b"\x03" * 32)
    kafka = _conversation()
    kafka.handshake()
    _exchange(kafka, 1)
    frames, notes = _read(tmp_path, tls.packets + kafka.packets)
    assert [(f.connection.index, f.data) for f in frames] == [(0, REQUESTS[0]), (0, RESPONSES[0])]
    assert [str(n) for n in notes] == [
        "warn: 10.0.0.9:41000 <-> 10.0.0.2:9092: TLS, no keys (no key log given)"]


# --- malformed framing ---

@pytest.mark.parametrize(("bad", "message"), [
    (struct.pack(">i", -5), "size prefix -5 at stream offset 0 is not a frame size"),
    (struct.pack(">i", 0), "size prefix 0 at stream offset 0 is not a frame size"),
    (struct.pack(">i", 0x7FFFFFFF), "size prefix 2147483647 at stream offset 0 is not a frame size"),
], ids=["negative", "zero", "gigantic"])
def test_bad_size_prefix_then_a_good_frame(tmp_path: Path, bad: bytes, message: str) -> None:
    talk = _conversation()
    talk.handshake()
    talk.send(True, bad)
    _exchange(talk, 2)
    frames, _ = _read(tmp_path, talk.packets)
    assert [(f.direction.value, f.data, f.stream_offset) for f in frames] == [
        ("request", REQUESTS[0], 4), ("response", RESPONSES[0], 0),
        ("request", REQUESTS[1], 4 + len(REQUESTS[0])), ("response", RESPONSES[1], len(RESPONSES[0]))]
    assert [(n.severity, n.message.split(" (limit")[0]) for n in frames[0].notes] == [
        (Severity.ERROR, message), (Severity.WARN, "resynchronised: skipped 4 bytes before this frame")]


def test_garbage_on_a_kafka_port_then_a_good_frame(tmp_path: Path) -> None:
    garbage = b"\xde\xad\xbe\xef" * 10 + b"hello, this is not kafka at all"
    talk = _conversation()
    talk.handshake()
    talk.send(True, garbage + REQUESTS[0])
    talk.send(False, RESPONSES[0])
    talk.send(True, REQUESTS[1])
    frames, _ = _read(tmp_path, talk.packets)
    assert [(f.direction.value, f.data, f.stream_offset) for f in frames] == [
        ("request", REQUESTS[0], len(garbage)), ("response", RESPONSES[0], 0),
        ("request", REQUESTS[1], len(garbage) + len(REQUESTS[0]))]
    assert frames[0].notes[-1].message == f"resynchronised: skipped {len(garbage)} bytes before this frame"


def test_frame_larger_than_the_limit(tmp_path: Path) -> None:
    big = kafka_request(0, 7, 9, body=b"\x00" * 2000)
    talk = _conversation()
    talk.handshake()
    talk.send(True, big, chunk=500)
    talk.send(True, REQUESTS[0])
    frames, _ = _read(tmp_path, talk.packets, max_frame_size=1000)
    assert [(f.data, f.stream_offset) for f in frames] == [(REQUESTS[0], len(big))]
    assert frames[0].notes[0].message.startswith(
        f"size prefix {len(big) - 4} at stream offset 0 is not a frame size")


def test_unknown_api_key_still_frames_when_in_sync(tmp_path: Path) -> None:
    odd = kafka_request(999, 0, 5)  # framing does not judge the header when in sync
    talk = _conversation()
    talk.handshake()
    talk.send(True, odd)
    talk.send(False, kafka_response(5))
    frames, _ = _read(tmp_path, talk.packets)
    assert [f.data for f in frames] == [odd, kafka_response(5)]


# --- damaged captures through the whole pipeline ---

@functools.cache
def _sample_capture() -> bytes:
    talk = _conversation()
    talk.handshake()
    _exchange(talk, chunk=40)
    other = Conversation.between(("10.0.0.3", 40001), ("10.0.0.4", 36333))
    other.handshake()
    _exchange(other, 2)
    return pcap_bytes(records(talk.packets + other.packets, wrap=ethernet))


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=12),
       st.integers(0, 10**6), st.booleans())
def test_damaged_captures_never_break_the_pipeline(
        changes: list[tuple[int, int]], cut: int, truncate: bool) -> None:
    damaged = bytearray(_sample_capture())
    for position, value in changes:
        damaged[position % len(damaged)] = value
    if truncate:
        del damaged[cut % len(damaged):]
    notes: list[Note] = []
    try:
        frames = list(read_frames(io.BytesIO(bytes(damaged)), report=notes.append))
    except CaptureError:
        return  # only when the file header itself was damaged
    seen: dict[tuple[int, str], int] = {}
    for frame in frames:
        assert frame.data and frame.first_packet <= frame.last_packet
        declared = struct.unpack_from(">i", frame.data)[0] + 4 if len(frame.data) >= 4 else None
        if frame.complete:
            assert declared == len(frame.data)
        key = (frame.connection.index, str(frame.direction))
        assert frame.stream_offset >= seen.get(key, 0)
        seen[key] = frame.stream_offset + len(frame.data)


def test_unsupported_link_type_is_reported_once(tmp_path: Path) -> None:
    talk = _conversation()
    talk.handshake()
    _exchange(talk, 1)
    path = write_pcap(tmp_path / "odd.pcap", records(talk.packets, wrap=ethernet), 147)
    notes: list[Note] = []
    assert list(read_frames(path, report=notes.append)) == []
    assert [n.message for n in notes] == ["link type 147 is not supported; its packets are skipped"]


def test_four_tuple_of_ignored_traffic_reused_by_kafka(tmp_path: Path) -> None:
    server = ("10.0.0.2", 36333)
    web = Conversation.between(CLIENT, server)
    web.handshake()
    web.send(True, b"GET / HTTP/1.1\r\nHost: example\r\n\r\n")
    kafka = Conversation.between(CLIENT, server, client_isn=5_000_000, server_isn=6_000_000)
    kafka.handshake()
    _exchange(kafka, 1)
    frames, notes = _read(tmp_path, web.packets + kafka.packets)
    assert [(f.connection.index, f.data) for f in frames] == [(0, REQUESTS[0]), (0, RESPONSES[0])]
    assert notes == []
