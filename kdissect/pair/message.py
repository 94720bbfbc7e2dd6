"""Stage 5: Kafka messages. Headers are read on the fast path; bodies on demand.

A `Message` is one Kafka request or response: its frame, the header fields
every summary needs (API, version, correlation id, client id), and notes. The
annotated tree of the whole message is built only when something asks for it
(`Message.tree()`), because the summary path must not pay for bodies.

A response carries no API key: it is decoded through its request, which the
pairing stage links to it (`Message.pair`).
"""

from __future__ import annotations

import functools
import struct
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kdissect import notes
from kdissect.apis import api_name, request_header_version
from kdissect.decode.tree import Node, html_view, text_view
from kdissect.ingest.framing import Direction, Frame
from kdissect.notes import Note

if TYPE_CHECKING:
    from kdissect.decode.rows import Row
    from kdissect.decode.values import Values

# The decode tier (definitions, generated decoders, the interpreter) is imported on first
# use, in the methods that decode: reading headers and the plain summary never need it.

_REQUEST_FIXED = struct.Struct(">ihhi")  # size, api key, api version, correlation id
_RESPONSE_FIXED = struct.Struct(">ii")  # size, correlation id
_INT16 = struct.Struct(">h")
PRODUCE = 0


@dataclass(slots=True, eq=False, weakref_slot=True, repr=False)
class Message:
    number: int  # 1-based, in capture order of the message's last packet
    frame: Frame
    is_request: bool  # the frame's direction, kept at hand for the hot path
    correlation_id: int | None
    api_key: int | None = None  # a response's come from its request once paired
    api_version: int | None = None
    client_id: str | None = None  # a request header's; a response's, its request's once paired
    expects_response: bool = True  # False for Produce with acks=0
    file: str | None = None  # the capture file its last packet came from
    notes: list[Note] = field(default_factory=list)
    # A response holds its request; a request only a weak reference to its
    # response, so pairs form no reference cycle and streaming frees them at once.
    _pair: Any = None
    _tree: Node | None = None
    _values: Values | None = None  # from the fast path only, kept with keep=True

    @property
    def pair(self) -> Message | None:
        """The paired response of a request, or request of a response."""
        linked = self._pair
        if linked is None or not self.is_request:
            return linked
        return linked()

    @property
    def pair_number(self) -> int | None:
        """The number of `pair` (what JSON writes of it; a `kdissect.light.Light` has it too)."""
        pair = self.pair
        return None if pair is None else pair.number

    def link(self, response: Message) -> None:
        """Pair this request with `response`, which takes the request's API, version and client
        id (a response header carries none of them)."""
        self._pair = weakref.ref(response)
        response._pair = self
        response.api_key, response.api_version, response.client_id = (
            self.api_key, self.api_version, self.client_id)

    @property
    def direction(self) -> Direction:
        return self.frame.direction

    @property
    def time(self) -> float:
        """Capture time of the message's last packet, seconds since the epoch (a float:
        `time_ns` keeps every nanosecond)."""
        return self.frame.last_time

    @property
    def time_ns(self) -> int:
        """Capture time of the message's last packet, integer nanoseconds since the epoch."""
        return self.frame.last_ns

    @property
    def packet(self) -> int:
        return self.frame.last_packet

    @property
    def length(self) -> int:
        """The size prefix's value: bytes after the prefix, as the sender declared."""
        data = self.frame.data
        return int.from_bytes(data[:4], "big", signed=True) if len(data) >= 4 else len(data)

    @property
    def size(self) -> int:
        """Bytes of the frame as captured, size prefix included (fewer than `length` + 4
        when the frame is cut short)."""
        return len(self.frame.data)

    @property
    def api_name(self) -> str | None:
        return None if self.api_key is None else api_name(self.api_key)

    @property
    def latency(self) -> float | None:
        """Seconds from the request's last packet to the response's last packet."""
        if self.is_request or self.pair is None:
            return None
        return (self.frame.last_ns - self.pair.frame.last_ns) / 1e9  # exact until the division

    def all_notes(self) -> list[Note]:
        """Frame, header and pairing notes, then the tree's if it was built."""
        found = list(self.frame.notes) + self.notes
        if self._tree is not None:
            seen = {(n.severity, n.message) for n in found}
            found.extend(n for n in self._tree.all_notes() if (n.severity, n.message) not in seen)
        return found

    @property
    def kind(self) -> str:
        return "request" if self.is_request else "response"

    def values(self, *, keep: bool = True) -> Values | None:
        """The body's fields as flat values (dicts by field name, lists), no tree built.

        None when the body is not decoded (no definition for this API and
        version, or a response whose request is not in the capture). An
        ordinary body comes from its generated decoder; anything else from the
        interpreter's tree (kept, with its notes, unless `keep=False`), so a
        malformed body gives the fields decoded before the problem.
        """
        found = self._fast_values(keep)
        if found is not None:
            return found
        from kdissect.decode.dissect import message_body
        from kdissect.decode.schema import message_plan
        from kdissect.decode.values import tree_values

        key, version = self.api_key, self.api_version
        plan = None if key is None or version is None else message_plan(key, version, self.kind)
        if plan is None or (not self.is_request and self._pair is None):
            return None
        body = message_body(self.tree(keep=keep))
        return None if body is None else tree_values(body, plan.body)

    def fast_values(self, *, keep: bool = True) -> Values | None:
        """The body's values when its generated decoder takes it; None when only the
        interpreter's tree can say what the body holds (or it is not decoded at all)."""
        return self._fast_values(keep)

    def _fast_values(self, keep: bool) -> Values | None:
        """The body's values from its generated decoder; None when it is not decoded that way."""
        if self._values is not None:
            return self._values
        key, version = self.api_key, self.api_version
        if key is None or version is None or self._tree is not None:
            return None
        if not self.is_request and self._pair is None:
            return None
        found = _fast_body()(self.frame.data, self.kind, key, version)
        if keep:
            self._values = found
        return found

    def rows(self, *, records: bool = False) -> Row | None:
        """The message's tree laid out as rows from flat values (what `-V` and JSON write).

        None when the body did not take the fast path: then `tree()` is the answer.
        Bodies holding record batches are laid out only with `records=True` (their
        `[]Record` and `[]Header` rows are not schema arrays, which paths built from
        rows by type would take them for).
        """
        key, version = self.api_key, self.api_version
        if key is None or version is None or self._tree is not None:
            return None
        if not self.is_request and self._pair is None:
            return None
        from kdissect.decode.rows import message_rows, raw_message_rows
        from kdissect.decode.schema import message_plan

        plan = message_plan(key, version, self.kind)
        if plan is None:
            return raw_message_rows(self.frame.data, self.kind, key, version)
        if plan.body.holds_records and not records:
            return None
        values = self._fast_values(False)  # a pass over every message's rows must not keep values
        return None if values is None else message_rows(self.frame.data, self.kind, key, version, values)

    def __repr__(self) -> str:  # the summary line and text tree at a Python prompt, as `-V`
        return text_view(self) or f"<Message {self.number} {self.kind} corr={self.correlation_id}>"

    def _repr_html_(self) -> str | None:  # the summary line and tree in Jupyter
        return html_view(self)

    def tree(self, *, keep: bool = True) -> Node:
        """The annotated tree of the whole message, decoded on first use.

        With `keep=False` a tree not already kept is decoded afresh and not
        kept, so a pass over a whole capture does not hold every tree at once.
        """
        if self._tree is not None:
            return self._tree
        from kdissect.decode.dissect import dissect_request, dissect_response

        data = self.frame.data
        if self.is_request:
            tree = dissect_request(data)
        else:
            tree = dissect_response(data, self.api_key, self.api_version)
        if keep:
            self._tree = tree
        return tree


@functools.cache
def _fast_body() -> Callable[[bytes, str, int, int], Values | None]:
    """The generated decoders' entry point (`decode.values.fast_body`), imported on first use."""
    from kdissect.decode.values import fast_body

    return fast_body


def message_from_frame(number: int, frame: Frame) -> Message:
    """Read the header fields of a frame without touching the body."""
    data = frame.data
    if frame.direction is not _REQUEST:
        if len(data) < 8:
            return Message(number, frame, False, None, notes=[_short_header(data, "response")])
        return Message(number, frame, False, _RESPONSE_FIXED.unpack_from(data)[1])
    if len(data) < 14:
        return _short_request(number, frame, data)
    _, key, version, correlation_id, length = _REQUEST_HEAD.unpack_from(data)
    message = Message(number, frame, True, correlation_id, key, version)
    if _has_client_id(key, version) and length >= 0:
        raw = data[14:14 + length]  # a client id seen before, whole: the usual case
        client_id = _CLIENT_IDS.get(raw)
        message.client_id = client_id if client_id is not None and len(raw) == length else _client_id(
            data, message)
    if key == PRODUCE:
        message.expects_response = produce_acks(message) != 0
    return message


_REQUEST = Direction.REQUEST
_REQUEST_HEAD = struct.Struct(">ihhih")  # the fixed part and the client id's length


def _short_request(number: int, frame: Frame, data: bytes) -> Message:
    """A request too short for its fixed header, or for the client id's length."""
    if len(data) < _REQUEST_FIXED.size:
        return Message(number, frame, True, None, notes=[_short_header(data, "request")])
    _, key, version, correlation_id = _REQUEST_FIXED.unpack_from(data)
    message = Message(number, frame, True, correlation_id, key, version)
    if _has_client_id(key, version):
        message.client_id = _client_id(data, message)
    if key == PRODUCE:
        message.expects_response = produce_acks(message) != 0
    return message


@functools.lru_cache(maxsize=1024)
def _has_client_id(key: int, version: int) -> bool:
    """Whether the request header holds a client id (every version but v0)."""
    return request_header_version(key, version) >= 1


_CLIENT_IDS: dict[bytes, str] = {}  # client ids as read, decoded once (a few per capture)
_MAX_CLIENT_IDS = 4096
_CACHED_LENGTH = 256  # longer ones are decoded each time


def _client_id(data: bytes, message: Message) -> str | None:
    start = _REQUEST_FIXED.size
    if len(data) < start + 2:
        message.notes.append(notes.warn("request header cut before client_id", start, "kafka.header_cut"))
        return None
    (length,) = _INT16.unpack_from(data, start)
    if length < 0:
        return None
    raw = data[start + 2 : start + 2 + length]
    if len(raw) < length:
        message.notes.append(notes.warn("request header cut inside client_id", start, "kafka.header_cut"))
    client_id = _CLIENT_IDS.get(raw)
    if client_id is None:
        client_id = raw.decode("utf-8", "replace")
        if length <= _CACHED_LENGTH:
            if len(_CLIENT_IDS) >= _MAX_CLIENT_IDS:
                _CLIENT_IDS.clear()
            _CLIENT_IDS[raw] = client_id
    return client_id


def _short_header(data: bytes, what: str) -> Note:
    return notes.error(f"{what} of {len(data)} bytes is too short for a Kafka {what} header", 0,
                        "kafka.header_short")


def produce_acks(message: Message) -> int | None:
    """The `acks` of a Produce request (0: no response will come), None when unreadable.

    Produce's body starts with `transactional_id` (v3+, compact from v9 on, where the
    header also ends with a tagged-field block) and then `acks`.
    """
    data, version = message.frame.data, message.api_version or 0
    try:
        offset = _REQUEST_FIXED.size + 2 + max(_INT16.unpack_from(data, _REQUEST_FIXED.size)[0], 0)
        if version >= 9:  # one-byte varints (no tagged fields, a short id) read inline: the usual case
            offset = offset + 1 if data[offset] == 0 else _skip_tagged_fields(data, offset)
            length_plus_one = data[offset]
            offset = offset + max(length_plus_one, 1) if length_plus_one < 0x80 else _skip_string(
                data, offset, compact=True)
        elif version >= 3:
            offset = _skip_string(data, offset, compact=False)
        return int(_INT16.unpack_from(data, offset)[0])
    except (struct.error, IndexError):
        return None


# Produce's acks is read for every Produce request on the summary path, so these
# skips are kept minimal here rather than going through the interpreter's readers
# (a Source object per request measured 5% slower on a 100 MB capture).


def _skip_string(data: bytes, offset: int, *, compact: bool) -> int:
    if compact:
        length_plus_one, offset = _uvarint(data, offset)
        return offset + max(length_plus_one - 1, 0)
    (length,) = _INT16.unpack_from(data, offset)
    return offset + 2 + max(length, 0)


def _skip_tagged_fields(data: bytes, offset: int) -> int:
    count, offset = _uvarint(data, offset)
    for _ in range(count):
        _, offset = _uvarint(data, offset)
        size, offset = _uvarint(data, offset)
        if offset + size > len(data):
            raise IndexError("tagged field runs past the frame")
        offset += size
    return offset


def _uvarint(data: bytes, offset: int) -> tuple[int, int]:
    """(value, offset after it); IndexError when cut or longer than 5 bytes."""
    value = 0
    for index in range(5):
        byte = data[offset + index]
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return value, offset + index + 1
    raise IndexError("uvarint longer than 5 bytes")
