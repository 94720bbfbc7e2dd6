"""The produce, fetch, groups and errors tables hold what other software put on the wire.

Ground truth from outside kdissect: the Tansu capture's sidecar records what
kafka-python sent and what the broker answered (offsets included), and
kafka-python's consumer defaults are its own; the third-party captures are
read by tshark for every message it decodes without complaint; kafka-python's
record builders make the record sets whose records are counted.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

import kdissect
from kdissect.present.analysis import Capture
from kdissect.present.traffic_tables import record_count
from tests.conftest import CAPTURES, missing

RECORDS_PCAP = CAPTURES / "tansu_records.pcap"
SIDECAR = json.loads(RECORDS_PCAP.with_suffix(".json").read_text())
PORTS = [36333]
GROUP_APIS = {8, 9, 10, 11, 12, 13, 14, 68}


@pytest.fixture(scope="module")
def tansu() -> Capture:
    return kdissect.read_pcap(RECORDS_PCAP)


def plain(value: Any) -> Any:
    return None if value is None or value is pd.NA or (isinstance(value, float) and value != value) else value


def client_ids(capture: Capture) -> dict[int, str]:
    messages = capture.messages
    return {int(n): str(c) for n, c in zip(messages.number, messages.client_id, strict=True)}


# -- produce and fetch against what kafka-python sent and received ------------------------


def test_produce_requests_carry_each_producers_records_and_the_responses_their_offsets(
        tansu: Capture) -> None:
    """Per producer (its client id) and partition: the records it sent, the offset the broker
    gave the first of them, as kafka-python's futures reported."""
    produce = tansu.produce
    requests = produce[produce.direction == "request"]
    responses = produce[produce.direction == "response"].set_index(["number", "partition_index"])
    pairs = tansu.messages.set_index("number").pair
    clients = client_ids(tansu)
    found = set()
    for row in requests.itertuples():
        label = clients[row.number].rsplit("-", 1)[1]
        answer = responses.loc[(int(pairs[row.number]), row.partition_index)]
        found.add(("transactional" if label == "txn" else label, row.partition_index,
                   row.record_count, answer.base_offset, answer.partition_error))
    sent: dict[tuple[str, int], list[int]] = defaultdict(list)
    for record in SIDECAR["produced"]:
        sent[record["producer"], record["partition"]].append(record["offset"])
    assert found == {(producer, partition, len(offsets), min(offsets), "NONE")
                     for (producer, partition), offsets in sent.items()}
    assert set(requests.topic_name) == set(responses.topic_name) == {SIDECAR["topic"]}
    assert requests.record_count.sum() == len(SIDECAR["produced"]) == 33


def test_produce_requests_say_acks_and_the_transactional_id(tansu: Capture) -> None:
    """acks="all" is -1 on the wire; only the transactional producer names its id."""
    requests = tansu.produce[tansu.produce.direction == "request"]
    assert set(requests.acks) == {-1}
    clients = client_ids(tansu)
    named = {clients[n]: plain(t) for n, t in zip(requests.number, requests.transactional_id, strict=True)}
    assert {c: t for c, t in named.items() if t is not None} == {"kdissect-records-txn": "kdissect-txn"}
    assert (requests.records_bytes > 0).all() and requests.partition_error.isna().all()


def test_fetch_rows_hold_kafka_pythons_defaults_and_what_the_consumer_received(tansu: Capture) -> None:
    fetch = tansu.fetch
    asked = fetch[fetch.direction == "request"]
    # kafka-python's consumer defaults: fetch_max_wait_ms, fetch_min_bytes, fetch_max_bytes,
    # max_partition_fetch_bytes; read_committed is 1; a consumer is no replica
    assert set(asked.max_wait_ms) == {500} and set(asked.min_bytes) == {1}
    assert set(asked.max_bytes) == {52428800} and set(asked.partition_max_bytes) == {1048576}
    assert set(asked.isolation_level) == {1} and asked.replica_id.isna().all()
    assert set(asked.fetch_offset) == {0}  # auto_offset_reset="earliest" on an empty log start
    answered = fetch[fetch.direction == "response"]
    received = Counter(r["partition"] for r in SIDECAR["consumed"])
    last = {p: max(r["offset"] for r in SIDECAR["consumed"] if r["partition"] == p) for p in received}
    for row in answered.itertuples():
        # the records consumed, and the one commit marker of the transaction per partition
        assert row.record_count == received[row.partition_index] + 1
        assert row.high_watermark > last[row.partition_index]
        assert row.last_stable_offset == row.high_watermark  # the transaction was committed
        assert row.partition_error == "NONE" and row.aborted_transactions == 0
    assert sorted(answered.partition_index) == [0, 1]


def test_record_counts_are_what_kafka_pythons_builders_put_in(tansu: Capture) -> None:
    v2 = DefaultRecordBatchBuilder(2, 1, False, -1, -1, -1, batch_size=1 << 20)
    for i in range(5):
        v2.append(i, 1_795_952_641_840 + i, b"k", b"v" * i, [])
    wrapped = LegacyRecordBatchBuilder(1, 1, batch_size=1 << 20)  # a gzip wrapper of 4
    for i in range(4):
        wrapped.append(i, 1_795_952_641_840, None, b"x" * i)
    plain_set = LegacyRecordBatchBuilder(0, 0, batch_size=1 << 20)
    for i in range(3):
        plain_set.append(i, None, b"key", b"value")
    data = bytes(v2.build()) + bytes(wrapped.build()) + bytes(plain_set.build())
    assert record_count(data) == 5 + 4 + 3
    assert record_count(data[:-5]) == 5 + 4 + 2  # the cut last message is not counted
    assert record_count(None) == 0


# -- groups, produce and errors against tshark ----------------------------------------------


TSHARK_FIELDS = ("kafka.topic_name", "kafka.partition_id", "kafka.error", "kafka.offset",
                 "kafka.consumer_group", "kafka.member_id", "kafka.generation_id",
                 "kafka.protocol_name", "kafka.required_acks")


def tshark(path: Path) -> dict[int, dict[str, list[str]]]:
    """Per frame: tshark's values of TSHARK_FIELDS, for messages it decoded without complaint."""
    if shutil.which("tshark") is None:
        missing("tshark is not installed")
    command = ["tshark", "-r", str(path), "-d", "tcp.port==36333,kafka", "-Y", "kafka", "-T", "fields",
               "-E", "occurrence=a", "-E", "aggregator=|", "-e", "frame.number", "-e", "_ws.expert.message"]
    for field in TSHARK_FIELDS:
        command += ["-e", field]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120).stdout
    rows = {}
    for line in out.splitlines():
        number, expert, *values = line.split("\t")
        if not expert:
            rows[int(number)] = {f: v.split("|") if v else [] for f, v in zip(TSHARK_FIELDS, values,
                                                                              strict=True)}
    return rows


def public(public_captures: Path) -> list[Path]:
    return sorted(p for p in public_captures.iterdir() if p.suffix in (".pcap", ".pcapng"))


def texts(values: Any) -> list[str]:
    return [str(plain(v)) for v in values if plain(v) is not None]


def test_produce_rows_agree_with_tshark(public_captures: Path) -> None:
    compared = 0
    for path in public(public_captures):
        capture = kdissect.read_pcap(path, ports=PORTS)
        seen = tshark(path)
        for number, rows in capture.produce.groupby("number"):
            theirs = seen.get(capture.message(int(number)).frame.last_packet)
            if theirs is None:
                continue
            assert texts(rows.topic_name) == theirs["kafka.topic_name"], path.name
            assert texts(rows.partition_index) == theirs["kafka.partition_id"], path.name
            if (rows.direction == "response").all():
                codes = [str(kdissect_code(e)) for e in rows.partition_error]
                assert codes == theirs["kafka.error"], path.name
                assert texts(rows.base_offset) == theirs["kafka.offset"], path.name
            else:
                assert texts(rows.acks.drop_duplicates()) == theirs["kafka.required_acks"], path.name
            compared += 1
    assert compared >= 6  # the requests tshark 4.0 flags (a null transactional id) are left out


def kdissect_code(name: str) -> int:
    from kdissect.error_codes import ERROR_NAMES

    return next(code for code, known in ERROR_NAMES.items() if known == name)


def test_group_rows_agree_with_tshark(public_captures: Path) -> None:
    """Group ids, member ids, generations, protocol names and errors, message by message."""
    compared = Counter()
    for path in public(public_captures):
        capture = kdissect.read_pcap(path, ports=PORTS)
        seen = tshark(path)
        for number, rows in capture.groups.groupby("number"):
            message = capture.message(int(number))
            theirs = seen.get(message.frame.last_packet)
            if theirs is None:
                continue
            row = rows.iloc[0]
            if message.is_request:
                assert texts(rows.group_id) == theirs["kafka.consumer_group"], path.name
                assert str(row.member_id) in theirs["kafka.member_id"] or row.member_id == "", path.name
                if row.api_name == "JoinGroup":  # the protocols it offers
                    assert str(row.protocol_name).split(",") == theirs["kafka.protocol_name"]
            else:
                assert [str(kdissect_code(e)) for e in rows.error] == theirs["kafka.error"][:1], path.name
                if row.api_name == "JoinGroup":
                    assert [str(row.member_id)] == theirs["kafka.member_id"]
            generation = theirs["kafka.generation_id"]
            if generation and plain(row.generation_id) is not None:
                assert str(row.generation_id) == generation[0], path.name
            compared[row.api_name] += 1
    assert {"JoinGroup", "SyncGroup", "LeaveGroup", "Heartbeat", "OffsetCommit"} <= set(compared)


def test_error_rows_agree_with_tshark(public_captures: Path) -> None:
    """The non-zero error codes of each message tshark decodes, in order."""
    compared = 0
    for path in public(public_captures):
        capture = kdissect.read_pcap(path, ports=PORTS)
        seen = tshark(path)
        errors = capture.errors
        for message in capture.message_list:
            theirs = seen.get(message.frame.last_packet)
            if theirs is None or message.api_key is None:
                continue
            mine = [str(c) for c in errors[errors.number == message.number].error_code]
            assert mine == [c for c in theirs["kafka.error"] if c != "0"], (path.name, message.number)
            compared += 1
    assert compared >= 15


# -- errors against the fields table, and where they sit ---------------------------------------


@pytest.mark.parametrize("name", ["incident", "producers_story", "quorum_story", "tansu_records"])
def test_errors_table_holds_every_non_zero_error_code_field(name: str) -> None:
    """The same error codes as the fields table (made from the -V rows, not flat values)."""
    capture = kdissect.read_pcap(CAPTURES / f"{name}.pcap")
    fields = capture.fields
    codes = fields[fields.name.astype(str).str.endswith("ErrorCode") & (fields.value_int != 0)
                   & fields.value_int.notna()]
    errors = capture.errors
    assert list(zip(errors.number, errors.path, errors.error_code, strict=True)) == list(
        zip(codes.number, codes.path, codes.value_int, strict=True))


def test_error_rows_name_the_topic_and_partition_they_sit_under() -> None:
    capture = kdissect.read_pcap(CAPTURES / "producers_story.pcap")
    errors = capture.errors
    assert len(errors) == 2
    assert set(errors.topic_name) == {"orders"} and set(errors.partition_index) == {2}
    assert set(errors.error) == {"NOT_LEADER_OR_FOLLOWER"} and errors.error_message.notna().all()
    assert set(errors.api_name) == {"DescribeProducers"} and set(errors.direction) == {"response"}
    assert all(p.startswith("Topics[") and p.endswith("].ErrorCode") for p in errors.path)
