"""DescribeTopicPartitions (API 75): topics and their partitions, paged by a cursor."""

from __future__ import annotations

from kdissect.dissectors import (
    Dissector,
    Values,
    authorized_operations,
    error_code,
    items,
    sentinel,
)

API_KEY = 75

RESPONSE_DISPLAYS = {
    "ErrorCode": error_code,
    "LeaderId": sentinel("none"),  # no leader elected
    "LeaderEpoch": sentinel("unknown"),
    "TopicAuthorizedOperations": authorized_operations,
}


def summarize_response(body: Values) -> str:
    """`partitions=11`, and where the next page starts when there is one."""
    partitions = sum(len(items(topic, "Partitions")) for topic in items(body, "Topics"))
    text = f"partitions={partitions}"
    cursor = body.get("NextCursor")
    if isinstance(cursor, dict):
        text += f" next_cursor={cursor.get('TopicName')}:{cursor.get('PartitionIndex')}"
    return text


DISSECTOR = Dissector(API_KEY, RESPONSE_DISPLAYS, response_summary=summarize_response)
