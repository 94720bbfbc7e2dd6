"""Real TLS: kafka-python over Python's ssl (OpenSSL) to the scripted peer, recorded with tcpdump.

Each TLS recording has a clear-text twin: the same client calls on the same peer,
whose answers (its clock, SCRAM salt and nonces included) are fixed. Decrypted
with the client's key log, every message must equal its twin's, byte for byte
and tree for tree; pairing and latency work as on clear text; tshark, given the
same key log, finds the same Kafka messages in the same packets.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kdissect.cli import main
from kdissect.notes import Note
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages
from kdissect.present.filter import compile_filter
from kdissect.present.records import tree_record
from tests.conftest import ROOT, missing

DESCRIBE_PRODUCERS, SASL_AUTHENTICATE = 61, 36
RUNS: dict[str, tuple[str, str | None, str | None]] = {
    # name: (TLS version, SASL mechanism, OpenSSL cipher list; for TLS 1.3 its suites)
    "tls12": ("1.2", None, None),
    "tls13": ("1.3", None, None),  # OpenSSL's choice: TLS_AES_256_GCM_SHA384
    "tls12_chacha": ("1.2", None, "ECDHE-ECDSA-CHACHA20-POLY1305"),
    "tls12_aes128": ("1.2", "SCRAM-SHA-256", "ECDHE-ECDSA-AES128-GCM-SHA256"),
    "tls13_chacha": ("1.3", None, "TLS_CHACHA20_POLY1305_SHA256"),
    "tls13_aes128": ("1.3", "PLAIN", "TLS_AES_128_GCM_SHA256"),
    "tls12_plain": ("1.2", "PLAIN", None),
    "tls13_scram": ("1.3", "SCRAM-SHA-256", None),
}


class Recordings:
    """Each run recorded once per test module, on demand, all on one port (the peer
    tells its port in Metadata responses, which twins must share)."""

    def __init__(self, directory: Path) -> None:
        from tools.recording import free_port

        self.directory = directory
        self.port = free_port()
        self.done: dict[str, dict[str, Any]] = {}

    def get(self, name: str, tls: str | None, sasl: str | None,
            ciphers: str | None = None) -> dict[str, Any]:
        if name not in self.done:
            from tools.record_tls import record
            from tools.recording import RecordingError

            pcap = self.directory / f"{name}.pcap"
            for attempt in range(3):  # a busy machine can make the kernel drop packets
                try:
                    if tls == "1.3" and ciphers:
                        result = self.record_elsewhere(pcap, sasl, ciphers)
                    else:
                        result = record(pcap, tls=tls, sasl=sasl, ciphers=ciphers, port=self.port)
                    break
                except (RecordingError, subprocess.CalledProcessError):
                    if attempt == 2:
                        raise
            self.done[name] = {**result, "pcap": pcap}
        return self.done[name]

    def record_elsewhere(self, pcap: Path, sasl: str | None, suites: str) -> dict[str, Any]:
        """TLS 1.3 suites are OpenSSL configuration: recorded by a process of its own."""
        from tools.record_tls import tls13_suites_config

        config = pcap.with_suffix(".cnf")
        config.write_text(tls13_suites_config(suites))
        command = [sys.executable, "-m", "tools.record_tls", str(pcap), "--tls", "1.3",
                   "--port", str(self.port), *(["--sasl", sasl] if sasl else [])]
        subprocess.run(command, check=True, capture_output=True, timeout=120, cwd=ROOT,
                       env={**os.environ, "OPENSSL_CONF": str(config)})
        sidecar = json.loads(pcap.with_suffix(".json").read_text())
        return {**sidecar, "keylog": pcap.with_suffix(".keys")}

    def run(self, name: str) -> dict[str, Any]:
        return self.get(name, *RUNS[name])

    def twin(self, name: str) -> dict[str, Any]:
        sasl = RUNS[name][1]
        return self.get(f"clear_{sasl or 'none'}", None, sasl)


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> Recordings:
    if shutil.which("tcpdump") is None:
        missing("tcpdump is not installed")
    if os.geteuid() != 0:
        missing("recording on loopback with tcpdump needs root")
    return Recordings(tmp_path_factory.mktemp("tls"))


def decode(pcap: Path, keylog: Any = None, ports: list[int] | None = None
           ) -> tuple[list[Message], list[str]]:
    problems: list[Note] = []
    messages = list(read_messages(pcap, ports=[9092, *(ports or [])], report=problems.append,
                                  tls_keylog=keylog))
    return messages, [str(p) for p in problems]


def view(message: Message) -> tuple[Any, ...]:
    """Everything a message says but where and when it was captured."""
    return (message.is_request, message.api_key, message.api_version, message.correlation_id,
            message.client_id, message.frame.data, message.frame.complete,
            tree_record(message.tree()), [str(n) for n in message.all_notes()])


def by_connection(messages: list[Message]) -> list[list[tuple[Any, ...]]]:
    connections: dict[int, list[tuple[Any, ...]]] = {}
    for message in messages:
        connections.setdefault(message.frame.connection.index, []).append(view(message))
    return [connections[index] for index in sorted(connections)]


@pytest.mark.broker
@pytest.mark.parametrize("name", list(RUNS))
def test_decrypted_messages_equal_the_clear_text_twin(recordings: Recordings, name: str) -> None:
    run, twin = recordings.run(name), recordings.twin(name)
    messages, problems = decode(run["pcap"], run["keylog"])
    clear, clear_problems = decode(twin["pcap"])
    assert problems == clear_problems == []
    assert messages and by_connection(messages) == by_connection(clear)
    assert all(m.frame.connection.tls for m in messages)
    assert not any(m.frame.connection.tls for m in clear)
    tls, clear_text = compile_filter("tls"), compile_filter("!tls")  # the flag, bare
    assert all(map(tls, messages)) and not any(map(clear_text, messages))
    assert all(map(clear_text, clear)) and not any(map(tls, clear))
    requests = [m for m in messages if m.is_request]
    assert [(m.api_key, m.api_version, m.correlation_id) for m in requests] == [
        (e["api_key"], e["api_version"], e["correlation_id"]) for e in run["exchanges"]]
    for request in requests:  # pairing and latency, as on clear text
        response = request.pair
        assert response is not None and response.pair is request
        assert response.latency is not None and 0 < response.latency < 5
    assert sum(m.api_key == DESCRIBE_PRODUCERS for m in requests) == 3
    suites = set(tshark_suites(run["pcap"]))  # what was tested, as tshark reads it
    assert len(suites) == 1 and (RUNS[name][2] is None or suites == {RUNS[name][2]}), suites


def tshark_suites(pcap: Path) -> list[str]:
    """The cipher suite of each ServerHello, by name."""
    if shutil.which("tshark") is None:
        missing("tshark is not installed")
    found = subprocess.run(["tshark", "-r", str(pcap), "-Y", "tls.handshake.type == 2",
                            "-T", "fields", "-e", "tls.handshake.ciphersuite"],
                           capture_output=True, text=True, check=True, timeout=120).stdout
    return [SUITE_NAMES.get(int(code, 16), code) for code in found.split()]


SUITE_NAMES = {0x1301: "TLS_AES_128_GCM_SHA256", 0x1302: "TLS_AES_256_GCM_SHA384",
               0x1303: "TLS_CHACHA20_POLY1305_SHA256",
               0xC02B: "ECDHE-ECDSA-AES128-GCM-SHA256", 0xC02C: "ECDHE-ECDSA-AES256-GCM-SHA384",
               0xCCA9: "ECDHE-ECDSA-CHACHA20-POLY1305"}


@pytest.mark.broker
@pytest.mark.parametrize("name", ["tls12_plain", "tls13_scram"])
def test_sasl_secrets_are_masked_unless_asked_for(recordings: Recordings, name: str) -> None:
    from tools.record_tls import PASSWORD, USER

    run = recordings.run(name)
    masked, _ = decode(run["pcap"], run["keylog"])
    problems: list[Note] = []
    shown = list(read_messages(run["pcap"], tls_keylog=run["keylog"], show_secrets=True,
                               report=problems.append))
    auth = [m for m in masked if m.api_key == SASL_AUTHENTICATE]
    notes = [n.message for m in auth for n in m.all_notes()]
    assert any(f"principal '{USER}'" in text for text in notes)
    assert all(PASSWORD.encode() not in m.frame.data for m in masked)
    revealed = {m.number: m.frame.data for m in shown}
    changed = [m for m in masked if m.frame.data != revealed[m.number]]
    assert changed and all(m.api_key == SASL_AUTHENTICATE for m in changed)
    for message in changed:  # only the secret's bytes differ, and they are stars
        plain = revealed[message.number]
        differ = [i for i, (a, b) in enumerate(zip(message.frame.data, plain, strict=True)) if a != b]
        start, end = differ[0], differ[-1] + 1
        assert message.frame.data[start:end] == b"*" * (end - start)
        if name == "tls12_plain":
            assert plain[start:end] == PASSWORD.encode()
        else:  # the SCRAM proof and the server's signature, base64
            assert plain[start - 2:start] in (b"p=", b"v=") and end - start == 44


@pytest.mark.broker
def test_without_key_log_each_connection_is_one_no_keys_note(recordings: Recordings) -> None:
    run = recordings.run("tls13")
    messages, problems = decode(run["pcap"], ports=[run["port"]])
    assert messages == []
    assert len(problems) == 2  # the bootstrap connection and the node connection
    assert all(p.endswith(f"127.0.0.1:{run['port']}: TLS, no keys (no key log given)")
               for p in problems)


@pytest.mark.broker
def test_with_a_key_log_of_other_sessions_each_connection_is_one_no_keys_note(
        recordings: Recordings) -> None:
    run, other = recordings.run("tls12"), recordings.run("tls13")
    messages, problems = decode(run["pcap"], other["keylog"], ports=[run["port"]])
    assert messages == [] and len(problems) == 2
    assert all("TLS, no keys for this TLS 1.2 session in the key log" in p for p in problems)


def flip_last_byte(pcap: Path, packet: int, output: Path) -> None:
    """A copy of a pcap whose packet number `packet` has its last byte changed."""
    data = bytearray(pcap.read_bytes())
    position, number = 24, 0
    while position < len(data):
        length = struct.unpack_from("<I", data, position + 8)[0]
        number += 1
        if number == packet:
            data[position + 16 + length - 1] ^= 0x5A
        position += 16 + length
    output.write_bytes(bytes(data))


@pytest.mark.broker
def test_a_tampered_record_is_one_note_and_the_following_records_decode(
        recordings: Recordings, tmp_path: Path) -> None:
    run = recordings.run("tls13")
    messages, _ = decode(run["pcap"], run["keylog"])
    target = [m for m in messages if m.api_key == DESCRIBE_PRODUCERS and m.is_request][1]
    tampered = tmp_path / "tampered.pcap"
    flip_last_byte(run["pcap"], target.frame.last_packet, tampered)
    after, problems = decode(tampered, run["keylog"])
    assert len(problems) == 1
    assert f"TLS record in packet {target.frame.last_packet} fails authentication" in problems[0]
    kept = [m for m in messages if m is not target]
    assert [(m.frame.last_packet, m.is_request, m.correlation_id, m.frame.data) for m in after] == [
        (m.frame.last_packet, m.is_request, m.correlation_id, m.frame.data) for m in kept]
    orphan = next(m for m in after if not m.is_request and m.correlation_id == target.correlation_id)
    assert orphan.pair is None


def drop_packet(pcap: Path, packet: int, output: Path) -> None:
    """A copy of a pcap without packet number `packet`."""
    data = pcap.read_bytes()
    parts, position, number = [data[:24]], 24, 0
    while position < len(data):
        length = struct.unpack_from("<I", data, position + 8)[0]
        number += 1
        if number != packet:
            parts.append(data[position:position + 16 + length])
        position += 16 + length
    output.write_bytes(b"".join(parts))


@pytest.mark.broker
@pytest.mark.parametrize("name", ["tls12", "tls13"])
def test_records_after_a_lost_packet_are_found_again(recordings: Recordings, name: str,
                                                     tmp_path: Path) -> None:
    run = recordings.run(name)
    messages, _ = decode(run["pcap"], run["keylog"])
    target = [m for m in messages if m.api_key == DESCRIBE_PRODUCERS and m.is_request][1]
    assert target.frame.first_packet == target.frame.last_packet  # one record, one packet
    lossy = tmp_path / "lossy.pcap"
    drop_packet(run["pcap"], target.frame.last_packet, lossy)
    after, problems = decode(lossy, run["keylog"])
    assert len(problems) == 1 and "found again" in problems[0]
    # each direction in its own order: what follows the lost record is held until the loss is
    # known, so it may come out after later messages of the other direction
    def directions(found: list[Any]) -> list[list[tuple[int | None, bytes]]]:
        return [[(m.correlation_id, m.frame.data) for m in found if m.is_request == side]
                for side in (True, False)]

    assert directions(after) == directions([m for m in messages if m is not target])


@pytest.mark.broker
@pytest.mark.parametrize("name", ["tls12", "tls13_scram"])
def test_tshark_with_the_same_key_log_finds_the_same_kafka_messages(
        recordings: Recordings, name: str) -> None:
    if shutil.which("tshark") is None:
        missing("tshark is not installed")
    run = recordings.run(name)
    messages, _ = decode(run["pcap"], run["keylog"])
    found = subprocess.run(
        ["tshark", "-r", str(run["pcap"]), "-o", f"tls.keylog_file:{run['keylog']}",
         "-d", f"tls.port=={run['port']},kafka", "-Y", "kafka", "-T", "fields",
         "-e", "frame.number", "-e", "kafka.correlation_id", "-e", "tcp.dstport"],
        capture_output=True, text=True, check=True, timeout=120).stdout
    rows = []
    for line in found.splitlines():  # several Kafka messages in one packet: comma-separated
        frame, correlations, destination = line.split("\t")
        rows.extend((int(frame), int(correlation), int(destination) == run["port"])
                    for correlation in correlations.split(","))
    assert rows == [(m.frame.last_packet, m.correlation_id, m.is_request) for m in messages]


@pytest.mark.broker
def test_cli_marks_decrypted_messages_and_json_carries_tls(
        recordings: Recordings, capsys: pytest.CaptureFixture[str]) -> None:
    run = recordings.run("tls12_plain")
    assert main([str(run["pcap"]), "--tls-keylog", str(run["keylog"])]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(" [tls]" in line for line in lines)
    assert main([str(run["pcap"]), "--tls-keylog", str(run["keylog"]), "-T", "jsonl"]) == 0
    out = capsys.readouterr().out
    assert '"tls":true' in out.replace(" ", "") and "alice-secret" not in out
    keys = Path(run["keylog"]).read_text().split()
    assert not any(len(word) >= 64 and word in out for word in keys)  # no secret in any output


@pytest.mark.broker
def test_read_pcap_tables_carry_tls_and_latency(recordings: Recordings) -> None:
    from kdissect.present.analysis import read_pcap
    from tools.record_tls import PASSWORD

    run, twin = recordings.run("tls13_aes128"), recordings.twin("tls13_aes128")  # SASL PLAIN
    capture = read_pcap(run["pcap"], tls_keylog=str(run["keylog"]))
    clear = read_pcap(twin["pcap"])
    assert str(capture.messages.tls.dtype) == "bool" and capture.messages.tls.all()
    assert not clear.messages.tls.any()
    columns = ["api_name", "api_version", "correlation_id", "length", "direction"]
    assert capture.messages[columns].equals(clear.messages[columns])
    assert capture.exchanges.latency_ms.notna().all() and (capture.exchanges.latency_ms > 0).all()
    table = capture.fields.to_string()
    assert PASSWORD not in table and PASSWORD.encode().hex() not in table
    shown = read_pcap(run["pcap"], tls_keylog=str(run["keylog"]), show_secrets=True)
    assert PASSWORD.encode().hex() in shown.fields.to_string()


def record_resumed(pcap: Path, version: str) -> dict[str, Any]:
    """Two TLS connections from one client context, the second resuming the first's session,
    each sending an ApiVersions v0 request (built by hand) to the scripted peer."""
    import socket
    import ssl

    from craft import kafka_request

    from tools.record_tls import FixedClockProducers
    from tools.recording import LOOPBACK, Tcpdump
    from tools.tls_peer import TlsPeer, client_context, self_signed_certificate, server_context

    keylog = pcap.with_suffix(".keys")
    keylog.unlink(missing_ok=True)  # OpenSSL appends: a retried recording must not keep the keys of the one before
    context = client_context(keylog, version)
    server = server_context(*self_signed_certificate(pcap.parent))
    reused = []
    with TlsPeer(FixedClockProducers(), server) as peer, Tcpdump(pcap, f"tcp port {peer.port}"):
        session: ssl.SSLSession | None = None
        for correlation in (1, 2):
            raw = socket.create_connection((LOOPBACK, peer.port))
            with context.wrap_socket(raw, session=session) as tls:
                tls.sendall(kafka_request(18, 0, correlation, b"resumer"))
                size = int.from_bytes(tls.recv(4), "big")
                while size > 0:
                    size -= len(tls.recv(size))
                session = tls.session
                reused.append(tls.session_reused)
    return {"pcap": pcap, "keylog": keylog, "port": peer.port, "reused": reused}


@pytest.mark.broker
@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_resumed_sessions_decrypt(recordings: Recordings, version: str, tmp_path: Path) -> None:
    from tools.recording import RecordingError

    for attempt in range(3):  # a busy machine can make the kernel drop packets
        try:
            run = record_resumed(tmp_path / f"resumed{version}.pcap", version)
            break
        except RecordingError:
            if attempt == 2:
                raise
    assert run["reused"] == [False, True]
    messages, problems = decode(run["pcap"], run["keylog"], ports=[run["port"]])
    assert problems == []
    assert [(m.api_name, m.is_request, m.correlation_id, m.frame.connection.index)
            for m in messages] == [("ApiVersions", True, 1, 0), ("ApiVersions", False, 1, 0),
                                   ("ApiVersions", True, 2, 1), ("ApiVersions", False, 2, 1)]
    if version == "1.2":  # without the resumed session's line: its master secret is the first's
        first_only = tmp_path / "first.keys"
        lines = [line for line in Path(run["keylog"]).read_text().splitlines(keepends=True)
                 if line.startswith("CLIENT_RANDOM")]
        first_only.write_text(lines[0])
        again, problems = decode(run["pcap"], first_only, ports=[run["port"]])
        assert problems == [] and [m.frame.data for m in again] == [m.frame.data for m in messages]
