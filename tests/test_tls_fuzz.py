"""Fuzzing TLS records: lengths, truncation, bad tags, random cuts and bytes, never a crash.

Whatever is done to the records, decryption must not raise, must say at most one
thing per connection, and must never invent a message: every message that comes
out is one the clear text has, byte for byte.
"""

from __future__ import annotations

import io
import struct

from craft import Conversation, ethernet, pcap_bytes, records
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tls import REQUESTS, RESPONSES, clear
from tls_craft import tls12_session, tls13_session

from kdissect.ingest.tls import KeyLog
from kdissect.notes import Note
from kdissect.pipeline import read_messages

CLIENT, SERVER = ("10.0.0.1", 40000), ("10.0.0.2", 9092)


def flights(tls13: bool) -> tuple[list[tuple[bool, bytes]], str]:
    """The byte flights of one session, in order, and its key log."""
    session = tls13_session() if tls13 else tls12_session()
    out = [(True, session.client_hello), (False, session.server_first),
           (True, session.client_finish)]
    for request, response in zip(REQUESTS, RESPONSES, strict=True):
        out += [(True, session.client.seal(request)), (False, session.server.seal(response))]
    return out, session.keylog


SESSIONS = {True: flights(True), False: flights(False)}

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(1, 255)),
    st.tuples(st.just("length"), st.integers(0, 10_000), st.integers(0, 0xFFFF)),
    st.tuples(st.just("truncate"), st.integers(0, 10_000), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.integers(0, 255)),
)


def mutate(flight: bytes, kind: str, position: int, value: int) -> bytes:
    data = bytearray(flight)
    position %= max(len(data), 1)
    if kind == "flip":
        data[position] ^= value
    elif kind == "length" and len(data) >= 5:
        record_start = _record_start(data, position)
        struct.pack_into(">H", data, record_start + 3, value)
    elif kind == "truncate":
        del data[position:]
    elif kind == "insert":
        data[position:position] = bytes([value]) * 3
    return bytes(data)


def _record_start(data: bytearray, position: int) -> int:
    """The start of the record containing `position` (records back to back from 0)."""
    start = 0
    while start + 5 <= len(data):
        end = start + 5 + struct.unpack_from(">H", data, start + 3)[0]
        if end > position or end + 5 > len(data):
            return start
        start = end
    return 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tls13=st.booleans(), target=st.integers(0, 10), change=mutation,
       chunk=st.sampled_from([None, 50, 700]))
def test_mutated_records_never_crash_and_invent_no_message(
        tls13: bool, target: int, change: tuple[str, int, int], chunk: int | None) -> None:
    steps, keylog = SESSIONS[tls13]
    talk = Conversation.between(CLIENT, SERVER)
    talk.handshake()
    for index, (from_client, flight) in enumerate(steps):
        data = mutate(flight, *change) if index == target else flight
        if data:
            talk.send(from_client, data, chunk=chunk)
    talk.close()
    problems: list[Note] = []
    messages = list(read_messages(io.BytesIO(pcap_bytes(records(talk.packets, wrap=ethernet))),
                                  report=problems.append, tls_keylog=KeyLog.from_text(keylog)))
    known = set(clear())  # (a mutated ClientHello may no longer be TLS: then it is framed as is)
    decrypted = [m for m in messages if m.frame.connection.tls and m.frame.complete]
    assert all((m.is_request, m.frame.data) in known for m in decrypted)
    assert len([p for p in problems if "TLS" in p.message]) <= 1


@settings(max_examples=40, deadline=None)
@given(noise=st.binary(min_size=0, max_size=400), head=st.sampled_from(
    [b"\x16\x03\x01", b"\x16\x03\x03", b"\x17\x03\x03", b"\x15\x03\x03", b"\x14\x03\x03"]))
def test_random_bytes_after_a_tls_record_header_never_crash(noise: bytes, head: bytes) -> None:
    talk = Conversation.between(CLIENT, SERVER)
    talk.handshake()
    talk.send(True, head + noise)
    talk.send(False, head + noise[::-1])
    problems: list[Note] = []
    keys = KeyLog.from_text(SESSIONS[True][1])
    messages = list(read_messages(io.BytesIO(pcap_bytes(records(talk.packets, wrap=ethernet))),
                                  report=problems.append, tls_keylog=keys))
    assert messages == [] and len(problems) <= 1
