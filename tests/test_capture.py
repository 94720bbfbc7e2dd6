"""Capture files: pcap in both byte orders and resolutions, pcapng with several interfaces,
and every way a capture file can be broken."""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path

import pytest
from craft import (
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV6,
    LINKTYPE_RAW,
    LINKTYPE_SLL2,
    Record,
    pcap_bytes,
    pcapng_block,
    pcapng_interface,
    pcapng_packet,
    pcapng_section,
    write_pcap,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from kdissect.ingest import capture
from kdissect.ingest.capture import CaptureError, Packet, read_packets
from kdissect.notes import Note, Severity

PAYLOADS = [b"\x01" * 60, b"\x02" * 61, b"\x03" * 1500]
TIMES = [1_700_000_000_000_001_000, 1_700_000_000_500_000_000, 1_700_000_123_999_999_000]  # ns


def _read(source: object) -> tuple[list[Packet], list[Note]]:
    notes: list[Note] = []
    return list(read_packets(source, notes.append)), notes  # type: ignore[arg-type]


def _records() -> list[Record]:
    return [Record(data, ns=time) for data, time in zip(PAYLOADS, TIMES, strict=True)]


@pytest.mark.parametrize("big_endian", [False, True])
@pytest.mark.parametrize("nanoseconds", [False, True])
def test_pcap_byte_orders_and_resolutions(tmp_path: Path, big_endian: bool, nanoseconds: bool) -> None:
    path = write_pcap(tmp_path / "c.pcap", _records(), LINKTYPE_ETHERNET,
                      big_endian=big_endian, nanoseconds=nanoseconds)
    packets, notes = _read(path)
    assert notes == []
    assert [p.number for p in packets] == [1, 2, 3]
    assert [p.data for p in packets] == PAYLOADS
    assert [p.original_length for p in packets] == [60, 61, 1500]
    assert {p.linktype for p in packets} == {LINKTYPE_ETHERNET}
    assert [p.timestamp for p in packets] == TIMES  # exact, in either resolution


def test_nanosecond_timestamps_keep_their_precision(tmp_path: Path) -> None:
    record = Record(b"x" * 20, 1_000.123456789)  # small enough for a float to hold ns
    path = write_pcap(tmp_path / "ns.pcap", [record], nanoseconds=True)
    (packet,), _ = _read(path)
    raw = path.read_bytes()
    assert struct.unpack_from("<I", raw, 24 + 4)[0] == 123456789  # the file holds nanoseconds
    assert packet.timestamp == 1_000_123_456_789


def test_pcap_from_a_non_seekable_stream() -> None:
    data = pcap_bytes(_records(), LINKTYPE_RAW)

    class Pipe(io.RawIOBase):  # returns at most 7 bytes per read, like a slow pipe
        def __init__(self) -> None:
            self.position = 0

        def readable(self) -> bool:
            return True

        def read(self, size: int = -1) -> bytes:
            size = 7 if size < 0 else min(size, 7)
            chunk = data[self.position:self.position + size]
            self.position += len(chunk)
            return chunk

    packets, notes = _read(Pipe())
    assert notes == []
    assert [p.data for p in packets] == PAYLOADS
    assert {p.linktype for p in packets} == {LINKTYPE_RAW}


def test_pcapng_with_several_interfaces_and_resolutions(tmp_path: Path) -> None:
    first = Record(b"A" * 40, 1_700_000_000.25, interface=0)
    second = Record(b"B" * 50, 1_700_000_001.123456789, interface=1)
    third = Record(b"C" * 30, 1_700_000_002.5, interface=2, original_length=90)
    content = (pcapng_section() + pcapng_interface(LINKTYPE_ETHERNET)
               + pcapng_interface(LINKTYPE_SLL2, tsresol=9) + pcapng_interface(LINKTYPE_IPV6)
               + pcapng_packet(first) + pcapng_packet(second, units_per_second=10**9)
               + pcapng_packet(third))
    path = tmp_path / "mixed.pcapng"
    path.write_bytes(content)
    packets, notes = _read(path)
    assert notes == []
    assert [(p.number, p.linktype, p.data, p.original_length) for p in packets] == [
        (1, LINKTYPE_ETHERNET, b"A" * 40, 40),
        (2, LINKTYPE_SLL2, b"B" * 50, 50),
        (3, LINKTYPE_IPV6, b"C" * 30, 90),
    ]
    assert [p.timestamp for p in packets] == pytest.approx(
        [1_700_000_000_250_000_000, 1_700_000_001_123_456_789, 1_700_000_002_500_000_000], abs=1000)


def test_pcapng_big_endian_and_a_second_section(tmp_path: Path) -> None:
    content = (pcapng_section(">") + pcapng_interface(LINKTYPE_RAW, endian=">")
               + pcapng_packet(Record(b"big", 10.0), endian=">")
               + pcapng_section("<") + pcapng_interface(LINKTYPE_ETHERNET)
               + pcapng_packet(Record(b"little", 20.0)))
    path = tmp_path / "two.pcapng"
    path.write_bytes(content)
    packets, notes = _read(path)
    assert notes == []
    assert [(p.linktype, p.data, p.timestamp) for p in packets] == [
        (LINKTYPE_RAW, b"big", 10_000_000_000), (LINKTYPE_ETHERNET, b"little", 20_000_000_000)]


# --- broken files ---

def test_zero_length_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.pcap"
    path.write_bytes(b"")
    with pytest.raises(CaptureError, match=r"^empty file$"):
        _read(path)


def test_wrong_magic(tmp_path: Path) -> None:
    path = tmp_path / "text.pcap"
    path.write_bytes(b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(CaptureError, match=r"not a pcap or pcapng file \(magic 0x47455420\)"):
        _read(path)


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="is a directory"):
        _read(tmp_path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="No such file"):
        _read(tmp_path / "nope.pcap")


def test_unreadable_file(tmp_path: Path) -> None:
    path = write_pcap(tmp_path / "secret.pcap", _records())
    path.chmod(0)
    if os.geteuid() == 0:  # root reads anything: drop the effective uid for the open
        os.seteuid(65534)
        try:
            with pytest.raises(CaptureError, match="Permission denied"):
                _read(path)
        finally:
            os.seteuid(0)
    else:
        with pytest.raises(CaptureError, match="Permission denied"):
            _read(path)


def test_pcap_header_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "short.pcap"
    path.write_bytes(pcap_bytes([])[:10])
    with pytest.raises(CaptureError, match="header cut short"):
        _read(path)


@pytest.mark.parametrize(("cut", "message"), [
    (5, "the record header after packet 2 has 5 of 16 bytes"),
    (16 + 30, "packet 3 has 30 of its 1500 bytes"),
])
def test_pcap_cut_in_the_middle_of_a_record(tmp_path: Path, cut: int, message: str) -> None:
    whole = pcap_bytes(_records())
    last_record = len(whole) - 16 - len(PAYLOADS[2])
    path = tmp_path / "cut.pcap"
    path.write_bytes(whole[:last_record + cut])
    packets, notes = _read(path)
    assert [p.data for p in packets] == PAYLOADS[:2]
    assert len(notes) == 1 and notes[0].severity is Severity.WARN
    assert notes[0].message.startswith("capture cut short") and message in notes[0].message


def test_caplen_larger_than_snaplen_is_read_with_one_note(tmp_path: Path) -> None:
    items = [Record(b"a" * 100, 1.0), Record(b"b" * 150, 2.0), Record(b"c" * 150, 3.0),
             Record(b"d" * 10, 4.0)]
    path = write_pcap(tmp_path / "snap.pcap", items, snaplen=120)
    packets, notes = _read(path)
    assert [p.data for p in packets] == [i.data for i in items]
    assert len(notes) == 1
    assert "packet 2: captured length 150 exceeds the file's snap length 120" in notes[0].message


def test_corrupt_record_header_resumes_at_the_next_plausible_record(tmp_path: Path) -> None:
    items = [*_records(), Record(b"\x04" * 70, ns=TIMES[2] + 10**9)]
    whole = bytearray(pcap_bytes(items))
    second = 24 + 16 + len(PAYLOADS[0])
    struct.pack_into("<I", whole, second + 8, 0x7FFFFFF0)  # captured length of packet 2
    path = tmp_path / "corrupt.pcap"
    path.write_bytes(bytes(whole))
    packets, notes = _read(path)
    # packet 2's length is unknowable, so its bytes are lost; packets 3 and 4 are found again
    assert [p.data for p in packets] == [PAYLOADS[0], PAYLOADS[2], b"\x04" * 70]
    assert [p.number for p in packets] == [1, 2, 3]
    assert [(n.severity, n.message) for n in notes] == [
        (Severity.ERROR, "packet 2: record header is corrupt (captured length 2147483632)"),
        (Severity.WARN, "resumed reading at the next plausible record after packet 1, "
                        f"{16 + len(PAYLOADS[1])} bytes later")]


def test_corrupt_record_header_with_nothing_plausible_after_it(tmp_path: Path) -> None:
    whole = pcap_bytes(_records()[:1]) + struct.pack("<IIII", 1, 2, 0x7FFFFFF0, 5) + b"\xff" * 500
    path = tmp_path / "corrupt.pcap"
    path.write_bytes(whole)
    packets, notes = _read(path)
    assert [p.data for p in packets] == PAYLOADS[:1]
    assert notes[-1].message == ("no plausible record found in the 516 bytes after packet 1; "
                                 "the rest of the file cannot be read")


SHIPPED = Path(__file__).resolve().parents[1] / "captures" / "quorum_story.pcap"


@settings(derandomize=True, max_examples=60, deadline=None, database=None)
@given(cut=st.integers(0, 4000), damage=st.lists(st.tuples(st.integers(0, 16300), st.binary(min_size=1, max_size=6)),
                                                 max_size=4),
       chunk=st.sampled_from([16, 17, 100, 1500, 4096, 1 << 20]))
def test_a_file_read_in_chunks_gives_what_a_pipe_gives(tmp_path_factory: pytest.TempPathFactory, cut: int,
                                                       damage: list[tuple[int, bytes]], chunk: int) -> None:
    """A capture file on disk is read ahead in chunks, a pipe record by record: the same
    packets and the same notes either way, whatever a record straddles or breaks."""
    whole = bytearray(SHIPPED.read_bytes())
    for offset, junk in damage:  # record headers and data overwritten, then the file cut
        whole[24 + offset:24 + offset + len(junk)] = junk
    data = bytes(whole[:len(whole) - cut])
    path = tmp_path_factory.mktemp("chunks") / "c.pcap"
    path.write_bytes(data)
    original = capture.READ_BUFFER
    capture.READ_BUFFER = chunk
    try:
        from_file = _read(path)
    finally:
        capture.READ_BUFFER = original
    assert from_file == _read(io.BytesIO(data))  # no file number: read record by record


def _pcapng(*blocks: bytes) -> bytes:
    return pcapng_section() + pcapng_interface(LINKTYPE_RAW) + b"".join(blocks)


def test_pcapng_unknown_block_is_skipped_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "unknown.pcapng"
    path.write_bytes(_pcapng(pcapng_packet(Record(b"before", 1.0)),
                             pcapng_block(0x0000_0777, b"\x00" * 12),
                             pcapng_packet(Record(b"after", 2.0))))
    packets, notes = _read(path)
    assert [p.data for p in packets] == [b"before", b"after"]
    assert [n.message for n in notes] == [
        "pcapng block of unknown type 0x00000777 after packet 1 skipped"]


def test_pcapng_known_blocks_are_skipped_quietly(tmp_path: Path) -> None:
    statistics = pcapng_block(5, struct.pack("<III", 0, 0, 0))  # interface statistics
    path = tmp_path / "stats.pcapng"
    path.write_bytes(_pcapng(pcapng_packet(Record(b"one", 1.0)), statistics))
    packets, notes = _read(path)
    assert [p.data for p in packets] == [b"one"] and notes == []


@pytest.mark.parametrize("cut", [6, 20])
def test_pcapng_cut_in_the_middle_of_a_block(tmp_path: Path, cut: int) -> None:
    last = pcapng_packet(Record(b"x" * 64, 3.0))
    path = tmp_path / "cut.pcapng"
    path.write_bytes(_pcapng(pcapng_packet(Record(b"kept", 1.0)), last[:cut]))
    packets, notes = _read(path)
    assert [p.data for p in packets] == [b"kept"]
    assert len(notes) == 1 and "capture cut short" in notes[0].message


def test_pcapng_packet_of_an_undeclared_interface(tmp_path: Path) -> None:
    path = tmp_path / "iface.pcapng"
    path.write_bytes(_pcapng(pcapng_packet(Record(b"bad", 1.0, interface=3)),
                             pcapng_packet(Record(b"good", 2.0))))
    packets, notes = _read(path)
    assert [(p.number, p.data) for p in packets] == [(1, b"good")]
    assert "interface 3" in notes[0].message


def test_pcapng_bad_byte_order_magic(tmp_path: Path) -> None:
    section = bytearray(pcapng_section())
    section[8:12] = b"\x00\x11\x22\x33"
    path = tmp_path / "bom.pcapng"
    path.write_bytes(bytes(section))
    with pytest.raises(CaptureError, match="byte-order magic 0x00112233"):
        _read(path)


def test_pcapng_simple_packet_block(tmp_path: Path) -> None:
    simple = pcapng_block(3, struct.pack("<I", 7) + b"simple!")
    path = tmp_path / "simple.pcapng"
    path.write_bytes(_pcapng(simple, pcapng_packet(Record(b"enhanced", 2.0))))
    packets, notes = _read(path)
    assert [(p.number, p.data, p.original_length) for p in packets] == [
        (1, b"simple!", 7), (2, b"enhanced", 8)]
    assert notes == []
