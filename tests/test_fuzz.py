"""Fuzzing in the suite: random and damaged frames through the decoder, damaged captures
through the whole pipeline and the CLI, runtime linear in input size, memory bounded by it.

Two hypothesis profiles are registered here: `ci` (the default: derandomized, a
few hundred examples in all, well under a minute) and `long` (set
`KDISSECT_FUZZ_PROFILE=long`: thousands of examples per property). The long run
outside the suite is `python -m tools.fuzz`; every crash it finds is kept in
`tests/fuzz_regressions/` and replayed by the last tests of this file.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import json
import os
import random
import socket
import statistics
import struct
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from craft import LINKTYPE_RAW, Record, framed, pcap_bytes, uvarint
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.describe_quorum.v2 import response as kio_quorum
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from kdissect.apis import APIS
from kdissect.cli import main
from kdissect.decode.dissect import dissect_request, dissect_response
from kdissect.decode.tree import Node
from kdissect.ingest import framing
from kdissect.ingest.capture import CaptureError
from kdissect.ingest.framing import Frame
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages
from kdissect.present.records import message_record, tree_record
from kdissect.present.summary import summary_line
from kdissect.present.text import render_tree
from tests.conftest import CAPTURES
from tests.record_paths import values_read_as_the_tree
from tools.fuzz import (
    CaptureModel,
    FrameCase,
    bombs,
    built_record_sets,
    check_records,
    hostile_records,
    mutate_capture,
    mutate_records,
    parse_pcap,
    parse_pcapng,
    rebatch,
)

HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile("ci", derandomize=True, max_examples=400, deadline=None,
                          suppress_health_check=HEALTH, database=None)
settings.register_profile("long", max_examples=5000, deadline=None, suppress_health_check=HEALTH)
PROFILE = settings.get_profile(os.environ.get("KDISSECT_FUZZ_PROFILE", "ci"))
REGRESSIONS = Path(__file__).parent / "fuzz_regressions"
DISSECTED = [(75, 0), (61, 0), (55, 0), (55, 1), (55, 2)]
quorum: Any = kio_quorum  # kio's phantom int and str types are not worth spelling out


def fuzz(share: float = 1.0) -> settings:
    """The selected profile with `share` of its examples (slower properties run fewer)."""
    return settings(PROFILE, max_examples=max(1, int(PROFILE.max_examples * share)))






# -- what every decoded tree and message must satisfy -------------------------------------------


def assert_sound(tree: Node, data: bytes) -> None:
    """Tiles, spans the frame, keeps its notes inside it, renders safely, serialises to JSON."""
    assert tree.tiling_errors() == []
    assert (tree.offset, tree.size) == (0, len(data))
    offsets = [n.offset for n in tree.all_notes() if n.offset is not None]
    assert all(0 <= offset <= len(data) for offset in offsets), offsets
    text = render_tree(tree)
    assert all(line.isprintable() for line in text.split("\n"))
    json.dumps(tree_record(tree), allow_nan=False)


def assert_message_sound(message: Message, ends: dict[tuple[int, str], int]) -> None:
    frame: Frame = message.frame
    assert_sound(message.tree(), frame.data)
    if frame.complete:
        assert struct.unpack_from(">i", frame.data)[0] + 4 == len(frame.data)
    key = (frame.connection.index, str(frame.direction))
    assert frame.stream_offset >= ends.get(key, 0) and frame.first_packet <= frame.last_packet
    ends[key] = frame.stream_offset + len(frame.data)
    assert summary_line(message, 0.0, body_info=True).isprintable()
    json.dumps(message_record(message), allow_nan=False)


def decode_capture(data: bytes) -> int:
    """Every message of a capture, checked; CaptureError only when nothing could be read."""
    reported: list[Any] = []
    ends: dict[tuple[int, str], int] = {}
    count = 0
    try:
        for message in read_messages(io.BytesIO(data), report=reported.append):
            count += 1
            assert_message_sound(message, ends)
    except CaptureError:
        assert count == 0 and reported == [], "CaptureError after the capture was being read"
    return count


# -- decoder: random bytes and damaged frames -------------------------------------------------

Decoding = tuple[str, int | None, int | None]  # "request" or "response", api key, version

DECODINGS: st.SearchStrategy[Decoding] = st.one_of(
    st.just(("request", None, None)),
    st.just(("response", None, None)),  # the request is missing
    st.sampled_from(DISSECTED).map(lambda api: ("response", *api)),
    st.tuples(st.just("response"), st.sampled_from(sorted(APIS)), st.integers(-1, 20)),
    st.tuples(st.just("response"), st.integers(-2**15, 2**15 - 1), st.integers(-2**15, 2**15 - 1)),
)


def decode(data: bytes, how: Decoding) -> Node:
    kind, api_key, version = how
    return dissect_request(data) if kind == "request" else dissect_response(data, api_key, version)


@st.composite
def frame_like(draw: st.DrawFn) -> bytes:
    """Random bytes behind a plausible size prefix and request header, so decoding goes deep."""
    key, version = draw(st.one_of(st.sampled_from(DISSECTED),
                                  st.tuples(st.sampled_from(sorted(APIS)), st.integers(-1, 20))))
    client = draw(st.binary(max_size=12))
    header = struct.pack(">hhih", key, version, draw(st.integers(0, 100)), len(client)) + client
    return framed(header + draw(st.binary(max_size=400)))


@fuzz()
@given(data=st.one_of(st.binary(max_size=600), frame_like()), how=DECODINGS)
def test_random_bytes_through_the_decoder(data: bytes, how: Decoding) -> None:
    assert_sound(decode(data, how), data)


@functools.cache
def shipped_frames() -> tuple[tuple[bytes, Decoding], ...]:
    """Every frame of the shipped captures, a response with its request's API and version."""
    found = []
    for path in sorted(CAPTURES.glob("*.pcap")):
        for message in read_messages(path):
            how = ("request", None, None) if message.is_request else (
                "response", message.api_key, message.api_version)
            found.append((message.frame.data, how))
    return tuple(found)


INT32S = [0, 1, -1, -2, 2**31 - 1, -2**31, 0x7FFFFFF0]
UVARINTS = [b"\x00", b"\x01", b"\x7f", b"\x80\x01", b"\xff\xff\xff\xff\x0f", b"\xfe\xff\xff\xff\x0f",
            b"\xff\xff\xff\xff\x7f", b"\x80\x80\x80\x80\x80\x01", b"\x80"]


@st.composite
def mutation(draw: st.DrawFn, data: bytearray) -> None:
    """One damage, in place: a bit flip, an overwrite, an insert, a delete, a cut, or a
    length field (the size prefix, an int32/int16 count, a compact uvarint) gone wrong."""
    at = draw(st.integers(0, len(data)))
    match draw(st.sampled_from(["flip", "overwrite", "insert", "delete", "cut", "size",
                                "int32", "int16", "uvarint"])):
        case "flip" if data:
            data[min(at, len(data) - 1)] ^= 1 << draw(st.integers(0, 7))
        case "overwrite" if data:
            data[min(at, len(data) - 1)] = draw(st.integers(0, 255))
        case "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        case "delete":
            del data[at:at + draw(st.integers(1, 16))]
        case "cut":
            del data[at:]
        case "size":
            data[0:4] = struct.pack(">i", draw(st.sampled_from([*INT32S, len(data) - 3, len(data)])))
        case "int32":
            data[at:at + 4] = struct.pack(">i", draw(st.sampled_from(INT32S)))
        case "int16":
            data[at:at + 2] = struct.pack(">h", draw(st.sampled_from([-1, -2, 0x7FFF, -0x8000])))
        case "uvarint":
            data[at:at + 1] = draw(st.sampled_from(UVARINTS))


@fuzz()
@given(st.data())
def test_damaged_frames_through_the_decoder(data: st.DataObject) -> None:
    frames = shipped_frames()
    original, right = frames[data.draw(st.integers(0, len(frames) - 1))]
    damaged = bytearray(original)
    for _ in range(data.draw(st.integers(1, 4))):
        data.draw(mutation(damaged))
    if len(damaged) >= 4 and data.draw(st.booleans()):  # a consistent size: the damage reaches the body
        damaged[0:4] = struct.pack(">i", len(damaged) - 4)
    how = data.draw(st.one_of(st.just(right), DECODINGS))
    assert_sound(decode(bytes(damaged), how), bytes(damaged))


# -- pipeline: damaged captures --------------------------------------------------------------


@functools.cache
def capture_model(path: Path) -> CaptureModel:
    raw = path.read_bytes()
    model = parse_pcap(raw) or parse_pcapng(raw)
    assert model is not None and model.records, path
    return model


def capture_models(public: Path) -> list[CaptureModel]:
    paths = [*sorted(CAPTURES.glob("*.pcap")), public / "ndpi_kafka.pcapng",
             public / "deepflow_mixed-with-unsupported.pcap", public / "gosniffer_kafka.pcap"]
    return [capture_model(path) for path in paths]


@fuzz(0.4)
@given(which=st.integers(0, 5), rng=st.randoms(use_true_random=False))
def test_damaged_captures_through_the_pipeline(public_captures: Path, which: int, rng: Any) -> None:
    """Windows of real captures with records dropped, repeated, reordered, cut or changed,
    written as pcap or pcapng and sometimes damaged as files (see tools/fuzz.py)."""
    models = capture_models(public_captures)
    decode_capture(mutate_capture(models[which], rng, models))


CLI_OPTIONS = [["-V", "-x", "-i"], ["-T", "json"], ["--stats"], ["-T", "jsonl", "-Y", "latency_ms >= 0"],
               ["--findings", "-T", "jsonl"],
               ["--export", "{folder}/out", "--format", "csv"], ["-t", "a", "-i"],
               ["-T", "fields", "-E", "separator=|", "-e", "key", "-e", "kafka.topic_name", "-e", "headerKey",
                "-e", "Records", "-Y", 'kafka.message_value contains "a" || ErrorCode != 0 || compression == "gzip"']]


@fuzz(0.05)
@given(which=st.integers(0, 5), options=st.sampled_from(CLI_OPTIONS), rng=st.randoms(use_true_random=False))
def test_damaged_captures_through_the_cli(public_captures: Path, which: int, options: list[str],
                                          rng: Any) -> None:
    models = capture_models(public_captures)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "damaged.pcap"
        path.write_bytes(mutate_capture(models[which], rng, models))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main([str(path), *(o.format(folder=folder) for o in options)])
        written = {str(p.relative_to(folder)).split(os.sep)[0] for p in Path(folder).rglob("*")}
    assert status in (0, 2) and "internal error" not in err.getvalue(), err.getvalue()
    assert all(line.isprintable() for line in (out.getvalue() + err.getvalue()).splitlines())
    assert written <= {"damaged.pcap", "out"}


# -- hand-made TCP for the runtime and memory properties (struct, not scapy: thousands of packets)


def tcp_packet(src: tuple[str, int], dst: tuple[str, int], seq: int, flags: int, payload: bytes) -> bytes:
    """An IPv4 + TCP packet (link type RAW), acknowledging nothing."""
    tcp = struct.pack(">HHIIBBHHH", src[1], dst[1], seq & 0xFFFFFFFF, 0, 5 << 4, flags, 65535, 0, 0)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), 0, 0, 64, 6, 0,
                     socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
    return ip + tcp + payload


CLIENT, SERVER = ("10.0.0.1", 40000), ("10.0.0.2", 9092)
SYN, ACK, PSH = 0x02, 0x10, 0x08


def segments(payload: bytes, size: int, *, from_client: bool = True, start: int = 1001,
             handshake: bool = True) -> list[bytes]:
    """`payload` in segments of `size` bytes, after a handshake (client ISN 1000, server 5000)."""
    src, dst = (CLIENT, SERVER) if from_client else (SERVER, CLIENT)
    packets = [tcp_packet(CLIENT, SERVER, 1000, SYN, b""), tcp_packet(SERVER, CLIENT, 5000, SYN | ACK, b"")]
    packets = packets if handshake else []
    for at in range(0, len(payload), size):
        packets.append(tcp_packet(src, dst, start + at, PSH | ACK, payload[at:at + size]))
    return packets


def pcap(packets: list[bytes]) -> bytes:
    return pcap_bytes([Record(p, 1_700_000_000 + i * 1e-5) for i, p in enumerate(packets)], LINKTYPE_RAW)


def pipeline(data: bytes) -> Callable[[], object]:
    def run() -> object:
        return [message.tree() for message in read_messages(io.BytesIO(data))]
    return run


PRODUCERS_HEADER = bytes.fromhex("003d 0000 00000007 0000 00")  # DescribeProducers v0 request, v2 header


def many_tagged_fields(n: int) -> Callable[[], object]:
    body = b"\x02\x02t\x02\x00\x00\x00\x01\x00" + uvarint(n) + b"".join(uvarint(i) + b"\x00" for i in range(n))
    frame = framed(PRODUCERS_HEADER + body)
    return lambda: dissect_request(frame)


def many_array_elements(n: int) -> Callable[[], object]:
    topic = b"\x02t\x03" + struct.pack(">ii", 1, 2) + b"\x00"
    frame = framed(PRODUCERS_HEADER + uvarint(n + 1) + topic * n + b"\x00")
    return lambda: dissect_request(frame)


def zero_filled_elements(n: int) -> Callable[[], object]:
    """An array count that just passes the size check; every element is null where it may not be."""
    frame = framed(PRODUCERS_HEADER + uvarint(n + 1) + b"\x00" * (3 * n))
    return lambda: dissect_request(frame)


def nested_arrays(n: int) -> Callable[[], object]:
    """DescribeQuorum v2, encoded by kio: n partitions of two voters each."""
    voters = tuple(quorum.ReplicaState(replica_id=i, replica_directory_id=None, log_end_offset=i)
                   for i in range(2))
    partitions = tuple(quorum.PartitionData(
        partition_index=i, error_code=ErrorCode.none, error_message=None, leader_id=1, leader_epoch=1,
        high_watermark=10, current_voters=voters, observers=()) for i in range(n))
    response = quorum.DescribeQuorumResponse(error_code=ErrorCode.none, error_message=None, nodes=(),
                                             topics=(quorum.TopicData(topic_name="t", partitions=partitions),))
    buffer = io.BytesIO()
    entity_writer(quorum.DescribeQuorumResponse)(buffer, response)
    frame = framed(b"\x00\x00\x00\x01\x00" + buffer.getvalue())
    return lambda: dissect_response(frame, 55, 2)


def tiny_segments(n: int) -> Callable[[], object]:
    request = framed(struct.pack(">hhih", 3, 1, 1, 0) + b"\x00" * n)  # Metadata v1, raw body
    return pipeline(pcap(segments(request, 1)))


def reversed_segments(n: int) -> Callable[[], object]:
    request = framed(struct.pack(">hhih", 3, 1, 1, 0) + b"\x00" * (8 * n))
    packets = segments(request, 8)
    return pipeline(pcap(packets[:2] + packets[2:][::-1]))


def plausible_garbage(n: int) -> Callable[[], object]:
    """Mid-stream response bytes where every position reads as a plausible response size."""
    return pipeline(pcap(segments(b"\x00\x10\x00\x00" * (n // 4), 16, from_client=False, handshake=False)))


def corrupt_records(n: int) -> Callable[[], object]:
    """n corrupt pcap record headers, each followed by two good records."""
    good = struct.pack("<IIII", 1000, 0, 60, 60) + b"\x01" * 60
    bad = struct.pack("<IIII", 1000, 0, 0x7FFFFFF0, 60) + b"\x02" * 10
    data = pcap_bytes([]) + (good + bad + good) * n
    return lambda: list(read_messages(io.BytesIO(data)))


def one_corrupt_record_in_a_big_file(n: int) -> Callable[[], object]:
    good = struct.pack("<IIII", 1000, 0, 60, 60) + b"\x01" * 60
    bad = struct.pack("<IIII", 1000, 0, 0x7FFFFFF0, 60) + b"\x02" * 10
    data = pcap_bytes([]) + good + bad + good * n
    return lambda: list(read_messages(io.BytesIO(data)))


def median_ratio(numerator: Callable[[], object], denominator: Callable[[], object], repeats: int) -> float:
    """Median time of one run over median time of the other, measured alternately so that a
    change in the machine's load touches both alike.

    Python's cyclic garbage collector is off while timing: its full passes walk every object
    alive in the test session, so their cost says more about the session than about the
    code measured (with it on, a tree of 8x the nodes took 13x to 30x as long).
    """
    tops: list[float] = []
    bottoms: list[float] = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            for run, times in ((numerator, tops), (denominator, bottoms)):
                start = time.perf_counter()
                run()
                times.append(time.perf_counter() - start)
    finally:
        gc.enable()
    return statistics.median(tops) / statistics.median(bottoms)


def assert_linear(build: Callable[[int], Callable[[], object]], n: int) -> None:
    """Eight times the input takes about eight times as long: under 30 times, to stay robust
    on a loaded machine while still catching quadratic work (64 times)."""
    small, large = build(n), build(8 * n)
    small()  # plans compiled, caches warm
    large()
    ratio = median_ratio(large, small, 3)
    assert ratio < 30, f"8x the input took {ratio:.1f}x as long"


@pytest.mark.parametrize(("build", "n"), [
    pytest.param(many_tagged_fields, 2000, id="tagged fields"),
    pytest.param(many_array_elements, 1000, id="array elements"),
    pytest.param(zero_filled_elements, 1000, id="zero-filled elements"),
    pytest.param(nested_arrays, 150, id="nested arrays"),
    pytest.param(tiny_segments, 400, id="1-byte segments"),
    pytest.param(reversed_segments, 400, id="segments in reverse order"),
    pytest.param(corrupt_records, 150, id="corrupt record headers"),
    pytest.param(one_corrupt_record_in_a_big_file, 2000, id="one corrupt record header"),
    pytest.param(plausible_garbage, 20_000, id="plausible garbage"),
])
def test_runtime_is_linear_in_input_size(build: Callable[[int], Callable[[], object]], n: int) -> None:
    assert_linear(build, n)


def test_resynchronisation_cost_does_not_grow_with_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate frame start holds the scan until RESYNC_WAIT bytes pile up behind it; past
    that, each byte must cost the same whether the wait is 1 KiB or 128 KiB (it once cost a
    pass over every segment still buffered: 800 KB of such bytes took 44 s)."""
    data = pcap(segments(b"\x00\x10\x00\x00" * 50_000, 16, from_client=False, handshake=False))

    def scan_with_wait(wait: int) -> Callable[[], object]:
        def run() -> object:
            monkeypatch.setattr(framing, "RESYNC_WAIT", wait)
            return list(read_messages(io.BytesIO(data)))
        return run

    ratio = median_ratio(scan_with_wait(128 * 1024), scan_with_wait(1024), 3)
    assert ratio < 2.5, f"a 128-times longer wait made the scan {ratio:.1f}x slower"


# -- memory bounded by input size -----------------------------------------------------------


def peak_bytes(run: Callable[[], object]) -> int:
    run()  # warm: nothing first-time (plans, regular expressions, imports) is counted
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


Measured = tuple[Callable[[], object], int]  # a run and the size of its input


def request_frame(body: bytes) -> Measured:
    frame = framed(PRODUCERS_HEADER + body)
    return (lambda: dissect_request(frame)), len(frame)


def response_frame(body: bytes) -> Measured:
    frame = framed(b"\x00\x00\x00\x01\x00" + body)
    return (lambda: dissect_response(frame, 55, 2)), len(frame)


def cut_frame(size: int) -> Measured:
    frame = struct.pack(">i", size) + PRODUCERS_HEADER
    return (lambda: dissect_request(frame)), len(frame)


def kafka_stream(prefix: bytes) -> Measured:
    data = pcap(segments(prefix + PRODUCERS_HEADER + b"\x00" * 32, 1460))
    return pipeline(data), len(data)


def pcap_record_claiming(captured: int) -> Measured:
    good = tcp_packet(CLIENT, SERVER, 1000, SYN, b"")
    data = pcap_bytes([Record(good, 1.0)], LINKTYPE_RAW) + struct.pack("<IIII", 1, 0, captured, captured) + good
    return (lambda: list(read_messages(io.BytesIO(data)))), len(data)


def pcapng_block_claiming(length: int, captured: int) -> Measured:
    section = struct.pack("<IIIHHqI", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1, 28)
    interface = struct.pack("<IIHHII", 1, 20, LINKTYPE_RAW, 0, 0, 20)
    packet = struct.pack("<IIIIIII", 6, length, 0, 0, 0, captured, captured) + b"\x45" * 16
    data = section + interface + packet + struct.pack("<I", length)
    return (lambda: list(read_messages(io.BytesIO(data)))), len(data)


@pytest.mark.parametrize("measured", [
    request_frame(uvarint(2**31 + 1) + b"\x00" * 64),  # Topics: 2^31 elements
    request_frame(b"\x02\x02t" + uvarint(2**31 + 1) + b"\x00" * 8),  # PartitionIndexes: 2^31
    request_frame(b"\x02" + uvarint(2**32 - 1) + b"abc\x00"),  # Name: compact length 2^32-2
    request_frame(b"\x01" + uvarint(2**32 - 1) + b"\x00\x00"),  # tagged fields: 2^32-1
    response_frame(b"\x00\x00\x00" + uvarint(2**31) + b"\x00" * 16),  # DescribeQuorum Topics
    cut_frame(2**31 - 1),  # a size prefix of 2^31-1 and a header
    kafka_stream(struct.pack(">i", 2**31 - 1)),  # the same on the wire
    kafka_stream(struct.pack(">i", 100 * 1024 * 1024)),  # the largest size framing accepts
    pcap_record_claiming(2**32 - 1),  # a record header claiming 4 GiB
    pcapng_block_claiming(2**32 - 4, 16),  # a block claiming 4 GiB
    pcapng_block_claiming(48, 2**32 - 1),  # a packet claiming 4 GiB inside a small block
], ids=["array 2^31", "int32 array 2^31", "compact string 2^32-2", "tagged fields 2^32-1",
        "nested array 2^31", "frame size 2^31-1", "stream size 2^31-1", "stream size 100 MiB",
        "pcap record 2^32-1", "pcapng block 2^32-4", "pcapng packet 2^32-1"])
def test_memory_is_bounded_by_input_size(measured: Measured) -> None:
    """Lengths and counts claiming gigabytes allocate nothing for them."""
    run, size = measured
    assert peak_bytes(run) < 1024 * 1024 + 10 * size


# -- records: record batches and compression --------------------------------------------------


@functools.cache
def record_sets() -> tuple[bytes, ...]:
    return tuple(built_record_sets())


@fuzz(0.15)
@given(which=st.integers(0, 12), rng=st.randoms(use_true_random=False))
def test_damaged_record_sets_decode_tile_and_render(which: int, rng: Any) -> None:
    data = mutate_records(record_sets()[which % len(record_sets())], rng)
    assert check_records(data)[0] == []
    values_read_as_the_tree(data)  # as filters and -T fields read them


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_hostile_compressed_records_are_notes_in_bounded_time(codec: int) -> None:
    """Bombs, cut and damaged compressed data, with a right CRC so nothing stops early."""
    compressed = next(s for s in record_sets() if s[16] == 2 and s[22] & 0x07 == codec)
    for seed in range(12):
        data = hostile_records(compressed, random.Random(seed))
        began = time.perf_counter()
        problems, _ = check_records(data + record_sets()[-1])
        assert problems == [] and time.perf_counter() - began < 5
        values_read_as_the_tree(data + record_sets()[-1])


def test_every_bomb_stops_at_the_bound_with_a_note() -> None:
    from kdissect.decode.records import decode_records

    plain = next(s for s in record_sets() if s[16] == 2 and s[22] & 0x07 == 0)
    for codec, bomb in bombs().items():
        tracemalloc.start()
        try:
            (batch,) = decode_records(rebatch(plain, codec, bomb), max_decompressed=4 << 20)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert "decompress to more than" in batch.notes[0].message and peak < 12 << 20


# -- what the long run found, replayed ----------------------------------------------------------


@pytest.mark.parametrize("path", sorted(REGRESSIONS.glob("decoder-*.bin")) + sorted(
    REGRESSIONS.glob("pipeline-*.pcap")) + sorted(REGRESSIONS.glob("records-*.records")),
    ids=lambda path: path.name)
def test_fuzz_regression(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = path.read_bytes()
    if path.name.startswith("records-"):
        assert check_records(data)[0] == []
        return
    if path.name.startswith("decoder-"):
        case = FrameCase.decode(data)
        how = ("request", None, None) if case.request else ("response", case.api_key, case.api_version)
        assert_sound(decode(case.frame, how), case.frame)
        return
    decode_capture(data)
    for options in (["-V", "-x", "-i"], ["--stats"], ["--export", str(tmp_path / "out"), "--format", "csv"],
                    ["--findings"], ["--findings", "-j", "2"]):
        assert main([str(path), *options]) in (0, 2)
        output = capsys.readouterr()
        assert "internal error" not in output.err
        assert all(line.isprintable() for line in (output.out + output.err).splitlines())
    for options in (["report", str(path), "-o", str(tmp_path / "page.html")],):
        assert main(options) in (0, 2)
        output = capsys.readouterr()
        assert "internal error" not in output.err
        assert all(line.isprintable() for line in (output.out + output.err).splitlines())
