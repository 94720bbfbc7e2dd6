"""The pandas tables of the shipped captures hold what was really on the wire.

Ground truth comes from outside kdissect: the story sidecars record exactly the
values the scripted peer encoded with kio; the Tansu sidecar holds what
kafka-python decoded from the real broker's answers; tshark reads the message
headers; kio's error-code enum names the codes. Every table is compared row by
row, in order, and every column's dtype is pinned.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from kio.schema.describe_topic_partitions.v0.response import DescribeTopicPartitionsResponse
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

import kdissect
from kdissect.present.analysis import Capture
from tests.conftest import missing

STORIES = ("producers_story", "quorum_story")
BROKER_SESSION = "tansu_topic_partitions"
CAPTURES = (BROKER_SESSION, *STORIES)
DESCRIBE_TOPIC_PARTITIONS, DESCRIBE_PRODUCERS, DESCRIBE_QUORUM = 75, 61, 55
RESPONSE_BODY_START = 9  # size prefix, correlation id, empty tagged-field block (header v1)


# -- fixtures and plain values ----------------------------------------------------------

@pytest.fixture(scope="module")
def captures(shipped_captures: Path) -> dict[str, Capture]:
    return {name: kdissect.read_pcap(shipped_captures / f"{name}.pcap") for name in CAPTURES}


def sidecar(captures_dir: Path, name: str) -> dict[str, Any]:
    return json.loads((captures_dir / f"{name}.json").read_text())


def story_exchanges(document: dict[str, Any], api_key: int) -> list[dict[str, Any]]:
    return [exchange for exchange in document["exchanges"] if exchange["api_key"] == api_key]


def plain(value: Any) -> Any:
    """A table cell as a plain Python value: pandas' missing markers become None."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def rows(frame: pd.DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    return [{name: plain(value) for name, value in record.items()}
            for record in frame[columns].to_dict("records")]


def known(value: int) -> int | None:
    return None if value == -1 else value


def error_name(code: int) -> str:
    return ErrorCode(code).name.upper()


def kafka_time(milliseconds: int | None) -> pd.Timestamp | None:
    """A Kafka millisecond timestamp from a sidecar; -1 and absent mean unknown."""
    if milliseconds is None or milliseconds == -1:
        return None
    return pd.Timestamp(milliseconds, unit="ms", tz="UTC")


def port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def response_keys(capture: Capture) -> dict[int, tuple[int, int]]:
    """(client port, correlation id) of each response, by message number: how sidecars name it."""
    messages = capture.messages
    responses = messages[messages.direction == "response"]
    return {int(number): (port(str(destination)), int(correlation))
            for number, destination, correlation
            in zip(responses.number, responses.dst, responses.correlation_id, strict=True)}


def table_keys(capture: Capture, table: pd.DataFrame) -> list[tuple[int, int]]:
    keys = response_keys(capture)
    return [keys[int(number)] for number in table.number]


def exchange_key(exchange: dict[str, Any]) -> tuple[int, int]:
    return exchange["client_port"], exchange["correlation_id"]


# -- DescribeProducers: producers --------------------------------------------------------

PRODUCER_COLUMNS = ["topic_name", "partition_index", "partition_error", "error_message", "producer_id",
                    "producer_epoch", "last_sequence", "last_timestamp", "coordinator_epoch",
                    "current_txn_start_offset"]


def expected_producer_rows(document: dict[str, Any]) -> Iterator[tuple[tuple[int, int], dict]]:
    """What the peer encoded, one row per active producer; a failed partition gets one row."""
    for exchange in story_exchanges(document, DESCRIBE_PRODUCERS):
        for topic in exchange["response"]["Topics"]:
            for partition in topic["Partitions"]:
                where = {"topic_name": topic["Name"], "partition_index": partition["PartitionIndex"],
                         "partition_error": error_name(partition["ErrorCode"]),
                         "error_message": partition["ErrorMessage"]}
                for state in partition["ActiveProducers"]:
                    yield exchange_key(exchange), {**where, **producer_columns(state)}
                if not partition["ActiveProducers"] and partition["ErrorCode"]:
                    yield exchange_key(exchange), {**where, **producer_columns({})}


def producer_columns(state: dict[str, Any]) -> dict[str, Any]:
    """-1 sentinels as missing values: no sequence yet, no coordinator, no open transaction."""
    return {
        "producer_id": state.get("ProducerId"),
        "producer_epoch": state.get("ProducerEpoch"),
        "last_sequence": None if not state else known(state["LastSequence"]),
        "last_timestamp": kafka_time(state.get("LastTimestamp")),
        "coordinator_epoch": None if not state else known(state["CoordinatorEpoch"]),
        "current_txn_start_offset": None if not state else known(state["CurrentTxnStartOffset"]),
    }


def test_producers_table_holds_every_producer_state_the_peer_encoded(
        captures: dict[str, Capture], shipped_captures: Path) -> None:
    capture = captures["producers_story"]
    table = capture.producers
    expected = list(expected_producer_rows(sidecar(shipped_captures, "producers_story")))
    assert len(table) == len(expected) > 50
    assert table_keys(capture, table) == [key for key, _ in expected]
    assert rows(table, PRODUCER_COLUMNS) == [row for _, row in expected]


def test_producers_table_keeps_the_failed_partitions_as_error_rows(
        captures: dict[str, Capture]) -> None:
    table = captures["producers_story"].producers
    failed = table[table.partition_error != "NONE"]
    assert len(failed) == 2  # orders 2 at two steps
    assert set(failed.topic_name) == {"orders"} and set(failed.partition_index) == {2}
    assert set(failed.partition_error) == {"NOT_LEADER_OR_FOLLOWER"}
    assert failed.error_message.notna().all() and failed.producer_id.isna().all()


def test_producers_table_rows_are_timed_by_their_response(captures: dict[str, Capture]) -> None:
    capture = captures["producers_story"]
    messages = capture.messages.set_index("number")
    table = capture.producers
    answered = messages.loc[table.number]
    assert (answered.direction == "response").all() and (answered.api_key == 61).all()
    assert list(table.time) == list(answered.time)
    assert list(table.stream) == list(answered.stream)
    assert list(table.broker) == list(answered.src)  # the broker answered
    assert list(table.file) == list(answered.file)
    assert table.time.is_monotonic_increasing


# -- DescribeQuorum: quorum, quorum_replicas, quorum_nodes -------------------------------

def quorum_partitions(document: dict[str, Any]) -> Iterator[tuple[dict, dict, dict]]:
    for exchange in story_exchanges(document, DESCRIBE_QUORUM):
        for topic in exchange["response"]["Topics"]:
            for partition in topic["Partitions"]:
                yield exchange, topic, partition


QUORUM_COLUMNS = ["api_version", "error", "topic_name", "partition_index", "partition_error",
                  "leader_id", "leader_epoch", "high_watermark", "voter_count", "observer_count"]


def expected_quorum_rows(document: dict[str, Any]) -> list[tuple[tuple[int, int], dict]]:
    return [(exchange_key(exchange), {
        "api_version": exchange["api_version"],
        "error": error_name(exchange["response"]["ErrorCode"]),
        "topic_name": topic["TopicName"], "partition_index": partition["PartitionIndex"],
        "partition_error": error_name(partition["ErrorCode"]),
        "leader_id": known(partition["LeaderId"]), "leader_epoch": partition["LeaderEpoch"],
        "high_watermark": known(partition["HighWatermark"]),
        "voter_count": len(partition["CurrentVoters"]),
        "observer_count": len(partition["Observers"]),
    }) for exchange, topic, partition in quorum_partitions(document)]


def test_quorum_table_holds_each_partition_the_peer_encoded(
        captures: dict[str, Capture], shipped_captures: Path) -> None:
    capture = captures["quorum_story"]
    expected = expected_quorum_rows(sidecar(shipped_captures, "quorum_story"))
    assert len(capture.quorum) == len(expected) == 16
    assert table_keys(capture, capture.quorum) == [key for key, _ in expected]
    assert rows(capture.quorum, QUORUM_COLUMNS) == [row for _, row in expected]


REPLICA_COLUMNS = ["topic_name", "partition_index", "leader_id", "leader_epoch", "high_watermark",
                   "role", "replica_id", "replica_directory_id", "log_end_offset", "lag",
                   "last_fetch_timestamp", "last_caught_up_timestamp"]


def expected_replica_rows(document: dict[str, Any]) -> Iterator[tuple[tuple[int, int], dict]]:
    """Voters then observers; lag is the leader's log end offset minus the replica's, as
    kafka-metadata-quorum describe --replication reports it.

    v0 answers carry no timestamps and v0/v1 no directory ids: those cells are missing.
    """
    for exchange, topic, partition in quorum_partitions(document):
        leader, high_watermark = known(partition["LeaderId"]), known(partition["HighWatermark"])
        leader_end = next((known(voter["LogEndOffset"]) for voter in partition["CurrentVoters"]
                           if voter["ReplicaId"] == leader), None)
        where = {"topic_name": topic["TopicName"], "partition_index": partition["PartitionIndex"],
                 "leader_id": leader, "leader_epoch": partition["LeaderEpoch"],
                 "high_watermark": high_watermark}
        for group, role in (("CurrentVoters", "voter"), ("Observers", "observer")):
            for replica in partition[group]:
                log_end = known(replica["LogEndOffset"])
                is_leader = role == "voter" and replica["ReplicaId"] == leader
                yield exchange_key(exchange), {
                    **where, "role": "leader" if is_leader else role,
                    "replica_id": replica["ReplicaId"],
                    "replica_directory_id": replica.get("ReplicaDirectoryId"),
                    "log_end_offset": log_end, "lag": difference(leader_end, log_end),
                    "last_fetch_timestamp": kafka_time(replica.get("LastFetchTimestamp")),
                    "last_caught_up_timestamp": kafka_time(replica.get("LastCaughtUpTimestamp")),
                }


def difference(leader_end: int | None, log_end: int | None) -> int | None:
    return None if leader_end is None or log_end is None else leader_end - log_end


def test_quorum_replicas_table_holds_every_voter_and_observer(
        captures: dict[str, Capture], shipped_captures: Path) -> None:
    capture = captures["quorum_story"]
    table = capture.quorum_replicas
    expected = list(expected_replica_rows(sidecar(shipped_captures, "quorum_story")))
    assert len(table) == len(expected) > 70
    assert table_keys(capture, table) == [key for key, _ in expected]
    assert rows(table, REPLICA_COLUMNS) == [row for _, row in expected]


def test_quorum_replicas_table_shows_the_lagging_voter_and_the_leader_change(
        captures: dict[str, Capture]) -> None:
    table = captures["quorum_story"].quorum_replicas
    behind = table[(table.role != "observer") & (table.lag > 20)]
    assert set(behind.replica_id) == {3}
    assert behind.last_caught_up_timestamp.nunique() == 1  # stays put while it is behind
    leaders = table[table.role == "leader"].drop_duplicates(["replica_id", "leader_epoch"])
    assert list(zip(leaders.replica_id, leaders.leader_epoch, strict=True)) == [(1, 7), (2, 8)]


def test_quorum_nodes_table_holds_the_v2_listeners(
        captures: dict[str, Capture], shipped_captures: Path) -> None:
    capture = captures["quorum_story"]
    expected = [(exchange_key(exchange), {"node_id": node["NodeId"],
                                          "listener_name": listener["Name"],
                                          "host": listener["Host"], "port": listener["Port"]})
                for exchange in story_exchanges(sidecar(shipped_captures, "quorum_story"),
                                                DESCRIBE_QUORUM)
                for node in exchange["response"].get("Nodes", [])
                for listener in node["Listeners"]]
    table = capture.quorum_nodes
    assert len(table) == len(expected) == 12 * 3
    assert table_keys(capture, table) == [key for key, _ in expected]
    assert rows(table, ["node_id", "listener_name", "host", "port"]) == [row for _, row in expected]


# -- DescribeTopicPartitions: topic_partitions (the real broker) ---------------------------

TOPIC_PARTITION_COLUMNS = ["level", "topic_name", "topic_id", "is_internal", "topic_error",
                           "partition_index", "partition_error", "leader_id", "leader_epoch",
                           "replica_nodes", "isr_nodes", "eligible_leader_replicas",
                           "last_known_elr", "offline_replicas"]


def expected_topic_partition_rows(document: dict[str, Any]) -> Iterator[tuple[int, dict]]:
    """kafka-python's view of each answer, in the order of the calls.

    Two places where kafka-python differs from the wire, compared knowingly:
    - it decodes an empty compact nullable array (length byte 0x01, n+1 = 1) as
      None, the same as a null one (0x00); Tansu sends empty arrays for the ELR
      fields, which kdissect keeps as [] (kio agrees: see the test below), so
      kafka-python's None stands for [] here;
    - it turns the all-zero topic id of an unknown topic into None, which is
      what the table shows too (Kafka's "no id").
    """
    for call, entry in enumerate(document["describe_topic_partitions"]):
        for topic in entry["result"]["topics"]:
            where = {"topic_name": topic["name"], "topic_id": topic["topic_id"],
                     "is_internal": topic["is_internal"],
                     "topic_error": error_name(topic["error_code"])}
            for partition in topic["partitions"]:
                yield call, {"level": "partition", **where, **partition_columns(partition)}
            if not topic["partitions"]:
                yield call, {"level": "topic", **where, **dict.fromkeys(TOPIC_PARTITION_COLUMNS[5:])}


def partition_columns(partition: dict[str, Any]) -> dict[str, Any]:
    return {
        "partition_index": partition["partition_index"],
        "partition_error": error_name(partition["error_code"]),
        "leader_id": known(partition["leader_id"]),
        "leader_epoch": known(partition["leader_epoch"]),
        "replica_nodes": partition["replica_nodes"],
        "isr_nodes": partition["isr_nodes"],
        "eligible_leader_replicas": partition["eligible_leader_replicas"] or [],
        "last_known_elr": partition["last_known_elr"] or [],
        "offline_replicas": partition["offline_replicas"],
    }


def describe_topic_partitions_responses(capture: Capture) -> list[int]:
    messages = capture.messages
    chosen = messages[(messages.api_key == 75) & (messages.direction == "response")]
    return [int(number) for number in chosen.number]


def test_topic_partitions_table_matches_what_kafka_python_read_from_tansu(
        captures: dict[str, Capture], shipped_captures: Path) -> None:
    capture = captures[BROKER_SESSION]
    table = capture.topic_partitions
    expected = list(expected_topic_partition_rows(sidecar(shipped_captures, BROKER_SESSION)))
    responses = describe_topic_partitions_responses(capture)
    assert len(responses) == 5
    assert len(table) == len(expected) == (6 + 3 + 2) + 3 * (6 + 3) + 1
    assert list(table.number) == [responses[call] for call, _ in expected]
    assert rows(table, TOPIC_PARTITION_COLUMNS) == [row for _, row in expected]


def test_topic_partitions_empty_arrays_are_empty_on_the_wire_not_null(
        captures: dict[str, Capture]) -> None:
    """kio, reading the same response bytes, settles the empty-versus-null question."""
    capture = captures[BROKER_SESSION]
    read = entity_reader(DescribeTopicPartitionsResponse)
    table = capture.topic_partitions
    for number in describe_topic_partitions_responses(capture):
        data = capture.message(number).frame.data
        response, size = read(memoryview(data), RESPONSE_BODY_START)
        assert RESPONSE_BODY_START + size == len(data)
        from_kio = [(p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas)
                    for topic in response.topics for p in topic.partitions]
        mine = table[(table.number == number) & (table.level == "partition")]
        assert from_kio == [tuple(map(tuple, arrays)) for arrays in zip(
            mine.eligible_leader_replicas, mine.last_known_elr, mine.offline_replicas,
            strict=True)]
        assert all(elr == () for elr, _, _ in from_kio)  # empty, not None


def test_unknown_topic_row_has_its_error_and_no_partition(captures: dict[str, Capture]) -> None:
    table = captures[BROKER_SESSION].topic_partitions
    unknown = table[table.topic_name == "no-such-topic"]
    assert len(unknown) == 1
    row = unknown.iloc[0]
    assert row.topic_error == "UNKNOWN_TOPIC_OR_PARTITION"
    assert row.level == "topic"
    assert row.topic_id is pd.NA and row.partition_index is pd.NA and row.replica_nodes is None


def test_a_topic_error_is_not_a_leaderless_partition(captures: dict[str, Capture]) -> None:
    """The unknown topic's row is a topic row: its missing leader is no partition's."""
    table = captures[BROKER_SESSION].topic_partitions
    assert set(table.level) == {"topic", "partition"}
    topics = table[table.level == "topic"]
    assert list(topics.topic_error) == ["UNKNOWN_TOPIC_OR_PARTITION"]
    assert topics[list(TOPIC_PARTITION_COLUMNS[5:])].isna().all().all()
    partitions = table[table.level == "partition"]
    assert partitions.partition_index.notna().all() and partitions.leader_id.notna().all()
    assert len(table[table.leader_id.isna()]) == len(topics) == 1


def test_every_table_of_body_values_names_the_broker_of_its_connection(
        captures: dict[str, Capture]) -> None:
    """`broker` is the server side of the row's connection, as the exchanges table has it."""
    for capture in captures.values():
        exchanges = capture.exchanges
        servers = dict(zip(exchanges.stream, exchanges.server.astype(str), strict=True))
        with_rows = 0
        for name, table in capture.tables().items():
            if "broker" not in table.columns:
                continue
            assert list(table.broker.astype(str)) == [servers[s] for s in table.stream], name
            with_rows += bool(len(table))
        assert with_rows


# -- dtypes --------------------------------------------------------------------------------

CONTEXT = {"number": "int64", "time": "utc", "stream": "int64", "broker": "category",
           "file": "category"}
MESSAGE = {**CONTEXT, "api_name": "category", "direction": "category", "api_version": "Int64"}
DTYPES: dict[str, dict[str, str]] = {
    "messages": {
        "number": "int64", "frame": "int64", "time": "utc", "stream": "int64",
        "src": "category", "dst": "category", "direction": "category", "api_key": "Int64",
        "api_name": "category", "api_version": "Int64", "correlation_id": "Int64",
        "client_id": "category", "length": "Int64", "pair": "Int64", "latency_ms": "Float64",
        "tls": "bool", "notes": "string", "file": "category",
    },
    "exchanges": {
        "request": "Int64", "response": "Int64", "stream": "int64", "client": "category",
        "server": "category", "client_id": "category", "api_key": "Int64",
        "api_name": "category", "api_version": "Int64", "correlation_id": "Int64",
        "request_time": "utc", "response_time": "utc", "latency_ms": "Float64",
        "request_bytes": "Int64", "response_bytes": "Int64", "error": "category", "file": "category",
    },
    "fields": {
        "number": "int64", "path": "category", "name": "category", "type": "category",
        "value": "category", "value_int": "Int64", "display": "category", "offset": "int32",
        "size": "int32", "depth": "int16", "generated": "bool", "file": "category",
    },
    "records": {
        **CONTEXT, "api_name": "category", "direction": "category", "topic_name": "category",
        "topic_id": "string", "partition_index": "Int64", "offset": "Int64",
        "log_offset": "Int64", "timestamp": "utc", "timestamp_type": "category",
        "key": "object", "value": "object", "headers": "object", "producer_id": "Int64",
        "producer_epoch": "Int64", "sequence": "Int64", "transactional": "boolean",
        "control_type": "category", "compression": "category", "magic": "Int64",
        "batch_crc_ok": "boolean", "key_size": "Int64", "value_size": "Int64",
    },
    "batches": {
        **CONTEXT, "api_name": "category", "direction": "category", "topic_name": "category",
        "topic_id": "string", "partition_index": "Int64", "batch": "int64", "position": "int64",
        "size": "int64", "kind": "category", "magic": "Int64", "base_offset": "Int64",
        "last_offset": "Int64", "partition_leader_epoch": "Int64", "crc_ok": "boolean",
        "compression": "category", "timestamp_type": "category", "transactional": "boolean",
        "control": "boolean", "base_timestamp": "utc", "max_timestamp": "utc",
        "producer_id": "Int64", "producer_epoch": "Int64", "base_sequence": "Int64",
        "record_count": "Int64", "records": "Int64", "compressed_bytes": "Int64",
        "decompressed_bytes": "Int64", "notes": "string",
    },
    "topic_partitions": {
        **CONTEXT, "level": "category", "topic_name": "category", "topic_id": "string",
        "is_internal": "boolean", "topic_error": "category", "partition_index": "Int64",
        "partition_error": "category", "leader_id": "Int64", "leader_epoch": "Int64",
        "replica_nodes": "object", "isr_nodes": "object", "eligible_leader_replicas": "object",
        "last_known_elr": "object", "offline_replicas": "object",
    },
    "producers": {
        **CONTEXT, "topic_name": "category", "partition_index": "Int64",
        "partition_error": "category", "error_message": "string", "producer_id": "Int64",
        "producer_epoch": "Int64", "last_sequence": "Int64", "last_timestamp": "utc",
        "coordinator_epoch": "Int64", "current_txn_start_offset": "Int64",
    },
    "quorum": {
        **CONTEXT, "api_version": "Int64", "error": "category", "topic_name": "category",
        "partition_index": "Int64", "partition_error": "category", "leader_id": "Int64",
        "leader_epoch": "Int64", "high_watermark": "Int64", "voter_count": "Int64",
        "observer_count": "Int64",
    },
    "quorum_replicas": {
        **CONTEXT, "topic_name": "category", "partition_index": "Int64", "leader_id": "Int64",
        "leader_epoch": "Int64", "high_watermark": "Int64", "role": "category",
        "replica_id": "Int64", "replica_directory_id": "string", "log_end_offset": "Int64",
        "lag": "Int64", "last_fetch_timestamp": "utc", "last_caught_up_timestamp": "utc",
    },
    "quorum_nodes": {
        **CONTEXT, "node_id": "Int64", "listener_name": "category", "host": "string",
        "port": "Int64",
    },
    "produce": {
        **MESSAGE, "topic_name": "category", "topic_id": "string", "partition_index": "Int64",
        "record_count": "Int64", "records_bytes": "Int64", "partition_error": "category",
        "error_message": "string", "base_offset": "Int64", "log_append_time": "utc",
        "log_start_offset": "Int64", "throttle_time_ms": "Int64", "acks": "Int64",
        "timeout_ms": "Int64", "transactional_id": "string",
    },
    "fetch": {
        **MESSAGE, "topic_name": "category", "topic_id": "string", "partition_index": "Int64",
        "record_count": "Int64", "records_bytes": "Int64", "error": "category",
        "partition_error": "category", "high_watermark": "Int64",
        "last_stable_offset": "Int64", "log_start_offset": "Int64",
        "aborted_transactions": "Int64", "preferred_read_replica": "Int64",
        "throttle_time_ms": "Int64", "replica_id": "Int64", "max_wait_ms": "Int64",
        "min_bytes": "Int64", "max_bytes": "Int64", "isolation_level": "Int64",
        "session_id": "Int64", "session_epoch": "Int64", "fetch_offset": "Int64",
        "current_leader_epoch": "Int64", "last_fetched_epoch": "Int64",
        "partition_max_bytes": "Int64",
    },
    "groups": {
        **MESSAGE, "group_id": "category", "member_id": "category",
        "group_instance_id": "category", "generation_id": "Int64", "member_epoch": "Int64",
        "protocol_type": "category", "protocol_name": "category", "leader": "category",
        "member_count": "Int64", "key_type": "category", "coordinator_key": "category",
        "node_id": "Int64", "host": "string", "port": "Int64", "error": "category",
        "error_message": "string", "throttle_time_ms": "Int64",
    },
    "errors": {
        **MESSAGE, "path": "string", "field": "category", "error_code": "Int64",
        "error": "category", "error_message": "string", "topic_name": "category",
        "topic_id": "string", "partition_index": "Int64",
    },
}  # fmt: skip


def dtype_kind(dtype: Any) -> str:
    """The kind of a column's dtype, in the words of the DTYPES table above."""
    if isinstance(dtype, pd.DatetimeTZDtype):
        return "utc" if str(dtype.tz) == "UTC" else f"datetime in {dtype.tz}"
    if isinstance(dtype, pd.CategoricalDtype):
        return "category"
    if isinstance(dtype, pd.StringDtype):
        return "string"
    return str(dtype)


@pytest.mark.parametrize("name", CAPTURES)
def test_every_table_has_its_columns_with_real_dtypes(captures: dict[str, Capture],
                                                      name: str) -> None:
    tables = captures[name].tables()
    assert list(tables) == list(DTYPES)
    for table_name, table in tables.items():
        kinds = {column: dtype_kind(dtype) for column, dtype in table.dtypes.items()}
        assert kinds == DTYPES[table_name], table_name


def test_object_columns_hold_lists_of_ints(captures: dict[str, Capture]) -> None:
    table = captures[BROKER_SESSION].topic_partitions
    listed = table[table.level == "partition"]
    for column in ("replica_nodes", "isr_nodes", "eligible_leader_replicas", "offline_replicas"):
        assert all(isinstance(value, list) and all(type(item) is int for item in value)
                   for value in listed[column]), column


def test_categorical_names_keep_their_values(captures: dict[str, Capture]) -> None:
    replicas = captures["quorum_story"].quorum_replicas
    assert set(replicas.role.cat.categories) == {"leader", "voter", "observer"}
    messages = captures["producers_story"].messages
    assert set(messages.direction.cat.categories) == {"request", "response"}
    assert set(messages.api_name.dropna()) == {"ApiVersions", "Metadata", "DescribeProducers"}


# -- messages and exchanges ------------------------------------------------------------------

def tshark_messages(pcap: Path) -> list[list[str]]:
    """(frame, epoch time, source port, api key, api version, correlation id) per Kafka PDU."""
    executable = shutil.which("tshark")
    if executable is None:
        missing("tshark is not installed (apt-get install tshark)")
    run = subprocess.run(
        [executable, "-n", "-r", str(pcap), "-d", "tcp.port==9092,kafka", "-Y", "kafka",
         "-T", "fields", "-e", "frame.number", "-e", "frame.time_epoch", "-e", "tcp.srcport",
         "-e", "kafka.request_key", "-e", "kafka.api_version", "-e", "kafka.correlation_id"],
        capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    return [line.split("\t") for line in run.stdout.splitlines() if line]


@pytest.mark.parametrize("name", CAPTURES)
def test_messages_table_agrees_with_tshark(captures: dict[str, Capture], shipped_captures: Path,
                                           name: str) -> None:
    """Same frames, times, ports and headers (tshark gives a response no api key)."""
    expected = []
    for frame, epoch, source, key, version, correlation in tshark_messages(
            shipped_captures / f"{name}.pcap"):
        seconds, _, fraction = epoch.partition(".")
        micros = int(seconds) * 1_000_000 + round(int(fraction.ljust(9, "0")) / 1000)
        is_request = source != "9092"
        expected.append((int(frame), micros, int(source), int(key) if is_request else None,
                         int(version) if is_request else None, int(correlation)))
    messages = captures[name].messages
    is_request = messages.direction == "request"
    found = [(int(frame), time.value // 1000, port(str(source)),
              int(key) if asked else None, int(version) if asked else None, int(correlation))
             for frame, time, source, key, version, correlation, asked in zip(
                 messages.frame, messages.time.astype("datetime64[us, UTC]"), messages.src,
                 messages.api_key, messages.api_version, messages.correlation_id, is_request,
                 strict=True)]
    assert found == expected
    assert list(messages.number) == list(range(1, len(messages) + 1))


@pytest.mark.parametrize("name", CAPTURES)
def test_every_request_is_answered_and_pairs_point_both_ways(captures: dict[str, Capture],
                                                             name: str) -> None:
    messages = captures[name].messages.set_index("number")
    requests = messages[messages.direction == "request"]
    assert requests.pair.notna().all()
    responses = messages.loc[requests.pair]
    assert (responses.direction == "response").all()
    assert list(responses.pair) == list(requests.index)
    for column in ("stream", "correlation_id", "api_key", "api_version"):
        assert list(responses[column]) == list(requests[column]), column
    assert (responses.time.to_numpy() >= requests.time.to_numpy()).all()
    assert len(messages) == 2 * len(requests)


@pytest.mark.parametrize("name", CAPTURES)
def test_exchanges_pair_the_messages_with_latency_response_minus_request(
        captures: dict[str, Capture], name: str) -> None:
    capture = captures[name]
    messages = capture.messages.set_index("number")
    exchanges = capture.exchanges
    requests = messages[messages.direction == "request"]
    assert list(exchanges.request) == list(requests.index)
    assert list(exchanges.response) == list(requests.pair)
    assert list(exchanges.request_time) == list(messages.loc[exchanges.request].time)
    assert list(exchanges.response_time) == list(messages.loc[exchanges.response].time)
    elapsed = (exchanges.response_time - exchanges.request_time).dt.total_seconds() * 1e3
    # times are kept to the nanosecond, latency from the capture's own timestamps
    assert (exchanges.latency_ms - elapsed).abs().max() < 1e-3
    assert list(messages.loc[exchanges.response].latency_ms) == list(exchanges.latency_ms)
    assert requests.latency_ms.isna().all()
    lengths = messages.loc[exchanges.request].length
    assert list(exchanges.request_bytes) == list(lengths + 4)  # the size prefix included


@pytest.mark.parametrize("name", STORIES)
def test_exchanges_are_the_ones_the_peer_answered(captures: dict[str, Capture],
                                                  shipped_captures: Path, name: str) -> None:
    document = sidecar(shipped_captures, name)
    exchanges = captures[name].exchanges
    found = [(port(str(client)), key, version, correlation, client_id)
             for client, key, version, correlation, client_id in zip(
                 exchanges.client, exchanges.api_key, exchanges.api_version,
                 exchanges.correlation_id, exchanges.client_id, strict=True)]
    assert found == [(e["client_port"], e["api_key"], e["api_version"], e["correlation_id"],
                      e["client_id"]) for e in document["exchanges"]]


@pytest.mark.parametrize("name", STORIES)
def test_wire_latency_contains_the_peers_own_time(captures: dict[str, Capture],
                                                  shipped_captures: Path, name: str) -> None:
    """Same clock: the request is captured before the peer reads it, the answer after it is made."""
    document = sidecar(shipped_captures, name)
    exchanges = captures[name].exchanges
    asked = exchanges.request_time.astype("int64") / 1e9  # nanosecond resolution
    answered = exchanges.response_time.astype("int64") / 1e9
    for exchange, request_time, response_time in zip(document["exchanges"], asked, answered,
                                                     strict=True):
        assert 0 <= exchange["request_time"] - request_time < 0.05
        assert 0 <= response_time - exchange["response_time"] < 0.05


@pytest.mark.parametrize("name", STORIES)
def test_exchanges_name_the_top_level_error(captures: dict[str, Capture],
                                            shipped_captures: Path, name: str) -> None:
    document = sidecar(shipped_captures, name)
    exchanges = captures[name].exchanges
    # Every body is decoded: DescribeQuorum's error as the peer encoded it; ApiVersions
    # answers carry a top-level ErrorCode too (0 here); DescribeProducers and Metadata have none.
    expected = [error_name(e["response"]["ErrorCode"]) if e["api_key"] == DESCRIBE_QUORUM
                else "NONE" if e["api_key"] == 18 else None for e in document["exchanges"]]
    assert [plain(error) for error in exchanges.error] == expected


def test_read_pcap_keeps_only_the_apis_asked_for(shipped_captures: Path) -> None:
    capture = kdissect.read_pcap(shipped_captures / "quorum_story.pcap", apis=[DESCRIBE_QUORUM])
    assert set(capture.messages.api_key) == {DESCRIBE_QUORUM} and len(capture) == 32
    assert capture.exchanges.response.notna().all()
    assert len(capture.quorum) == 16
