"""TLS decryption on records sealed in the test with `cryptography` (see tls_craft.py).

The acceptance tests on real OpenSSL traffic are in test_tls_recorded.py; these
pin the mechanics: key derivation against RFC 8448's numbers, record reassembly
across and within segments, TLS 1.2 and 1.3 suites, KeyUpdate, resumption, and
one clear note per connection for everything that cannot be decrypted.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from craft import Conversation, ethernet, metadata_request, metadata_response, pcap_bytes, records
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand
from tls_craft import Session, server_hello, tls12_session, tls13_session

from kdissect.cli import main
from kdissect.ingest.tls import HELLO_RETRY, KeyLog, KeyLogError, hkdf_expand_label, load_keylog
from kdissect.notes import Note
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages

CLIENT, SERVER = ("10.0.0.1", 40000), ("10.0.0.2", 9092)
REQUESTS = [metadata_request(n, b"topic-%d" % n) for n in range(1, 5)]
RESPONSES = [metadata_response(n, 300 + n) for n in range(1, 5)]


def conversation(session: Session, *, client: tuple[str, int] = CLIENT,
                 server: tuple[str, int] = SERVER, chunk: int | None = None,
                 requests: list[bytes] = REQUESTS, responses: list[bytes] = RESPONSES) -> Conversation:
    """A TCP connection: the handshake bytes, then each request and response in its own record."""
    talk = Conversation.between(client, server)
    talk.handshake()
    talk.send(True, session.client_hello, chunk=chunk)
    talk.send(False, session.server_first, chunk=chunk)
    talk.send(True, session.client_finish, chunk=chunk)
    for request, response in zip(requests, responses, strict=True):
        talk.send(True, session.client.seal(request), chunk=chunk)
        talk.send(False, session.server.seal(response), chunk=chunk)
    return talk


def decode(*talks: Conversation, keylog: str | None) -> tuple[list[tuple[bool, bytes]], list[str]]:
    messages, problems = decode_messages(*talks, keylog=keylog)
    return [(m.is_request, m.frame.data) for m in messages], problems


def decode_messages(*talks: Conversation, keylog: str | None) -> tuple[list[Message], list[str]]:
    packets = [packet for talk in talks for packet in talk.packets]
    problems: list[Note] = []
    keys = None if keylog is None else KeyLog.from_text(keylog)
    messages = list(read_messages(io.BytesIO(pcap_bytes(records(packets, wrap=ethernet))),
                                  report=problems.append, tls_keylog=keys))
    return messages, [str(p) for p in problems]


def clear(requests: list[bytes] = REQUESTS, responses: list[bytes] = RESPONSES) -> list[tuple[bool, bytes]]:
    return [item for pair in zip(requests, responses, strict=True)
            for item in ((True, pair[0]), (False, pair[1]))]


# --- key derivation ---

def test_hkdf_expand_label_gives_rfc8448_handshake_key_and_iv() -> None:
    # RFC 8448, "Simple 1-RTT Handshake": the server handshake traffic secret and its keys.
    secret = bytes.fromhex("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38")
    assert hkdf_expand_label("sha256", secret, b"key", b"", 16).hex() == "3fce516009c21727d0f2e4e86ee403bc"
    assert hkdf_expand_label("sha256", secret, b"iv", b"", 12).hex() == "5d313eb2671276ee13000b30"


@pytest.mark.parametrize("length", [12, 32, 48, 100])
def test_hkdf_expand_label_matches_cryptography_hkdf_expand(length: int) -> None:
    secret, label = os.urandom(48), b"traffic upd"
    info = length.to_bytes(2, "big") + bytes([6 + len(label)]) + b"tls13 " + label + b"\x00"
    expected = HKDFExpand(hashes.SHA384(), length, info).derive(secret)
    assert hkdf_expand_label("sha384", secret, label, b"", length) == expected


# --- the key log ---

def test_key_log_skips_comments_and_malformed_lines_and_never_shows_secrets(tmp_path: Path) -> None:
    random, secret = os.urandom(32), os.urandom(48)
    path = tmp_path / "keys.log"
    text = (f"# comment\n\nCLIENT_RANDOM {random.hex()} {secret.hex()}\nCLIENT_RANDOM zz 00\n"
            f"BOGUS_LABEL {random.hex()} {secret.hex()}\nCLIENT_RANDOM {random.hex()[:10]} 00\n")
    path.write_text(text)
    before = path.stat()
    keys = load_keylog(path)
    assert keys.secrets(random) == {"CLIENT_RANDOM": secret}
    assert keys.skipped_lines == 3
    assert secret.hex() not in repr(keys) and random.hex() not in repr(keys)
    assert path.read_text() == text and path.stat().st_mtime_ns == before.st_mtime_ns


def test_key_log_that_cannot_be_read_is_a_key_log_error(tmp_path: Path) -> None:
    with pytest.raises(KeyLogError, match=r"missing\.log"):
        load_keylog(tmp_path / "missing.log")


def test_key_log_read_again_when_it_grows(tmp_path: Path) -> None:
    path = tmp_path / "keys.log"
    path.write_text("")
    keys = load_keylog(path)
    random, secret = os.urandom(32), os.urandom(48)
    path.write_text(f"CLIENT_RANDOM {random.hex()} {secret.hex()}\n")
    assert keys.secrets(random) == {"CLIENT_RANDOM": secret}


# --- decryption ---

@pytest.mark.parametrize("suite", [0x1301, 0x1302, 0x1303])
def test_tls13_suites_decrypt_to_the_clear_messages(suite: int) -> None:
    session = tls13_session(suite)
    messages, problems = decode(conversation(session), keylog=session.keylog)
    assert messages == clear() and problems == []


@pytest.mark.parametrize("suite", [0xC02F, 0xC030, 0xCCA8])
def test_tls12_suites_decrypt_to_the_clear_messages(suite: int) -> None:
    session = tls12_session(suite)
    messages, problems = decode(conversation(session), keylog=session.keylog)
    assert messages == clear() and problems == []


@pytest.mark.parametrize("chunk", [1, 7, 100])
def test_records_spanning_segments_decrypt(chunk: int) -> None:
    session = tls13_session()
    messages, problems = decode(conversation(session, chunk=chunk), keylog=session.keylog)
    assert messages == clear() and problems == []


def test_several_records_in_one_segment_and_a_message_across_records() -> None:
    session = tls13_session()
    talk = Conversation.between(CLIENT, SERVER)
    talk.handshake()
    talk.send(True, session.client_hello)
    talk.send(False, session.server_first)
    talk.send(True, session.client_finish)
    first, second = REQUESTS[0], REQUESTS[1]
    talk.send(True, session.client.seal(first[:5]) + session.client.seal(first[5:] + second[:20]))
    talk.send(True, session.client.seal(second[20:]))
    talk.send(False, session.server.seal(RESPONSES[0]) + session.server.seal(RESPONSES[1]))
    messages, problems = decode(talk, keylog=session.keylog)
    assert sorted(messages) == sorted(clear(REQUESTS[:2], RESPONSES[:2])) and problems == []


def test_key_update_switches_to_the_next_traffic_secret() -> None:
    session = tls13_session(0x1302)
    talk = Conversation.between(CLIENT, SERVER)
    talk.handshake()
    talk.send(True, session.client_hello)
    talk.send(False, session.server_first)
    talk.send(True, session.client_finish)
    for index, (request, response) in enumerate(zip(REQUESTS, RESPONSES, strict=True)):
        if index == 2:
            talk.send(True, session.client.key_update())
            talk.send(False, session.server.key_update())
        talk.send(True, session.client.seal(request, padding=index))
        talk.send(False, session.server.seal(response))
    messages, problems = decode(talk, keylog=session.keylog)
    assert messages == clear() and problems == []


def test_tls12_resumption_reuses_the_master_secret_of_the_session_id() -> None:
    session_id = os.urandom(32)
    full = tls12_session(session_id=session_id)
    resumed = tls12_session(session_id=session_id, master=_master(full), log=False)
    messages, problems = decode(conversation(full), conversation(resumed, client=("10.0.0.1", 40001)),
                                keylog=full.keylog)
    assert messages == clear() + clear() and problems == []


def _master(session: Session) -> bytes:
    return bytes.fromhex(session.keylog.split()[2])


def test_kafka_over_tls_on_any_port_is_found_in_the_plaintext() -> None:
    session = tls13_session()
    talk = conversation(session, server=("10.0.0.2", 19093))
    messages, problems = decode(talk, keylog=session.keylog)
    assert messages == clear() and problems == []


# --- what cannot be decrypted: one note per connection ---

def test_without_key_log_each_tls_connection_is_one_no_keys_note() -> None:
    talks = [conversation(tls13_session(), client=("10.0.0.1", 40000 + n)) for n in range(3)]
    messages, problems = decode(*talks, keylog=None)
    assert messages == []
    assert problems == [f"warn: 10.0.0.1:{40000 + n} <-> 10.0.0.2:9092: TLS, no keys (no key log given)"
                        for n in range(3)]


def test_with_keys_of_other_sessions_each_connection_is_one_no_keys_note() -> None:
    talks = [conversation(tls13_session(), client=("10.0.0.1", 40000)),
             conversation(tls12_session(), client=("10.0.0.1", 40001))]
    messages, problems = decode(*talks, keylog=tls13_session().keylog + tls12_session().keylog)
    assert messages == []
    assert [p.split(": ", 1)[1].split(" (client random")[0] for p in problems] == [
        "10.0.0.1:40000 <-> 10.0.0.2:9092: TLS, no keys for this TLS 1.3 session in the key log",
        "10.0.0.1:40001 <-> 10.0.0.2:9092: TLS, no keys for this TLS 1.2 session in the key log"]


def test_tls_on_another_port_without_keys_is_silent() -> None:
    talk = conversation(tls13_session(), server=("10.0.0.2", 443))
    assert decode(talk, keylog=tls13_session().keylog) == ([], [])


def second_request_damaged(session: Session, damage: Callable[[bytearray], None]) -> Conversation:
    """A TLS conversation whose second request record is changed by `damage` after sealing."""
    talk = Conversation.between(CLIENT, SERVER)
    talk.handshake()
    talk.send(True, session.client_hello)
    talk.send(False, session.server_first)
    talk.send(True, session.client_finish)
    for index, (request, response) in enumerate(zip(REQUESTS, RESPONSES, strict=True)):
        sealed = bytearray(session.client.seal(request))
        if index == 1:
            damage(sealed)
        talk.send(True, bytes(sealed))
        talk.send(False, session.server.seal(response))
    return talk


def test_tampered_record_is_one_note_and_the_following_records_still_decrypt() -> None:
    session = tls13_session()

    def flip(sealed: bytearray) -> None:
        sealed[10] ^= 0x01

    messages, problems = decode(second_request_damaged(session, flip), keylog=session.keylog)
    lost = clear()[2]
    assert [m for m in messages if m[0]] == [m for m in clear() if m[0] and m != lost]
    assert [m for m in messages if not m[0]] == [m for m in clear() if not m[0]]
    assert len(problems) == 1 and "fails authentication" in problems[0]
    assert "following records are still tried" in problems[0]


def test_unsupported_suite_is_one_note() -> None:
    session = tls12_session()
    first = bytearray(session.server_first)
    position = first.index(b"\xc0\x2f", 40)  # the suite in the ServerHello
    first[position:position + 2] = b"\x00\x3c"  # TLS_RSA_WITH_AES_128_CBC_SHA256
    talk = conversation(Session(session.client, session.server, session.keylog,
                                session.client_hello, bytes(first), session.client_finish))
    messages, problems = decode(talk, keylog=session.keylog)
    assert messages == []
    assert len(problems) == 1 and "cipher suite 0x003c is not supported" in problems[0]


def test_records_after_lost_bytes_are_found_again_and_decrypt() -> None:
    session, other = tls13_session(), tls13_session()
    talk = conversation(session)
    lost = 9  # the second response's record (3 TCP handshake packets, 3 TLS flights, 3 more)
    talk.packets = [packet for index, packet in enumerate(talk.packets) if index != lost]
    fine = conversation(other, client=("10.0.0.1", 40001))
    found, problems = decode_messages(talk, fine, keylog=session.keylog + other.keylog)
    expected = [m for m in clear() if m != (False, RESPONSES[1])]
    # each direction of each connection in its own order (what comes after a hole is held
    # until the hole is known lost, so it may come out after later bytes of the other side)
    def streams(items: list[tuple[bool, bytes]]) -> list[list[bytes]]:
        return [[data for is_request, data in items if is_request == side] for side in (True, False)]

    by_connection = [streams([(m.is_request, m.frame.data) for m in found
                              if m.frame.connection.client[1] == port]) for port in (40000, 40001)]
    assert by_connection == [streams(expected), streams(clear())]
    assert len(problems) == 1 and "found again by trying the sequence numbers" in problems[0]


@pytest.mark.parametrize("suite", [0xC02F, 0xCCA8])
def test_tls12_records_after_lost_bytes_are_found_again(suite: int) -> None:
    session = tls12_session(suite)
    requests = [metadata_request(n, b"t" * n) for n in range(1, 12)]
    responses = [metadata_response(n, 50 + n) for n in range(1, 12)]
    talk = conversation(session, requests=requests, responses=responses)
    dropped = {8, 10, 12}  # three requests' records in a row
    talk.packets = [packet for index, packet in enumerate(talk.packets) if index not in dropped]
    messages, problems = decode(talk, keylog=session.keylog)
    expected = [m for m in clear(requests, responses) if m not in {(True, requests[n]) for n in (1, 2, 3)}]
    assert sorted(messages) == sorted(expected)
    assert len(problems) == 1


def test_corrupt_record_length_loses_sync_and_the_next_records_are_found() -> None:
    session = tls13_session()

    def bad_length(sealed: bytearray) -> None:
        sealed[3:5] = b"\xff\xff"  # a length no record may have

    messages, problems = decode(second_request_damaged(session, bad_length), keylog=session.keylog)
    assert [m for m in messages if m[0]] == [(True, REQUESTS[n]) for n in (0, 2, 3)]
    assert [m for m in messages if not m[0]] == [(False, r) for r in RESPONSES]
    assert len(problems) == 1 and "no TLS record header" in problems[0]


def test_connection_seen_after_its_handshake_is_one_no_keys_note() -> None:
    session = tls13_session()
    talk = Conversation.between(CLIENT, SERVER)  # no SYN, no hello: the middle of a connection
    talk.send(True, session.client.seal(REQUESTS[0]))
    talk.send(False, session.server.seal(RESPONSES[0]))
    messages, problems = decode(talk, keylog=session.keylog)
    assert messages == []
    assert problems == ["warn: 10.0.0.1:40000 <-> 10.0.0.2:9092: TLS, no keys: the capture starts "
                        "after the TLS handshake (keys are found by the ClientHello's random); "
                        "not decrypted"]


def test_hello_retry_request_is_not_taken_for_the_server_hello() -> None:
    session = tls13_session()
    retry = server_hello(HELLO_RETRY, 0x1301, tls13=True)
    talk = Conversation.between(CLIENT, SERVER)
    talk.handshake()
    talk.send(True, session.client_hello)
    talk.send(False, retry)
    talk.send(True, session.client_hello)  # the second ClientHello keeps the random
    talk.send(False, session.server_first)
    talk.send(True, session.client_finish)
    for request, response in zip(REQUESTS, RESPONSES, strict=True):
        talk.send(True, session.client.seal(request))
        talk.send(False, session.server.seal(response))
    messages, problems = decode(talk, keylog=session.keylog)
    assert messages == clear() and problems == []


def test_cli_reads_several_key_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tls13_session(), tls12_session()
    talks = [conversation(first), conversation(second, client=("10.0.0.1", 40001))]
    path = tmp_path / "tls.pcap"
    path.write_bytes(pcap_bytes(records([p for t in talks for p in t.packets], wrap=ethernet)))
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    logs[0].write_text(first.keylog)
    logs[1].write_text(second.keylog)
    assert main([str(path), "--tls-keylog", str(logs[0]), "--tls-keylog", str(logs[1])]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 2 * len(clear()) and all("[tls]" in line for line in lines)
    assert captured.err == ""
    # a usage error, one line, before any capture is read
    assert main([str(path), "--tls-keylog", str(tmp_path / "missing.log")]) == 2
    assert "missing.log" in capsys.readouterr().err
