"""The produce, fetch, groups and errors tables hold what other software put on the wire.

Ground truth from outside kdissect: the Tansu capture's sidecar records what
kafka-python sent and what the broker answered (offsets included), and
kafka-python's consumer defaults are its own; the third-party captures are
read by tshark for every message it decodes without complaint; kafka-python's
record builders make the record sets whose records are counted.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import uuid
from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kio.schema.consumer_group_heartbeat.v0 import request as heartbeat_request
from kio.schema.consumer_group_heartbeat.v0 import response as heartbeat_response
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v15 import request as fetch_request
from kio.schema.fetch.v15 import response as fetch_response
from kio.schema.find_coordinator.v4 import request as find_request
from kio.schema.find_coordinator.v4 import response as find_response
from kio.schema.leave_group.v5 import request as leave_request
from kio.schema.leave_group.v5 import response as leave_response
from kio.schema.offset_fetch.v8 import request as offset_request
from kio.schema.offset_fetch.v8 import response as offset_response
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_writer

import kdissect
from kdissect.present.analysis import Capture
from kdissect.present.traffic_tables import record_count
from tests.conftest import CAPTURES, missing
from tests.craft import Conversation, ethernet, records, write_pcap

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


@pytest.mark.parametrize("name", ["incident", "producers_story", "quorum_story", "tansu_records",
                                  "tansu_topic_partitions"])
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


# -- versions no shipped capture has: exchanges encoded by kio -------------------------------


def encoded(entity: object) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def kio_capture(tmp_path: Path, exchanges: list[tuple[int, int, object, object]]) -> Path:
    """One connection carrying each (api key, flexible version, request, response), kio-encoded."""
    talk = Conversation.between(("10.0.0.1", 40000), ("10.0.0.2", 9092))
    packets = [*talk.handshake()]
    for correlation_id, (api_key, version, asked, answered) in enumerate(exchanges, start=1):
        header = RequestHeader(request_api_key=api_key, request_api_version=version,
                               correlation_id=correlation_id, client_id="kio")
        for is_request, payload in ((True, encoded(header) + encoded(asked)),
                                    (False, encoded(ResponseHeader(correlation_id=correlation_id))
                                     + encoded(answered))):
            packets += talk.send(is_request, len(payload).to_bytes(4, "big") + payload)
    return write_pcap(tmp_path / "kio.pcap", records(packets, wrap=ethernet))


TOPIC_ID = uuid.UUID("6f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f1")


def follower_fetch() -> tuple[Any, Any]:
    """A Fetch v15 exchange by topic id (kio's classes; records by kafka-python's batch
    builder): partition 0 answers three records, partition 1 OFFSET_OUT_OF_RANGE."""
    batch = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, batch_size=1 << 20)
    for i in range(3):
        batch.append(i, 1_795_952_641_840, None, b"v", [])
    asked = fetch_request.FetchRequest(
        cluster_id=None, replica_state=fetch_request.ReplicaState(replica_id=2, replica_epoch=5),
        max_wait=timedelta(milliseconds=500), min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, topics=(fetch_request.FetchTopic(topic_id=TOPIC_ID, partitions=tuple(
            fetch_request.FetchPartition(partition=p, current_leader_epoch=7, fetch_offset=100 + p,
                                         last_fetched_epoch=6, log_start_offset=0,
                                         partition_max_bytes=4096) for p in (0, 1))),),
        forgotten_topics_data=(), rack_id="")
    leader = fetch_response.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    diverging = fetch_response.EpochEndOffset(epoch=-1, end_offset=-1)
    snapshot = fetch_response.SnapshotId(end_offset=-1, epoch=-1)
    partitions = (
        fetch_response.PartitionData(
            partition_index=0, error_code=ErrorCode.none, high_watermark=130, last_stable_offset=120,
            log_start_offset=5, diverging_epoch=diverging, current_leader=leader, snapshot_id=snapshot,
            aborted_transactions=(fetch_response.AbortedTransaction(producer_id=9, first_offset=110),
                                  fetch_response.AbortedTransaction(producer_id=8, first_offset=111)),
            preferred_read_replica=-1, records=bytes(batch.build())),
        fetch_response.PartitionData(
            partition_index=1, error_code=ErrorCode.offset_out_of_range, high_watermark=-1,
            last_stable_offset=-1, log_start_offset=-1, diverging_epoch=diverging, current_leader=leader,
            snapshot_id=snapshot, aborted_transactions=None, preferred_read_replica=-1, records=None))
    answered = fetch_response.FetchResponse(
        throttle_time=timedelta(milliseconds=3), error_code=ErrorCode.none, session_id=0,
        responses=(fetch_response.FetchableTopicResponse(topic_id=TOPIC_ID, partitions=partitions),))
    return asked, answered


def test_a_follower_fetch_by_topic_id(tmp_path: Path) -> None:
    """Fetch v15: topics by id, a follower's epochs and offsets, aborted transactions, and a
    partition error that the errors table places under its topic id and partition."""
    asked, answered = follower_fetch()
    capture = kdissect.read_pcap(kio_capture(tmp_path, [(1, 15, asked, answered)]))
    fetch = capture.fetch
    asked_rows, answered_rows = fetch[fetch.direction == "request"], fetch[fetch.direction == "response"]
    assert set(fetch.topic_id) == {str(TOPIC_ID)} and fetch.topic_name.isna().all()
    assert list(asked_rows.fetch_offset) == [100, 101]
    assert set(asked_rows.current_leader_epoch) == {7} and set(asked_rows.last_fetched_epoch) == {6}
    assert set(asked_rows.session_epoch) == {-1} and set(asked_rows.partition_max_bytes) == {4096}
    assert [plain(v) for v in answered_rows.record_count] == [3, None]
    assert [plain(v) for v in answered_rows.aborted_transactions] == [2, None]
    assert [plain(v) for v in answered_rows.high_watermark] == [130, None]
    assert list(answered_rows.partition_error) == ["NONE", "OFFSET_OUT_OF_RANGE"]
    assert set(answered_rows.error) == {"NONE"} and set(answered_rows.throttle_time_ms) == {3}
    errors = capture.errors
    assert list(zip(errors.path, errors.error_code, errors.topic_id, errors.partition_index,
                    strict=True)) == [("Responses[0].Partitions[1].ErrorCode", 1, str(TOPIC_ID), 1)]
    # the records and batches tables place the records under the topic id and partition too
    for table in (capture.records, capture.batches):
        assert set(table.topic_id) == {str(TOPIC_ID)} and table.topic_name.isna().all()
        assert set(table.partition_index) == {0}
    assert list(capture.records.offset) == [0, 1, 2] and list(capture.batches.record_count) == [3]


def test_a_fetch_of_no_partition_is_one_row_with_its_session_and_error(tmp_path: Path) -> None:
    """An incremental fetch with nothing to change, answered with a session error and no
    partitions: each is still a row of the fetch table (topic and partition missing)."""
    asked = fetch_request.FetchRequest(
        cluster_id=None, replica_state=fetch_request.ReplicaState(replica_id=-1, replica_epoch=-1),
        max_wait=timedelta(milliseconds=500), min_bytes=1, max_bytes=1 << 20, isolation_level=1,
        session_id=4242, session_epoch=7, topics=(), forgotten_topics_data=(), rack_id="")
    answered = fetch_response.FetchResponse(
        throttle_time=timedelta(milliseconds=0), error_code=ErrorCode.fetch_session_id_not_found,
        session_id=0, responses=())
    capture = kdissect.read_pcap(kio_capture(tmp_path, [(1, 15, asked, answered)]))
    fetch = capture.fetch
    assert list(fetch.direction) == ["request", "response"] and list(fetch.number) == [1, 2]
    assert fetch.topic_name.isna().all() and fetch.partition_index.isna().all()
    assert [plain(v) for v in fetch.session_id] == [4242, 0]
    assert plain(fetch.session_epoch.iloc[0]) == 7 and plain(fetch.max_wait_ms.iloc[0]) == 500
    assert fetch.error.iloc[1] == "FETCH_SESSION_ID_NOT_FOUND"


def test_group_rows_of_the_multi_key_versions(tmp_path: Path) -> None:
    """FindCoordinator v4 (several keys), OffsetFetch v8 (several groups), LeaveGroup v5
    (several members), ConsumerGroupHeartbeat v0: one row per key, group or member."""
    coordinator = find_request.FindCoordinatorRequest(key_type=0, coordinator_keys=("g1", "g2"))
    found = find_response.FindCoordinatorResponse(throttle_time=timedelta(0), coordinators=(
        find_response.Coordinator(key="g1", node_id=3, host="b3", port=9092, error_code=ErrorCode.none,
                                  error_message=None),
        find_response.Coordinator(key="g2", node_id=-1, host="", port=-1,
                                  error_code=ErrorCode.coordinator_not_available, error_message="later")))
    fetch_offsets = offset_request.OffsetFetchRequest(groups=(
        offset_request.OffsetFetchRequestGroup(group_id="g1", topics=None),
        offset_request.OffsetFetchRequestGroup(group_id="g2", topics=None)), require_stable=False)
    offsets = offset_response.OffsetFetchResponse(throttle_time=timedelta(0), groups=(
        offset_response.OffsetFetchResponseGroup(group_id="g1", topics=(), error_code=ErrorCode.none),
        offset_response.OffsetFetchResponseGroup(group_id="g2", topics=(offset_response.OffsetFetchResponseTopics(
            name="t", partitions=(offset_response.OffsetFetchResponsePartitions(
                partition_index=0, committed_offset=-1, committed_leader_epoch=-1, metadata=None,
                error_code=ErrorCode.unstable_offset_commit),)),), error_code=ErrorCode.none)))
    leave = leave_request.LeaveGroupRequest(group_id="g1", members=(
        leave_request.MemberIdentity(member_id="m1", group_instance_id=None, reason=None),
        leave_request.MemberIdentity(member_id="m2", group_instance_id="i2", reason="bye")))
    left = leave_response.LeaveGroupResponse(throttle_time=timedelta(0), error_code=ErrorCode.none, members=(
        leave_response.MemberResponse(member_id="m1", group_instance_id=None, error_code=ErrorCode.none),
        leave_response.MemberResponse(member_id="m2", group_instance_id="i2",
                                      error_code=ErrorCode.unknown_member_id)))
    beat = heartbeat_request.ConsumerGroupHeartbeatRequest(
        group_id="g3", member_id="", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=("t",), server_assignor=None,
        topic_partitions=())
    beaten = heartbeat_response.ConsumerGroupHeartbeatResponse(
        throttle_time=timedelta(0), error_code=ErrorCode.none, error_message=None, member_id="m9",
        member_epoch=1, heartbeat_interval=timedelta(seconds=5), assignment=None)
    capture = kdissect.read_pcap(kio_capture(tmp_path, [
        (10, 4, coordinator, found), (9, 8, fetch_offsets, offsets), (13, 5, leave, left),
        (68, 0, beat, beaten)]))
    columns = ["api_name", "direction", "group_id", "member_id", "group_instance_id", "member_epoch",
               "key_type", "node_id", "error"]
    got = [tuple(plain(v) for v in row) for row in capture.groups[columns].itertuples(index=False)]
    assert got == [
        ("FindCoordinator", "request", "g1", None, None, None, "group", None, None),
        ("FindCoordinator", "request", "g2", None, None, None, "group", None, None),
        ("FindCoordinator", "response", "g1", None, None, None, "group", 3, "NONE"),
        ("FindCoordinator", "response", "g2", None, None, None, "group", None, "COORDINATOR_NOT_AVAILABLE"),
        ("OffsetFetch", "request", "g1", None, None, None, None, None, None),
        ("OffsetFetch", "request", "g2", None, None, None, None, None, None),
        ("OffsetFetch", "response", "g1", None, None, None, None, None, "NONE"),
        ("OffsetFetch", "response", "g2", None, None, None, None, None, "UNSTABLE_OFFSET_COMMIT"),
        ("LeaveGroup", "request", "g1", "m1", None, None, None, None, None),
        ("LeaveGroup", "request", "g1", "m2", "i2", None, None, None, None),
        ("LeaveGroup", "response", "g1", "m1", None, None, None, None, "NONE"),
        ("LeaveGroup", "response", "g1", "m2", "i2", None, None, None, "UNKNOWN_MEMBER_ID"),
        ("ConsumerGroupHeartbeat", "request", "g3", "", None, 0, None, None, None),
        ("ConsumerGroupHeartbeat", "response", "g3", "m9", None, 1, None, None, "NONE"),
    ]
    answers = capture.groups[(capture.groups.api_name == "FindCoordinator")
                             & (capture.groups.direction == "response")]
    assert [(plain(h), plain(p)) for h, p in zip(answers.host, answers.port, strict=True)] == [
        ("b3", 9092), (None, None)]  # no coordinator: Kafka's "" and -1 are missing
    errors = capture.errors
    assert [(a, p, plain(m)) for a, p, m in zip(errors.api_name, errors.path, errors.error_message,
                                                strict=True)] == [
        ("FindCoordinator", "Coordinators[1].ErrorCode", "later"),
        ("OffsetFetch", "Groups[1].Topics[0].Partitions[0].ErrorCode", None),
        ("LeaveGroup", "Members[1].ErrorCode", None)]
