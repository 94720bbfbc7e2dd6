"""Records inside Produce and Fetch: batches built by kafka-python decode to exactly what was built.

The reference is kafka-python's record builders (magic 0, 1 and 2) with the
codec libraries it uses (python-snappy, python-lz4, python-zstandard, gzip);
kafka-python's own reader and its pure-Python CRC-32C check the cases the
builders cannot make (control and LogAppendTime batches are written by brokers).
"""

from __future__ import annotations

import gzip
import struct
import tracemalloc
import zlib

import pytest
import xxhash
import zstandard
from craft import uvarint
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import _crc32c as kafka_crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kdissect.decode import compression, record_nodes
from kdissect.decode.records import (
    BadEntry,
    LegacyMessage,
    PartialEntry,
    RecordBatch,
    crc32c,
    decode_records,
    entries_records,
    record_rows,
)
from kdissect.decode.tree import Node
from kdissect.notes import Severity
from tests.record_paths import values_read_as_the_tree

QUICK = settings(derandomize=True, max_examples=40, deadline=None, database=None)
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
T0 = 1_795_952_641_840

payload = st.one_of(st.none(), st.binary(max_size=40), st.text(max_size=20).map(str.encode))
header = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=12)))
record = st.tuples(st.integers(0, 10_000), payload, payload, st.lists(header, max_size=3))


def v2_batch(records: list[tuple[int, bytes | None, bytes | None, list]], codec: int = 0, *,
             base_offset: int = 0, transactional: bool = False, producer: tuple[int, int, int] = (-1, -1, -1)
             ) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, transactional, *producer, batch_size=1 << 20)
    for delta, (stamp, key, value, headers) in enumerate(records):
        assert builder.append(delta, T0 + stamp, key, value, headers) is not None
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def legacy_set(magic: int, records: list[tuple[int, bytes | None, bytes | None, list]], codec: int = 0,
               base_offset: int = 0) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec, batch_size=1 << 20)
    for delta, (stamp, key, value, _) in enumerate(records):
        assert builder.append(base_offset + delta, T0 + stamp, key, value) is not None
    return bytes(builder.build())


def patched(batch: bytes, *, attributes: int | None = None, records: bytes | None = None) -> bytes:
    """A batch with other attributes or record bytes, its length and CRC-32C recomputed by
    kafka-python's pure-Python CRC (independent of the C library the decoder uses)."""
    data = bytearray(batch)
    if records is not None:
        data = data[:61] + bytearray(records)
        struct.pack_into(">i", data, 8, len(data) - 12)
    if attributes is not None:
        struct.pack_into(">h", data, 21, attributes)
    struct.pack_into(">I", data, 17, kafka_crc32c.crc(bytes(data[21:])))
    return bytes(data)


def tree(data: bytes) -> Node:
    """The entries under one node spanning `data`, as the interpreter builds them."""
    node = Node("records", "records", data, "", 0, len(data))
    node.children = record_nodes.entries_nodes(data, 0, len(data))
    return node


def kafka_python_read(data: bytes) -> list[tuple[int, int | None, bytes | None, bytes | None]]:
    rows, records = [], MemoryRecords(data)
    while records.has_next():
        rows.extend((r.offset, r.timestamp, r.key, r.value) for r in records.next_batch())
    return rows


def error_notes(node: Node) -> list[str]:
    return [str(n) for n in node.all_notes() if n.severity >= Severity.WARN]


# -- magic 2 ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", sorted(CODECS))
@QUICK
@given(records=st.lists(record, min_size=1, max_size=6), base=st.integers(0, 2**40))
def test_v2_batches_decode_to_what_kafka_python_built(codec: int, records: list, base: int) -> None:
    data = v2_batch(records, codec, base_offset=base, producer=(7, 3, 2**31 - 2))
    (batch,) = decode_records(data)
    assert isinstance(batch, RecordBatch) and batch.crc_ok and batch.notes == ()
    built = CODECS[DefaultRecordBatch(data).compression_type]  # uncompressed when that is smaller
    assert built in ("none", CODECS[codec])
    assert (batch.compression, batch.record_count, batch.producer_id) == (built, len(records), 7)
    rows = list(record_rows((batch,)))
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in rows] == [
        (base + i, T0 + stamp, key, value, [(k, v) for k, v in headers])
        for i, (stamp, key, value, headers) in enumerate(records)]
    assert [r.sequence for r in rows] == [(2**31 - 2 + i) % 2**31 for i in range(len(records))]
    assert {(r.producer_epoch, r.magic, r.batch_crc_ok, r.transactional) for r in rows} == {(3, 2, True, False)}
    assert [(o, t, k, v) for o, t, k, v in kafka_python_read(data)] == [
        (r.offset, r.timestamp, r.key, r.value) for r in rows]
    node = tree(data)
    assert node.tiling_errors() == [] and error_notes(node) == []


def test_transactional_batch_and_its_commit_marker() -> None:
    data = v2_batch([(0, b"k", b"v", [])], transactional=True, producer=(42, 5, 0))
    marker = v2_batch([(9, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 17), [])],
                      transactional=True, producer=(42, 5, -1), base_offset=1)
    marker = patched(marker, attributes=0x10 | 0x20)
    assert DefaultRecordBatch(marker).is_control_batch  # kafka-python reads it as one too
    batches = decode_records(data + marker)
    rows = list(record_rows(batches))
    assert [(r.offset, r.transactional, r.control) for r in rows] == [(0, True, None), (1, True, "commit")]
    control = batches[1].records[0].control
    assert (control.type, control.coordinator_epoch) == (1, 17)
    node = tree(data + marker)
    record = node.children[1]["records"].children[0]
    assert record.display == "offset 1, commit marker"
    assert record["coordinatorEpoch"].value == 17 and record["controlType"].display == "1 (commit)"
    assert node.tiling_errors() == [] and error_notes(node) == []


def test_log_append_time_batches_give_every_record_the_batch_time() -> None:
    data = patched(v2_batch([(0, None, b"a", []), (5, None, b"b", [])]), attributes=0x08)
    stamps = [t for _, t, _, _ in kafka_python_read(data)]
    assert [r.timestamp for r in record_rows(decode_records(data))] == stamps == [T0 + 5] * 2
    assert {r.timestamp_type for r in record_rows(decode_records(data))} == {"LogAppendTime"}


def test_tree_shows_every_header_field_and_record_part() -> None:
    value = b"\x00\xff" + b"binary" * 20
    data = v2_batch([(3, b"key", value, [("trace", b"id-1"), ("empty", None)])], codec=1,
                    producer=(9, 0, 0))
    batch = tree(data).children[0]
    assert [c.name for c in batch.children] == [name for name, *_ in record_nodes.BATCH_FIELDS] + ["records"]
    assert batch["crc"].display.endswith("(correct)") and batch["attributes"].display == "0x0001 (gzip, CreateTime)"
    assert [(c.name, c.value) for c in batch["attributes"].children][:3] == [
        ("compression", "gzip"), ("timestampType", "CreateTime"), ("isTransactional", False)]
    decompressed = batch["records"].children[0]
    assert decompressed.generated and decompressed.offset == 0
    record = decompressed.children[0]
    assert [c.name for c in record.children] == [
        "length", "attributes", "timestampDelta", "timestamp", "offsetDelta", "offset", "keyLength", "key",
        "valueLength", "value", "headers"]
    assert record["key"].display == '"key"' and record["value"].value == value
    assert record["value"].display == value[:64].hex() + "... (122 bytes)"
    assert record["timestamp"].display == f"{T0 + 3} (2026-11-29 11:44:01.843 UTC)"
    header = record["headers"].children[2]
    assert header.display == '"empty" = null' and header["headerValueLength"].display == "-1 (null)"


# -- magic 0 and 1 ---------------------------------------------------------------------


@pytest.mark.parametrize(("magic", "codec"), [(m, c) for m in (0, 1) for c in (0, 1, 2, 3)])
@QUICK
@given(records=st.lists(record, min_size=1, max_size=6), base=st.integers(0, 2**40))
def test_legacy_message_sets_decode_as_kafka_python_reads_them(magic: int, codec: int, records: list,
                                                               base: int) -> None:
    data = legacy_set(magic, records, codec, base)
    entries = decode_records(data)
    assert all(isinstance(e, LegacyMessage) and e.crc_ok and e.notes == () for e in entries)
    rows = list(record_rows(entries))
    assert [(r.offset, r.timestamp, r.key, r.value) for r in rows] == kafka_python_read(data)
    assert [(r.key, r.value) for r in rows] == [(key, value) for _, key, value, _ in records]
    if magic == 1:
        assert [r.timestamp for r in rows] == [T0 + stamp for stamp, *_ in records]
    assert {(r.magic, r.compression) for r in rows} == {(magic, CODECS[codec])}
    node = tree(data)
    assert node.tiling_errors() == [] and error_notes(node) == []


def test_inner_offsets_of_a_broker_written_wrapper_are_absolute() -> None:
    """A broker (Java) writes the wrapper at the offset of the last inner message."""
    data = bytearray(legacy_set(1, [(0, None, b"a", []), (1, None, b"b", []), (2, None, b"c", [])], codec=1))
    struct.pack_into(">q", data, 0, 1002)
    assert [r.offset for r in record_rows(decode_records(bytes(data)))] == [1000, 1001, 1002] == [
        o for o, *_ in kafka_python_read(bytes(data))]


def test_a_log_append_time_wrapper_gives_its_time_to_every_inner_message() -> None:
    data = bytearray(legacy_set(1, [(0, None, b"a", []), (7, None, b"b", [])], codec=1))
    struct.pack_into(">bq", data, 17, 1 | 0x08, T0 + 99)  # attributes, timestamp of the wrapper
    struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:])))
    rows = list(record_rows(decode_records(bytes(data))))
    assert [r.timestamp for r in rows] == [t for _, t, _, _ in kafka_python_read(bytes(data))] == [T0 + 99] * 2
    assert {r.timestamp_type for r in rows} == {"LogAppendTime"}
    node = tree(bytes(data)).children[0]
    inner = node["value"].children[0].children[1]
    assert inner["logAppendTime"].value == T0 + 99 and node.tiling_errors() == []


def test_magic_0_lz4_with_the_pre_0_10_header_checksum_decodes() -> None:
    data = legacy_set(0, [(0, b"k", b"v" * 50, [])], codec=3)
    value = decode_records(data)[0]
    assert isinstance(value, LegacyMessage) and value.value is not None
    assert value.value[6] != (xxhash.xxh32(value.value[4:6]).intdigest() >> 8) & 0xFF  # the old checksum
    assert [r.value for r in record_rows((value,))] == [b"v" * 50]


@QUICK
@given(st.binary(max_size=15))
def test_xxh32_matches_the_xxhash_library(data: bytes) -> None:
    assert compression.xxh32(data) == xxhash.xxh32(data).intdigest()


@QUICK
@given(st.binary(max_size=300))
def test_crc32c_matches_kafka_pythons_pure_python_crc(data: bytes) -> None:
    assert crc32c(data) == kafka_crc32c.crc(data)


# -- codecs written another way --------------------------------------------------------


def snappy_literal(data: bytes) -> bytes:
    """Raw snappy written by hand: the length, then the data as literals (valid snappy)."""
    out, size = bytearray(), len(data)
    while True:
        out.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
        size >>= 7
        if not size:
            break
    for at in range(0, len(data), 60):
        chunk = data[at:at + 60]
        out.append((len(chunk) - 1) << 2)
        out += chunk
    return bytes(out)


def test_raw_and_xerial_snappy_written_by_hand_decode() -> None:
    plain = v2_batch([(0, b"k", b"hello snappy" * 9, [])])
    records = plain[61:]
    xerial = compression.XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    halves = (records[:40], records[40:])
    xerial += b"".join(struct.pack(">i", len(snappy_literal(h))) + snappy_literal(h) for h in halves)
    for body in (snappy_literal(records), xerial):
        batch = decode_records(patched(plain, attributes=2, records=body))[0]
        assert isinstance(batch, RecordBatch) and batch.notes == ()
        assert [r.value for r in batch.records] == [b"hello snappy" * 9]


# -- bad input -------------------------------------------------------------------------


def test_a_partial_final_batch_is_shown_as_such_not_as_an_error() -> None:
    first, second = v2_batch([(0, b"a", b"1", [])]), v2_batch([(0, b"b", b"2", [])], base_offset=1)
    for cut in (5, 16, 40, len(second) - 1):
        entries = decode_records(first + second[:cut])
        assert isinstance(entries[0], RecordBatch) and isinstance(entries[1], PartialEntry)
        assert [n.severity for n in entries[1].notes] == [Severity.CHAT]
        node = tree(first + second[:cut])
        assert node.children[1].name == "PartialBatch" and node.tiling_errors() == []


def test_a_wrong_crc_is_an_error_note_and_the_records_still_decode() -> None:
    data = bytearray(v2_batch([(0, b"k", b"value", [])]))
    data[-3] ^= 0x20
    batch = decode_records(bytes(data))[0]
    assert isinstance(batch, RecordBatch) and not batch.crc_ok
    assert "CRC-32C" in batch.notes[0].message and batch.notes[0].severity is Severity.ERROR
    assert len(batch.records) == 1 and "wrong" in tree(bytes(data)).children[0]["crc"].display
    legacy = bytearray(legacy_set(1, [(0, b"k", b"value", [])]))
    legacy[-1] ^= 1
    message = decode_records(bytes(legacy))[0]
    assert isinstance(message, LegacyMessage) and not message.crc_ok and "CRC32" in message.notes[0].message


def zstd_bomb(size: int) -> bytes:
    compressor = zstandard.ZstdCompressor().compressobj()
    return compressor.compress(b"\0" * size) + compressor.flush()


@pytest.mark.parametrize("bomb", ["zstd", "gzip"])
def test_a_compression_bomb_is_a_note_in_bounded_memory_and_the_next_batch_decodes(bomb: str) -> None:
    plain = v2_batch([(0, None, b"x", [])])
    body = zstd_bomb(64 << 20) if bomb == "zstd" else gzip.compress(b"\0" * (8 << 20), 9)
    codec = 4 if bomb == "zstd" else 1
    data = patched(plain, attributes=codec, records=body) + v2_batch([(0, b"after", b"bomb", [])], base_offset=1)
    tracemalloc.start()
    try:
        entries = decode_records(data, max_decompressed=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20
    assert "decompress to more than" in entries[0].notes[0].message
    assert [r.key for r in record_rows(entries)] == [b"after"]


def test_the_ratio_bound_stops_a_bomb_under_the_cap() -> None:
    body = zstd_bomb(8 << 20)  # well under the 32 MiB default cap, far over 1100 x its size
    with pytest.raises(compression.DecompressionProblem) as problem:
        compression.decompress(4, body, cap=32 << 20)
    assert f"{compression.MAX_RATIO} times its size" in str(problem.value)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_truncated_compressed_data_is_a_note_and_the_rest_decodes(codec: int) -> None:
    good = v2_batch([(0, b"k", b"compress me " * 20, [])], codec)
    broken = patched(good, records=good[61:-7])
    data = broken + v2_batch([(0, b"next", b"ok", [])], base_offset=5)
    entries = decode_records(data)
    assert entries[0].notes and "records not decoded" in entries[0].notes[0].message
    assert [r.offset for r in record_rows(entries)] == [5]
    node = tree(data)
    assert node.tiling_errors() == []


def test_unknown_magic_and_tiny_sizes_are_errors_and_stop_decoding() -> None:
    batch = bytearray(v2_batch([(0, None, b"v", [])]))
    batch[16] = 7
    entries = decode_records(bytes(batch))
    assert isinstance(entries[0], BadEntry) and "unknown magic 7" in entries[0].notes[0].message
    tiny = struct.pack(">qi", 0, 3) + b"\0" * 10
    assert isinstance(decode_records(tiny)[0], BadEntry)


def test_records_that_overrun_their_batch_keep_the_good_ones_and_the_rest_as_undecoded() -> None:
    plain = v2_batch([(0, b"a", b"1", []), (0, b"b", b"2", [])])
    records = bytearray(plain[61:])
    records[9 + 4] = 0x7E  # the second record's key length (zigzag 63) now runs past its end
    data = patched(plain, records=bytes(records))
    batch = decode_records(data)[0]
    assert isinstance(batch, RecordBatch) and len(batch.records) == 1
    assert "record 1" in batch.notes[0].message
    node = tree(data)
    assert node.tiling_errors() == [] and node.children[0]["records"].children[-1].name == "undecoded"


def test_a_batch_cut_by_the_capture_keeps_counts_for_summaries() -> None:
    data = v2_batch([(0, b"ab", b"cde", []), (1, None, b"f", [])])
    assert entries_records(decode_records(data)) == (2, 6)


# -- displays --------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "shown"), [
    (None, "null"),
    (b"", '""'),
    (b"plain text\n", '"plain text\\x0a"'),
    (b"\x1b[31mred", "1b5b33316d726564"),  # a terminal escape is not text
    (b"\x00\x01\xfe", "0001fe"),
    ("é".encode() * 40, '"' + "é" * 32 + '"... (80 bytes)'),
    (bytes(range(100)), bytes(range(64)).hex() + "... (100 bytes)"),
])
def test_keys_and_values_show_as_escaped_text_or_hex_cut_at_the_limit(raw: bytes | None, shown: str) -> None:
    assert record_nodes.value_display(raw) == shown


def test_control_characters_are_escaped_but_binary_is_hex() -> None:
    assert record_nodes.value_display(b"a\tb") == '"a\\x09b"'
    assert record_nodes.value_display("\u202eevil".encode()) == "e280ae6576696c"  # a bidi override
    assert record_nodes.value_display(zlib.compress(b"x" * 20)).startswith("78")


# -- through the interpreter: the length prefix, classic and compact ---------------------------

RECORDS_DEFINITION = """
{ "apiKey": 1001, "type": "request", "name": "CarryRequest", "validVersions": "0-1",
  "flexibleVersions": "1+",
  "fields": [
    { "name": "Records", "type": "records", "versions": "0+", "nullableVersions": "0+",
      "about": "The records." }
  ] }
"""


def carry(version: int, body: bytes) -> Node:
    from kdissect.decode.interpreter import decode_struct
    from kdissect.decode.schema import compile_message, parse_definition

    node = Node("CarryRequest", "struct", None, "", 0)
    plan = compile_message(parse_definition(RECORDS_DEFINITION, "carry"), version)
    assert decode_struct(body, node, len(body), plan.body)
    return node


def test_records_fields_keep_their_length_prefix_classic_and_compact() -> None:
    data = v2_batch([(0, b"k", b"v", [])]) + legacy_set(1, [(0, None, b"old", [])])
    classic = carry(0, struct.pack(">i", len(data)) + data)["Records"]
    compact = carry(1, uvarint(len(data) + 1) + data + b"\x00")["Records"]
    assert classic.display == f"{len(data)} bytes, 2 batches (int32 len={len(data)})"
    assert compact.display == f"{len(data)} bytes, 2 batches (compact, len+1={len(data) + 1})"
    for node, prefix in ((classic, ("int32", 4)), (compact, ("uvarint", len(uvarint(len(data) + 1))))):
        assert [c.name for c in node.children] == ["length", "RecordBatch[0]", "Message[1]"]
        assert (node.children[0].type, node.children[0].size) == prefix and node.value == data
        assert node.tiling_errors() == [] and list(node.all_notes()) == []
        assert all(n.about for n in node.nodes()), "every node says what it is"
    null = carry(0, struct.pack(">i", -1))["Records"]
    assert (null.value, null.display, null.children) == (None, "null (int32 len=-1)", [])


# -- codecs on their own: multi-block streams from the reference libraries --------------------


def test_multi_block_streams_of_every_codec_decompress_exactly() -> None:
    import lz4.frame
    from kafka import codec as kafka_codec

    words = [b"alpha", b"beta", b"gamma", b"delta", b"\x00\xff"]
    data = b"".join(words[(i * 7 + i // 13) % 5] + str(i).encode() for i in range(60_000))  # ~440 KB
    streams = {
        (1, "gzip"): gzip.compress(data),
        (2, "xerial snappy, 32 KB blocks"): kafka_codec.snappy_encode(data),
        (3, "lz4, linked 64 KB blocks, checksums"): lz4.frame.compress(
            data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=True, content_checksum=True,
            block_checksum=True, store_size=True),
        (3, "lz4, independent blocks, no size"): lz4.frame.compress(
            data, block_size=lz4.frame.BLOCKSIZE_MAX256KB, block_linked=False, store_size=False),
        (4, "zstd with content size"): zstandard.ZstdCompressor().compress(data),
        (4, "zstd streamed"): zstd_stream(data),
    }
    for (codec, how), stream in streams.items():
        assert compression.decompress(codec, stream, cap=1 << 20) == data, how


def zstd_stream(data: bytes) -> bytes:
    stream = zstandard.ZstdCompressor().compressobj()
    return stream.compress(data) + stream.flush()


def test_records_cut_by_the_capture_decode_as_far_as_captured() -> None:
    from kdissect.decode.interpreter import CAPTURE_CUT, decode_struct
    from kdissect.decode.schema import compile_message, parse_definition

    data = v2_batch([(0, b"k", b"v", [])]) + v2_batch([(0, b"cut", b"here", [])], base_offset=1)
    for version, prefix in ((0, struct.pack(">i", len(data))), (1, uvarint(len(data) + 1))):
        frame = prefix + data + (b"\x00" if version else b"")
        limit = len(prefix) + len(data) - 10  # the capture lost the last bytes
        node = Node("CarryRequest", "struct", None, "", 0)
        plan = compile_message(parse_definition(RECORDS_DEFINITION, "carry"), version)
        decode_struct(frame, node, limit, plan.body, declared=len(frame))
        records = node["Records"]
        assert [c.name for c in records.children] == ["length", "RecordBatch[0]", "PartialBatch"]
        assert records.end == limit and node.tiling_errors() == []
        assert records.display.startswith(f"{len(data) - 10} of {len(data)} bytes")
        assert next(n.severity for n in node.all_notes() if CAPTURE_CUT in n.message) is Severity.WARN
        assert not [n for n in node.all_notes() if n.severity is Severity.ERROR]


# -- records as values (what filters and -T fields read) -------------------------------------

@pytest.mark.parametrize("codec", sorted(CODECS))
@QUICK
@given(records=st.lists(record, min_size=1, max_size=5), transactional=st.booleans())
def test_batches_read_as_values_give_what_the_tree_gives(codec: int, records: list, transactional: bool) -> None:
    data = v2_batch(records, codec, base_offset=9, transactional=transactional, producer=(7, 3, 5))
    data += v2_batch(records[:1], base_offset=100)
    assert values_read_as_the_tree(data) > 0


@pytest.mark.parametrize(("magic", "codec"), [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)])
@QUICK
@given(records=st.lists(record, min_size=1, max_size=4))
def test_legacy_sets_read_as_values_give_what_the_tree_gives(magic: int, codec: int, records: list) -> None:
    data = legacy_set(magic, records, codec, 5) + legacy_set(magic, records[:1], 0, 50)
    assert values_read_as_the_tree(data) > 0


def test_damaged_records_read_as_values_give_what_the_tree_gives() -> None:
    """Cut, mis-summed, undecompressable, overrunning and unknown entries, and a broker's
    LogAppendTime wrapper."""
    first, second = v2_batch([(0, b"a", b"1", [("h", b"v")])]), v2_batch([(0, b"b", b"2", [])], base_offset=1)
    cases = [first + second[:cut] for cut in (5, 16, 40, len(second) - 1)]
    crc = bytearray(first)
    crc[-3] ^= 0x20
    good = v2_batch([(0, b"k", b"compress me " * 20, [])], 1)
    plain = v2_batch([(0, b"a", b"1", []), (0, b"b", b"2", [])])
    overrun = bytearray(plain[61:])
    overrun[13] = 0x7E
    unknown = bytearray(first)
    unknown[16] = 7
    wrapper = bytearray(legacy_set(1, [(0, None, b"a", []), (7, None, b"b", [])], codec=1))
    struct.pack_into(">bq", wrapper, 17, 1 | 0x08, T0 + 99)
    struct.pack_into(">I", wrapper, 12, zlib.crc32(bytes(wrapper[16:])))
    cut_wrapper = legacy_set(0, [(0, b"k", b"v" * 80, [])], codec=1)
    cases += [bytes(crc), patched(good, records=good[61:-7]) + first, patched(plain, records=bytes(overrun)),
              bytes(unknown) + first, bytes(wrapper), cut_wrapper[:-9], first + cut_wrapper[:30]]
    assert sum(values_read_as_the_tree(data) for data in cases) > 50
