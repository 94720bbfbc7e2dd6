"""A message's tree as JSON text, written straight from its body's flat values.

`-T json` and `-T jsonl` write every node of every tree. Laying the tree out as
rows, turning each row into a dict and the dicts into text costs three objects
per node; here a body the fast path decoded is written as text at once: per
struct plan a generated function writes its fields (names, types and the JSON
around them pre-serialized), and an ordinary record batch (magic 2, correct
CRC, no control records) is read and written in one pass from its bytes.
Anything unusual (tagged fields present, control batches, legacy messages,
float fields) is written from its rows exactly as before, and a body this
module does not take gives None, so the caller writes the tree the usual way:
the text is byte for byte what `orjson.dumps(rows_record(rows, about=False))`
writes (a test compares them on every message of every capture).

Wire text is written as it is (not yet ASCII): the caller escapes the whole line.
"""

from __future__ import annotations

import contextlib
import functools
import math
import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from kdissect.apis import APIS, request_header_version, response_header_version
from kdissect.decode import record_nodes
from kdissect.decode import records as rec
from kdissect.decode.dissect import message_name
from kdissect.decode.generated import StructDecoder, struct_decoder
from kdissect.decode.interpreter import hex_display
from kdissect.decode.record_nodes import (
    BATCH_FIELDS,
    attribute_bits,
    attributes_display,
    batch_display,
    timestamp_display,
    value_display,
)
from kdissect.decode.record_rows import batch_row, clean_entry, legacy_message_row
from kdissect.decode.rows import Row, element_namer, length_prefix, tagged_fields_row, uvarint_size
from kdissect.decode.schema.plan import FieldPlan, Kind, StructPlan, header_plan, message_plan
from kdissect.decode.tree import printable
from kdissect.decode.values import Values
from kdissect.dissectors import SCHEMA_DISPLAYS, Display, GeneratedValue
from kdissect.dissectors.registry import dissector
from kdissect.pair.message import Message

_dumps = orjson.dumps
_zigzag = rec.zigzag_varint


def json_value(value: Any) -> Any:
    """A decoded value as JSON: UUIDs canonical, bytes as hex, non-finite floats as text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return str(value)


# -- rows as JSON-ready dicts (the general way, and the fallback of the text writer) ------
# Most rows are leaves: each list of children is one call, its leaves made inline. The
# two loops differ only in `about`, placed before `children`: one loop with a test per
# row would cost every JSON line, and `about` is rarely asked for.


def rows_records(rows: list[Row]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    append = records.append
    for name, kind, value, display, offset, size, _, children, generated in rows:
        if value is not None and type(value) is not int and type(value) is not str:
            value = json_value(value)
        record = {"name": name, "type": kind, "value": value, "display": display, "offset": offset, "size": size,
                  "children": rows_records(children) if children else []}
        if generated:
            record["generated"] = True
        append(record)
    return records


def rows_records_about(rows: list[Row]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    append = records.append
    for name, kind, value, display, offset, size, about, children, generated in rows:
        if value is not None and type(value) is not int and type(value) is not str:
            value = json_value(value)
        record = {"name": name, "type": kind, "value": value, "display": display, "offset": offset, "size": size,
                  "about": about, "children": rows_records_about(children) if children else []}
        if generated:
            record["generated"] = True
        append(record)
    return records


def row_json(row: Row) -> str:
    """One row (with its subtree) as JSON text, without `about`: the writer's fallback."""
    return _dumps(rows_records([row])).decode()[1:-1]


# -- the text writer -----------------------------------------------------------------------


class _NotWritten(Exception):
    """Something only the rows or the tree say right: the message is written the usual way."""


def message_tree_json(message: Message) -> str | None:
    """The JSON text of the message's tree without `about`s (what `message_tree_record`
    gives, dumped); None when the body is not written here."""
    key, version, kind = message.api_key, message.api_version, message.kind
    if key is None or version is None or message._tree is not None:
        return None
    if not message.is_request and message.pair is None:
        return None
    plan = message_plan(key, version, kind)
    if plan is None:
        return None
    values = message.fast_values(keep=False)
    if values is None:
        return None
    try:
        return _message_json(message.frame.data, kind, key, version, plan.body, values)
    except Exception:  # whatever it is, the usual way writes it or says so
        return None


def _message_json(data: bytes, kind: str, api_key: int, version: int, body_plan: StructPlan,
                  body: Values) -> str | None:
    meaning = dissector(api_key)
    displays: Mapping[str, Display] = _NO_DISPLAYS
    generated: dict[int, list[GeneratedValue]] = {}
    if meaning is not None and kind == "response":
        displays = meaning.response_displays
        generated = meaning.response_generated_values(body)
    header = _header_json(data, kind, api_key, version)
    if header is None:
        return None
    header_text, header_end = header
    writer = _Writer(data, displays, generated)
    children, _ = writer.struct(body_plan)(body, header_end, writer)
    size = len(data) - 4
    return (f'{{"name":{_string(message_name(api_key, kind))},"type":"message","value":null,'
            f'"display":"v{version}","offset":0,"size":{len(data)},"children":['
            f'{{"name":"Frame","type":"frame","value":null,"display":"","offset":0,"size":4,"children":['
            f'{{"name":"size","type":"int32","value":{size},"display":"{size}","offset":0,"size":4,'
            f'"children":[]}}]}},{header_text},'
            f'{{"name":{_string(body_plan.name)},"type":"struct","value":null,"display":"","offset":{header_end},'
            f'"size":{len(data) - header_end},"children":[{",".join(children)}]}}]}}')


_HEADER_NAME = {"request": "RequestHeader", "response": "ResponseHeader"}


def _header_json(data: bytes, kind: str, api_key: int, version: int) -> tuple[str, int] | None:
    found = _header_kind(kind, api_key, version)
    if found is None:
        return None
    decoder, header_struct, api_key_text, head = found
    values, end = decoder(data, 4, len(data))
    writer = _Writer(data, _NO_DISPLAYS)
    children, _ = writer.struct(header_struct)(values, 4, writer)
    if kind == "request":
        if values[header_struct.fields[0].name] != api_key:
            return None
        children[0] = api_key_text
    return f'{head}{end - 4},"children":[{",".join(children)}]}}', end


@functools.cache
def _header_kind(kind: str, api_key: int, version: int) -> tuple[StructDecoder, StructPlan, str, str] | None:
    """A message header's decoder, plan, the JSON of a request's api key and the header's up to its size."""
    header_version = (request_header_version if kind == "request" else response_header_version)(api_key, version)
    header_struct = header_plan(kind, header_version).body
    decoder = struct_decoder(header_struct)
    if decoder is None:
        return None
    first = header_struct.fields[0]
    api = APIS.get(api_key)
    shown = f"{api_key} ({api.name if api else 'unknown API'})"
    api_key_text = (f'{{"name":{_string(first.name)},"type":{_string(first.label)},"value":{api_key},'
                    f'"display":{_string(shown)},"offset":4,"size":{first.codec.size},"children":[]}}')
    head = (f'{{"name":"{_HEADER_NAME[kind]}","type":"header","value":null,"display":"v{header_version}",'
            f'"offset":4,"size":')
    return decoder, header_struct, api_key_text, head


def _string(text: str) -> str:
    """A JSON string as orjson writes it (wire text stays as it is; the line is escaped later)."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return _dumps(text).decode()


class _Quoted(dict[str, str]):
    """Texts that recur (types, names, client ids) as JSON strings, each written once."""

    def __missing__(self, text: str) -> str:
        quoted = _string(text)
        if len(self) < 65536:  # client ids come from the wire: a hostile capture must not grow it
            self[text] = quoted
        return quoted


QUOTED = _QUOTED = _Quoted()


def _node(name: str, kind: str, value: str, display: str, offset: int, size: int, children: str = "") -> str:
    """One node's JSON from its parts already written as JSON (`children` without brackets)."""
    return (f'{{"name":{name},"type":{kind},"value":{value},"display":{display},"offset":{offset},'
            f'"size":{size},"children":[{children}]}}')


def _quoted_display(text: str, form: str) -> str:
    """The JSON of `"text" form`, the display of a string field."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"\\"{text}\\" {form}"'
    return _string(f'"{printable(text)}" {form}')


StructWriter = Callable[[Values, int, "_Writer"], tuple[list[str], int]]
_NO_DISPLAYS: Mapping[str, Display] = {}


class _Writer:
    """JSON text of one body's fields; integer displays by field name (the API's rules)."""

    def __init__(self, data: bytes, displays: Mapping[str, Display],
                 generated: dict[int, list[GeneratedValue]] | None = None) -> None:
        self.data = data  # the frame, for tagged fields and record batches
        self.displays = displays
        self.generated = generated  # values computed from others, by the identity of their struct's values
        found = _WRITERS.get(id(displays))
        if found is None or found[0] is not displays:
            found = _WRITERS[id(displays)] = (displays, {})
        self.writers = found[1]  # the struct writers made for these displays, by plan

    def struct(self, plan: StructPlan) -> StructWriter:
        found = self.writers.get(id(plan))
        if found is None or found[0] is not plan:
            found = self.writers[id(plan)] = (plan, _compile_struct(plan, self.displays))
        return found[1]

    def field(self, f: FieldPlan, name: str, value: Any, pos: int) -> tuple[str, int]:
        """A field that is not a fixed-size integer of a struct: (its JSON, its size)."""
        kind = f.kind
        if kind is Kind.STRING or kind is Kind.BYTES:
            return _length_prefixed(f, name, value, pos)
        if kind is Kind.ARRAY:
            return self.array(f, name, value, pos)
        if kind is Kind.STRUCT:
            return self.nested(f, name, value, pos)
        if kind is Kind.BOOL:
            shown = '"true"' if value else '"false"'
            return _node(name, _QUOTED[f.label], _dumps(json_value(value)).decode(), shown, pos, 1), 1
        if kind is Kind.UUID:
            text = f'"{value}"' if type(value) is uuid.UUID else _dumps(json_value(value)).decode()
            return _node(name, _QUOTED[f.label], text, text if type(value) is uuid.UUID else _string(str(value)),
                         pos, 16), 16
        if kind is Kind.RECORDS:
            return self.records(f, name, value, pos)
        raise _NotWritten(kind)  # integers outside structs' fixed runs, floats: the rows

    def array(self, f: FieldPlan, name: str, value: list[Any] | None, pos: int) -> tuple[str, int]:
        count = None if value is None else len(value)
        if f.compact:
            wire = 0 if count is None else count + 1
            end = pos + uvarint_size(wire)
            parts = [f'{{"name":"length","type":"uvarint","value":{wire},"display":"{wire} (compact, n+1)",'
                     f'"offset":{pos},"size":{end - pos},"children":[]}}']
        else:
            wire = -1 if count is None else count
            end = pos + 4
            parts = [f'{{"name":"length","type":"int32","value":{wire},"display":"{wire}","offset":{pos},'
                     f'"size":4,"children":[]}}']
        if value is not None:
            element = f.element
            assert element is not None
            names = _element_names(element.label, len(value))
            append = parts.append
            if element.kind is Kind.INTEGER:  # arrays of ids and offsets: inline
                size = element.codec.size
                label = _QUOTED[element.label]
                for name_at, item in zip(names, value):  # noqa: B905 (names may be longer)
                    append(f'{{"name":{name_at},"type":{label},"value":{item},"display":"{item}",'
                           f'"offset":{end},"size":{size},"children":[]}}')
                    end += size
            elif element.kind is Kind.STRUCT and not element.nullable:  # arrays of structs: inline
                assert element.struct is not None
                write = self.struct(element.struct)
                label = _QUOTED[element.label]
                for name_at, item in zip(names, value):  # noqa: B905 (names may be longer)
                    children, stop = write(item or {}, end, self)
                    append(f'{{"name":{name_at},"type":{label},"value":null,"display":"struct","offset":{end},'
                           f'"size":{stop - end},"children":[{",".join(children)}]}}')
                    end = stop
            else:
                read = self.nested if element.kind is Kind.STRUCT else self.field
                for name_at, item in zip(names, value):  # noqa: B905 (names may be longer)
                    text, size = read(element, name_at, item, end)
                    append(text)
                    end += size
        if count is None:
            shown, display = "null", '"null"'
        else:
            shown, display = str(count), ('"1 element"' if count == 1 else f'"{count} elements"')
        return (f'{{"name":{name},"type":{_QUOTED[f.label]},"value":{shown},"display":{display},"offset":{pos},'
                f'"size":{end - pos},"children":[{",".join(parts)}]}}'), end - pos

    def nested(self, f: FieldPlan, name: str, value: Values | None, pos: int) -> tuple[str, int]:
        assert f.struct is not None
        label = _QUOTED[f.label]
        if not f.nullable:
            children, end = self.struct(f.struct)(value or {}, pos, self)
            return (f'{{"name":{name},"type":{label},"value":null,"display":"struct","offset":{pos},'
                    f'"size":{end - pos},"children":[{",".join(children)}]}}'), end - pos
        if value is None:
            presence = _node('"presence"', '"int8"', "-1", '"-1 (null)"', pos, 1)
            return _node(name, label, "null", '"null"', pos, 1, presence), 1
        presence = _node('"presence"', '"int8"', "1", '"1 (present)"', pos, 1)
        children, end = self.struct(f.struct)(value, pos + 1, self)
        return _node(name, label, "null", '"struct"', pos, end - pos, ",".join([presence, *children])), end - pos

    def tagged_fields(self, plan: StructPlan, pos: int) -> tuple[str, int]:
        row = tagged_fields_row(self.data, self.displays, self.generated or {}, plan, pos)
        return row_json(row), row[5]

    def records(self, f: FieldPlan, name: str, value: bytes | None, pos: int) -> tuple[str, int]:
        """A `records` field: its length prefix, then its batches."""
        if value is None:
            return _length_prefixed(f, name, value, pos)
        length = len(value)
        prefix, form = length_prefix(length, f.compact, 4)
        if f.compact:
            length_text = (f'{{"name":"length","type":"uvarint","value":{length + 1},'
                           f'"display":"{length + 1} (compact, len+1)","offset":{pos},"size":{prefix},"children":[]}}')
        else:
            length_text = (f'{{"name":"length","type":"int32","value":{length},"display":"{length}",'
                           f'"offset":{pos},"size":4,"children":[]}}')
        start = pos + prefix
        entries = entries_json(self.data, start, start + length)
        count = len(entries)
        display = f'"{length} bytes, {count} batch{"" if count == 1 else "es"} {form}"'
        return _node(name, _QUOTED[f.label], f'"{value.hex()}"', display, pos, prefix + length,
                     ",".join([length_text, *entries])), prefix + length


# per displays (each API's rules, kept as long as the process), per plan: the struct writers
_WRITERS: dict[int, tuple[Mapping[str, Display], dict[int, tuple[StructPlan, StructWriter]]]] = {}


def _compile_struct(plan: StructPlan, displays: Mapping[str, Display]) -> StructWriter:
    """A function writing the struct's fields from `pos`: (their JSON texts, the struct's end).

    Fixed-size integers are written inline from constants; every other field by the writer."""
    env: dict[str, Any] = {"_string": _string, "_length_prefixed": _length_prefixed,
                           "_insert_generated": _insert_generated}
    lines = ["def write(values, pos, w):", "    c = []", "    a = c.append"]
    for index, field in enumerate(plan.fields):
        name = f"N{index}"
        env[name] = _dumps(field.name).decode()
        env[f"F{index}"] = field
        size = field.codec.size if field.kind is Kind.INTEGER else 0
        if not size:
            call = _FIELD_CALLS.get(field.kind, "w.field")
            lines += [f"    t, s = {call}(F{index}, N{index}, values[{field.name!r}], pos)", "    a(t)",
                      "    pos += s"]
            continue
        rule = displays.get(field.name) if displays else None
        if rule is None and field.meaning is not None:  # what the schema says it is
            rule = SCHEMA_DISPLAYS[field.meaning]
        env[f"H{index}"] = f'{{"name":{env[name]},"type":{_dumps(field.label).decode()},"value":'
        env[f"T{index}"] = f',"size":{size},"children":[]}}'
        lines.append(f"    v = values[{field.name!r}]")
        if rule is None:
            lines.append(f'    a(f"{{H{index}}}{{v}}{{D}}{{v}}{{O}}{{pos}}{{T{index}}}")')
        else:
            env[f"R{index}"] = rule
            lines += [f"    d = R{index}(v)",
                      f'    a(f"{{H{index}}}{{v}}{{DQ}}{{_string(str(v) if d is None else d)}}{{OQ}}{{pos}}{{T{index}}}")']
        lines.append(f"    pos += {size}")
    if plan.flexible:
        env["PLAN"] = plan
        lines += ["    if w.data[pos]:", "        t, s = w.tagged_fields(PLAN, pos)", "        a(t)", "        pos += s",
                  "    else:", '        a(f"{TG}{pos}{TGT}")', "        pos += 1"]
    env["NAMES"] = tuple(f.name for f in plan.fields) + (("tagged_fields",) if plan.flexible else ())
    lines += ["    g = w.generated", "    if g:", "        extra = g.get(id(values))",
              "        if extra:", "            _insert_generated(c, NAMES, extra)", "    return c, pos"]
    env.update(D=',"display":"', O='","offset":', DQ=',"display":', OQ=',"offset":',
               TG='{"name":"tagged_fields","type":"uvarint","value":0,"display":"0","offset":',
               TGT=',"size":1,"children":[]}')
    exec("\n".join(lines), env)  # source made above from the plan's names
    writer: StructWriter = env["write"]
    return writer


def _insert_generated(children: list[str], names: tuple[str, ...], extra: list[GeneratedValue]) -> None:
    """Each value computed from others after the field it follows, at that field's offset (as rows place them)."""
    placed: list[str | None] = list(names)  # the fields' names; None for what was inserted
    for item in extra:
        for index, name in enumerate(placed):
            if name == item.after:
                text = children[index]
                start = text.index('"offset":') + 9  # its own: keys inside strings have their quotes escaped
                offset = text[start:text.index(",", start)]
                children.insert(index + 1, (
                    f'{{"name":{_string(item.name)},"type":{_string(item.type)},'
                    f'"value":{_dumps(json_value(item.value)).decode()},"display":{_string(str(item.value))},'
                    f'"offset":{offset},"size":0,"children":[],"generated":true}}'))
                placed.insert(index + 1, None)
                break


# how a struct writer writes a field of each kind other than fixed-size integers
_FIELD_CALLS = {Kind.STRING: "_length_prefixed", Kind.BYTES: "_length_prefixed", Kind.ARRAY: "w.array",
                Kind.STRUCT: "w.nested"}


# `"label[0]"`, `"label[1]"`, ... as JSON strings
_element_names = element_namer(_string)


def _length_prefixed(f: FieldPlan, name: str, value: Any, pos: int) -> tuple[str, int]:
    is_string = f.kind is Kind.STRING
    label = _QUOTED[f.label]
    if value is None:
        if f.compact:
            return _node(name, label, "null", '"null (compact, len+1=0)"', pos, 1), 1
        width = 2 if is_string else 4
        return _node(name, label, "null", f'"null (int{width * 8} len=-1)"', pos, width), width
    length = len(value) if not is_string or value.isascii() else len(value.encode())
    prefix, form = length_prefix(length, f.compact, 2 if is_string else 4)
    if is_string:
        text, display = _string(value), _quoted_display(value, form)
    else:
        text, display = f'"{bytes(value).hex()}"', _string(f"{hex_display(value)} {form}")
    return (f'{{"name":{name},"type":{label},"value":{text},"display":{display},"offset":{pos},'
            f'"size":{prefix + length},"children":[]}}'), prefix + length


# -- record batches --------------------------------------------------------------------------


def entries_json(data: bytes, start: int, end: int) -> list[str]:
    """The entries of the `records` content data[start:end] as JSON texts, as `entries_rows`
    lays them out; raises `_NotWritten` when one is not a clean batch or message.

    Ordinary magic 2 batches are read and written at once (`_batch_json`); any
    other entry is decoded and laid out as rows, and the rows written."""
    texts: list[str] = []
    pos = start
    while pos < end:
        if end - pos < rec.ENTRY_PREAMBLE:
            return _entries_from_rows(data, start, end)
        entry_end = pos + rec.LOG_OVERHEAD + _SIZE.unpack_from(data, pos + 8)[0]
        if entry_end > end or entry_end - pos < rec.ENTRY_PREAMBLE:
            return _entries_from_rows(data, start, end)
        text = None
        if data[pos + 16] == 2 and entry_end - pos >= rec.BATCH_HEADER:
            fields = _BATCH.unpack_from(data, pos)
            if not fields[5] & 0x20 and rec.crc32c(memoryview(data)[pos + rec.BATCH_CRC_FROM:entry_end]) == fields[4]:
                with contextlib.suppress(_Unusual):
                    text = _batch_json(data, pos, entry_end, fields, len(texts))
        if text is None:  # control records, a legacy message, anything unusual
            entry = _entries_from_rows(data, pos, entry_end, len(texts))
            if len(entry) != 1:
                raise _NotWritten("an entry that is not one")
            text = entry[0]
        texts.append(text)
        pos = entry_end
    return texts


def _entries_from_rows(data: bytes, start: int, end: int, first: int = 0) -> list[str]:
    """The entries of data[start:end] decoded and laid out as rows (numbered from `first`), written."""
    texts = []
    for index, entry in enumerate(rec.decode_records(data, start, end, max_decompressed=rec.MAX_DECOMPRESSED_BYTES),
                                  first):
        if not clean_entry(entry):
            raise _NotWritten("record batches with notes")
        if isinstance(entry, rec.RecordBatch):
            texts.append(row_json(batch_row(entry, data, index)))
        else:
            assert isinstance(entry, rec.LegacyMessage)
            texts.append(row_json(legacy_message_row(entry, data, f"Message[{index}]")))
    return texts


class _Unusual(Exception):
    """A batch `_batch_json` does not write: it goes the general way."""


_BATCH = struct.Struct(">qiibIhiqqqhii")  # the magic 2 header, as `records` reads it
_SIZE = struct.Struct(">i")


def _batch_json(data: bytes, pos: int, end: int, fields: tuple[int, ...], index: int) -> str:
    """One batch as `record_rows` lays it out: its header field by field, then its records."""
    (base_offset, batch_length, leader_epoch, magic, crc, attributes, last_delta, base_time, max_time,
     producer_id, producer_epoch, base_sequence, count) = fields
    codec = attributes & 0x07
    start = pos + rec.BATCH_HEADER
    kind = _batch_kind(attributes)
    log_append = bool(attributes & 0x08)
    if codec:
        try:
            body = rec.decompress(codec, memoryview(data)[start:end], cap=rec.MAX_DECOMPRESSED_BYTES)
        except rec.DecompressionProblem:
            raise _Unusual from None
        records, done = _records_json(body, 0, len(body), count, base_offset, max_time if log_append else base_time,
                                      log_append)
        display = f"{end - start} bytes of {kind.compression} data, {len(body)} bytes decompressed"
        decompressed = (f'{{"name":"decompressed","type":"[]Record","value":{done},"display":{_records_count(done)},'
                        f'"offset":0,"size":{len(body)},"children":[{records}],"generated":true}}')
        records_text = (f'{{"name":"records","type":"bytes","value":"{memoryview(data)[start:end].hex()}",'
                        f'"display":"{display}","offset":{start},"size":{end - start},"children":[{decompressed}]}}')
    else:
        records, done = _records_json(data, start, end, count, base_offset, max_time if log_append else base_time,
                                      log_append)
        records_text = (f'{{"name":"records","type":"[]Record","value":{done},"display":{_records_count(done)},'
                        f'"offset":{start},"size":{end - start},"children":[{records}]}}')
    at = pos + 17  # the CRC, then the attributes at 21
    return (
        f'{{"name":"RecordBatch[{index}]","type":"RecordBatch","value":null,'
        f'"display":"{done} record{"" if done == 1 else "s"}, offset {base_offset}{kind.display}",'
        f'"offset":{pos},"size":{end - pos},"children":['
        f'{{"name":"baseOffset","type":"int64","value":{base_offset},"display":"{base_offset}",'
        f'"offset":{pos},"size":8,"children":[]}},'
        f'{{"name":"batchLength","type":"int32","value":{batch_length},"display":"{batch_length}",'
        f'"offset":{pos + 8},"size":4,"children":[]}},'
        f'{{"name":"partitionLeaderEpoch","type":"int32","value":{leader_epoch},'
        f'"display":"{leader_epoch}","offset":{pos + 12},"size":4,"children":[]}},'
        f'{{"name":"magic","type":"int8","value":{magic},"display":"{magic}","offset":{pos + 16},'
        f'"size":1,"children":[]}},'
        f'{{"name":"crc","type":"uint32","value":{crc},"display":"0x{crc:08x} (correct)",'
        f'"offset":{at},"size":4,"children":[]}},'
        f'{{"name":"attributes","type":"int16","value":{attributes},"display":{kind.attributes},"offset":{at + 4},'
        f'"size":2,"children":[{kind.bits.replace(_AT, str(at + 4))}]}},'
        f'{{"name":"lastOffsetDelta","type":"int32","value":{last_delta},'
        f'"display":"{last_delta}","offset":{at + 6},"size":4,"children":[]}},'
        f'{{"name":"baseTimestamp","type":"int64","value":{base_time},'
        f'"display":{_timestamp(base_time)},"offset":{at + 10},"size":8,"children":[]}},'
        f'{{"name":"maxTimestamp","type":"int64","value":{max_time},'
        f'"display":{_timestamp(max_time)},"offset":{at + 18},"size":8,"children":[]}},'
        f'{{"name":"producerId","type":"int64","value":{producer_id},"display":"{producer_id}",'
        f'"offset":{at + 26},"size":8,"children":[]}},'
        f'{{"name":"producerEpoch","type":"int16","value":{producer_epoch},'
        f'"display":"{producer_epoch}","offset":{at + 34},"size":2,"children":[]}},'
        f'{{"name":"baseSequence","type":"int32","value":{base_sequence},"display":"{base_sequence}",'
        f'"offset":{at + 36},"size":4,"children":[]}},'
        f'{{"name":"recordCount","type":"int32","value":{count},"display":"{count}",'
        f'"offset":{at + 40},"size":4,"children":[]}},{records_text}]}}')


# The batch header `_batch_json` writes, as `record_rows` lays it out (a test compares them).
assert [(name, kind, size) for name, kind, size, _ in BATCH_FIELDS] == [
    ("baseOffset", "int64", 8), ("batchLength", "int32", 4), ("partitionLeaderEpoch", "int32", 4),
    ("magic", "int8", 1), ("crc", "uint32", 4), ("attributes", "int16", 2), ("lastOffsetDelta", "int32", 4),
    ("baseTimestamp", "int64", 8), ("maxTimestamp", "int64", 8), ("producerId", "int64", 8),
    ("producerEpoch", "int16", 2), ("baseSequence", "int32", 4), ("recordCount", "int32", 4)]

_AT = "\x00"  # where a batch's attribute bits take the attributes' offset


@dataclass(frozen=True, slots=True)
class _BatchKind:
    """What a batch's attributes make of its texts, worked out once per attributes value."""

    compression: str
    display: str  # what the batch's display says after its offset: ", gzip, transactional"
    attributes: str  # the attributes' display, as JSON
    bits: str  # the attribute bits' JSON, `_AT` for their offset


@functools.cache
def _batch_kind(attributes: int) -> _BatchKind:
    """From `record_nodes`' own displays of a batch with these attributes and no records."""
    batch = rec.RecordBatch(position=0, size=0, base_offset=0, batch_length=0, partition_leader_epoch=0, magic=2,
                            crc=0, computed_crc=0, attributes=attributes, last_offset_delta=0, base_timestamp=0,
                            max_timestamp=0, producer_id=0, producer_epoch=0, base_sequence=0, record_count=0,
                            records=(), decompressed=None, records_end=0, notes=())
    head, _, tail = batch_display(batch).partition("0 records, offset 0")
    assert not head
    bits = []
    for name, kind, value, _ in attribute_bits(batch):
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        bits.append(f'{{"name":{_string(name)},"type":{_string(kind)},"value":{_dumps(value).decode()},'
                    f'"display":{_string(shown)},"offset":{_AT},"size":0,"children":[],"generated":true}}')
    return _BatchKind(batch.compression, tail, _string(attributes_display(batch)), ",".join(bits))


def _records_json(body: bytes, pos: int, end: int, count: int, base_offset: int, base_time: int,
                  log_append: bool) -> tuple[str, int]:
    """The `count` records exactly filling body[pos:end] as JSON, and how many; `_Unusual`
    for anything `records._record` would have a note about."""
    texts: list[str] = []
    append = texts.append
    done = 0
    while pos < end and done < count:
        text, pos = _record_json(body, pos, end, done, base_offset, base_time, log_append)
        append(text)
        done += 1
    if done != count or pos != end:
        raise _Unusual
    return ",".join(texts), done


def _record_json(body: bytes, pos: int, end: int, index: int, base_offset: int, base_time: int,
                 log_append: bool) -> tuple[str, int]:
    """The record at `pos` as `record_rows` lays it out, and where it ends."""
    length, b0 = _zigzag(body, pos, end, 5)
    record_end = b0 + length
    if b0 < 0 or length < 6 or record_end > end:
        raise _Unusual
    attributes = body[b0]
    b1 = b0 + 1
    delta, b2 = _zigzag(body, b1, record_end, 10)
    offset_delta, b3 = _zigzag(body, b2, record_end, 5)
    if b3 < 0 or b2 < 0:
        raise _Unusual
    key_length, key, b4, b5 = _varbytes(body, b3, record_end)
    value_length, value, b6, b7 = _varbytes(body, b5, record_end)
    key_shown, value_shown = _value_display(key), _value_display(value)
    headers, stop = _headers_json(body, b7, record_end)
    if stop != record_end:
        raise _Unusual
    timestamp = base_time if log_append else base_time + delta
    offset = base_offset + offset_delta
    return (
        f'{{"name":"Record[{index}]","type":"Record","value":null,'
        f'"display":{_string(f"offset {offset}, key {key_shown}, value {value_shown}")},'
        f'"offset":{pos},"size":{record_end - pos},"children":['
        f'{{"name":"length","type":"varint","value":{length},"display":"{length}",'
        f'"offset":{pos},"size":{b0 - pos},"children":[]}},'
        f'{{"name":"attributes","type":"int8","value":{attributes},"display":"{attributes}",'
        f'"offset":{b0},"size":1,"children":[]}},'
        f'{{"name":"timestampDelta","type":"varlong","value":{delta},'
        f'"display":"{delta}","offset":{b1},"size":{b2 - b1},"children":[]}},'
        f'{{"name":"timestamp","type":"int64","value":{timestamp},'
        f'"display":{_timestamp(timestamp)},"offset":{b2},"size":0,"children":[],"generated":true}},'
        f'{{"name":"offsetDelta","type":"varint","value":{offset_delta},"display":"{offset_delta}",'
        f'"offset":{b2},"size":{b3 - b2},"children":[]}},'
        f'{{"name":"offset","type":"int64","value":{offset},"display":"{offset}",'
        f'"offset":{b3},"size":0,"children":[],"generated":true}},'
        f'{_bytes_json("key", key_length, key, key_shown, b3, b4, b5)},'
        f'{_bytes_json("value", value_length, value, value_shown, b5, b6, b7)},{headers}]}}'), record_end


def _varbytes(body: bytes, pos: int, end: int) -> tuple[int, bytes | None, int, int]:
    """A record's length-prefixed key or value: (length, bytes or None, content start, end)."""
    length, at = _zigzag(body, pos, end, 5)
    if at < 0 or length < -1:
        raise _Unusual
    if length == -1:
        return length, None, at, at
    stop = at + length
    if stop > end:
        raise _Unusual
    return length, body[at:stop], at, stop


def _headers_json(body: bytes, pos: int, end: int) -> tuple[str, int]:
    """A record's headers (their count first) as JSON, and where they end."""
    count, at = _zigzag(body, pos, end, 5)
    if at < 0 or count < 0 or 2 * count > end - at:
        raise _Unusual
    parts = [f'{{"name":"length","type":"varint","value":{count},"display":"{count}","offset":{pos},'
             f'"size":{at - pos},"children":[]}}']
    for index in range(count):
        key_length, key, b0, b1 = _varbytes(body, at, end)
        value_length, value, b2, b3 = _varbytes(body, b1, end)
        if key is None:
            raise _Unusual
        text = key.decode("utf-8", "replace")
        quoted = f'"{printable(text)}"'
        shown = _value_display(value)
        parts.append(
            f'{{"name":"Header[{index}]","type":"Header","value":null,"display":{_string(f"{quoted} = {shown}")},'
            f'"offset":{at},"size":{b3 - at},"children":['
            f'{{"name":"headerKeyLength","type":"varint","value":{key_length},"display":"{key_length}",'
            f'"offset":{at},"size":{b0 - at},"children":[]}},'
            f'{{"name":"headerKey","type":"string","value":{_string(text)},"display":{_string(quoted)},'
            f'"offset":{b0},"size":{b1 - b0},"children":[]}},'
            f'{_bytes_json("headerValue", value_length, value, shown, b1, b2, b3)}]}}')
        at = b3
    return (f'{{"name":"headers","type":"[]Header","value":{count},"display":"{count} header{"" if count == 1 else "s"}",'
            f'"offset":{pos},"size":{at - pos},"children":[{",".join(parts)}]}}'), at


def _bytes_json(name: str, length: int, value: bytes | None, shown: str, pos: int, content: int,
                end: int) -> str:
    text = (f'{{"name":"{name}Length","type":"varint","value":{length},'
            f'"display":"{"-1 (null)" if length < 0 else length}","offset":{pos},"size":{content - pos},'
            f'"children":[]}}')
    if value is None:
        return text
    return (f'{text},{{"name":"{name}","type":"bytes","value":"{value.hex()}","display":{_string(shown)},'
            f'"offset":{content},"size":{end - content},"children":[]}}')


def _records_count(count: int) -> str:
    return '"1 record"' if count == 1 else f'"{count} records"'


def _value_display(raw: bytes | None) -> str:
    """`value_display(raw)`, at once for short printable ASCII (most keys and values)."""
    if raw is not None and len(raw) <= record_nodes.MAX_VALUE_BYTES and raw.isascii():
        text = raw.decode("ascii")
        if text.isprintable():
            return f'"{text}"'
    return value_display(raw)


@functools.lru_cache(maxsize=4096)
def _timestamp(milliseconds: int) -> str:
    """A record timestamp's display as JSON (records of a batch share a few)."""
    return _string(timestamp_display(milliseconds))


__all__ = ["QUOTED", "entries_json", "json_value", "message_tree_json", "row_json", "rows_records", "rows_records_about"]
