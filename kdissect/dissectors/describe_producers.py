"""DescribeProducers (API 61): producer state per partition, as the broker reports it."""

from __future__ import annotations

from kdissect.dissectors import Dissector, Values, items, sentinel, timestamp

API_KEY = 61

# Error codes, broker ids and timestamps read as the schema says (`SCHEMA_DISPLAYS`);
# these are the fields whose -1 or bits mean something only this API knows.
RESPONSE_DISPLAYS = {
    "ProducerEpoch": sentinel("none"),
    "LastSequence": sentinel("none"),  # nothing written yet
    "LastTimestamp": timestamp("none"),
    "CoordinatorEpoch": sentinel("none"),  # not transactional
    "CurrentTxnStartOffset": sentinel("none"),  # no transaction open
}


def summarize_response(body: Values) -> str:
    """`producers=3 (6 partition entries) open_txns=1`: distinct producer ids, then how many
    (partition, producer) entries the response lists and how many have a transaction open."""
    producer_ids: set[object] = set()
    entries = open_transactions = 0
    for topic in items(body, "Topics"):
        for partition in items(topic, "Partitions"):
            for producer in items(partition, "ActiveProducers"):
                entries += 1
                producer_ids.add(producer.get("ProducerId"))
                start = producer.get("CurrentTxnStartOffset")
                open_transactions += start is not None and start >= 0
    text = f"producers={len(producer_ids)} ({entries} partition entr{'y' if entries == 1 else 'ies'})"
    return text + (f" open_txns={open_transactions}" if open_transactions else "")


DISSECTOR = Dissector(API_KEY, RESPONSE_DISPLAYS, response_summary=summarize_response)
