"""The schema model: version ranges, definition files, load-time checks, compiled plans."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kdissect.apis import APIS
from kdissect.decode.schema import (
    Kind,
    SchemaError,
    VersionRange,
    compile_message,
    header_plan,
    load_definitions,
    message_plan,
    message_spec,
    parse_definition,
    strip_comments,
)


@pytest.mark.parametrize(("text", "low", "high"), [("0", 0, 0), ("0-2", 0, 2), ("3+", 3, None), ("12", 12, 12)])
def test_version_range_forms(text: str, low: int, high: int | None) -> None:
    versions = VersionRange.parse(text)
    assert (versions.low, versions.high, str(versions)) == (low, high, text)


def test_none_is_empty() -> None:
    versions = VersionRange.parse("none")
    assert versions.empty and str(versions) == "none"
    assert not any(v in versions for v in range(5))


@pytest.mark.parametrize("text", ["", "2-1", "-1", "1+2", "a", "1-", "+", "40000", 3, None])
def test_bad_version_ranges_are_rejected(text: Any) -> None:
    with pytest.raises(SchemaError):
        VersionRange.parse(text)


def test_membership_and_containment() -> None:
    open_ended, closed = VersionRange.parse("2+"), VersionRange.parse("2-4")
    assert [v in open_ended for v in (1, 2, 999)] == [False, True, True]
    assert [v in closed for v in (1, 2, 4, 5)] == [False, True, True, False]
    assert closed.within(open_ended) and not open_ended.within(closed)
    assert VersionRange.parse("none").within(closed)


def test_comments_are_stripped_outside_strings_only() -> None:
    text = '{\n  // a comment "with quotes"\n  "about": "see http://kafka // not a comment",\n' \
           '  "other": "escaped \\" // still inside" // gone\n}'
    assert json.loads(strip_comments(text)) == {
        "about": "see http://kafka // not a comment", "other": 'escaped " // still inside'}


def _strip_one_character_at_a_time(text: str) -> str:
    """Comment removal spelled out as a scanner: the meaning `strip_comments` must keep."""
    out, in_string, escaped, index = [], False, False, 0
    while index < len(text):
        char = text[index]
        if escaped:
            escaped = False
        elif in_string:
            escaped, in_string = char == "\\", char != '"'
        elif text.startswith("//", index):
            end = text.find("\n", index)
            index = len(text) if end < 0 else end
            continue
        elif char == '"':
            in_string = True
        out.append(char)
        index += 1
    return "".join(out)


@given(st.text(alphabet='"\\/\na{} :', max_size=60))
def test_comment_stripping_matches_a_character_scanner_on_any_text(text: str) -> None:
    assert strip_comments(text) == _strip_one_character_at_a_time(text)


def test_comment_stripping_keeps_unterminated_strings_and_final_comments() -> None:
    assert strip_comments('{"a": "x // y\\') == '{"a": "x // y\\'
    assert strip_comments('{"a": 1} // end') == '{"a": 1} '
    assert strip_comments("a/b // c\n/") == "a/b \n/"


def test_shipped_definitions_load_and_are_complete() -> None:
    names = {spec.name for spec in load_definitions()}
    assert {"DescribeProducersRequest", "DescribeProducersResponse", "DescribeQuorumRequest",
            "DescribeQuorumResponse", "DescribeTopicPartitionsRequest", "DescribeTopicPartitionsResponse",
            "RequestHeader", "ResponseHeader", "VoteRequest", "ProduceRequest"} <= names
    shipped = {spec.api_key for spec in load_definitions()} - {None}
    assert shipped == set(APIS)
    quorum = message_spec(55, "response")
    assert quorum is not None
    assert str(quorum.valid_versions) == "0-2"
    assert {s.name for s in quorum.structs} == {"ReplicaState", "TopicData", "PartitionData", "Node", "Listener"}


def test_defaults_are_typed() -> None:
    request = message_spec(75, "request")
    response = message_spec(75, "response")
    quorum = message_spec(55, "response")
    assert request is not None and response is not None and quorum is not None
    assert request.fields[1].default == 2000  # written "2000"
    assert request.fields[2].default is None  # "null" for the nullable Cursor
    replica = quorum.struct("ReplicaState")
    assert [f.default for f in replica.fields] == [0, uuid.UUID(int=0), 0, -1, -1]  # -1 written as a number
    topic = response.struct("DescribeTopicPartitionsResponseTopic")
    assert topic.fields[3].default is False
    assert topic.fields[5].default == -(2**31)


def field_names(plan: Any) -> list[str]:
    return [f.name for f in plan.fields]


def plan_of(api_key: int, version: int, kind: str) -> Any:
    plan = message_plan(api_key, version, kind)
    assert plan is not None
    return plan


def test_describe_quorum_fields_follow_their_versions() -> None:
    plans = [plan_of(55, v, "response") for v in range(3)]
    assert [field_names(p.body) for p in plans] == [
        ["ErrorCode", "Topics"], ["ErrorCode", "Topics"], ["ErrorCode", "ErrorMessage", "Topics", "Nodes"]]
    replica_fields = []
    for plan in plans:
        partition = plan.body.fields[-1 if plan.version < 2 else 2].element.struct.fields[1].element.struct
        replica_fields.append(field_names(partition.fields[-1].element.struct))
    assert replica_fields == [
        ["ReplicaId", "LogEndOffset"],
        ["ReplicaId", "LogEndOffset", "LastFetchTimestamp", "LastCaughtUpTimestamp"],
        ["ReplicaId", "ReplicaDirectoryId", "LogEndOffset", "LastFetchTimestamp", "LastCaughtUpTimestamp"]]


def test_plans_are_compiled_once_and_cached() -> None:
    assert message_plan(55, 2, "response") is message_plan(55, 2, "response")
    assert header_plan("request", 2) is header_plan("request", 2)
    first = plan_of(55, 2, "response")
    voters = first.body.fields[2].element.struct.fields[1].element.struct.fields[-2]
    observers = first.body.fields[2].element.struct.fields[1].element.struct.fields[-1]
    assert voters.element.struct is observers.element.struct  # ReplicaState compiled once


def test_plans_exist_for_known_versions_and_newer_ones_use_the_newest() -> None:
    assert plan_of(55, 3, "response").version == 2  # newer than every definition: decoded as v2
    assert plan_of(0, 2, "request").version == 2
    assert message_plan(61, 0, "request") is not None
    assert message_plan(6, 9, "request") is not None  # newer than UpdateMetadata v8: decoded as v8


def test_request_header_client_id_stays_classic_in_flexible_versions() -> None:
    plans = [header_plan("request", v) for v in range(3)]
    assert [field_names(p.body) for p in plans] == [
        ["request_api_key", "request_api_version", "correlation_id"],
        ["request_api_key", "request_api_version", "correlation_id", "client_id"],
        ["request_api_key", "request_api_version", "correlation_id", "client_id"]]
    assert [p.body.flexible for p in plans] == [False, False, True]
    client_id = plans[2].body.fields[3]
    assert (client_id.kind, client_id.compact, client_id.nullable, client_id.label) == (
        Kind.STRING, False, True, "nullable_string")
    assert [header_plan("response", v).body.flexible for v in (0, 1)] == [False, True]


def test_minimum_sizes_bound_array_counts() -> None:
    topic = plan_of(61, 0, "request").body.fields[0].element
    assert topic.min_size == 3  # compact Name, compact PartitionIndexes, tagged-field count


SAMPLE = {"apiKey": 1000, "type": "request", "name": "SampleRequest", "validVersions": "0-1",
          "flexibleVersions": "1+", "fields": [{"name": "A", "type": "int32", "versions": "0+"}]}


def sample(**changes: Any) -> str:
    spec = json.loads(json.dumps(SAMPLE))
    for key, value in changes.items():
        if key.startswith("field_"):
            spec["fields"][0][key[6:]] = value
        else:
            spec[key] = value
    return json.dumps(spec)


def test_the_sample_definition_itself_is_valid() -> None:
    spec = parse_definition(sample(), "sample")
    assert compile_message(spec, 1).body.flexible


@pytest.mark.parametrize(("text", "complaint"), [
    (sample(color="red"), "unknown key 'color'"),
    (sample(fields=[{"name": "A", "type": "int32"}]), "missing key 'versions'"),
    (sample(field_type="int128"), "unknown type 'int128'"),
    (sample(field_type="[]records"), "records cannot be an array element"),
    (sample(field_nullableVersions="0+"), "int32 cannot be nullable"),
    (sample(field_tag=0), "tag and taggedVersions go together"),
    (sample(field_tag=0, field_taggedVersions="0+"), "taggedVersions 0+ outside flexibleVersions 1+"),
    (sample(field_tag=-1, field_taggedVersions="1+"), "tag must be a non-negative integer"),
    (sample(field_default="abc"), "default 'abc' is not an integer"),
    (sample(field_default="99999999999"), "default 99999999999 outside int32"),
    (sample(field_default="null"), "default null needs nullableVersions"),
    (sample(field_flexibleVersions="none"), "flexibleVersions applies to strings and bytes only"),
    (sample(field_fields=[]), "int32 cannot have nested fields"),
    (sample(field_type="Missing"), "struct Missing has no definition"),
    (sample(apiKey=None), "apiKey is required"),
    (sample(type="event"), "type 'event' is not one of"),
    (sample(validVersions="3-1"), "bad version range '3-1'"),
    (sample(fields=[{"name": "A", "type": "int32", "versions": "0+"}] * 2), "field name 'A' appears twice"),
    (sample(fields=[{"name": n, "type": "int32", "versions": "1+", "taggedVersions": "1+", "tag": 4}
                    for n in "AB"]), "tag 4 appears twice"),
    (sample(fields=[{"name": "9lives", "type": "int32", "versions": "0+"}]), "bad name '9lives'"),
    (sample(fields=[{"name": n, "type": "S", "versions": "0+",
                     "fields": [{"name": "X", "type": "int8", "versions": "0+"}]} for n in "AB"]),
     "struct S is defined twice"),
    ('{"apiKey": 1000, // no closing brace', "not JSON"),
])
def test_bad_definitions_are_rejected_when_loaded(text: str, complaint: str) -> None:
    with pytest.raises(SchemaError, match=complaint.replace("(", r"\(").replace("+", r"\+")):
        parse_definition(text, "sample")


def test_a_struct_containing_itself_is_rejected_when_compiled() -> None:
    text = sample(fields=[{"name": "A", "type": "[]Loop", "versions": "0+"}], commonStructs=[
        {"name": "Loop", "versions": "0+", "fields": [{"name": "Inner", "type": "[]Loop", "versions": "0+"}]}])
    spec = parse_definition(text, "sample")
    with pytest.raises(SchemaError, match="struct Loop contains itself"):
        compile_message(spec, 0)
