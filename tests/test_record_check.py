"""`records_clean` answers exactly as decoding the records would: no note anywhere, or not.

Batches are built by kafka-python's record builders (magic 0, 1 and 2, every codec),
then damaged: bytes flipped with the CRC-32C recomputed by kafka-python's pure-Python
CRC (so the record-level checks are what decides), bytes flipped with the CRC left,
attributes changed (a control batch, an unknown codec), cut short. For each, the fast
check must agree with `decode_records` having no note on any entry.
"""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from test_records import legacy_set, patched, record, v2_batch

from kdissect.decode.record_check import records_clean
from kdissect.decode.records import MAX_DECOMPRESSED_BYTES, Entry, LegacyMessage, decode_records

CHECKS = settings(derandomize=True, max_examples=300, deadline=None, database=None)


def decodes_clean(data: bytes) -> bool:
    """The reference: every entry `decode_records` gives, and every inner message, without a note."""
    return _clean(decode_records(data, 0, len(data), max_decompressed=MAX_DECOMPRESSED_BYTES))


def _clean(entries: tuple[Entry, ...]) -> bool:
    return all(not entry.notes and (not isinstance(entry, LegacyMessage) or _clean(entry.inner))
               for entry in entries)


def agree(data: bytes) -> bool:
    return records_clean(data, 0, len(data), MAX_DECOMPRESSED_BYTES) == decodes_clean(data)


batches = st.builds(lambda records, codec, base: v2_batch(records, codec, base_offset=base),
                    st.lists(record, max_size=5), st.integers(0, 4), st.integers(0, 2**40))
legacy = st.builds(legacy_set, st.sampled_from([0, 1]), st.lists(record, min_size=1, max_size=4),
                   st.sampled_from([0, 1, 2, 3]))


@CHECKS
@given(batch=batches, flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=3),
       crc_fixed=st.booleans())
def test_a_damaged_batch_is_clean_exactly_when_decoding_it_gives_no_note(
        batch: bytes, flips: list[tuple[int, int]], crc_fixed: bool) -> None:
    data = bytearray(batch)
    for at, mask in flips:
        spot = 61 + at % max(1, len(data) - 61) if len(data) > 61 else at % len(data)
        data[spot] ^= mask
    damaged = patched(bytes(data)) if crc_fixed and len(data) >= 61 else bytes(data)
    assert agree(damaged)


@CHECKS
@given(batch=batches, attributes=st.integers(0, 0x7F))
def test_other_attributes_control_flag_or_unknown_codec_agree(batch: bytes, attributes: int) -> None:
    assert agree(patched(batch, attributes=attributes))


@CHECKS
@given(records=st.lists(record, min_size=1, max_size=4), raw=st.binary(max_size=40))
def test_hand_written_record_bytes_agree(records: list, raw: bytes) -> None:
    batch = v2_batch(records)
    assert agree(patched(batch, records=raw))
    assert agree(patched(batch, records=batch[61:] + raw))


@CHECKS
@given(first=batches, second=st.one_of(batches, legacy), cut=st.integers(0, 200))
def test_several_entries_and_a_cut_last_one_agree(first: bytes, second: bytes, cut: int) -> None:
    both = first + second
    assert agree(both)
    assert agree(both[: max(0, len(both) - cut)])


@CHECKS
@given(message_set=legacy, flip=st.tuples(st.integers(0, 10_000), st.integers(1, 255)))
def test_legacy_message_sets_agree_whole_and_damaged(message_set: bytes, flip: tuple[int, int]) -> None:
    assert agree(message_set)
    data = bytearray(message_set)
    data[flip[0] % len(data)] ^= flip[1]
    assert agree(bytes(data))


def test_clean_batches_of_every_codec_are_clean_and_a_wrong_count_is_not() -> None:
    for codec in range(5):
        batch = v2_batch([(1, b"k", b"v", [("h", b"x")]), (2, None, b"value", [])], codec)
        assert records_clean(batch, 0, len(batch), MAX_DECOMPRESSED_BYTES)
        wrong = bytearray(batch)
        struct.pack_into(">i", wrong, 57, 3)  # three records announced, two there
        assert not records_clean(bytes(wrong), 0, len(wrong), MAX_DECOMPRESSED_BYTES)
        assert agree(patched(bytes(wrong)))


def one_record(key_length: int, header_key_length: int) -> bytes:
    """A record written byte by byte: no key or value, one header with a null value."""
    zigzag = {-1: 1, 0: 0, 1: 2, 2: 4, 4: 8}
    key = bytes([zigzag[key_length]]) + b"\x00" * max(0, key_length)
    header_key = bytes([zigzag[header_key_length]]) + b"h" * max(0, header_key_length)
    body = b"\x00\x00\x00" + key + b"\x01" + b"\x02" + header_key + b"\x01"
    return bytes([zigzag[len(body)] if len(body) in zigzag else len(body) * 2]) + body


def test_a_null_header_key_and_a_short_control_key_are_not_clean() -> None:
    batch = v2_batch([(1, b"k", b"v", [])])
    for key_length, header_key_length, control, clean in [
            (-1, 0, False, True), (-1, -1, False, False), (-1, 1, False, True),
            (4, 1, True, True), (2, 1, True, False), (-1, 1, True, False)]:
        data = patched(batch, records=one_record(key_length, header_key_length),
                       attributes=0x20 if control else 0)
        assert records_clean(data, 0, len(data), MAX_DECOMPRESSED_BYTES) is clean
        assert decodes_clean(data) is clean
