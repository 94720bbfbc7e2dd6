"""Headers of every API, and the meaning the per-API dissectors add to decoded bodies.

Frames come from independent codecs (kio, kafka-python's protocol classes) or
from the third-party captures; the expected header layout of each API version
follows Apache Kafka's published flexible-version thresholds (kdissect.apis).
"""

from __future__ import annotations

import datetime
import io
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from craft import framed
from kafka.protocol.api_header import RequestHeader as KafkaRequestHeader
from kafka.protocol.api_header import ResponseHeader as KafkaResponseHeader
from kio.schema.describe_producers.v0 import response as kio_producers
from kio.schema.describe_quorum.v2 import response as kio_quorum
from kio.schema.describe_topic_partitions.v0 import response as kio_topic_partitions
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from kdissect.apis import APIS, request_header_version, response_header_version
from kdissect.decode.dissect import dissect_request, dissect_response
from kdissect.decode.schema import set_sources
from kdissect.decode.tree import Node
from kdissect.ingest.framing import Direction
from kdissect.pipeline import read_messages
from kdissect.present.text import render_tree

DISSECTED = (55, 61, 75)
# kio's phantom int and str types are not worth spelling out in these tests.
producers: Any = kio_producers
quorum: Any = kio_quorum
topic_partitions: Any = kio_topic_partitions
BODY = b"\xab\xcd\xef"


@pytest.fixture
def no_body_definitions() -> Any:
    """Headers only: every body stays raw, whatever definitions are installed."""
    set_sources(())
    yield
    set_sources(None)




def kio_response(entity: Any, correlation_id: int = 7) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return framed(struct.pack(">ib", correlation_id, 0) + buffer.getvalue())


def header_versions() -> list[tuple[int, int]]:
    """Each API at its oldest, last classic, first flexible and newest version."""
    cases: list[tuple[int, int]] = []
    for api in APIS.values():
        versions = {api.min_version, api.max_version}
        if api.first_flexible is not None:
            versions |= {api.first_flexible, max(api.first_flexible - 1, api.min_version)}
        cases.extend((api.key, version) for version in sorted(versions))
    return cases


def request_bytes(api_key: int, version: int, client_id: str | None) -> bytes:
    if request_header_version(api_key, version) == 0:  # kafka-python has no v0 header
        return framed(struct.pack(">hhi", api_key, version, 99) + BODY)
    header = KafkaRequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=99,
                                client_id=client_id)
    flexible = request_header_version(api_key, version) == 2
    return framed(header.encode(flexible=flexible) + BODY)


@pytest.mark.usefixtures("no_body_definitions")
@pytest.mark.parametrize(("api_key", "version"), list(header_versions()))
def test_request_header_of_every_api_version(api_key: int, version: int) -> None:
    tree = dissect_request(request_bytes(api_key, version, "client-7"))
    header_version = request_header_version(api_key, version)
    header = tree.children[1]
    assert (header.name, header.display) == ("RequestHeader", f"v{header_version}")
    assert header["request_api_key"].display == f"{api_key} ({APIS[api_key].name})"
    assert header["request_api_version"].value == version
    assert header["correlation_id"].value == 99
    if header_version == 0:
        assert header.child("client_id") is None
    else:
        assert header["client_id"].display == '"client-7" (int16 len=8)'
    assert (header.child("tagged_fields") is not None) == (header_version == 2)
    assert (tree.name, tree.display) == (f"{APIS[api_key].name}Request", f"v{version}")
    assert tree.tiling_errors() == []
    body = tree.children[2]
    assert (body.name, body.type, body.value, body.about) == (
        f"{APIS[api_key].name}Request body", "bytes", BODY, "no definition")
    assert [n.message.split(":")[0] for n in tree.all_notes()] == [
        f"no definition of {APIS[api_key].name} v{version}"]


@pytest.mark.usefixtures("no_body_definitions")
@pytest.mark.parametrize(("api_key", "version"), list(header_versions()))
def test_response_header_of_every_api_version(api_key: int, version: int) -> None:
    flexible = response_header_version(api_key, version) == 1
    frame = framed(KafkaResponseHeader(correlation_id=-5).encode(flexible=flexible) + BODY)
    tree = dissect_response(frame, api_key, version)
    header = tree.children[1]
    assert (header.name, header.display) == ("ResponseHeader", "v1" if flexible else "v0")
    assert header["correlation_id"].value == -5
    assert [c.name for c in header.children] == ["correlation_id", *(["tagged_fields"] if flexible else [])]
    assert tree.tiling_errors() == []
    assert tree.children[2].value == BODY
    assert [n.message.split(":")[0] for n in tree.all_notes()] == [
        f"no definition of {APIS[api_key].name} v{version}"]


def test_api_versions_responses_always_use_header_v0() -> None:
    frame = framed(struct.pack(">i", 3) + b"\x00\x00\x01")  # v3 body: error code 0, then its arrays
    header = dissect_response(frame, 18, 3).children[1]
    assert header.display == "v0"
    assert [c.name for c in header.children] == ["correlation_id"]


def public_frames(folder: Path) -> list[tuple[str, Any]]:
    return [(path.name, message) for path in sorted(folder.glob("*.pcap*"))
            for message in read_messages(path, ports=[9092, 36333])]


def known_quirks(message: Any) -> list[str]:
    """librdkafka's ApiVersions v0 request carries 4 zero bytes (an empty int32 array) the layout
    lacks: named, with a note, not an error."""
    if message.frame.data[4:8] == b"\x00\x12\x00\x00" and message.frame.data[-4:] == bytes(4):
        return ["note: librdkafka's draft API-key array after the body (brokers ignore it) at 0x0015"]
    return []


def test_every_public_capture_frame_gets_the_header_kafka_python_reads(public_captures: Path) -> None:
    checked = set()
    for name, message in public_frames(public_captures):
        data = message.frame.data
        if message.frame.direction is Direction.REQUEST:
            tree = dissect_request(data)
            key, version = struct.unpack_from(">hh", data, 4)
            flexible = request_header_version(key, version) == 2
            expected = KafkaRequestHeader.decode(io.BytesIO(data[4:]), flexible=flexible)
            header = tree.children[1]
            assert (header["request_api_key"].value, header["request_api_version"].value,
                    header["correlation_id"].value, header["client_id"].value) == (
                expected.request_api_key, expected.request_api_version, expected.correlation_id,
                expected.client_id), name
            checked.add((APIS[key].name, version))
        else:
            tree = dissect_response(data, message.api_key, message.api_version)
            expected_id = KafkaResponseHeader.decode(io.BytesIO(data[4:])).correlation_id
            assert tree.children[1]["correlation_id"].value == expected_id, name
            if message.api_key is None:
                assert [n.message for n in tree.all_notes()] == ["request missing: body not decoded"]
        assert tree.tiling_errors() == [], name
        assert (tree.offset, tree.size) == (0, len(data)), name
        if message.api_key is not None:
            assert [str(n) for n in tree.all_notes()] == known_quirks(message), name
    assert {("Produce", 9), ("Fetch", 12), ("Fetch", 13), ("ApiVersions", 3)} <= checked


# -- meaning ------------------------------------------------------------------------------


def producer_state(**values: Any) -> Any:
    fields = dict(producer_id=4000, producer_epoch=3, last_sequence=17, last_timestamp=1732870000000,
                  coordinator_epoch=2, current_txn_start_offset=120)
    fields.update(values)
    return producers.ProducerState(**fields)


def producers_tree(*states: Any, error: ErrorCode = ErrorCode.none) -> Node:
    partition = producers.PartitionResponse(partition_index=0, error_code=error, error_message=None,
                                            active_producers=states)
    response = producers.DescribeProducersResponse(
        throttle_time=datetime.timedelta(0), topics=(producers.TopicResponse(name="t", partitions=(partition,)),))
    return dissect_response(kio_response(response), 61, 0)


def shown(tree: Node, path: str) -> str:
    for node, _, node_path in tree.walk():
        if node_path.endswith(path):
            return node.display
    raise KeyError(path)


def test_error_codes_are_named_and_zero_stays_zero() -> None:
    tree = producers_tree(error=ErrorCode.unknown_topic_or_partition)
    assert shown(tree, "Partitions[0].ErrorCode") == "3 (UNKNOWN_TOPIC_OR_PARTITION)"
    assert shown(producers_tree(), "Partitions[0].ErrorCode") == "0"


def test_producer_state_timestamps_and_sentinels() -> None:
    tree = producers_tree(producer_state(), producer_state(
        producer_epoch=-1, last_sequence=-1, last_timestamp=-1, coordinator_epoch=-1, current_txn_start_offset=-1))
    known = "ActiveProducers[0]."
    # `date -u -d @1732870000` says Fri Nov 29 08:46:40 UTC 2024
    assert shown(tree, known + "LastTimestamp") == "1732870000000 (2024-11-29 08:46:40.000 UTC)"
    assert shown(tree, known + "LastSequence") == "17"
    assert shown(tree, known + "CurrentTxnStartOffset") == "120"
    unset = "ActiveProducers[1]."
    for field in ("ProducerEpoch", "LastSequence", "LastTimestamp", "CoordinatorEpoch", "CurrentTxnStartOffset"):
        assert shown(tree, unset + field) == "-1 (none)", field
    assert shown(tree, unset + "ProducerId") == "4000"


def test_timestamp_beyond_year_9999_stays_a_number() -> None:
    tree = producers_tree(producer_state(last_timestamp=2**62))
    assert shown(tree, "ActiveProducers[0].LastTimestamp") == str(2**62)


def topic_partitions_tree(operations: int, leader_id: int = 1) -> Node:
    partition = topic_partitions.DescribeTopicPartitionsResponsePartition(
        error_code=ErrorCode.leader_not_available, partition_index=0, leader_id=leader_id, leader_epoch=-1,
        replica_nodes=(1,), isr_nodes=(1,), eligible_leader_replicas=None, last_known_elr=None,
        offline_replicas=())
    topic = topic_partitions.DescribeTopicPartitionsResponseTopic(
        error_code=ErrorCode.none, name="t", topic_id=uuid.UUID(int=1), is_internal=False,
        partitions=(partition,), topic_authorized_operations=operations)
    response = topic_partitions.DescribeTopicPartitionsResponse(
        throttle_time=datetime.timedelta(0), topics=(topic,), next_cursor=None)
    return dissect_response(kio_response(response), 75, 0)


@pytest.mark.parametrize(("operations", "display"), [
    (-2147483648, "-2147483648 (not requested)"),
    (0, "0"),
    ((1 << 3) | (1 << 4) | (1 << 8), "280 (READ, WRITE, DESCRIBE)"),
    ((1 << 2) | (1 << 15) | (1 << 20), "1081348 (ALL, TWO_PHASE_COMMIT, bit 20)"),
])
def test_authorized_operations_are_named(operations: int, display: str) -> None:
    assert shown(topic_partitions_tree(operations), "TopicAuthorizedOperations") == display


def test_topic_partitions_sentinels_and_null_cursor() -> None:
    tree = topic_partitions_tree(0, leader_id=-1)
    assert shown(tree, "Partitions[0].LeaderId") == "-1 (none)"
    assert shown(tree, "Partitions[0].LeaderEpoch") == "-1 (unknown)"
    assert shown(tree, "Partitions[0].ErrorCode") == "5 (LEADER_NOT_AVAILABLE)"
    assert shown(tree, "Partitions[0].EligibleLeaderReplicas") == "null"
    cursor = tree.children[2]["NextCursor"]
    assert (cursor.display, cursor.size, [c.display for c in cursor.children]) == ("null", 1, ["-1 (null)"])


def replica(replica_id: int, log_end_offset: int, fetched: int = -1) -> Any:
    return quorum.ReplicaState(replica_id=replica_id, replica_directory_id=uuid.UUID(int=replica_id),
                               log_end_offset=log_end_offset, last_fetch_timestamp=fetched,
                               last_caught_up_timestamp=-1)


def quorum_tree(high_watermark: int = 100, leader_id: int = 1) -> Node:
    partition = quorum.PartitionData(
        partition_index=0, error_code=ErrorCode.none, error_message=None, leader_id=leader_id, leader_epoch=4,
        high_watermark=high_watermark, current_voters=(replica(1, 100), replica(2, 95, 1732870000123)),
        observers=(replica(3, -1), replica(4, 40)))
    response = quorum.DescribeQuorumResponse(
        error_code=ErrorCode.none, error_message=None,
        topics=(quorum.TopicData(topic_name="__cluster_metadata", partitions=(partition,)),), nodes=())
    return dissect_response(kio_response(response), 55, 2)


def lags(tree: Node) -> dict[str, int]:
    return {path: node.value for node, _, path in tree.walk() if node.generated and node.name == "lag"}


def test_quorum_lag_is_the_leaders_log_end_offset_minus_the_replicas_when_known() -> None:
    # As kafka-metadata-quorum describe --replication computes it; the high watermark plays no part.
    tree = quorum_tree(high_watermark=90)
    prefix = "DescribeQuorumResponse.DescribeQuorumResponse.Topics[0].Partitions[0]."
    assert lags(tree) == {prefix + "CurrentVoters[0].lag": 0, prefix + "CurrentVoters[1].lag": 5,
                          prefix + "Observers[1].lag": 60}
    assert shown(tree, "Observers[0].LogEndOffset") == "-1 (unknown)"
    assert shown(quorum_tree(leader_id=-1), "Partitions[0].LeaderId") == "-1 (unknown)"
    assert shown(tree, "CurrentVoters[1].LastFetchTimestamp") == "1732870000123 (2024-11-29 08:46:40.123 UTC)"
    assert shown(tree, "CurrentVoters[1].LastCaughtUpTimestamp") == "-1 (unknown)"
    assert tree.tiling_errors() == []


def test_lag_nodes_are_generated_beside_their_log_end_offset() -> None:
    tree = quorum_tree()
    voter = next(node for node, _, path in tree.walk() if path.endswith("CurrentVoters[1]"))
    names = [c.name for c in voter.children]
    lag = voter.children[names.index("LogEndOffset") + 1]
    assert (lag.name, lag.type, lag.size, lag.offset, lag.generated) == (
        "lag", "int64", 0, voter["LogEndOffset"].offset, True)
    text = render_tree(tree)
    assert f"+-- [lag int64 = 5] [0x{lag.offset:04x}, 0B] leader's log end offset minus this replica's (generated)" in text
    assert "lag" not in render_tree(tree, show_generated=False)


def test_no_lag_without_a_known_leader_among_the_voters() -> None:
    assert lags(quorum_tree(leader_id=-1)) == {}
    assert lags(quorum_tree(leader_id=7)) == {}
    assert len(lags(quorum_tree(high_watermark=-1))) == 3


def test_unknown_api_key_in_a_request_header() -> None:
    tree = dissect_request(framed(struct.pack(">hhih", 999, 0, 1, -1) + BODY))
    assert tree.name == "Request"
    assert tree.children[1]["request_api_key"].display == "999 (unknown API)"
    assert tree.children[1]["client_id"].display == "null (int16 len=-1)"
    body = tree.children[2]
    assert (body.name, body.value) == ("Request body", BODY)
    assert [(n.message, n.offset) for n in tree.all_notes()] == [("unknown API key 999: body not decoded", 14)]
