"""Every field a display filter can name, and how its values are read from a message.

Three families:

- message columns and addresses, read from the header, the frame and the pairing
  without decoding anything (`api_key`, `latency_ms`, `ip.addr`, `tcp.port`, `expert`...);
- body fields, by schema name at any depth (`ErrorCode`) or by path
  (`Topics[].Partitions[].LeaderId`, `Topics[0].Name`), checked against the loaded
  Kafka definitions and read through `BodyFields`;
- Wireshark's Kafka field names (`kafka.api_key`, `kafka.error_code`,
  `kafka.topic_name`...), each an alias of a column or of body paths.

`BodyFields` is the one place that knows how a decoded body is stored: an
ordinary body is read from its flat values (`ValuesBody`, no tree built), any
other from the interpreter's tree (`TreeBody`, which explains what went wrong);
both give the same values in the same order for a body both can read.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from kdissect.decode.dissect import message_body
from kdissect.decode.record_values import entries_values
from kdissect.decode.schema.loader import (
    active_sources,
    load_definitions,
    on_sources_change,
    shipped_api_keys,
)
from kdissect.decode.schema.model import FieldSpec, MessageSpec
from kdissect.decode.schema.plan import Kind, StructPlan, message_plan
from kdissect.decode.tree import Node
from kdissect.decode.values import Values
from kdissect.dissectors import GeneratedValue
from kdissect.dissectors.registry import dissector
from kdissect.ingest.net import format_address
from kdissect.notes import EXPERT, Note
from kdissect.pair.message import Message

# Value kinds a filter compares; each field has one or more.
NUMBER, STRING, BOOLEAN, UUID, BYTES, ADDRESS, STRUCT = (
    "number", "string", "boolean", "uuid", "bytes", "address", "struct")  # fmt: skip
_PRIMITIVE_KINDS = {
    "int8": NUMBER, "int16": NUMBER, "int32": NUMBER, "int64": NUMBER, "uint16": NUMBER,
    "uint32": NUMBER, "varint": NUMBER, "varlong": NUMBER, "float64": NUMBER, "string": STRING,
    "bool": BOOLEAN, "uuid": UUID, "bytes": BYTES, "records": BYTES,
}  # fmt: skip
# Values computed by the dissectors rather than read from the wire: name -> (type, parents).
GENERATED_FIELDS = {"lag": ("int64", frozenset({"CurrentVoters", "Observers"}))}
# The fields of the record batches inside a `records` field, as `kdissect.decode.record_nodes`
# names them in the tree (-V): in no message definition, reachable by name in the bodies of
# the APIs that carry records. `attributes` is left out: a batch's has its bits below it.
_BATCH_FIELDS = {
    "baseOffset": "int64", "batchLength": "int32", "partitionLeaderEpoch": "int32",
    "magic": "int8", "crc": "uint32", "lastOffsetDelta": "int32", "baseTimestamp": "int64",
    "maxTimestamp": "int64", "producerId": "int64", "producerEpoch": "int16",
    "baseSequence": "int32", "recordCount": "int32", "records": "[]Record",
    "compression": "string", "timestampType": "string", "isTransactional": "bool", "isControl": "bool",
}  # fmt: skip
_RECORD_FIELDS = {
    "timestampDelta": "varlong", "timestamp": "int64", "offsetDelta": "varint", "offset": "int64",
    "keyLength": "varint", "key": "bytes", "valueLength": "varint", "value": "bytes", "headers": "[]Header",
}  # fmt: skip
_HEADER_FIELDS = {"headerKeyLength": "varint", "headerKey": "string", "headerValueLength": "varint",
                  "headerValue": "bytes"}
RECORD_FIELDS = {**_BATCH_FIELDS, **_RECORD_FIELDS, **_HEADER_FIELDS}
_RECORD_CHILDREN = {"records": frozenset(_RECORD_FIELDS), "headers": frozenset(_HEADER_FIELDS)}
_STRUCTURAL = frozenset({"length", "tagged_fields", "presence"})  # wire scaffolding, not fields
_ELEMENT = re.compile(r".*\[(\d+)\]")


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a body path: a field name, and which array elements (None: all)."""

    name: str
    index: int | None = None
    brackets: bool = False  # written with [] or [N]

    def __str__(self) -> str:
        if not self.brackets:
            return self.name
        return f"{self.name}[{'' if self.index is None else self.index}]"


Path = tuple[Step, ...]


# -- message columns -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Column:
    """A field read without decoding the body: its kind, type label and reader."""

    kind: str
    label: str
    read: Callable[[Message], Iterable[Any]]
    costly: bool = False  # may decode the body (expert notes of a decoded tree)
    relative: bool = False  # epoch seconds, given as seconds since the capture's first packet
    capture_wide: bool = False  # numbered over the whole capture (messages, connections)
    answered: bool = False  # a request's answer: known when the request is released, not when read

    @property
    def on_worker(self) -> bool:
        """Whether a worker process of `--jobs` reads it as one process does: it depends on
        the message, its connection and its pair alone (`filter.BodyTests`), and not on a
        request's answer, which comes after the worker reads the request."""
        return not (self.costly or self.relative or self.capture_wide or self.answered)


def _one(read: Callable[[Message], Any]) -> Callable[[Message], Iterable[Any]]:
    def values(message: Message) -> Iterable[Any]:
        value = read(message)
        return () if value is None else (value,)

    return values


def _ends(message: Message) -> tuple[Any, Any]:
    connection = message.frame.connection
    return (connection.client, connection.server) if message.is_request else (
        connection.server, connection.client)


def _ip(address: Any) -> Any:
    raw = address[0]
    return ipaddress.ip_address(raw) if len(raw) in (4, 16) else None


def _client_id(message: Message) -> str | None:
    """A request's client id; a response answers for its request's (taken on pairing)."""
    return message.client_id


def _latency_ms(message: Message) -> float | None:
    latency = message.latency
    return None if latency is None else round(latency * 1000.0, 6)


def _only(requests: bool, read: Callable[[Message], Any]) -> Callable[[Message], Any]:
    """A request's or a response's value only, as tshark's kafka.request_key/response_key."""
    return lambda message: read(message) if message.is_request == requests else None


def _pair_frame(want_request: bool) -> Callable[[Message], int | None]:
    def frame(message: Message) -> int | None:
        pair = message.pair
        if pair is None or pair.is_request != want_request:
            return None
        return pair.frame.last_packet

    return frame


def _notes(message: Message, decode: bool) -> list[Any]:
    found = message.all_notes()
    if decode and message._tree is None and message.api_key in body_api_keys():
        seen = {(n.severity, n.message) for n in found}
        tree = message.tree(keep=False)
        found.extend(n for n in tree.all_notes() if (n.severity, n.message) not in seen)
    return found


def _expert(part: Callable[[Any], Any]) -> Callable[[Message], Iterator[Any]]:
    def values(message: Message) -> Iterator[Any]:
        for item in _notes(message, decode=False):  # the cheap notes first
            yield part(item)
        if message._tree is None and message.api_key in body_api_keys():
            known = len(message.all_notes())
            for item in _notes(message, decode=True)[known:]:
                yield part(item)

    return values


def _group(note: Note) -> str | None:
    """The expert group of a note's id (Wireshark's `expert.group`), None without an id."""
    expert = EXPERT.get(note.id)
    return None if expert is None else str(expert.group)


def _columns() -> dict[str, Column]:
    number, string = NUMBER, STRING
    one = _one
    columns = {
        "number": Column(number, "integer", one(lambda m: m.number), capture_wide=True),
        "frame": Column(number, "frame number", one(lambda m: m.frame.last_packet)),
        "time": Column(number, "epoch seconds", one(lambda m: m.time)),
        "time_relative": Column(number, "seconds since the capture's first packet", one(lambda m: m.time),
                                relative=True),
        "stream": Column(number, "integer", one(lambda m: m.frame.connection.index), capture_wide=True),
        "src": Column(string, "address:port", one(lambda m: format_address(_ends(m)[0]))),
        "dst": Column(string, "address:port", one(lambda m: format_address(_ends(m)[1]))),
        "direction": Column(string, "string", one(lambda m: str(m.direction))),
        "api_key": Column(number, "int16", one(lambda m: m.api_key)),
        "api_name": Column(string, "string", one(lambda m: m.api_name)),
        "api_version": Column(number, "int16", one(lambda m: m.api_version)),
        "correlation_id": Column(number, "int32", one(lambda m: m.correlation_id)),
        "client_id": Column(string, "string", one(_client_id)),
        "length": Column(number, "int32", one(lambda m: m.length)),
        "pair": Column(number, "message number", one(lambda m: None if m.pair is None else m.pair.number),
                       capture_wide=True),
        "latency_ms": Column(number, "milliseconds", one(_latency_ms)),
        "tls": Column(BOOLEAN, "boolean", one(lambda m: m.frame.connection.tls)),
        "file": Column(string, "capture file", one(lambda m: m.file)),
        "notes": Column(string, "string", _expert(str), costly=True),
        "expert": Column(string, "expert id", _expert(lambda n: n.id or None), costly=True),
        "expert.severity": Column(string, "severity", _expert(lambda n: str(n.severity)), costly=True),
        "expert.group": Column(string, "expert group", _expert(_group), costly=True),
        "expert.message": Column(string, "string", _expert(lambda n: n.message), costly=True),
        "ip.src": Column(ADDRESS, "IP address", one(lambda m: _ip(_ends(m)[0]))),
        "ip.dst": Column(ADDRESS, "IP address", one(lambda m: _ip(_ends(m)[1]))),
        "ip.addr": Column(ADDRESS, "IP address", lambda m: [_ip(end) for end in _ends(m)]),
        "tcp.srcport": Column(number, "uint16", one(lambda m: _ends(m)[0][1])),
        "tcp.dstport": Column(number, "uint16", one(lambda m: _ends(m)[1][1])),
        "tcp.port": Column(number, "uint16", lambda m: [end[1] for end in _ends(m)]),
        "kafka.request_key": Column(number, "int16", one(_only(True, lambda m: m.api_key))),
        "kafka.response_key": Column(number, "int16", one(_only(False, lambda m: m.api_key))),
        "kafka.request.version": Column(number, "int16", one(_only(True, lambda m: m.api_version))),
        "kafka.response.version": Column(number, "int16", one(_only(False, lambda m: m.api_version))),
        "kafka.request_frame": Column(number, "frame number", one(_pair_frame(want_request=True))),
        "kafka.response_frame": Column(number, "frame number", one(_pair_frame(want_request=False)),
                                       answered=True),
    }
    aliases = {
        "frame.number": "frame", "frame.time_epoch": "time", "frame.time_relative": "time_relative",
        "tcp.stream": "stream",
        "kafka.api_key": "api_key", "kafka.api_version": "api_version",
        "kafka.correlation_id": "correlation_id",
        "kafka.client_id": "client_id", "kafka.len": "length",
    }  # fmt: skip
    columns.update((alias, columns[name]) for alias, name in aliases.items())
    return columns


COLUMNS: dict[str, Column] = _columns()

# Wireshark's Kafka field names for body fields (`tshark -G fields`), as body paths: a
# filter written for tshark runs here unchanged. A path no loaded definition has is left
# out; a name whose paths are all unknown never matches, and is not an error.
KAFKA_BODY_ALIASES: dict[str, tuple[str, ...]] = {
    # errors, topics, partitions, brokers
    "kafka.error": ("ErrorCode",), "kafka.error_code": ("ErrorCode",),
    "kafka.error_message": ("ErrorMessage",), "kafka.throttle_time": ("ThrottleTimeMs",),
    "kafka.topic_name": ("Topics.Name", "TopicName", "TopicData.Name", "Responses.Name", "Topics.Topic", "Responses.Topic"), "kafka.topic_id": ("TopicId",),
    "kafka.partition_id": ("PartitionIndex", "PartitionIndexes", "PartitionId", "Index", "Partition"),
    "kafka.leader_id": ("LeaderId",),
    "kafka.leader_epoch": ("LeaderEpoch", "CommittedLeaderEpoch", "partitionLeaderEpoch"),
    "kafka.current_leader_epoch": ("CurrentLeaderEpoch",),
    "kafka.replica_id": ("ReplicaId", "ReplicaNodes"), "kafka.isr_id": ("IsrNodes",),
    "kafka.offline_id": ("OfflineReplicas",), "kafka.node_id": ("NodeId",),
    "kafka.host": ("Host",), "kafka.port": ("Port",), "kafka.rack": ("Rack",),
    "kafka.is_internal": ("IsInternal",), "kafka.cluster_id": ("ClusterId",),
    "kafka.broker_epoch": ("BrokerEpoch",), "kafka.controller_epoch": ("ControllerEpoch",),
    "kafka.num_partitions": ("NumPartitions",), "kafka.replication_factor": ("ReplicationFactor",),
    "kafka.partition_count": ("Count",), "kafka.validate_only": ("ValidateOnly",),
    "kafka.allow_auto_topic_creation": ("AllowAutoTopicCreation",),
    "kafka.api_versions.api_key": ("ApiKeys.ApiKey",),
    "kafka.api_versions.min_version": ("ApiKeys.MinVersion",),
    "kafka.api_versions.max_version": ("ApiKeys.MaxVersion",),
    "kafka.client_software_name": ("ClientSoftwareName",),
    "kafka.client_software_version": ("ClientSoftwareVersion",),
    # producing, fetching, offsets
    "kafka.required_acks": ("Acks",), "kafka.timeout": ("TimeoutMs",),
    "kafka.max_wait_time": ("MaxWaitMs",), "kafka.min_bytes": ("MinBytes",), "kafka.max_bytes": ("MaxBytes",),
    "kafka.isolation_level": ("IsolationLevel",),
    "kafka.fetch_session_id": ("SessionId",), "kafka.fetch_session_epoch": ("SessionEpoch",),
    "kafka.forgotten_topic_name": ("ForgottenTopicsData.Topic",),
    "kafka.forgotten_topic_partition": ("ForgottenTopicsData.Partitions",),
    "kafka.high_watermark": ("HighWatermark",), "kafka.log_start_offset": ("LogStartOffset",),
    "kafka.last_stable_offset": ("LastStableOffset",), "kafka.first_offset": ("FirstOffset",),
    "kafka.offset": ("Offset", "CommittedOffset", "BaseOffset", "FetchOffset", "baseOffset", "offset"),
    "kafka.offset_time": ("Timestamp", "LogAppendTimeMs"), "kafka.max_offsets": ("MaxNumOffsets",),
    "kafka.metadata": ("CommittedMetadata",), "kafka.commit_timestamp": ("CommitTimestamp",),
    "kafka.retention_time": ("RetentionTimeMs",), "kafka.require_stable_offset": ("RequireStable",),
    "kafka.offset_lag": ("OffsetLag",),
    # producers and transactions
    "kafka.producer_id": ("ProducerId", "V3AndBelowProducerId", "producerId"),
    "kafka.producer_epoch": ("ProducerEpoch", "V3AndBelowProducerEpoch", "producerEpoch"),
    "kafka.transactional_id": ("TransactionalId", "V3AndBelowTransactionalId"),
    "kafka.transaction_timeout": ("TransactionTimeoutMs",), "kafka.transaction_result": ("Committed",),
    "kafka.coordinator_epoch": ("CoordinatorEpoch",),
    # groups and coordinators
    "kafka.consumer_group": ("GroupId", "Groups", "GroupsNames", "GroupIds"),
    "kafka.consumer_group_instance": ("GroupInstanceId",),
    "kafka.member_id": ("MemberId",), "kafka.generation_id": ("GenerationId", "GenerationIdOrMemberEpoch"),
    "kafka.group_state": ("GroupState",), "kafka.protocol_type": ("ProtocolType",),
    "kafka.protocol_name": ("ProtocolName", "Protocols.Name", "ProtocolData"),
    "kafka.session_timeout": ("SessionTimeoutMs",), "kafka.rebalance_timeout": ("RebalanceTimeoutMs",),
    "kafka.client_host": ("ClientHost",),
    "kafka.coordinator_key": ("Key", "CoordinatorKeys"), "kafka.coordinator_type": ("KeyType",),
    # security, configuration, ACLs, delegation tokens
    "kafka.sasl_mechanism": ("Mechanism",), "kafka.sasl_authentication": ("AuthBytes",),
    "kafka.session_lifetime_ms": ("SessionLifetimeMs",),
    "kafka.config_resource_type": ("ResourceType",), "kafka.config_resource_name": ("ResourceName",),
    "kafka.config_key": ("Configs.Name", "ConfigurationKeys"), "kafka.config_value": ("Configs.Value",),
    "kafka.config_operation": ("ConfigOperation",), "kafka.config_source": ("ConfigSource",),
    "kafka.config_default": ("IsDefault",), "kafka.config_readonly": ("ReadOnly",),
    "kafka.config_sensitive": ("IsSensitive",), "kafka.config_include_synonyms": ("IncludeSynonyms",),
    "kafka.acl_resource_type": ("ResourceType", "ResourceTypeFilter"),
    "kafka.acl_resource_name": ("ResourceName", "ResourceNameFilter"),
    "kafka.acl_resource_pattern_type": ("ResourcePatternType", "PatternType", "PatternTypeFilter"),
    "kafka.acl_principal": ("Principal", "PrincipalFilter"), "kafka.acl_operation": ("Operation",),
    "kafka.acl_permission_type": ("PermissionType",),
    "kafka.principal_type": ("PrincipalType",), "kafka.principal_name": ("PrincipalName",),
    "kafka.token_id": ("TokenId",), "kafka.token_hmac": ("Hmac",),
    "kafka.token_issue_timestamp": ("IssueTimestampMs",),
    "kafka.token_expiry_timestamp": ("ExpiryTimestampMs",),
    "kafka.token_max_timestamp": ("MaxTimestampMs",), "kafka.token_max_life_time": ("MaxLifetimeMs",),
    "kafka.renew_time": ("RenewPeriodMs",), "kafka.expiry_time": ("ExpiryTimePeriodMs",),
    "kafka.cluster_authorized_ops": ("ClusterAuthorizedOperations",),
    "kafka.topic_authorized_ops": ("TopicAuthorizedOperations",),
    "kafka.group_authorized_ops": ("AuthorizedOperations",),
    "kafka.include_cluster_authorized_ops": ("IncludeClusterAuthorizedOperations",),
    "kafka.include_topic_authorized_ops": ("IncludeTopicAuthorizedOperations",),
    "kafka.include_group_authorized_ops": ("IncludeAuthorizedOperations",),
    "kafka.election_type": ("ElectionType",),
    # inside record batches and legacy message sets, by the names -V gives them
    "kafka.message_key": ("key",), "kafka.message_value": ("value",),
    "kafka.header_key": ("headerKey",), "kafka.header_value": ("headerValue",),
    "kafka.message_timestamp": ("timestamp",),
    "kafka.batch_codec": ("compression",), "kafka.message_codec": ("compression",),
    "kafka.batch_timestamp_type": ("timestampType",), "kafka.message_timestamp_type": ("timestampType",),
    "kafka.batch_transactional": ("isTransactional",), "kafka.batch_control_batch": ("isControl",),
    "kafka.batch_last_offset_delta": ("lastOffsetDelta",),
    "kafka.batch_first_timestamp": ("baseTimestamp",), "kafka.batch_last_timestamp": ("maxTimestamp",),
    "kafka.batch_base_sequence": ("baseSequence",), "kafka.batch_size": ("batchLength",),
    "kafka.batch_crc": ("crc",), "kafka.message_crc": ("crc",), "kafka.message_magic": ("magic",),
}  # fmt: skip


# -- body fields: what the loaded definitions allow --------------------------------


@dataclass(slots=True)
class SchemaIndex:
    """Field names of every loaded message body: their types, sub-fields and APIs."""

    types: dict[str, set[str]]  # name -> Kafka type texts ("int32", "[]TopicResponse")
    children: dict[str, set[str]]  # name -> names of the fields of its struct
    apis: dict[str, set[int]]  # name -> API keys whose bodies have it
    # name -> every spelling of it that differs only in case (Kafka's own CreateTopics
    # writes `timeoutMs` where every other message writes `TimeoutMs`); definitions only
    spellings: dict[str, set[str]]

    def kinds(self, name: str) -> set[str]:
        return {value_kind(text) for text in self.types.get(name, ())}

    def is_array(self, name: str) -> bool:
        return any(text.startswith("[]") for text in self.types.get(name, ()))


def value_kind(type_text: str) -> str:
    """The kind of a field's values; an array's are its elements'."""
    element = type_text.removeprefix("[]")
    return _PRIMITIVE_KINDS.get(element, STRUCT)


@cache
def schema_index() -> SchemaIndex:
    """Every field of every source in use (the operator's --schemas, kafka-python's, ours):
    a message decodes with whichever source has its version, so a filter may name any."""
    index = SchemaIndex({}, {}, {}, {})
    for source in active_sources():
        for spec in load_definitions(source):
            if spec.api_key is not None:
                _index_fields(index, spec, spec.fields, parent=None, seen=frozenset())
    folded: dict[str, set[str]] = {}
    for name in index.types:
        folded.setdefault(name.casefold(), set()).add(name)
    index.spellings = {name: names for names in folded.values() if len(names) > 1 for name in names}
    for name, (type_text, parents) in GENERATED_FIELDS.items():
        index.types.setdefault(name, set()).add(type_text)
        for parent in parents:
            index.children.setdefault(parent, set()).add(name)
            index.apis.setdefault(name, set()).update(index.apis.get(parent, ()))
    carriers = {api for name, texts in index.types.items() if "records" in texts for api in index.apis[name]}
    for name, type_text in RECORD_FIELDS.items():
        index.types.setdefault(name, set()).add(type_text)
        index.apis.setdefault(name, set()).update(carriers)
    for parent, names in _RECORD_CHILDREN.items():
        index.children.setdefault(parent, set()).update(names)
    return index


on_sources_change(schema_index.cache_clear)  # other definitions, other field names


def _index_fields(index: SchemaIndex, spec: MessageSpec, fields: tuple[FieldSpec, ...],
                  parent: str | None, seen: frozenset[str]) -> None:
    for field in fields:
        name = field.name
        index.types.setdefault(name, set()).add(field.type.text)
        index.apis.setdefault(name, set()).add(spec.api_key or 0)
        if parent is not None:
            index.children.setdefault(parent, set()).add(name)
        if not field.type.is_struct or field.type.element in seen:
            continue
        inner = field.fields or _struct_fields(spec, field.type.element)
        _index_fields(index, spec, inner, name, seen | {field.type.element})


def _struct_fields(spec: MessageSpec, name: str) -> tuple[FieldSpec, ...]:
    try:
        return spec.struct(name).fields
    except KeyError:
        return ()


def body_api_keys() -> frozenset[int]:
    """API keys whose bodies are decoded field by field (known without parsing a definition)."""
    return shipped_api_keys()


# -- body fields: reading values ---------------------------------------------------


class BodyFields(Protocol):
    """The values of one decoded message body, by path (any depth for the first step)."""

    def values(self, path: Path) -> Iterator[Any]: ...


@dataclass(frozen=True, slots=True)
class BodyReading:
    """What the fields of a filter or of `-T fields` ask of a body (by default, anything):
    the names their paths start with (only those are indexed), whether a path reaches into
    record batches (only then are a Produce or Fetch body's batches decoded, as values:
    `record_values`), the fields under which no name asked for can lie
    (not walked: a DescribeTopicPartitions response's partitions, for a topic's name), and
    whether the values dissectors derive (DescribeQuorum's `lag`) are asked for."""

    names: frozenset[str] | None = None  # None: any name
    into_records: bool = True
    skip: frozenset[str] = frozenset()
    generated: bool = True  # whether a path names a value a dissector derives (`GENERATED_FIELDS`)

    @classmethod
    def of(cls, paths: Iterable[Path]) -> BodyReading:
        paths = list(paths)
        names = frozenset(path[0].name for path in paths)
        generated = any(step.name in GENERATED_FIELDS for path in paths for step in path)
        return cls(names, any(map(_reaches_records, paths)), _leading_nowhere(names), generated)


EVERY_FIELD = BodyReading()  # what a reader that may ask for any field needs


def _reaches_records(path: Path) -> bool:
    """Whether a path may name a record batch or something inside one, which flat values
    hold only once the batches are decoded (in a body's values they are bytes)."""
    types = schema_index().types
    return any(step.name in RECORD_FIELDS or "records" in types.get(step.name, ()) for step in path)


def _leading_nowhere(names: frozenset[str]) -> frozenset[str]:
    """The fields of any loaded definition under which none of `names` can lie (by name,
    over every API: a name that leads to one anywhere is walked everywhere)."""
    index = schema_index()
    parents: dict[str, set[str]] = {}
    for parent, children in index.children.items():
        for child in children:
            parents.setdefault(child, set()).add(parent)
    carriers = {name for name, types in index.types.items() if "records" in types}
    for name in RECORD_FIELDS:  # what record batches hold lies under the fields holding them
        parents.setdefault(name, set()).update(carriers)
    leading, todo = set(), list(names)
    while todo:
        for parent in parents.get(todo.pop(), ()):
            if parent not in leading:
                leading.add(parent)
                todo.append(parent)
    return frozenset(index.children.keys() - leading)


def body_fields(message: Message, reading: BodyReading = EVERY_FIELD, *, keep: bool = False) -> BodyFields | None:
    """The body of a message for filtering, decoded now (and kept only with `keep`) unless
    it was, read as `reading` says (the promises it makes of the paths asked for)."""
    if message.api_key not in body_api_keys():
        return None
    if not message.is_request and message.pair is None:
        return None  # a response is decodable only through its request
    key, version = message.api_key, message.api_version
    plan = None if key is None or version is None else message_plan(key, version, message.kind)
    if plan is not None:
        values = message.fast_values(keep=keep)
        if values is not None:
            generated = _generated(message, values) if reading.generated else {}
            # paths into record batches find them decoded as values (`record_values`)
            records = _records_fields(plan.body) if reading.into_records else frozenset()
            return ValuesBody(values, generated, reading, records)
    body = message_body(message.tree(keep=keep))
    return None if body is None else TreeBody(body, reading.names)


@cache
def _records_fields(plan: StructPlan) -> frozenset[str]:
    """The names of the `records` fields anywhere in a body."""
    names = set()
    for field in (*plan.fields, *plan.tagged.values()):
        inner = field
        while inner.element is not None:  # an array's elements
            inner = inner.element
        if inner.kind is Kind.RECORDS:
            names.add(field.name)
        elif inner.struct is not None:
            names |= _records_fields(inner.struct)
    return frozenset(names)


def _generated(message: Message, values: Values) -> dict[int, list[GeneratedValue]]:
    meaning = dissector(message.api_key)
    if message.is_request or meaning is None:
        return {}
    return meaning.response_generated_values(values)


class TreeBody:
    """`BodyFields` over the annotated tree: nodes by name, array elements after `length`."""

    __slots__ = ("_by_name", "_names", "body")

    def __init__(self, body: Node, names: frozenset[str] | None = None) -> None:
        self.body = body
        self._names = names  # the only names paths will start with (None: any)
        self._by_name: dict[str, list[Node]] | None = None

    def values(self, path: Path) -> Iterator[Any]:
        first, rest = path[0], path[1:]
        for node in self._named().get(first.name, ()):
            yield from _descend(node, first.index, rest)

    def _named(self) -> dict[str, list[Node]]:
        if self._by_name is None:
            found: dict[str, list[Node]] = {}
            names = self._names
            for name, node in _field_nodes(self.body):
                if names is None or name in names:
                    found.setdefault(name, []).append(node)
            self._by_name = found
        return self._by_name


def _field_nodes(body: Node) -> Iterator[tuple[str, Node]]:
    """Every field under a body, in order, by name with its node; array elements themselves
    are not fields."""
    stack = list(reversed(list(_children(body))))
    while stack:
        name, node = stack.pop()
        if not _ELEMENT.fullmatch(name):
            yield name, node
        stack.extend(reversed(list(_children(node))))


def _children(node: Node) -> Iterator[tuple[str, Node]]:
    """A node's fields (or an array's elements), by name with their nodes, in wire order: a
    tagged field the node's block holds is one too, its value's node under the field's name,
    as flat values hold it; the rest of the block (tag, size, unknown tags) is scaffolding."""
    for child in node.children:
        if child.name == "tagged_fields":
            for entry in child.children:
                header = entry.children[0] if entry.children else None
                if header is None or header.name != "tag" or entry.name.startswith("unknown_tag_"):
                    continue
                value = next((inner for inner in entry.children if inner.name == "value"), None)
                if value is not None:
                    yield entry.name, value
        elif child.name not in _STRUCTURAL:
            yield child.name, child


def _child(node: Node, name: str) -> Node | None:
    """A node's field of that name, a tagged one too (`_children`)."""
    found = node.child(name)
    if found is None and any(child.name == "tagged_fields" for child in node.children):
        found = next((child for field, child in _children(node) if field == name), None)
    return found


def _elements(array: Node) -> list[Node]:
    return [c for c in array.children if c.name not in _STRUCTURAL and not c.generated]


def _descend(node: Node, index: int | None, rest: Path) -> Iterator[Any]:
    inner = None if node.type.startswith("[]") else node.child("decompressed")
    if inner is not None and inner.type.startswith("[]"):  # a compressed batch's records
        node = inner
    if node.type.startswith("[]"):
        items = _elements(node)
        if index is not None:
            items = [items[index]] if -len(items) <= index < len(items) else []
        for item in items:
            yield from _descend_element(item, rest)
        return
    if index is not None:
        return
    if rest:
        child = _child(node, rest[0].name)
        if child is not None:
            yield from _descend(child, rest[0].index, rest[1:])
    else:
        yield from _leaf(node)


def _leaf(node: Node) -> Iterator[Any]:
    """A field's own value; a struct stands for itself (present, but equal to nothing); a
    `records` field is its bytes (its batches are reached by their own names)."""
    if node.type == "records" or not node.children:
        if node.value is not None:
            yield node.value
    elif _has_fields(node):
        yield node


def _descend_element(element: Node, rest: Path) -> Iterator[Any]:
    if not rest:
        yield from _leaf(element)
        return
    child = _child(element, rest[0].name)
    if child is not None:
        yield from _descend(child, rest[0].index, rest[1:])


def scoped_structs(body: BodyFields) -> Iterator[dict[str, Any]]:
    """Every struct of a body (the body, nested structs, array elements) as its scalar fields
    by name, over those of the structs around it: a partition sees its topic's name."""
    if isinstance(body, ValuesBody):
        return body.scoped()
    if not isinstance(body, TreeBody):
        return iter(())
    return _scoped(body.body, {})


def _scoped(struct: Node, outer: dict[str, Any]) -> Iterator[dict[str, Any]]:
    scope = dict(outer)
    inner: list[Node] = []
    for name, child in _children(struct):
        if child.type.startswith("[]"):
            inner.extend(c for c in _elements(child) if _has_fields(c))
        elif _has_fields(child):
            inner.append(child)
        elif child.value is not None:
            scope[name] = child.value
    yield scope
    for node in inner:
        yield from _scoped(node, scope)


def _has_fields(node: Node) -> bool:
    """A struct with fields of its own (not a null one, nor one of no fields)."""
    return next(_children(node), None) is not None


class ValuesBody:
    """`BodyFields` over a body's flat values (dicts, lists, scalars) and the values its
    dissector derives from them, read as `TreeBody` reads the tree the interpreter would
    build: a list is an array, a dict a struct, None a null, a generated value a field
    after the one it follows."""

    __slots__ = ("_by_name", "_names", "_records", "_skip", "body", "generated")

    def __init__(self, body: Values, generated: dict[int, list[GeneratedValue]],
                 reading: BodyReading = EVERY_FIELD, records: frozenset[str] = frozenset()) -> None:
        self.body = body
        self.generated = generated
        self._names = reading.names  # the only names paths will start with (None: any)
        self._skip = reading.skip  # fields not walked: nothing asked for lies under them
        self._records = records  # `records` fields whose batches are walked, decoded as values
        self._by_name: dict[str, list[Any]] | None = None

    def values(self, path: Path) -> Iterator[Any]:
        first, rest = path[0], path[1:]
        for value in self._named().get(first.name, ()):
            yield from self._descend(value, first.index, rest)

    def fields(self, struct: Values) -> Iterator[tuple[str, Any]]:
        """A struct's fields by name, each generated value after the field it follows."""
        extra = self.generated.get(id(struct)) if self.generated else None
        if not extra:
            yield from struct.items()
            return
        for name, value in struct.items():
            yield name, value
            for item in extra:
                if item.after == name:
                    yield item.name, item.value

    def _named(self) -> dict[str, list[Any]]:
        if self._by_name is None:
            found: dict[str, list[Any]] = {}
            self._collect(self.body, found)
            self._by_name = found
        return self._by_name

    def _collect(self, struct: Values, found: dict[str, list[Any]]) -> None:
        names, skip = self._names, self._skip
        generated = self.generated.get(id(struct)) if self.generated else None
        for name, value in self.fields(struct) if generated else struct.items():
            if names is None or name in names:
                found.setdefault(name, []).append(value)
            if name in skip:
                continue
            kind = type(value)
            if kind is dict:
                self._collect(value, found)
            elif kind is list and value and type(value[0]) is dict:  # an array of structs
                for item in value:
                    if type(item) is dict:
                        self._collect(item, found)
            elif kind is bytes and name in self._records:  # its batches, by their own names
                for entry in entries_values(value):
                    self._collect(entry, found)

    def _descend(self, value: Any, index: int | None, rest: Path) -> Iterator[Any]:
        if type(value) is list:
            items = value
            if index is not None:
                items = [value[index]] if -len(value) <= index < len(value) else []
            for item in items:
                yield from self._descend(item, None, rest) if rest else self._leaf(item)
            return
        if index is not None:
            return
        if not rest:
            yield from self._leaf(value)
        elif type(value) is dict:
            for name, inner in self.fields(value):
                if name == rest[0].name:
                    yield from self._descend(inner, rest[0].index, rest[1:])
                    break

    def _leaf(self, value: Any) -> Iterator[Any]:
        """A field's own value; a struct stands for itself (present, but equal to nothing)."""
        if type(value) is dict:
            if next(self.fields(value), None) is not None:
                yield value
        elif value is not None:
            yield value

    def scoped(self) -> Iterator[dict[str, Any]]:
        """`scoped_structs` of these values, depth first in wire order, as over the tree."""
        stack: list[tuple[Values, dict[str, Any]]] = [(self.body, {})]
        while stack:
            struct, outer = stack.pop()
            scope = dict(outer)
            inner: list[Values] = []
            for name, value in self.fields(struct) if self.generated else struct.items():
                kind = type(value)
                if kind is list:
                    inner.extend(item for item in value if type(item) is dict and item)
                elif kind is dict:
                    if value:
                        inner.append(value)
                elif value is not None:
                    scope[name] = value
            yield scope
            stack.extend((nested, scope) for nested in reversed(inner))
