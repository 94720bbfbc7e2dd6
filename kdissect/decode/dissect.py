"""Whole frames to annotated trees: the frame, the header of every API, and the body.

Bodies are decoded field by field from the message definitions (see
`schema.sources`), with the meaning their dissector adds
(`kdissect.dissectors.registry`); a body no definition covers is one raw node.
Nothing here raises on bad bytes: problems become notes on a
partial tree whose children still tile the frame.
"""

from __future__ import annotations

import struct

from kdissect.apis import APIS, api_name, request_header_version, response_header_version
from kdissect.decode.interpreter import decode_struct, hex_display, trailing_node
from kdissect.decode.schema import dissected_api_keys, header_plan, message_plan
from kdissect.decode.tree import Node, Role
from kdissect.dissectors.registry import dissector
from kdissect.notes import Note, error, note, warn

FRAME_ABOUT = "length-delimited framing"
SIZE_ABOUT = "number of bytes that follow, patched after encoding"
HEADER_ABOUT = {"request": "common request header", "response": "common response header"}
HEADER_NAME = {"request": "RequestHeader", "response": "ResponseHeader"}

REQUEST_MISSING = "request missing: body not decoded"
_SIZE = struct.Struct(">i")
_KEY_AND_VERSION = struct.Struct(">hh")


def dissect_request(data: bytes) -> Node:
    """One request frame (size prefix included) as a tree; partial, with notes, when malformed."""
    if len(data) < 8 or _SIZE.unpack_from(data)[0] < 4:  # no api key inside the frame
        return _message(data, "request", None, None, header_version=1)
    api_key, version = _KEY_AND_VERSION.unpack_from(data, 4)
    return _message(data, "request", api_key, version, request_header_version(api_key, version))


def dissect_response(data: bytes, api_key: int | None, api_version: int | None) -> Node:
    """One response frame as a tree, decoded through its request's API key and version.

    Without them (the request is not in the capture) only the correlation id is
    decoded, assuming response header v0: the byte after it cannot tell a v1
    header's empty tagged-field block from the first byte of a v0 body.
    """
    if api_key is None or api_version is None:
        return _message(data, "response", None, None, header_version=0)
    return _message(data, "response", api_key, api_version, response_header_version(api_key, api_version))


def _message(data: bytes, kind: str, api_key: int | None, version: int | None, header_version: int) -> Node:
    root = Node(message_name(api_key, kind), "message", None, "" if version is None else f"v{version}", 0, len(data))
    size = _frame(data, root)
    if size is None:
        return root
    end = 4 + size
    limit = min(end, len(data))
    if end > len(data):
        root.notes.append(warn(f"frame incomplete: {len(data)} of {end} bytes captured", len(data),
                               "kafka.frame_incomplete"))
    header, complete = _header(data, limit, end, kind, header_version)
    root.children.append(header)
    if complete:
        root.children.append(_body(data, header.end, limit, end, kind, api_key, version))
        _after_body(root, data, limit, kind, api_key, version)
    if len(data) > end:
        root.children.append(_beyond_frame(data, end))
    return root


def message_body(root: Node) -> Node | None:
    """The decoded body struct of a message tree, or None when it was not decoded."""
    for child in root.children:
        if child.role is Role.BODY:
            return child
    return None


def message_name(api_key: int | None, kind: str) -> str:
    suffix = kind.capitalize()
    return f"{APIS[api_key].name}{suffix}" if api_key in APIS else suffix


def _frame(data: bytes, root: Node) -> int | None:
    """Append the Frame node; the declared size, or None when nothing after it can be decoded."""
    if len(data) < 4:
        frame = Node("Frame", "frame", None, "", 0, len(data), FRAME_ABOUT)
        frame.notes.append(warn(f"frame cut short: {len(data)} of the 4 size-prefix bytes captured", 0,
                                  "kafka.frame_incomplete"))
        root.children.append(frame)
        return None
    size = _SIZE.unpack_from(data)[0]
    size_node = Node("size", "int32", size, str(size), 0, 4, SIZE_ABOUT)
    root.children.append(Node("Frame", "frame", None, "", 0, 4, FRAME_ABOUT, [size_node]))
    if size >= 0:
        return size
    size_node.notes.append(error(f"negative frame size {size}", 0, "kafka.bad_frame_size"))
    if len(data) > 4:
        rest = data[4:]
        root.children.append(Node("malformed", "bytes", rest, hex_display(rest), 4, len(rest), "not a Kafka frame",
                                  role=Role.MALFORMED))
    return None


def _header(data: bytes, limit: int, end: int, kind: str, version: int) -> tuple[Node, bool]:
    header = Node(HEADER_NAME[kind], "header", None, f"v{version}", 4, 0, HEADER_ABOUT[kind])
    complete = decode_struct(data, header, limit, header_plan(kind, version).body, declared=end)
    if kind == "request":
        _name_api_key(header)
    return header, complete


def _name_api_key(header: Node) -> None:
    key_node, version_node = header.child("request_api_key"), header.child("request_api_version")
    if key_node is None:
        return
    api = APIS.get(key_node.value)
    key_node.display = f"{key_node.value} ({api.name if api else 'unknown API'})"
    dissected = api is not None and api.key in dissected_api_keys()  # their body notes say it
    if api is not None and not dissected and version_node is not None and not api.valid(version_node.value):
        version_node.notes.append(note(
            f"{api.name} v{version_node.value} is outside the published versions "
            f"{api.min_version}-{api.max_version}", version_node.offset, "kafka.version_unpublished"))


def _body(data: bytes, pos: int, limit: int, end: int, kind: str, api_key: int | None,
          version: int | None) -> Node:
    if api_key is None or version is None:
        return _raw_body(data, pos, limit, kind.capitalize(), "not decoded", warn(REQUEST_MISSING, pos,
                                                                                  "kafka.request_missing"))
    plan = message_plan(api_key, version, kind)
    name = message_name(api_key, kind)
    if plan is None:
        return _raw_body(data, pos, limit, name, *_why_raw(api_key, version, pos))
    body = Node(plan.name, "struct", None, "", pos, 0, f"message body, version {version}", role=Role.BODY)
    if plan.version != version:
        body.notes.append(warn(f"{api_name(api_key)} v{version} is newer than the definitions: "
                               f"decoded as v{plan.version}, the newest known", pos,
                               "kafka.version_newer"))
    decode_struct(data, body, limit, plan.body, declared=end)
    meaning = dissector(api_key)
    if meaning is not None:
        meaning.annotate(body, kind, version)
    return body


def _why_raw(api_key: int, version: int, pos: int) -> tuple[str, Note | None]:
    if api_key not in APIS:
        return "unknown API", warn(f"unknown API key {api_key}: body not decoded", pos, "kafka.unknown_api")
    return "no definition", note(f"no definition of {api_name(api_key)} v{version}: body not decoded "
                                 "(--schemas PATH reads Kafka's message files or kafka-clients jar)", pos,
                                 "kafka.no_definition")


def _raw_body(data: bytes, pos: int, limit: int, name: str, about: str, problem: Note | None = None) -> Node:
    raw = data[pos:limit]
    body = Node(f"{name} body", "bytes", raw, hex_display(raw), pos, limit - pos, about)
    if problem is not None:
        body.notes.append(problem)
    return body


# librdkafka writes an int32 0 after the empty body of its ApiVersions v0 requests: the empty
# array of API keys ("every API") of an early draft of KIP-35. Brokers ignore it; tshark calls
# the message malformed. It is named here, with a note, so that it is not counted as damage.
_DRAFT_API_KEYS = b"\x00\x00\x00\x00"


def _after_body(root: Node, data: bytes, limit: int, kind: str, api_key: int | None, version: int | None) -> None:
    body = root.children[-1]
    if body.end >= limit:
        return
    if (kind, api_key, version) == ("request", 18, 0) and data[body.end:limit] == _DRAFT_API_KEYS:
        root.children.append(_draft_api_keys(body.end))
    else:
        root.children.append(trailing_node(data, body.end, limit, "the message body"))


def _draft_api_keys(pos: int) -> Node:
    about = "an empty array of API keys (every API), from an early draft of KIP-35; brokers ignore it"
    node = Node("draft_api_keys", "int32", 0, "0 (empty array)", pos, 4, about)
    node.notes.append(note("librdkafka's draft API-key array after the body (brokers ignore it)", pos,
                           "kafka.client_quirk"))
    return node


def _beyond_frame(data: bytes, end: int) -> Node:
    rest = data[end:]
    message = f"{len(rest)} bytes beyond the frame's declared size"
    node = Node("beyond_frame", "bytes", rest, hex_display(rest), end, len(rest), message, role=Role.MALFORMED)
    node.notes.append(error(message, end, "kafka.trailing_bytes"))
    return node
