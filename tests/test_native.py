"""The optional C extensions answer and write exactly as the Python they mirror.

`decode/_record_check_c` walks a batch's records as `record_check._records_clean` does,
and a field's record batches as `record_check._entries_clean` does;
`present/_verbose_records_c` writes the -V text of a batch's records as
`verbose_records._plain_records` does, and of a whole batch (header and records) as
`verbose_records._batch_lines` does (or leaves them to it, returning None). All are
compared with the Python, which stays the reference, on every record batch of the
shipped and third-party captures and on records and batches written here byte by byte:
well formed (with every kind of key, value and header, varints padded to their widest,
extreme timestamps and offsets, every attribute) and then damaged or replaced by random
bytes. It also writes the elements of arrays of integers, and of fixed-size structs of
them, as the loops the -V writers generate do: compared on every message of the
captures and on arrays written here. (`ingest/_pcap_index_c`, the walk over a pcap
file's record headers, is compared in test_pcap_index.py; `_light_c`, the parent's side
of a light merge, in test_light.py.)

Here both run side by side, whatever KDISSECT_PURE says; the rest of the suite runs
whichever kdissect uses (run it with KDISSECT_PURE=1 to test the Python alone).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import itertools
import os
import struct
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_records import legacy_set, patched, record, v2_batch

from kdissect import cli, light, spool
from kdissect.decode import record_check
from kdissect.decode.compression import DecompressionProblem, decompress
from kdissect.decode.records import BATCH_HEADER, LOG_OVERHEAD, MAX_DECOMPRESSED_BYTES
from kdissect.ingest import capture
from kdissect.present import verbose_records
from tests.conftest import CAPTURES, missing

CHECKS = settings(derandomize=True, max_examples=400, deadline=None, database=None)
MODULES = ("kdissect.decode._record_check_c", "kdissect.present._verbose_records_c",
           "kdissect.ingest._pcap_index_c", "kdissect._light_c",
           "kdissect._spool_c")  # the last three in test_pcap_index.py, test_light.py, test_jobs_spool.py


def native(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(f"{name} is not built (no C compiler at install?)")


@pytest.fixture(scope="module")
def walk() -> Any:
    return native(MODULES[0]).records_clean


@pytest.fixture(scope="module")
def entries() -> Any:
    return record_check.configured(native(MODULES[0]))


@pytest.fixture(scope="module")
def write() -> Any:
    return verbose_records.configured(native(MODULES[1]))


@pytest.fixture(scope="module")
def write_batch(write: Any) -> Any:
    return verbose_records.configured_batches(native(MODULES[1]))


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="CI builds the extensions; elsewhere they are optional")
def test_ci_builds_and_tests_the_extensions() -> None:
    """In CI the extensions must be there: else the suite would test the fallback alone."""
    for name in MODULES:
        importlib.import_module(name)
    assert os.environ.get("KDISSECT_PURE", "") in ("", "0")
    assert record_check._walk is not record_check._records_clean
    assert record_check._native_entries is not None
    assert verbose_records._native_records is not None
    assert verbose_records._native_batch is not None
    assert capture._walk is not capture._record_heads
    assert light.new_lights is not light.Lights
    assert light.texts_written is not light.write_texts
    assert spool._put is not spool.put


# -- the two implementations on one stretch of records ---------------------------------


def python_text(body: bytes, pos: int, count: int, base_offset: int, base_time: int, log_append: bool,
                prefix: str) -> str | None:
    """`_plain_records`' lines joined, as the -V text has them; None where it fails."""
    lines: list[str] = []
    try:
        verbose_records._plain_records(lines.append, body, pos, count, base_offset, base_time, log_append,
                                       prefix, verbose_records.hexes(len(body)))
    except Exception:  # damaged records: reading them is not the Python's contract either
        return None
    return "\n".join(lines)


def agree(walk: Any, write: Any, body: bytes, pos: int, end: int, count: int, *, control: bool = False,
          base_offset: int = 0, base_time: int = 0, log_append: bool = False, prefix: str = "|   |   ",
          written: bool = False) -> bool:
    """Both walks give one answer, and the C text is the Python's wherever the C writes one;
    `written`: the C must write it (the records are clean and hold nothing C leaves to Python).
    Whether the records are clean."""
    clean = record_check._records_clean(body, pos, end, count, control)
    assert walk(body, pos, end, count, control) is clean
    if control:  # control batches are written by the Python alone
        return clean
    text = write(body, pos, count, base_offset, base_time, log_append, prefix)
    if text is not None or written:
        assert text == python_text(body, pos, count, base_offset, base_time, log_append, prefix)
    return clean


def python_batch(data: bytes, pos: int, index: int, branch: str, prefix: str) -> str | None:
    """`_batch_lines`' lines joined, all in Python (its records too); None where it fails."""
    lines: list[str] = []
    records, verbose_records._native_records = verbose_records._native_records, None
    try:
        verbose_records._batch_lines(lines, data, pos, index, branch, prefix, verbose_records.hexes(len(data)))
    except Exception:  # a damaged batch: not the Python's contract either
        return None
    finally:
        verbose_records._native_records = records
    return "\n".join(lines)


def batch_alike(write_batch: Any, data: bytes, pos: int, *, index: int = 0, branch: str = "|   +-- ",
                prefix: str = "|   |   ", written: bool = False) -> str | None:
    """The C text of the batch at `pos` is the Python's wherever the C writes one; `written`:
    the C must write it. The C text."""
    text = write_batch(data, pos, index, branch, prefix)
    if text is not None or written:
        assert text == python_batch(data, pos, index, branch, prefix)
    return text


def remember(data: bytes, pos: int, body: bytes) -> None:
    """`record_check.decompressed` gives `body` for the batch at `pos` of `data`, as after its check."""
    record_check._frame[0] = data
    record_check._bodies.clear()
    record_check._bodies[pos + BATCH_HEADER] = body


# -- every batch of the real captures --------------------------------------------------


def batches_of(path: Path, monkeypatch: pytest.MonkeyPatch,
               fields: list[tuple[bytes, int, int]] | None = None) -> list[tuple[bytes, int]]:
    """(frame bytes, position) of every magic 2 record batch the decoders check in `path`;
    the records fields checked, (frame bytes, start, end), added to `fields`."""
    found: list[tuple[bytes, int]] = []
    checked, entries_checked = record_check._batch_clean, record_check._entries_clean

    def spy(data: bytes, pos: int, cap: int) -> bool:
        found.append((data, pos))
        return checked(data, pos, cap)

    def entries_spy(data: bytes, start: int, end: int, cap: int) -> bool:
        if fields is not None:
            fields.append((data, start, end))
        return entries_checked(data, start, end, cap)

    with monkeypatch.context() as patch:
        patch.setattr(record_check, "_native_entries", None)  # the Python sees every field
        patch.setattr(record_check, "_batch_clean", spy)
        patch.setattr(record_check, "_entries_clean", entries_spy)
        with contextlib.redirect_stdout(io.StringIO()):
            cli.main(["-j", "1", "-V", str(path)])
    return found


def batch_agrees(walk: Any, write: Any, write_batch: Any, data: bytes, pos: int) -> bool:
    """A batch as `_batch_clean` and `_batch_lines` read it, its records and then the whole of
    it; whether its records are clean."""
    fields = verbose_records._BATCH.unpack_from(data, pos)
    base_offset, attributes, base_time, max_time, count = fields[0], fields[5], fields[7], fields[8], fields[12]
    end, at = pos + LOG_OVERHEAD + fields[1], pos + BATCH_HEADER
    if attributes & 0x07:
        try:
            body = decompress(attributes & 0x07, data[at:end], cap=MAX_DECOMPRESSED_BYTES)
        except DecompressionProblem:
            return False
        at, end = 0, len(body)
    else:
        body = data
    log_append, control = bool(attributes & 0x08), bool(attributes & 0x20)
    clean = record_check._records_clean(body, at, end, count, control)
    agree(walk, write, body, at, end, count, control=control, base_offset=base_offset,
          base_time=max_time if log_append else base_time, log_append=log_append, written=clean)
    if attributes & 0x07:  # as the -V writer finds it: decompressed by the check just before
        remember(data, pos, body)
    for index, branch, prefix in ((0, "|   +-- ", "|   |   "), (12, "é+-- ", "é   ")):
        text = batch_alike(write_batch, data, pos, index=index, branch=branch, prefix=prefix,
                           written=clean and not control)
        assert (text is None) is control or not clean
    if attributes & 0x07:  # another frame checked since: the C leaves it to the Python, which decompresses it
        record_check._frame[0] = None
        assert write_batch(data, pos, 0, "", "") is None
    return clean


def captures_agree(walk: Any, write: Any, write_batch: Any, paths: list[Path], monkeypatch: pytest.MonkeyPatch,
                   *, compressed_too: bool = False) -> None:
    batches = clean = compressed = 0
    for path in paths:
        for data, pos in batches_of(path, monkeypatch):
            batches += 1
            clean += batch_agrees(walk, write, write_batch, data, pos)
            compressed += bool(data[pos + 22] & 0x07)
    # the captures have clean batches (compressed ones among them), so the C text was compared
    assert batches and clean and (compressed or not compressed_too)


def test_every_batch_of_the_shipped_captures(walk: Any, write: Any, write_batch: Any,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    captures_agree(walk, write, write_batch, sorted(CAPTURES.glob("*.pcap")), monkeypatch, compressed_too=True)


def test_every_batch_of_the_third_party_captures(walk: Any, write: Any, write_batch: Any, public_captures: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    captures_agree(walk, write, write_batch, sorted(public_captures.glob("*.pcap*")), monkeypatch)


# -- records written here --------------------------------------------------------------


def varint(value: int, pad: int = 0) -> bytes:
    """The zigzag varint of `value`, with `pad` more bytes than it needs (still valid)."""
    raw = 2 * value if value >= 0 else -2 * value - 1
    groups = []
    while True:
        groups.append(raw & 0x7F)
        raw >>= 7
        if not raw:
            break
    groups += [0] * pad
    return bytes([group | 0x80 for group in groups[:-1]] + [groups[-1]])


# keys, values and header values: what the C quotes itself and what it leaves to `value_display`
shown = st.one_of(
    st.none(), st.just(b""),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80).map(str.encode),
    st.text(max_size=70).map(str.encode),  # any UTF-8, controls and cuts in the middle of a character
    st.binary(max_size=90),
    st.builds(lambda head, tail: head + tail, st.just(b"a" * 64), st.binary(min_size=1, max_size=4)),
    st.integers(62, 66).map(lambda size: b"x" * size),  # about the 64 bytes a display shows
)
header_key = st.one_of(st.text(max_size=10).map(str.encode), st.binary(max_size=10))
header = st.tuples(header_key, shown)
plain = st.fixed_dictionaries({
    "attributes": st.integers(0, 255), "delta": st.integers(-(2**40), 2**40),
    "offset_delta": st.integers(-(2**31), 2**31 - 1), "key": shown, "value": shown,
    "headers": st.lists(header, max_size=3), "pad": st.integers(0, 1)})
# beyond what most records hold: timestamp deltas of up to 10 bytes, varints at their widest
extreme = st.fixed_dictionaries({
    "attributes": st.integers(0, 255), "delta": st.integers(-(2**69), 2**69 - 1),
    "offset_delta": st.integers(-(2**31), 2**31 - 1), "key": shown, "value": shown,
    "headers": st.lists(header, max_size=2), "pad": st.integers(0, 6)})


def record_bytes(record: dict[str, Any], *, widest: bool = True) -> bytes:
    """A record's bytes; `widest`: no varint padded past the width the decoders allow."""
    pad = record["pad"]

    def v(value: int, width: int = 5) -> bytes:
        return varint(value, max(0, min(pad, width - len(varint(value)))) if widest else pad)

    def f(raw: bytes | None) -> bytes:
        return v(-1) if raw is None else v(len(raw)) + raw

    body = (bytes([record["attributes"]]) + v(record["delta"], 10) + v(record["offset_delta"])
            + f(record["key"]) + f(record["value"]) + v(len(record["headers"]))
            + b"".join(f(key) + f(value) for key, value in record["headers"]))
    return v(len(body)) + body


stamps = st.one_of(st.integers(-(2**63), 2**63 - 1), st.just(-1), st.integers(0, 253402300799999 + 5))
texts = st.fixed_dictionaries({
    "base_offset": st.integers(-(2**63), 2**63 - 1), "base_time": stamps, "log_append": st.booleans(),
    "prefix": st.sampled_from(["", "|   |   ", "    |       ", "é "])})


@CHECKS
@given(records=st.lists(plain, max_size=6), lead=st.binary(max_size=8), trail=st.binary(max_size=8),
       how=texts)
def test_clean_records_walk_alike_and_the_c_writes_their_text(
        walk: Any, write: Any, records: list[dict[str, Any]], lead: bytes, trail: bytes,
        how: dict[str, Any]) -> None:
    body = lead + b"".join(record_bytes(record) for record in records)
    safe = abs(how["base_time"]) < 2**62 and abs(how["base_offset"]) < 2**62  # no sum beyond int64
    for count in (len(records), len(records) + 1, max(0, len(records) - 1)):
        clean = agree(walk, write, body + trail, len(lead), len(body), count, **how,
                      written=safe and count <= len(records))
        assert clean is (count == len(records)) or not records
        assert agree(walk, write, body + trail, len(lead), len(body), count, control=True) is (
            clean and all(record["key"] is not None and len(record["key"]) >= 4 for record in records))


@CHECKS
@given(records=st.lists(extreme, min_size=1, max_size=4), how=texts)
def test_extreme_varints_and_sums_agree_or_are_left_to_python(
        walk: Any, write: Any, records: list[dict[str, Any]], how: dict[str, Any]) -> None:
    body = b"".join(record_bytes(record, widest=False) for record in records)
    agree(walk, write, body, 0, len(body), len(records), **how)


@CHECKS
@given(records=st.lists(plain, min_size=1, max_size=4),
       flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=3),
       cut=st.integers(0, 6), how=texts)
def test_damaged_records_agree(walk: Any, write: Any, records: list[dict[str, Any]],
                               flips: list[tuple[int, int]], cut: int, how: dict[str, Any]) -> None:
    data = bytearray(b"".join(record_bytes(record) for record in records))
    for at, mask in flips:
        data[at % len(data)] ^= mask
    body = bytes(data[: len(data) - cut])
    for end in (len(body), max(0, len(body) - 2)):
        agree(walk, write, body, 0, end, len(records), **how)
        agree(walk, write, body, 0, end, len(records), control=True)


@CHECKS
@given(body=st.binary(max_size=120), count=st.integers(-1, 8), start=st.integers(0, 4), how=texts)
def test_random_bytes_agree(walk: Any, write: Any, body: bytes, count: int, start: int,
                            how: dict[str, Any]) -> None:
    start = min(start, len(body))
    agree(walk, write, body, start, len(body), count, **how)
    agree(walk, write, body, start, len(body), count, control=True)


def test_what_the_c_leaves_to_python_it_leaves_before_writing(write: Any) -> None:
    """A timestamp delta beyond 64 bits, and sums beyond int64: None, the Python writes them."""
    wide = {"attributes": 0, "delta": 2**66, "offset_delta": 1, "key": b"k", "value": b"v", "headers": [],
            "pad": 0}
    body = record_bytes({**wide, "delta": 0}) + record_bytes(wide)
    assert write(body, 0, 2, 0, 0, False, "") is None
    assert python_text(body, 0, 2, 0, 0, False, "") is not None
    small = record_bytes({**wide, "delta": 5})
    assert write(small, 0, 1, 2**63 - 1, 0, False, "") is None  # base offset + offset delta
    assert write(small, 0, 1, 0, 2**63 - 2, False, "") is None  # base time + timestamp delta
    assert write(small, 0, 1, 0, 2**63 - 2, True, "") == python_text(small, 0, 1, 0, 2**63 - 2, True, "")
    for delta in (2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64):  # about the 64 bits of C
        body = record_bytes({**wide, "delta": delta})
        text = write(body, 0, 1, 0, 0, True, "")
        assert text == (python_text(body, 0, 1, 0, 0, True, "") if -(2**63) <= delta < 2**63 else None)


SMALL = [  # records of a few bytes each, every byte of which is then replaced by every other
    {"attributes": 0, "delta": 3, "offset_delta": 0, "key": b"key", "value": b"v\x00", "headers": [(b"h", None)],
     "pad": 0},
    {"attributes": 0, "delta": -70, "offset_delta": 1, "key": None, "value": b"", "headers": [(b"\xff", b"x")],
     "pad": 1},
    {"attributes": 7, "delta": 0, "offset_delta": 2, "key": b"ctrl", "value": None, "headers": [],
     "pad": 0},
]


@pytest.mark.parametrize("control", [False, True])
def test_every_byte_of_small_records_replaced_by_every_value(walk: Any, write: Any, control: bool) -> None:
    data = b"".join(record_bytes(record) for record in SMALL)
    for at in range(len(data)):
        damaged = bytearray(data)
        for byte in range(256):
            damaged[at] = byte
            body = bytes(damaged)
            agree(walk, write, body, 0, len(body), len(SMALL), control=control, base_time=1_795_952_641_840)


# records of small varints and stray bytes under a true length: lengths of -3 to 8 where the
# fields should be, so that every check on them is reached
token = st.one_of(st.integers(-3, 8).map(varint), st.binary(min_size=1, max_size=2))
loose = st.lists(token, max_size=12).map(lambda tokens: varint(len(b"".join(tokens))) + b"".join(tokens))


@CHECKS
@given(records=st.lists(loose, min_size=1, max_size=3), how=texts)
def test_records_of_stray_lengths_agree(walk: Any, write: Any, records: list[bytes], how: dict[str, Any]) -> None:
    body = b"".join(records)
    agree(walk, write, body, 0, len(body), len(records), **how)
    agree(walk, write, body, 0, len(body), len(records), control=True)


def test_every_short_record_over_small_varints(walk: Any, write: Any) -> None:
    """Every record of 6 or 7 bytes after its length, made of zigzag 0 to 2, -1, -2 and a
    continuation byte (and of 8 without the 2): each field's length and each bound on it
    in every arrangement."""
    alphabet = b"\x00\x01\x02\x03\x04\x80"
    clean = 0
    for size, symbols in ((6, alphabet), (7, alphabet), (8, alphabet[:4] + alphabet[5:])):
        for digits in itertools.product(symbols, repeat=size):
            body = varint(size) + bytes(digits)
            for control in (True, False):
                expected = record_check._records_clean(body, 0, len(body), 1, control)
                assert walk(body, 0, len(body), 1, control) is expected, body
            if expected:  # not a control batch
                clean += 1
                agree(walk, write, body, 0, len(body), 1, written=True)
    assert clean


# -- whole batches written here --------------------------------------------------------

_HEADER = struct.Struct(">qiibIhiqqqhii")  # a magic 2 batch header, as `verbose_records._BATCH`
int16, int32, int64 = (st.integers(-(2**(bits - 1)), 2**(bits - 1) - 1) for bits in (16, 32, 64))
heads = st.fixed_dictionaries({
    "base_offset": st.one_of(int64, st.integers(0, 10**6)), "epoch": int32,
    "magic": st.sampled_from([2, 2, 2, 2, 2, 1, 0, -1]), "crc": st.integers(0, 2**32 - 1),
    "attributes": st.one_of(st.integers(0, 0x7F), int16), "last_delta": int32,
    "base_time": stamps, "max_time": stamps, "producer_id": int64, "producer_epoch": int16,
    "base_sequence": int32,
    "count": st.sampled_from([0, 0, 0, -1, 1]),  # more or fewer records than there are
    "length": st.sampled_from([0, 0, 0, -1, 1, -49, -50, None]),  # batchLength off the true one (None: int32's top)
    "lead": st.binary(max_size=3), "trail": st.binary(max_size=3)})


def batch_frame(head: dict[str, Any], records: list[bytes], data: bytes) -> tuple[bytes, int]:
    """A frame holding one batch of `records` (their bytes `data`, which a compressed batch has
    in place of them) after a few bytes: (frame, the batch's position)."""
    length = 2**31 - 1 if head["length"] is None else BATCH_HEADER - LOG_OVERHEAD + len(data) + head["length"]
    header = _HEADER.pack(head["base_offset"], length,
                          head["epoch"], head["magic"], head["crc"], head["attributes"], head["last_delta"],
                          head["base_time"], head["max_time"], head["producer_id"], head["producer_epoch"],
                          head["base_sequence"], max(-1, len(records) + head["count"]))
    return head["lead"] + header + data + head["trail"], len(head["lead"])


@CHECKS
@given(head=heads, records=st.lists(plain, max_size=3), packed=st.binary(max_size=20),
       how=st.sampled_from([(0, "+-- ", "    "), (7, "|   |   +-- ", "|   |   |   "), (1, "é+-- ", "é   ")]))
def test_batches_are_written_alike(write_batch: Any, head: dict[str, Any], records: list[dict[str, Any]],
                                   packed: bytes, how: tuple[int, str, str]) -> None:
    """Every attribute (codecs, timestamp types, control, bits beyond them), header values
    of every width, batch lengths and record counts that do not fit."""
    index, branch, prefix = how
    raw = [record_bytes(record) for record in records]
    body = b"".join(raw)
    codec = head["attributes"] & 0x07
    data, pos = batch_frame(head, raw, packed if codec else body)
    if codec:
        remember(data, pos, body or b"\x00")  # the Python decompresses an empty body again
    batch_alike(write_batch, data, pos, index=index, branch=branch, prefix=prefix)


@pytest.mark.parametrize("attributes", [0, 0x08, 0x10, 0x18, 0x40, 0x01, 0x0A, 0x13, 0x04, 0x20, 0x05])
def test_a_plain_batch_is_written_by_the_c(write_batch: Any, attributes: int) -> None:
    """Uncompressed and compressed (the check's body), either timestamp type, transactional:
    the C writes them; a control batch and an unknown codec it leaves to the Python."""
    records = [record_bytes(record) for record in SMALL[:2]]
    head = {"base_offset": 1000, "epoch": 3, "magic": 2, "crc": 0xDEADBEEF, "attributes": attributes,
            "last_delta": 1, "base_time": 1_795_952_641_840, "max_time": 1_795_952_641_999, "producer_id": -1,
            "producer_epoch": -1, "base_sequence": -1, "count": 0, "length": 0, "lead": b"ab", "trail": b""}
    codec = attributes & 0x07
    data, pos = batch_frame(head, records, b"packed" if codec else b"".join(records))
    remember(data, pos, b"".join(records))
    text = batch_alike(write_batch, data, pos, written=not attributes & 0x20 and codec < 5)
    assert (text is None) is bool(attributes & 0x20 or codec >= 5)
    empty, pos = batch_frame({**head, "count": -2}, records, b"")  # no record at all: no line for them
    remember(empty, pos, b"\x00")
    batch_alike(write_batch, empty, pos, written=not attributes & 0x20 and codec < 5)


def test_every_byte_of_a_small_batch_replaced_by_every_value(write_batch: Any) -> None:
    records = [record_bytes(record) for record in SMALL[:2]]
    head = {"base_offset": 5, "epoch": 0, "magic": 2, "crc": 1, "attributes": 0, "last_delta": 1,
            "base_time": 1_795_952_641_840, "max_time": 1_795_952_641_840, "producer_id": 7, "producer_epoch": 1,
            "base_sequence": 0, "count": 0, "length": 0, "lead": b"", "trail": b""}
    data, pos = batch_frame(head, records, b"".join(records))
    assert write_batch(data, pos, 0, "", "") is not None
    for at in range(len(data)):
        damaged = bytearray(data)
        for byte in range(256):
            damaged[at] = byte
            frame = bytes(damaged)
            remember(frame, pos, b"".join(records))
            batch_alike(write_batch, frame, pos)


@CHECKS
@given(data=st.binary(max_size=140), pos=st.integers(-2, 80), body=st.binary(max_size=40))
def test_random_frames_are_written_alike_or_left(write_batch: Any, data: bytes, pos: int, body: bytes) -> None:
    remember(data, pos, body or b"\x00")
    if pos < 0:  # never asked: the C leaves it
        assert write_batch(data, pos, 0, "", "") is None
    else:
        batch_alike(write_batch, data, pos)


# -- every entry of a records field ----------------------------------------------------

batches = st.builds(lambda records, codec, transactional: v2_batch(records, codec, transactional=transactional),
                    st.lists(record, max_size=4), st.integers(0, 4), st.booleans())
legacy = st.builds(legacy_set, st.sampled_from([0, 1]), st.lists(record, min_size=1, max_size=3),
                   st.sampled_from([0, 1, 2, 3]))



def entries_alike(entries: Any, data: bytes, start: int = 0, end: int | None = None) -> bool | None:
    """The C answers as `_entries_clean` for the entries of data[start:end], or leaves them to
    it (None) only at a legacy message set. The C answer."""
    end = len(data) if end is None else end
    clean = entries(data, start, end, MAX_DECOMPRESSED_BYTES)
    if clean is None:
        assert any(data[pos + 16] in (0, 1) for pos in entry_starts(data, start, end))
    else:
        assert clean is record_check._entries_clean(data, start, end, MAX_DECOMPRESSED_BYTES)
    return clean


def entry_starts(data: bytes, pos: int, end: int) -> list[int]:
    """Where the entries of data[pos:end] begin, as far as their sizes go and their magic can be read."""
    starts = []
    while pos + 17 <= end:
        starts.append(pos)
        pos += LOG_OVERHEAD + max(0, int.from_bytes(data[pos + 8:pos + 12], "big", signed=True))
    return starts


def fields_alike(entries: Any, paths: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    fields: list[tuple[bytes, int, int]] = []
    for path in paths:
        batches_of(path, monkeypatch, fields)
    assert True in [entries_alike(entries, data, start, end) for data, start, end in fields]


def test_every_records_field_of_the_shipped_captures(entries: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fields_alike(entries, sorted(CAPTURES.glob("*.pcap")), monkeypatch)


def test_every_records_field_of_the_third_party_captures(entries: Any, public_captures: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    fields_alike(entries, sorted(public_captures.glob("*.pcap*")), monkeypatch)


fields = st.lists(st.one_of(batches, legacy), min_size=1, max_size=3)


@CHECKS
@given(entries_bytes=fields, flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=3),
       crc_fixed=st.booleans(), cut=st.integers(0, 3), lead=st.binary(max_size=3))
def test_damaged_fields_are_checked_alike(entries: Any, entries_bytes: list[bytes], flips: list[tuple[int, int]],
                                          crc_fixed: bool, cut: int, lead: bytes) -> None:
    """Batches of every codec and legacy message sets, bytes flipped (with the CRC made right
    again, so that the records decide, or not), cut short."""
    parts = []
    for entry in entries_bytes:
        data = bytearray(entry)
        for at, mask in flips:
            data[at % len(data)] ^= mask
        parts.append(patched(bytes(data)) if crc_fixed and len(data) >= 61 and data[16] == 2 else bytes(data))
    field = lead + b"".join(parts)
    entries_alike(entries, field, len(lead), len(field) - cut)


@CHECKS
@given(data=st.binary(max_size=160), start=st.integers(-1, 20), short=st.integers(-1, 20))
def test_random_fields_are_checked_alike(entries: Any, data: bytes, start: int, short: int) -> None:
    end = len(data) - short
    if start < 0 or end > len(data):  # never asked: the C leaves it
        assert entries(data, start, end, MAX_DECOMPRESSED_BYTES) is None
    else:
        entries_alike(entries, data, start, end)


# -- arrays of fixed-size structs of integers (kdissect.present.verbose) ----------------


def fixed_elements_agree(paths: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every message's -V text the same with `fixed_elements` and with the generated loop it
    replaces, which it has written some arrays of."""
    from kdissect.pipeline import read_messages
    from kdissect.present import verbose

    fixed, written = native(MODULES[1]).fixed_elements, []

    def counted(*args: Any) -> str | None:
        text = fixed(*args)
        written.append(text is not None)
        return text

    def texts(elements: Any) -> list[str | None]:
        monkeypatch.setattr(verbose, "native_fixed_elements", elements)
        monkeypatch.setattr(verbose, "_WRITERS", {})  # the writers made with the other
        monkeypatch.setattr(verbose, "_layouts", {})
        return [verbose.message_text(m) for path in paths for m in read_messages(path)]

    assert texts(counted) == texts(None)
    assert any(written)


def test_fixed_elements_of_the_shipped_captures(monkeypatch: pytest.MonkeyPatch) -> None:
    fixed_elements_agree(sorted(CAPTURES.glob("*.pcap")), monkeypatch)


def test_fixed_elements_of_the_third_party_captures(public_captures: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fixed_elements_agree(sorted(public_captures.glob("*.pcap*")), monkeypatch)


@given(st.lists(st.tuples(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(-(1 << 15), (1 << 15) - 1),
                          st.booleans()), max_size=40),
       st.integers(0, 70000), st.booleans())
@CHECKS
def test_fixed_elements_write_what_the_loop_writes(values: list[tuple[int, int, bool]], pos: int,
                                                   flexible: bool) -> None:
    """Any values at any offset, as a writer of ProduceResponse-like elements (int64, int16)
    would loop over them; left to the loop when an element has tagged fields."""
    fixed = native(MODULES[1]).fixed_elements
    size = 10
    template = (-2, "E[", -1, "] E = struct [", 0, f", {size + flexible}B]\n", -3, "A int64 = ", -4, " [", 0,
                ", 8B] a\n", -3, "B int16 = ", -5, " [", 8, ", 2B] b \"{}\\ é")
    data = bytearray(pos + len(values) * (size + flexible))
    lines = []
    for index, (a, b, tagged) in enumerate(values):
        at = pos + index * (size + flexible)
        if flexible and tagged:
            data[at + size] = 1
        fb = "|   +-- " if index < len(values) - 1 else "    +-- "
        lines.append(f"+-- E[{index}] E = struct [0x{at:04x}, {size + flexible}B]\n{fb}A int64 = {a} [0x{at:04x}, 8B] a"
                     f"\n{fb}B int16 = {b} [0x{at + 8:04x}, 2B] b \"{{}}\\ é")
    items = [{"A": a, "B": b} for a, b, _ in values]
    text = fixed(items, bytes(data), pos, size, flexible, "+-- ", "|   +-- ", "    +-- ", template)
    left = not values or (flexible and any(tagged for _, _, tagged in values))
    assert text == (None if left else "\n".join(lines))


def test_fixed_elements_leave_what_is_not_plain_to_the_loop() -> None:
    fixed = native(MODULES[1]).fixed_elements
    template = (-2, "E ", -4, " ", -5)

    def text(items: list[Any], data: bytes = bytes(20)) -> str | None:
        return fixed(items, data, 0, 2, False, "", "", "", template)

    assert text([{"A": 1, "B": 2}, {"A": -3, "B": 4}]) == "E 1 2\nE -3 4"
    assert text([{"A": 1}]) is None  # a value missing
    assert text([{"A": 1, "B": 2, "C": 3}]) is None  # one more
    assert text([{"A": 1, "B": "2"}]) is None  # not an int
    assert text([{"A": 1 << 63, "B": 2}]) is None  # beyond 64 bits
    assert text([{"A": 1, "B": 2}] * 11) is None  # past the end of the data
    assert text([]) is None
    assert text([1, 2]) is None  # integers where structs of two are expected
    ints = ("[", -1, "] = ", -4, " [", 0, "]")  # an array of integers: each element its one value
    assert fixed([5, -6], bytes(8), 2, 3, False, "", "", "", ints) == "[0] = 5 [0x0002]\n[1] = -6 [0x0005]"
    assert fixed([5, True], bytes(8), 2, 3, False, "", "", "", ints) is None
    with pytest.raises(ValueError):
        fixed([{"A": 1}], bytes(2), 0, 2, False, "", "", "", ("x", -100))
