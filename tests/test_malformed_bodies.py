"""Malformed frames give a partial tree and a note at the failing offset, never an exception.

Every case is a hand-built DescribeProducers v0 request (or a frame an
independent codec encoded, then damaged): the layout is the seed page's, so
the header ends at 0x000f and the body's Topics array starts there.
"""

from __future__ import annotations

import io
import struct
import tracemalloc
from typing import Any

import craft
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.describe_quorum.v2 import response as kio_quorum
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from kdissect.decode.dissect import dissect_request, dissect_response
from kdissect.decode.tree import Node
from kdissect.notes import Severity
from kdissect.present.text import render_tree

ERROR, WARN = Severity.ERROR, Severity.WARN
quorum: Any = kio_quorum  # kio's phantom int and str types are not worth spelling out here
HEADER = "003d 0000 00000007 0000 00"  # DescribeProducers v0, correlation id 7, client id "", no tags
GOOD_BODY = "02 02 74 02 00000001 00 00"  # Topics: [Name "t", PartitionIndexes [1]]
QUICK = settings(max_examples=200, derandomize=True, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])


def frame(*parts: str) -> bytes:
    payload = bytes.fromhex("".join(parts).replace(" ", ""))
    return struct.pack(">i", len(payload)) + payload


def uvarint(value: int) -> str:
    return craft.uvarint(value).hex()


def notes(tree: Node) -> list[tuple[Severity, str, int | None]]:
    return [(n.severity, n.message, n.offset) for n in tree.all_notes()]


def assert_sound(tree: Node, data: bytes) -> None:
    assert tree.tiling_errors() == []
    assert (tree.offset, tree.size) == (0, len(data))


@pytest.fixture(autouse=True)
def next_frame_still_decodes() -> Any:
    """After every malformed case, a good frame decodes cleanly: nothing was poisoned."""
    yield
    good = frame(HEADER, GOOD_BODY)
    tree = dissect_request(good)
    assert notes(tree) == []
    assert tree.children[2]["Topics"].children[1]["Name"].value == "t"


CASES = [
    pytest.param(frame(HEADER, "02 05 6162"),
                 [(ERROR, "truncated: Name declares 4 bytes, 2 left", 0x10)], id="truncated string"),
    pytest.param(frame(HEADER, "02 02 74 02 0000"),
                 [(ERROR, "PartitionIndexes: 1 element needs at least 4 bytes, 2 left", 0x12)],
                 id="int32 array past the end"),
    pytest.param(frame(HEADER, GOOD_BODY[:-3]),
                 [(ERROR, "truncated: tagged_fields uvarint needs 1 byte, 0 left", 0x18)], id="missing last byte"),
    pytest.param(frame(HEADER, "ff ff ff ff ff 01"),
                 [(ERROR, "Topics length: uvarint longer than 5 bytes", 0x0F)], id="six-byte varint"),
    pytest.param(frame(HEADER, "ff ff ff ff 7f"),
                 [(ERROR, "Topics length: uvarint 34359738367 exceeds 32 bits", 0x0F)], id="varint over 32 bits"),
    pytest.param(frame(HEADER, "02", uvarint(1_000_001), "616263 00"),
                 [(ERROR, "truncated: Name declares 1000000 bytes, 4 left", 0x10)], id="absurd string length"),
    pytest.param(frame(HEADER, uvarint(2**31 + 1), "01 01 00 00"),
                 [(ERROR, "Topics: 2147483648 elements need at least 6442450944 bytes, 4 left", 0x0F)],
                 id="array count 2^31"),
    pytest.param(frame(HEADER, "02 02 74", uvarint(2**32 - 1), "00 00"),
                 [(ERROR, "PartitionIndexes: 4294967294 elements need at least 17179869176 bytes, 2 left",
                   0x12)], id="primitive array count 2^32-2"),
    pytest.param(frame(HEADER, GOOD_BODY, "abcdef"),
                 [(ERROR, "3 trailing bytes after the message body", 0x19)], id="trailing bytes"),
    pytest.param(frame(HEADER, "02 02 74 02 00000001 01 07 05 aa"),
                 [(ERROR, "truncated: tagged field 7 declares 5 bytes, 1 left", 0x18)],
                 id="tagged field past the end"),
    pytest.param(frame("003d 0000 00000007 fffe"),
                 [(ERROR, "client_id: negative length -2", 0x0C)], id="negative client id length"),
    pytest.param(frame("003d 0000 00000007 0005 6162"),
                 [(ERROR, "truncated: client_id declares 5 bytes, 2 left", 0x0C)], id="truncated client id"),
    pytest.param(frame("003d"),
                 [(ERROR, "truncated: request_api_version int16 needs 2 bytes, 0 left", 0x06)],
                 id="header cut after the api key"),
]


@pytest.mark.parametrize(("data", "expected"), CASES)
def test_malformed_request_gives_partial_tree_and_note(data: bytes, expected: list[Any]) -> None:
    tree = dissect_request(data)
    assert notes(tree) == expected
    assert_sound(tree, data)
    assert tree.children[-1].end == len(data)


def test_decoding_stops_at_the_failing_field_and_keeps_what_came_before() -> None:
    tree = dissect_request(frame(HEADER, "04 02 74 02 00000001 00 05 6162"))
    topics = tree.children[2]["Topics"]
    assert [c.name for c in topics.children] == ["length", "TopicRequest[0]", "TopicRequest[1]"]
    assert topics.children[1]["Name"].value == "t"
    second = topics.children[2]
    assert [(c.name, c.offset, c.size) for c in second.children] == [("malformed", 0x18, 3)]
    assert second.children[0].value == bytes.fromhex("056162")
    assert "+-- malformed bytes = 056162 [0x0018, 3B] truncated: Name declares 4 bytes, 2 left" in render_tree(tree)


def test_array_count_of_2_to_the_31_allocates_nothing() -> None:
    data = frame(HEADER, uvarint(2**31 + 1), "00" * 64)
    tracemalloc.start()
    try:
        tree = dissect_request(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024
    assert [n.offset for n in tree.all_notes()] == [0x0F]


def test_frame_cut_by_the_capture_is_a_warning_and_what_was_captured_decodes() -> None:
    whole = frame(HEADER, GOOD_BODY)
    tree = dissect_request(whole[:0x12])
    assert notes(tree) == [
        (WARN, "frame incomplete: 18 of 25 bytes captured", 0x12),
        (WARN, "truncated: PartitionIndexes length uvarint needs 1 byte, 0 left "
               "(the capture cut the frame short)", 0x12),
    ]
    assert tree.children[2]["Topics"].children[1]["Name"].value == "t"
    assert_sound(tree, whole[:0x12])


def test_content_longer_than_the_declared_frame_is_an_error_even_when_cut() -> None:
    data = frame(HEADER, "02 7f 6162")[:-1]  # a 126-byte Name in a frame declared 5 bytes shorter
    tree = dissect_request(data)
    assert notes(tree)[-1] == (ERROR, "truncated: Name declares 126 bytes, 1 left", 0x10)


@pytest.mark.parametrize(("data", "expected"), [
    (b"\x00\x00", [(WARN, "frame cut short: 2 of the 4 size-prefix bytes captured", 0)]),
    (b"", [(WARN, "frame cut short: 0 of the 4 size-prefix bytes captured", 0)]),
    (bytes.fromhex("fffffff0 003d0000"), [(ERROR, "negative frame size -16", 0)]),
    (frame(HEADER, GOOD_BODY) + b"\x01\x02", [(ERROR, "2 bytes beyond the frame's declared size", 25)]),
])
def test_broken_framing(data: bytes, expected: list[Any]) -> None:
    tree = dissect_request(data)
    assert notes(tree) == expected
    assert_sound(tree, data)


def test_version_newer_than_the_definitions_decodes_as_the_newest_with_a_note() -> None:
    data = frame("0037 0009 00000001 0000 00", "02 01 02 00000000 00 00 00")
    tree = dissect_request(data)
    body = tree.children[2]
    assert (tree.name, tree.display, body.name, body.type, body.size) == (
        "DescribeQuorumRequest", "v9", "DescribeQuorumRequest", "struct", 10)
    assert body["Topics"].value == 1
    assert notes(tree) == [
        (WARN, "DescribeQuorum v9 is newer than the definitions: decoded as v2, the newest known", 0x0F)]
    assert_sound(tree, data)


def test_response_whose_request_is_missing_keeps_header_and_raw_body() -> None:
    data = frame("0000002a", "00 00000000")
    tree = dissect_response(data, None, None)
    assert [c.name for c in tree.children] == ["Frame", "ResponseHeader", "Response body"]
    assert tree.children[1]["correlation_id"].value == 42
    assert notes(tree) == [(WARN, "request missing: body not decoded", 8)]
    assert_sound(tree, data)


def quorum_response_bytes() -> bytes:
    voter = quorum.ReplicaState(replica_id=1, replica_directory_id=None, log_end_offset=10)
    partition = quorum.PartitionData(partition_index=0, error_code=ErrorCode.none, error_message=None,
                                     leader_id=1, leader_epoch=1, high_watermark=10, current_voters=(voter,),
                                     observers=())
    response = quorum.DescribeQuorumResponse(error_code=ErrorCode.none, error_message=None, nodes=(),
                                             topics=(quorum.TopicData(topic_name="t", partitions=(partition,)),))
    buffer = io.BytesIO()
    entity_writer(quorum.DescribeQuorumResponse)(buffer, response)
    return buffer.getvalue()


def test_unknown_tagged_fields_are_shown_raw_and_are_not_errors() -> None:
    body = quorum_response_bytes()
    assert body[-1] == 0  # the body's empty tagged-field block, as kio wrote it
    tagged = bytes.fromhex("02 05 03 aabbcc 8a01 00")  # tag 5 (3 bytes), tag 138 (empty)
    data = frame("00000001 00", (body[:-1] + tagged).hex())
    tree = dissect_response(data, 55, 2)
    assert notes(tree) == []
    assert_sound(tree, data)
    block = tree.children[2].children[-1]
    assert (block.name, block.value, block.offset, block.size) == ("tagged_fields", 2, len(data) - 9, 9)
    assert [(c.name, c.value) for c in block.children] == [
        ("count", 2), ("unknown_tag_5", b"\xaa\xbb\xcc"), ("unknown_tag_138", b"")]
    unknown = block.children[1]
    assert [(c.name, c.value, c.size) for c in unknown.children] == [
        ("tag", 5, 1), ("size", 3, 1), ("data", b"\xaa\xbb\xcc", 3)]
    assert tree.children[2]["Topics"].children[1]["TopicName"].value == "t"


def test_tags_out_of_order_get_a_note() -> None:
    data = frame(HEADER, GOOD_BODY[:-2], "02 09 00 03 00")
    tree = dissect_request(data)
    assert notes(tree) == [(Severity.NOTE, "tag 3 follows tag 9: tags should ascend", 0x18)]
    assert_sound(tree, data)


def test_odd_presence_byte_is_read_as_kafka_reads_it_with_a_note() -> None:
    body = "02 01 00 000007d0 {} 0274 00000002 00 00"  # Topics [""], limit 2000, Cursor{"t", 2}
    data = frame("004b 0000 00000001 0000 00", body.format("05"))
    tree = dissect_request(data)
    cursor = tree.children[2]["Cursor"]
    assert cursor["presence"].display == "5 (read as present)"
    assert cursor["TopicName"].value == "t"
    assert notes(tree) == [(ERROR, "Cursor: presence byte 5 is neither 1 nor -1", 0x16)]
    assert_sound(tree, data)


def test_invalid_utf8_is_replaced_with_a_warning() -> None:
    data = frame(HEADER, "02 03 ff74 02 00000001 00 00")
    tree = dissect_request(data)
    name = tree.children[2]["Topics"].children[1]["Name"]
    assert name.value == "\ufffdt"
    assert notes(tree) == [(WARN, "Name: not valid UTF-8 (undecodable bytes replaced)", 0x10)]


def test_control_characters_from_the_wire_are_escaped_in_displays() -> None:
    data = frame("003d 0000 00000001 0004 1b5b324a 00", GOOD_BODY)
    tree = dissect_request(data)
    assert tree.children[1]["client_id"].value == "\x1b[2J"
    assert '"\\x1b[2J" (int16 len=4)' in render_tree(tree)
    assert "\x1b" not in render_tree(tree)


@QUICK
@given(st.binary(max_size=200))
def test_random_bytes_never_raise_and_always_tile(data: bytes) -> None:
    for tree in (dissect_request(data), dissect_response(data, 55, 2), dissect_response(data, 61, 0),
                 dissect_response(data, 75, 0), dissect_response(data, None, None)):
        assert_sound(tree, data)
        render_tree(tree)


GOOD_FRAMES = [
    frame(HEADER, GOOD_BODY),
    frame("00000001 00", quorum_response_bytes().hex()),
    frame("004b 0000 00000001 0000 00", "02 02 74 00 000007d0 01 0274 00000002 00 00"),
]


@QUICK
@given(which=st.integers(0, len(GOOD_FRAMES) - 1), data=st.data())
def test_mutated_frames_never_raise_and_always_tile(which: int, data: Any) -> None:
    mutated = bytearray(GOOD_FRAMES[which])
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(mutated) - 1))
        mutated[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(mutated)))
    damaged = bytes(mutated[:cut])
    tree = dissect_request(damaged) if which != 1 else dissect_response(damaged, 55, 2)
    assert_sound(tree, damaged)


@pytest.mark.parametrize(("version", "after", "named"), [
    (0, bytes(4), True),  # librdkafka's empty API-key array: named, a note
    (0, b"\x00\x00\x00\x01", False),  # a count that is not 0: not that quirk
    (0, bytes(3), False),
    (0, bytes(5), False),
    (1, bytes(4), False),  # only v0 has it
])
def test_only_librdkafkas_exact_quirk_escapes_the_trailing_bytes_error(version: int, after: bytes, named: bool):
    client = b"rdkafka"
    payload = struct.pack(">hhih", 18, version, 7, len(client)) + client + after
    tree = dissect_request(struct.pack(">i", len(payload)) + payload)
    assert tree.tiling_errors() == []
    last = tree.children[-1]
    assert last.name == ("draft_api_keys" if named else "trailing_bytes")
    assert [n.id for n in tree.all_notes()] == (["kafka.client_quirk"] if named else ["kafka.trailing_bytes"])
    assert [n.severity for n in tree.all_notes()] == ([Severity.NOTE] if named else [Severity.ERROR])
