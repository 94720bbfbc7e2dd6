"""Kafka requests read and responses written by kio, a codec kdissect did not write.

The scripted peer encodes nothing itself: request headers and bodies are parsed
with kio's readers, response headers, bodies and even the 4-byte size prefix are
written with kio's writers, from kio's schema classes for the exact API version
the client asked for.

Stories describe responses as plain dictionaries keyed by kio's field names
(snake_case). ``build_entity`` turns such a dictionary into the kio dataclass of
one version, dropping the fields that version does not have, so one story serves
every version. ``entity_to_json`` turns what was encoded back into plain JSON
keyed by Kafka's own field names (``ProducerId``, ``ThrottleTimeMs``), which is
what the sidecar files record.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import io
import types
import typing
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial.writers import write_int32
from kio.static.primitive import i32

JsonValue = Any
_TIMEDELTA_TYPES = frozenset({"timedelta_i32", "timedelta_i64"})


@dataclass(frozen=True, slots=True)
class Request:
    """One request as kio decoded it; ``body`` is None when kio lacks the version."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any


def read_request(frame: bytes) -> Request:
    """Decode one request (the bytes after the size prefix) with kio."""
    header, _ = entity_reader(RequestHeaderV1)(frame, 0)
    api_key, api_version = int(header.request_api_key), int(header.request_api_version)
    try:
        schema = load_request_schema(api_key, api_version)
    except KioIndexError:
        return Request(api_key, api_version, int(header.correlation_id), header.client_id, None)
    full_header, header_size = entity_reader(schema.__header_schema__)(frame, 0)
    body, _ = entity_reader(schema)(frame, header_size)
    return Request(api_key, api_version, int(full_header.correlation_id),
                   full_header.client_id, body)


def encode_response(request: Request, values: Mapping[str, Any]) -> tuple[bytes, Any]:
    """Encode a whole response frame (size prefix included) and return it with its entity."""
    schema = load_response_schema(request.api_key, request.api_version)
    body = build_entity(schema, values)
    header_schema = schema.__header_schema__
    payload = io.BytesIO()
    entity_writer(header_schema)(payload, header_schema(correlation_id=i32(request.correlation_id)))
    entity_writer(schema)(payload, body)
    frame = io.BytesIO()
    write_int32(frame, i32(len(payload.getvalue())))
    frame.write(payload.getvalue())
    return frame.getvalue(), body


def build_entity(entity_type: type, values: Mapping[str, Any]) -> Any:
    """Build a kio entity from plain values, keeping only the fields this version has."""
    hints = typing.get_type_hints(entity_type)
    arguments = {
        field.name: _field_value(field, hints[field.name], values[field.name])
        for field in dataclasses.fields(entity_type)
        if field.name in values
    }
    return entity_type(**arguments)


def _field_value(field: dataclasses.Field[Any], hint: Any, value: Any) -> Any:
    if value is None:
        return None
    hint = _without_none(hint)
    is_array = typing.get_origin(hint) is tuple
    item_type = typing.get_args(hint)[0] if is_array else hint
    if dataclasses.is_dataclass(item_type):
        assert isinstance(item_type, type)
        if is_array:
            return tuple(build_entity(item_type, item) for item in value)
        return build_entity(item_type, value)
    kafka_type = field.metadata.get("kafka_type", "")
    if is_array:
        return tuple(_primitive(kafka_type, item) for item in value)
    return _primitive(kafka_type, value)


def _without_none(hint: Any) -> Any:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        remaining = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return remaining[0]
    return hint


def _primitive(kafka_type: str, value: Any) -> Any:
    if kafka_type == "error_code":
        return ErrorCode(value)
    if kafka_type in _TIMEDELTA_TYPES:
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "uuid" and isinstance(value, str):
        return uuid.UUID(value)
    return value


def kafka_name(field: dataclasses.Field[Any]) -> str:
    """Kafka's name of a kio field: ``current_txn_start_offset`` -> ``CurrentTxnStartOffset``."""
    name = "".join(part.capitalize() for part in field.name.split("_"))
    if field.metadata.get("kafka_type") in _TIMEDELTA_TYPES:
        return name + "Ms"
    return name


def entity_to_json(entity: Any) -> dict[str, JsonValue]:
    """Plain JSON of a kio entity, keyed by Kafka's field names."""
    return {
        kafka_name(field): _to_json(getattr(entity, field.name))
        for field in dataclasses.fields(entity)
    }


def _to_json(value: Any) -> JsonValue:
    match value:
        case None | bool() | str() | float():
            return value
        case enum.Enum():
            return int(value.value)
        case int():
            return int(value)
        case datetime.timedelta():
            return round(value.total_seconds() * 1000)
        case uuid.UUID():
            return str(value)
        case bytes():
            return value.hex()
        case tuple() | list():
            return [_to_json(item) for item in value]
    if dataclasses.is_dataclass(value):
        return entity_to_json(value)
    raise TypeError(f"no JSON form for {type(value).__name__}")
