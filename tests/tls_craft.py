"""TLS records made by hand for tests, with `cryptography`'s primitives, not kdissect's code.

Keys come from `cryptography`'s HKDFExpand (TLS 1.3) or from the RFC 5246 PRF
written out here (TLS 1.2); records are sealed with `cryptography`'s AEADs. The
handshake messages carry only what a decryptor reads (randoms, session id,
suite, supported_versions); the rest of a real handshake is opaque to it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

# code: (AEAD class, key length, hash)
SUITES: dict[int, tuple[Any, int, str]] = {
    0x1301: (AESGCM, 16, "sha256"), 0x1302: (AESGCM, 32, "sha384"),
    0x1303: (ChaCha20Poly1305, 32, "sha256"),
    0xC02F: (AESGCM, 16, "sha256"), 0xC030: (AESGCM, 32, "sha384"),
    0xCCA8: (ChaCha20Poly1305, 32, "sha256"),
}
HASHES = {"sha256": hashes.SHA256(), "sha384": hashes.SHA384()}


def record(content_type: int, body: bytes, version: int = 0x0303) -> bytes:
    return struct.pack(">BHH", content_type, version, len(body)) + body


def handshake(kind: int, body: bytes) -> bytes:
    return bytes([kind]) + len(body).to_bytes(3, "big") + body


def client_hello(random: bytes, session_id: bytes = b"", suites: tuple[int, ...] = (0x1301,)) -> bytes:
    body = (b"\x03\x03" + random + bytes([len(session_id)]) + session_id
            + struct.pack(">H", 2 * len(suites)) + b"".join(struct.pack(">H", s) for s in suites)
            + b"\x01\x00" + struct.pack(">H", 0))
    return record(22, handshake(1, body), 0x0301)


def server_hello(random: bytes, suite: int, session_id: bytes = b"", *, tls13: bool) -> bytes:
    extensions = struct.pack(">HHH", 0x002B, 2, 0x0304) if tls13 else b""
    body = (b"\x03\x03" + random + bytes([len(session_id)]) + session_id + struct.pack(">H", suite)
            + b"\x00" + struct.pack(">H", len(extensions)) + extensions)
    return record(22, handshake(2, body))


CHANGE_CIPHER_SPEC = record(20, b"\x01")


def expand_label(hash_name: str, secret: bytes, label: bytes, length: int) -> bytes:
    full = b"tls13 " + label
    info = struct.pack(">H", length) + bytes([len(full)]) + full + b"\x00"
    return HKDFExpand(HASHES[hash_name], length, info).derive(secret)


def prf(hash_name: str, secret: bytes, label: bytes, seed: bytes, length: int) -> bytes:
    """RFC 5246 section 5, written out."""
    out, a, seed = b"", label + seed, label + seed
    while len(out) < length:
        a = hmac.new(secret, a, hash_name).digest()
        out += hmac.new(secret, a + seed, hash_name).digest()
    return out[:length]


@dataclass
class Tls13Sealer:
    """One direction of TLS 1.3 record protection."""

    suite: int
    secret: bytes
    sequence: int = 0
    aead: Any = field(init=False)
    iv: bytes = field(init=False)

    def __post_init__(self) -> None:
        self.rekey(self.secret)

    def rekey(self, secret: bytes) -> None:
        cls, key_length, hash_name = SUITES[self.suite]
        self.secret, self.sequence = secret, 0
        self.aead = cls(expand_label(hash_name, secret, b"key", key_length))
        self.iv = expand_label(hash_name, secret, b"iv", 12)

    def seal(self, content: bytes, content_type: int = 23, padding: int = 0) -> bytes:
        inner = content + bytes([content_type]) + bytes(padding)
        header = struct.pack(">BHH", 23, 0x0303, len(inner) + 16)
        nonce = bytes(a ^ b for a, b in zip(self.iv, self.sequence.to_bytes(12, "big"), strict=True))
        self.sequence += 1
        return header + self.aead.encrypt(nonce, inner, header)

    def key_update(self) -> bytes:
        """A KeyUpdate record under the current key; later records use the next secret."""
        sealed = self.seal(handshake(24, b"\x00"), 22)
        hash_name = SUITES[self.suite][2]
        self.rekey(expand_label(hash_name, self.secret, b"traffic upd",
                                hashlib.new(hash_name).digest_size))
        return sealed


@dataclass
class Tls12Sealer:
    """One direction of TLS 1.2 AEAD record protection (RFC 5288 / RFC 7905)."""

    suite: int
    key: bytes
    iv: bytes
    sequence: int = 0

    def seal(self, content: bytes, content_type: int = 23) -> bytes:
        cls = SUITES[self.suite][0]
        sequence = self.sequence.to_bytes(8, "big")
        aad = sequence + struct.pack(">BHH", content_type, 0x0303, len(content))
        if cls is ChaCha20Poly1305:
            nonce = bytes(a ^ b for a, b in zip(self.iv, bytes(4) + sequence, strict=True))
            body = cls(self.key).encrypt(nonce, content, aad)
        else:
            body = sequence + cls(self.key).encrypt(self.iv + sequence, content, aad)
        self.sequence += 1
        return record(content_type, body)


@dataclass
class Session:
    """Both directions of one crafted TLS session and the key log lines that open it."""

    client: Any
    server: Any
    keylog: str
    client_hello: bytes  # the client's first flight
    server_first: bytes  # the server's flight, up to its Finished
    client_finish: bytes  # the client's bytes after the server's flight, before its data


def tls13_session(suite: int = 0x1301, client_random: bytes | None = None) -> Session:
    client_random = client_random or os.urandom(32)
    hash_length = hashlib.new(SUITES[suite][2]).digest_size
    secrets = {name: os.urandom(hash_length) for name in (
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
        "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0")}
    keylog = "".join(f"{name} {client_random.hex()} {secret.hex()}\n" for name, secret in secrets.items())
    server_hs = Tls13Sealer(suite, secrets["SERVER_HANDSHAKE_TRAFFIC_SECRET"])
    client_hs = Tls13Sealer(suite, secrets["CLIENT_HANDSHAKE_TRAFFIC_SECRET"])
    finished = handshake(20, os.urandom(hash_length))
    server_first = (server_hello(os.urandom(32), suite, tls13=True) + CHANGE_CIPHER_SPEC
                    + server_hs.seal(handshake(8, b"\x00\x00") + finished, 22))
    return Session(Tls13Sealer(suite, secrets["CLIENT_TRAFFIC_SECRET_0"]),
                   Tls13Sealer(suite, secrets["SERVER_TRAFFIC_SECRET_0"]), keylog,
                   client_hello(client_random, os.urandom(32), (suite,)), server_first,
                   CHANGE_CIPHER_SPEC + client_hs.seal(finished, 22))


def tls12_session(suite: int = 0xC02F, session_id: bytes = b"", master: bytes | None = None,
                  log: bool = True) -> Session:
    """A full TLS 1.2 handshake, or an abbreviated one when `log` is False (resumption)."""
    client_random, server_random = os.urandom(32), os.urandom(32)
    master = master or os.urandom(48)
    _cls, key_length, hash_name = SUITES[suite]
    iv_length = 12 if SUITES[suite][0] is ChaCha20Poly1305 else 4
    block = prf(hash_name, master, b"key expansion", server_random + client_random,
                2 * (key_length + iv_length))
    keys = [block[:key_length], block[key_length:2 * key_length]]
    ivs = [block[2 * key_length:2 * key_length + iv_length], block[2 * key_length + iv_length:]]
    client, server = Tls12Sealer(suite, keys[0], ivs[0]), Tls12Sealer(suite, keys[1], ivs[1])
    finished = handshake(20, os.urandom(12))
    server_first = server_hello(server_random, suite, session_id, tls13=False) + CHANGE_CIPHER_SPEC
    server_first += server.seal(finished, 22)
    keylog = f"CLIENT_RANDOM {client_random.hex()} {master.hex()}\n" if log else ""
    return Session(client, server, keylog, client_hello(client_random, session_id, (suite,)),
                   server_first, CHANGE_CIPHER_SPEC + client.seal(finished, 22))
