"""Tagged fields are flat values: filters, `-e`, the tables, `-i` and the error counts reach them.

A tag this version defines that is on the wire is a value of its struct, by the field's
name, after the untagged fields, on the fast path and off the interpreter's tree alike;
an absent tag is an absent field. Checked on messages kio encodes (a follower's Fetch
v15, whose replica id moved into the tagged ReplicaState; a CreateTopics answer with a
topic's tagged config error) and on a real broker's ApiVersions answers.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

from kio.schema.create_topics.v7 import request as create_request
from kio.schema.create_topics.v7 import response as create_response
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v15 import request as fetch_request

import kdissect
from kdissect.decode.dissect import dissect_request, dissect_response, message_body
from kdissect.decode.schema.plan import message_plan
from kdissect.decode.tree import Node
from kdissect.decode.values import fast_body, tree_values
from kdissect.pipeline import read_messages
from tests.test_cli import kdissect as run
from tests.test_traffic_tables import follower_fetch, kio_capture


def _consumer_fetch() -> tuple[object, object]:
    """A consumer's Fetch v15: kio leaves the ReplicaState at its default (-1, -1) out."""
    asked, answered = follower_fetch()
    consumer = fetch_request.ReplicaState(replica_id=-1, replica_epoch=-1)
    return dataclasses.replace(asked, replica_state=consumer), answered


def _both_paths(data: bytes, kind: str, api_key: int, version: int) -> tuple[dict, dict]:
    """The body's flat values from the generated decoder and off the interpreter's tree."""
    fast = fast_body(data, kind, api_key, version)
    tree = dissect_request(data) if kind == "request" else dissect_response(data, api_key, version)
    plan = message_plan(api_key, version, kind)
    assert fast is not None and plan is not None
    body = message_body(tree)
    assert body is not None
    return fast, tree_values(body, plan.body)


def _case(path: Path, number: int) -> tuple[bytes, str, int, int]:
    message = next(m for m in read_messages(path) if m.number == number)
    assert message.api_key is not None and message.api_version is not None
    return message.frame.data, "request" if message.is_request else "response", message.api_key, message.api_version


def test_a_follower_fetch_carries_its_tagged_replica_state(tmp_path: Path) -> None:
    path = kio_capture(tmp_path, [(1, 15, *follower_fetch())])
    fast, reference = _both_paths(*_case(path, 1))
    assert fast == reference
    assert fast["ReplicaState"] == {"ReplicaId": 2, "ReplicaEpoch": 5}
    assert list(fast)[-2:] == ["RackId", "ReplicaState"]  # after the untagged fields, as on the wire
    # every output that reads flat values sees it
    assert run("-Y", "ReplicaState.ReplicaId == 2", path).stdout.count("Fetch v15 Request") == 1
    assert run("-Y", "ReplicaId == 2 && ReplicaState.ReplicaEpoch == 5", path).stdout.count("\n") == 1
    assert run("-Y", "kafka.replica_id == 2", path).stdout.count("\n") == 1
    assert run("-T", "fields", "-e", "number", "-e", "ReplicaState.ReplicaEpoch", path).stdout == "1\t5\n2\t\n"
    assert "Fetch v15 Request corr=1 replica=2 " in run("-i", path).stdout
    fetch = kdissect.read_pcap(path).fetch
    assert [int(v) for v in fetch[fetch.direction == "request"].replica_id] == [2, 2]


def test_a_consumer_fetch_has_no_replica_state(tmp_path: Path) -> None:
    path = kio_capture(tmp_path, [(1, 15, *_consumer_fetch())])
    fast, reference = _both_paths(*_case(path, 1))
    assert fast == reference and "ReplicaState" not in fast
    assert run("-Y", "ReplicaState", path).stdout == ""
    assert run("-Y", "!ReplicaState && api_key == 1", path).stdout.count("\n") == 2
    assert "replica=" not in run("-i", path).stdout
    assert kdissect.read_pcap(path).fetch.replica_id.isna().all()


def test_a_tagged_error_code_is_counted_where_every_error_is(tmp_path: Path) -> None:
    """CreateTopics v7: a topic's config error sits in a tagged field of the topic's result."""
    asked = create_request.CreateTopicsRequest(
        topics=(create_request.CreatableTopic(name="orders", num_partitions=3, replication_factor=1,
                                              assignments=(), configs=()),),
        timeout=timedelta(milliseconds=30_000), validate_only=False)
    answered = create_response.CreateTopicsResponse(
        throttle_time=timedelta(0), topics=(create_response.CreatableTopicResult(
            name="orders", topic_id=None, error_code=ErrorCode.none, error_message=None,
            topic_config_error_code=ErrorCode.topic_authorization_failed, num_partitions=3,
            replication_factor=1, configs=None),))
    path = kio_capture(tmp_path, [(19, 7, asked, answered)])
    fast, reference = _both_paths(*_case(path, 2))
    assert fast == reference
    assert fast["Topics"][0]["TopicConfigErrorCode"] == ErrorCode.topic_authorization_failed.value
    capture = kdissect.read_pcap(path)
    errors = capture.errors
    assert list(zip(errors.path, errors.error, strict=True)) == [
        ("Topics[0].TopicConfigErrorCode", "TOPIC_AUTHORIZATION_FAILED")]
    assert "errors=TOPIC_AUTHORIZATION_FAILED" in run("-i", path).stdout
    assert run("-Y", "TopicConfigErrorCode != 0", path).stdout.count("CreateTopics v7 Response") == 1
    stats = run("--stats", path).stdout
    assert "CreateTopics v7: TOPIC_AUTHORIZATION_FAILED x1" in stats


def _tagged_entries(node: Node) -> list[Node]:
    block = next((child for child in node.children if child.name == "tagged_fields"), None)
    return [] if block is None else [entry for entry in block.children
                                     if entry.name != "count" and not entry.name.startswith("unknown_tag_")]


def test_a_real_brokers_features_are_values(shipped_captures: Path) -> None:
    """Tansu's ApiVersions v3 answers give their supported and finalized features in tags:
    each one the tree shows is a value, equal to what the tree's entry holds."""
    checked, epochs = 0, []
    for message in read_messages(shipped_captures / "tansu_records.pcap"):
        if message.api_key != 18 or message.is_request or message.api_version is None:
            continue
        case = (message.frame.data, "response", 18, message.api_version)
        fast, reference = _both_paths(*case)
        assert fast == reference
        body = message_body(dissect_response(message.frame.data, 18, message.api_version))
        assert body is not None
        for entry in _tagged_entries(body):
            value = next(child for child in entry.children if child.name == "value")
            assert entry.name in fast
            if not value.children:
                assert fast[entry.name] == value.value
            if entry.name == "FinalizedFeaturesEpoch":
                epochs.append(str(value.value))
            checked += 1
    assert checked >= 3 and epochs
    shown = run("-T", "fields", "-e", "FinalizedFeaturesEpoch", "-Y", "FinalizedFeaturesEpoch",
                shipped_captures / "tansu_records.pcap").stdout.split()
    assert shown == epochs
