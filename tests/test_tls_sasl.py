"""SASL inside Kafka: mechanism and principal read, secrets masked in every output.

Frames are built by hand with struct (tests/craft.py); the real kafka-python
exchanges over TLS are in test_tls_recorded.py.
"""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from craft import Conversation, ethernet, kafka_request, kafka_response, pcap_bytes, records

from kdissect.cli import main
from kdissect.ingest.sasl import read_auth_bytes
from kdissect.pipeline import read_messages

CLIENT, SERVER = ("10.0.0.1", 40000), ("10.0.0.2", 9092)
PASSWORD = b"hunter2-very-secret"
PROOF = b"dHIzNjV0Ym5hc2RqZmhhc2tqZGZoa2FzamRmaGFzamtkZmg="


def string(value: bytes) -> bytes:
    return struct.pack(">h", len(value)) + value


def blob(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value


def sasl_capture(mechanism: bytes, tokens: list[tuple[bytes, bytes]]) -> bytes:
    """SaslHandshake v1, then SaslAuthenticate v1 exchanges of (client token, server token)."""
    talk = Conversation.between(CLIENT, SERVER)
    talk.handshake()
    talk.send(True, kafka_request(17, 1, 1, body=string(mechanism)))
    talk.send(False, kafka_response(1, struct.pack(">h", 0) + struct.pack(">i", 1) + string(mechanism)))
    for index, (client, server) in enumerate(tokens, 2):
        talk.send(True, kafka_request(36, 1, index, body=blob(client)))
        talk.send(False, kafka_response(index, struct.pack(">hh", 0, -1) + blob(server)
                                        + struct.pack(">q", 0)))
    return pcap_bytes(records(talk.packets, wrap=ethernet))


SCRAM = [(b"n,,n=bob,r=abc", b"r=abcdef,s=c2FsdA==,i=4096"),
         (b"c=biws,r=abcdef,p=" + PROOF, b"v=" + PROOF[::-1])]


def test_plain_names_the_principal_and_the_password_range() -> None:
    token = b"\0alice\0" + PASSWORD
    auth = read_auth_bytes(token, "PLAIN")
    assert auth.principal == "alice" and auth.step == "PLAIN credentials"
    assert [token[a:b] for a, b in auth.secrets] == [PASSWORD]


@pytest.mark.parametrize(("token", "step", "principal", "secret"), [
    (SCRAM[0][0], "SCRAM client-first", "bob", None),
    (SCRAM[0][1], "SCRAM server-first", None, None),
    (SCRAM[1][0], "SCRAM client-final", None, PROOF),
    (SCRAM[1][1], "SCRAM server-final", None, PROOF[::-1]),
])
def test_scram_steps_name_the_user_and_the_proofs(token: bytes, step: str, principal: str | None,
                                                 secret: bytes | None) -> None:
    auth = read_auth_bytes(token, "SCRAM-SHA-512")
    assert (auth.step, auth.principal) == (step, principal)
    assert [token[a:b] for a, b in auth.secrets] == ([secret] if secret else [])


def test_oauthbearer_token_is_the_secret() -> None:
    token = b"n,a=carol,\x01auth=Bearer eyJhbGciOi.payload.sig\x01\x01"
    auth = read_auth_bytes(token, "OAUTHBEARER")
    assert auth.principal == "carol"
    assert [token[a:b] for a, b in auth.secrets] == [b"eyJhbGciOi.payload.sig"]


def test_plain_password_is_masked_in_frames_and_trees_unless_shown() -> None:
    data = sasl_capture(b"PLAIN", [(b"\0alice\0" + PASSWORD, b"")])
    masked = list(read_messages(io.BytesIO(data)))
    shown = list(read_messages(io.BytesIO(data), show_secrets=True))
    request = masked[2]
    assert request.api_name == "SaslAuthenticate" and request.frame.data.endswith(b"alice\0" + b"*" * len(PASSWORD))
    assert PASSWORD not in json.dumps([str(n.message) for m in masked for n in m.all_notes()]).encode()
    assert all(PASSWORD not in bytes(str(m.tree()), "utf-8") for m in masked)
    assert shown[2].frame.data.endswith(PASSWORD)
    assert [n.message for n in request.all_notes()] == [
        "SASL PLAIN credentials, principal 'alice' (secret masked)"]
    assert [n.message for n in masked[0].all_notes()] == ["SASL mechanism 'PLAIN'"]


def test_scram_proof_and_signature_are_masked_in_requests_and_responses() -> None:
    messages = list(read_messages(io.BytesIO(sasl_capture(b"SCRAM-SHA-256", SCRAM))))
    assert [m.correlation_id for m in messages] == [1, 1, 2, 2, 3, 3]
    final, signature = messages[4], messages[5]
    assert final.frame.data.endswith(b",p=" + b"*" * len(PROOF))
    assert b"v=" + b"*" * len(PROOF) in signature.frame.data
    assert all(PROOF not in m.frame.data and PROOF[::-1] not in m.frame.data for m in messages)
    assert "principal 'bob'" in str(messages[2].all_notes())


def test_cli_json_and_hex_never_show_the_password(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sasl.pcap"
    path.write_bytes(sasl_capture(b"PLAIN", [(b"\0alice\0" + PASSWORD, b"")]))
    for options in (["-T", "json"], ["-x", "-V"]):
        assert main([str(path), *options]) == 0
        out = capsys.readouterr().out
        assert "hunter2" not in out and PASSWORD not in dumped_bytes(out)
    assert main([str(path), "-x", "--show-secrets"]) == 0
    assert PASSWORD in dumped_bytes(capsys.readouterr().out)


def dumped_bytes(text: str) -> bytes:
    """The bytes of every hex dump row (`0010  00 01 ...  ascii`) in the output."""
    rows = [line[6:55].split() for line in text.splitlines()
            if len(line) > 6 and line[:4].isalnum() and line[4:6] == "  "]
    return bytes(int(cell, 16) for row in rows for cell in row if len(cell) == 2)


def test_cryptography_stays_off_the_start_up_path() -> None:
    code = "import sys, kdissect.cli, kdissect.pipeline; print('cryptography' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
