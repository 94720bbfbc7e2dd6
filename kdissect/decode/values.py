"""Flat values of a message body: from a generated decoder, or read off the interpreter's tree.

`fast_body(...)` is the fast path: a complete, ordinary frame (size prefix
equal to the bytes captured, header and body exactly filling it) decoded by
generated code, no tree built. It answers None for anything else, and the
caller asks the interpreter; `tree_values(body_node, plan)` then reads the
same flat values off its (possibly partial) tree, so the two paths agree on
every message whatever its bytes (a test checks it on every capture).
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kdissect.apis import request_header_version, response_header_version
from kdissect.decode.generated import FAST_PATH_REFUSALS, MessageDecoder, message_decoder
from kdissect.decode.schema.loader import on_sources_change
from kdissect.decode.schema.plan import FieldPlan, Kind, StructPlan, header_plan, message_plan
from kdissect.decode.tree import Node

Values = dict[str, Any]
_SIZE = struct.Struct(">i")


_DECODERS: dict[tuple[int, int, str], MessageDecoder | None] = {}
on_sources_change(_DECODERS.clear)  # other definitions: other plans, other field names


def fast_body(data: bytes, kind: str, api_key: int, version: int) -> Values | None:
    """The body's flat values when the frame is complete and ordinary; None otherwise."""
    key = (api_key, version, kind)
    decoder = _DECODERS.get(key, _UNSET)
    if decoder is _UNSET:
        decoder = _DECODERS[key] = _message_decoder(kind, api_key, version)
    if decoder is None or len(data) < 8 or _SIZE.unpack_from(data)[0] != len(data) - 4:
        return None
    try:
        return decoder(data)  # type: ignore[operator]
    except FAST_PATH_REFUSALS:
        return None


_UNSET = object()


def _message_decoder(kind: str, api_key: int, version: int) -> MessageDecoder | None:
    plan = message_plan(api_key, version, kind)
    if plan is None:
        return None
    header_version = (request_header_version if kind == "request" else response_header_version)(api_key, version)
    return message_decoder(header_plan(kind, header_version).body, plan)


def tree_values(node: Node, plan: StructPlan) -> Values:
    """The flat values of a decoded struct node; fields the tree lacks (a partial decode) are absent.

    After the untagged fields, the tagged ones its block holds, in wire order, by field
    name (as `generated.tagged_fields_reader` gives them); unknown tags are not values."""
    values: Values = {}
    children = {child.name: child for child in node.children if not child.generated}
    for field in plan.fields:
        child = children.get(field.name)
        if child is None:
            return values
        values[field.name] = _field_value(child, field)
    block = children.get("tagged_fields") if plan.tagged else None
    if block is not None:
        for entry in block.children:
            tagged = _tagged_field(plan, entry)
            value = None if tagged is None else next((c for c in entry.children if c.name == "value"), None)
            if tagged is not None and value is not None:
                values[tagged.name] = _field_value(value, tagged)
    return values


def _tagged_field(plan: StructPlan, entry: Node) -> FieldPlan | None:
    """The field of a tagged-field entry of `plan`'s block (its `tag` child), None for an
    unknown tag or a node that is not an entry (the block's `count`)."""
    tag = entry.children[0] if entry.children and entry.children[0].name == "tag" else None
    field = None if tag is None else plan.tagged.get(tag.value)
    return field if field is not None and field.name == entry.name else None


def _field_value(node: Node, field: FieldPlan) -> Any:
    if field.kind is Kind.ARRAY:
        if node.value is None:
            return None
        element = field.element
        assert element is not None
        prefix = element.label + "["
        items = [child for child in node.children if child.name.startswith(prefix)]
        return [_field_value(item, element) for item in items]
    if field.kind is Kind.STRUCT:
        if node.display == "null":
            return None
        assert field.struct is not None
        return tree_values(node, field.struct)
    return node.value


@contextmanager
def cycle_collection_paused() -> Iterator[None]:
    """Run a decode loop without Python's cycle collector.

    Flat values, rows and messages hold no reference cycles (a request refers
    to its response only weakly), so reference counting frees them; the cycle
    collector would only walk, again and again, the objects a loop is building
    up. It runs as usual again afterwards.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


__all__ = ["Values", "cycle_collection_paused", "fast_body", "tree_values"]
