"""DescribeTopicPartitions (API 75): topics and their partitions, paged by a cursor."""

from __future__ import annotations

from kdissect.dissectors import (
    Dissector,
    Values,
    authorized_operations,
    items,
    sentinel,
)

API_KEY = 75

# Error codes, broker ids and timestamps read as the schema says (`SCHEMA_DISPLAYS`);
# these are the fields whose -1 or bits mean something only this API knows.
RESPONSE_DISPLAYS = {
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
