"""The walk over a classic pcap file's record headers (`PcapIndex.chunks`): the C of
`ingest/_pcap_index_c` and the Python it mirrors (`capture._record_heads`) index every
file alike, chunk by chunk, and refuse the same files with the same message.

Compared on the shipped and third-party captures, on them written again in each byte
order and time resolution, on files hypothesis writes (records of any length, chunks
of a few records, files past a megabyte), damaged or not, and on the walk itself over
random bytes. Here both run side by side, whatever KDISSECT_PURE says.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from craft import Record, pcap_bytes
from hypothesis import given, settings
from hypothesis import strategies as st

from kdissect.ingest import capture
from kdissect.ingest.capture import (
    INDEX_CHUNK,
    MAX_RECORD,
    PCAP_MAGICS,
    NotIndexable,
    PcapIndex,
    read_records,
)
from kdissect.ingest.net import decode_tcp
from kdissect.ingest.reassembly import flow_bucket
from kdissect.parallel import _plain_tcp, _python_buckets
from tests.conftest import CAPTURES, missing

CHECKS = settings(derandomize=True, max_examples=300, deadline=None, database=None)
SIZES = (None, 1, 7, 1000)  # chunk sizes: INDEX_CHUNK, and small enough to end between any records

Walk = Callable[[Any, int, int, bool, int], tuple[Any, int, int]]
# every chunk's first record and arrays (dtype and bytes), and NotIndexable's message if one stopped it
Indexed = tuple[list[tuple[Any, ...]], str | None]


def in_c(name: str) -> Any:
    """Function `name` of the C extension (the test skips where it is not built)."""
    try:
        module = importlib.import_module("kdissect.ingest._pcap_index_c")
    except ImportError:
        missing("kdissect.ingest._pcap_index_c is not built (no C compiler at install?)")
    return getattr(module, name)


@pytest.fixture(scope="module")
def walk() -> Walk:
    record_heads: Walk = in_c("record_heads")
    return record_heads


def indexed(path: Path, size: int | None, walk: Walk) -> Indexed:
    """The chunks `walk` gives `PcapIndex.chunks` (up to the problem that stops it)."""
    found: list[tuple[Any, ...]] = []
    index = PcapIndex(path)
    saved, capture._walk = capture._walk, walk
    try:
        for chunk in index.chunks(size):
            found.append((chunk.first, *((array.dtype.str, array.tobytes()) for array in
                                         (chunk.starts, chunk.captured, chunk.original, chunk.timestamps))))
    except NotIndexable as problem:
        return found, str(problem)
    finally:
        capture._walk = saved
        index.close()
    return found, None


def alike(path: Path, walk: Walk, sizes: tuple[int | None, ...] = SIZES) -> Indexed:
    """The C and the Python index `path` alike at every chunk size: what they give at the first."""
    first = None
    for size in sizes:
        python = indexed(path, size, capture._record_heads)
        assert indexed(path, size, walk) == python, (path, size)
        first = first or python
    assert first is not None
    return first


def classic(paths: list[Path]) -> list[Path]:
    return [path for path in paths if path.read_bytes()[:4] in PCAP_MAGICS]


def test_the_shipped_captures(walk: Walk) -> None:
    for path in sorted(CAPTURES.glob("*.pcap")):
        chunks, problem = alike(path, walk)
        assert problem is None and chunks


def test_the_third_party_captures(walk: Walk, public_captures: Path) -> None:
    paths = classic(sorted(public_captures.glob("*.pcap*")))
    assert paths
    for path in paths:
        alike(path, walk)


@pytest.mark.parametrize(("big_endian", "nanoseconds"), [(False, False), (True, False), (False, True), (True, True)])
def test_each_byte_order_and_resolution(walk: Walk, tmp_path: Path, big_endian: bool, nanoseconds: bool) -> None:
    """A shipped capture written again: the same records, at the same offsets, at the same times."""
    source = sorted(CAPTURES.glob("*.pcap"))[0]
    items = [Record(data, ns=timestamp, original_length=original)
             for _number, timestamp, _linktype, data, original in read_records(source)]
    path = tmp_path / "again.pcap"
    path.write_bytes(pcap_bytes(items, big_endian=big_endian, nanoseconds=nanoseconds))
    assert (path.read_bytes()[:4] in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d")) is big_endian
    assert alike(path, walk) == indexed(source, None, capture._record_heads)


def test_damaged_files(walk: Walk, tmp_path: Path) -> None:
    whole = pcap_bytes([Record(bytes(60 + n), ns=n * 1000) for n in range(40)], snaplen=1000)
    last = 60 + 39
    cases = {
        "header": (whole + b"\x00" * 9, "a record header cut short"),
        "header at the end": (whole + b"\x00" * 15, "a record header cut short"),
        "last": (whole[:-5], "the last record cut short"),
        "last, to its header": (whole[:-last], "the last record cut short"),
        "into the last header": (whole[:-last - 1], "a record header cut short"),
        "snaplen": (whole[:16] + struct.pack("<I", 90) + whole[20:], "a captured length beyond the snap length"),
        "beyond MAX_RECORD": (whole[:16] + struct.pack("<I", 0xFFFFFFFF) + whole[20:]
                              + struct.pack("<IIII", 0, 0, MAX_RECORD + 1, MAX_RECORD + 1),
                              "a captured length beyond the snap length"),
        "no records": (whole[:24], None),
    }
    for name, (data, message) in cases.items():
        path = tmp_path / "damaged.pcap"
        path.write_bytes(data)
        chunks, problem = alike(path, walk)
        assert problem == message, name
        assert chunks or problem is not None or name == "no records"


def test_a_map_may_be_closed_while_a_chunk_is_out(walk: Walk) -> None:
    """No view of the map outlives the step that makes a chunk."""
    for chosen in (walk, capture._record_heads):
        index = PcapIndex(sorted(CAPTURES.glob("*.pcap"))[0])
        saved, capture._walk = capture._walk, chosen
        try:
            chunk = next(index.chunks(5))
            index.close()
        finally:
            capture._walk = saved
        assert len(chunk.starts) == 5


# records of any length, a few of them long enough to take a file past a megabyte
lengths = st.lists(st.one_of(st.integers(0, 1600), st.integers(0, 40), st.integers(0, 200),
                             st.integers(200_000, 450_000)), max_size=30)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("index")


@CHECKS
@given(sizes=lengths, chunk=st.integers(1, 12), big_endian=st.booleans(), nanoseconds=st.booleans(),
       snaplen=st.sampled_from([65535, 262144, 600_000, 0xFFFFFFFF]), cut=st.integers(0, 40),
       tail=st.binary(max_size=20))
def test_written_files(walk: Walk, folder: Path, sizes: list[int], chunk: int,
                       big_endian: bool, nanoseconds: bool, snaplen: int, cut: int, tail: bytes) -> None:
    items = [Record(bytes([n % 251]) * size, ns=1_700_000_000 * 10**9 + n * 1_000_003_000,
                    original_length=size + n % 3) for n, size in enumerate(sizes)]
    whole = pcap_bytes(items, big_endian=big_endian, nanoseconds=nanoseconds, snaplen=snaplen)
    path = folder / "written.pcap"
    for data in (whole, whole[:len(whole) - cut] if len(whole) - cut >= 24 else whole, whole + tail):
        path.write_bytes(data)
        chunks, problem = alike(path, walk, (None, chunk))
        if data is whole and all(size <= snaplen for size in sizes):  # as written
            assert problem is None
            starts = [24 + 16 * (n + 1) + sum(sizes[:n]) for n in range(len(sizes))]
            assert b"".join(found[1][1] for found in chunks) == struct.pack(f"={len(starts)}q", *starts)
            assert [found[0] for found in chunks] == list(range(0, len(sizes), INDEX_CHUNK))


@CHECKS
@given(data=st.binary(max_size=400), position=st.integers(0, 420), count=st.integers(0, 40),
       big_endian=st.booleans(), limit=st.sampled_from([0, 1, 16, 255, 4096, 2**24, 2**32 - 1]))
def test_the_walk_over_random_bytes(walk: Walk, data: bytes, position: int, count: int, big_endian: bool,
                                    limit: int) -> None:
    heads, at, problem = walk(data, position, count, big_endian, limit)
    expected_heads, expected_at, expected_problem = capture._record_heads(data, position, count, big_endian, limit)
    assert (bytes(heads), at, problem) == (expected_heads.tobytes(), expected_at, expected_problem)


def test_the_walk_refuses_what_it_cannot_mean(walk: Walk) -> None:
    for position, count in ((-1, 4), (24, -1)):
        with pytest.raises(ValueError):
            walk(b"\x00" * 64, position, count, False, 100)
    with pytest.raises(TypeError):
        walk("text", 0, 1, False, 100)


# --- the buckets of the `--jobs` share plan (`parallel._python_buckets`) -------------------

Buckets = Callable[[Any, Any, Any], bytes]


@pytest.fixture(scope="module")
def buckets_in_c() -> Buckets:
    flow_buckets: Buckets = in_c("flow_buckets")
    return flow_buckets


def planned(path: Path, buckets: Buckets, size: int | None = None) -> list[int]:
    """The bucket `buckets` gives each record of an Ethernet capture, chunk by chunk."""
    import numpy as np

    index = PcapIndex(path)
    try:
        assert index.linktype == 1
        return [bucket for chunk in index.chunks(size)
                for bucket in np.frombuffer(buckets(index.data, np.ascontiguousarray(chunk.starts),
                                                    np.ascontiguousarray(chunk.captured)), dtype=np.int8).tolist()]
    finally:
        index.close()


def decoded(path: Path) -> list[int]:
    """Each record's bucket as a worker finds it, by decoding the packet (`net.decode_tcp`),
    where the plan may place it (`parallel._plain_tcp`): -1 for any other."""
    return [flow_bucket(raw[:4]) if (raw := decode_tcp(linktype, data, original)) is not None and _plain_tcp(data)
            else -1 for _number, _timestamp, linktype, data, original in read_records(path)]


def test_the_plan_places_every_record_of_the_captures_where_its_worker_finds_it(
        buckets_in_c: Buckets, public_captures: Path) -> None:
    paths = [path for path in [*sorted(CAPTURES.glob("*.pcap")), *classic(sorted(public_captures.glob("*.pcap*")))]
             if PcapIndex(path).linktype == 1]
    assert len(paths) > 5
    placed = 0
    for path in paths:
        expected = decoded(path)
        assert planned(path, _python_buckets) == expected, path
        assert planned(path, buckets_in_c, 7) == planned(path, buckets_in_c) == expected, path
        placed += sum(bucket >= 0 for bucket in expected)
    assert placed > 500


def packet_head(rng_bytes: bytes, plain: bool, ihl: int, protocol: int, fragment: int, data_offset: int,
                total: int, same_address: bool) -> bytes:
    """An Ethernet IPv4 header and a TCP header's first 14 bytes, from the fields given and
    `rng_bytes` (addresses, ports, and the rest)."""
    source, destination = rng_bytes[:4], rng_bytes[:4] if same_address else rng_bytes[4:8]
    ports = rng_bytes[8:12]
    ethernet_type = b"\x08\x00" if plain else rng_bytes[12:14]
    ip = (bytes([0x40 | ihl, 0]) + struct.pack(">HHH", total, 0, fragment) + bytes([64, protocol]) + b"\x00\x00"
          + source + destination)
    tcp = ports + b"\x00" * 8 + bytes([data_offset << 4, 0x18])
    return b"\x00" * 12 + ethernet_type + ip + tcp


heads = st.builds(packet_head, st.binary(min_size=14, max_size=14), st.booleans(), st.sampled_from([5, 5, 5, 6, 15]),
                  st.sampled_from([6, 6, 17]), st.sampled_from([0, 0, 0x4000, 0x2000, 0x0001]),
                  st.sampled_from([5, 5, 8, 15, 4, 0]), st.integers(0, 1600), st.booleans())


@CHECKS
@given(packets=st.lists(st.tuples(heads, st.binary(min_size=60, max_size=60), st.integers(0, 110)), max_size=40))
def test_the_plan_places_written_packets_alike_in_c_and_python(buckets_in_c: Buckets, folder: Path,
                                                               packets: list[tuple[bytes, bytes, int]]) -> None:
    """Headers of every kind near the conditions of `_plain_tcp` (options, fragments, other
    protocols, data offsets out of bounds, one address at both ends), cut anywhere."""
    items = [Record((head + tail)[:length], ns=n) for n, (head, tail, length) in enumerate(packets)]
    path = folder / "heads.pcap"
    path.write_bytes(pcap_bytes(items))
    expected = decoded(path)
    assert planned(path, _python_buckets) == expected
    assert planned(path, buckets_in_c, 3) == expected


def test_the_plan_in_c_keeps_many_connections_apart(buckets_in_c: Buckets, folder: Path) -> None:
    """More connections than the C loop keeps the buckets of (its recent flows' slots),
    their segments in both directions, interleaved and coming back in a shuffled order:
    each record still has its own connection's bucket."""
    import random

    def head(client: int, toward_server: bool) -> bytes:
        ends = [bytes([10, 1, 0, client % 5]), bytes([10, 0, 0, 1 + client % 3])]  # few hosts, many ports
        ports = [struct.pack(">H", 30000 + client), struct.pack(">H", 9092)]
        if not toward_server:
            ends.reverse()
            ports.reverse()
        return packet_head(ends[0] + ends[1] + ports[0] + ports[1] + b"\x00\x00", True, 5, 6, 0, 5, 40, False)

    turns = [(client, toward) for client in range(1500) for toward in (True, False)] * 3
    random.Random(7).shuffle(turns)
    path = folder / "many.pcap"
    path.write_bytes(pcap_bytes([Record(head(*turn) + bytes(12), ns=n) for n, turn in enumerate(turns)]))
    expected = decoded(path)
    assert min(expected) >= 0 and len(set(expected)) > 32
    assert planned(path, buckets_in_c) == planned(path, _python_buckets) == expected


def test_the_plan_in_c_refuses_what_it_cannot_mean(buckets_in_c: Buckets) -> None:
    import numpy as np

    starts, captured = np.array([0, 60], dtype=np.int64), np.array([60, 60], dtype=np.int64)
    with pytest.raises(ValueError, match="beyond the data"):
        buckets_in_c(b"\x00" * 100, starts, captured)  # the second record's 48 bytes are not there
    with pytest.raises(ValueError, match="one length"):
        buckets_in_c(b"\x00" * 200, starts, captured[:1])
    assert buckets_in_c(b"\x00" * 100, starts, np.array([60, 47], dtype=np.int64)) == b"\xff\xff"


@pytest.mark.parametrize(("data_offset", "total", "length", "placed"), [
    (5, 40, 54, True), (5, 40, 53, False),  # the TCP header's end against the record's
    (8, 52, 66, True), (8, 52, 65, False), (15, 80, 94, True), (15, 80, 93, False),
    (5, 40, 60, True), (5, 39, 60, False),  # ... against the IPv4 total length
    (4, 40, 60, False), (5, 40, 47, False)])
def test_the_plan_at_the_edges_of_a_plain_segment(buckets_in_c: Buckets, folder: Path, data_offset: int,
                                                  total: int, length: int, placed: bool) -> None:
    head = packet_head(bytes(range(1, 15)), True, 5, 6, 0, data_offset, total, False)
    path = folder / "edges.pcap"
    path.write_bytes(pcap_bytes([Record((head + bytes(60))[:length], ns=1)]))
    expected = decoded(path)
    assert (expected[0] >= 0) is placed
    assert planned(path, _python_buckets) == planned(path, buckets_in_c) == expected
