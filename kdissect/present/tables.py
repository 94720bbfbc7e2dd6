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

from kdissect.dissectors import Values, items
from kdissect.dissectors.describe_quorum import REPLICA_GROUPS, leader_log_end, replica_lag
from kdissect.pair.message import Message
from kdissect.present.table_spec import (
    ABSENT,
    CONTEXT_DTYPES,
    Columns,
    Pick,
    Row,
    TableSpec,
    add_row,
    context_values,
    error_names,
    message_context,
    unknown,
    uuid_text,
    uuid_texts,
)
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


def topic_partition_rows(message: Message, body: Values) -> list[Row]:
    """One row per partition (`level` "partition"). A topic without partitions (an unknown
    topic, an error) gets one row of `level` "topic" whose partition columns are missing,
    so `level == "partition"` picks the partitions and a topic error never passes for a
    leaderless partition."""
    rows: list[Row] = []
    for topic in items(body, "Topics"):
        get = topic.get
        topic_columns = (get("Name"), uuid_text(get("TopicId")), get("IsInternal"), get("ErrorCode"))
        partitions = items(topic, "Partitions")
        if partitions:
            rows += _PARTITION.rows(partitions, ("partition", *topic_columns))
        else:
            rows.append(("topic", *topic_columns, *_NO_PARTITION))
    return rows


_PARTITION = Pick("PartitionIndex", "ErrorCode", "LeaderId", "LeaderEpoch", "ReplicaNodes", "IsrNodes",
                  "EligibleLeaderReplicas", "LastKnownElr", "OfflineReplicas")
_NO_PARTITION = (None, ABSENT, *(None,) * (len(PARTITION_COLUMNS) - 2))
# -1 leader and epoch are missing.
_TOPIC_PARTITIONS_CONVERTED = {"topic_error": error_names, "partition_error": error_names,
                               "leader_id": unknown, "leader_epoch": unknown}


# -- DescribeProducers (61): one row per active producer per partition per response -----

PRODUCERS_DTYPES = {
    **CONTEXT_DTYPES,
    "topic_name": "category", "partition_index": "Int64", "partition_error": "category",
    "error_message": "string", "producer_id": "Int64", "producer_epoch": "Int64",
    "last_sequence": "Int64", "last_timestamp": "utc_ms", "coordinator_epoch": "Int64",
    "current_txn_start_offset": "Int64",
}  # fmt: skip


def producer_rows(message: Message, body: Values) -> list[Row]:
    """-1 sentinels become missing values: no sequence yet, no coordinator, no open transaction.

    A partition answering with an error (and so without producers) gets one
    row carrying the error, so failures stay visible next to the data.
    """
    rows: list[Row] = []
    for topic in items(body, "Topics"):
        name = topic.get("Name")
        for partition in items(topic, "Partitions"):
            get = partition.get
            where = (name, get("PartitionIndex"), get("ErrorCode"), get("ErrorMessage"))
            producers = items(partition, "ActiveProducers")
            if producers:
                rows += _PRODUCER.rows(producers, where)
            elif get("ErrorCode"):
                rows.append(where + _NO_PRODUCER)
    return rows


_PRODUCER = Pick("ProducerId", "ProducerEpoch", "LastSequence", "LastTimestamp", "CoordinatorEpoch",
                 "CurrentTxnStartOffset")
_NO_PRODUCER = (None,) * len(_PRODUCER.names)
_PRODUCERS_CONVERTED = {"partition_error": error_names, "last_sequence": unknown, "last_timestamp": unknown,
                        "coordinator_epoch": unknown, "current_txn_start_offset": unknown}


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


def quorum_rows(message: Message, body: Values) -> list[Row]:
    """One row per partition. `voter_count` and `observer_count` are derived: how many
    entries the partition's CurrentVoters and Observers arrays hold."""
    head = (message.api_version, body.get("ErrorCode", ABSENT))
    return [(*head, topic, get("PartitionIndex"), get("ErrorCode"), get("LeaderId"), get("LeaderEpoch"),
             get("HighWatermark"), len(items(partition, "CurrentVoters")), len(items(partition, "Observers")))
            for topic, partition in _quorum_partitions(body) for get in (partition.get,)]


_QUORUM_CONVERTED = {"error": error_names, "partition_error": error_names, "leader_id": unknown,
                     "high_watermark": unknown}


def replica_rows(message: Message, body: Values) -> list[Row]:
    """One row per voter and observer.

    Derived columns: `role` ("leader" for the voter whose id is the partition's
    LeaderId, else "voter" or "observer") and `lag`, what Kafka's
    `kafka-metadata-quorum describe --replication` shows: the leader's log end
    offset minus the replica's, missing when either is unknown. Timestamps absent
    in v0 and -1 ("unknown") are missing values, and so is the all-zero directory
    id (unknown directory).
    """
    rows: list[Row] = []
    for topic, partition in _quorum_partitions(body):
        get = partition.get
        leader = get("LeaderId")
        leader_id = None if leader == -1 else leader
        leader_end = leader_log_end(partition)
        where = (topic, get("PartitionIndex"), leader, get("LeaderEpoch"), get("HighWatermark"))
        for group, role in REPLICA_GROUPS:
            for replica in items(partition, group):
                replica_id, directory, log_end, fetched, caught_up = _REPLICA.one(replica)
                rows.append((
                    *where, "leader" if role == "voter" and replica_id == leader_id else role,
                    replica_id, directory, log_end,
                    None if leader_end is None else replica_lag(leader_end, log_end), fetched, caught_up,
                ))  # fmt: skip
    return rows


_REPLICA = Pick("ReplicaId", "ReplicaDirectoryId", "LogEndOffset", "LastFetchTimestamp", "LastCaughtUpTimestamp")
_REPLICAS_CONVERTED = {"leader_id": unknown, "high_watermark": unknown, "replica_directory_id": uuid_texts,
                       "log_end_offset": unknown, "last_fetch_timestamp": unknown,
                       "last_caught_up_timestamp": unknown}


def node_rows(message: Message, body: Values) -> list[Row]:
    """v2 responses: each controller node's listeners, one row per listener."""
    return [row for node in items(body, "Nodes")
            for row in _LISTENER.rows(items(node, "Listeners"), (node.get("NodeId"),))]


_LISTENER = Pick("Name", "Host", "Port")


def _answers(api_key: int) -> tuple[frozenset[int], bool]:
    return frozenset({api_key}), False


TABLES: dict[str, TableSpec] = {spec.name: spec for spec in (
    TableSpec("topic_partitions", *_answers(75), TOPIC_PARTITIONS_DTYPES, topic_partition_rows,
              converted=_TOPIC_PARTITIONS_CONVERTED),
    TableSpec("producers", *_answers(61), PRODUCERS_DTYPES, producer_rows, converted=_PRODUCERS_CONVERTED),
    TableSpec("quorum", *_answers(55), QUORUM_DTYPES, quorum_rows, converted=_QUORUM_CONVERTED),
    TableSpec("quorum_replicas", *_answers(55), QUORUM_REPLICAS_DTYPES, replica_rows,
              converted=_REPLICAS_CONVERTED),
    TableSpec("quorum_nodes", *_answers(55), QUORUM_NODES_DTYPES, node_rows),
    *TRAFFIC_TABLES,
)}

__all__ = ["CONTEXT_DTYPES", "TABLES", "Columns", "TableSpec", "add_row", "context_values", "message_context"]
