"""Decode plans: one message definition compiled for one version, cached.

Compiling resolves everything that depends on the version (which fields exist,
which are nullable or tagged, compact or classic encodings, the struct codec of
each fixed-size primitive), so decoding a frame is a walk over prebuilt plan
objects with no JSON, string parsing or version checks left in it.
"""

from __future__ import annotations

import enum
import functools
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kdissect.decode.schema.loader import header_spec, resolve
from kdissect.decode.schema.model import FieldSpec, FieldType, MessageSpec
from kdissect.decode.schema.versions import SchemaError

HEADER_TAGGED_ABOUT = "number of tagged fields in the header"
STRUCT_TAGGED_ABOUT = "number of tagged fields in this struct"

FIXED_CODECS: dict[str, struct.Struct] = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "uint16": struct.Struct(">H"),
    "int32": struct.Struct(">i"),
    "uint32": struct.Struct(">I"),
    "int64": struct.Struct(">q"),
    "float64": struct.Struct(">d"),
}
_NO_CODEC = struct.Struct("")


class Kind(enum.IntEnum):
    """How the interpreter reads a field (an IntEnum: it hashes at C speed on the hot path)."""

    INTEGER = 0
    FLOAT = 1
    BOOL = 2
    UUID = 3
    STRING = 4
    BYTES = 5
    ARRAY = 6
    STRUCT = 7
    RECORDS = 8  # bytes holding record batches, decoded into them


@dataclass(frozen=True, slots=True, eq=False)
class StructPlan:
    name: str
    fields: tuple[FieldPlan, ...]  # untagged fields, in wire order
    tagged: Mapping[int, FieldPlan]  # tag -> field, for this version
    flexible: bool  # ends with a tagged-field block
    tagged_about: str
    min_size: int  # fewest bytes an instance can take on the wire

    @property
    def holds_records(self) -> bool:
        """Whether a `records` field sits anywhere in this struct (Produce, Fetch...)."""
        return _struct_holds_records(self)


@functools.cache  # plans live as long as the process and compare by identity
def value_fields(plan: StructPlan) -> tuple[FieldPlan, ...]:
    """The fields a struct's flat values may hold, in wire order: the untagged ones, then the
    tagged ones by tag (each only when its tag is on the wire)."""
    return (*plan.fields, *(plan.tagged[tag] for tag in sorted(plan.tagged)))


@functools.cache  # plans live as long as the process and compare by identity
def _struct_holds_records(plan: StructPlan) -> bool:
    return any(_holds_records(f) for f in (*plan.fields, *plan.tagged.values()))


def _holds_records(field: FieldPlan) -> bool:
    while field.element is not None:
        field = field.element
    return field.kind is Kind.RECORDS or (field.struct is not None and _struct_holds_records(field.struct))


@dataclass(frozen=True, slots=True, eq=False)
class FieldPlan:
    name: str
    label: str  # the type the tree shows: "int32", "string", "[]TopicRequest", "Cursor"
    about: str
    kind: Kind
    compact: bool = False  # uvarint lengths (flexible) instead of int16/int32
    nullable: bool = False
    codec: struct.Struct = _NO_CODEC  # fixed-size primitives
    element: FieldPlan | None = None  # arrays
    struct: StructPlan | None = None  # structs
    tag: int | None = None  # tagged fields
    default: Any = None
    min_size: int = 1
    entity_type: str | None = None  # the definition's entityType: "brokerId", "topicName", ...
    meaning: str | None = None  # what an integer's value is, from the schema (see `field_meaning`)


@dataclass(frozen=True, slots=True, eq=False)
class MessagePlan:
    api_key: int | None
    kind: str
    name: str
    version: int
    flexible: bool
    body: StructPlan


@functools.cache
def message_plan(api_key: int, version: int, kind: str) -> MessagePlan | None:
    """The plan of an API's request or response body, None when no definition has the version.

    A version newer than every definition gets the newest one's plan (`plan.version` says which).
    """
    found = resolve(api_key, version, kind)
    return None if found is None else compile_message(found.spec, found.version)


@functools.cache
def header_plan(kind: str, version: int) -> MessagePlan:
    """The plan of request header v0-v2 or response header v0-v1."""
    spec = header_spec(kind)
    if version not in spec.valid_versions:
        raise SchemaError(f"{spec.name} has no version {version}")
    return compile_message(spec, version)


def compile_message(spec: MessageSpec, version: int) -> MessagePlan:
    """Compile any checked definition for one of its versions."""
    compiler = _Compiler(spec, version, version in spec.flexible_versions)
    body = compiler.struct(spec.name, spec.fields)
    return MessagePlan(spec.api_key, spec.kind, spec.name, version, compiler.flexible, body)


@dataclass(slots=True)
class _Compiler:
    spec: MessageSpec
    version: int
    flexible: bool
    done: dict[str, StructPlan] = field(default_factory=dict)
    active: set[str] = field(default_factory=set)

    def struct(self, name: str, fields: tuple[FieldSpec, ...]) -> StructPlan:
        if name in self.done:
            return self.done[name]
        if name in self.active:
            raise SchemaError(f"{self.spec.name}: struct {name} contains itself")
        self.active.add(name)
        plans = [p for p in (self.field(f) for f in fields) if p is not None]
        untagged = tuple(p for p in plans if p.tag is None)
        tagged = MappingProxyType({p.tag: p for p in plans if p.tag is not None})
        about = HEADER_TAGGED_ABOUT if self.spec.kind == "header" else STRUCT_TAGGED_ABOUT
        size = sum(p.min_size for p in untagged) + (1 if self.flexible else 0)
        plan = StructPlan(name, untagged, tagged, self.flexible, about, size)
        self.active.discard(name)
        self.done[name] = plan
        return plan

    def field(self, spec: FieldSpec) -> FieldPlan | None:
        version = self.version
        if version not in spec.versions:
            return None
        nullable = version in spec.nullable_versions
        tag = spec.tag if version in spec.tagged_versions else None
        compact = self.flexible and (spec.flexible_versions is None or version in spec.flexible_versions)
        ftype = spec.type
        if ftype.is_array:
            element = self.element(ftype, compact)
            return FieldPlan(spec.name, ftype.text, spec.about, Kind.ARRAY, compact, nullable,
                             element=element, tag=tag, default=spec.default, min_size=1 if compact else 4,
                             entity_type=spec.entity_type)
        if ftype.is_struct:
            body = self.struct(ftype.element, self.spec.struct(ftype.element).fields)
            return FieldPlan(spec.name, ftype.text, spec.about, Kind.STRUCT, compact, nullable, struct=body,
                             tag=tag, default=spec.default, min_size=1 if nullable else body.min_size)
        return primitive_plan(spec.name, ftype.element, spec.about, compact=compact, nullable=nullable,
                              tag=tag, default=spec.default, entity_type=spec.entity_type)

    def element(self, ftype: FieldType, compact: bool) -> FieldPlan:
        name = ftype.element
        if not ftype.is_struct:
            return primitive_plan(name, name, "", compact=compact, nullable=False)
        body = self.struct(name, self.spec.struct(name).fields)
        return FieldPlan(name, name, "", Kind.STRUCT, compact, struct=body, min_size=max(1, body.min_size))


def primitive_plan(name: str, element: str, about: str, *, compact: bool, nullable: bool,
                   tag: int | None = None, default: Any = None, entity_type: str | None = None) -> FieldPlan:
    """The plan of one primitive field (also used for array elements)."""
    codec = FIXED_CODECS.get(element)
    if codec is not None:
        kind = Kind.FLOAT if element == "float64" else Kind.INTEGER
        return FieldPlan(name, element, about, kind, compact, nullable, codec, tag=tag,
                         default=default, min_size=codec.size, entity_type=entity_type,
                         meaning=field_meaning(name, element, entity_type) if kind is Kind.INTEGER else None)
    if element in ("bool", "uuid"):
        kind = Kind.BOOL if element == "bool" else Kind.UUID
        return FieldPlan(name, element, about, kind, compact, nullable, tag=tag, default=default,
                         min_size=1 if element == "bool" else 16, entity_type=entity_type)
    kind = Kind.STRING if element == "string" else Kind.RECORDS if element == "records" else Kind.BYTES
    # Classic nullable strings and bytes are the protocol guide's NULLABLE_STRING / NULLABLE_BYTES.
    label = f"nullable_{element}" if nullable and not compact and element != "records" else element
    classic_size = 2 if kind is Kind.STRING else 4
    return FieldPlan(name, label, about, kind, compact, nullable, tag=tag, default=default,
                     min_size=1 if compact else classic_size, entity_type=entity_type)


# Integer meanings a definition carries: its entityType, else its type and name.
BROKER_ID, PRODUCER_ID = "brokerId", "producerId"
ERROR_CODE, TIMESTAMP_MS, DURATION_MS = "errorCode", "timestampMs", "durationMs"
_INTEGER_ENTITIES = frozenset({BROKER_ID, PRODUCER_ID})
# int64 points in time: LastFetchTimestamp, ExpiryTimestampMs, LogAppendTimeMs, TransactionStartTimeMs.
_POINT_IN_TIME = re.compile(r".*(?:Timestamp|TimestampMs|AppendTimeMs|StartTimeMs)")
_MILLISECONDS = re.compile(r".*[a-z]Ms")  # ThrottleTimeMs, SessionTimeoutMs, RetentionTimeMs, ...


def field_meaning(name: str, element: str, entity_type: str | None) -> str | None:
    """What an integer field's value is: a broker or producer id (the definition's entityType),
    an error code (int16 `ErrorCode`, `...ErrorCode`), an int64 millisecond timestamp, or a
    duration in milliseconds (an int32 or int64 named `...Ms`); None when the number says it all."""
    if entity_type in _INTEGER_ENTITIES:
        return entity_type
    if element == "int16" and name.endswith("ErrorCode"):
        return ERROR_CODE
    if element == "int64" and _POINT_IN_TIME.fullmatch(name):
        return TIMESTAMP_MS
    if element in ("int32", "int64") and _MILLISECONDS.fullmatch(name):
        return DURATION_MS
    return None
