"""TLS: Kafka connections decrypted with the session keys of an NSS key log.

A `KeyLog` holds the secrets of an `SSLKEYLOGFILE` (what Java, librdkafka,
OpenSSL and Python clients write): `CLIENT_RANDOM` master secrets for TLS 1.2,
handshake and application traffic secrets for TLS 1.3, keyed by the
ClientHello's random. A `TlsLayer` sits between TCP reassembly and Kafka
framing for one connection: it cuts each direction's byte stream into TLS
records (a record may span segments; a segment may carry several records),
reads the handshake (randoms, session id, version, cipher suite), derives the
record keys (TLS 1.2 PRF; TLS 1.3 HKDF-Expand-Label, handshake then
application secrets, KeyUpdate), opens each record with its AEAD and passes
the plaintext on as the same stream events the framers read: plaintext stream
offsets, and the packet number and time of the segment that completed each
record. What it cannot decrypt (no keys for the session, a suite it does not
support, a record failing authentication, bytes lost inside the record
stream) becomes one note per connection.

Secrets never leave this module: nothing here formats a key into a note.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

from kdissect.notes import Note, warn

CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA = 20, 21, 22, 23
CLIENT_HELLO, SERVER_HELLO, FINISHED, KEY_UPDATE = 1, 2, 20, 24
TLS12, TLS13 = 0x0303, 0x0304
SUPPORTED_VERSIONS, SESSION_TICKET = 0x002B, 0x0023
NEW_SESSION_TICKET = 4
MAX_RECORD = (1 << 14) + 2048  # the largest TLSCiphertext fragment TLS 1.2 allows
MAX_HANDSHAKE = 1 << 20  # handshake bytes buffered per direction before giving up
MAX_SESSIONS = 65536  # TLS 1.2 session ids remembered for resumption
MAX_TRIALS = 20_000  # decryptions tried to find the records again after lost bytes
TAG = 16
# A ServerHello whose random is this is a HelloRetryRequest (RFC 8446, 4.1.3).
HELLO_RETRY = hashlib.sha256(b"HelloRetryRequest").digest()

_HEADER = struct.Struct(">BHH")
_SEQUENCE = struct.Struct(">Q")
Report = Callable[[Note], None]


class KeyLogError(ValueError):
    """A key log file cannot be read."""


@dataclass(frozen=True, slots=True)
class CipherSuite:
    code: int
    name: str
    aead: str  # "gcm", "chacha20", "ccm"
    key_length: int
    hash_name: str  # the PRF / HKDF hash: "sha256" or "sha384"

    @property
    def hash_length(self) -> int:
        return hashlib.new(self.hash_name).digest_size


_SUITES = (
    (0x1301, "TLS_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    (0x1302, "TLS_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    (0x1303, "TLS_CHACHA20_POLY1305_SHA256", "chacha20", 32, "sha256"),
    (0x1304, "TLS_AES_128_CCM_SHA256", "ccm", 16, "sha256"),
    (0x009C, "TLS_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    (0x009D, "TLS_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    (0x009E, "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    (0x009F, "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    (0xC02B, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    (0xC02C, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    (0xC02F, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    (0xC030, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    (0xCCA8, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha20", 32, "sha256"),
    (0xCCA9, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "chacha20", 32, "sha256"),
    (0xCCAA, "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha20", 32, "sha256"),
)
CIPHER_SUITES = {code: CipherSuite(code, name, aead, size, hash_name)
                 for code, name, aead, size, hash_name in _SUITES}


def version_name(version: int) -> str:
    return {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", TLS12: "TLS 1.2",
            TLS13: "TLS 1.3"}.get(version, f"TLS version 0x{version:04x}")


# --- the key log -------------------------------------------------------------------

class KeyLog:
    """The secrets of one or more NSS key log files, by client random.

    Files are only ever opened for reading. A lookup that misses reads the files
    again when they have grown (a client still writing its key log while a live
    capture is decoded). Its repr shows counts, never secrets.
    """

    LABELS = frozenset({
        "CLIENT_RANDOM", "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
        "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0", "CLIENT_EARLY_TRAFFIC_SECRET",
        "EXPORTER_SECRET", "EARLY_EXPORTER_SECRET",
    })

    def __init__(self, paths: Iterable[str | os.PathLike[str]] = ()) -> None:
        self.paths = [os.fspath(path) for path in paths]
        self._sizes: dict[str, int] = {}
        self._secrets: dict[bytes, dict[str, bytes]] = {}
        self.skipped_lines = 0
        self._reload(strict=True)

    @classmethod
    def from_text(cls, text: str) -> KeyLog:
        keys = cls()
        keys.add_lines(text.splitlines())
        return keys

    def __repr__(self) -> str:
        return f"KeyLog({len(self.paths)} files, {len(self._secrets)} sessions)"

    def __len__(self) -> int:
        return len(self._secrets)

    def secrets(self, client_random: bytes) -> dict[str, bytes]:
        found = self._secrets.get(client_random)
        if found is None and self._reload(strict=False):
            found = self._secrets.get(client_random)
        return found or {}

    def add_lines(self, lines: Iterable[str]) -> None:
        for line in lines:
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            try:
                label, random, secret = parts[0], bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
            except (IndexError, ValueError):
                self.skipped_lines += 1
                continue
            if label not in self.LABELS or len(random) != 32 or len(parts) != 3:
                self.skipped_lines += 1
                continue
            self._secrets.setdefault(random, {})[label] = secret

    def _reload(self, *, strict: bool) -> bool:
        """Read the files that changed size; True when any did."""
        changed = False
        for path in self.paths:
            try:
                size = os.stat(path).st_size
                if self._sizes.get(path) == size:
                    continue
                with open(path, encoding="ascii", errors="replace") as file:
                    self.add_lines(file)
            except OSError as failure:
                if strict:
                    raise KeyLogError(f"{path}: {failure.strerror or failure}") from None
                continue
            self._sizes[path] = size
            changed = True
        return changed


def load_keylog(source: KeyLog | str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> KeyLog:
    """A KeyLog from a path, several paths, or an existing KeyLog."""
    if isinstance(source, KeyLog):
        return source
    if isinstance(source, str | os.PathLike):
        return KeyLog([source])
    return KeyLog(source)


# --- key derivation ----------------------------------------------------------------

def prf12(hash_name: str, secret: bytes, label: bytes, seed: bytes, length: int) -> bytes:
    """TLS 1.2's PRF: P_hash(secret, label + seed) (RFC 5246, section 5)."""
    seed = label + seed
    out, a = bytearray(), seed
    while len(out) < length:
        a = hmac.digest(secret, a, hash_name)
        out += hmac.digest(secret, a + seed, hash_name)
    return bytes(out[:length])


def hkdf_expand_label(hash_name: str, secret: bytes, label: bytes, context: bytes,
                      length: int) -> bytes:
    """TLS 1.3's HKDF-Expand-Label (RFC 8446, section 7.1)."""
    full = b"tls13 " + label
    info = struct.pack(">HB", length, len(full)) + full + bytes([len(context)]) + context
    out, block, counter = bytearray(), b"", 1
    while len(out) < length:
        block = hmac.digest(secret, block + info + bytes([counter]), hash_name)
        out += block
        counter += 1
    return bytes(out[:length])


class RecordCipher:
    """One direction's record protection: an AEAD, its IV and the record sequence number."""

    def __init__(self, suite: CipherSuite, key: bytes, iv: bytes, *, tls13: bool) -> None:
        self.suite, self.iv, self.tls13 = suite, iv, tls13
        self.aead: Any = {"gcm": AESGCM, "chacha20": ChaCha20Poly1305, "ccm": AESCCM}[suite.aead](key)
        self.explicit_nonce = not tls13 and suite.aead != "chacha20"  # TLS 1.2 AES: 8 bytes on the wire
        self.sequence = 0

    @classmethod
    def from_secret(cls, suite: CipherSuite, secret: bytes) -> RecordCipher:
        key = hkdf_expand_label(suite.hash_name, secret, b"key", b"", suite.key_length)
        iv = hkdf_expand_label(suite.hash_name, secret, b"iv", b"", 12)
        return cls(suite, key, iv, tls13=True)

    @classmethod
    def tls12_pair(cls, suite: CipherSuite, master: bytes, client_random: bytes,
                   server_random: bytes) -> tuple[RecordCipher, RecordCipher]:
        """(client write, server write) from a TLS 1.2 master secret (RFC 5246, 6.3)."""
        iv_length = 12 if suite.aead == "chacha20" else 4
        size = 2 * (suite.key_length + iv_length)
        block = prf12(suite.hash_name, master, b"key expansion", server_random + client_random, size)
        k, i = suite.key_length, iv_length
        client_key, server_key = block[:k], block[k:2 * k]
        client_iv, server_iv = block[2 * k:2 * k + i], block[2 * k + i:2 * k + 2 * i]
        return (cls(suite, client_key, client_iv, tls13=False),
                cls(suite, server_key, server_iv, tls13=False))

    def open(self, content_type: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        """(content type, plaintext) of one protected record; raises InvalidTag."""
        sequence = _SEQUENCE.pack(self.sequence)
        if self.explicit_nonce:
            if len(fragment) < 8 + TAG:
                raise InvalidTag
            nonce, sealed = self.iv + fragment[:8], fragment[8:]
        else:
            nonce = bytes(a ^ b for a, b in zip(self.iv, bytes(4) + sequence, strict=True))
            sealed = fragment
        if len(sealed) < TAG:
            raise InvalidTag
        if self.tls13:
            aad = _HEADER.pack(content_type, version, len(fragment))
        else:
            aad = sequence + _HEADER.pack(content_type, version, len(sealed) - TAG)
        plaintext = self.aead.decrypt(nonce, sealed, aad)
        self.sequence += 1
        if not self.tls13:
            return content_type, plaintext
        inner = plaintext.rstrip(b"\x00")
        if not inner:
            raise InvalidTag  # no content type: not a TLS 1.3 record after all
        return inner[-1], inner[:-1]


# --- the handshake -----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Hello:
    """What a ClientHello or ServerHello says that decryption needs."""

    random: bytes
    session_id: bytes
    version: int = 0  # ServerHello: the negotiated version (supported_versions wins)
    cipher_suite: int = 0  # ServerHello only
    ticket: bytes = b""  # ClientHello: the TLS 1.2 session ticket offered (RFC 5077)


def parse_hello(kind: int, body: bytes) -> Hello | None:
    """The randoms, session id, version and suite of a hello; None when malformed."""
    try:
        version = struct.unpack_from(">H", body, 0)[0]
        random = body[2:34]
        session_length = body[34]
        session_id = body[35:35 + session_length]
        position = 35 + session_length
        if len(random) != 32 or len(session_id) != session_length:
            return None
        if kind == CLIENT_HELLO:
            suites_length = struct.unpack_from(">H", body, position)[0]
            position += 2 + suites_length
            position += 1 + body[position]  # compression methods
            ticket = _extensions(body, position).get(SESSION_TICKET, b"")
            return Hello(random, session_id, ticket=ticket)
        suite = struct.unpack_from(">H", body, position)[0]
        position += 3  # suite, compression method
        selected = _extensions(body, position).get(SUPPORTED_VERSIONS, b"")
        chosen = int.from_bytes(selected, "big") if len(selected) == 2 else version
        return Hello(random, session_id, chosen, suite)
    except (struct.error, IndexError):
        return None


def _extensions(body: bytes, position: int) -> dict[int, bytes]:
    """A hello's extensions by type (none when the hello has no extension block)."""
    found: dict[int, bytes] = {}
    if position + 2 > len(body):
        return found
    end = min(len(body), position + 2 + struct.unpack_from(">H", body, position)[0])
    position += 2
    while position + 4 <= end:
        kind, length = struct.unpack_from(">HH", body, position)
        found.setdefault(kind, body[position + 4:position + 4 + length])
        position += 4 + length
    return found


def handshake_messages(buffer: bytearray) -> Iterable[tuple[int, bytes]]:
    """(type, body) of each complete handshake message at the buffer's start; removes them."""
    while len(buffer) >= 4:
        length = int.from_bytes(buffer[1:4], "big")
        if len(buffer) < 4 + length:
            return
        kind, body = buffer[0], bytes(buffer[4:4 + length])
        del buffer[:4 + length]
        yield kind, body


# --- one connection ----------------------------------------------------------------

class PlainSink(Protocol):
    """Where plaintext goes: the stream sink protocol of reassembly."""

    def data(self, offset: int, payload: bytes, number: int, timestamp: int,
             notes: tuple[Note, ...]) -> None: ...

    def gap(self, offset: int, size: int, number: int, timestamp: int, reason: str) -> None: ...

    def duplicate(self, offset: int, size: int, number: int, differs: bool) -> None: ...


class PlainStream:
    """One direction of the plaintext, as the framers see a TCP stream."""

    __slots__ = ("cipher", "from_start", "sink")

    def __init__(self, sink: PlainSink, from_start: bool, cipher: Any = None) -> None:
        self.sink, self.from_start = sink, from_start
        self.cipher = cipher  # the TCP stream of this direction's ciphertext

    def feed(self, sink: PlainSink) -> None:
        """Send this direction's plaintext events to `sink` from now on."""
        self.sink = sink

    def owes(self) -> bool:
        """Whether bytes still owed to the ciphertext stream may yet bring plaintext."""
        return self.cipher is not None and self.cipher.owes()


class _Discard:
    def data(self, offset: int, payload: bytes, number: int, timestamp: int,
             notes: tuple[Note, ...]) -> None:
        pass

    def gap(self, offset: int, size: int, number: int, timestamp: int, reason: str) -> None:
        pass

    def duplicate(self, offset: int, size: int, number: int, differs: bool) -> None:
        pass


class TlsLayer:
    """One TLS connection: ciphertext events in (two sinks), plaintext events out.

    It looks like the TCP connection it wraps to the consumer of the plaintext
    (`addresses`, `syn_sender`, `streams` with a `sink` and `from_start` each);
    a consumer that sets `streams` to None stops decryption and reassembly.
    """

    def __init__(self, tcp: Any, keys: KeyLog, name: str, report: Report,
                 sessions: dict[bytes, bytes], *, quiet: bool = False) -> None:
        self.tcp, self.keys, self.name, self.report = tcp, keys, name, report
        self.sessions = sessions  # TLS 1.2 session id -> master secret, for resumption
        self.quiet = quiet  # say nothing until a record was decrypted (not a Kafka port)
        self.addresses = tcp.addresses
        first, second = tcp.stream(0), tcp.stream(1)
        self.plain_streams = (PlainStream(_Discard(), bool(first and first.from_start), first),
                              PlainStream(_Discard(), bool(second and second.from_start), second))
        self._plain: tuple[PlainStream, PlainStream] | None = self.plain_streams
        self.sides = (_RecordReader(self, 0), _RecordReader(self, 1))
        self.client_side: int | None = None
        self.client_hello: Hello | None = None
        self.server_hello: Hello | None = None
        self.suite: CipherSuite | None = None
        self.master: bytes | None = None  # TLS 1.2
        self.stopped = False
        self.noted = False
        self.decrypted = False  # at least one record was opened

    @property
    def syn_sender(self) -> int | None:
        """The client side: the one that sent the SYN, else the ClientHello."""
        sender = self.tcp.syn_sender
        return self.client_side if sender is None else sender

    @property
    def streams(self) -> tuple[PlainStream, PlainStream] | None:
        return self._plain

    @streams.setter
    def streams(self, value: tuple[PlainStream, PlainStream] | None) -> None:
        self._plain = value
        if value is None:  # the consumer lost interest: so do we
            self.stop()

    def sinks(self) -> tuple[_RecordReader, _RecordReader]:
        return self.sides

    def stream(self, side: int) -> PlainStream | None:
        """One direction's plaintext stream (None once stopped), as a TCP connection's."""
        return None if self._plain is None else self._plain[side]

    def wake(self, at: int, number: int) -> None:
        """As a TCP connection's (`TcpConnection.wake`): the TCP connection's wakes the layer's
        connection (`KafkaConnection.expire`)."""
        self.tcp.wake(at, number)

    def stop(self) -> None:
        self.stopped = True
        self._plain = None
        self.tcp.stop()

    def note(self, text: str, id: str = "tls.not_decrypted") -> None:
        """One note per connection: the first problem explains what follows."""
        if self.quiet and not self.decrypted:
            return
        if not self.noted:
            self.noted = True
            self.report(warn(f"{self.name}: {text}", id=id))

    def give_up(self, text: str, id: str = "tls.not_decrypted") -> None:
        """Nothing more of this connection can be decrypted: say why, and stop reassembling it."""
        self.note(text, id)
        for side in self.sides:
            side.dead = True
        self.stop()

    # --- plaintext out ---

    def plaintext(self, side: int, payload: bytes, number: int, timestamp: int,
                  notes: tuple[Note, ...]) -> None:
        reader = self.sides[side]
        sink = self._sink(side)
        if sink is not None and payload:
            sink.data(reader.plain_offset, payload, number, timestamp, notes)
        reader.plain_offset += len(payload)

    def plain_gap(self, side: int, size: int, number: int, timestamp: int, reason: str) -> None:
        reader = self.sides[side]
        sink = self._sink(side)
        if sink is not None and size > 0:
            sink.gap(reader.plain_offset, size, number, timestamp, reason)
        reader.plain_offset += size

    def _sink(self, side: int) -> PlainSink | None:
        streams = self._plain
        return None if streams is None else streams[side].sink

    # --- the handshake ---

    def hello(self, side: int, kind: int, body: bytes) -> None:
        hello = parse_hello(kind, body)
        if hello is None:
            self.give_up("malformed TLS hello message; this connection is not decrypted", "tls.malformed")
            return
        if kind == CLIENT_HELLO:
            self.client_side = side
            if self.client_hello is None:  # a second one (after HelloRetryRequest) keeps the random
                self.client_hello = hello
        elif hello.random != HELLO_RETRY:
            self.server_hello = hello
            self._keys_for(hello)

    def _keys_for(self, server: Hello) -> None:
        client = self.client_hello
        if client is None or self.client_side is None:
            self.give_up("TLS, no keys: the capture starts after the ClientHello", "tls.no_keys")
            return
        suite = CIPHER_SUITES.get(server.cipher_suite)
        label = version_name(server.version)
        if server.version not in (TLS12, TLS13):
            self.give_up(f"{label} is not supported; this connection is not decrypted", "tls.unsupported")
            return
        if suite is None or (suite.code >> 8 == 0x13) != (server.version == TLS13):
            self.give_up(f"{label} cipher suite 0x{server.cipher_suite:04x} is not supported "
                         "(AES-GCM, AES-CCM and ChaCha20-Poly1305 are); not decrypted", "tls.unsupported")
            return
        self.suite = suite
        if server.version == TLS13:
            self._tls13_keys(suite, client)
        else:
            self._tls12_keys(suite, client, server)

    def _no_keys(self, label: str, client: Hello) -> None:
        self.give_up(f"TLS, no keys for this {label} session in the key log "
                     f"(client random {client.random[:8].hex()}...); not decrypted", "tls.no_keys")

    def _tls13_keys(self, suite: CipherSuite, client: Hello) -> None:
        secrets = self.keys.secrets(client.random)
        names = ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                 "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0")
        if not all(name in secrets for name in names):
            self._no_keys("TLS 1.3", client)
            return
        for side in self.sides:
            prefix = "CLIENT" if side.side == self.client_side else "SERVER"
            side.cipher = RecordCipher.from_secret(suite, secrets[f"{prefix}_HANDSHAKE_TRAFFIC_SECRET"])
            side.next_secret = secrets[f"{prefix}_TRAFFIC_SECRET_0"]
            side.tls13 = True

    def _tls12_keys(self, suite: CipherSuite, client: Hello, server: Hello) -> None:
        master = self.keys.secrets(client.random).get("CLIENT_RANDOM")
        if master is None and server.session_id and server.session_id == client.session_id:
            master = self.sessions.get(server.session_id)  # an abbreviated (resumed) handshake
        if master is None and client.ticket:
            master = self.sessions.get(b"ticket " + client.ticket)  # resumed from a ticket
        if master is None:
            self._no_keys("TLS 1.2", client)
            return
        self.master = master
        if server.session_id:
            self.remember(server.session_id)
        client_cipher, server_cipher = RecordCipher.tls12_pair(
            suite, master, client.random, server.random)
        for side in self.sides:
            side.next_cipher = client_cipher if side.side == self.client_side else server_cipher

    def remember(self, key: bytes) -> None:
        """This TLS 1.2 session's master secret, for handshakes that resume it later."""
        if self.master is not None:
            self.sessions[key] = self.master
            if len(self.sessions) > MAX_SESSIONS:
                del self.sessions[next(iter(self.sessions))]

    def clear_handshake(self, kind: int, body: bytes, side: int) -> None:
        """A handshake message in clear: the hellos, and TLS 1.2 session tickets."""
        if kind in (CLIENT_HELLO, SERVER_HELLO):
            self.hello(side, kind, body)
        elif kind == NEW_SESSION_TICKET and len(body) >= 6:
            length = int.from_bytes(body[4:6], "big")
            self.remember(b"ticket " + body[6:6 + length])

    def encrypted_handshake(self, side: int, kind: int, body: bytes) -> None:
        """A handshake message that came protected: TLS 1.3 key changes."""
        reader = self.sides[side]
        if not reader.tls13 or self.suite is None:
            return
        if kind == FINISHED and reader.next_secret is not None:
            reader.pending_secret, reader.next_secret = reader.next_secret, None
        elif kind == KEY_UPDATE and reader.secret is not None:
            reader.pending_secret = hkdf_expand_label(
                self.suite.hash_name, reader.secret, b"traffic upd", b"", self.suite.hash_length)

    def close(self) -> None:
        if self.stopped or self.decrypted or self.noted:
            return
        if self.client_hello is not None and self.server_hello is None:
            self.note("TLS handshake without a ServerHello in the capture; not decrypted")
        elif self.client_hello is not None:
            self.note("TLS, no record of this connection could be decrypted")


class _RecordReader:
    """One direction's TLS records: cut from the byte stream, opened, passed on."""

    def __init__(self, layer: TlsLayer, side: int) -> None:
        self.layer, self.side = layer, side
        self.buffer = bytearray()
        self.offset = 0  # ciphertext stream offset of buffer[0]
        self.notes: list[Note] = []
        self.plain_offset = 0
        self.handshake = bytearray()
        self.cipher: RecordCipher | None = None
        self.next_cipher: RecordCipher | None = None  # TLS 1.2: active after ChangeCipherSpec
        self.tls13 = False
        self.secret: bytes | None = None  # TLS 1.3 application secret in use
        self.next_secret: bytes | None = None  # TLS 1.3 application secret after Finished
        self.pending_secret: bytes | None = None  # to switch to after the current record
        self.dead = False
        self.lost: int | None = None  # ciphertext bytes lost while out of sync (None: in sync)
        self.lost_at = (0, 0)  # packet and time where sync was lost
        self.trials = 0  # decryptions tried while out of sync
        self.lost_sequence = 0  # the sequence number expected when sync was lost

    # --- events from reassembly ---

    def data(self, offset: int, payload: bytes, number: int, timestamp: int,
             notes: tuple[Note, ...]) -> None:
        if self.dead or self.layer.stopped:
            return
        if not self.buffer:
            self.offset = offset
        self.buffer += payload
        self.notes.extend(notes)
        self._records(number, timestamp)

    def gap(self, offset: int, size: int, number: int, timestamp: int, reason: str) -> None:
        if self.dead or self.layer.stopped:
            return
        if self.cipher is None:  # during the handshake: nothing to find the records again with
            self.layer.note(f"{size} bytes of the TLS stream are missing at offset {offset} "
                            f"({reason}) before its keys are in use; not decrypted further", "tls.lost_bytes")
            self.dead = True
            return
        self.layer.note(f"{size} bytes of the TLS stream are missing at offset {offset} "
                        f"({reason}); the records after them are found again by trying the "
                        "sequence numbers the lost bytes could hold (decryption stops if none "
                        "opens)", "tls.lost_bytes")
        self._lose_sync(size + len(self.buffer), number, timestamp)
        self.buffer.clear()
        self.offset = offset + size

    def _lose_sync(self, lost: int, number: int, timestamp: int) -> None:
        """Record boundaries and the sequence number are unknown from here on."""
        if self.lost is None and self.cipher is not None:
            self.lost_sequence = self.cipher.sequence
        self.lost = (self.lost or 0) + lost
        self.lost_at = (number, timestamp)
        self.notes.clear()
        self.trials = 0

    def duplicate(self, offset: int, size: int, number: int, differs: bool) -> None:
        pass  # retransmitted ciphertext: delivered once by reassembly already

    # --- records ---

    def _records(self, number: int, timestamp: int) -> None:
        buffer = self.buffer
        if self.lost is not None and not self._resync():
            return
        position = 0
        while len(buffer) - position >= 5 and not self.dead:
            content_type, version, length = _HEADER.unpack_from(buffer, position)
            if content_type not in (20, 21, 22, 23) or version >> 8 != 3 or length > MAX_RECORD:
                self.layer.note(f"no TLS record header at stream offset {self.offset + position} "
                                "(not TLS, or corrupt)" + ("; records are looked for after it"
                                                           if self.cipher else ""), "tls.malformed")
                if self.cipher is None:
                    self.dead = True
                    break
                del buffer[:position]
                self.offset += position
                self._lose_sync(0, number, timestamp)
                self._records(number, timestamp)
                return
            end = position + 5 + length
            if end > len(buffer):
                break
            fragment = bytes(buffer[position + 5:end])
            notes = tuple(self.notes)
            self.notes.clear()
            self._record(content_type, version, fragment, number, timestamp, notes)
            position = end
        del buffer[:position]
        self.offset += position

    def _record(self, content_type: int, version: int, fragment: bytes, number: int,
                timestamp: int, notes: tuple[Note, ...]) -> None:
        cipher = self.cipher
        if cipher is not None and not (self.tls13 and content_type != APPLICATION_DATA):
            try:
                content_type, fragment = cipher.open(content_type, version, fragment)
            except InvalidTag:
                self._failed(cipher, fragment, number, timestamp)
                return
            self.layer.decrypted = True
            self._content(content_type, fragment, number, timestamp, notes, protected=True)
            if self.pending_secret is not None and self.layer.suite is not None:
                self.secret, self.pending_secret = self.pending_secret, None
                self.cipher = RecordCipher.from_secret(self.layer.suite, self.secret)
            return
        if content_type == APPLICATION_DATA:
            self.layer.give_up("TLS, no keys: the capture starts after the TLS handshake (keys "
                               "are found by the ClientHello's random); not decrypted", "tls.no_keys")
            return
        self._content(content_type, fragment, number, timestamp, notes, protected=False)

    # --- finding records again after lost bytes ---

    def _resync(self) -> bool:
        """Find the next record that opens with one of the sequence numbers the lost bytes
        could hold; True when found (the buffer then starts with it, the cipher set to it)."""
        buffer, cipher = self.buffer, self.cipher
        assert cipher is not None and self.lost is not None
        position = 0
        while len(buffer) - position >= 5:
            content_type, version, length = _HEADER.unpack_from(buffer, position)
            end = position + 5 + length
            if content_type in (21, 22, 23) and version == TLS12 and TAG <= length <= MAX_RECORD:
                if end > len(buffer):
                    break  # wait for the whole candidate record
                found = self._try_sequences(cipher, content_type, version,
                                            bytes(buffer[position + 5:end]), position)
                if found:
                    self._resynced(position)
                    return True
                if self.dead:
                    return False
            position += 1
        self.lost += position
        del buffer[:position]
        self.offset += position
        return False

    def _try_sequences(self, cipher: RecordCipher, content_type: int, version: int,
                       fragment: bytes, position: int) -> bool:
        lost = self.lost or 0
        smallest = 5 + TAG + (8 if cipher.explicit_nonce else 0)
        first = cipher.sequence
        candidates = list(range(first, first + min((lost + position) // smallest + 2, 4096)))
        if cipher.explicit_nonce:  # OpenSSL and most stacks send the sequence number there
            hinted = int.from_bytes(fragment[:8], "big")
            if first <= hinted < first + 1_000_000:
                candidates.insert(0, hinted)
        for sequence in candidates:
            self.trials += 1
            if self.trials > MAX_TRIALS:
                self.dead = True  # noted when sync was lost: decryption stops
                return False
            cipher.sequence = sequence
            try:
                cipher.open(content_type, version, fragment)
            except InvalidTag:
                continue
            cipher.sequence = sequence  # opened again, for real, by the record loop
            return True
        cipher.sequence = first
        return False

    def _resynced(self, position: int) -> None:
        assert self.cipher is not None and self.lost is not None
        del self.buffer[:position]
        self.offset += position
        number, timestamp = self.lost_at
        cipher = self.cipher
        overhead = 5 + TAG + (8 if cipher.explicit_nonce else 0) + (1 if cipher.tls13 else 0)
        records = cipher.sequence - self.lost_sequence  # lost whole or in part
        lost = self.lost + position - records * overhead  # their plaintext (TLS 1.3: unpadded)
        self.lost = None
        self.layer.plain_gap(self.side, max(lost, 1), number, timestamp, "TLS records missing")

    def _failed(self, cipher: RecordCipher, fragment: bytes, number: int, timestamp: int) -> None:
        """A record whose tag does not verify: lost, and the next one is tried in its place."""
        self.layer.note(f"TLS record in packet {number} fails authentication (tampered, "
                        "corrupt or wrong keys); its bytes are lost and the following "
                        "records are still tried", "tls.auth_failed")
        cipher.sequence += 1
        overhead = TAG + (8 if cipher.explicit_nonce else 0) + (1 if cipher.tls13 else 0)
        self.layer.plain_gap(self.side, max(len(fragment) - overhead, 1), number, timestamp,
                             "TLS record failed authentication")

    def _content(self, content_type: int, data: bytes, number: int, timestamp: int,
                 notes: tuple[Note, ...], *, protected: bool) -> None:
        if content_type == APPLICATION_DATA:  # only ever protected: see _record
            self.layer.plaintext(self.side, data, number, timestamp, notes)
        elif content_type == HANDSHAKE:
            self._handshake(data, protected)
        elif content_type == CHANGE_CIPHER_SPEC and not self.tls13 and not protected:
            if self.next_cipher is None:
                self.dead = True  # no keys: already noted
            self.cipher, self.next_cipher = self.next_cipher, None

    def _handshake(self, data: bytes, protected: bool) -> None:
        self.handshake += data
        if len(self.handshake) > MAX_HANDSHAKE:
            self.layer.give_up("TLS handshake message too long; this connection is not decrypted",
                               "tls.malformed")
            return
        for kind, body in handshake_messages(self.handshake):
            if protected:
                self.layer.encrypted_handshake(self.side, kind, body)
            else:
                self.layer.clear_handshake(kind, body, self.side)
