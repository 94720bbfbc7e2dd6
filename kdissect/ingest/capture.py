"""Stage 1: capture files (pcap, pcapng) to numbered packets.

Both formats are read record by record with exact-size reads, so a pipe
(`tcpdump -U -w - | kdissect -`) is consumed as it arrives and nothing is kept
after a packet has been handed on.

Classic pcap is walked with a small `struct` loop: it is the hot path of the
whole tool and dpkt's reader builds a header object per record, which costs
more than all of our own per-record work. pcapng blocks are walked with
`struct` too, because dpkt's pcapng reader only knows the first interface of a
file; dpkt parses the interface description blocks (their options carry the
timestamp resolution and offset), which are rare.
"""

from __future__ import annotations

import array
import os
import stat
import struct
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from kdissect.ingest.compressed import compression_of, decompressing
from kdissect.native import native_or
from kdissect.notes import Note, error, note, warn

if TYPE_CHECKING:
    import mmap

Report = Callable[[Note], None]


class Reader(Protocol):
    """All a capture source must offer: `read`, which may return fewer bytes than asked."""

    def read(self, size: int = -1, /) -> bytes: ...


# One packet record of a capture file: number, time (ns since the epoch), linktype, data,
# original length. (A Kafka record is `kdissect.decode.records.Record`.)
CaptureRecord = tuple[int, int, int, bytes, int]

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000),  # nanoseconds per unit of the sub-second part
    b"\xa1\xb2\xc3\xd4": (">", 1000),
    b"\x4d\x3c\xb2\xa1": ("<", 1),
    b"\xa1\xb2\x3c\x4d": (">", 1),
}
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
MAX_RECORD = 16 * 1024 * 1024  # larger captured lengths mean a corrupt record header
RESYNC_WINDOW = 4 * 1024 * 1024  # bytes searched for the next record after a corrupt one
RESYNC_STEP = 4096  # bytes searched first; the search window doubles from there
READ_BUFFER = 1 << 20

BLOCK_IDB, BLOCK_PB, BLOCK_SPB, BLOCK_EPB = 1, 2, 3, 6
BLOCK_SHB = 0x0A0D0D0A
NO_LINKTYPE = 0xFFFF  # an interface whose block is too short to say: its packets are skipped
QUIET_BLOCKS = {4, 5, 7, 8, 9, 10, 0x80000001, 0x00000BAD, 0x40000BAD}  # NRB, ISB, DSB, custom...


@dataclass(frozen=True, slots=True)
class Packet:
    number: int  # 1-based position in the capture, as Wireshark numbers frames
    timestamp: int  # nanoseconds since the epoch (exact: no float rounding)
    linktype: int  # LINKTYPE_* of the interface the packet came from
    data: bytes  # the captured bytes
    original_length: int  # length on the wire; more than len(data) when cut by snaplen


class CaptureError(Exception):
    """The input cannot be read as a capture at all (one line for the user)."""


def read_packets(source: str | os.PathLike[str] | BinaryIO,
                 report: Report | None = None) -> Iterator[Packet]:
    """Every packet of a pcap or pcapng capture, in file order.

    Raises CaptureError (on the first iteration) only when nothing can be read at
    all; later problems go to `report` and reading goes on where the format allows.
    """
    for number, timestamp, linktype, data, original_length in read_records(source, report):
        yield Packet(number, timestamp, linktype, data, original_length)


def read_records(source: str | os.PathLike[str] | BinaryIO,
                 report: Report | None = None) -> Iterator[CaptureRecord]:
    """The fast form of read_packets: plain tuples, no object per packet."""
    raw, owned = _open(source)
    stream: Reader = raw
    try:
        magic = _read_exact(stream, 4)
        if not magic:
            raise CaptureError("empty file")
        kind = compression_of(magic)
        if kind is not None:  # read through the decompressor, from its first byte
            stream = decompressing(_Prefixed(magic, raw), kind, report or _ignore)
            magic = _read_exact(stream, 4)
            if not magic:
                raise CaptureError(f"{kind}-compressed, but holds no capture")
        if magic in PCAP_MAGICS:
            # a file on disk is read ahead; a decompressor only as far as each record (a cut
            # file gives every record before the cut)
            yield from _pcap_records(stream, magic, report or _ignore,
                                     whole=stream is raw and _regular_file(raw))
        elif magic == PCAPNG_MAGIC:
            yield from _pcapng_records(stream, report or _ignore)
        else:
            raise CaptureError(f"not a pcap or pcapng file (magic 0x{magic.hex()})")
    finally:
        if owned:
            raw.close()


def _ignore(_note: Note) -> None:
    pass


def _open(source: str | os.PathLike[str] | BinaryIO) -> tuple[BinaryIO, bool]:
    if not isinstance(source, str | os.PathLike):
        return source, False
    name = os.fspath(source)
    if os.path.isdir(name):
        raise CaptureError(f"{name}: is a directory, not a capture file")
    try:
        return open(name, "rb", buffering=READ_BUFFER), True
    except OSError as exc:
        raise CaptureError(f"{name}: {exc.strerror or exc}") from None


def _read_exact(stream: Reader, size: int) -> bytes:
    """`size` bytes, or fewer only at the end of the input (pipes may return short reads)."""
    data = stream.read(size)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = stream.read(size - got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


@dataclass(frozen=True, slots=True)
class _PcapLayout:
    endian: str
    resolution: int  # nanoseconds per unit of the sub-second part
    snaplen: int
    linktype: int

    def plausible(self, header: bytes | bytearray, position: int, seconds: int) -> int | None:
        """The record length when a plausible record header starts at `position`.

        Plausible: a timestamp within a day of the last good one, a sub-second part
        below one second, and a captured length within the snap length and not
        above the original length.
        """
        if len(header) - position < 16:
            return None
        when, fraction, captured, original = struct.unpack_from(self.endian + "IIII", header, position)
        if abs(when - seconds) > 86400 or fraction * self.resolution >= 1_000_000_000:
            return None
        if captured > max(self.snaplen, 65535) or not captured <= original <= MAX_RECORD:
            return None
        return 16 + captured


def _regular_file(stream: BinaryIO) -> bool:
    """Whether `stream` is a file on disk, whose reads return every byte asked for but at
    its end (not a pipe, whose bytes must be taken as they arrive)."""
    try:
        return stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):
        return False


def _pcap_records(stream: Reader, magic: bytes, report: Report, *,
                  whole: bool = False) -> Iterator[CaptureRecord]:
    """`whole`: the stream is read from a file on disk, so it may be read ahead in chunks."""
    endian, resolution = PCAP_MAGICS[magic]
    rest = _read_exact(stream, 20)
    if len(rest) < 20:
        raise CaptureError(f"pcap file header cut short ({4 + len(rest)} of 24 bytes)")
    _major, _minor, _zone, _sigfigs, snaplen, network = struct.unpack(endian + "HHiIII", rest)
    layout = _PcapLayout(endian, resolution, snaplen, network & 0x0FFFFFFF)  # upper bits: FCS
    oversized = _OversizedRecords(snaplen, report)
    number, seconds = 0, 0
    resumed: Reader | None = stream
    run = _pcap_chunks if whole else _pcap_run
    while resumed is not None:
        number, seconds, resumed = yield from run(resumed, layout, number, seconds, oversized, report)


def _pcap_chunks(stream: Reader, layout: _PcapLayout, number: int, seconds: int,
                 oversized: _OversizedRecords, report: Report
                 ) -> Generator[CaptureRecord, None, tuple[int, int, Reader | None]]:
    """`_pcap_run` for a file on disk: records cut from chunks of READ_BUFFER bytes rather
    than two reads a record (this loop is the hot path of the whole tool)."""
    record_header = struct.Struct(layout.endian + "IIII").unpack_from
    resolution, linktype, snaplen = layout.resolution, layout.linktype, layout.snaplen
    chunk, position = b"", 0
    while True:
        if len(chunk) - position < 16:
            chunk, position = chunk[position:] + _read_exact(stream, max(READ_BUFFER, 16)), 0
            if len(chunk) < 16:  # the end of the file (a record header cut short is reported)
                _rest_of_header(stream, chunk, number, report)
                return number, seconds, None
        when, fraction, captured, original = record_header(chunk, position)
        if captured > snaplen and oversized.bad(number + 1, captured):
            rest = _prefixed(chunk[position + 16:], stream)
            return number, seconds, _resume(rest, chunk[position:position + 16], layout, number,
                                            seconds, report)
        start = position + 16
        position = start + captured
        if position <= len(chunk):
            data = chunk[start:position]
        else:  # the record runs on past the chunk (or past the end of the file)
            data = chunk[start:] + _read_exact(stream, position - len(chunk))
            chunk, position = b"", 0
            if len(data) < captured:
                _cut_short(number + 1, len(data), captured, report)
                return number, seconds, None
        number += 1
        seconds = when
        yield number, when * 1_000_000_000 + fraction * resolution, linktype, data, original


def _pcap_run(stream: Reader, layout: _PcapLayout, number: int, seconds: int,
              oversized: _OversizedRecords, report: Report
              ) -> Generator[CaptureRecord, None, tuple[int, int, Reader | None]]:
    """Records until the end, or until a corrupt record header (then: where to resume)."""
    record_header = struct.Struct(layout.endian + "IIII").unpack
    read, resolution, linktype = stream.read, layout.resolution, layout.linktype
    while True:
        header = read(16)
        if len(header) < 16:
            completed = _rest_of_header(stream, header, number, report)
            if completed is None:
                return number, seconds, None
            header = completed
        when, fraction, captured, original = record_header(header)
        if captured > layout.snaplen and oversized.bad(number + 1, captured):
            return number, seconds, _resume(stream, header, layout, number, seconds, report)
        data = read(captured)
        if len(data) < captured:
            data += _read_exact(stream, captured - len(data))
            if len(data) < captured:
                _cut_short(number + 1, len(data), captured, report)
                return number, seconds, None
        number += 1
        seconds = when
        yield number, when * 1_000_000_000 + fraction * resolution, linktype, data, original


def _cut_short(number: int, got: int, captured: int, report: Report) -> None:
    report(warn(f"capture cut short: packet {number} has {got} of its {captured} bytes; "
                "the rest of the file is missing", id="pcap.cut_short"))


def _resume(stream: Reader, header: bytes, layout: _PcapLayout, number: int, seconds: int,
            report: Report) -> Reader | None:
    """After a corrupt record header: the stream from the next plausible record, if any.

    A candidate must be followed by another plausible record header or by the end
    of the file; at most RESYNC_WINDOW bytes are searched. The window starts at
    RESYNC_STEP bytes and doubles only while no candidate is settled, so the bytes
    read ahead (and copied back in front of the stream) stay near what the search
    needs, however many corrupt records a file holds.
    """
    window, position, size = bytearray(header), 1, RESYNC_STEP
    limit = RESYNC_WINDOW + len(header)
    while True:
        window += _read_exact(stream, size - len(window))
        complete = len(window) < size or size >= limit  # no more bytes will be searched
        found, position = _next_record(window, position, layout, seconds,
                                       at_end=len(window) < size, complete=complete)
        if found:
            report(warn(f"resumed reading at the next plausible record after packet {number}, "
                        f"{position} bytes later", id="pcap.resumed"))
            return _prefixed(bytes(window[position:]), stream)
        if complete:
            break
        size = min(size * 2, limit)
    report(error(f"no plausible record found in the {len(window)} bytes after packet {number}; "
                 "the rest of the file cannot be read", id="pcap.unreadable"))
    return None


def _next_record(window: bytearray, start: int, layout: _PcapLayout, seconds: int, *,
                 at_end: bool, complete: bool) -> tuple[bool, int]:
    """(True, position) of the first plausible record from `start`; or (False, where to go on
    once the window has grown), when a candidate needs bytes beyond it or none was found."""
    for position in range(start, len(window) - 15):
        length = layout.plausible(window, position, seconds)
        if length is None:
            continue
        following = position + length
        if following == len(window) and at_end:
            return True, position
        if following + 16 > len(window) and not complete:
            return False, position
        if layout.plausible(window, following, seconds):
            return True, position
    return False, max(start, len(window) - 15)


def _prefixed(prefix: bytes, stream: Reader) -> _Prefixed:
    """`prefix`, then the rest of `stream`: never a chain of prefixes, however many corrupt
    records send reading back to bytes already read."""
    if isinstance(stream, _Prefixed):
        return _Prefixed(prefix + stream.prefix[stream.position:], stream.stream)
    return _Prefixed(prefix, stream)


class _Prefixed:
    """A stream whose first bytes were already read: `prefix`, then the rest of `stream`."""

    def __init__(self, prefix: bytes, stream: Reader) -> None:
        self.prefix, self.position, self.stream = prefix, 0, stream

    def read(self, size: int = -1) -> bytes:
        """Bytes of the prefix (never re-copying what remains of it), then of the stream."""
        start = self.position
        if start >= len(self.prefix):
            return self.stream.read(size)
        end = len(self.prefix) if size < 0 else start + size
        self.position = end
        data = self.prefix[start:end]
        return data + self.stream.read() if size < 0 else data


def _rest_of_header(stream: Reader, header: bytes, number: int, report: Report) -> bytes | None:
    """Complete a record header after a short read; None at the end of the input."""
    if header:
        header += _read_exact(stream, 16 - len(header))
    if len(header) == 16:
        return header
    if header:
        report(warn(f"capture cut short: the record header after packet {number} has "
                    f"{len(header)} of 16 bytes", id="pcap.cut_short"))
    return None


class _OversizedRecords:
    """Records longer than the snap length: read them (one note), unless absurdly long."""

    def __init__(self, snaplen: int, report: Report) -> None:
        self.snaplen, self.report, self.noted = snaplen, report, False

    def bad(self, number: int, captured: int) -> bool:
        if captured > max(MAX_RECORD, self.snaplen):
            self.report(error(f"packet {number}: record header is corrupt (captured length "
                              f"{captured})", id="pcap.record_corrupt"))
            return True
        if not self.noted:
            self.noted = True
            self.report(note(f"packet {number}: captured length {captured} exceeds the file's "
                             f"snap length {self.snaplen}; read anyway (later ones not reported)",
                             id="pcap.snaplen_exceeded"))
        return False


@dataclass(slots=True)
class _Interface:
    linktype: int
    snaplen: int
    divisor: int  # timestamp units per second
    offset: int  # seconds added to every timestamp


class _Section:
    """The state of one pcapng section: byte order and interfaces."""

    def __init__(self, endian: str) -> None:
        self.endian = endian
        self.interfaces: list[_Interface] = []
        self.epb = struct.Struct(endian + "IIIII").unpack_from
        self.block_header = struct.Struct(endian + "II").unpack


def _pcapng_records(stream: Reader, report: Report) -> Iterator[CaptureRecord]:
    section = _read_section_header(stream, PCAPNG_MAGIC, report, first=True)
    number = 0
    while section is not None:
        header = _read_exact(stream, 8)
        if len(header) < 8:
            if header:
                report(warn(f"capture cut short: a block header after packet {number} is incomplete",
                            id="pcap.cut_short"))
            return
        block_type, length = section.block_header(header)
        if block_type == BLOCK_SHB:
            section = _read_section_header(stream, header, report, first=False)
            continue
        if length < 12 or length % 4 or length > MAX_RECORD + 64:
            report(error(f"pcapng block after packet {number} has an invalid length ({length}); "
                         "the rest of the file cannot be read", id="pcap.unreadable"))
            return
        body = _read_exact(stream, length - 8)
        if len(body) < length - 8:
            report(warn(f"capture cut short: the block after packet {number} has "
                        f"{len(body) + 8} of its {length} bytes", id="pcap.cut_short"))
            return
        record = _pcapng_block(section, block_type, body, number, report)
        if record is not None:
            number += 1
            yield (number, *record)


def _read_section_header(stream: Reader, head: bytes, report: Report, *,
                         first: bool) -> _Section | None:
    """Read the rest of a section header block whose first 4 or 8 bytes are `head`."""
    head += _read_exact(stream, 12 - len(head))
    problem = _section_problem(head)
    if problem is None:
        endian = "<" if head[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
        (length,) = struct.unpack(endian + "I", head[4:8])
        rest = _read_exact(stream, max(length - 12, 0))
        if 28 <= length <= MAX_RECORD and len(rest) == length - 12:
            return _Section(endian)
        problem = "pcapng section header is corrupt or cut short"
    if first:
        raise CaptureError(problem)
    report(error(f"{problem}; the rest of the file cannot be read", id="pcap.unreadable"))
    return None


def _section_problem(head: bytes) -> str | None:
    if len(head) < 12:
        return "pcapng section header cut short"
    if head[8:12] not in (b"\x4d\x3c\x2b\x1a", b"\x1a\x2b\x3c\x4d"):
        return f"pcapng section header has an unknown byte-order magic 0x{head[8:12].hex()}"
    return None


def _pcapng_block(section: _Section, block_type: int, body: bytes, number: int,
                  report: Report) -> tuple[int, int, bytes, int] | None:
    """(timestamp, linktype, data, original length) for a packet block, None otherwise."""
    if block_type == BLOCK_EPB:
        return _enhanced_packet(section, body, number, report)
    if block_type == BLOCK_IDB:
        section.interfaces.append(_interface(section, body, report))
    elif block_type == BLOCK_SPB:
        return _simple_packet(section, body, number, report)
    elif block_type == BLOCK_PB:
        return _obsolete_packet(section, body, number, report)
    elif block_type not in QUIET_BLOCKS:
        report(note(f"pcapng block of unknown type 0x{block_type:08x} after packet {number} skipped",
                    id="pcap.unknown_block"))
    return None


def _enhanced_packet(section: _Section, body: bytes, number: int,
                     report: Report) -> tuple[int, int, bytes, int] | None:
    if len(body) < 24:
        report(error(f"enhanced packet block after packet {number} is too short; skipped",
                     id="pcap.record_corrupt"))
        return None
    interface_id, high, low, captured, original = section.epb(body)
    return _packet_record(section, interface_id, (high << 32) | low, body, 20, captured,
                          original, number, report)


def _obsolete_packet(section: _Section, body: bytes, number: int,
                     report: Report) -> tuple[int, int, bytes, int] | None:
    if len(body) < 24:
        report(error(f"packet block after packet {number} is too short; skipped", id="pcap.record_corrupt"))
        return None
    interface_id, _drops, high, low, captured, original = struct.unpack_from(
        section.endian + "HHIIII", body)
    return _packet_record(section, interface_id, (high << 32) | low, body, 20, captured,
                          original, number, report)


def _simple_packet(section: _Section, body: bytes, number: int,
                   report: Report) -> tuple[int, int, bytes, int] | None:
    if not section.interfaces:
        report(error(f"simple packet block after packet {number} comes before any interface; skipped",
                     id="pcap.record_corrupt"))
        return None
    (original,) = struct.unpack_from(section.endian + "I", body)
    interface = section.interfaces[0]
    captured = min(original, len(body) - 8, interface.snaplen or original)  # less the trailer
    return 0, interface.linktype, body[4:4 + captured], original  # the block has no timestamp


def _packet_record(section: _Section, interface_id: int, ticks: int, body: bytes, start: int,
                   captured: int, original: int, number: int,
                   report: Report) -> tuple[int, int, bytes, int] | None:
    if interface_id >= len(section.interfaces):
        report(error(f"packet {number + 1} names interface {interface_id}, which the file "
                     "never described; skipped", id="pcap.record_corrupt"))
        return None
    if start + captured > len(body):
        report(error(f"packet {number + 1}: captured length {captured} runs past its block; "
                     "the bytes present are used", id="pcap.record_corrupt"))
        captured = len(body) - start
    interface = section.interfaces[interface_id]
    timestamp = ticks * 1_000_000_000 // interface.divisor + interface.offset * 1_000_000_000
    return timestamp, interface.linktype, body[start:start + captured], original


def _interface(section: _Section, body: bytes, report: Report) -> _Interface:
    if len(body) < 12:  # the block (its trailing length included) ends before the snap length
        linktype = struct.unpack_from(section.endian + "H", body)[0] if len(body) >= 8 else NO_LINKTYPE
        report(warn(f"interface {len(section.interfaces)}: its description block is cut short",
                    id="pcap.interface_malformed"))
        return _Interface(linktype, 0, 1_000_000, 0)
    linktype, _reserved, snaplen = struct.unpack_from(section.endian + "HHI", body)
    divisor, offset = 1_000_000, 0
    block = struct.pack(section.endian + "II", BLOCK_IDB, len(body) + 8) + body
    import dpkt.pcapng  # only pcapng needs it; importing dpkt costs 60 ms of start-up

    try:
        parser = (dpkt.pcapng.InterfaceDescriptionBlockLE if section.endian == "<"
                  else dpkt.pcapng.InterfaceDescriptionBlock)
        for option in parser(block).opts:
            if option.code == dpkt.pcapng.PCAPNG_OPT_IF_TSRESOL and option.data:
                exponent = option.data[0]
                divisor = 2 ** (exponent & 0x7F) if exponent & 0x80 else 10 ** (exponent & 0x7F)
            elif option.code == dpkt.pcapng.PCAPNG_OPT_IF_TSOFFSET and len(option.data) >= 8:
                (offset,) = struct.unpack(section.endian + "q", option.data[:8])
    except (dpkt.UnpackError, struct.error, ValueError, IndexError):
        report(warn(f"interface {len(section.interfaces)}: its options are malformed; "
                    "microsecond timestamps assumed", id="pcap.interface_malformed"))
    return _Interface(linktype, snaplen, divisor or 1_000_000, offset)


# --- an index of a classic pcap file's records, for reading a share of them (--jobs) ---

INDEX_CHUNK = 1 << 17  # records indexed at once: the index's memory stays bounded


@dataclass(frozen=True, slots=True)
class RecordChunk:
    """Consecutive packet records of a classic pcap file, as numpy arrays."""

    first: int  # the position of the first in the file (0-based: its packet number minus one)
    starts: Any  # the file offset of each record's data
    captured: Any
    original: Any
    timestamps: Any  # nanoseconds since the epoch


class NotIndexable(Exception):
    """A file that must be read record after record (`read_records`), as it comes."""


class PcapIndex:
    """Where the records of an uncompressed classic pcap file lie, so that a reader may take
    only some of them (`kdissect.parallel`). Only a file whose every record header is
    sound is indexed: captured lengths within the snap length, the last record whole, the
    file ending there. Anything else raises NotIndexable (on `open` or while walking), and
    the file is read in order by `read_records`, which reports what it finds.

    The file is mapped, not read: `data` is its bytes, and `chunks` walks the record
    headers INDEX_CHUNK records at a time (`_record_heads`, in C where it is built)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import mmap

        try:
            with open(path, "rb") as stream:
                head = stream.read(24)
                if len(head) < 24 or head[:4] not in PCAP_MAGICS:
                    raise NotIndexable("not an uncompressed classic pcap file")
                self.data = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as problem:
            raise NotIndexable(str(problem)) from None
        self.endian, self.resolution = PCAP_MAGICS[head[:4]]
        _major, _minor, _zone, _sigfigs, self.snaplen, network = struct.unpack(self.endian + "HHiIII", head[4:])
        self.linktype = network & 0x0FFFFFFF

    def chunks(self, size: int | None = None) -> Iterator[RecordChunk]:
        """The records, `size` (INDEX_CHUNK) at a time, in file order."""
        import numpy as np

        size = size or INDEX_CHUNK
        data, end, limit = self.data, len(self.data), min(self.snaplen, MAX_RECORD)
        position, first = 24, 0
        while position < end:
            heads, position, problem = _walk(data, position, size, self.endian == ">", limit)
            if problem:
                raise NotIndexable(INDEX_PROBLEMS[problem])
            if position > end:
                raise NotIndexable("the last record cut short")
            at, when, fraction, captured, original = np.frombuffer(heads, dtype=np.int64).reshape(5, -1)
            yield RecordChunk(first, at + 16, captured, original, when * 1_000_000_000 + fraction * self.resolution)
            first += len(at)

    def close(self) -> None:
        self.data.close()


# What stops a walk over record headers short of its count and of the end of the file
# (`_record_heads`): the problem's code, and the message NotIndexable gives for it.
HEADER_CUT, TOO_LONG = 1, 2
INDEX_PROBLEMS = {HEADER_CUT: "a record header cut short", TOO_LONG: "a captured length beyond the snap length"}


def _record_heads(data: bytes | bytearray | mmap.mmap, position: int, count: int, big_endian: bool,
                  limit: int) -> tuple[array.array[int], int, int]:
    """Up to `count` record headers of a classic pcap file from `position`, each record's
    captured length giving where the next begins: five columns of int64 one after the
    other (for `np.frombuffer`), a value per header in each: where it starts, its seconds,
    sub-second part, captured length and original length; then the position after the
    last record, and what stopped the walk short of `count` headers and of the end of
    `data` (HEADER_CUT, TOO_LONG), else 0. A captured length above `limit` stops it.

    The reference of `_pcap_index_c.record_heads`, and the walk where that is not built or
    KDISSECT_PURE is set."""
    fields_at = struct.Struct((">" if big_endian else "<") + "IIII").unpack_from
    columns: list[list[int]] = [[], [], [], [], []]
    heads, seconds, fractions, captures, originals = columns
    end = len(data)
    problem = 0
    for _ in range(count):
        if position >= end:
            break
        if end - position < 16:
            problem = HEADER_CUT
            break
        heads.append(position)
        second, fraction, captured, original = fields_at(data, position)
        seconds.append(second)
        fractions.append(fraction)
        captures.append(captured)
        originals.append(original)
        if captured > limit:
            problem = TOO_LONG
            break
        position += 16 + captured
    return array.array("q", [value for column in columns for value in column]), position, problem


# the walk over record headers `PcapIndex.chunks` takes: in C where it is built (`kdissect.native`)
_walk = native_or("kdissect.ingest._pcap_index_c", "record_heads", _record_heads)
