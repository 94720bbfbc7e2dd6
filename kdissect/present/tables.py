"""The tidy per-API tables: which messages feed each one, and its rows from flat values.

A table's rows are made from a body's flat values (`Message.values()`), never
from a tree, so building a table decodes at the generated decoders' speed.
The DataFrame layer (`kdissect.present.analysis`) turns the columns into typed
pandas columns. Kafka's -1 sentinels ("unknown", "none") become missing values.

Column names are the schema's field names in snake case (`LeaderId` ->
`leader_id`, `PartitionIndex` -> `partition_index`); a topic's `Name` or
`TopicName` is `topic_name`. An `ErrorCode` is shown by its name, in a column
named for where it sits (`error` for the body's own, `topic_error`,
`partition_error`). Columns not on the wire are derived and say so where they
are defined (`level`, `role`, `lag`, the `*_count` columns). Every table starts
with the same context columns (`CONTEXT_DTYPES`): the message's number and
capture time, its connection (`stream`), the Kafka server side of that
connection (`broker`, "ip:port") and the capture file.
"""

from __future__ import annotations

from typing import Any

from kdissect.dissectors import Values, items, known
from kdissect.dissectors.describe_quorum import REPLICA_GROUPS, leader_log_end, replica_lag
from kdissect.pair.message import Message
from kdissect.present.table_spec import (
    CONTEXT_DTYPES,
    Columns,
    TableSpec,
    add_row,
    context_values,
    message_context,
)
from kdissect.present.table_spec import error as _error
from kdissect.present.table_spec import uuid_text as _uuid_text
from kdissect.present.traffic_tables import TRAFFIC_TABLES

# -- DescribeTopicPartitions (75): one row per partition of each response ----------------

TOPIC_PARTITIONS_DTYPES = {
    **CONTEXT_DTYPES,
    "level": "category", "topic_name": "category", "topic_id": "string", "is_internal": "boolean",
    "topic_error": "category", "partition_index": "Int64", "partition_error": "category",
    "leader_id": "Int64", "leader_epoch": "Int64", "replica_nodes": "object", "isr_nodes": "object",
    "eligible_leader_replicas": "object", "last_known_elr": "object",
    "offline_replicas": "object",
}  # fmt: skip

PARTITION_COLUMNS = tuple(TOPIC_PARTITIONS_DTYPES)[tuple(TOPIC_PARTITIONS_DTYPES).index("partition_index"):]


def topic_partition_rows(message: Message, body: Values, columns: Columns) -> None:
    """One row per partition (`level` "partition"). A topic without partitions (an unknown
    topic, an error) gets one row of `level` "topic" whose partition columns are missing,
    so `level == "partition"` picks the partitions and a topic error never passes for a
    leaderless partition."""
    context = message_context(message)
    for topic in items(body, "Topics"):
        topic_columns = {
            "topic_name": topic.get("Name"),
            "topic_id": _uuid_text(topic.get("TopicId")),
            "is_internal": topic.get("IsInternal"),
            "topic_error": _error(topic.get("ErrorCode")),
        }
        partitions = items(topic, "Partitions")
        for partition in partitions:
            add_row(columns, **context, level="partition", **topic_columns,
                    **_partition_columns(partition))
        if not partitions:
            add_row(columns, **context, level="topic", **topic_columns,
                    **dict.fromkeys(PARTITION_COLUMNS))


def _partition_columns(partition: Values) -> dict[str, Any]:
    return {
        "partition_index": partition.get("PartitionIndex"),
        "partition_error": _error(partition.get("ErrorCode")),
        "leader_id": known(partition.get("LeaderId")),
        "leader_epoch": known(partition.get("LeaderEpoch")),
        "replica_nodes": partition.get("ReplicaNodes"),
        "isr_nodes": partition.get("IsrNodes"),
        "eligible_leader_replicas": partition.get("EligibleLeaderReplicas"),
        "last_known_elr": partition.get("LastKnownElr"),
        "offline_replicas": partition.get("OfflineReplicas"),
    }


# -- DescribeProducers (61): one row per active producer per partition per response -----

PRODUCERS_DTYPES = {
    **CONTEXT_DTYPES,
    "topic_name": "category", "partition_index": "Int64", "partition_error": "category",
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
                "topic_name": topic.get("Name"),
                "partition_index": partition.get("PartitionIndex"),
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
    "api_version": "Int64", "error": "category", "topic_name": "category",
    "partition_index": "Int64", "partition_error": "category", "leader_id": "Int64",
    "leader_epoch": "Int64", "high_watermark": "Int64", "voter_count": "Int64",
    "observer_count": "Int64",
}  # fmt: skip

QUORUM_REPLICAS_DTYPES = {
    **CONTEXT_DTYPES,
    "topic_name": "category", "partition_index": "Int64", "leader_id": "Int64",
    "leader_epoch": "Int64", "high_watermark": "Int64", "role": "category", "replica_id": "Int64",
    "replica_directory_id": "string", "log_end_offset": "Int64", "lag": "Int64",
    "last_fetch_timestamp": "utc_ms", "last_caught_up_timestamp": "utc_ms",
}  # fmt: skip

QUORUM_NODES_DTYPES = {
    **CONTEXT_DTYPES,
    "node_id": "Int64", "listener_name": "category", "host": "string", "port": "Int64",
}  # fmt: skip


def _quorum_partitions(body: Values) -> list[tuple[Any, Values]]:
    return [(topic.get("TopicName"), partition)
            for topic in items(body, "Topics") for partition in items(topic, "Partitions")]


def quorum_rows(message: Message, body: Values, columns: Columns) -> None:
    """One row per partition. `voter_count` and `observer_count` are derived: how many
    entries the partition's CurrentVoters and Observers arrays hold."""
    context = message_context(message)
    code = body.get("ErrorCode")
    top_error = None if "ErrorCode" not in body else _error(code)
    for topic, partition in _quorum_partitions(body):
        add_row(
            columns, **context, api_version=message.api_version, error=top_error,
            topic_name=topic, partition_index=partition.get("PartitionIndex"),
            partition_error=_error(partition.get("ErrorCode")),
            leader_id=known(partition.get("LeaderId")), leader_epoch=partition.get("LeaderEpoch"),
            high_watermark=known(partition.get("HighWatermark")),
            voter_count=len(items(partition, "CurrentVoters")),
            observer_count=len(items(partition, "Observers")),
        )  # fmt: skip


def replica_rows(message: Message, body: Values, columns: Columns) -> None:
    """One row per voter and observer.

    Derived columns: `role` ("leader" for the voter whose id is the partition's
    LeaderId, else "voter" or "observer") and `lag`, what Kafka's
    `kafka-metadata-quorum describe --replication` shows: the leader's log end
    offset minus the replica's, missing when either is unknown. Timestamps absent
    in v0 and -1 ("unknown") are missing values, and so is the all-zero directory
    id (unknown directory).
    """
    context = message_context(message)
    for topic, partition in _quorum_partitions(body):
        leader = known(partition.get("LeaderId"))
        leader_end = leader_log_end(partition)
        where = {"topic_name": topic, "partition_index": partition.get("PartitionIndex"),
                 "leader_id": leader, "leader_epoch": partition.get("LeaderEpoch"),
                 "high_watermark": known(partition.get("HighWatermark"))}
        for group, role in REPLICA_GROUPS:
            for replica in items(partition, group):
                replica_id, log_end = replica.get("ReplicaId"), replica.get("LogEndOffset")
                add_row(
                    columns, **context, **where,
                    role="leader" if role == "voter" and replica_id == leader else role,
                    replica_id=replica_id,
                    replica_directory_id=_uuid_text(replica.get("ReplicaDirectoryId")),
                    log_end_offset=known(log_end),
                    lag=replica_lag(leader_end, log_end),
                    last_fetch_timestamp=known(replica.get("LastFetchTimestamp")),
                    last_caught_up_timestamp=known(replica.get("LastCaughtUpTimestamp")),
                )  # fmt: skip


def node_rows(message: Message, body: Values, columns: Columns) -> None:
    """v2 responses: each controller node's listeners, one row per listener."""
    context = message_context(message)
    for node in items(body, "Nodes"):
        for listener in items(node, "Listeners"):
            add_row(columns, **context, node_id=node.get("NodeId"),
                    listener_name=listener.get("Name"), host=listener.get("Host"),
                    port=listener.get("Port"))


def _answers(api_key: int) -> tuple[frozenset[int], bool]:
    return frozenset({api_key}), False


TABLES: dict[str, TableSpec] = {spec.name: spec for spec in (
    TableSpec("topic_partitions", *_answers(75), TOPIC_PARTITIONS_DTYPES, topic_partition_rows),
    TableSpec("producers", *_answers(61), PRODUCERS_DTYPES, producer_rows),
    TableSpec("quorum", *_answers(55), QUORUM_DTYPES, quorum_rows),
    TableSpec("quorum_replicas", *_answers(55), QUORUM_REPLICAS_DTYPES, replica_rows),
    TableSpec("quorum_nodes", *_answers(55), QUORUM_NODES_DTYPES, node_rows),
    *TRAFFIC_TABLES,
)}

__all__ = ["CONTEXT_DTYPES", "TABLES", "Columns", "TableSpec", "add_row", "context_values", "message_context"]
