"""The one generic interpreter: walks a compiled decode plan over a frame, building the tree.

Every reader has the contract `read(src, pos, field, name) -> Node`: it reads
one field starting at `pos`, never past `src.limit`, and returns its node
(offset and size from the start of the frame). A reader that cannot finish
raises `Malformed`; the enclosing container then closes itself as a partial
node whose last child, `malformed`, covers the undecodable rest up to the
limit, so the tiling invariant holds on broken input too. `decode_struct` is
the only entry point and never raises on bad bytes: the failure becomes a note.

Two ends matter. `limit` is where the captured bytes stop; `declared` is where
the frame's size prefix says they should. Content that would run past
`declared` is malformed (an error); content cut only by `limit` was lost by the
capture (a warning), and whatever fits before it is still decoded.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kdissect.decode.record_nodes import entries_nodes
from kdissect.decode.schema.plan import FieldPlan, Kind, StructPlan
from kdissect.decode.tree import Node, Role, printable
from kdissect.dissectors import SCHEMA_DISPLAYS
from kdissect.notes import Note, error, note, warn

NULLABLE_STRUCT_ABOUT = "nullable struct marker: -1 null, 1 present"
CAPTURE_CUT = "(the capture cut the frame short)"
HEX_DISPLAY_BYTES = 16
_UVARINT_MAX_BYTES = 5
_UINT32_MAX = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class Region:
    """The bytes being decoded: the whole frame, the captured end and the declared end."""

    data: bytes
    limit: int
    declared: int


class Malformed(Exception):
    """The bytes contradict the plan at `offset`; `lost` when the capture, not the sender, cut them."""

    def __init__(self, message: str, offset: int, *, lost: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.lost = lost


class _Cut(Exception):
    """Decoding stopped: `node` is a partial container spanning to the end of the region."""

    def __init__(self, node: Node, leaf: Node, failure: Malformed) -> None:
        super().__init__(failure.message)
        self.node = node
        self.leaf = leaf  # the `malformed` node covering the rest
        self.failure = failure


FieldReader = Callable[[Region, int, FieldPlan, str], Node]


def decode_struct(data: bytes, node: Node, limit: int, plan: StructPlan, *, declared: int | None = None) -> bool:
    """Decode `plan` into `node` (name, type and offset already set) from data[offset:limit].

    `declared` is where the frame should end (default: `limit`). True when every
    field was decoded; otherwise the node is partial, spans to `limit`, and the
    note sits on its `malformed` leaf.
    """
    src = Region(data, limit, limit if declared is None else max(declared, limit))
    try:
        _read_fields(src, node.offset, plan, node)
    except _Cut as cut:
        cut.leaf.notes.append(failure_note(cut.failure))
        return False
    return True


def failure_note(failure: Malformed) -> Note:
    """An error, or a warning when the bytes were lost by the capture."""
    if failure.lost:
        return warn(f"{failure.message} {CAPTURE_CUT}", failure.offset, "kafka.capture_cut")
    return error(failure.message, failure.offset, "kafka.malformed")


def _read_fields(src: Region, pos: int, plan: StructPlan, node: Node) -> Node:
    children = node.children
    try:
        for field in plan.fields:
            child = _READERS[field.kind](src, pos, field, field.name)
            children.append(child)
            pos = child.offset + child.size
        if plan.flexible:
            child = _read_tagged_block(src, pos, plan)
            children.append(child)
            pos = child.offset + child.size
    except (Malformed, _Cut) as failure:
        raise _partial(node, src, pos, failure) from None
    node.size = pos - node.offset
    return node


def _append(node: Node, read: Callable[..., Node], src: Region, pos: int, *args: Any) -> int:
    """Read one child into `node` and return where it ends; on failure close `node` as partial."""
    try:
        child = read(src, pos, *args)
    except (Malformed, _Cut) as failure:
        raise _partial(node, src, pos, failure) from None
    node.children.append(child)
    return child.offset + child.size


def _partial(node: Node, src: Region, pos: int, failure: Malformed | _Cut) -> _Cut:
    """Close `node` as partial after a child starting at `pos` failed."""
    if isinstance(failure, Malformed):
        return _cut_here(node, src, pos, failure)
    node.children.append(failure.node)
    node.size = src.limit - node.offset
    failure.node = node
    return failure


def _cut_here(node: Node, src: Region, pos: int, failure: Malformed) -> _Cut:
    rest = src.data[pos:src.limit]
    leaf = Node("malformed", "bytes", rest, hex_display(rest), pos, len(rest), failure.message,
                role=Role.MALFORMED)
    node.children.append(leaf)
    node.size = src.limit - node.offset
    return _Cut(node, leaf, failure)


def _overrun(src: Region, pos: int, needed: int, message: str, offset: int) -> Malformed:
    """`needed` bytes from `pos` do not fit: lost by the capture, or malformed."""
    return Malformed(message, offset, lost=pos + needed <= src.declared)


# -- primitives ---------------------------------------------------------------------------


def _short(src: Region, pos: int, needed: int, what: str) -> Malformed:
    unit = "byte" if needed == 1 else "bytes"
    left = max(src.limit - pos, 0)
    return _overrun(src, pos, needed, f"truncated: {what} needs {needed} {unit}, {left} left", pos)


def _read_integer(src: Region, pos: int, f: FieldPlan, name: str) -> Node:
    size = f.codec.size
    if pos + size > src.limit:
        raise _short(src, pos, size, f"{name} {f.label}")
    value = f.codec.unpack_from(src.data, pos)[0]
    shown = None if f.meaning is None else SCHEMA_DISPLAYS[f.meaning](value)
    return Node(name, f.label, value, str(value) if shown is None else shown, pos, size, f.about)


def _read_float(src: Region, pos: int, f: FieldPlan, name: str) -> Node:
    if pos + 8 > src.limit:
        raise _short(src, pos, 8, f"{name} {f.label}")
    value = f.codec.unpack_from(src.data, pos)[0]
    return Node(name, f.label, value, repr(value), pos, 8, f.about)


def _read_bool(src: Region, pos: int, f: FieldPlan, name: str) -> Node:
    if pos >= src.limit:
        raise _short(src, pos, 1, f"{name} {f.label}")
    value = src.data[pos] != 0  # as Kafka reads it
    return Node(name, f.label, value, "true" if value else "false", pos, 1, f.about)


def _read_uuid(src: Region, pos: int, f: FieldPlan, name: str) -> Node:
    if pos + 16 > src.limit:
        raise _short(src, pos, 16, f"{name} {f.label}")
    value = uuid.UUID(bytes=src.data[pos:pos + 16])
    return Node(name, f.label, value, str(value), pos, 16, f.about)


def read_uvarint(src: Region, pos: int, name: str) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (32 bits): (value, end)."""
    data, limit = src.data, src.limit
    if pos < limit and data[pos] < 0x80:
        return data[pos], pos + 1
    value = 0
    for index in range(_UVARINT_MAX_BYTES):
        at = pos + index
        if at >= limit:
            if at == pos:
                raise _short(src, pos, 1, f"{name} uvarint")
            message = f"truncated: {name} uvarint runs past the end, {limit - pos} bytes left"
            raise _overrun(src, pos, index + 1, message, pos)
        byte = data[at]
        value |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            if value > _UINT32_MAX:
                raise Malformed(f"{name}: uvarint {value} exceeds 32 bits", pos)
            return value, at + 1
    raise Malformed(f"{name}: uvarint longer than {_UVARINT_MAX_BYTES} bytes", pos)


# -- strings and bytes --------------------------------------------------------------------


def _length_prefix(src: Region, pos: int, f: FieldPlan, name: str) -> tuple[int, int, str]:
    """(length or -1 for null, where the content starts, how the prefix reads)."""
    if f.compact:
        length_plus_one, start = read_uvarint(src, pos, name)
        return length_plus_one - 1, start, f"(compact, len+1={length_plus_one})"
    width = 2 if f.kind is Kind.STRING else 4
    if pos + width > src.limit:
        raise _short(src, pos, width, f"{name} {f.label} length")
    length = int.from_bytes(src.data[pos:pos + width], "big", signed=True)
    if length < -1:
        raise Malformed(f"{name}: negative length {length}", pos)
    return length, pos + width, f"(int{width * 8} len={length})"


def _null_value(pos: int, end: int, f: FieldPlan, name: str, form: str) -> Node:
    node = Node(name, f.label, None, f"null {form}", pos, end - pos, f.about)
    if not f.nullable:
        node.notes.append(_not_nullable(name, pos))
    return node


def _not_nullable(name: str, pos: int) -> Note:
    return error(f"{name}: null, but the field is not nullable in this version", pos, "kafka.malformed")


def _content(src: Region, pos: int, f: FieldPlan, name: str) -> tuple[bytes | None, int, str]:
    length, start, form = _length_prefix(src, pos, f, name)
    if length < 0:
        return None, start, form
    if start + length > src.limit:
        message = f"truncated: {name} declares {length} bytes, {src.limit - start} left"
        raise _overrun(src, start, length, message, pos)
    return src.data[start:start + length], start + length, form


def _read_string(src: Region, pos: int, f: FieldPlan, name: str) -> Node:
    raw, end, form = _content(src, pos, f, name)
    if raw is None:
        return _null_value(pos, end, f, name, form)
    try:
        text = raw.decode("utf-8")
        problem = None
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")
        problem = warn(f"{name}: not valid UTF-8 (undecodable bytes replaced)", pos, "kafka.bad_utf8")
    node = Node(name, f.label, text, f'"{printable(text)}" {form}', pos, end - pos, f.about)
    if problem is not None:
        node.notes.append(problem)
    return node


def _read_bytes(src: Region, pos: int, f: FieldPlan, name: str) -> Node:
    raw, end, form = _content(src, pos, f, name)
    if raw is None:
        return _null_value(pos, end, f, name, form)
    return Node(name, f.label, raw, f"{hex_display(raw)} {form}", pos, end - pos, f.about)


def _read_records(src: Region, pos: int, f: FieldPlan, name: str) -> Node:
    """Bytes holding record batches: the length prefix, then one child per batch.

    Records the capture cut short (a snaplen, a lost segment) are decoded as far
    as they were captured; the field then ends where the capture does, so the
    next field reports the cut.
    """
    length, start, form = _length_prefix(src, pos, f, name)
    if length < 0:
        return _null_value(pos, start, f, name, form)
    end = start + length
    if end > src.declared:
        message = f"truncated: {name} declares {length} bytes, {src.declared - start} left"
        raise Malformed(message, pos)
    stop = min(end, src.limit)
    raw = src.data[start:stop]
    wire, shown = (length + 1, f"{length + 1} (compact, len+1)") if f.compact else (length, str(length))
    prefix = Node("length", "uvarint" if f.compact else "int32", wire, shown, pos, start - pos,
                  f"{length} bytes of records follow")
    entries = entries_nodes(src.data, start, stop)
    display = f"{length} bytes, {len(entries)} batch{'' if len(entries) == 1 else 'es'} {form}"
    node = Node(name, f.label, raw, display, pos, stop - pos, f.about, [prefix, *entries])
    if stop < end:
        node.display = f"{len(raw)} of {display}"
        node.notes.append(warn(f"{name}: {len(raw)} of {length} bytes captured {CAPTURE_CUT}", stop,
                                    "kafka.capture_cut"))
    return node


# -- arrays and structs -------------------------------------------------------------------


def _array_length(src: Region, pos: int, f: FieldPlan, name: str) -> tuple[Node, int | None]:
    if f.compact:
        wire, end = read_uvarint(src, pos, f"{name} length")
        count = wire - 1 if wire else None
        display = f"{wire} (compact, n+1)"
    else:
        if pos + 4 > src.limit:
            raise _short(src, pos, 4, f"{name} length int32")
        wire, end = int.from_bytes(src.data[pos:pos + 4], "big", signed=True), pos + 4
        if wire < -1:
            raise Malformed(f"{name}: negative array length {wire}", pos)
        count, display = (None if wire == -1 else wire), str(wire)
    label = "uvarint" if f.compact else "int32"
    return Node("length", label, wire, display, pos, end - pos, elements_follow(count), role=Role.LENGTH), count


def elements_follow(count: int | None) -> str:
    if count is None:
        return "null array"
    if count <= 1:
        return "one element follows" if count else "no elements follow"
    return f"{count} elements follow"


def count_display(count: int | None) -> str:
    if count is None:
        return "null"
    return "1 element" if count == 1 else f"{count} elements"


def _read_array(src: Region, pos: int, f: FieldPlan, name: str) -> Node:
    length, count = _array_length(src, pos, f, name)
    node = Node(name, f.label, count, count_display(count), pos, 0, f.about, [length], role=Role.ARRAY)
    end = length.offset + length.size
    if count is None:
        if not f.nullable:
            node.notes.append(_not_nullable(name, pos))
        node.size = end - pos
        return node
    element = f.element
    assert element is not None
    needed = count * element.min_size
    if end + needed > src.declared:  # checked before anything is allocated
        verb = "needs" if count == 1 else "need"
        message = f"{name}: {count_display(count)} {verb} at least {needed} bytes, {src.declared - end} left"
        raise _cut_here(node, src, end, Malformed(message, pos))
    read, label, children = _READERS[element.kind], element.label, node.children
    try:
        for index in range(count):
            child = read(src, end, element, f"{label}[{index}]")
            children.append(child)
            end = child.offset + child.size
    except (Malformed, _Cut) as failure:
        raise _partial(node, src, end, failure) from None
    node.size = end - pos
    return node


def _read_struct(src: Region, pos: int, f: FieldPlan, name: str) -> Node:
    node = Node(name, f.label, None, "struct", pos, 0, f.about)
    if f.nullable:
        if not _read_presence(src, pos, node, name):
            return node
        pos += 1
    assert f.struct is not None
    return _read_fields(src, pos, f.struct, node)


def _read_presence(src: Region, pos: int, node: Node, name: str) -> bool:
    """Read a nullable struct's presence byte into `node`; False when the struct is null."""
    if pos >= src.limit:
        raise _short(src, pos, 1, f"{name} presence int8")
    marker = src.data[pos] - 256 if src.data[pos] > 127 else src.data[pos]
    present = marker >= 0  # as Kafka reads it
    shown = {1: "1 (present)", -1: "-1 (null)"}.get(marker, f"{marker} (read as {'present' if present else 'null'})")
    presence = Node("presence", "int8", marker, shown, pos, 1, NULLABLE_STRUCT_ABOUT)
    if marker not in (1, -1):
        presence.notes.append(error(f"{name}: presence byte {marker} is neither 1 nor -1", pos, "kafka.malformed"))
    node.children.append(presence)
    if not present:
        node.display, node.size = "null", 1
    return present


# -- tagged fields ------------------------------------------------------------------------


def _read_tagged_block(src: Region, pos: int, plan: StructPlan) -> Node:
    count, end = read_uvarint(src, pos, "tagged_fields")
    node = Node("tagged_fields", "uvarint", count, str(count), pos, end - pos, plan.tagged_about)
    if count == 0:
        return node
    node.children.append(Node("count", "uvarint", count, str(count), pos, end - pos,
                              "number of tagged fields that follow"))
    if end + 2 * count > src.declared:
        message = f"tagged_fields: {count} tagged fields need at least {2 * count} bytes, {src.declared - end} left"
        raise _cut_here(node, src, end, Malformed(message, pos))
    previous = -1
    for _ in range(count):
        end = _append(node, _read_tagged_entry, src, end, plan)
        tag = node.children[-1].children[0].value
        if tag <= previous:
            node.notes.append(note(f"tag {tag} follows tag {previous}: tags should ascend", pos, "kafka.tags_unordered"))
        previous = tag
    node.size = end - pos
    return node


def _read_tagged_entry(src: Region, pos: int, plan: StructPlan) -> Node:
    tag, after_tag = read_uvarint(src, pos, "tag")
    size, start = read_uvarint(src, after_tag, f"tag {tag} size")
    end = start + size
    if end > src.limit:
        message = f"truncated: tagged field {tag} declares {size} bytes, {src.limit - start} left"
        raise _overrun(src, start, size, message, pos)
    header = [Node("tag", "uvarint", tag, str(tag), pos, after_tag - pos, "tag number"),
              Node("size", "uvarint", size, str(size), after_tag, start - after_tag, "bytes of the tagged value")]
    field = plan.tagged.get(tag)
    if field is None:
        raw = src.data[start:end]
        header.append(Node("data", "bytes", raw, hex_display(raw), start, size, "value of an unknown tag"))
        return Node(f"unknown_tag_{tag}", "bytes", raw, hex_display(raw), pos, end - pos,
                    "tagged field this version does not define", header)
    entry = Node(field.name, field.label, None, "", pos, end - pos, field.about, header)
    _read_tagged_value(Region(src.data, end, end), start, field, entry)
    return entry


def _read_tagged_value(src: Region, start: int, field: FieldPlan, entry: Node) -> None:
    """Decode a known tag's value within its declared size; failures stay inside the entry."""
    try:
        stop = _append(entry, _READERS[field.kind], src, start, field, "value")
    except _Cut as cut:
        cut.leaf.notes.append(error(f"tagged field {field.name}: {cut.failure.message}", cut.failure.offset,
                                    "kafka.malformed"))
        entry.size = src.limit - entry.offset
        return
    value = entry.children[-1]
    entry.value, entry.display = value.value, value.display
    if stop < src.limit:
        entry.children.append(trailing_node(src.data, stop, src.limit, f"tagged field {field.name}"))


def trailing_node(data: bytes, pos: int, end: int, what: str) -> Node:
    """Bytes left over after `what` was fully decoded, with an error note."""
    rest = data[pos:end]
    message = f"{len(rest)} trailing bytes after {what}"
    node = Node("trailing_bytes", "bytes", rest, hex_display(rest), pos, end - pos, message, role=Role.MALFORMED)
    node.notes.append(error(message, pos, "kafka.trailing_bytes"))
    return node


_READERS: dict[Kind, FieldReader] = {
    Kind.INTEGER: _read_integer,
    Kind.FLOAT: _read_float,
    Kind.BOOL: _read_bool,
    Kind.UUID: _read_uuid,
    Kind.STRING: _read_string,
    Kind.BYTES: _read_bytes,
    Kind.RECORDS: _read_records,
    Kind.ARRAY: _read_array,
    Kind.STRUCT: _read_struct,
}


def hex_display(raw: bytes) -> str:
    """Bytes as hex, cut after HEX_DISPLAY_BYTES; `empty` for none."""
    if not raw:
        return "empty"
    shown = raw[:HEX_DISPLAY_BYTES].hex()
    return shown if len(raw) <= HEX_DISPLAY_BYTES else f"{shown}... ({len(raw)} bytes)"


__all__ = [
    "CAPTURE_CUT",
    "NULLABLE_STRUCT_ABOUT",
    "Malformed",
    "Region",
    "count_display",
    "decode_struct",
    "elements_follow",
    "failure_note",
    "hex_display",
    "read_uvarint",
    "trailing_node",
]
