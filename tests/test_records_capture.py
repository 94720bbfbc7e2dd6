"""Real traffic: the shipped Tansu capture's records are exactly what kafka-python sent and received.

`captures/tansu_records.pcap` was made by `tools/record_records.py`: producers
with every codec kafka-python supports and a transactional producer, then a
consumer reading everything back. Its sidecar JSON holds what the client sent
(with the offsets the broker gave) and what the consumer got.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import kdissect
from kdissect.notes import Severity
from kdissect.present.analysis import Capture
from kdissect.present.record_tables import frame_records
from tests.conftest import CAPTURES

PCAP = CAPTURES / "tansu_records.pcap"
SIDECAR = json.loads(PCAP.with_suffix(".json").read_text())


@pytest.fixture(scope="module")
def capture() -> Capture:
    return kdissect.read_pcap(PCAP)


def unhex(text: str | None) -> bytes | None:
    return None if text is None else bytes.fromhex(text)


def sent(record: dict[str, Any]) -> tuple[Any, ...]:
    headers = tuple((k, unhex(v)) for k, v in record["headers"])
    return record["partition"], record["timestamp"], unhex(record["key"]), unhex(record["value"]), headers


def rows(frame: Any, columns: list[str]) -> list[tuple[Any, ...]]:
    out = []
    for values in zip(*(frame[c].tolist() for c in columns), strict=True):
        out.append(tuple(tuple(v) if isinstance(v, list) else v for v in values))
    return out


def test_produce_requests_carry_exactly_what_each_producer_sent(capture: Capture) -> None:
    records = capture.records
    produced = records[(records.api_name == "Produce") & (records.direction == "request")].copy()
    produced["ms"] = produced.timestamp.map(lambda t: int(t.timestamp() * 1000))
    assert set(produced.topic_name) == {SIDECAR["topic"]}
    got = sorted(rows(produced, ["partition_index", "log_offset", "ms", "key", "value", "headers"]))
    # log_offset: where the broker put each record, from the paired response's BaseOffset
    assert got == sorted((r["partition"], r["offset"], *sent(r)[1:]) for r in SIDECAR["produced"])
    assert len(got) == 33 and set(produced.offset) == {0, 1, 2}  # as the producer wrote them


def test_fetch_responses_carry_exactly_what_the_consumer_received(capture: Capture) -> None:
    records = capture.records
    fetched = records[(records.api_name == "Fetch") & (records.direction == "response")].copy()
    assert (fetched.log_offset == fetched.offset).all()
    data = fetched[fetched.control_type.isna()].copy()
    data["ms"] = data.timestamp.map(lambda t: int(t.timestamp() * 1000))
    got = sorted(rows(data, ["partition_index", "offset", "ms", "key", "value", "headers"]))
    expected = sorted((r["partition"], r["offset"], *sent(r)[1:]) for r in SIDECAR["consumed"])
    assert got == expected
    # ... at the offsets the broker gave each produced record
    assert {(p, o) for p, o, *_ in got} == {(r["partition"], r["offset"]) for r in SIDECAR["produced"]}
    markers = fetched[fetched.control_type.notna()]
    assert SIDECAR["transactions"] == "committed" and set(markers.control_type) == {"commit"}
    assert set(fetched[fetched.transactional].producer_id.dropna()) == set(markers.producer_id)


def test_every_codec_and_the_transaction_are_in_the_batches(capture: Capture) -> None:
    batches = capture.batches
    assert set(batches.compression) == {"none", "gzip", "snappy", "lz4", "zstd"}
    assert batches.crc_ok.all() and (batches.kind == "batch").all() and batches.notes.isna().all()
    assert batches.transactional.any() and batches.control.any()
    assert (batches.records == batches.record_count).all()
    compressed = batches[batches.compression != "none"]
    assert (compressed.decompressed_bytes > 0).all()


def test_tables_have_real_dtypes(capture: Capture) -> None:
    records, batches = capture.records, capture.batches
    kinds = {c: str(t) for c, t in records.dtypes.items()}
    assert kinds["offset"] == kinds["partition_index"] == kinds["producer_id"] == kinds["sequence"] == "Int64"
    assert kinds["timestamp"].startswith("datetime64") and str(records.timestamp.dt.tz) == "UTC"
    assert {kinds[c] for c in ("api_name", "direction", "topic_name", "compression", "control_type")} == {"category"}
    assert kinds["transactional"] == kinds["batch_crc_ok"] == "boolean"
    assert all(isinstance(h, list) and all(isinstance(k, str) for k, _ in h) for h in records.headers)
    assert str(batches.max_timestamp.dt.tz) == "UTC" and str(batches.base_offset.dtype) == "Int64"


def test_every_produce_and_fetch_message_decodes_without_a_note_and_tiles(capture: Capture) -> None:
    checked = 0
    for message in capture.message_list:
        if message.api_key in (0, 1):
            tree = message.tree()
            assert tree.tiling_errors() == []
            assert [str(n) for n in tree.all_notes() if n.severity >= Severity.NOTE] == []
            checked += 1
    assert checked == 14


def test_frame_record_counts_for_summaries(capture: Capture) -> None:
    fetch = next(m for m in capture.message_list if m.api_key == 1 and not m.is_request)
    count, size = frame_records(fetch)
    consumed = SIDECAR["consumed"]
    assert count == len(consumed) + 2  # and the two commit markers
    markers = 2 * (4 + 6)  # key: version, type; value: version, coordinator epoch
    assert size == markers + sum(len(unhex(r["key"]) or b"") + len(unhex(r["value"]) or b"") for r in consumed)


# -- third-party captures: other clients' batches -------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), [
    ("deepflow_00-produce-v7-sw8.pcap",
     [("quickstart-events", 0, b"MyKey", b"Hello Kafka", ["sw8"])]),
    ("deepflow_00-produce-v9.pcap", [("zqy-test", 0, None, b"q" * 31, [])]),
    ("ndpi_kafka.pcapng", [("LB_MAIN_LOG_INPUT", 0, None, None, []), ("LB_MAIN_LOG_INPUT", 0, None, None, []),
                           ("sampleTopic", 0, None, b"Hello world!", [])]),
])
def test_other_clients_batches_decode_with_their_crc_right(public_captures: Any, name: str,
                                                           expected: list[tuple[Any, ...]]) -> None:
    capture = kdissect.read_pcap(public_captures / name, ports=[36333])
    for message in capture.message_list:
        if message.api_key == 0:
            tree = message.tree()
            assert tree.tiling_errors() == [] and [n for n in tree.all_notes()
                                                   if n.severity >= Severity.NOTE] == []
    records = capture.records
    assert records.batch_crc_ok.all()
    got = [(r.topic_name, r.offset, r.key, r.value, [k for k, _ in r.headers]) for r in records.itertuples()]
    # the JSON log lines of nDPI's capture are long: only their shape is pinned
    assert [g if e[3] is not None else (*g[:3], None, g[4]) for g, e in zip(got, expected, strict=True)] == expected
    assert all(v.startswith(b'{"timestamp":') for v in records[records.topic_name == "LB_MAIN_LOG_INPUT"].value)
