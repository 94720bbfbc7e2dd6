"""The typed schema model: Kafka message definitions parsed and checked once, at load time.

A definition is the JSON Apache Kafka keeps per message (`validVersions`,
`flexibleVersions`, nested `fields`, `commonStructs`); headers use the same
format with `"type": "header"`. Everything a definition may say is checked
here, so the compiler and the interpreter can trust the model completely.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kdissect.decode.schema.versions import NO_VERSIONS, SchemaError, VersionRange

INTEGER_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
PRIMITIVE_TYPES = frozenset({*INTEGER_RANGES, "bool", "float64", "uuid", "string", "bytes", "records"})
LENGTH_PREFIXED = frozenset({"string", "bytes", "records"})
MESSAGE_KINDS = frozenset({"request", "response", "header", "data"})  # data: not an API message

_MESSAGE_KEYS = frozenset({
    "apiKey", "type", "listeners", "name", "validVersions", "flexibleVersions",
    "deprecatedVersions", "latestVersionUnstable", "fields", "commonStructs",
})
_FIELD_KEYS = frozenset({
    "name", "type", "versions", "about", "nullableVersions", "taggedVersions", "tag",
    "flexibleVersions", "default", "mapKey", "ignorable", "entityType", "zeroCopy", "fields",
})
_STRUCT_KEYS = frozenset({"name", "versions", "fields"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRUCT_NAME = re.compile(r"[A-Z][A-Za-z0-9]*")


@dataclass(frozen=True, slots=True)
class FieldType:
    """A field's declared type: a primitive, a struct name, or an array of either."""

    text: str  # as written: "int32", "[]int32", "Cursor", "[]TopicRequest"
    element: str  # without the array marker
    is_array: bool
    is_struct: bool  # the element is a struct

    @classmethod
    def parse(cls, text: object) -> FieldType:
        if not isinstance(text, str):
            raise SchemaError(f"type must be a string, not {text!r}")
        is_array = text.startswith("[]")
        element = text[2:] if is_array else text
        if element in PRIMITIVE_TYPES:
            if is_array and element == "records":
                raise SchemaError("records cannot be an array element")
            return cls(text, element, is_array, False)
        if _STRUCT_NAME.fullmatch(element):
            return cls(text, element, is_array, True)
        raise SchemaError(f"unknown type {text!r}")

    @property
    def nullable_capable(self) -> bool:
        return self.is_array or self.is_struct or self.element in LENGTH_PREFIXED


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldSpec:
    name: str
    type: FieldType
    versions: VersionRange
    about: str = ""
    nullable_versions: VersionRange = NO_VERSIONS
    tagged_versions: VersionRange = NO_VERSIONS
    tag: int | None = None
    flexible_versions: VersionRange | None = None  # a field-level override ("none" for ClientId)
    default: Any = None
    map_key: bool = False
    ignorable: bool = False
    entity_type: str | None = None
    fields: tuple[FieldSpec, ...] = ()  # inline struct fields


@dataclass(frozen=True, slots=True)
class StructSpec:
    name: str
    versions: VersionRange
    fields: tuple[FieldSpec, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageSpec:
    api_key: int | None  # None for headers and data
    kind: str  # "request", "response", "header" or "data" (e.g. ConsumerProtocolSubscription)
    name: str
    valid_versions: VersionRange
    flexible_versions: VersionRange
    fields: tuple[FieldSpec, ...]
    structs: tuple[StructSpec, ...]  # every struct type, inline and common, by unique name

    def struct(self, name: str) -> StructSpec:
        for struct in self.structs:
            if struct.name == name:
                return struct
        raise KeyError(name)


def parse_message(raw: object, source: str) -> MessageSpec:
    """Build and check a MessageSpec from one decoded definition file."""
    try:
        return _parse_message(_mapping(raw, "definition"))
    except SchemaError as problem:
        raise SchemaError(f"{source}: {problem}") from None


def _parse_message(raw: Mapping[str, Any]) -> MessageSpec:
    _check_keys(raw, _MESSAGE_KEYS, ("type", "name", "validVersions", "fields"), "definition")
    kind, name = raw["type"], _identifier(raw["name"])
    if kind not in MESSAGE_KINDS:
        raise SchemaError(f"type {kind!r} is not one of {sorted(MESSAGE_KINDS)}")
    api_key = raw.get("apiKey")
    if (kind in ("header", "data")) != (api_key is None) or not isinstance(api_key, int | None):
        raise SchemaError("apiKey is required for requests and responses, and only for them")
    flexible = VersionRange.parse(raw.get("flexibleVersions", "none"))
    fields = _parse_fields(raw["fields"], name, flexible)
    common = tuple(_parse_struct(s, flexible) for s in _list(raw.get("commonStructs", []), "commonStructs"))
    return MessageSpec(
        api_key=api_key, kind=kind, name=name,
        valid_versions=VersionRange.parse(raw["validVersions"]), flexible_versions=flexible,
        fields=fields, structs=_collect_structs(fields, common),
    )


def _parse_struct(raw: object, flexible: VersionRange) -> StructSpec:
    struct = _mapping(raw, "common struct")
    _check_keys(struct, _STRUCT_KEYS, ("name", "versions", "fields"), "common struct")
    name = struct["name"]
    if not isinstance(name, str) or not _STRUCT_NAME.fullmatch(name):
        raise SchemaError(f"bad struct name {name!r}")
    return StructSpec(name, VersionRange.parse(struct["versions"]), _parse_fields(struct["fields"], name, flexible))


def _parse_fields(raw: object, where: str, flexible: VersionRange) -> tuple[FieldSpec, ...]:
    fields = tuple(_parse_field(f, where, flexible) for f in _list(raw, f"{where}.fields"))
    _check_unique([f.name for f in fields], f"{where}: field name")
    _check_unique([f.tag for f in fields if f.tag is not None], f"{where}: tag")
    return fields


def _parse_field(raw: object, where: str, flexible: VersionRange) -> FieldSpec:
    spec = _mapping(raw, f"{where} field")
    _check_keys(spec, _FIELD_KEYS, ("name", "type", "versions"), f"{where} field")
    name = _identifier(spec["name"])
    try:
        return _build_field(spec, name, flexible)
    except SchemaError as problem:
        raise SchemaError(f"{where}.{name}: {problem}") from None


def _build_field(spec: Mapping[str, Any], name: str, flexible: VersionRange) -> FieldSpec:
    ftype = FieldType.parse(spec["type"])
    nullable = VersionRange.parse(spec.get("nullableVersions", "none"))
    if not nullable.empty and not ftype.nullable_capable:
        raise SchemaError(f"{ftype.text} cannot be nullable")
    tag, tagged = _parse_tag(spec, flexible)
    field_flexible = spec.get("flexibleVersions")
    if field_flexible is not None and (ftype.is_array or ftype.element not in LENGTH_PREFIXED):
        raise SchemaError("a field-level flexibleVersions applies to strings and bytes only")
    if "fields" in spec and not ftype.is_struct:
        raise SchemaError(f"{ftype.text} cannot have nested fields")
    inline = _parse_fields(spec["fields"], ftype.element, flexible) if "fields" in spec else ()
    return FieldSpec(
        name=name, type=ftype, versions=VersionRange.parse(spec["versions"]),
        about=_text(spec.get("about", ""), "about"), nullable_versions=nullable,
        tagged_versions=tagged, tag=tag,
        flexible_versions=None if field_flexible is None else VersionRange.parse(field_flexible),
        default=parse_default(spec.get("default"), ftype, nullable), map_key=bool(spec.get("mapKey")),
        ignorable=bool(spec.get("ignorable")), entity_type=spec.get("entityType"), fields=inline,
    )


def _parse_tag(spec: Mapping[str, Any], flexible: VersionRange) -> tuple[int | None, VersionRange]:
    tag, tagged_text = spec.get("tag"), spec.get("taggedVersions")
    if (tag is None) != (tagged_text is None):
        raise SchemaError("tag and taggedVersions go together")
    if tag is None:
        return None, NO_VERSIONS
    if not isinstance(tag, int) or isinstance(tag, bool) or tag < 0:
        raise SchemaError(f"tag must be a non-negative integer, not {tag!r}")
    tagged = VersionRange.parse(tagged_text)
    if not tagged.within(flexible):
        raise SchemaError(f"taggedVersions {tagged} outside flexibleVersions {flexible}")
    if not tagged.within(VersionRange.parse(spec["versions"])):
        raise SchemaError(f"taggedVersions {tagged} outside versions {spec['versions']}")
    return tag, tagged


def parse_default(value: object, ftype: FieldType, nullable: VersionRange) -> Any:
    """The typed default of a field; the implicit one (zero, empty) when none is given."""
    if value == "null":
        if nullable.empty:
            raise SchemaError("default null needs nullableVersions")
        return None
    if ftype.is_array or ftype.is_struct:
        if value not in (None, ""):
            raise SchemaError(f"{ftype.text} can only default to null or empty")
        return () if ftype.is_array else None
    return _primitive_default(value, ftype.element)


def _primitive_default(value: object, element: str) -> Any:
    if element in INTEGER_RANGES:
        return _integer_default(value, element)
    if element == "bool":
        if value in (None, False, "false"):
            return False
        if value in (True, "true"):
            return True
    elif element == "float64":
        return _float_default(value)
    elif element == "uuid":
        return _uuid_default(value)
    elif element == "string":
        return _text(value if value is not None else "", "default")
    elif value in (None, ""):
        return b""
    raise SchemaError(f"default {value!r} does not fit {element}")


def _integer_default(value: object, element: str) -> int:
    if value is None:
        return 0
    try:
        number = value if isinstance(value, int) and not isinstance(value, bool) else _parse_int(value)
    except ValueError:
        raise SchemaError(f"default {value!r} is not an integer") from None
    low, high = INTEGER_RANGES[element]
    if not low <= number <= high:
        raise SchemaError(f"default {number} outside {element}")
    return number


def _parse_int(value: object) -> int:
    if not isinstance(value, str):
        raise ValueError(value)
    text = value.strip().lower()
    negative = text.startswith("-")
    digits = text.lstrip("-")
    number = int(digits[2:], 16) if digits.startswith("0x") else int(digits, 10)
    return -number if negative else number


def _float_default(value: object) -> float:
    if value is None:
        return 0.0
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise SchemaError(f"default {value!r} is not a float64") from None


def _uuid_default(value: object) -> uuid.UUID:
    if value in (None, ""):
        return uuid.UUID(int=0)
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise SchemaError(f"default {value!r} is not a uuid") from None


def _collect_structs(fields: tuple[FieldSpec, ...], common: tuple[StructSpec, ...]) -> tuple[StructSpec, ...]:
    structs = {s.name: s for s in common}
    _check_unique([s.name for s in common], "common struct")
    referenced: list[str] = []
    for field in _all_fields(fields, common):
        if not field.type.is_struct:
            continue
        referenced.append(field.type.element)
        if field.fields:
            if field.type.element in structs:
                raise SchemaError(f"struct {field.type.element} is defined twice")
            structs[field.type.element] = StructSpec(field.type.element, field.versions, field.fields)
    missing = sorted(set(referenced) - set(structs))
    if missing:
        raise SchemaError(f"struct {missing[0]} has no definition")
    return tuple(structs.values())


def _all_fields(fields: tuple[FieldSpec, ...], common: tuple[StructSpec, ...]) -> Iterator[FieldSpec]:
    stack = [*fields, *(f for s in common for f in s.fields)]
    while stack:
        field = stack.pop()
        yield field
        stack.extend(field.fields)


def _check_keys(raw: Mapping[str, Any], allowed: frozenset[str], required: tuple[str, ...], what: str) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise SchemaError(f"{what}: unknown key {unknown[0]!r}")
    absent = [key for key in required if key not in raw]
    if absent:
        raise SchemaError(f"{what}: missing key {absent[0]!r}")


def _check_unique(items: list[Any], what: str) -> None:
    seen: set[Any] = set()
    for item in items:
        if item in seen:
            raise SchemaError(f"{what} {item!r} appears twice")
        seen.add(item)


def _mapping(raw: object, what: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise SchemaError(f"{what} must be an object")
    return raw


def _list(raw: object, what: str) -> list[Any]:
    if not isinstance(raw, list):
        raise SchemaError(f"{what} must be a list")
    return raw


def _identifier(name: object) -> str:
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise SchemaError(f"bad name {name!r}")
    return name


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise SchemaError(f"{what} must be a string")
    return value
