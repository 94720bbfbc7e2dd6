"""SASL inside Kafka: the mechanism and principal of an authentication, its secrets masked.

SaslHandshake (17) names the mechanism; SaslAuthenticate (36) carries the
mechanism's own bytes (`auth_bytes`), whose meaning depends on it: PLAIN is
`authzid NUL authcid NUL passwd` (RFC 4616), SCRAM is client-first `n,,n=user,r=nonce`,
server-first `r=..,s=salt,i=count`, client-final `c=..,r=..,p=proof` and
server-final `v=signature` (RFC 5802), OAUTHBEARER is `n,,\\x01auth=Bearer token\\x01\\x01`
(RFC 7628). `mask_secrets` rewrites the frames of a stream so that passwords,
proofs, signatures and tokens are stars before any stage sees them: every
output (trees, hex dumps, JSON, tables) then shows them masked. It also adds a
chat note naming the mechanism and principal to each SASL message.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from kdissect.ingest.framing import Direction, Frame
from kdissect.notes import chat

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
MASK = 0x2A  # "*"
MAX_PENDING = 1024  # SaslAuthenticate requests remembered per connection until answered
MAX_CONNECTIONS = 65536  # connections whose SASL state is remembered
_SASL_KEYS = frozenset({SASL_HANDSHAKE, SASL_AUTHENTICATE})
_HEADER = struct.Struct(">ihhi")
_SCRAM_SECRET = re.compile(rb"(?:^|,)(?:p|v)=([^,]*)")
_BEARER = re.compile(rb"auth=Bearer ([^\x01]*)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SaslAuth:
    """What one SASL token says; `secrets` are (start, end) ranges within it."""

    step: str  # "PLAIN credentials", "SCRAM client-first", ...
    principal: str | None
    secrets: tuple[tuple[int, int], ...]


def read_auth_bytes(token: bytes, mechanism: str | None, *, from_client: bool = True) -> SaslAuth:
    """The meaning of one SASL token, by mechanism (guessed from the token when unknown)."""
    mechanism = (mechanism or "").upper()
    if mechanism == "PLAIN" and not from_client:
        return SaslAuth("PLAIN server response", None, ((0, len(token)),) if token else ())
    if mechanism == "PLAIN" or (not mechanism and token.count(b"\0") == 2):
        return _plain(token)
    if token.startswith((b"n,", b"y,", b"p=")) and b"auth=" in token:
        return _bearer(token)
    if mechanism.startswith("SCRAM") or not mechanism:
        return _scram(token)
    return SaslAuth(f"{mechanism} token", None, ((0, len(token)),) if token else ())


def _plain(token: bytes) -> SaslAuth:
    parts = token.split(b"\0")
    if len(parts) != 3:
        return SaslAuth("PLAIN credentials (malformed)", None, ((0, len(token)),) if token else ())
    start = len(parts[0]) + len(parts[1]) + 2
    principal = parts[1].decode("utf-8", "replace")
    return SaslAuth("PLAIN credentials", principal, ((start, len(token)),) if parts[2] else ())


def _scram(token: bytes) -> SaslAuth:
    secrets = tuple(match.span(1) for match in _SCRAM_SECRET.finditer(token) if match.group(1))
    user = re.search(rb"(?:^|,)n=([^,]*)", token)
    if token.startswith((b"n,", b"y,", b"p=")):
        step = "SCRAM client-first"
    elif token.startswith(b"r=") and b",s=" in token:
        step = "SCRAM server-first"
    elif token.startswith(b"c="):
        step = "SCRAM client-final"
    elif token.startswith((b"v=", b"e=")):
        step = "SCRAM server-final"
    else:
        step = "SCRAM message"
    principal = None if user is None else user.group(1).decode("utf-8", "replace")
    return SaslAuth(step, principal, secrets)


def _bearer(token: bytes) -> SaslAuth:
    found = _BEARER.search(token)
    user = re.search(rb"a=([^,\x01]*)", token)
    principal = None if user is None or not user.group(1) else user.group(1).decode("utf-8", "replace")
    return SaslAuth("OAUTHBEARER initial response", principal, (found.span(1),) if found else ())


# --- where the bytes are in a frame ---

def _uvarint(data: bytes, position: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80 or shift > 28:
            return value, position
        shift += 7


def _skip_tags(data: bytes, position: int) -> int:
    count, position = _uvarint(data, position)
    for _ in range(min(count, 64)):
        _tag, position = _uvarint(data, position)
        size, position = _uvarint(data, position)
        position += size
    return position


def request_body_start(data: bytes, flexible: bool) -> int:
    """Where a request's body starts: after the header (v1, or v2 when flexible)."""
    client_id_length = struct.unpack_from(">h", data, 12)[0]
    position = 14 + max(client_id_length, 0)
    return _skip_tags(data, position) if flexible else position


def _bytes_field(data: bytes, position: int, flexible: bool) -> tuple[int, int]:
    """(start, end) of a bytes field's value at `position`."""
    if flexible:
        size, position = _uvarint(data, position)
        size -= 1
    else:
        size = struct.unpack_from(">i", data, position)[0]
        position += 4
    end = position + max(size, 0)
    if end > len(data):
        raise IndexError("bytes run past the frame")
    return position, end


def auth_bytes_span(data: bytes, is_request: bool, version: int) -> tuple[int, int] | None:
    """(start, end) of a SaslAuthenticate frame's auth_bytes, or None when malformed."""
    flexible = version >= 2
    try:
        if is_request:
            return _bytes_field(data, request_body_start(data, flexible), flexible)
        position = _skip_tags(data, 8) if flexible else 8
        position += 2  # error code
        if flexible:
            size, position = _uvarint(data, position)
            position += max(size - 1, 0)
        else:
            size = struct.unpack_from(">h", data, position)[0]
            position += 2 + max(size, 0)
        return _bytes_field(data, position, flexible)
    except (IndexError, struct.error):
        return None


def handshake_mechanism(data: bytes) -> str | None:
    """The mechanism a SaslHandshake request names."""
    try:
        position = request_body_start(data, flexible=False)
        size = struct.unpack_from(">h", data, position)[0]
        raw = data[position + 2:position + 2 + size]
        return raw.decode("ascii", "replace") if len(raw) == size and size > 0 else None
    except (IndexError, struct.error):
        return None


# --- the stream of frames ---

class _ConnectionState:
    __slots__ = ("mechanism", "pending")

    def __init__(self) -> None:
        self.mechanism: str | None = None
        self.pending: dict[int, int] = {}  # correlation id -> SaslAuthenticate version


class SecretMasker:
    """Called on each frame of a read in turn: the frame, SASL secrets masked (unless
    `show_secrets`) and SASL steps noted.

    A SASL frame comes out as a new frame (masked bytes, one more note); the rest as is.
    """

    __slots__ = ("show_secrets", "states")

    def __init__(self, *, show_secrets: bool = False) -> None:
        self.show_secrets = show_secrets
        self.states: dict[int, _ConnectionState] = {}  # connections that spoke SASL

    def __call__(self, frame: Frame) -> Frame:
        data = frame.data
        if frame.direction is Direction.REQUEST:
            if len(data) < 14 or data[4] or data[5] not in _SASL_KEYS:  # not SASL: most frames
                return frame
            key, version, correlation = _HEADER.unpack_from(data, 0)[1:]
            states = self.states
            state = states.get(frame.connection.index)
            if state is None:
                state = states[frame.connection.index] = _ConnectionState()
                if len(states) > MAX_CONNECTIONS:
                    del states[next(iter(states))]
            return _sasl_request(frame, state, key, version, correlation, self.show_secrets)
        if not self.states or len(data) < 8:
            return frame
        state = self.states.get(frame.connection.index)
        if state is None or not state.pending:
            return frame
        version = state.pending.pop(struct.unpack_from(">i", data, 4)[0], None)
        if version is None:
            return frame
        return _sasl_token(frame, state, False, version, self.show_secrets)


def mask_secrets(frames: Iterable[Frame], *, show_secrets: bool = False) -> Iterator[Frame]:
    """The frames, SASL secrets masked (unless `show_secrets`) and SASL steps noted
    (`SecretMasker` on each)."""
    mask = SecretMasker(show_secrets=show_secrets)
    for frame in frames:
        yield mask(frame)


def _sasl_request(frame: Frame, state: _ConnectionState, key: int, version: int,
                  correlation: int, show_secrets: bool) -> Frame:
    if key == SASL_HANDSHAKE:
        state.mechanism = handshake_mechanism(frame.data)
        if state.mechanism is None:
            return frame
        return replace(frame, notes=(*frame.notes, chat(f"SASL mechanism {state.mechanism!r}", id="sasl.mechanism")))
    state.pending[correlation] = version
    if len(state.pending) > MAX_PENDING:
        del state.pending[next(iter(state.pending))]
    return _sasl_token(frame, state, True, version, show_secrets)


def _sasl_token(frame: Frame, state: _ConnectionState, is_request: bool, version: int,
                show_secrets: bool) -> Frame:
    span = auth_bytes_span(frame.data, is_request, version)
    if span is None or span[0] == span[1]:
        return frame  # malformed (the tree will say), or empty (a PLAIN server's success)
    start, end = span
    auth = read_auth_bytes(frame.data[start:end], state.mechanism, from_client=is_request)
    text = f"SASL {auth.step}"
    if auth.principal is not None:
        text += f", principal {auth.principal!r}"
    data = frame.data
    if auth.secrets and not show_secrets:
        masked = bytearray(data)
        for low, high in auth.secrets:
            masked[start + low:start + high] = bytes([MASK]) * (high - low)
        data = bytes(masked)
        text += " (secret masked)"
    return replace(frame, data=data, notes=(*frame.notes, chat(text, start, "sasl.masked")))
