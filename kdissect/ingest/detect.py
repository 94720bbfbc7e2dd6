"""Is this Kafka? Plausibility checks on the first bytes of a frame.

Used to recognise Kafka on any port from the first bytes of a stream, to find
the client side of a connection seen without its SYN, and to resynchronise
framing after a gap. A request header is distinctive: size, then a known API
key, a version in that key's range, a correlation id and a client id length
that fits. A response header is only a size and a correlation id, so it is
checked against the correlation ids of requests seen on the same connection.
"""

from __future__ import annotations

import re
import struct

from kdissect.apis import APIS, CONTROLLED_SHUTDOWN

REQUEST_HEADER_LENGTH = 14  # size, api key, api version, correlation id, client id length
RESPONSE_HEADER_LENGTH = 8  # size, correlation id
MIN_REQUEST_SIZE = REQUEST_HEADER_LENGTH - 4
MIN_RESPONSE_SIZE = RESPONSE_HEADER_LENGTH - 4

_REQUEST_HEADER = struct.Struct(">ihhih")
_RESPONSE_HEADER = struct.Struct(">ii")
_HIGHEST_KEY = max(APIS)
_HIGHEST_VERSION = max(api.max_version for api in APIS.values())
# The largest frame resynchronisation believes, per API: bulk data can be as large as
# the frame limit, everything else is control traffic of modest size.
CONTROL_FRAME_LIMIT = 1024 * 1024
BULK_REQUESTS = frozenset({0})  # Produce
BULK_RESPONSES = frozenset({1, 3, 78})  # Fetch, Metadata, ShareFetch
MAX_TAGGED_FIELDS = 64
_CONTROL = re.compile(b"[\\x00-\\x1f\\x7f]")
TLS_RECORD_TYPES = frozenset({0x14, 0x15, 0x16, 0x17})  # change cipher spec, alert, handshake, data


def looks_like_tls(head: bytes | bytearray) -> bool:
    """A TLS record header: content type, then protocol version 3.x (SSL 3.0 to TLS 1.3)."""
    return len(head) >= 3 and head[0] in TLS_RECORD_TYPES and head[1] == 3 and head[2] <= 4


def plausible_request(data: bytes | bytearray, pos: int, max_size: int) -> bool | None:
    """Whether a request header starts at `pos`; None when fewer than 14 bytes are there."""
    if len(data) - pos < REQUEST_HEADER_LENGTH:
        return None
    size, key, version, _correlation_id, client_id_length = _REQUEST_HEADER.unpack_from(data, pos)
    if not MIN_REQUEST_SIZE <= size <= max_size:
        return False
    api = APIS.get(key)
    if api is None or not api.valid(version):
        return False
    return -1 <= client_id_length <= size - MIN_REQUEST_SIZE


def response_header(data: bytes | bytearray, pos: int, max_size: int) -> tuple[int, int] | None:
    """(size, correlation id) when a plausible response header starts at `pos`."""
    if len(data) - pos < RESPONSE_HEADER_LENGTH:
        return None
    size, correlation_id = _RESPONSE_HEADER.unpack_from(data, pos)
    if not MIN_RESPONSE_SIZE <= size <= max_size:
        return None
    return size, correlation_id


def request_candidates(max_size: int) -> re.Pattern[bytes]:
    """Positions where a request header could start (a fast filter before plausible_request)."""
    top = min(max_size >> 24, 0x7F)
    key_low = min(_HIGHEST_KEY, 0xFF)
    version_low = min(_HIGHEST_VERSION, 0xFF)
    return re.compile(
        b"(?=[\\x00-" + _byte(top) + b"][\\x00-\\xff]{3}\\x00[\\x00-" + _byte(key_low)
        + b"]\\x00[\\x00-" + _byte(version_low) + b"])", re.DOTALL)


def response_candidates(max_size: int) -> re.Pattern[bytes]:
    """Positions where a response header could start (its size's top byte is small)."""
    top = min(max_size >> 24, 0x7F)
    return re.compile(b"(?=[\\x00-" + _byte(top) + b"][\\x00-\\xff]{7})", re.DOTALL)


def _byte(value: int) -> bytes:
    return b"\\x%02x" % value


def largest_plausible(api_key: int | None, request: bool, max_size: int) -> int:
    """The largest frame (size prefix included) resynchronisation accepts for an API."""
    bulk = BULK_REQUESTS if request else BULK_RESPONSES
    return max_size if api_key in bulk else min(CONTROL_FRAME_LIMIT, max_size)


def request_header_check(data: bytes | bytearray, pos: int, max_size: int, *,
                         strict: bool = True) -> bool | None:
    """Whether a whole request header starts at `pos`; None when more bytes are needed.

    Beyond `plausible_request`: a size plausible for the API, a client id without
    control characters (unless not `strict`: the first byte a stream shows is a
    likely frame start, and a hostile client id must still be shown), and in a
    flexible (v2) header a well-formed tagged section inside the frame.
    """
    plausible = plausible_request(data, pos, max_size)
    if not plausible:
        return plausible
    size, key, version, _correlation_id, length = _REQUEST_HEADER.unpack_from(data, pos)
    if size + 4 > largest_plausible(key, True, max_size):
        return False
    end = pos + REQUEST_HEADER_LENGTH + max(length, 0)
    if len(data) < end:
        return None
    if strict and _CONTROL.search(data, pos + REQUEST_HEADER_LENGTH, end):
        return False
    if (key == CONTROLLED_SHUTDOWN and version == 0) or not APIS[key].flexible(version):
        return True
    return _tagged_section_fits(data, end, pos + 4 + size)


def _tagged_section_fits(data: bytes | bytearray, pos: int, limit: int) -> bool | None:
    """A tagged section (count, then tag, size, bytes each) that ends by `limit`."""
    count, pos = _uvarint(data, pos)
    if count is None:
        return None if len(data) < limit else False
    if count > MAX_TAGGED_FIELDS:
        return False
    for _ in range(count):
        _tag, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos) if _tag is not None else (None, pos)
        if size is None:
            return None if len(data) < limit else False
        pos += size
        if pos > limit:
            return False
    return pos <= limit


def _uvarint(data: bytes | bytearray, pos: int) -> tuple[int | None, int]:
    value = shift = 0
    while pos < len(data) and shift < 35:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    return None, pos
