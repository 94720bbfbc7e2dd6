"""DescribeProducers (API 61): producer state per partition, as the broker reports it."""

from __future__ import annotations

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
    known,
    message_context,
    no_meaning,
    sentinel,
    timestamp,
)
from kdissect.error_codes import error_name

if TYPE_CHECKING:
    from kdissect.pair.message import Message

API_KEY = 61

_RESPONSE_RULES = {
    "ErrorCode": error_code,
    "ProducerEpoch": sentinel("none"),
    "LastSequence": sentinel("none"),  # nothing written yet
    "LastTimestamp": timestamp("none"),
    "CoordinatorEpoch": sentinel("none"),  # not transactional
    "CurrentTxnStartOffset": sentinel("none"),  # no transaction open
}


def annotate_response(body: Node, version: int) -> None:
    annotate(body, _RESPONSE_RULES)


def summarize_response(body: Node) -> str:
    """`producers=3 (6 partition entries) open_txns=1`: distinct producer ids, then how many
    (partition, producer) entries the response lists and how many have a transaction open."""
    producer_ids: set[object] = set()
    entries = open_transactions = 0
    for topic in elements(body.child("Topics")):
        for partition in elements(topic.child("Partitions")):
            for producer in elements(partition.child("ActiveProducers")):
                entries += 1
                producer_id = producer.child("ProducerId")
                producer_ids.add(None if producer_id is None else producer_id.value)
                start = producer.child("CurrentTxnStartOffset")
                open_transactions += start is not None and start.value >= 0
    text = f"producers={len(producer_ids)} ({entries} partition entr{'y' if entries == 1 else 'ies'})"
    return text + (f" open_txns={open_transactions}" if open_transactions else "")


DISSECTOR = Dissector(API_KEY, request=no_meaning, response=annotate_response,
                      response_summary=summarize_response)


# -- tidy table: one row per active producer per partition per response ---------

PRODUCERS_DTYPES = {
    **CONTEXT_DTYPES,
    "topic": "category", "partition": "Int64", "partition_error": "category",
    "error_message": "string", "producer_id": "Int64", "producer_epoch": "Int64",
    "last_sequence": "Int64", "last_timestamp": "utc_ms", "coordinator_epoch": "Int64",
    "current_txn_start_offset": "Int64",
}  # fmt: skip


def producer_rows(message: Message, body: Node, columns: Columns) -> None:
    """-1 sentinels become missing values: no sequence yet, no coordinator, no open transaction.

    A partition answering with an error (and so without producers) gets one
    row carrying the error, so failures stay visible next to the data.
    """
    context = message_context(message)
    for topic_node in elements(body.child("Topics")):
        topic = topic_node.child("Name")
        for partition_node in elements(topic_node.child("Partitions")):
            partition = field_values(partition_node)
            where = {
                "topic": None if topic is None else topic.value,
                "partition": partition.get("PartitionIndex"),
                "partition_error": error_name(partition.get("ErrorCode") or 0),
                "error_message": partition.get("ErrorMessage"),
            }
            producers = elements(partition_node.child("ActiveProducers"))
            for producer_node in producers:
                add_row(columns, **context, **where, **_producer_columns(field_values(producer_node)))
            if not producers and partition.get("ErrorCode"):
                add_row(columns, **context, **where, **_producer_columns({}))


def _producer_columns(producer: dict[str, Any]) -> dict[str, Any]:
    return {
        "producer_id": producer.get("ProducerId"),
        "producer_epoch": producer.get("ProducerEpoch"),
        "last_sequence": known(producer.get("LastSequence")),
        "last_timestamp": known(producer.get("LastTimestamp")),
        "coordinator_epoch": known(producer.get("CoordinatorEpoch")),
        "current_txn_start_offset": known(producer.get("CurrentTxnStartOffset")),
    }


TABLES = (TableSpec("producers", API_KEY, False, PRODUCERS_DTYPES, producer_rows),)
