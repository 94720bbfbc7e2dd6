"""The generic interpreter on a hand-written definition using every construct of the format.

The shipped APIs are all flexible and have no tagged fields, so classic
(non-flexible) encodings, field-level flexibleVersions, removed fields,
nullable versions, known tagged fields and every primitive type are exercised
here, on bytes packed by hand with `struct`.
"""

from __future__ import annotations

import struct
import uuid

import pytest

from kdissect.decode.interpreter import decode_struct
from kdissect.decode.schema import compile_message, parse_definition
from kdissect.decode.tree import Node
from kdissect.notes import Severity

SAMPLE = """
// A definition of our own exercising every construct of the format.
{
  "apiKey": 1000, "type": "response", "name": "SampleResponse",
  "validVersions": "0-3", "flexibleVersions": "3+",
  "fields": [
    { "name": "Small", "type": "int8", "versions": "0+", "about": "An int8." },
    { "name": "Short", "type": "int16", "versions": "0+" },
    { "name": "Port", "type": "uint16", "versions": "0+" },
    { "name": "Unsigned", "type": "uint32", "versions": "0+" },
    { "name": "Big", "type": "int64", "versions": "0+" },
    { "name": "Ratio", "type": "float64", "versions": "0+" },
    { "name": "Flag", "type": "bool", "versions": "0+" },
    { "name": "Id", "type": "uuid", "versions": "0+" },
    { "name": "Text", "type": "string", "versions": "0+", "nullableVersions": "1+" },
    // Like the request header's client id: classic even in flexible versions.
    { "name": "Legacy", "type": "string", "versions": "0+", "flexibleVersions": "none" },
    { "name": "Blob", "type": "bytes", "versions": "0+", "nullableVersions": "0+" },
    { "name": "Batch", "type": "records", "versions": "0+", "nullableVersions": "0+" },
    { "name": "Removed", "type": "int32", "versions": "0-1" },
    { "name": "Items", "type": "[]Item", "versions": "0+", "nullableVersions": "2+", "fields": [
      { "name": "Key", "type": "string", "versions": "0+", "mapKey": true },
      { "name": "Values", "type": "[]int64", "versions": "0+" }
    ]},
    { "name": "Names", "type": "[]string", "versions": "0+" },
    { "name": "Shared", "type": "Common", "versions": "0+" },
    { "name": "Maybe", "type": "Common", "versions": "0+", "nullableVersions": "0+", "default": "null" },
    { "name": "Count", "type": "int32", "versions": "3+", "taggedVersions": "3+", "tag": 0, "default": "-1" },
    { "name": "Extra", "type": "[]Common", "versions": "3+", "taggedVersions": "3+", "tag": 1 },
    { "name": "Remark", "type": "string", "versions": "3+", "nullableVersions": "3+",
      "taggedVersions": "3+", "tag": 2, "default": "null" }
  ],
  "commonStructs": [
    { "name": "Common", "versions": "0+", "fields": [
      { "name": "Value", "type": "int32", "versions": "0+" }
    ]}
  ]
}
"""
SPEC = parse_definition(SAMPLE, "sample")
ID = uuid.UUID("12345678-1234-5678-1234-567812345678")
FIXED = struct.pack(">bhHIqd?", -5, -300, 65000, 4_000_000_000, -(2**40), 1.5, True) + ID.bytes
FIXED_VALUES = {"Small": -5, "Short": -300, "Port": 65000, "Unsigned": 4_000_000_000, "Big": -(2**40),
                "Ratio": 1.5, "Flag": True, "Id": ID}


def i16(value: int) -> bytes:
    return struct.pack(">h", value)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def i64(value: int) -> bytes:
    return struct.pack(">q", value)


def classic(text: bytes) -> bytes:
    return i16(len(text)) + text


def compact(text: bytes) -> bytes:
    return bytes([len(text) + 1]) + text


def decode(version: int, data: bytes) -> tuple[Node, bool]:
    node = Node("SampleResponse", "struct", None, "", 0)
    complete = decode_struct(data, node, len(data), compile_message(SPEC, version).body)
    return node, complete


def values(node: Node) -> dict[str, object]:
    return {c.name: c.value for c in node.children}


def classic_body(version: int) -> bytes:
    text = i16(-1) if version >= 1 else classic(b"abc")
    items = i32(-1) if version >= 2 else i32(1) + classic(b"k") + i32(2) + i64(10) + i64(-10)
    removed = i32(7) if version <= 1 else b""
    return (FIXED + text + classic(b"xy") + i32(-1) + i32(0) + removed + items
            + i32(2) + classic(b"a") + classic(b"bc") + i32(9) + b"\xff")


def test_classic_version_decodes_every_primitive() -> None:
    data = classic_body(0)
    node, complete = decode(0, data)
    assert complete and node.size == len(data) and node.tiling_errors() == []
    assert values(node) == {**FIXED_VALUES, "Text": "abc", "Legacy": "xy", "Blob": None, "Batch": b"",
                            "Removed": 7, "Items": 1, "Names": 2, "Shared": None, "Maybe": None}
    assert [c.type for c in node.children] == [
        "int8", "int16", "uint16", "uint32", "int64", "float64", "bool", "uuid", "string", "string",
        "nullable_bytes", "records", "int32", "[]Item", "[]string", "Common", "Common"]
    shown = {c.name: c.display for c in node.children}
    assert shown["Ratio"] == "1.5" and shown["Flag"] == "true" and shown["Id"] == str(ID)
    assert shown["Text"] == '"abc" (int16 len=3)'
    assert shown["Blob"] == "null (int32 len=-1)"
    # records: here none (record batches themselves are pinned in test_records.py)
    assert shown["Batch"] == "0 bytes, 0 batches (int32 len=0)"
    assert shown["Maybe"] == "null"
    assert list(node.all_notes()) == []


def test_classic_arrays_have_int32_lengths_and_elements() -> None:
    node, _ = decode(0, classic_body(0))
    items = node["Items"]
    assert [(c.name, c.type, c.display, c.about) for c in items.children[:1]] == [
        ("length", "int32", "1", "one element follows")]
    item = items.children[1]
    assert (item.name, item.type, item.display) == ("Item[0]", "Item", "struct")
    assert item["Key"].value == "k"
    assert [(c.name, c.value) for c in item["Values"].children] == [("length", 2), ("int64[0]", 10), ("int64[1]", -10)]
    assert item["Values"].children[0].about == "2 elements follow"
    names = node["Names"]
    assert [(c.name, c.value) for c in names.children[1:]] == [("string[0]", "a"), ("string[1]", "bc")]
    assert node["Shared"]["Value"].value == 9
    assert node["Shared"].child("tagged_fields") is None  # classic structs have no tagged-field block


def test_nullable_versions_change_types_and_allow_null() -> None:
    node, complete = decode(1, classic_body(1))
    assert complete
    assert (node["Text"].type, node["Text"].display) == ("nullable_string", "null (int16 len=-1)")
    assert list(node.all_notes()) == []


def test_fields_removed_between_versions_and_null_arrays() -> None:
    node, complete = decode(2, classic_body(2))
    assert complete and node.child("Removed") is None
    items = node["Items"]
    assert (items.value, items.display, items.size) == (None, "null", 4)
    assert [(c.name, c.value, c.about) for c in items.children] == [("length", -1, "null array")]


def test_null_where_a_version_does_not_allow_it_is_reported() -> None:
    data = classic_body(0).replace(classic(b"abc"), i16(-1), 1)
    node, complete = decode(0, data)
    assert complete
    assert [(n.severity, n.message) for n in node.all_notes()] == [
        (Severity.ERROR, "Text: null, but the field is not nullable in this version")]


def flexible_body(tagged: bytes) -> bytes:
    items = b"\x02" + compact(b"k") + b"\x03" + i64(10) + i64(-10) + b"\x00"
    return (FIXED + compact(b"abc") + classic(b"xy") + b"\x00" + compact(b"") + items
            + b"\x03" + compact(b"a") + compact(b"bc") + i32(9) + b"\x00" + b"\x01" + i32(4) + b"\x00" + tagged)


KNOWN_TAGS = (b"\x04" + b"\x00\x04" + i32(5) + b"\x01\x06" + b"\x02" + i32(8) + b"\x00"
              + b"\x02\x01\x00" + b"\x09\x02\xbe\xef")


def test_flexible_version_uses_compact_encodings_except_where_overridden() -> None:
    data = flexible_body(b"\x00")
    node, complete = decode(3, data)
    assert complete and node.tiling_errors() == [] and node.size == len(data)
    assert values(node) == {**FIXED_VALUES, "Text": "abc", "Legacy": "xy", "Blob": None, "Batch": b"",
                            "Items": 1, "Names": 2, "Shared": None, "Maybe": None, "tagged_fields": 0}
    assert node["Text"].display == '"abc" (compact, len+1=4)'
    assert node["Legacy"].display == '"xy" (int16 len=2)'
    assert node["Blob"].display == "null (compact, len+1=0)"
    assert node["Items"].children[0].display == "2 (compact, n+1)"
    maybe = node["Maybe"]
    assert [(c.name, c.display) for c in maybe.children] == [
        ("presence", "1 (present)"), ("Value", "4"), ("tagged_fields", "0")]


def test_known_and_unknown_tagged_fields() -> None:
    data = flexible_body(KNOWN_TAGS)
    node, complete = decode(3, data)
    assert complete and node.tiling_errors() == [] and list(node.all_notes()) == []
    block = node["tagged_fields"]
    assert (block.value, block.size, block.about) == (4, len(KNOWN_TAGS), "number of tagged fields in this struct")
    assert [(c.name, c.type, c.value) for c in block.children] == [
        ("count", "uvarint", 4), ("Count", "int32", 5), ("Extra", "[]Common", 1), ("Remark", "string", None),
        ("unknown_tag_9", "bytes", b"\xbe\xef")]
    count = block["Count"]
    assert [(c.name, c.value, c.size) for c in count.children] == [("tag", 0, 1), ("size", 4, 1), ("value", 5, 4)]
    assert block["Extra"]["value"].children[1]["Value"].value == 8
    assert block["Remark"].display == "null (compact, len+1=0)"


def test_a_tagged_value_shorter_than_its_size_leaves_trailing_bytes_and_decoding_goes_on() -> None:
    tags = b"\x02" + b"\x00\x06" + i32(5) + b"\xaa\xbb" + b"\x09\x00"
    node, complete = decode(3, flexible_body(tags))
    assert complete and node.tiling_errors() == []
    count = node["tagged_fields"]["Count"]
    assert [c.name for c in count.children] == ["tag", "size", "value", "trailing_bytes"]
    assert [n.message for n in node.all_notes()] == ["2 trailing bytes after tagged field Count"]
    assert node["tagged_fields"].children[-1].name == "unknown_tag_9"


def test_a_tagged_value_longer_than_its_size_is_malformed_inside_its_entry_only() -> None:
    tags = b"\x02" + b"\x00\x02" + b"\x00\x05" + b"\x09\x00"
    data = flexible_body(tags)
    node, complete = decode(3, data)
    assert complete and node.tiling_errors() == []
    notes = [(n.severity, n.message, n.offset) for n in node.all_notes()]
    value_at = len(data) - 4  # the two value bytes, then tag 9 and its size
    assert notes == [(Severity.ERROR, "tagged field Count: truncated: value int32 needs 4 bytes, 2 left", value_at)]
    assert node["tagged_fields"].children[-1].name == "unknown_tag_9"


@pytest.mark.parametrize("cut", range(1, 40))
def test_every_prefix_of_a_classic_body_decodes_partially(cut: int) -> None:
    data = classic_body(0)[:cut]
    node, complete = decode(0, data)
    assert not complete
    assert node.tiling_errors() == [] and node.size == len(data)
    assert [n.severity for n in node.all_notes()] == [Severity.ERROR]



def test_node_roles_are_set_where_nodes_are_made() -> None:
    from kdissect.decode.dissect import dissect_response, message_body
    from kdissect.decode.tree import Role, elements

    # A DescribeQuorum v2 response cut short: one topic, then the capture ends before Nodes.
    frame = bytes.fromhex("0000000e" "00000007" "00" "0000" "00" "02" "00" "00" "00")
    tree = dissect_response(frame, 55, 2)
    body = message_body(tree)
    assert body is not None and body.role is Role.BODY
    topics = body["Topics"]
    assert (topics.role, topics.children[0].role, topics.children[1].role) == (Role.ARRAY, Role.LENGTH, Role.FIELD)
    assert elements(topics) == [topics.children[1]]
    assert topics.children[1]["Partitions"].role is Role.ARRAY  # a null array is still an array
    malformed = body.children[-1]
    assert (malformed.name, malformed.role) == ("malformed", Role.MALFORMED)
    assert {n.role for n in tree.children[:2]} == {Role.FIELD}
