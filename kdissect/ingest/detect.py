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

from kdissect.apis import APIS

REQUEST_HEADER_LENGTH = 14  # size, api key, api version, correlation id, client id length
RESPONSE_HEADER_LENGTH = 8  # size, correlation id
MIN_REQUEST_SIZE = REQUEST_HEADER_LENGTH - 4
MIN_RESPONSE_SIZE = RESPONSE_HEADER_LENGTH - 4

_REQUEST_HEADER = struct.Struct(">ihhih")
_RESPONSE_HEADER = struct.Struct(">ii")
_HIGHEST_KEY = max(APIS)
_HIGHEST_VERSION = max(api.max_version for api in APIS.values())
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
