"""Tables build for any int64 on the wire: derived values exact, or missing.

Kafka's fields are int64 and a hostile or buggy peer may send any of them; a
table must still build, with exact integers (pandas' nullable Int64), and a
replica's lag (leader's log end offset minus the replica's, as Kafka's
`kafka-metadata-quorum describe --replication` has it) only where both are known.
"""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import pandas as pd
from kio.schema.describe_quorum.v2 import request as quorum_request
from kio.schema.describe_quorum.v2 import response as quorum
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_writer

import kdissect
from tests.craft import Conversation, ethernet, records, write_pcap

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _encode(entity: object) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def _framed(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def _replica(replica_id: int, log_end: int, timestamp: int) -> quorum.ReplicaState:
    return quorum.ReplicaState(replica_id=replica_id, replica_directory_id=uuid.UUID(int=replica_id),
                               log_end_offset=log_end, last_fetch_timestamp=timestamp,
                               last_caught_up_timestamp=timestamp)


def _quorum_capture(tmp_path: Path) -> Path:
    partition = quorum.PartitionData(
        partition_index=0, error_code=ErrorCode.none, error_message=None, leader_id=1,
        leader_epoch=2**31 - 1, high_watermark=INT64_MAX,
        current_voters=(_replica(1, INT64_MAX, INT64_MAX), _replica(2, 0, INT64_MIN),
                        _replica(3, INT64_MIN, -1)),
        observers=(_replica(4, 5, 0),))
    body = quorum.DescribeQuorumResponse(
        error_code=ErrorCode.none, error_message=None,
        topics=(quorum.TopicData(topic_name="__cluster_metadata", partitions=(partition,)),), nodes=())
    request = quorum_request.DescribeQuorumRequest(topics=(quorum_request.TopicData(
        topic_name="__cluster_metadata", partitions=(quorum_request.PartitionData(partition_index=0),)),))
    request_frame = _framed(_encode(RequestHeader(request_api_key=55, request_api_version=2, correlation_id=7,
                                                  client_id="extremes")) + _encode(request))
    response_frame = _framed(_encode(ResponseHeader(correlation_id=7)) + _encode(body))
    talk = Conversation.between(("10.0.0.1", 40000), ("10.0.0.2", 9092))
    packets = [*talk.handshake(), *talk.send(True, request_frame), *talk.send(False, response_frame)]
    return write_pcap(tmp_path / "extremes.pcap", records(packets, wrap=ethernet))


def test_quorum_tables_build_for_int64_extremes_with_exact_lags(tmp_path: Path) -> None:
    capture = kdissect.read_pcap(_quorum_capture(tmp_path))
    replicas = capture.quorum_replicas
    assert list(replicas.replica_id) == [1, 2, 3, 4]
    assert replicas.log_end_offset.tolist() == [INT64_MAX, 0, INT64_MIN, 5]
    assert replicas.lag.tolist() == [0, INT64_MAX, pd.NA, INT64_MAX - 5]  # exact, never rounded
    assert replicas.high_watermark.tolist() == [INT64_MAX] * 4
    assert replicas.last_fetch_timestamp.isna().tolist() == [True, True, True, False]  # beyond datetimes: missing
    assert capture.quorum.high_watermark.tolist() == [INT64_MAX]
