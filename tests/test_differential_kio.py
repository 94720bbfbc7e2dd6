"""Messages encoded by independent codecs decode to exactly the values they were built from.

kio (Aiven's Kafka codec, generated from Apache Kafka's own schemas) encodes
random requests and responses of every supported (API, version), drawn by
hypothesis from kio's types; kafka-python's protocol classes encode
DescribeProducers, DescribeQuorum and DescribeTopicPartitions requests. The
decoded tree must hold the same values, carry no note, tile, and span the frame.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import os
import re
import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin.cluster import DescribeQuorumRequest as KafkaDescribeQuorumRequest
from kafka.protocol.admin.topics import (
    DescribeTopicPartitionsRequest as KafkaDescribeTopicPartitionsRequest,
)
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest as KafkaDescribeProducersRequest,
)
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_writer

from kdissect.decode.dissect import dissect_request, dissect_response
from kdissect.decode.schema import message_spec
from kdissect.decode.tree import Node

# Deterministic and quick for CI; KDISSECT_EXAMPLES raises the count for local runs.
QUICK = settings(
    max_examples=int(os.environ.get("KDISSECT_EXAMPLES", "40")),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
KIO_MODULES = {75: "describe_topic_partitions", 61: "describe_producers", 55: "describe_quorum"}
SUPPORTED = [(75, 0), (61, 0), (55, 0), (55, 1), (55, 2)]
CASES = [(key, version, kind) for key, version in SUPPORTED for kind in ("request", "response")]
WIRE_ONLY = ("length", "presence", "tagged_fields")
INT32 = st.integers(-(2**31), 2**31 - 1)


def kio_type(api_key: int, version: int, kind: str) -> type:
    spec = message_spec(api_key, kind)
    assert spec is not None
    module = importlib.import_module(f"kio.schema.{KIO_MODULES[api_key]}.v{version}.{kind}")
    entity_type: type = getattr(module, spec.name)
    return entity_type


def encode(entity_type: Any, entity: object) -> bytes:
    buffer = io.BytesIO()
    entity_writer(entity_type)(buffer, entity)
    return buffer.getvalue()


def framed(*parts: bytes) -> bytes:
    payload = b"".join(parts)
    return struct.pack(">i", len(payload)) + payload


def header_for(api_key: int, version: int, kind: str) -> st.SearchStrategy[Any]:
    if kind == "response":
        return st.builds(ResponseHeader, correlation_id=INT32)
    return st.builds(RequestHeader, request_api_key=st.just(api_key), request_api_version=st.just(version),
                     correlation_id=INT32, client_id=st.none() | st.text(max_size=30))


# -- comparing a kio entity with the tree ---------------------------------------------------


def wire_value(value: object) -> object:
    """A kio value as it travels on the wire."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return value


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def assert_same(node: Node, value: object, path: str) -> None:
    if dataclasses.is_dataclass(value):
        assert_struct(node, value, path)
    elif isinstance(value, tuple):
        items = [c for c in node.children if c.name != "length"]
        assert node.value == len(value) == len(items), path
        for index, (item, element) in enumerate(zip(items, value, strict=True)):
            assert_same(item, element, f"{path}[{index}]")
    elif value is None and node.type == "uuid":
        assert node.value == uuid.UUID(int=0), path  # kio writes a missing uuid as all zeros
    else:
        assert node.value == wire_value(value), path


def assert_struct(node: Node, entity: Any, path: str) -> None:
    fields = [f for f in node.children if f.name not in WIRE_ONLY and not f.generated]
    kio_fields = dataclasses.fields(entity)
    assert [snake(f.name) for f in fields] == [_kafka_name(f.name) for f in kio_fields], path
    for child, kio_field in zip(fields, kio_fields, strict=True):
        value = getattr(entity, kio_field.name)
        if value is None and child.child("presence") is not None:  # a null nullable struct
            assert (child.value, child.display, len(child.children)) == (None, "null", 1), path
            continue
        assert_same(child, value, f"{path}.{child.name}")
    flexible = node.child("tagged_fields")
    assert flexible is not None and flexible.value == 0, path


def _kafka_name(kio_name: str) -> str:
    # kio turns ThrottleTimeMs into a timedelta named throttle_time.
    return "throttle_time_ms" if kio_name == "throttle_time" else kio_name


def body_of(tree: Node) -> Node:
    return tree.children[2]


def assert_clean(tree: Node, frame: bytes) -> None:
    assert [str(n) for n in tree.all_notes()] == []
    assert tree.tiling_errors() == []
    assert (tree.offset, tree.size, tree.end) == (0, len(frame), len(frame))


@pytest.mark.parametrize(("api_key", "version", "kind"), CASES)
@QUICK
@given(data=st.data())
def test_kio_messages_decode_to_the_encoded_values(api_key: int, version: int, kind: str, data: Any) -> None:
    entity_type = kio_type(api_key, version, kind)
    header = data.draw(header_for(api_key, version, kind))
    entity = data.draw(st.from_type(entity_type))
    frame = framed(encode(type(header), header), encode(entity_type, entity))
    if kind == "request":
        tree = dissect_request(frame)
        assert tree.children[1]["client_id"].value == header.client_id
        assert tree.children[1]["request_api_key"].value == api_key
    else:
        tree = dissect_response(frame, api_key, version)
    assert_clean(tree, frame)
    assert tree.children[1]["correlation_id"].value == header.correlation_id
    assert_same(body_of(tree), entity, entity_type.__name__)


# -- kafka-python ---------------------------------------------------------------------------

TOPIC_NAMES = st.text(max_size=20)
PARTITION_LISTS = st.lists(INT32, max_size=4)
CLIENT_IDS = st.none() | st.text(max_size=20)


def kafka_python_frame(message: Any, correlation_id: int, client_id: str | None) -> bytes:
    message.with_header(correlation_id=correlation_id, client_id=client_id)
    frame: bytes = message.encode(header=True, framed=True)
    return frame


def tree_values(node: Node) -> Any:
    """The tree as kafka-python's to_dict() shapes it: snake_case keys, lists for arrays."""
    if node.type.startswith("[]"):
        return [tree_values(c) for c in node.children if c.name != "length"]
    if node.display == "struct" or node.type == "struct":
        return {snake(c.name): tree_values(c) for c in node.children
                if c.name not in WIRE_ONLY and not c.generated}
    return node.value


@pytest.mark.parametrize("version", [0])
@QUICK
@given(topics=st.lists(st.tuples(TOPIC_NAMES, PARTITION_LISTS), max_size=4), correlation_id=INT32,
       client_id=CLIENT_IDS)
def test_kafka_python_describe_producers_requests_decode_exactly(
        version: int, topics: list[tuple[str, list[int]]], correlation_id: int, client_id: str | None) -> None:
    request_type = KafkaDescribeProducersRequest
    message = request_type[version](topics=[
        request_type.TopicRequest(name=name, partition_indexes=indexes) for name, indexes in topics])
    frame = kafka_python_frame(message, correlation_id, client_id)
    tree = dissect_request(frame)
    assert_clean(tree, frame)
    assert _header_values(tree) == (61, version, correlation_id, client_id)
    assert tree_values(body_of(tree)) == message.to_dict()


@pytest.mark.parametrize("version", [0, 1, 2])
@QUICK
@given(topics=st.lists(st.tuples(TOPIC_NAMES, PARTITION_LISTS), max_size=4), correlation_id=INT32,
       client_id=CLIENT_IDS)
def test_kafka_python_describe_quorum_requests_decode_exactly(
        version: int, topics: list[tuple[str, list[int]]], correlation_id: int, client_id: str | None) -> None:
    request_type = KafkaDescribeQuorumRequest
    partition_type = request_type.TopicData.PartitionData
    message = request_type[version](topics=[
        request_type.TopicData(topic_name=name, partitions=[partition_type(partition_index=i) for i in indexes])
        for name, indexes in topics])
    frame = kafka_python_frame(message, correlation_id, client_id)
    tree = dissect_request(frame)
    assert_clean(tree, frame)
    assert _header_values(tree) == (55, version, correlation_id, client_id)
    assert tree_values(body_of(tree)) == message.to_dict()


@QUICK
@given(names=st.lists(TOPIC_NAMES, max_size=4), limit=INT32,
       cursor=st.none() | st.tuples(TOPIC_NAMES, INT32), correlation_id=INT32)
def test_kafka_python_describe_topic_partitions_requests_decode_exactly(
        names: list[str], limit: int, cursor: tuple[str, int] | None, correlation_id: int) -> None:
    request_type = KafkaDescribeTopicPartitionsRequest
    message = request_type[0](
        topics=[request_type.TopicRequest(name=name) for name in names], response_partition_limit=limit,
        cursor=None if cursor is None else request_type.Cursor(topic_name=cursor[0], partition_index=cursor[1]))
    frame = kafka_python_frame(message, correlation_id, "admin")
    tree = dissect_request(frame)
    assert_clean(tree, frame)
    expected = message.to_dict()
    decoded = tree_values(body_of(tree))
    assert decoded == expected
    assert (body_of(tree)["Cursor"].display == "null") == (cursor is None)


def _header_values(tree: Node) -> tuple[Any, ...]:
    header = tree.children[1]
    names = ("request_api_key", "request_api_version", "correlation_id", "client_id")
    return tuple(header[name].value for name in names)
