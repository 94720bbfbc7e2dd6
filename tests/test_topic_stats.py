"""`--stats`' Topics section: records and bytes produced to and fetched from each topic.

On the shipped Tansu capture, whose sidecar says what kafka-python's producers sent and
its consumer received; and on plain values for what that capture does not hold (topics
named by id, refused partitions, wire strings that need escaping, a flood of topics).
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from kdissect.present import topic_stats
from kdissect.present.topic_stats import FETCH, PRODUCE, Topics
from tests.conftest import CAPTURES
from tests.test_cli import kdissect as run

PCAP = CAPTURES / "tansu_records.pcap"
SIDECAR = json.loads(PCAP.with_suffix(".json").read_text())
METADATA = 3


def test_records_produced_and_fetched_are_what_the_clients_sent_and_read():
    data = json.loads(run("--stats", "-T", "json", PCAP).stdout)
    [topic] = data["topics"]
    assert topic["topic_name"] == SIDECAR["topic"] and topic["topic_id"] is None
    produced, fetched = topic["produced"], topic["fetched"]
    assert produced["records"] == len(SIDECAR["produced"]) == 33
    # The consumer skips the transaction's commit markers, one per partition it wrote;
    # the fetch answers carry them, and the batch headers count them.
    written = {r["partition"] for r in SIDECAR["produced"] if r["producer"] == "transactional"}
    assert SIDECAR["transactions"] == "committed" and written
    assert fetched["records"] == len(SIDECAR["consumed"]) + len(written)
    assert produced["errors"] == fetched["errors"] == 0
    # One Produce request per batch sent, each to one partition; both consumer fetches
    # answered one partition each.
    assert produced["partitions"] == 12 and fetched["partitions"] == 2
    text = run("--stats", PCAP).stdout
    row = f'"records" +12 +33 +{produced["bytes"]} +0 +2 +{fetched["records"]} +{fetched["bytes"]} +0$'
    assert re.search(row, text, re.M), text


def test_bytes_are_the_records_fields_of_the_produce_and_fetch_tables():
    import kdissect

    capture = kdissect.read_pcap(PCAP)
    data = json.loads(run("--stats", "-T", "json", PCAP).stdout)
    [topic] = data["topics"]
    produce, fetch = capture.produce, capture.fetch
    assert topic["produced"]["bytes"] == produce[produce.direction == "request"].records_bytes.sum()
    assert topic["fetched"]["bytes"] == fetch[fetch.direction == "response"].records_bytes.sum()


def test_a_capture_without_produce_or_fetch_has_no_topics_section():
    assert "Topics\n" not in run("--stats", CAPTURES / "quorum_story.pcap").stdout
    assert json.loads(run("--stats", "-T", "json", CAPTURES / "quorum_story.pcap").stdout)["topics"] == []


def batch(records: int) -> bytes:
    """A magic 2 record batch header announcing `records` records, no records after it
    (only the header is read for the count)."""
    body = bytes(4) + b"\x02" + bytes(4) + bytes(2) + bytes(4) + bytes(8) * 2 + bytes(8) + bytes(2) \
        + bytes(4) + records.to_bytes(4, "big")
    return bytes(8) + len(body).to_bytes(4, "big") + body


def produce_request(**topic: Any) -> dict[str, Any]:
    return {"TopicData": [{**topic, "PartitionData": [{"Index": 0, "Records": batch(3)},
                                                      {"Index": 1, "Records": batch(2)}]}]}


def test_topics_named_only_by_id_take_the_name_an_answer_gives_anywhere_in_the_capture():
    orders = uuid.UUID(int=7)
    topics = Topics()
    topics.add(PRODUCE, True, produce_request(TopicId=orders))  # Produce v13: by id only
    topics.add(FETCH, False, {"Responses": [{"TopicId": uuid.UUID(int=9), "Partitions": [
        {"PartitionIndex": 0, "ErrorCode": 3, "Records": b""}]}]})
    topics.add(PRODUCE, True, produce_request(Name="orders"))  # an older client, by name
    topics.add(PRODUCE, False, {"Responses": [{"Name": "orders", "PartitionResponses": [
        {"Index": 0, "ErrorCode": 0}, {"Index": 1, "ErrorCode": 6}]}]})
    topics.add(METADATA, False, {"Topics": [{"Name": "orders", "TopicId": orders}]})  # told later
    rows = topics.as_dicts()
    assert rows[0] == {"topic_name": "orders", "topic_id": None,
                       "produced": {"partitions": 4, "records": 10, "bytes": 4 * len(batch(3)), "errors": 1},
                       "fetched": {"partitions": 0, "records": 0, "bytes": 0, "errors": 0}}
    assert rows[1]["topic_name"] is None and rows[1]["topic_id"] == str(uuid.UUID(int=9))
    assert rows[1]["fetched"] == {"partitions": 1, "records": 0, "bytes": 0, "errors": 1}
    lines = topics.lines()
    assert lines[3].startswith('"orders" ') and lines[4].startswith(f"id {uuid.UUID(int=9)} ")


def test_topic_names_from_the_wire_are_escaped():
    topics = Topics()
    topics.add(PRODUCE, True, produce_request(Name="evil\x1b[31m\n"))
    line = topics.lines()[3]
    assert "\x1b" not in line and "\n" not in line and line.startswith('"evil\\x1b[31m\\x0a" ')


def test_a_flood_of_topics_is_counted_under_one_row_beyond_the_bound(monkeypatch):
    monkeypatch.setattr(topic_stats, "_MAX_TOPICS", 3)
    topics = Topics()
    for index in range(10):
        topics.add(PRODUCE, True, produce_request(Name=f"t{index}"))
    rows = topics.as_dicts()
    assert len(rows) == 4 and sum(r["produced"]["records"] for r in rows) == 50
    assert [line.split()[0] for line in topics.lines()[3:7]].count("(other") == 1


def test_the_readme_shows_the_topics_of_the_records_capture_as_they_are():
    readme = (CAPTURES.parent / "README.md").read_text()
    prompt = "$ kdissect --stats captures/tansu_records.pcap | grep -A3 '^Topics'\n"
    shown = readme[readme.index(prompt) + len(prompt):].split("```")[0].splitlines()
    out = run("--stats", PCAP).stdout.splitlines()
    start = out.index("Topics")
    assert shown == out[start:start + 4]


def test_a_fetch_by_topic_id_is_named_by_a_metadata_answer_from_kio(tmp_path):
    """Fetch v15 names its topic by id only; a later Metadata v12 answer (kio-encoded) gives
    the id's name, and the Topics section shows the fetch under that name."""
    from kio.schema.metadata.v12 import request as metadata_request
    from kio.schema.metadata.v12 import response as metadata_response

    from tests.test_traffic_tables import TOPIC_ID, follower_fetch, kio_capture

    asked, answered = follower_fetch()
    named = metadata_response.MetadataResponse(
        throttle_time=timedelta(0), brokers=(), cluster_id="c", controller_id=1,
        topics=(metadata_response.MetadataResponseTopic(
            error_code=ErrorCode.none, name="replicated", topic_id=TOPIC_ID, is_internal=False,
            partitions=(), topic_authorized_operations=-2147483648),))
    metadata = metadata_request.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False)
    pcap = kio_capture(tmp_path, [(1, 15, asked, answered), (METADATA, 12, metadata, named)])
    [topic] = json.loads(run("--stats", "-T", "json", pcap).stdout)["topics"]
    assert topic["topic_name"] == "replicated" and topic["topic_id"] is None
    # kafka-python's builder put 3 records in partition 0; partition 1 answered an error
    assert topic["fetched"] == {"partitions": 2, "records": 3, "bytes": topic["fetched"]["bytes"], "errors": 1}
    assert topic["fetched"]["bytes"] > 61 and topic["produced"]["partitions"] == 0
    (tmp_path / "alone").mkdir()
    unnamed = kio_capture(tmp_path / "alone", [(1, 15, asked, answered)])
    [alone] = json.loads(run("--stats", "-T", "json", unnamed).stdout)["topics"]
    assert alone["topic_name"] is None and alone["topic_id"] == str(TOPIC_ID)
