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

Runs of fixed-size fields become one `struct` call. Anything unusual (tagged
fields present, a length past the end, bad UTF-8, a null where the version
allows none, a presence byte other than 1 or -1, a non-minimal varint, a field
kind this generator does not know) makes the decoder give up: the caller then
asks the interpreter, which explains the problem in its tree. So a value from
the fast path is always exactly the interpreter's value.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from kdissect.decode.schema.plan import FieldPlan, Kind, MessagePlan, StructPlan

StructDecoder = Callable[[bytes, int, int], tuple[dict[str, Any], int]]

# What a fixed-size field contributes to a batched struct format.
_BATCH_CODES = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q",
                "float64": "d", "bool": "?", "uuid": "16s"}
_HANDLED = frozenset({Kind.INTEGER, Kind.FLOAT, Kind.BOOL, Kind.UUID, Kind.STRING, Kind.BYTES,
                      Kind.ARRAY, Kind.STRUCT})
_UINT32_MAX = 0xFFFFFFFF


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


def make_uuid(raw: bytes) -> uuid.UUID:
    """`uuid.UUID(bytes=raw)` without its argument checks (raw is always 16 bytes here)."""
    value = _new_object(uuid.UUID)
    _set_slot(value, "int", int.from_bytes(raw))
    _set_slot(value, "is_safe", _SAFE_UNKNOWN)
    return value


def unusual(why: str) -> None:
    raise Unusual(why)


class _Writer:
    """Python source of one struct decoder, line by line; local names unique in the namespace."""

    def __init__(self, counter: list[int]) -> None:
        self.lines: list[str] = []
        self.counter = counter

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def fresh(self, stem: str) -> str:
        self.counter[0] += 1
        return f"{stem}{self.counter[0]}"


class _Generator:
    """Compiles the structs of one plan (shared structs once) into one namespace."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}  # id(StructPlan) -> function name
        self.plans: list[StructPlan] = []  # kept alive while ids are used
        self.sources: list[str] = []
        self.counter = [0]
        self.constants: dict[str, Any] = {
            "uvarint": uvarint, "make_uuid": make_uuid, "unusual": unusual, "Unusual": Unusual,
            "unpack_from": struct.unpack_from,
        }

    def function(self, plan: StructPlan) -> str:
        name = self.names.get(id(plan))
        if name is not None:
            return name
        name = self.names[id(plan)] = f"struct_{len(self.names)}_{plan.name}"
        self.plans.append(plan)
        out = _Writer(self.counter)
        out.emit(0, f"def {name}(data, pos, limit):")
        values = self.fields(out, plan)
        if plan.flexible:  # an empty tagged-field block, or not the fast path
            out.emit(1, "if data[pos]: unusual('tagged fields')")
            out.emit(1, "pos += 1")
        items = ", ".join(f"{field.name!r}: {value}" for field, value in values)
        out.emit(1, f"return {{{items}}}, pos")
        self.sources.append("\n".join(out.lines))
        return name

    def fields(self, out: _Writer, plan: StructPlan) -> list[tuple[FieldPlan, str]]:
        values: list[tuple[FieldPlan, str]] = []
        batch: list[FieldPlan] = []
        for field in plan.fields:
            if field.kind not in _HANDLED:
                raise Unsupported(f"{plan.name}.{field.name}: kind {field.kind!r}")
            if _batchable(field):
                batch.append(field)
                continue
            values.extend(self.batch(out, batch))
            batch = []
            values.append((field, self.field(out, field, 1)))
        values.extend(self.batch(out, batch))
        return values

    def batch(self, out: _Writer, fields: list[FieldPlan]) -> list[tuple[FieldPlan, str]]:
        if not fields:
            return []
        codec = struct.Struct(">" + "".join(_BATCH_CODES[f.label] for f in fields))
        codec_name = out.fresh("codec")
        self.constants[codec_name] = codec
        names = [out.fresh("v") for _ in fields]
        target = ", ".join(names) + ("," if len(names) == 1 else "")
        out.emit(1, f"{target} = {codec_name}.unpack_from(data, pos)")
        out.emit(1, f"pos += {codec.size}")
        for field, name in zip(fields, names, strict=True):
            if field.kind is Kind.UUID:
                out.emit(1, f"{name} = make_uuid({name})")
        return list(zip(fields, names, strict=True))

    def field(self, out: _Writer, field: FieldPlan, indent: int) -> str:
        """Emit code reading `field` at `pos`; returns the local holding its value."""
        match field.kind:
            case Kind.INTEGER | Kind.FLOAT | Kind.BOOL | Kind.UUID:
                return self.batch_one(out, field, indent)
            case Kind.STRING | Kind.BYTES:
                return self.length_prefixed(out, field, indent)
            case Kind.ARRAY:
                return self.array(out, field, indent)
            case Kind.STRUCT:
                return self.struct(out, field, indent)
        raise Unsupported(f"{field.name}: kind {field.kind!r}")

    def batch_one(self, out: _Writer, field: FieldPlan, indent: int) -> str:
        code = ">" + _BATCH_CODES[field.label]
        name = out.fresh("v")
        out.emit(indent, f"{name} = unpack_from({code!r}, data, pos)[0]")
        out.emit(indent, f"pos += {struct.calcsize(code)}")
        if field.kind is Kind.UUID:
            out.emit(indent, f"{name} = make_uuid({name})")
        return name

    def length(self, out: _Writer, field: FieldPlan, indent: int, width: int) -> str:
        """Emit code reading a length (-1 for null) into a fresh local."""
        name = out.fresh("n")
        if field.compact:
            out.emit(indent, f"{name} = data[pos]")
            out.emit(indent, f"if {name} < 0x80: pos += 1")
            out.emit(indent, f"else: {name}, pos = uvarint(data, pos)")
            out.emit(indent, f"{name} -= 1")
        else:
            code = ">h" if width == 2 else ">i"
            out.emit(indent, f"{name} = unpack_from({code!r}, data, pos)[0]")
            out.emit(indent, f"pos += {width}")
        return name

    def length_prefixed(self, out: _Writer, field: FieldPlan, indent: int) -> str:
        length = self.length(out, field, indent, 2 if field.kind is Kind.STRING else 4)
        name = out.fresh("v")
        out.emit(indent, f"if {length} < 0:")
        self.null(out, field, name, length, indent + 1)
        out.emit(indent, "else:")
        out.emit(indent + 1, f"end = pos + {length}")
        decode = ".decode()" if field.kind is Kind.STRING else ""
        out.emit(indent + 1, f"{name} = data[pos:end]{decode}")
        out.emit(indent + 1, "pos = end")
        return name

    def null(self, out: _Writer, field: FieldPlan, name: str, length: str, indent: int) -> None:
        """A null: fine when nullable and exactly -1, otherwise the interpreter's case."""
        if field.nullable:
            out.emit(indent, f"if {length} != -1: unusual('negative length')")
            out.emit(indent, f"{name} = None")
        else:
            out.emit(indent, "unusual('null where not nullable')")
            out.emit(indent, f"{name} = None")

    def array(self, out: _Writer, field: FieldPlan, indent: int) -> str:
        element = field.element
        assert element is not None
        count = self.length(out, field, indent, 4)
        name = out.fresh("v")
        out.emit(indent, f"if {count} < 0:")
        self.null(out, field, name, count, indent + 1)
        out.emit(indent, f"elif pos + {count} * {element.min_size} > limit: unusual('array past the end')")
        if element.kind in (Kind.INTEGER, Kind.FLOAT):
            code = _BATCH_CODES[element.label]
            out.emit(indent, "else:")
            out.emit(indent + 1, f"{name} = list(unpack_from('>%d{code}' % {count}, data, pos))")
            out.emit(indent + 1, f"pos += {count} * {element.min_size}")
            return name
        out.emit(indent, "else:")
        append = out.fresh("append")
        out.emit(indent + 1, f"{name} = []")
        out.emit(indent + 1, f"{append} = {name}.append")
        out.emit(indent + 1, f"for _ in range({count}):")
        if element.kind is Kind.STRUCT:
            assert element.struct is not None
            function = self.function(element.struct)
            item = out.fresh("e")
            out.emit(indent + 2, f"{item}, pos = {function}(data, pos, limit)")
        else:
            item = self.field(out, element, indent + 2)
        out.emit(indent + 2, f"{append}({item})")
        return name

    def struct(self, out: _Writer, field: FieldPlan, indent: int) -> str:
        assert field.struct is not None
        function = self.function(field.struct)
        name = out.fresh("v")
        if not field.nullable:
            out.emit(indent, f"{name}, pos = {function}(data, pos, limit)")
            return name
        marker = out.fresh("m")
        out.emit(indent, f"{marker} = data[pos]")
        out.emit(indent, "pos += 1")
        out.emit(indent, f"if {marker} == 0xFF: {name} = None")
        out.emit(indent, f"elif {marker} == 1: {name}, pos = {function}(data, pos, limit)")
        out.emit(indent, "else: unusual('presence byte')")
        return name

    def compile(self, root: StructPlan) -> StructDecoder:
        entry = self.function(root)
        namespace = dict(self.constants)
        source = "\n\n".join(self.sources)
        exec(compile(source, f"<kdissect generated {root.name}>", "exec"), namespace)
        decoder: StructDecoder = namespace[entry]
        decoder.__doc__ = source  # what was generated, for whoever debugs it
        return decoder


def _batchable(field: FieldPlan) -> bool:
    return field.kind in (Kind.INTEGER, Kind.FLOAT, Kind.BOOL, Kind.UUID) and field.label in _BATCH_CODES


_DECODERS: dict[int, tuple[StructPlan, StructDecoder | None]] = {}


def struct_decoder(plan: StructPlan) -> StructDecoder | None:
    """The generated decoder of a struct plan, compiled on first use; None when unsupported."""
    found = _DECODERS.get(id(plan))
    if found is not None and found[0] is plan:
        return found[1]
    try:
        decoder: StructDecoder | None = _Generator().compile(plan)
    except Unsupported:
        decoder = None
    _DECODERS[id(plan)] = (plan, decoder)
    return decoder


def decode_values(plan: StructPlan, data: bytes, pos: int, limit: int) -> tuple[dict[str, Any], int] | None:
    """(flat values, end) of the struct at `pos`, or None when the interpreter must decode it.

    Nothing past `limit` is ever part of the answer: a decode that ran past it is refused.
    """
    decoder = struct_decoder(plan)
    if decoder is None:
        return None
    try:
        values, end = decoder(data, pos, limit)
    except (Unusual, struct.error, IndexError, UnicodeDecodeError):
        return None
    return (values, end) if end <= limit else None


def message_decoder(plan: MessagePlan) -> StructDecoder | None:
    return struct_decoder(plan.body)


__all__ = ["StructDecoder", "Unusual", "decode_values", "make_uuid", "message_decoder", "struct_decoder",
           "uvarint"]
