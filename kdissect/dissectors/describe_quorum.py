"""DescribeQuorum (API 55): the KRaft quorum's leader, voters and observers per partition.

Besides naming error codes and sentinels, each voter and observer gets a
generated `lag`: the partition's high watermark minus the replica's log end
offset, when both are known.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kdissect.decode.tree import Node
from kdissect.dissectors import (
    CONTEXT_DTYPES,
    Columns,
    Dissector,
    TableSpec,
    add_row,
    annotate,
    elements,
    error_code,
    field_values,
    generated,
    known,
    message_context,
    no_meaning,
    sentinel,
    timestamp,
)
from kdissect.error_codes import error_name

if TYPE_CHECKING:
    from kdissect.pair.message import Message

API_KEY = 55
LAG_ABOUT = "high watermark minus log end offset"

_RESPONSE_RULES = {
    "ErrorCode": error_code,
    "LeaderId": sentinel("unknown"),
    "LogEndOffset": sentinel("unknown"),
    "LastFetchTimestamp": timestamp("unknown"),
    "LastCaughtUpTimestamp": timestamp("unknown"),
}


def annotate_response(body: Node, version: int) -> None:
    annotate(body, _RESPONSE_RULES)
    for topic in elements(body.child("Topics")):
        for partition in elements(topic.child("Partitions")):
            add_lags(partition)


def add_lags(partition: Node) -> None:
    """Insert a generated `lag` after each replica's LogEndOffset."""
    high_watermark = partition.child("HighWatermark")
    if high_watermark is None or high_watermark.value < 0:
        return
    for replicas in ("CurrentVoters", "Observers"):
        for replica in elements(partition.child(replicas)):
            log_end = replica.child("LogEndOffset")
            if log_end is None or log_end.value < 0:
                continue
            lag = generated("lag", "int64", high_watermark.value - log_end.value, log_end.offset, LAG_ABOUT)
            replica.children.insert(replica.children.index(log_end) + 1, lag)


def summarize_response(body: Node) -> str:
    """`leader=1 epoch=7 hw=5037 voters=3 observers=1`, plus the laggiest voter if any lags."""
    parts = []
    for _, partition_node, partition in _partitions(body):
        text = (f"leader={partition.get('LeaderId')} epoch={partition.get('LeaderEpoch')} "
                f"hw={partition.get('HighWatermark')} "
                f"voters={len(elements(partition_node.child('CurrentVoters')))} "
                f"observers={len(elements(partition_node.child('Observers')))}")
        lags = [(lag.value, replica.child("ReplicaId"))
                for replica in elements(partition_node.child("CurrentVoters"))
                for lag in replica.children if lag.generated and lag.name == "lag"]
        worst = max(lags, key=lambda item: item[0], default=None)
        if worst is not None and worst[0] > 0 and worst[1] is not None:
            text += f" max_voter_lag={worst[0]}@{worst[1].value}"
        parts.append(text)
    return "; ".join(parts)


DISSECTOR = Dissector(API_KEY, request=no_meaning, response=annotate_response,
                      response_summary=summarize_response)


# -- tidy tables: partitions, replicas (voters and observers), nodes -------------

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


def _partitions(body: Node) -> Iterator[tuple[str | None, Node, dict[str, Any]]]:
    for topic_node in elements(body.child("Topics")):
        topic = topic_node.child("TopicName")
        for partition_node in elements(topic_node.child("Partitions")):
            yield None if topic is None else topic.value, partition_node, field_values(partition_node)


def quorum_rows(message: Message, body: Node, columns: Columns) -> None:
    context = message_context(message)
    code = body.child("ErrorCode")
    top_error = None if code is None else error_name(code.value or 0)
    for topic, partition_node, partition in _partitions(body):
        add_row(
            columns, **context, version=message.api_version, error=top_error, topic=topic,
            partition=partition.get("PartitionIndex"),
            partition_error=error_name(partition.get("ErrorCode") or 0),
            leader=known(partition.get("LeaderId")), leader_epoch=partition.get("LeaderEpoch"),
            high_watermark=known(partition.get("HighWatermark")),
            voters=len(elements(partition_node.child("CurrentVoters"))),
            observers=len(elements(partition_node.child("Observers"))),
        )  # fmt: skip


def replica_rows(message: Message, body: Node, columns: Columns) -> None:
    """One row per voter and observer; the leader's row says `leader`.

    Timestamps absent in v0 and -1 ("unknown") are missing values, and so is
    the all-zero directory id (unknown directory); `lag` is
    the high watermark minus the log end offset when both are known.
    """
    context = message_context(message)
    for topic, partition_node, partition in _partitions(body):
        leader, high_watermark = known(partition.get("LeaderId")), known(partition.get("HighWatermark"))
        where = {"topic": topic, "partition": partition.get("PartitionIndex"), "leader": leader,
                 "leader_epoch": partition.get("LeaderEpoch"), "high_watermark": high_watermark}
        for group, role in (("CurrentVoters", "voter"), ("Observers", "observer")):
            for replica_node in elements(partition_node.child(group)):
                replica = field_values(replica_node)
                replica_id, log_end = replica.get("ReplicaId"), known(replica.get("LogEndOffset"))
                directory = replica.get("ReplicaDirectoryId")
                add_row(
                    columns, **context, **where,
                    role="leader" if role == "voter" and replica_id == leader else role,
                    replica_id=replica_id,
                    directory_id=None if directory is None or directory.int == 0 else str(directory),
                    log_end_offset=log_end,
                    lag=None if log_end is None or high_watermark is None else high_watermark - log_end,
                    last_fetch=known(replica.get("LastFetchTimestamp")),
                    last_caught_up=known(replica.get("LastCaughtUpTimestamp")),
                )  # fmt: skip


def node_rows(message: Message, body: Node, columns: Columns) -> None:
    """v2 responses: each controller node's listeners, one row per listener."""
    context = message_context(message)
    for node in elements(body.child("Nodes")):
        node_id = node.child("NodeId")
        for listener_node in elements(node.child("Listeners")):
            listener = field_values(listener_node)
            add_row(columns, **context, node_id=None if node_id is None else node_id.value,
                    listener=listener.get("Name"), host=listener.get("Host"),
                    port=listener.get("Port"))  # fmt: skip


TABLES = (
    TableSpec("quorum", API_KEY, False, QUORUM_DTYPES, quorum_rows),
    TableSpec("quorum_replicas", API_KEY, False, QUORUM_REPLICAS_DTYPES, replica_rows),
    TableSpec("quorum_nodes", API_KEY, False, QUORUM_NODES_DTYPES, node_rows),
)
