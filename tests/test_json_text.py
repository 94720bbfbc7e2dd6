"""JSON trees written as text straight from flat values (`kdissect.present.json_text`) are
byte for byte the JSON of the rows and of the interpreter's tree.

`-T json` and `-T jsonl` write an ordinary body's tree without rows or dicts; the
rows (`decode.rows`, `decode.record_rows`), dumped by orjson, stay the reference,
and the interpreter's tree behind them. Every message of every shipped,
third-party and fuzz-regression capture, and record batches kafka-python built
(every codec, null keys and values, headers, text outside ASCII, transactional,
control and LogAppendTime batches, legacy message sets), must come out the same.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from unittest import mock

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kdissect.decode import record_nodes
from kdissect.decode.record_rows import entries_rows
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages
from kdissect.present import json_text
from kdissect.present.json_text import entries_json, message_tree_json, rows_records
from kdissect.present.records import (
    ascii_json,
    message_head_json,
    message_json,
    message_record,
    message_tree_record,
    tree_record,
)
from tests.test_generated import FUZZ_REGRESSIONS
from tests.test_records import CODECS, QUICK, legacy_set, patched, record, v2_batch

PUBLIC_SUFFIXES = (".pcap", ".pcapng")
batch_json = json_text._batch_json


def _same_on_captures(paths: list[Path]) -> tuple[int, int]:
    """(messages written as text, messages) over the captures; each text must be the usual JSON."""
    written = total = 0
    for path in paths:
        for message in read_messages(path):
            total += 1
            text = message_tree_json(message)
            expected = orjson.dumps(message_tree_record(message, about=False)).decode()
            if text is None:
                continue
            written += 1
            assert text == expected, f"{path.name} message {message.number}"
            assert json.loads(ascii_json(text)) == tree_record(message.tree(keep=False), about=False)
    return written, total


def test_text_is_the_json_of_the_tree_on_every_shipped_capture(shipped_captures: Path) -> None:
    written, total = _same_on_captures(sorted(shipped_captures.glob("*.pcap")))
    assert written >= 400 and written > 0.85 * total


def test_text_is_the_json_of_the_tree_on_every_third_party_capture(public_captures: Path) -> None:
    written, total = _same_on_captures(sorted(p for p in public_captures.iterdir() if p.suffix in PUBLIC_SUFFIXES))
    assert written >= 40 and written > 0.8 * total


def test_text_is_the_json_of_the_tree_on_every_fuzz_regression() -> None:
    _same_on_captures(sorted(FUZZ_REGRESSIONS.glob("*.pcap")))


def test_message_json_writes_the_text_tree_like_the_usual_one(shipped_captures: Path) -> None:
    for message in read_messages(shipped_captures / "tansu_records.pcap"):
        assert message_tree_json(message) is not None
        record = json.loads(message_json(message))
        assert record["tree"] == tree_record(message.tree(keep=False), about=False)


def _same_entries(data: bytes) -> int:
    """The batches' text against their rows dumped and the interpreter's nodes; entries written."""
    rows = entries_rows(data, 0, len(data))
    assert rows is not None
    texts = entries_json(data, 0, len(data))
    assert f"[{','.join(texts)}]" == orjson.dumps(rows_records(rows)).decode()
    nodes = record_nodes.entries_nodes(data, 0, len(data))
    assert [json.loads(ascii_json(text)) for text in texts] == [tree_record(n, about=False) for n in nodes]
    return len(texts)


# keys, values and header keys outside ASCII and with quotes, backslashes and controls
text = st.text(alphabet=st.sampled_from('ab"\\\n\t\x7fé€😀\u202e'), max_size=12)
odd_payload = st.one_of(st.none(), text.map(str.encode), st.binary(max_size=80))
odd_record = st.tuples(st.integers(0, 10_000), odd_payload, odd_payload,
                       st.lists(st.tuples(text, st.one_of(st.none(), st.binary(max_size=12))), max_size=3))


@pytest.mark.parametrize("codec", sorted(CODECS))
@QUICK
@given(batches=st.lists(st.lists(st.one_of(record, odd_record), min_size=1, max_size=5), min_size=1, max_size=3),
       base=st.integers(0, 2**40), transactional=st.booleans())
def test_batches_kafka_python_built_are_written_as_their_rows(codec: int, batches: list, base: int,
                                                             transactional: bool) -> None:
    data = b"".join(v2_batch(records, codec, base_offset=base + 100 * i, transactional=transactional,
                             producer=(7, 3, 11) if transactional else (-1, -1, -1))
                    for i, records in enumerate(batches))
    assert _same_entries(data) == len(batches)
    assert _written_at_once(data) == len(batches)


def _written_at_once(data: bytes) -> int:
    """How many entries of data `_batch_json` wrote itself (the others went through rows)."""
    written = []
    with mock.patch.object(json_text, "_batch_json", side_effect=lambda *a: written.append(1) or batch_json(*a)):
        entries_json(data, 0, len(data))
    return len(written)


def test_null_keys_values_and_headers_are_written_as_their_rows() -> None:
    data = v2_batch([(0, None, None, []), (1, b"k", None, [("h", None), ("", b"")]), (2, None, b"v" * 100, [])])
    assert _same_entries(data) == _written_at_once(data) == 1
    record = json.loads(entries_json(data, 0, len(data))[0])["children"][-1]["children"][0]
    assert [c["name"] for c in record["children"]][6:8] == ["keyLength", "valueLength"]  # no key, no value


def test_control_and_log_append_time_batches_are_written_as_their_rows() -> None:
    data = v2_batch([(0, b"k", b"v", [])], transactional=True, producer=(42, 5, 0))
    marker = patched(v2_batch([(9, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 17), [])],
                              transactional=True, producer=(42, 5, -1), base_offset=1), attributes=0x10 | 0x20)
    log_append = patched(v2_batch([(3, b"a", b"b", [])], base_offset=2), attributes=0x08)
    assert _same_entries(data + marker + log_append) == 3
    assert _written_at_once(data + marker + log_append) == 2  # the marker through rows
    texts = entries_json(data + marker, 0, len(data + marker))
    assert '"display":"1 (commit)"' in texts[1] and '"name":"coordinatorEpoch"' in texts[1]


@pytest.mark.parametrize(("magic", "codec"), [(m, c) for m in (0, 1) for c in (0, 1, 2, 3)])
@QUICK
@given(records=st.lists(record, min_size=1, max_size=5), base=st.integers(0, 2**40))
def test_legacy_message_sets_are_written_as_their_rows(magic: int, codec: int, records: list, base: int) -> None:
    data = legacy_set(magic, records, codec, base_offset=base)
    assert _same_entries(data) > 0


def _record_json(message: Message) -> str:
    record = message_record(message)
    time, record["time"] = record["time"], 0
    return orjson.dumps(record).decode().replace('"time":0', f'"time":{time.exact()}', 1)


def test_message_head_is_the_message_record_as_json(shipped_captures: Path, public_captures: Path) -> None:
    paths = [*sorted(shipped_captures.glob("*.pcap")), *sorted(public_captures.glob("*.pcap*"))]
    noted = 0
    for path in paths:
        for message in read_messages(path):
            assert message_head_json(message) + "}" == _record_json(message), f"{path.name} {message.number}"
            noted += bool(message.all_notes())
    assert noted >= 8  # notes written too


def test_values_computed_from_others_are_written_after_their_field(shipped_captures: Path) -> None:
    lags = 0
    for message in read_messages(shipped_captures / "quorum_story.pcap"):
        text = message_tree_json(message)
        assert text is not None and text == orjson.dumps(message_tree_record(message, about=False)).decode()
        lags += text.count('"name":"lag","type":"int64"')
    assert lags > 0  # DescribeQuorum's replica lag, after each LogEndOffset
