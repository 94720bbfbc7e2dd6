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
    add_rows,
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
    context = context_values(message)
    rows = []
    for topic in items(body, "Topics"):
        get = topic.get
        topic_columns = (get("Name"), _uuid_text(get("TopicId")), get("IsInternal"), _error(get("ErrorCode")))
        partitions = items(topic, "Partitions")
        for partition in partitions:
            rows.append((*context, "partition", *topic_columns, *_partition_columns(partition)))
        if not partitions:
            rows.append((*context, "topic", *topic_columns, *_NO_PARTITION))
    add_rows(columns, rows)


_NO_PARTITION = (None,) * len(PARTITION_COLUMNS)


def _partition_columns(partition: Values) -> tuple[Any, ...]:
    """`PARTITION_COLUMNS`' values: -1 leader and epoch are missing."""
    get = partition.get
    leader, epoch = get("LeaderId"), get("LeaderEpoch")
    return (get("PartitionIndex"), _error(get("ErrorCode")), None if leader == -1 else leader,
            None if epoch == -1 else epoch, get("ReplicaNodes"), get("IsrNodes"),
            get("EligibleLeaderReplicas"), get("LastKnownElr"), get("OfflineReplicas"))


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
    context = context_values(message)
    rows = []
    for topic in items(body, "Topics"):
        name = topic.get("Name")
        for partition in items(topic, "Partitions"):
            get = partition.get
            where = (*context, name, get("PartitionIndex"), _error(get("ErrorCode")), get("ErrorMessage"))
            producers = items(partition, "ActiveProducers")
            for producer in producers:
                rows.append((*where, *_producer_columns(producer)))
            if not producers and get("ErrorCode"):
                rows.append((*where, *_producer_columns({})))
    add_rows(columns, rows)


def _producer_columns(producer: Values) -> tuple[Any, ...]:
    """producer_id to current_txn_start_offset; -1 sequence, timestamp, epoch and offset are missing."""
    get = producer.get
    sequence, timestamp = get("LastSequence"), get("LastTimestamp")
    epoch, offset = get("CoordinatorEpoch"), get("CurrentTxnStartOffset")
    return (get("ProducerId"), get("ProducerEpoch"), None if sequence == -1 else sequence,
            None if timestamp == -1 else timestamp, None if epoch == -1 else epoch,
            None if offset == -1 else offset)


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
    context = (*context_values(message), message.api_version,
               None if "ErrorCode" not in body else _error(body.get("ErrorCode")))
    rows = []
    for topic, partition in _quorum_partitions(body):
        get = partition.get
        rows.append((
            *context, topic, get("PartitionIndex"), _error(get("ErrorCode")),
            known(get("LeaderId")), get("LeaderEpoch"), known(get("HighWatermark")),
            len(items(partition, "CurrentVoters")), len(items(partition, "Observers")),
        ))  # fmt: skip
    add_rows(columns, rows)


def replica_rows(message: Message, body: Values, columns: Columns) -> None:
    """One row per voter and observer.

    Derived columns: `role` ("leader" for the voter whose id is the partition's
    LeaderId, else "voter" or "observer") and `lag`, what Kafka's
    `kafka-metadata-quorum describe --replication` shows: the leader's log end
    offset minus the replica's, missing when either is unknown. Timestamps absent
    in v0 and -1 ("unknown") are missing values, and so is the all-zero directory
    id (unknown directory).
    """
    context = context_values(message)
    rows = []
    for topic, partition in _quorum_partitions(body):
        leader = known(partition.get("LeaderId"))
        leader_end = leader_log_end(partition)
        where = (*context, topic, partition.get("PartitionIndex"), leader, partition.get("LeaderEpoch"),
                 known(partition.get("HighWatermark")))
        for group, role in REPLICA_GROUPS:
            for replica in items(partition, group):
                get = replica.get
                replica_id, log_end = get("ReplicaId"), get("LogEndOffset")
                fetched, caught_up = get("LastFetchTimestamp"), get("LastCaughtUpTimestamp")
                rows.append((
                    *where, "leader" if role == "voter" and replica_id == leader else role,
                    replica_id, _uuid_text(get("ReplicaDirectoryId")),
                    None if log_end == -1 else log_end, replica_lag(leader_end, log_end),
                    None if fetched == -1 else fetched, None if caught_up == -1 else caught_up,
                ))  # fmt: skip
    add_rows(columns, rows)


def node_rows(message: Message, body: Values, columns: Columns) -> None:
    """v2 responses: each controller node's listeners, one row per listener."""
    context = context_values(message)
    add_rows(columns, [(*context, node.get("NodeId"), listener.get("Name"), listener.get("Host"),
                        listener.get("Port"))
                       for node in items(body, "Nodes") for listener in items(node, "Listeners")])


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
