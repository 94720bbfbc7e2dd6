"""`-V` written straight from flat values is, line for line, the interpreter's tree as text.

The writers generated from the decode plans (`kdissect.present.verbose`) must
never drift from the interpreter: on every message of every shipped,
third-party and fuzz-regression capture, on random messages kio encodes, and
on the corner cases (tagged fields, unknown tags, nulls, generated values,
record batches kafka-python builds, wire text that needs escaping) the text
must equal `render_tree` of the interpreter's tree. Messages the writers do not
take are written the old way, so `render_message` equals the tree everywhere.
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kdissect.decode.dissect import dissect_request, dissect_response
from kdissect.decode.values import fast_body
from kdissect.ingest.framing import Direction
from kdissect.pair.message import message_from_frame
from kdissect.pipeline import read_messages
from kdissect.present.text import render_message, render_message_lines, render_tree
from kdissect.present.verbose import frame_text, message_text
from tests.craft import compact, kafka_request, kafka_response, uvarint
from tests.test_differential_kio import encode, framed
from tests.test_generated import (
    FUZZ_REGRESSIONS,
    KIO_CASES,
    QUICK,
    _header_of,
    _kio_frame,
    carries_tagged_fields,
)
from tests.test_pairing import frame as pairing_frame
from tests.test_records import CODECS, legacy_set, patched, record, v2_batch
from tests.test_tagged_fast_path import TAGGED_CASES, _tagged_messages, _with_last_tag


def _tree_text(data: bytes, kind: str, api_key: int, version: int) -> str:
    tree = dissect_request(data) if kind == "request" else dissect_response(data, api_key, version)
    return render_tree(tree)


def _written(data: bytes, kind: str, api_key: int, version: int) -> str | None:
    """The writers' text of a frame the fast path takes, checked against the tree; None otherwise."""
    values = fast_body(data, kind, api_key, version)
    if values is None:
        return None
    text = frame_text(data, kind, api_key, version, values)
    assert text is not None  # the writers take every body the fast path takes
    assert text == _tree_text(data, kind, api_key, version)
    return text


def _same_on_captures(paths: list[Path]) -> int:
    """Every message: the writers' text (where they take it) and `render_message` equal the tree."""
    written = 0
    for path in paths:
        for message in read_messages(path):
            expected = render_tree(message.tree(keep=False))
            try:
                text = message_text(message)
                assert text is None or text == expected
                assert render_message(message) == expected
            except AssertionError as problem:
                raise AssertionError(f"{path.name} message {message.number}: {problem}") from None
            written += text is not None
    return written


def test_the_writers_match_the_tree_on_every_shipped_capture(shipped_captures: Path) -> None:
    assert _same_on_captures(sorted(shipped_captures.glob("*.pcap"))) > 400


def test_the_writers_match_the_tree_on_every_third_party_capture(public_captures: Path) -> None:
    assert _same_on_captures(sorted(p for p in public_captures.iterdir() if p.suffix in (".pcap", ".pcapng")))


def test_the_writers_match_the_tree_on_every_fuzz_regression() -> None:
    _same_on_captures(sorted(FUZZ_REGRESSIONS.glob("*.pcap")))


@pytest.mark.parametrize(("api_key", "version", "kind"), KIO_CASES)
@QUICK
@given(data=st.data())
def test_the_writers_match_the_tree_on_kio_messages(api_key: int, version: int, kind: str,
                                                    data: st.DataObject) -> None:
    frame = _kio_frame(api_key, version, kind, data)
    assert _written(frame, kind, api_key, version) is not None or carries_tagged_fields(frame, kind, api_key,
                                                                                        version)


# -- tagged fields -------------------------------------------------------------------------


def test_tagged_fields_from_a_real_broker_are_written_like_the_tree(shipped_captures: Path) -> None:
    cases = list(_tagged_messages([shipped_captures / "tansu_records.pcap",
                                   shipped_captures / "tansu_topic_partitions.pcap"]))
    assert len(cases) >= 20
    for case in cases:
        text = _written(*case)
        assert text is not None and "+-- count uvarint" in text


@pytest.mark.parametrize("change", [1, 40, 100])
def test_unknown_tags_are_written_like_the_tree(shipped_captures: Path, change: int) -> None:
    unknown = 0
    for case in _tagged_messages([shipped_captures / "tansu_records.pcap"]):
        renumbered, _ = _with_last_tag(case, change)
        text = _written(*renumbered)
        unknown += text is not None and "unknown_tag_" in text
    assert unknown


@pytest.mark.parametrize(("api_key", "version", "kind"), TAGGED_CASES)
@QUICK
@given(data=st.data())
def test_kio_messages_with_tagged_fields_are_written_like_the_tree(api_key: int, version: int, kind: str,
                                                                   data: st.DataObject) -> None:
    assert _written(_kio_frame(api_key, version, kind, data), kind, api_key, version) is not None


# -- nulls, generated values, escaping -----------------------------------------------------


@pytest.mark.parametrize("cursor", ["null", "present"])
@QUICK
@given(data=st.data())
def test_a_nullable_struct_null_or_present_is_written_like_the_tree(cursor: str, data: st.DataObject) -> None:
    import kio.schema.describe_topic_partitions.v0.request as module

    header = data.draw(_header_of(75, 0, "request"))
    body = data.draw(st.from_type(module.DescribeTopicPartitionsRequest))
    if cursor == "null":
        body = dataclasses.replace(body, cursor=None)
    elif body.cursor is None:
        body = dataclasses.replace(body, cursor=data.draw(st.from_type(module.Cursor)))
    frame = framed(encode(type(header), header), encode(type(body), body))
    text = _written(frame, "request", 75, 0)
    assert text is not None
    assert ("presence int8 = -1 (null)" in text) == (cursor == "null")


def test_a_null_array_is_written_like_the_tree() -> None:
    frame = kafka_request(3, 1, 7, body=struct.pack(">i", -1))  # Metadata v1: every topic
    text = _written(frame, "request", 3, 1)
    assert text is not None and "Topics []MetadataRequestTopic = null" in text


@pytest.mark.parametrize("tagged", [(), (0,), (1,), (2,), (0, 1, 2)])
def test_elements_of_fixed_size_with_or_without_tags_are_written_like_the_tree(tagged: tuple[int, ...]) -> None:
    """ApiVersions v3 elements are structs of fixed-size fields, each written as one string
    when its tagged-field block is empty; one with tags (first, middle, last) as any struct."""
    def element(index: int) -> bytes:
        tags = uvarint(1) + uvarint(7) + uvarint(2) + b"ab" if index in tagged else b"\x00"
        return struct.pack(">hhh", index, 0, index + 3) + tags

    body = struct.pack(">h", 0) + uvarint(4) + b"".join(map(element, range(3))) + struct.pack(">i", 0) + b"\x00"
    frame = kafka_response(9, body)
    # The decoders refuse these elements with tags today; the writers take them all the same.
    values = {"ErrorCode": 0, "ApiKeys": [{"ApiKey": index, "MinVersion": 0, "MaxVersion": index + 3}
                                          for index in range(3)], "ThrottleTimeMs": 0}
    assert tagged or fast_body(frame, "response", 18, 3) == values
    text = frame_text(frame, "response", 18, 3, values)
    assert text == _tree_text(frame, "response", 18, 3)
    assert text.count("ApiVersion = struct") == 3 and text.count("unknown_tag_7") == len(tagged)


def test_generated_lags_are_written_after_their_field(shipped_captures: Path) -> None:
    lags = 0
    for message in read_messages(shipped_captures / "quorum_story.pcap"):
        text = message_text(message)
        assert text is None or text == render_tree(message.tree(keep=False))
        lags += 0 if text is None else text.count("[lag int64 = ")
    assert lags > 10


@pytest.mark.parametrize("name", ["red\x1b[31mtopic", "evil\u202etxt", "tab\there", "nul\x00byte"])
def test_wire_strings_are_escaped_as_the_tree_escapes_them(name: str) -> None:
    raw = name.encode()
    frame = kafka_request(3, 1, 9, client_id=raw, body=struct.pack(">ih", 1, len(raw)) + raw)
    text = _written(frame, "request", 3, 1)
    assert text is not None and name not in text
    assert all(line.isprintable() for line in text.split("\n"))


# -- record batches ------------------------------------------------------------------------


def _produce_v3(records: bytes) -> bytes:
    """A Produce v3 request by hand: no transactional id, acks -1, one topic, one partition."""
    body = (struct.pack(">hhi", -1, -1, 30000) + struct.pack(">i", 1) + struct.pack(">h", 6) + b"events"
            + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", len(records)) + records)
    return kafka_request(0, 3, 11, body=body)


def _produce_v9(records: bytes) -> bytes:
    """The same in Produce v9 (flexible: compact lengths, tagged-field blocks, request header v2)."""
    body = (uvarint(0) + struct.pack(">hi", 1, 5000) + uvarint(2) + compact("events") + uvarint(2)
            + struct.pack(">i", 3) + uvarint(len(records) + 1) + records + b"\0" + b"\0" + b"\0")
    header = struct.pack(">hhi", 0, 9, 12) + struct.pack(">h", 5) + b"craft" + b"\0"
    return struct.pack(">i", len(header) + len(body)) + header + body


@pytest.mark.parametrize("codec", sorted(CODECS))
@QUICK
@given(batches=st.lists(st.lists(record, min_size=1, max_size=4), min_size=1, max_size=3),
       base=st.integers(0, 2**40), transactional=st.booleans())
def test_record_batches_kafka_python_built_are_written_like_the_tree(codec: int, batches: list, base: int,
                                                                     transactional: bool) -> None:
    data = b"".join(v2_batch(records, codec, base_offset=base + 100 * i, transactional=transactional,
                             producer=(7, 3, 11) if transactional else (-1, -1, -1))
                    for i, records in enumerate(batches))
    for frame, version in ((_produce_v3(data), 3), (_produce_v9(data), 9)):
        text = _written(frame, "request", 0, version)
        assert text is not None and text.count("RecordBatch[") == len(batches)
        assert codec or "[decompressed []Record" not in text  # kafka-python keeps what compresses badly


def test_record_headers_and_null_keys_are_written_like_the_tree() -> None:
    batch = v2_batch([(0, None, b"v", [("h1", b"x"), ("h2", None)]), (5, b"k", None, [])], 0)
    text = _written(_produce_v3(batch), "request", 0, 3)
    assert text is not None
    assert "keyLength varint = -1 (null)" in text and 'Header[1] Header = "h2" = null' in text


# Keys and values of every shape the record loop reads in line or hands to `value_display`:
# printable ASCII short and past the display's 64 bytes, text with controls or beyond ASCII,
# binary, empty and null.
_shaped = st.one_of(
    st.none(), st.just(b""), st.binary(max_size=150),
    st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=50, max_size=120).map(str.encode),
    st.text(max_size=80).map(str.encode))
_shaped_record = st.tuples(st.integers(-3000, 3000), _shaped, _shaped,
                           st.lists(st.tuples(st.text(max_size=8), _shaped), max_size=3))


@pytest.mark.parametrize("codec", [0, 1])
@QUICK
@given(records=st.lists(_shaped_record, min_size=1, max_size=80), base=st.integers(0, 2**62))
def test_records_of_every_shape_are_written_like_the_tree(codec: int, records: list, base: int) -> None:
    """Up to 80 records (offset deltas of two varint bytes), timestamps before the first
    (negative deltas), keys, values and header values of every shape, a base offset past 2**40."""
    batch = v2_batch(records, codec, base_offset=base)
    for frame, version in ((_produce_v3(batch), 3), (_produce_v9(batch), 9)):
        text = _written(frame, "request", 0, version)
        assert text is not None and f"Record[{len(records) - 1}] Record" in text


@pytest.mark.parametrize("attributes", [0x08, 0x18, 0x20, 0x30, 0x40])
def test_log_append_time_control_and_transactional_batches_are_written_like_the_tree(attributes: int) -> None:
    """Attributes kafka-python's builder does not set (brokers write them), patched in with
    its own CRC-32C: timestamps from maxTimestamp, control markers, the delete horizon bit."""
    marker = struct.pack(">hh", 0, 1)  # version 0, commit
    batch = patched(v2_batch([(0, marker, struct.pack(">hi", 0, 4), []), (7, marker, None, [])], 0),
                    attributes=attributes)
    text = _written(_produce_v3(batch), "request", 0, 3)
    assert text is not None and ("commit marker" in text) == bool(attributes & 0x20)


def test_a_damaged_batch_is_written_from_the_tree_with_its_note() -> None:
    """A record whose varint runs past its batch, or a CRC that does not match: no fast path,
    and `render_message` writes the interpreter's tree (with its note)."""
    batch = v2_batch([(0, b"k", b"value", [("h", b"x")])], 0)
    cut = patched(batch, records=batch[61:-3] + b"\xff\xff\xff")
    wrong_crc = batch[:17] + bytes(4) + batch[21:]
    for damaged in (cut, wrong_crc):
        frame = _produce_v9(damaged)
        assert fast_body(frame, "request", 0, 9) is None
        message = message_from_frame(1, pairing_frame(frame, Direction.REQUEST, 1, 0.0))
        assert message_text(message) is None
        assert render_message(message) == _tree_text(frame, "request", 0, 9)


@pytest.mark.parametrize(("magic", "codec"), [(m, c) for m in (0, 1) for c in (0, 1)])
@QUICK
@given(records=st.lists(record, min_size=1, max_size=4), base=st.integers(0, 2**40))
def test_legacy_message_sets_are_written_like_the_tree(magic: int, codec: int, records: list, base: int) -> None:
    text = _written(_produce_v3(legacy_set(magic, records, codec, base_offset=base)), "request", 0, 3)
    assert text is not None and "Message[0] Message" in text


@pytest.mark.parametrize("codec", [c for c in sorted(CODECS) if c])
def test_compressed_batches_are_written_with_their_decompressed_records(codec: int) -> None:
    batch = v2_batch([(i, b"key-%d" % i, b"a value that repeats " * 20, [("trace", b"id")]) for i in range(5)],
                     codec)
    for frame, version in ((_produce_v3(batch), 3), (_produce_v9(batch), 9)):
        text = _written(frame, "request", 0, version)
        assert text is not None and "[decompressed []Record = 5 records]" in text


@pytest.mark.parametrize("codec", [0, 1])
@pytest.mark.parametrize("records", [250, 330])
def test_frames_and_records_past_64_kib_are_written_like_the_tree(codec: int, records: int) -> None:
    """Offsets' text comes from a list up to 64 KiB of frame (or of decompressed records) and
    from a dict beyond: a frame (codec 0) or decompressed data (codec 1) on either side."""
    batch = v2_batch([(i, b"key-%d" % i, b"v" * 200, [("trace", b"id")]) for i in range(records)], codec)
    frame = _produce_v9(batch)
    text = _written(frame, "request", 0, 9)
    assert text is not None and f"Record[{records - 1}] Record" in text
    assert codec or (len(frame) > 1 << 16) == (records == 330)


def test_a_refusal_midway_leaves_the_lines_as_they_were(shipped_captures: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`render_message_lines` appends to the text sink's own list: a writer refusing after
    some lines takes them back, and the message is written the old way after the rest."""
    from kdissect.present import verbose

    message = next(m for m in read_messages(shipped_captures / "tansu_records.pcap") if message_text(m))
    expected = render_message(message)

    def refusing(*_: object) -> object:
        def write(lines: list[str], *__: object) -> int:
            lines.append("half a message")
            raise verbose.Refused("midway")
        return write

    monkeypatch.setattr(verbose, "_writer", refusing)
    monkeypatch.setattr(verbose, "_layouts", {})  # which keep the writers made before
    lines = ["summary line"]
    render_message_lines(message, lines)
    assert lines == ["summary line", expected]


def test_the_writers_follow_the_definitions_in_use(shipped_captures: Path, tmp_path: Path) -> None:
    from kdissect.decode.schema import configure_definitions

    own = Path(__file__).parents[1] / "kdissect" / "decode" / "schema" / "definitions"
    text = (own / "DescribeQuorumRequest.json").read_text(encoding="utf-8")
    (tmp_path / "DescribeQuorumRequest.json").write_text(
        text.replace("The topics to describe.", "Topics, as the operator's files say."), encoding="utf-8")
    path = shipped_captures / "quorum_story.pcap"
    before = [message_text(m) for m in read_messages(path)]
    try:
        configure_definitions(tmp_path)
        after = [message_text(m) for m in read_messages(path)]
    finally:
        configure_definitions()
    assert not any("operator's files" in (text or "") for text in before)
    assert any("Topics, as the operator's files say." in (text or "") for text in after)
