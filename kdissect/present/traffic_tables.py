"""The tables of everyday client traffic: `produce`, `fetch`, `groups` and `errors`.

Rows come from the bodies' flat values (`Message.values()`), as for the other
per-API tables, and columns are the schema's field names in snake case, after
the shared context columns (`kdissect.present.table_spec.CONTEXT_DTYPES`). A
topic is `topic_name`, or `topic_id` in the versions that name topics by id
only (Produce v13+, Fetch v13+); Kafka's -1 sentinels are missing values.
Tagged fields are not among the flat values, so they have no columns.

- `produce` and `fetch`: one row per topic-partition of each request and each
  response. Request-only columns are missing in response rows and the other
  way round. Derived: `record_count` (records the batch headers of the
  partition's `Records` field announce; control records included) and
  `records_bytes` (the field's size on the wire), `aborted_transactions` (how
  many a Fetch response lists).
- `groups`: group coordination (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
  OffsetCommit, OffsetFetch, ConsumerGroupHeartbeat, FindCoordinator), one row
  per group and member a message is about. A response names no group, so its
  `group_id` is its request's.
- `errors`: every non-zero ErrorCode anywhere in a decoded body, with its
  field path (as the `fields` table writes paths) and the topic and partition
  it sits under, when it sits under one.
"""

from __future__ import annotations

import functools
from typing import Any

from kdissect.decode.records import decode_records, entries_records
from kdissect.decode.schema.plan import StructPlan, message_plan
from kdissect.decode.walks import Chain, chain_path, chain_structs, error_walk
from kdissect.dissectors import Values, items, known
from kdissect.error_codes import error_name
from kdissect.pair.message import Message
from kdissect.present.table_spec import (
    CONTEXT_DTYPES,
    Row,
    TableSpec,
    direction,
    error,
    uuid_text,
)

PRODUCE, FETCH = 0, 1
LEGACY_ENTRY_HEADER = 17  # offset, size, crc, magic: then a legacy message's attributes
BATCH_RECORD_COUNT = 57  # where a magic 2 batch's record count sits
MESSAGE_COLUMNS = {**CONTEXT_DTYPES, "api_name": "category", "direction": "category",
                   "api_version": "Int64"}


def _tuples(rows: list[dict[str, Any]], dtypes: dict[str, str]) -> list[Row]:
    """Rows given as dicts, as tuples of the columns after the context ones; a column a
    row does not name is missing."""
    names = tuple(dtypes)[len(CONTEXT_DTYPES):]
    return [tuple([row.get(name) for name in names]) for row in rows]


def _message_row(message: Message) -> dict[str, Any]:
    return {"api_name": message.api_name, "direction": direction(message), "api_version": message.api_version}


def _topic(topic: Values) -> dict[str, Any]:
    name = topic.get("Name", topic.get("Topic"))
    return {"topic_name": name, "topic_id": uuid_text(topic.get("TopicId"))}


def record_count(data: Any) -> int:
    """Records a `records` field's complete entries announce: a magic 2 batch's record count
    (control records included), the messages of a legacy message set (a compressed
    wrapper's inner messages are counted by decoding it)."""
    if not isinstance(data, bytes | bytearray | memoryview):
        return 0
    data = bytes(data)
    count, position, end = 0, 0, len(data)
    while position + LEGACY_ENTRY_HEADER + 1 <= end:
        size = int.from_bytes(data[position + 8 : position + 12], "big", signed=True)
        stop = position + 12 + size
        if size < LEGACY_ENTRY_HEADER - 12 + 1 or stop > end:
            break
        magic = data[position + 16]
        if magic == 2 and stop >= position + BATCH_RECORD_COUNT + 4:
            count += max(0, int.from_bytes(data[position + BATCH_RECORD_COUNT : position + 61], "big",
                                           signed=True))
        elif magic in (0, 1) and data[position + LEGACY_ENTRY_HEADER] & 0x07:
            count += entries_records(decode_records(data[position:stop]))[0]
        elif magic in (0, 1):
            count += 1
        position = stop
    return count


def _records(data: Any) -> dict[str, Any]:
    sized = isinstance(data, bytes | bytearray | memoryview)
    return {"record_count": record_count(data) if sized else None,
            "records_bytes": len(data) if sized else None}


# -- produce ---------------------------------------------------------------------------

PRODUCE_DTYPES = {
    **MESSAGE_COLUMNS,
    "topic_name": "category", "topic_id": "string", "partition_index": "Int64",
    "record_count": "Int64", "records_bytes": "Int64", "partition_error": "category",
    "error_message": "string", "base_offset": "Int64", "log_append_time": "utc_ms",
    "log_start_offset": "Int64", "throttle_time_ms": "Int64", "acks": "Int64",
    "timeout_ms": "Int64", "transactional_id": "string",
}  # fmt: skip


def produce_rows(message: Message, body: Values) -> list[Row]:
    """Requests: what each partition is sent (acks, timeout, transactional id, records);
    responses: where the broker put it (base offset, log append time) or why not."""
    return _tuples(_produce_rows(message, body), PRODUCE_DTYPES)


def _produce_rows(message: Message, body: Values) -> list[dict[str, Any]]:
    row = _message_row(message)
    rows = []
    if message.is_request:
        row |= {"acks": body.get("Acks"), "timeout_ms": body.get("TimeoutMs"),
                "transactional_id": body.get("TransactionalId")}
        for topic in items(body, "TopicData"):
            for partition in items(topic, "PartitionData"):
                rows.append({**row, **_topic(topic), "partition_index": partition.get("Index"),
                             **_records(partition.get("Records"))})
        return rows or [row]
    row["throttle_time_ms"] = body.get("ThrottleTimeMs")
    for topic in items(body, "Responses"):
        for partition in items(topic, "PartitionResponses"):
            rows.append({
                **row, **_topic(topic), "partition_index": partition.get("Index"),
                "partition_error": error(partition.get("ErrorCode")),
                "error_message": partition.get("ErrorMessage"),
                "base_offset": known(partition.get("BaseOffset")),
                "log_append_time": known(partition.get("LogAppendTimeMs")),
                "log_start_offset": known(partition.get("LogStartOffset")),
            })  # fmt: skip
    return rows or [row]  # a message of no partition is one row: it still happened


# -- fetch -----------------------------------------------------------------------------

FETCH_DTYPES = {
    **MESSAGE_COLUMNS,
    "topic_name": "category", "topic_id": "string", "partition_index": "Int64",
    "record_count": "Int64", "records_bytes": "Int64", "error": "category",
    "partition_error": "category", "high_watermark": "Int64", "last_stable_offset": "Int64",
    "log_start_offset": "Int64", "aborted_transactions": "Int64",
    "preferred_read_replica": "Int64", "throttle_time_ms": "Int64", "replica_id": "Int64",
    "max_wait_ms": "Int64", "min_bytes": "Int64", "max_bytes": "Int64",
    "isolation_level": "Int64", "session_id": "Int64", "session_epoch": "Int64",
    "fetch_offset": "Int64", "current_leader_epoch": "Int64", "last_fetched_epoch": "Int64",
    "partition_max_bytes": "Int64",
}  # fmt: skip

_FETCH_REQUEST = {"ReplicaId": "replica_id", "MaxWaitMs": "max_wait_ms", "MinBytes": "min_bytes",
                  "MaxBytes": "max_bytes", "IsolationLevel": "isolation_level",
                  "SessionId": "session_id", "SessionEpoch": "session_epoch"}
_FETCH_PARTITION = {"FetchOffset": "fetch_offset", "CurrentLeaderEpoch": "current_leader_epoch",
                    "LastFetchedEpoch": "last_fetched_epoch", "LogStartOffset": "log_start_offset",
                    "PartitionMaxBytes": "partition_max_bytes"}


def fetch_rows(message: Message, body: Values) -> list[Row]:
    """Requests: what a consumer or follower asks of each partition (its session, wait and
    offsets); responses: what each partition answered (watermarks, records, error). A
    message of no partition is one row, topic and partition missing."""
    return _tuples(_fetch_rows(message, body), FETCH_DTYPES)


def _fetch_rows(message: Message, body: Values) -> list[dict[str, Any]]:
    row = _message_row(message)
    rows = []
    if message.is_request:
        row |= {column: body.get(name) for name, column in _FETCH_REQUEST.items()}
        # -1: a consumer, not a follower. From v15 a follower's id is in the tagged
        # ReplicaState, which a consumer leaves out: missing then.
        state = body.get("ReplicaState")
        if type(state) is dict:
            row["replica_id"] = state.get("ReplicaId")
        row["replica_id"] = known(row["replica_id"])
        for topic in items(body, "Topics"):
            for partition in items(topic, "Partitions"):
                offsets = {column: known(partition.get(name)) for name, column in _FETCH_PARTITION.items()}
                rows.append({**row, **_topic(topic), "partition_index": partition.get("Partition"),
                             **offsets})
        return rows or [row]  # an incremental fetch with nothing to change: its session shows
    row |= {"throttle_time_ms": body.get("ThrottleTimeMs"), "session_id": body.get("SessionId"),
            "error": error(body.get("ErrorCode")) if "ErrorCode" in body else None}
    for topic in items(body, "Responses"):
        for partition in items(topic, "Partitions"):
            aborted = partition.get("AbortedTransactions")
            rows.append({
                **row, **_topic(topic), "partition_index": partition.get("PartitionIndex"),
                **_records(partition.get("Records")),
                "partition_error": error(partition.get("ErrorCode")),
                "high_watermark": known(partition.get("HighWatermark")),
                "last_stable_offset": known(partition.get("LastStableOffset")),
                "log_start_offset": known(partition.get("LogStartOffset")),
                "aborted_transactions": len(aborted) if isinstance(aborted, list) else None,
                "preferred_read_replica": known(partition.get("PreferredReadReplica")),
            })  # fmt: skip
    return rows or [row]  # no partition: the session and a top-level error still show


# -- groups ----------------------------------------------------------------------------

GROUPS_DTYPES = {
    **MESSAGE_COLUMNS,
    "group_id": "category", "member_id": "category",
    "group_instance_id": "category", "generation_id": "Int64", "member_epoch": "Int64",
    "protocol_type": "category", "protocol_name": "category", "leader": "category",
    "member_count": "Int64", "key_type": "category", "coordinator_key": "category",
    "node_id": "Int64", "host": "string", "port": "Int64", "error": "category",
    "error_message": "string", "throttle_time_ms": "Int64",
}  # fmt: skip

# What identifies a member: a response row takes these from its request's row.
IDENTITY = ("group_id", "member_id", "group_instance_id", "generation_id", "member_epoch",
            "key_type", "coordinator_key")
KEY_TYPES = {0: "group", 1: "transaction", 2: "share"}  # FindCoordinator's KeyType
Rows = list[dict[str, Any]]


def _outcome(body: Values) -> dict[str, Any]:
    return {"error": error(body.get("ErrorCode")) if "ErrorCode" in body else None,
            "error_message": body.get("ErrorMessage"), "throttle_time_ms": body.get("ThrottleTimeMs")}


def _member(body: Values) -> dict[str, Any]:
    return {"group_id": body.get("GroupId"), "member_id": body.get("MemberId"),
            "group_instance_id": body.get("GroupInstanceId", body.get("InstanceId")),
            "generation_id": known(body.get("GenerationId", body.get("GenerationIdOrMemberEpoch"))),
            "member_epoch": body.get("MemberEpoch")}


def _join_group(body: Values, request: bool) -> Rows:
    if request:
        offered = ",".join(str(p.get("Name")) for p in items(body, "Protocols"))
        return [{**_member(body), "protocol_type": body.get("ProtocolType"), "protocol_name": offered}]
    return [{**_member(body), **_outcome(body), "protocol_type": body.get("ProtocolType"),
             "protocol_name": body.get("ProtocolName"), "leader": body.get("Leader"),
             "member_count": len(items(body, "Members"))}]


def _sync_group(body: Values, request: bool) -> Rows:
    row = {"protocol_type": body.get("ProtocolType"), "protocol_name": body.get("ProtocolName")}
    if request:
        return [{**_member(body), **row, "member_count": len(items(body, "Assignments"))}]
    return [{**row, **_outcome(body)}]


def _heartbeat(body: Values, request: bool) -> Rows:
    return [{**_member(body), **({} if request else _outcome(body))}]


def _leave_group(body: Values, request: bool) -> Rows:
    members = items(body, "Members")  # v3+: several members leave at once
    if request:
        return [{**_member(body), **_member(m), "group_id": body.get("GroupId")}
                for m in members] or [_member(body)]
    outcome = _outcome(body)
    if not members:
        return [outcome]
    failed = outcome["error"] not in (None, "NONE")
    return [{**_member(m), **outcome, "error": outcome["error"] if failed else error(m.get("ErrorCode"))}
            for m in members]


def _first_error(body: Values, topics: str = "Topics") -> str:
    """The body's own ErrorCode when non-zero, else its first non-zero partition error."""
    codes = [body.get("ErrorCode") or 0, *(p.get("ErrorCode") or 0 for t in items(body, topics)
                                           for p in items(t, "Partitions"))]
    return error(next((code for code in codes if code), 0))


def _offset_commit(body: Values, request: bool) -> Rows:
    if request:
        return [_member(body)]
    return [{**_outcome(body), "error": _first_error(body)}]


def _offset_fetch(body: Values, request: bool) -> Rows:
    groups = items(body, "Groups")  # v8+: several groups in one call
    if request:
        return [_member(g) for g in groups] or [_member(body)]
    throttle = body.get("ThrottleTimeMs")
    if groups:
        return [{"group_id": g.get("GroupId"), "error": _first_error(g), "throttle_time_ms": throttle}
                for g in groups]
    return [{"error": _first_error(body), "throttle_time_ms": throttle}]


def _consumer_group_heartbeat(body: Values, request: bool) -> Rows:
    return [{**_member(body), **({} if request else _outcome(body))}]


def _coordinator(entry: Values) -> dict[str, Any]:
    # No coordinator: Kafka answers node -1, host "" and port -1, all missing here.
    return {"node_id": known(entry.get("NodeId")), "host": entry.get("Host") or None,
            "port": known(entry.get("Port")), **_outcome(entry)}


def _find_coordinator(body: Values, request: bool) -> Rows:
    if request:
        kind = KEY_TYPES.get(body.get("KeyType", 0), str(body.get("KeyType")))
        keys = body.get("CoordinatorKeys") if "CoordinatorKeys" in body else [body.get("Key")]
        return [{"key_type": kind, "coordinator_key": key, "group_id": key if kind == "group" else None}
                for key in keys or []]
    coordinators = items(body, "Coordinators")  # v4+: one per key asked
    throttle = body.get("ThrottleTimeMs")
    if coordinators:
        return [{**_coordinator(c), "coordinator_key": c.get("Key"), "throttle_time_ms": throttle}
                for c in coordinators]
    return [_coordinator(body)]


GROUP_APIS = {11: _join_group, 14: _sync_group, 12: _heartbeat, 13: _leave_group,
              8: _offset_commit, 9: _offset_fetch, 68: _consumer_group_heartbeat,
              10: _find_coordinator}


def group_rows(message: Message, body: Values) -> list[Row]:
    """One row per group and member the message is about; a response's rows take the
    identity (group, member, generation, coordinator key) of its request's rows."""
    assert message.api_key is not None
    rows_of = GROUP_APIS[message.api_key]
    found = rows_of(body, message.is_request)
    if not message.is_request:
        asked_body = None if message.pair is None else message.pair.values(keep=False)
        asked = [] if asked_body is None else rows_of(asked_body, True)
        found = [_identified(row, asked, index, len(found)) for index, row in enumerate(found)]
    base = _message_row(message)
    return _tuples([{**base, **row} for row in found], GROUPS_DTYPES)


def _identified(row: dict[str, Any], asked: Rows, index: int, count: int) -> dict[str, Any]:
    """A response row with its request row's identity (the row at the same place when both
    have as many rows; else only the group, when the request names one); the response's
    own values win."""
    if len(asked) == count:
        identity = {k: asked[index].get(k) for k in IDENTITY}
    else:
        groups = {r.get("group_id") for r in asked}
        identity = {"group_id": groups.pop()} if len(groups) == 1 else {}
    return {**identity, **{k: v for k, v in row.items() if v is not None}}


# -- errors ----------------------------------------------------------------------------

ERRORS_DTYPES = {
    **MESSAGE_COLUMNS,
    "path": "string", "field": "category", "error_code": "Int64",
    "error": "category", "error_message": "string", "topic_name": "category",
    "topic_id": "string", "partition_index": "Int64",
}  # fmt: skip

TOPIC_NAMES = ("Name", "Topic", "TopicName")
PARTITION_INDEXES = ("PartitionIndex", "Partition", "Index")


def error_rows(message: Message, body: Values) -> list[Row]:
    """Every non-zero `...ErrorCode` field of the body, wherever it sits."""
    found = _errors(message, body)
    if not found:
        return []
    base = _message_row(message)
    return _tuples([{**base, **where, "path": path, "field": field, "error_code": code,
                     "error": error_name(code), "error_message": sibling}
                    for path, field, code, sibling, where in found], ERRORS_DTYPES)


def _errors(message: Message, body: Values) -> list[tuple[str, str, int, Any, dict[str, Any]]]:
    """(path, field, code, its ErrorMessage, topic and partition) of each non-zero error code,
    found by the plan's error walk (the one `-i` counts errors with)."""
    if message.api_key is None or message.api_version is None:
        return []
    plan = message_plan(message.api_key, message.api_version, message.kind)
    if plan is None:
        return []
    found: list[tuple[str, str, int, Any, dict[str, Any]]] = []

    def add(field: str, code: int, chain: Chain) -> None:
        message_field = chain[0].get(field[: -len("Code")] + "Message")
        found.append((chain_path(chain, field), field, code, message_field, _where(chain_structs(chain))))

    error_walk(plan.body)(body, add)
    return found


def _where(structs: list[Values]) -> dict[str, Any]:
    """The topic and partition the innermost of `structs` sits under (outermost first), each
    struct's own fields updating what the structs around it say."""
    found: dict[str, Any] = {}
    for values in structs:
        for name in TOPIC_NAMES:
            if isinstance(values.get(name), str):
                found["topic_name"] = values[name]
                found.pop("partition_index", None)
        if values.get("TopicId") is not None:
            found["topic_id"] = uuid_text(values.get("TopicId"))
            found.pop("partition_index", None)
        for name in PARTITION_INDEXES:
            if type(values.get(name)) is int:
                found["partition_index"] = values[name]
    return found


def carries_error_codes(message: Message) -> bool:
    """Whether the message's definition has an `...ErrorCode` field anywhere (checked once
    per API, version and direction): the errors table decodes no other body."""
    if message.api_key is None or message.api_version is None:
        return False
    return _plan_has_error_codes(message.api_key, message.api_version, message.kind)


@functools.cache
def _plan_has_error_codes(api_key: int, version: int, kind: str) -> bool:
    plan = message_plan(api_key, version, kind)
    return plan is not None and _struct_has_error_codes(plan.body, set())


def _struct_has_error_codes(plan: StructPlan, seen: set[str]) -> bool:
    if plan.name in seen:
        return False
    seen.add(plan.name)
    for field in plan.fields:
        inner = field.element if field.element is not None else field
        if field.name.endswith("ErrorCode") or (
                inner.struct is not None and _struct_has_error_codes(inner.struct, seen)):
            return True
    return False


GROUP_API_KEYS = frozenset(GROUP_APIS)

TRAFFIC_TABLES = (
    TableSpec("produce", frozenset({PRODUCE}), None, PRODUCE_DTYPES, produce_rows),
    TableSpec("fetch", frozenset({FETCH}), None, FETCH_DTYPES, fetch_rows),
    TableSpec("groups", GROUP_API_KEYS, None, GROUPS_DTYPES, group_rows),
    TableSpec("errors", frozenset(), None, ERRORS_DTYPES, error_rows, carries_error_codes),
)

__all__ = ["ERRORS_DTYPES", "FETCH_DTYPES", "GROUPS_DTYPES", "PRODUCE_DTYPES", "TRAFFIC_TABLES",
           "record_count"]
