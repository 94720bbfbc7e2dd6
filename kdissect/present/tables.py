"""The tidy per-API tables: which messages feed each one, and its rows from flat values.

A table's rows are made from a body's flat values (`Message.values()`), never
from a tree, so building a table decodes at the generated decoders' speed.
The DataFrame layer (`kdissect.present.analysis`) turns the columns into typed
pandas columns. Kafka's -1 sentinels ("unknown", "none") become missing values.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kdissect.dissectors import Values, items, known
from kdissect.dissectors.describe_quorum import REPLICA_GROUPS, leader_log_end, replica_lag
from kdissect.error_codes import error_name
from kdissect.pair.message import Message

Columns = dict[str, list[Any]]
RowMaker = Callable[[Message, Values, Columns], None]


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A tidy table an API contributes: which messages feed it and how rows are made.

    `rows(message, values, columns)` appends one value per column for each row;
    `dtypes` are pandas dtypes, or "utc" for epoch seconds, "utc_ms" for Kafka
    millisecond timestamps, "object" for lists.
    """

    name: str
    api_key: int
    request: bool  # rows come from requests (True) or from paired responses
    dtypes: Mapping[str, str]
    rows: RowMaker


CONTEXT_DTYPES = {"time": "utc", "message": "int64", "stream": "int64", "file": "category"}


def message_context(message: Message) -> dict[str, Any]:
    """The columns every per-API table starts with: when, which message, which connection."""
    return {"time": message.time_ns, "message": message.number,
            "stream": message.frame.connection.index, "file": message.file}


def add_row(columns: Columns, **row: Any) -> None:
    for name, value in row.items():
        columns[name].append(value)


def _error(code: Any) -> str:
    return error_name(code or 0)


def _uuid_text(value: Any) -> str | None:
    """A UUID as text; Kafka's all-zero "no id" is missing."""
    return None if not isinstance(value, uuid.UUID) or value.int == 0 else str(value)


# -- DescribeTopicPartitions (75): one row per partition of each response ----------------

TOPIC_PARTITIONS_DTYPES = {
    **CONTEXT_DTYPES,
    "topic": "category", "topic_id": "string", "is_internal": "boolean",
    "topic_error": "category", "partition": "Int64", "partition_error": "category",
    "leader": "Int64", "leader_epoch": "Int64", "replicas": "object", "isr": "object",
    "eligible_leader_replicas": "object", "last_known_elr": "object",
    "offline_replicas": "object",
}  # fmt: skip


def topic_partition_rows(message: Message, body: Values, columns: Columns) -> None:
    """A topic whose error left it without partitions still gets one row, for its error."""
    context = message_context(message)
    for topic in items(body, "Topics"):
        topic_columns = {
            "topic": topic.get("Name"),
            "topic_id": _uuid_text(topic.get("TopicId")),
            "is_internal": topic.get("IsInternal"),
            "topic_error": _error(topic.get("ErrorCode")),
        }
        partitions = items(topic, "Partitions")
        for partition in partitions:
            add_row(columns, **context, **topic_columns, **_partition_columns(partition))
        if not partitions:
            add_row(columns, **context, **topic_columns, **_partition_columns({}))


def _partition_columns(partition: Values) -> dict[str, Any]:
    return {
        "partition": partition.get("PartitionIndex"),
        "partition_error": None if not partition else _error(partition.get("ErrorCode")),
        "leader": known(partition.get("LeaderId")),
        "leader_epoch": known(partition.get("LeaderEpoch")),
        "replicas": partition.get("ReplicaNodes"),
        "isr": partition.get("IsrNodes"),
        "eligible_leader_replicas": partition.get("EligibleLeaderReplicas"),
        "last_known_elr": partition.get("LastKnownElr"),
        "offline_replicas": partition.get("OfflineReplicas"),
    }


# -- DescribeProducers (61): one row per active producer per partition per response -----

PRODUCERS_DTYPES = {
    **CONTEXT_DTYPES,
    "topic": "category", "partition": "Int64", "partition_error": "category",
    "error_message": "string", "producer_id": "Int64", "producer_epoch": "Int64",
    "last_sequence": "Int64", "last_timestamp": "utc_ms", "coordinator_epoch": "Int64",
    "current_txn_start_offset": "Int64",
}  # fmt: skip


def producer_rows(message: Message, body: Values, columns: Columns) -> None:
    """-1 sentinels become missing values: no sequence yet, no coordinator, no open transaction.

    A partition answering with an error (and so without producers) gets one
    row carrying the error, so failures stay visible next to the data.
    """
    context = message_context(message)
    for topic in items(body, "Topics"):
        for partition in items(topic, "Partitions"):
            where = {
                "topic": topic.get("Name"),
                "partition": partition.get("PartitionIndex"),
                "partition_error": _error(partition.get("ErrorCode")),
                "error_message": partition.get("ErrorMessage"),
            }
            producers = items(partition, "ActiveProducers")
            for producer in producers:
                add_row(columns, **context, **where, **_producer_columns(producer))
            if not producers and partition.get("ErrorCode"):
                add_row(columns, **context, **where, **_producer_columns({}))


def _producer_columns(producer: Values) -> dict[str, Any]:
    return {
        "producer_id": producer.get("ProducerId"),
        "producer_epoch": producer.get("ProducerEpoch"),
        "last_sequence": known(producer.get("LastSequence")),
        "last_timestamp": known(producer.get("LastTimestamp")),
        "coordinator_epoch": known(producer.get("CoordinatorEpoch")),
        "current_txn_start_offset": known(producer.get("CurrentTxnStartOffset")),
    }


# -- DescribeQuorum (55): partitions, replicas (voters and observers), nodes --------------

QUORUM_DTYPES = {
    **CONTEXT_DTYPES,
    "version": "Int64", "error": "category", "topic": "category", "partition": "Int64",
    "partition_error": "category", "leader": "Int64", "leader_epoch": "Int64",
    "high_watermark": "Int64", "voters": "Int64", "observers": "Int64",
}  # fmt: skip

QUORUM_REPLICAS_DTYPES = {
    **CONTEXT_DTYPES,
    "topic": "category", "partition": "Int64", "leader": "Int64", "leader_epoch": "Int64",
    "high_watermark": "Int64", "role": "category", "replica_id": "Int64",
    "directory_id": "string", "log_end_offset": "Int64", "lag": "Int64",
    "last_fetch": "utc_ms", "last_caught_up": "utc_ms",
}  # fmt: skip

QUORUM_NODES_DTYPES = {
    **CONTEXT_DTYPES,
    "node_id": "Int64", "listener": "category", "host": "string", "port": "Int64",
}  # fmt: skip


def _quorum_partitions(body: Values) -> list[tuple[Any, Values]]:
    return [(topic.get("TopicName"), partition)
            for topic in items(body, "Topics") for partition in items(topic, "Partitions")]


def quorum_rows(message: Message, body: Values, columns: Columns) -> None:
    context = message_context(message)
    code = body.get("ErrorCode")
    top_error = None if "ErrorCode" not in body else _error(code)
    for topic, partition in _quorum_partitions(body):
        add_row(
            columns, **context, version=message.api_version, error=top_error, topic=topic,
            partition=partition.get("PartitionIndex"),
            partition_error=_error(partition.get("ErrorCode")),
            leader=known(partition.get("LeaderId")), leader_epoch=partition.get("LeaderEpoch"),
            high_watermark=known(partition.get("HighWatermark")),
            voters=len(items(partition, "CurrentVoters")),
            observers=len(items(partition, "Observers")),
        )  # fmt: skip


def replica_rows(message: Message, body: Values, columns: Columns) -> None:
    """One row per voter and observer; the leader's row says `leader`.

    Timestamps absent in v0 and -1 ("unknown") are missing values, and so is
    the all-zero directory id (unknown directory). `lag` is what Kafka's
    `kafka-metadata-quorum describe --replication` shows: the leader's log end
    offset minus the replica's, missing when either is unknown.
    """
    context = message_context(message)
    for topic, partition in _quorum_partitions(body):
        leader, high_watermark = known(partition.get("LeaderId")), known(partition.get("HighWatermark"))
        leader_end = leader_log_end(partition)
        where = {"topic": topic, "partition": partition.get("PartitionIndex"), "leader": leader,
                 "leader_epoch": partition.get("LeaderEpoch"), "high_watermark": high_watermark}
        for group, role in REPLICA_GROUPS:
            for replica in items(partition, group):
                replica_id, log_end = replica.get("ReplicaId"), replica.get("LogEndOffset")
                add_row(
                    columns, **context, **where,
                    role="leader" if role == "voter" and replica_id == leader else role,
                    replica_id=replica_id,
                    directory_id=_uuid_text(replica.get("ReplicaDirectoryId")),
                    log_end_offset=known(log_end),
                    lag=replica_lag(leader_end, log_end),
                    last_fetch=known(replica.get("LastFetchTimestamp")),
                    last_caught_up=known(replica.get("LastCaughtUpTimestamp")),
                )  # fmt: skip


def node_rows(message: Message, body: Values, columns: Columns) -> None:
    """v2 responses: each controller node's listeners, one row per listener."""
    context = message_context(message)
    for node in items(body, "Nodes"):
        for listener in items(node, "Listeners"):
            add_row(columns, **context, node_id=node.get("NodeId"), listener=listener.get("Name"),
                    host=listener.get("Host"), port=listener.get("Port"))


TABLES: dict[str, TableSpec] = {spec.name: spec for spec in (
    TableSpec("topic_partitions", 75, False, TOPIC_PARTITIONS_DTYPES, topic_partition_rows),
    TableSpec("producers", 61, False, PRODUCERS_DTYPES, producer_rows),
    TableSpec("quorum", 55, False, QUORUM_DTYPES, quorum_rows),
    TableSpec("quorum_replicas", 55, False, QUORUM_REPLICAS_DTYPES, replica_rows),
    TableSpec("quorum_nodes", 55, False, QUORUM_NODES_DTYPES, node_rows),
)}

__all__ = ["CONTEXT_DTYPES", "TABLES", "Columns", "TableSpec", "add_row", "message_context"]
