"""DescribeProducers (API 61): producer state per partition, as the broker reports it."""

from __future__ import annotations

from kdissect.dissectors import Dissector, Values, error_code, items, sentinel, timestamp

API_KEY = 61

RESPONSE_DISPLAYS = {
    "ErrorCode": error_code,
    "ProducerEpoch": sentinel("none"),
    "LastSequence": sentinel("none"),  # nothing written yet
    "LastTimestamp": timestamp("none"),
    "CoordinatorEpoch": sentinel("none"),  # not transactional
    "CurrentTxnStartOffset": sentinel("none"),  # no transaction open
}


def summarize_response(body: Values) -> str:
    """`producers=6 open_txns=1` over every partition of the response."""
    producers = open_transactions = 0
    for topic in items(body, "Topics"):
        for partition in items(topic, "Partitions"):
            for producer in items(partition, "ActiveProducers"):
                producers += 1
                start = producer.get("CurrentTxnStartOffset")
                open_transactions += start is not None and start >= 0
    return f"producers={producers}" + (f" open_txns={open_transactions}" if open_transactions else "")


DISSECTOR = Dissector(API_KEY, RESPONSE_DISPLAYS, response_summary=summarize_response)
