"""DescribeTopicPartitions (API 75): topics and their partitions, paged by a cursor."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kdissect.decode.tree import Node
from kdissect.dissectors import (
    CONTEXT_DTYPES,
    Columns,
    Dissector,
    TableSpec,
    add_row,
    annotate,
    authorized_operations,
    elements,
    error_code,
    field_values,
    known,
    message_context,
    no_meaning,
    sentinel,
)
from kdissect.error_codes import error_name

if TYPE_CHECKING:
    from kdissect.pair.message import Message

API_KEY = 75

_RESPONSE_RULES = {
    "ErrorCode": error_code,
    "LeaderId": sentinel("none"),  # no leader elected
    "LeaderEpoch": sentinel("unknown"),
    "TopicAuthorizedOperations": authorized_operations,
}


def annotate_response(body: Node, version: int) -> None:
    annotate(body, _RESPONSE_RULES)


def summarize_response(body: Node) -> str:
    """`partitions=11`, and where the next page starts when there is one."""
    partitions = sum(len(elements(t.child("Partitions"))) for t in elements(body.child("Topics")))
    text = f"partitions={partitions}"
    cursor = body.child("NextCursor")
    if cursor is not None and cursor.display != "null":
        where = field_values(cursor)
        text += f" next_cursor={where.get('TopicName')}:{where.get('PartitionIndex')}"
    return text


DISSECTOR = Dissector(API_KEY, request=no_meaning, response=annotate_response,
                      response_summary=summarize_response)


# -- tidy table: one row per partition of each response -------------------------

TOPIC_PARTITIONS_DTYPES = {
    **CONTEXT_DTYPES,
    "topic": "category", "topic_id": "string", "is_internal": "boolean",
    "topic_error": "category", "partition": "Int64", "partition_error": "category",
    "leader": "Int64", "leader_epoch": "Int64", "replicas": "object", "isr": "object",
    "eligible_leader_replicas": "object", "last_known_elr": "object",
    "offline_replicas": "object",
}  # fmt: skip


def topic_partition_rows(message: Message, body: Node, columns: Columns) -> None:
    """A topic whose error left it without partitions still gets one row, for its error."""
    context = message_context(message)
    for topic_node in elements(body.child("Topics")):
        topic = field_values(topic_node)
        topic_columns = {
            "topic": topic.get("Name"),
            "topic_id": _topic_id(topic.get("TopicId")),
            "is_internal": topic.get("IsInternal"),
            "topic_error": error_name(topic.get("ErrorCode") or 0),
        }
        partitions = elements(topic_node.child("Partitions"))
        for partition_node in partitions:
            partition = field_values(partition_node)
            add_row(columns, **context, **topic_columns, **_partition_columns(partition))
        if not partitions:
            add_row(columns, **context, **topic_columns, **_partition_columns({}))


def _topic_id(value: uuid.UUID | None) -> str | None:
    """The topic id as text; Kafka's all-zero "no id" (an unknown topic) is missing."""
    return None if value is None or value.int == 0 else str(value)


def _partition_columns(partition: dict[str, Any]) -> dict[str, Any]:
    return {
        "partition": partition.get("PartitionIndex"),
        "partition_error": None if not partition else error_name(partition.get("ErrorCode") or 0),
        "leader": known(partition.get("LeaderId")),
        "leader_epoch": known(partition.get("LeaderEpoch")),
        "replicas": partition.get("ReplicaNodes"),
        "isr": partition.get("IsrNodes"),
        "eligible_leader_replicas": partition.get("EligibleLeaderReplicas"),
        "last_known_elr": partition.get("LastKnownElr"),
        "offline_replicas": partition.get("OfflineReplicas"),
    }


TABLES = (
    TableSpec("topic_partitions", API_KEY, False, TOPIC_PARTITIONS_DTYPES, topic_partition_rows),
)
