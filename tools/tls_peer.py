"""The scripted peer behind TLS (Python's ssl, OpenSSL underneath), with SASL PLAIN and SCRAM.

``TlsPeer`` wraps every accepted connection of a ``ScriptedPeer`` in a server-side
TLS session with a throwaway self-signed certificate made here with
``cryptography``. ``SaslStory`` puts SaslHandshake (17) and SaslAuthenticate (36)
in front of another story: PLAIN checks ``authzid NUL authcid NUL passwd``, SCRAM
is the server side of RFC 5802 with a fixed salt and nonce, so that the same
exchange, replayed, puts the same bytes on the wire. Its answers are encoded by
kio like every other answer of the scripted peer.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import ipaddress
import socket
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tools.kio_codec import Request
from tools.scripted_peer import LOOPBACK, ScriptedPeer, Story

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
SCRAM_ITERATIONS = 4096
SCRAM_SALT = b"kdissect-salt-16"
SCRAM_SERVER_NONCE = "kdissectserver"
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """(certificate, key) PEM files for 127.0.0.1, valid for a day, made now."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kdissect test peer")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(LOOPBACK)), x509.DNSName("localhost")]),
            critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "peer-cert.pem", directory / "peer-key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def server_context(certificate: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    return context


def client_context(keylog: Path, version: str, ciphers: str | None = None) -> ssl.SSLContext:
    """A client context writing its session keys to ``keylog``; ``version`` "1.2" or "1.3"."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # a throwaway certificate: what matters is the traffic
    chosen = ssl.TLSVersion.TLSv1_2 if version == "1.2" else ssl.TLSVersion.TLSv1_3
    context.minimum_version = context.maximum_version = chosen
    if ciphers:
        context.set_ciphers(ciphers)
    context.keylog_filename = str(keylog)
    return context


class TlsPeer(ScriptedPeer):
    """A scripted peer whose connections are TLS: the handshake runs in each serving thread."""

    def __init__(self, story: Story, context: ssl.SSLContext, port: int = 0) -> None:
        super().__init__(story, port)
        self.context = context

    def _serve(self, connection: socket.socket, index: int) -> None:
        try:
            wrapped = self.context.wrap_socket(connection, server_side=True)
        except (OSError, ssl.SSLError):
            connection.close()
            return
        self._connections[index] = wrapped
        super()._serve(wrapped, index)


class SaslStory:
    """SASL authentication in front of another story's answers."""

    def __init__(self, inner: Any, mechanism: str, user: str, password: str) -> None:
        self.inner, self.mechanism = inner, mechanism
        self.user, self.password = user, password
        self.scram_state: dict[str, bytes] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def answer(self, request: Request) -> Mapping[str, Any] | None:
        if request.api_key == SASL_HANDSHAKE:
            return {"error_code": 0, "mechanisms": [self.mechanism]}
        if request.api_key == SASL_AUTHENTICATE:
            return self.authenticate(bytes(request.body.auth_bytes))
        values = self.inner.answer(request)
        if values is not None and request.api_key == 18:
            values = dict(values)
            values["api_keys"] = [*values["api_keys"],
                                  {"api_key": SASL_HANDSHAKE, "min_version": 0, "max_version": 1},
                                  {"api_key": SASL_AUTHENTICATE, "min_version": 0,
                                   "max_version": 2}]
        return values

    def authenticate(self, token: bytes) -> dict[str, Any]:
        if self.mechanism == "PLAIN":
            fields = token.split(b"\0")
            good = len(fields) == 3 and fields[1:] == [self.user.encode(), self.password.encode()]
            return _sasl_result(b"" if good else None)
        return _sasl_result(self.scram(token))

    def scram(self, token: bytes) -> bytes | None:
        """The server side of SCRAM-SHA-256/512: server-first, then server-final."""
        hash_name = "sha512" if self.mechanism.endswith("512") else "sha256"
        text = token.decode()
        if text.startswith("n,,"):
            bare = text[3:]
            nonce = dict(part.split("=", 1) for part in bare.split(","))["r"] + SCRAM_SERVER_NONCE
            first = (f"r={nonce},s={base64.b64encode(SCRAM_SALT).decode()},"
                     f"i={SCRAM_ITERATIONS}")
            self.scram_state = {"bare": bare.encode(), "first": first.encode()}
            return first.encode()
        final_bare, _, proof = text.rpartition(",p=")
        message = b",".join([self.scram_state["bare"], self.scram_state["first"],
                             final_bare.encode()])
        salted = hashlib.pbkdf2_hmac(hash_name, self.password.encode(), SCRAM_SALT,
                                     SCRAM_ITERATIONS)
        client_key = hmac.digest(salted, b"Client Key", hash_name)
        signature = hmac.digest(hashlib.new(hash_name, client_key).digest(), message, hash_name)
        if bytes(a ^ b for a, b in zip(client_key, signature, strict=True)) != base64.b64decode(proof):
            return None
        server_key = hmac.digest(salted, b"Server Key", hash_name)
        return b"v=" + base64.b64encode(hmac.digest(server_key, message, hash_name))


def _sasl_result(auth_bytes: bytes | None) -> dict[str, Any]:
    if auth_bytes is None:
        return {"error_code": SASL_AUTHENTICATION_FAILED, "error_message": "bad credentials",
                "auth_bytes": b"", "session_lifetime": 0}
    return {"error_code": 0, "error_message": None, "auth_bytes": auth_bytes,
            "session_lifetime": 0}
