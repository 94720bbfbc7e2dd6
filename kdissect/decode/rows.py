"""A message's annotated field tree as plain tuples, laid out from its flat values.

The `-V` text and JSON writers need every node of the tree (name, type,
display, offset, size, about) but none of what makes a `Node` an object: so
for an ordinary body, whose flat values came from a generated decoder, the
tree is laid out here as nested tuples, straight from the plan and the values.
Offsets follow from sizes (fields tile their struct) and sizes from values
(every length prefix was read minimally encoded). The result is node for node
what `dissect_request` / `dissect_response` build (a test compares them on
every capture); bodies the fast path refused are never laid out here.

    Row = (name, type, value, display, offset, size, about, children, generated)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from kdissect.apis import APIS, request_header_version, response_header_version
from kdissect.decode.dissect import FRAME_ABOUT, HEADER_ABOUT, HEADER_NAME, SIZE_ABOUT, message_name
from kdissect.decode.generated import FAST_PATH_REFUSALS, field_decoder, struct_decoder, uvarint
from kdissect.decode.interpreter import (
    NULLABLE_STRUCT_ABOUT,
    count_display,
    elements_follow,
    hex_display,
)
from kdissect.decode.record_rows import entries_rows
from kdissect.decode.schema import dissected_api_keys
from kdissect.decode.schema.plan import FieldPlan, Kind, StructPlan, header_plan, message_plan
from kdissect.decode.tree import Row, printable
from kdissect.decode.values import Values
from kdissect.dissectors import SCHEMA_DISPLAYS, Display, GeneratedValue
from kdissect.dissectors.registry import dissector

NAME: Final = 0
TYPE: Final = 1
VALUE: Final = 2
DISPLAY: Final = 3
OFFSET: Final = 4
SIZE: Final = 5
ABOUT: Final = 6
CHILDREN: Final = 7
GENERATED: Final = 8
_NO_DISPLAYS: dict[str, Display] = {}


def uvarint_size(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def length_prefix(length: int, compact: bool, width: int) -> tuple[int, str]:
    """The size of a `length`-byte value's length prefix and how a display names it:
    compact (uvarint of length + 1), else an int16 or int32 (`width` bytes)."""
    if compact:
        return uvarint_size(length + 1), f"(compact, len+1={length + 1})"
    return width, f"(int{width * 8} len={length})"


class _NotLaidOut(Exception):
    """Record batches with something to say (a note): only the interpreter's tree says it."""


def message_rows(data: bytes, kind: str, api_key: int, version: int, body: Values) -> Row | None:
    """The whole message's tree as rows, from its body's flat values; None when unavailable.

    A `records` field is laid out from its decoded batches (`record_rows`), which
    the fast path checked are clean; anything else leaves the body to the tree.
    """
    plan = message_plan(api_key, version, kind)
    if plan is None:
        return None
    header = _header_rows(data, kind, api_key, version)
    if header is None:
        return None
    header_row, header_end = header
    meaning = dissector(api_key)
    displays = meaning.response_displays if meaning is not None and kind == "response" else _NO_DISPLAYS
    generated = meaning.response_generated_values(body) if meaning is not None and kind == "response" else {}
    try:
        body_children = _Layout(data, displays, generated).struct(plan.body, body, header_end)
    except _NotLaidOut:
        return None
    body_row = (plan.name, "struct", None, "", header_end, len(data) - header_end,
                f"message body, version {version}", body_children, False)
    return _message_row(data, kind, api_key, version, header_row, body_row)


def raw_message_rows(data: bytes, kind: str, api_key: int, version: int) -> Row | None:
    """Rows of a complete, ordinary frame of an API whose bodies are not dissected: the body
    is one raw node. None for anything the interpreter has a note about (its tree is the answer)."""
    api = APIS.get(api_key)
    if (api is None or not api.valid(version) or api_key in dissected_api_keys() or len(data) < 8
            or int.from_bytes(data[:4], "big", signed=True) != len(data) - 4):
        return None
    try:
        header = _header_rows(data, kind, api_key, version)
    except FAST_PATH_REFUSALS:
        return None
    if header is None or header[1] > len(data):
        return None
    header_row, header_end = header
    raw = data[header_end:]
    body_row = (f"{message_name(api_key, kind)} body", "bytes", raw, hex_display(raw), header_end, len(raw),
                "not dissected", None, False)
    return _message_row(data, kind, api_key, version, header_row, body_row)


def _header_rows(data: bytes, kind: str, api_key: int, version: int) -> tuple[Row, int] | None:
    header_version = (request_header_version if kind == "request" else response_header_version)(api_key, version)
    header_struct = header_plan(kind, header_version).body
    decoder = struct_decoder(header_struct)
    if decoder is None:
        return None
    header_values, header_end = decoder(data, 4, len(data))
    children = _Layout(data, _NO_DISPLAYS, {}).struct(header_struct, header_values, 4)
    if kind == "request":
        children[0] = _api_key_row(children[0])
    return (HEADER_NAME[kind], "header", None, f"v{header_version}", 4, header_end - 4, HEADER_ABOUT[kind],
            children, False), header_end


def _message_row(data: bytes, kind: str, api_key: int, version: int, header: Row, body: Row) -> Row:
    size = len(data) - 4
    return (message_name(api_key, kind), "message", None, f"v{version}", 0, len(data), "", [
        ("Frame", "frame", None, "", 0, 4, FRAME_ABOUT,
         [("size", "int32", size, str(size), 0, 4, SIZE_ABOUT, None, False)], False),
        header,
        body,
    ], False)


def tagged_fields_row(data: bytes, displays: Mapping[str, Display], generated: dict[int, list[GeneratedValue]],
                      plan: StructPlan, pos: int) -> Row:
    """The row of a struct's tagged-field block at `pos` that is not empty."""
    return _Layout(data, displays, generated).tagged_fields(plan, pos)


def _api_key_row(row: Row) -> Row:
    api = APIS.get(row[VALUE])
    shown = f"{row[VALUE]} ({api.name if api else 'unknown API'})"
    return (row[NAME], row[TYPE], row[VALUE], shown, row[OFFSET], row[SIZE], row[ABOUT], row[CHILDREN], False)


class _Layout:
    """Rows of one body: integer displays by field name, generated values by struct identity."""

    def __init__(self, data: bytes, displays: dict[str, Display] | Any,
                 generated: dict[int, list[GeneratedValue]]) -> None:
        self.data = data  # the frame, for the record batches of `records` fields
        self.displays = displays
        self.generated = generated

    def struct(self, plan: StructPlan, values: Values, pos: int) -> list[Row]:
        """The rows of a struct's fields from `pos`, its tagged-field block last."""
        rows: list[Row] = []
        append = rows.append
        for name, size, label, about, rule, field in _field_specs(plan, self.displays):
            value = values[name]
            if size:  # an integer (most fields): inline
                shown = None if rule is None else rule(value)
                append((name, label, value, str(value) if shown is None else shown, pos, size, about, None, False))
                pos += size
                continue
            row = self.field(field, name, value, pos, about)
            append(row)
            pos += row[SIZE]
        if plan.flexible:
            if self.data[pos]:
                append(self.tagged_fields(plan, pos))
            else:
                append(("tagged_fields", "uvarint", 0, "0", pos, 1, plan.tagged_about, None, False))
        extra = self.generated.get(id(values)) if self.generated else None
        if extra:
            _insert_generated(rows, extra)
        return rows

    def field(self, f: FieldPlan, name: str, value: Any, pos: int, about: str) -> Row:
        kind = f.kind
        if kind is Kind.INTEGER:
            display = None
            if self.displays and name in self.displays:
                display = self.displays[name](value)
            elif f.meaning is not None:  # what the schema says it is
                display = SCHEMA_DISPLAYS[f.meaning](value)
            return (name, f.label, value, str(value) if display is None else display, pos, f.codec.size, about,
                    None, False)
        if kind is Kind.STRING or kind is Kind.BYTES:
            return _length_prefixed(f, name, value, pos, about)
        if kind is Kind.ARRAY:
            return self.array(f, name, value, pos, about)
        if kind is Kind.STRUCT:
            return self.nested(f, name, value, pos, about)
        if kind is Kind.BOOL:
            return (name, f.label, value, "true" if value else "false", pos, 1, about, None, False)
        if kind is Kind.UUID:
            return (name, f.label, value, str(value), pos, 16, about, None, False)
        if kind is Kind.RECORDS:
            return self.records(f, name, value, pos, about)
        return (name, f.label, value, repr(value), pos, 8, about, None, False)  # float64

    def tagged_fields(self, plan: StructPlan, pos: int) -> Row:
        """A tagged-field block that is not empty, read again from the frame (the fast path
        checked it: ascending tags, each known value exactly its declared size)."""
        count, at = uvarint(self.data, pos)
        entries: list[Row] = [("count", "uvarint", count, str(count), pos, at - pos,
                               "number of tagged fields that follow", None, False)]
        for _ in range(count):
            entry = self.tagged_entry(plan, at)
            entries.append(entry)
            at += entry[SIZE]
        return ("tagged_fields", "uvarint", count, str(count), pos, at - pos, plan.tagged_about, entries, False)

    def tagged_entry(self, plan: StructPlan, pos: int) -> Row:
        data = self.data
        tag, after_tag = uvarint(data, pos)
        size, start = uvarint(data, after_tag)
        end = start + size
        header: list[Row] = [("tag", "uvarint", tag, str(tag), pos, after_tag - pos, "tag number", None, False),
                             ("size", "uvarint", size, str(size), after_tag, start - after_tag,
                              "bytes of the tagged value", None, False)]
        field = plan.tagged.get(tag)
        if field is None:
            raw = data[start:end]
            shown = hex_display(raw)
            header.append(("data", "bytes", raw, shown, start, size, "value of an unknown tag", None, False))
            return (f"unknown_tag_{tag}", "bytes", raw, shown, pos, end - pos,
                    "tagged field this version does not define", header, False)
        decoder = field_decoder(field)
        assert decoder is not None  # the fast path decoded it
        value_row = self.field(field, "value", decoder(data, start, end)[0], start, field.about)
        header.append(value_row)
        value, shown = value_row[VALUE], value_row[DISPLAY]
        rule = self.displays.get(field.name) if self.displays else None
        if rule is not None and type(value) is int:  # the API's rule, by the tagged field's name
            named = rule(value)
            shown = str(value) if named is None else named
        return (field.name, field.label, value, shown, pos, end - pos, field.about, header, False)

    def array(self, f: FieldPlan, name: str, value: list[Any] | None, pos: int, about: str) -> Row:
        count = None if value is None else len(value)
        if f.compact:
            wire = 0 if count is None else count + 1
            length = ("length", "uvarint", wire, f"{wire} (compact, n+1)", pos, uvarint_size(wire),
                      elements_follow(count), None, False)
        else:
            wire = -1 if count is None else count
            length = ("length", "int32", wire, str(wire), pos, 4, elements_follow(count), None, False)
        children: list[Row] = [length]
        end = pos + length[SIZE]
        if value is not None:
            element = f.element
            assert element is not None
            label = element.label
            names = _element_names(label, len(value))
            append = children.append
            if element.kind is Kind.INTEGER:  # arrays of ids and offsets: inline
                size = element.codec.size
                for name_at, item in zip(names, value):  # noqa: B905 (names may be longer)
                    append((name_at, label, item, str(item), end, size, "", None, False))
                    end += size
            else:
                read = self.nested if element.kind is Kind.STRUCT else self.field
                for name_at, item in zip(names, value):  # noqa: B905 (names may be longer)
                    row = read(element, name_at, item, end, "")
                    append(row)
                    end += row[SIZE]
        return (name, f.label, count, count_display(count), pos, end - pos, about, children, False)

    def nested(self, f: FieldPlan, name: str, value: Values | None, pos: int, about: str) -> Row:
        assert f.struct is not None
        if not f.nullable:
            children = self.struct(f.struct, value or {}, pos)
            return (name, f.label, None, "struct", pos, _span(children, pos), about, children, False)
        if value is None:
            presence = ("presence", "int8", -1, "-1 (null)", pos, 1, NULLABLE_STRUCT_ABOUT, None, False)
            return (name, f.label, None, "null", pos, 1, about, [presence], False)
        presence = ("presence", "int8", 1, "1 (present)", pos, 1, NULLABLE_STRUCT_ABOUT, None, False)
        children = [presence, *self.struct(f.struct, value, pos + 1)]
        return (name, f.label, None, "struct", pos, _span(children, pos), about, children, False)


    def records(self, f: FieldPlan, name: str, value: bytes | None, pos: int, about: str) -> Row:
        """A `records` field as the interpreter shows it: its length prefix, then its batches."""
        if value is None:
            return _length_prefixed(f, name, value, pos, about)
        length = len(value)
        prefix, form = length_prefix(length, f.compact, 4)
        if f.compact:
            length_row = ("length", "uvarint", length + 1, f"{length + 1} (compact, len+1)", pos, prefix,
                          f"{length} bytes of records follow", None, False)
        else:
            length_row = ("length", "int32", length, str(length), pos, 4, f"{length} bytes of records follow",
                          None, False)
        start = pos + prefix
        entries = entries_rows(self.data, start, start + length)
        if entries is None:
            raise _NotLaidOut(name)
        count = len(entries)
        display = f"{length} bytes, {count} batch{'' if count == 1 else 'es'} {form}"
        return (name, f.label, value, display, pos, prefix + length, about, [length_row, *entries], False)


# (name, size of an integer or 0, label, about, display rule of an integer, field) of each field
FieldSpec = tuple[str, int, str, str, "Display | None", FieldPlan]
_SPECS: dict[tuple[int, int], tuple[StructPlan, Any, list[FieldSpec]]] = {}


def _field_specs(plan: StructPlan, displays: dict[str, Display] | Any) -> list[FieldSpec]:
    """What `_Layout.struct` needs of each field of `plan`, worked out once per plan and API rules."""
    found = _SPECS.get((id(plan), id(displays)))
    if found is not None and found[0] is plan and found[1] is displays:
        return found[2]
    specs: list[FieldSpec] = []
    for field in plan.fields:
        if field.kind is Kind.INTEGER:
            rule = displays.get(field.name) if displays else None
            if rule is None and field.meaning is not None:  # what the schema says it is
                rule = SCHEMA_DISPLAYS[field.meaning]
            specs.append((field.name, field.codec.size, field.label, field.about, rule, field))
        else:
            specs.append((field.name, 0, field.label, field.about, None, field))
    _SPECS[(id(plan), id(displays))] = (plan, displays, specs)
    return specs


def element_namer(spell: Callable[[str], str]) -> Callable[[str, int], list[str]]:
    """A function giving `spell("label[0]")`, `spell("label[1]")`, ... for at least `count`
    elements of an array, the common sizes kept (rows spell names as they are, the JSON
    writer as JSON strings)."""
    kept: dict[str, list[str]] = {}

    def names_of(label: str, count: int) -> list[str]:
        names = kept.get(label)
        if names is None:
            names = kept[label] = []
        if len(names) < count:
            if count > 4096:
                return [spell(f"{label}[{index}]") for index in range(count)]
            names.extend(spell(f"{label}[{index}]") for index in range(len(names), count))
        return names

    return names_of


_element_names = element_namer(str)


def _span(children: list[Row], pos: int) -> int:
    for row in reversed(children):
        if not row[GENERATED]:
            return row[OFFSET] + row[SIZE] - pos
    return 0


def _length_prefixed(f: FieldPlan, name: str, value: Any, pos: int, about: str) -> Row:
    is_string = f.kind is Kind.STRING
    if value is None:
        if f.compact:
            return (name, f.label, None, "null (compact, len+1=0)", pos, 1, about, None, False)
        width = 2 if is_string else 4
        return (name, f.label, None, f"null (int{width * 8} len=-1)", pos, width, about, None, False)
    if is_string:
        length = len(value) if value.isascii() else len(value.encode())
        shown = f'"{printable(value)}"'
    else:
        length = len(value)
        shown = hex_display(value)
    prefix, form = length_prefix(length, f.compact, 2 if is_string else 4)
    return (name, f.label, value, f"{shown} {form}", pos, prefix + length, about, None, False)


def _insert_generated(rows: list[Row], extra: list[GeneratedValue]) -> None:
    for item in extra:
        for index, row in enumerate(rows):
            if row[NAME] == item.after and not row[GENERATED]:
                rows.insert(index + 1, (item.name, item.type, item.value, str(item.value), row[OFFSET], 0,
                                        item.about, None, True))
                break


__all__ = ["ABOUT", "CHILDREN", "DISPLAY", "GENERATED", "NAME", "OFFSET", "SIZE", "TYPE", "VALUE", "Row",
           "message_rows", "raw_message_rows", "tagged_fields_row", "uvarint_size"]
