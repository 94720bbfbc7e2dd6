"""Generated decoders: each struct of a decode plan compiled once into specialised Python.

The interpreter (`kdissect.decode.interpreter`) is the reference: it builds an
annotated tree and survives any input. Most bodies in a capture are ordinary,
and for them a tree is more than anyone asked for. So each `StructPlan`
compiles, on first use, into one Python function that reads the struct's
fields straight into a dict of *flat values*:

- a struct is a dict of its untagged fields by name, in wire order;
- an array is a list (of dicts for struct elements), a null one None;
- a null nullable struct is None; strings are `str`, bytes `bytes`, UUIDs
  `uuid.UUID`, exactly the values the interpreter puts on its nodes.

No offsets are stored: fields tile their struct, so offsets follow from the
sizes, which follow from the values (every length prefix is read minimally
encoded, or the fast path is not taken).

A `records` field's value is its bytes, as on the interpreter's tree; the
decoder takes it only when its record batches decode without a note (see
`check_records`), so nothing the interpreter would say about them is lost.

Runs of fixed-size fields become one `struct` call. A tagged-field block that is
not empty is checked and read (`tagged_fields_reader`): each tag this version
defines that is on the wire adds its value to the struct's dict by the field's
name, after the untagged fields, in wire order (an absent tag is absent from the
dict, as on the interpreter's tree); unknown tags are not values. Anything unusual (a length past the end, bad UTF-8,
a null where the version allows none, a presence byte other than 1 or -1, a
non-minimal varint, a tag out of order, a field kind this generator does not
know) makes the decoder give up: the caller then
asks the interpreter, which explains the problem in its tree. So a value from
the fast path is always exactly the interpreter's value.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from kdissect.decode import records
from kdissect.decode.record_check import records_clean
from kdissect.decode.schema.loader import on_sources_change
from kdissect.decode.schema.plan import FieldPlan, Kind, MessagePlan, StructPlan

StructDecoder = Callable[[bytes, int, int], tuple[dict[str, Any], int]]

# What a fixed-size field contributes to a batched struct format.
_BATCH_CODES = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q",
                "float64": "d", "bool": "?", "uuid": "16s"}
_HANDLED = frozenset({Kind.INTEGER, Kind.FLOAT, Kind.BOOL, Kind.UUID, Kind.STRING, Kind.BYTES,
                      Kind.RECORDS, Kind.ARRAY, Kind.STRUCT})
_UINT32_MAX = 0xFFFFFFFF
# Python allows 20 statically nested blocks; deeper structs get a function of their own.
_MAX_INLINE_INDENT = 12


class Unusual(Exception):
    """The input is not for the fast path; the interpreter will say why."""


class Unsupported(Exception):
    """A plan holds a field kind the generator does not handle: no fast decoder."""


def uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """A minimally encoded unsigned varint of at most 32 bits: (value, end); Unusual otherwise."""
    value = shift = 0
    for at in range(pos, pos + 5):
        byte = data[at]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if (byte == 0 and at > pos) or value > _UINT32_MAX:
                raise Unusual("non-minimal or oversized varint")
            return value, at + 1
        shift += 7
    raise Unusual("varint longer than 5 bytes")


_new_object = object.__new__
_set_slot = object.__setattr__
_SAFE_UNKNOWN = uuid.SafeUUID.unknown


_UUIDS: dict[bytes, uuid.UUID] = {}  # made from these 16 bytes: ids repeat across messages
_UUIDS_KEPT = 1 << 16  # the memo starts afresh beyond this many ids


def make_uuid(raw: bytes) -> uuid.UUID:
    """`uuid.UUID(bytes=raw)` without its argument checks (raw is always 16 bytes here).

    UUIDs are immutable, so one made before for the same bytes is given again.
    """
    value = _UUIDS.get(raw)
    if value is None:
        value = _new_object(uuid.UUID)
        _set_slot(value, "int", int.from_bytes(raw))
        _set_slot(value, "is_safe", _SAFE_UNKNOWN)
        if len(_UUIDS) >= _UUIDS_KEPT:
            _UUIDS.clear()
        _UUIDS[raw] = value
    return value


def unusual(why: str) -> None:
    raise Unusual(why)


def check_records(data: bytes, start: int, end: int) -> None:
    """Unusual unless the record batches in data[start:end] decode without a single note.

    A `records` field's value is its bytes, on either path; what the fast path
    must not lose is the interpreter's notes on them (a CRC mismatch, a batch
    cut short, data that does not decompress), so batches with any go to it.
    Checking them costs the codecs and a pass over each record's varints
    (`record_check.records_clean`, which answers as decoding them would), not a tree.
    """
    if end > len(data):
        raise Unusual("records past the frame")
    if not records_clean(data, start, end, records.MAX_DECOMPRESSED_BYTES):
        raise Unusual("record batches with notes")


class _ArrayCodecs(dict[int, struct.Struct]):
    """Struct codecs for arrays of one fixed-size type, by element count, made on first use."""

    def __init__(self, code: str) -> None:
        super().__init__()
        self.code = code

    def __missing__(self, count: int) -> struct.Struct:
        codec = struct.Struct(f">{count}{self.code}")
        if len(self) < 256:
            self[count] = codec
        return codec


class _Writer:
    """Python source of one decoder, line by line; local names unique within it."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counter = 0
        self.constants: dict[str, Any] = {
            "uvarint": uvarint, "make_uuid": make_uuid, "unusual": unusual, "Unusual": Unusual,
            "check_records": check_records,
        }

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def codec(self, code: str) -> str:
        """The name of a precompiled `struct.Struct` for `code`."""
        name = self.fresh("codec")
        self.constants[name] = struct.Struct(code)
        return name

    def compile(self, name: str) -> Callable[..., Any]:
        namespace = dict(self.constants)
        source = "\n".join(self.lines)
        exec(compile(source, f"<kdissect generated {name}>", "exec"), namespace)
        function: Callable[..., Any] = namespace[name]
        function.__doc__ = source  # what was generated, for whoever debugs it
        return function


class _Generator:
    """Emits straight-line code for a struct plan, nested structs inlined."""

    def __init__(self, out: _Writer) -> None:
        self.out = out

    def struct(self, plan: StructPlan, indent: int) -> str:
        """Emit code reading `plan` at `pos`; returns the local holding its dict."""
        values: list[tuple[FieldPlan, str]] = []
        batch: list[FieldPlan] = []
        for field in plan.fields:
            if field.kind not in _HANDLED:
                raise Unsupported(f"{plan.name}.{field.name}: kind {field.kind!r}")
            if _batchable(field):
                batch.append(field)
                continue
            values.extend(self.batch(batch, indent))
            batch = []
            values.append((field, self.field(field, indent)))
        values.extend(self.batch(batch, indent))
        tagged = ""
        if plan.flexible:  # most tagged-field blocks are empty: one byte, 0
            reader, tagged = self.out.fresh("tagged"), self.out.fresh("t")
            self.out.constants[reader] = tagged_fields_reader(plan)
            self.out.emit(indent, f"if data[pos]: pos, {tagged} = {reader}(data, pos, limit)")
            self.out.emit(indent, f"else: pos += 1; {tagged} = None")
        name = self.out.fresh("s")
        items = ", ".join(f"{field.name!r}: {value}" for field, value in values)
        self.out.emit(indent, f"{name} = {{{items}}}")
        if tagged and plan.tagged:  # (without a defined tag, the reader finds no value)
            self.out.emit(indent, f"if {tagged}: {name}.update({tagged})")
        return name

    def batch(self, fields: list[FieldPlan], indent: int) -> list[tuple[FieldPlan, str]]:
        if not fields:
            return []
        code = ">" + "".join(_BATCH_CODES[f.label] for f in fields)
        codec = self.out.codec(code)
        names = [self.out.fresh("v") for _ in fields]
        target = ", ".join(names) + ("," if len(names) == 1 else "")
        self.out.emit(indent, f"{target} = {codec}.unpack_from(data, pos)")
        self.out.emit(indent, f"pos += {struct.calcsize(code)}")
        for field, name in zip(fields, names, strict=True):
            if field.kind is Kind.UUID:
                self.out.emit(indent, f"{name} = make_uuid({name})")
        return list(zip(fields, names, strict=True))

    def field(self, field: FieldPlan, indent: int) -> str:
        """Emit code reading `field` at `pos`; returns the local holding its value."""
        match field.kind:
            case Kind.INTEGER | Kind.FLOAT | Kind.BOOL | Kind.UUID:
                return self.batch([field], indent)[0][1]
            case Kind.STRING | Kind.BYTES | Kind.RECORDS:
                return self.length_prefixed(field, indent)
            case Kind.ARRAY:
                return self.array(field, indent)
            case Kind.STRUCT:
                return self.nested(field, indent)
        raise Unsupported(f"{field.name}: kind {field.kind!r}")

    def length(self, field: FieldPlan, indent: int, width: int) -> str:
        """Emit code reading a length (-1 for null) into a fresh local."""
        out, name = self.out, self.out.fresh("n")
        if field.compact:
            out.emit(indent, f"{name} = data[pos]")
            out.emit(indent, f"if {name} < 0x80: pos += 1")
            out.emit(indent, f"else: {name}, pos = uvarint(data, pos)")
            out.emit(indent, f"{name} -= 1")
        else:
            codec = out.codec(">h" if width == 2 else ">i")
            out.emit(indent, f"{name}, = {codec}.unpack_from(data, pos)")
            out.emit(indent, f"pos += {width}")
        return name

    def length_prefixed(self, field: FieldPlan, indent: int) -> str:
        out = self.out
        length = self.length(field, indent, 2 if field.kind is Kind.STRING else 4)
        name = out.fresh("v")
        out.emit(indent, f"if {length} < 0:")
        self.null(field, name, length, indent + 1)
        out.emit(indent, "else:")
        out.emit(indent + 1, f"end = pos + {length}")
        decode = ".decode()" if field.kind is Kind.STRING else ""
        out.emit(indent + 1, f"{name} = data[pos:end]{decode}")
        if field.kind is Kind.RECORDS:
            out.emit(indent + 1, "check_records(data, pos, end)")
        out.emit(indent + 1, "pos = end")
        return name

    def null(self, field: FieldPlan, name: str, length: str, indent: int) -> None:
        """A null: fine when nullable and exactly -1, otherwise the interpreter's case."""
        if field.nullable:
            self.out.emit(indent, f"if {length} != -1: unusual('negative length')")
        else:
            self.out.emit(indent, "unusual('null where not nullable')")
        self.out.emit(indent, f"{name} = None")

    def array(self, field: FieldPlan, indent: int) -> str:
        out, element = self.out, field.element
        assert element is not None
        count = self.length(field, indent, 4)
        name = out.fresh("v")
        out.emit(indent, f"if {count} < 0:")
        self.null(field, name, count, indent + 1)
        out.emit(indent, f"elif pos + {count} * {element.min_size} > limit: unusual('array past the end')")
        out.emit(indent, "else:")
        if element.kind in (Kind.INTEGER, Kind.FLOAT):
            codecs = out.fresh("codecs")
            out.constants[codecs] = _ArrayCodecs(_BATCH_CODES[element.label])
            out.emit(indent + 1, f"{name} = list(({codecs}.get({count}) or {codecs}[{count}]).unpack_from(data, pos))")
            out.emit(indent + 1, f"pos += {count} * {element.min_size}")
            return name
        if element.kind is Kind.STRUCT and element.struct is not None and _fixed_layout(element.struct):
            self.fixed_struct_array(element.struct, name, count, indent + 1)
            return name
        append = out.fresh("append")
        out.emit(indent + 1, f"{name} = []")
        out.emit(indent + 1, f"{append} = {name}.append")
        out.emit(indent + 1, f"for _ in range({count}):")
        if element.kind is Kind.STRUCT:
            assert element.struct is not None
            item = self.struct_or_call(element.struct, indent + 2)
        else:
            item = self.field(element, indent + 2)
        out.emit(indent + 2, f"{append}({item})")
        return name

    def fixed_struct_array(self, plan: StructPlan, name: str, count: str, indent: int) -> None:
        """An array of structs made only of fixed-size fields: one `iter_unpack` over all of them."""
        out = self.out
        code = ">" + "".join(_BATCH_CODES[f.label] for f in plan.fields) + ("B" if plan.flexible else "")
        codec = out.codec(code)
        items = [out.fresh("x") for _ in plan.fields]
        tag = out.fresh("t")
        target = ", ".join([*items, tag] if plan.flexible else items) + ("," if len(items) == 1 and not plan.flexible
                                                                        else "")
        values = ", ".join(f"{f.name!r}: {'make_uuid(' + item + ')' if f.kind is Kind.UUID else item}"
                           for f, item in zip(plan.fields, items, strict=True))
        check = f" if not {tag} or unusual('tagged fields')" if plan.flexible else ""
        out.emit(indent, f"end = pos + {count} * {struct.calcsize(code)}")
        out.emit(indent, f"{name} = [{{{values}}} for {target} in {codec}.iter_unpack(data[pos:end]){check}]")
        out.emit(indent, "pos = end")

    def nested(self, field: FieldPlan, indent: int) -> str:
        assert field.struct is not None
        out = self.out
        if not field.nullable:
            return self.struct_or_call(field.struct, indent)
        name, marker = out.fresh("v"), out.fresh("m")
        out.emit(indent, f"{marker} = data[pos]")
        out.emit(indent, "pos += 1")
        out.emit(indent, f"if {marker} == 0xFF: {name} = None")
        out.emit(indent, f"elif {marker} != 1: unusual('presence byte')")
        out.emit(indent, "else:")
        inner = self.struct_or_call(field.struct, indent + 1)
        out.emit(indent + 1, f"{name} = {inner}")
        return name

    def struct_or_call(self, plan: StructPlan, indent: int) -> str:
        """Inline a nested struct, or call its own decoder where Python's block nesting ends."""
        if indent < _MAX_INLINE_INDENT:
            return self.struct(plan, indent)
        decoder = struct_decoder(plan)
        if decoder is None:
            raise Unsupported(plan.name)
        function, name = self.out.fresh("decode"), self.out.fresh("s")
        self.out.constants[function] = decoder
        self.out.emit(indent, f"{name}, pos = {function}(data, pos, limit)")
        return name


def _fixed_layout(plan: StructPlan) -> bool:
    return bool(plan.fields) and all(_batchable(f) for f in plan.fields)


def _batchable(field: FieldPlan) -> bool:
    return field.kind in (Kind.INTEGER, Kind.FLOAT, Kind.BOOL, Kind.UUID) and field.label in _BATCH_CODES


_DECODERS: dict[int, tuple[StructPlan, StructDecoder | None]] = {}


def struct_decoder(plan: StructPlan) -> StructDecoder | None:
    """The generated decoder of a struct plan, compiled on first use; None when unsupported.

    It reads the struct at `pos` and returns (flat values, end); it raises
    `Unusual`, `struct.error`, `IndexError` or `UnicodeDecodeError` on input
    the interpreter must explain. The caller checks `end <= limit`.
    """
    found = _DECODERS.get(id(plan))
    if found is not None and found[0] is plan:
        return found[1]
    out = _Writer()
    out.emit(0, f"def decode_{plan.name}(data, pos, limit):")
    try:
        values = _Generator(out).struct(plan, 1)
        out.emit(1, f"return {values}, pos")
        decoder: StructDecoder | None = out.compile(f"decode_{plan.name}")
    except Unsupported:
        decoder = None
    _DECODERS[id(plan)] = (plan, decoder)
    return decoder


FieldDecoder = Callable[[bytes, int, int], tuple[Any, int]]
_FIELD_DECODERS: dict[int, tuple[FieldPlan, FieldDecoder | None]] = {}


def field_decoder(field: FieldPlan) -> FieldDecoder | None:
    """The generated decoder of one field's value (a tagged field's), compiled on first use.

    It reads the value at `pos` and returns (flat value, end), refusing as
    `struct_decoder`'s do; None when the field's kind is not handled.
    """
    found = _FIELD_DECODERS.get(id(field))
    if found is not None and found[0] is field:
        return found[1]
    out = _Writer()
    out.emit(0, "def decode_field(data, pos, limit):")
    try:
        value = _Generator(out).field(field, 1)
        out.emit(1, f"return {value}, pos")
        decoder: FieldDecoder | None = out.compile("decode_field")
    except Unsupported:
        decoder = None
    _FIELD_DECODERS[id(field)] = (field, decoder)
    return decoder


TaggedFieldsReader = Callable[[bytes, int, int], tuple[int, dict[str, Any] | None]]


def tagged_fields_reader(plan: StructPlan) -> TaggedFieldsReader:
    """What a struct's generated decoder calls on a non-empty tagged-field block: its end,
    and the flat values of the tags `plan` defines that it holds, by field name in wire
    order (None when it holds none), for the struct's dict (`tree_values` reads the same
    off the interpreter's tree).

    What is checked is that the interpreter would have nothing to say about the block:
    tags ascending, every entry within `limit`, each known tag's value decoding to
    exactly its declared size. Anything else is refused. Unknown tags are kept as their
    bytes, as the interpreter keeps them, and are not values.
    """
    decoders = {tag: (field.name, field_decoder(field)) for tag, field in plan.tagged.items()}

    def read_tagged_fields(data: bytes, pos: int, limit: int) -> tuple[int, dict[str, Any] | None]:
        count, pos = uvarint(data, pos)
        if pos + 2 * count > limit:
            raise Unusual("tagged fields past the end")
        previous = -1
        found: dict[str, Any] | None = None
        for _ in range(count):
            tag, pos = uvarint(data, pos)
            size, start = uvarint(data, pos)
            pos = start + size
            if pos > limit or tag <= previous:
                raise Unusual("a tagged field past the end, or tags out of order")
            previous = tag
            if tag in decoders:
                name, decoder = decoders[tag]
                if decoder is None:
                    raise Unusual(f"tagged field {tag} of a kind the fast path does not read")
                value, end = decoder(data, start, pos)
                if end != pos:
                    raise Unusual(f"tagged field {tag} not exactly its declared size")
                if found is None:
                    found = {}
                found[name] = value
        return pos, found
    return read_tagged_fields


MessageDecoder = Callable[[bytes], dict[str, Any]]
_MESSAGE_DECODERS: dict[tuple[int, int, str], MessageDecoder | None] = {}
on_sources_change(_MESSAGE_DECODERS.clear)  # other definitions: other plans, other field names


def message_decoder(header: StructPlan, body: MessagePlan) -> MessageDecoder | None:
    """One function for a whole frame of this (API, version, direction): header, then body.

    It takes a frame whose size prefix matches its length and returns the body's
    flat values, raising (as `struct_decoder`'s do) unless header and body fill
    the frame exactly, and unless a request's header names this API and version:
    the interpreter reads a request by what its own header says.
    """
    key = (body.api_key or 0, body.version, body.kind)
    if key in _MESSAGE_DECODERS:
        return _MESSAGE_DECODERS[key]
    out = _Writer()
    out.emit(0, "def decode_message(data):")
    out.emit(1, "pos, limit = 4, len(data)")
    try:
        generator = _Generator(out)
        header_values = generator.struct(header, 1)
        if body.kind == "request":
            _check_request_header(out, header_values, key[0], body.version)
        values = generator.struct(body.body, 1)
        out.emit(1, "if pos != limit: unusual('bytes after the body')")
        out.emit(1, f"return {values}")
        decoder: MessageDecoder | None = out.compile("decode_message")
    except Unsupported:
        decoder = None
    _MESSAGE_DECODERS[key] = decoder
    return decoder


def _check_request_header(out: _Writer, header: str, api_key: int, version: int) -> None:
    """Emit the check that a request's header names the API and version being decoded."""
    found = f"({header}['request_api_key'], {header}['request_api_version'])"
    out.emit(1, f"if {found} != {(api_key, version)!r}: unusual('the header names another API or version')")


FAST_PATH_REFUSALS = (Unusual, struct.error, IndexError, UnicodeDecodeError)


def decode_values(plan: StructPlan, data: bytes, pos: int, limit: int) -> tuple[dict[str, Any], int] | None:
    """(flat values, end) of the struct at `pos`, or None when the interpreter must decode it.

    Nothing past `limit` is ever part of the answer: a decode that ran past it is refused.
    """
    decoder = struct_decoder(plan)
    if decoder is None:
        return None
    try:
        values, end = decoder(data, pos, limit)
    except FAST_PATH_REFUSALS:
        return None
    return (values, end) if end <= limit else None


__all__ = ["FAST_PATH_REFUSALS", "FieldDecoder", "MessageDecoder", "StructDecoder", "TaggedFieldsReader", "Unusual",
           "decode_values", "field_decoder", "make_uuid", "message_decoder", "struct_decoder", "tagged_fields_reader",
           "uvarint"]
