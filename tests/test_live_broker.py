"""A live Tansu broker, driven by kafka-python and recorded with tcpdump, decoded by kdissect."""

from __future__ import annotations

from pathlib import Path

import pytest

from kdissect.decode.dissect import message_body
from kdissect.pipeline import read_messages

DESCRIBE_TOPIC_PARTITIONS = 75


@pytest.mark.broker
def test_live_tansu_session_decodes_paired_and_without_a_single_note(tmp_path: Path) -> None:
    from tools.record_broker import record

    pcap = tmp_path / "live.pcap"
    document = record(pcap)  # a free port, not 9092: Kafka must be detected from the bytes
    messages = list(read_messages(pcap))
    requests = [m for m in messages if m.is_request]
    assert requests and all(m.pair is not None for m in messages)
    assert all(m.frame.connection.server[1] == document["broker"]["port"] for m in messages)
    for message in messages:
        tree = message.tree()
        assert message.all_notes() == [], (message.number, message.all_notes())
        assert tree.tiling_errors() == []
    answers = [m.pair for m in requests if m.api_key == DESCRIBE_TOPIC_PARTITIONS]
    assert len(answers) == len(document["describe_topic_partitions"]) == 5
    for answer, call in zip(answers, document["describe_topic_partitions"], strict=True):
        assert answer is not None
        body = message_body(answer.tree())
        assert body is not None
        topics = [e for e in body["Topics"].children if e.name != "length"]
        decoded = [(t["Name"].value, t["ErrorCode"].value,
                    sorted(p["PartitionIndex"].value for p in t["Partitions"].children[1:]))
                   for t in topics]  # fmt: skip
        expected = [(t["name"], t["error_code"], sorted(p["partition_index"] for p in t["partitions"]))
                    for t in call["result"]["topics"]]  # kafka-python's reading of the same bytes
        assert decoded == expected
