"""Hostile and broken input end to end: strings from the wire are data (never commands, paths
or terminal controls), TLS on a Kafka port, every way a capture file breaks as the CLI user
sees it, and malformed messages on one connection each noted while the next still decodes.

Kafka requests are written by hand with `struct`, responses by kio (an independent codec);
packets by scapy through tests/craft.py.
"""

from __future__ import annotations

import csv
import datetime
import importlib
import io
import json
import os
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from craft import (
    LINKTYPE_ETHERNET,
    Conversation,
    Record,
    compact,
    ethernet,
    framed,
    pcap_bytes,
    pcapng_block,
    pcapng_interface,
    pcapng_packet,
    pcapng_section,
    records,
    uvarint,
)
from kio.schema.describe_producers.v0 import response as kio_producers
from kio.schema.describe_topic_partitions.v0 import response as kio_partitions
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from kdissect.cli import main
from kdissect.decode.tree import printable
from kdissect.notes import Note, Severity
from kdissect.pipeline import read_messages
from kdissect.present.analysis import read_pcap
from tests.conftest import CAPTURES

producers: Any = kio_producers  # kio's phantom int and str types are not worth spelling out
partitions: Any = kio_partitions
QUORUM = CAPTURES / "quorum_story.pcap"
HOSTILE_CLIENT_ID = "$(touch pwned)\x1b[2J\x1b]0;owned\x07"
HOSTILE_TOPICS = ["../../pwned", "../../etc/passwd", "/etc/passwd", "$(touch pwned)", "`touch pwned`; touch pwned2",
                  "%s%n%x{0}{1!r}", "\x1b[31mred\x1b[0m", "\u202eevil.txt", "topic\nwith\nlines"]
CLIENT, SERVER = ("10.0.0.1", 40000), ("10.0.0.2", 9092)








def producers_request(correlation_id: int, client_id: str, topics: list[str]) -> bytes:
    """DescribeProducers v0 (request header v2), partition 0 of each topic, by hand."""
    client = client_id.encode()
    header = struct.pack(">hhih", 61, 0, correlation_id, len(client)) + client + b"\x00"
    body = uvarint(len(topics) + 1) + b"".join(
        compact(name) + uvarint(2) + struct.pack(">i", 0) + b"\x00" for name in topics) + b"\x00"
    return framed(header + body)


def producers_response(correlation_id: int, topics: list[str],
                       last_timestamps: tuple[int, ...] = (1_700_000_000_000,)) -> bytes:
    """kio's encoding of an answer: active producers on partition 0 of each topic, one per
    last timestamp (milliseconds)."""
    states = tuple(producers.ProducerState(
        producer_id=4000 + index, producer_epoch=1, last_sequence=9, last_timestamp=timestamp,
        coordinator_epoch=-1, current_txn_start_offset=-1) for index, timestamp in enumerate(last_timestamps))
    answer = producers.DescribeProducersResponse(
        throttle_time=datetime.timedelta(0),
        topics=tuple(producers.TopicResponse(name=name, partitions=(producers.PartitionResponse(
            partition_index=0, error_code=ErrorCode.none, error_message=None,
            active_producers=states),)) for name in topics))
    buffer = io.BytesIO()
    entity_writer(producers.DescribeProducersResponse)(buffer, answer)
    return framed(struct.pack(">i", correlation_id) + b"\x00" + buffer.getvalue())


def capture(*conversations: Conversation) -> bytes:
    packets = [packet for talk in conversations for packet in talk.packets]
    return pcap_bytes(records(packets, wrap=ethernet))


# -- strings from the wire are data ----------------------------------------------------------


def kdissect(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "kdissect", *args], cwd=cwd, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result


def test_strings_from_the_wire_are_never_executed_or_used_as_paths(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    talk = Conversation.between(CLIENT, SERVER)
    talk.handshake()
    talk.send(True, producers_request(7, HOSTILE_CLIENT_ID, HOSTILE_TOPICS))
    talk.send(False, producers_response(7, HOSTILE_TOPICS))
    (work / "hostile.pcap").write_bytes(capture(talk))
    outputs = [kdissect(work, *options, "hostile.pcap").stdout
               for options in ([], ["-V", "-x", "-i"], ["--stats"], ["-T", "json"],
                               ["-T", "fields", "-e", "client_id", "-e", "Name"])]
    kdissect(work, "--export", "csv", "--format", "csv", "hostile.pcap")
    kdissect(work, "--export", "parquet", "hostile.pcap")
    tables = {"messages", "exchanges", "fields", "records", "batches", "topic_partitions",
              "producers", "quorum",
              "quorum_replicas", "quorum_nodes", "produce", "fetch", "groups", "errors"}
    assert {str(p.relative_to(work)) for p in work.rglob("*")} == {
        "hostile.pcap", "csv", "parquet", *(f"csv/{t}.csv" for t in tables),
        *(f"parquet/{t}{part}" for t in tables
          for part in ("", "/capture=hostile.pcap", "/capture=hostile.pcap/part.0.parquet"))}
    assert not [p for p in tmp_path.parent.rglob("pwned*")]  # nothing ran, nothing was written
    for text in outputs[:4]:
        assert all(line.isprintable() for line in text.splitlines())
    assert "\\x1b[2J" in outputs[0] and "%s%n%x{0}{1!r}" in outputs[1] and "\\u202eevil.txt" in outputs[1]
    rows = [line.split("\t") for line in outputs[4].splitlines()]  # one row per message, whatever the names
    assert rows[0][0] == printable(HOSTILE_CLIENT_ID) and rows[1][1] == ",".join(map(printable, HOSTILE_TOPICS))
    assert len(rows) == 2 and all(cell.isprintable() for row in rows for cell in row)  # tabs only between
    decoded = json.loads(outputs[3])
    assert decoded[0]["client_id"] == HOSTILE_CLIENT_ID  # escaped for the terminal, not lost
    topics = decoded[1]["tree"]["children"][2]["children"][1]  # response body, Topics
    names = [element["children"][0]["value"] for element in topics["children"][1:]]
    assert names == HOSTILE_TOPICS
    with open(work / "csv" / "producers.csv", newline="") as table:
        assert [row["topic_name"] for row in csv.DictReader(table)] == HOSTILE_TOPICS


def test_a_cursor_from_the_wire_cannot_reach_the_terminal(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    """The fuzzer's find: `-i` quoted DescribeTopicPartitions' NextCursor topic name raw."""
    name = "t\x1b[2J\x1b]0;owned\x07\u202e"
    request = struct.pack(">hhih", 75, 0, 3, 0) + b"\x00" + uvarint(2) + compact("t") + b"\x00"
    request += struct.pack(">i", 100) + b"\xff\x00"  # ResponsePartitionLimit, no cursor, no tags
    answer = partitions.DescribeTopicPartitionsResponse(
        throttle_time=datetime.timedelta(0), topics=(),
        next_cursor=partitions.Cursor(topic_name=name, partition_index=4))
    buffer = io.BytesIO()
    entity_writer(partitions.DescribeTopicPartitionsResponse)(buffer, answer)
    talk = Conversation.between(CLIENT, SERVER)
    talk.handshake()
    talk.send(True, framed(request))
    talk.send(False, framed(struct.pack(">i", 3) + b"\x00" + buffer.getvalue()))
    path = tmp_path / "cursor.pcap"
    path.write_bytes(capture(talk))
    assert main(["-i", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.isprintable() for line in lines)
    assert "next_cursor=t\\x1b[2J\\x1b]0;owned\\x07\\u202e:4" in lines[1]


def test_absurd_times_are_missing_in_the_tables_and_the_cli_still_works(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The fuzzer's find: a producer's LastTimestamp of -2^62 ms made every table and
    `--export` fail; so did a pcapng timestamp past the year 9999, and `-t a` with it."""
    talk = Conversation.between(CLIENT, SERVER)
    talk.handshake()
    talk.send(True, producers_request(1, "ok", ["t"]))
    talk.send(False, producers_response(1, ["t"], (1_700_000_000_000, 2**62, -2**62)))
    items = records(talk.packets, wrap=ethernet)
    items[-1].timestamp = 2.0**40  # the response's packet: 34,800 years from now
    blocks = [pcapng_section(), pcapng_interface(LINKTYPE_ETHERNET, tsresol=0)]  # 1-second units
    path = tmp_path / "absurd.pcapng"
    path.write_bytes(b"".join([*blocks, *(pcapng_packet(item, units_per_second=1) for item in items)]))
    tables = read_pcap(path)
    assert tables.producers["last_timestamp"].isna().tolist() == [False, True, True]
    assert tables.producers["last_timestamp"][0] == pd.Timestamp(1_700_000_000_000, unit="ms", tz="UTC")
    assert tables.messages["time"].isna().tolist() == [False, True]
    assert main(["--export", str(tmp_path / "out"), "--format", "csv", str(path)]) == 0
    assert (tmp_path / "out" / "producers.csv").read_text().count("\n") == 4  # header and 3 rows
    capsys.readouterr()
    assert main(["-t", "a", str(path)]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first.split()[1:3] == ["2023-11-14", "22:13:20.000000"]
    assert second.split()[1] == f"{2**40}.000000"  # beyond the calendar: epoch seconds


# -- TLS on a Kafka port ---------------------------------------------------------------------


def tls_connections() -> list[Conversation]:
    """Three TLS connections on 9092: one from its handshake, one seen from the middle (no
    SYN), one whose ClientHello shares a segment with the FIN."""
    hello, data = bytes.fromhex("160301 0010") + b"\x01" * 16, bytes.fromhex("170303 0010") + b"\x02" * 16
    whole = Conversation.between(("10.0.0.5", 41000), SERVER)
    whole.handshake()
    whole.send(True, hello)
    whole.send(False, bytes.fromhex("160303 0008") + b"\x03" * 8)
    whole.send(True, data)
    middle = Conversation.between(("10.0.0.6", 41001), SERVER)
    middle.send(True, data)
    middle.send(False, data)
    closing = Conversation.between(("10.0.0.7", 41002), SERVER)
    closing.handshake()
    closing.segment(True, hello, flags="FPA")
    return [whole, middle, closing]


def test_tls_is_noted_once_per_connection_and_kafka_beside_it_decodes(tmp_path: Path) -> None:
    kafka = Conversation.between(CLIENT, SERVER)
    kafka.handshake()
    kafka.send(True, producers_request(1, "ok", ["t"]))
    kafka.send(False, producers_response(1, ["t"]))
    problems: list[Note] = []
    messages = list(read_messages(io.BytesIO(capture(*tls_connections(), kafka)), report=problems.append))
    assert [str(n) for n in problems] == [
        f"warn: {address}:{port} <-> 10.0.0.2:9092: TLS, no keys (no key log given)"
        for address, port in (("10.0.0.5", 41000), ("10.0.0.6", 41001), ("10.0.0.7", 41002))]
    assert [(m.api_name, m.is_request, m.correlation_id) for m in messages] == [
        ("DescribeProducers", True, 1), ("DescribeProducers", False, 1)]
    assert messages[1].pair is messages[0] and [n for m in messages for n in m.all_notes()] == []
    assert messages[1].tree()["DescribeProducersResponse"]["Topics"].value == 1


# -- broken capture files, as the CLI user sees them --------------------------------------------


def record_offsets(data: bytes) -> list[int]:
    """Where each record header of a little-endian microsecond pcap starts."""
    offsets, position = [], 24
    while position + 16 <= len(data):
        offsets.append(position)
        position += 16 + struct.unpack_from("<I", data, position + 8)[0]
    return offsets


def as_pcapng(data: bytes, *, unknown_after: int | None = None) -> bytes:
    blocks = [pcapng_section(), pcapng_interface(LINKTYPE_ETHERNET)]
    for index, position in enumerate(record_offsets(data)):
        seconds, fraction, captured, original = struct.unpack_from("<IIII", data, position)
        item = Record(data[position + 16:position + 16 + captured], seconds + fraction / 1e6, original)
        blocks.append(pcapng_packet(item))
        if index + 1 == unknown_after:
            blocks.append(pcapng_block(0x0000_0777, b"\x00" * 12))
    return b"".join(blocks)


def cut_in_record(data: bytes, number: int) -> bytes:
    return data[:record_offsets(data)[number - 1] + 16 + 10]


def with_snaplen(data: bytes, snaplen: int) -> bytes:
    return data[:16] + struct.pack("<I", snaplen) + data[20:]


def corrupt_header(data: bytes, number: int) -> bytes:
    at = record_offsets(data)[number - 1] + 8
    return data[:at] + struct.pack("<I", 0xFFFFFFF0) + data[at + 4:]


def jsonl_messages(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[tuple[Any, ...]], list[str]]:
    """(exit status, (frame, direction, correlation id, length) per message, stderr lines)."""
    status = main(["-T", "jsonl", str(path)])
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    keys = [(r["frame"], r["direction"], r["correlation_id"], r["length"]) for r in rows]
    return status, keys, captured.err.splitlines()


QUORUM_BYTES = QUORUM.read_bytes()
CUT_AT = 60  # a packet in the middle of the capture
Damage = Callable[[bytes], bytes]


@pytest.mark.parametrize(("damage", "status", "complaint", "kept"), [
    pytest.param(lambda d: cut_in_record(d, CUT_AT), 0, f"capture cut short: packet {CUT_AT} has 10 of",
                 "before", id="pcap cut in the middle of a record"),
    pytest.param(lambda d: with_snaplen(d, 100), 0, "exceeds the file's snap length 100; read anyway",
                 "all", id="captured length over the snap length"),
    pytest.param(lambda d: as_pcapng(d, unknown_after=CUT_AT), 0,
                 f"pcapng block of unknown type 0x00000777 after packet {CUT_AT} skipped", "all",
                 id="pcapng with an unknown block type"),
    pytest.param(lambda d: as_pcapng(d)[:-30], 0, "capture cut short: the block after packet", "before",
                 id="pcapng cut in the middle of a block"),
    pytest.param(lambda d: d[:12], 2, "pcap file header cut short (12 of 24 bytes)", "none",
                 id="pcap cut inside its file header"),
    pytest.param(lambda d: b"", 2, "empty file", "none", id="zero-length file"),
])
def test_broken_capture_file_gives_one_clear_line_and_keeps_what_it_can(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Damage, status: int,
        complaint: str, kept: str) -> None:
    _, baseline, _ = jsonl_messages(QUORUM, capsys)
    path = tmp_path / "damaged.pcap"
    path.write_bytes(damage(QUORUM_BYTES))
    got_status, messages, errors = jsonl_messages(path, capsys)
    assert got_status == status
    assert len(errors) == 1 and errors[0].startswith(f"kdissect: {path}: ") and complaint in errors[0], errors
    if kept == "all":
        assert messages == baseline
    elif kept == "before":
        whole = [m for m in baseline if m[0] < CUT_AT - 1]
        assert messages[:len(whole)] == whole and len(whole) > 10
    else:
        assert messages == []


def test_corrupt_record_header_loses_one_packet_and_reading_resumes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, baseline, _ = jsonl_messages(QUORUM, capsys)
    path = tmp_path / "corrupt.pcap"
    path.write_bytes(corrupt_header(QUORUM_BYTES, CUT_AT))
    status, messages, errors = jsonl_messages(path, capsys)
    assert status == 0
    offsets = record_offsets(QUORUM_BYTES)
    assert [line.split(": ", 2)[2] for line in errors] == [
        f"error: packet {CUT_AT}: record header is corrupt (captured length 4294967280)",
        f"warn: resumed reading at the next plausible record after packet {CUT_AT - 1}, "
        f"{offsets[CUT_AT] - offsets[CUT_AT - 1]} bytes later"]
    before = [m for m in baseline if m[0] < CUT_AT - 1]
    assert messages[:len(before)] == before
    after = [(d, c, n) for f, d, c, n in messages if f >= CUT_AT]  # renumbered: one packet fewer
    assert len(after) > 10 and set(after) <= {(d, c, n) for f, d, c, n in baseline if f > CUT_AT}


@pytest.mark.parametrize(("fields", "linktype_note"), [
    (b"", ["note: link type 65535 is not supported; its packets are skipped"]),  # a 12-byte block
    (struct.pack("<HH", LINKTYPE_ETHERNET, 0), []),  # the link type, but no snap length
], ids=["no fields", "no snap length"])
def test_pcapng_interface_block_cut_short(fields: bytes, linktype_note: list[str]) -> None:
    """The fuzzer's find: a 12-byte interface description block raised struct.error. The
    interface keeps its number, so the next one's packets still decode."""
    talk = Conversation.between(CLIENT, SERVER)
    talk.handshake()
    talk.send(True, producers_request(1, "ok", ["t"]))
    talk.send(False, producers_response(1, ["t"]))
    items = records(talk.packets, wrap=ethernet)
    for item in items:
        item.interface = 1
    items[0].interface = 0
    data = b"".join([pcapng_section(), pcapng_block(1, fields), pcapng_interface(LINKTYPE_ETHERNET),
                     *(pcapng_packet(item) for item in items)])
    problems: list[Note] = []
    messages = list(read_messages(io.BytesIO(data), report=problems.append))
    assert [str(n) for n in problems] == ["warn: interface 0: its description block is cut short",
                                          *linktype_note]
    assert [(m.api_name, m.is_request, m.pair is not None) for m in messages] == [
        ("DescribeProducers", True, True), ("DescribeProducers", False, True)]


def test_file_without_read_permission(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "secret.pcap"
    path.write_bytes(QUORUM_BYTES)
    path.chmod(0)
    tmp_path.chmod(0o755)
    for name in ("summary", "text", "hexdump"):  # imported now, while the modules are readable
        importlib.import_module(f"kdissect.present.{name}")
    is_root = os.geteuid() == 0
    if is_root:  # root reads anything: drop the effective uid for the run
        os.seteuid(65534)
    try:
        status = main([str(path)])
    finally:
        if is_root:
            os.seteuid(0)
    errors = capsys.readouterr().err.splitlines()
    assert status == 2 and errors == [f"kdissect: {path}: Permission denied"]


# -- malformed Kafka on one connection: each noted where it is, the next still decodes ------------


def test_malformed_messages_on_one_connection_are_noted_and_the_next_decodes() -> None:
    talk = Conversation.between(CLIENT, SERVER)
    talk.handshake()
    tagged = framed(producers_request(4, "ok", ["t"])[4:-1] + b"\x01\x2a\x02\xab\xcd")  # unknown tag 42
    broken = [
        framed(struct.pack(">hhih", 999, 0, 1, 0) + b"\x01\x02"),  # an unknown API key
        framed(struct.pack(">hhih", 55, 9, 2, 0) + b"\x00" + b"\x02" * 8),  # DescribeQuorum v9
        framed(struct.pack(">hhih", 61, 0, 3, 0) + b"\x00\x02\x05ab"),  # a topic name cut short
        struct.pack(">i", -7),  # a negative size prefix
    ]
    for data in [*broken, tagged, producers_request(5, "ok", ["good"])]:
        talk.send(True, data)
    talk.send(False, producers_response(5, ["good"]))
    messages = list(read_messages(io.BytesIO(capture(talk))))
    found = [(m.correlation_id, [(n.severity, n.message, n.offset) for n in m.tree().all_notes()])
             for m in messages]
    assert found == [
        (1, [(Severity.WARN, "unknown API key 999: body not decoded", 14)]),
        (2, [(Severity.WARN, "DescribeQuorum v9 is newer than the definitions: decoded as v2, the newest known", 15),
             (Severity.ERROR, "Partitions: 1 element needs at least 5 bytes, 4 left", 18)]),
        (3, [(Severity.ERROR, "truncated: Name declares 4 bytes, 2 left", 0x10)]),
        (4, []), (5, []), (5, [])]
    assert [n.message for n in messages[3].frame.notes] == [
        f"size prefix -7 at stream offset {sum(map(len, broken[:3]))} is not a frame size (limit 104857600)",
        "resynchronised: skipped 4 bytes before this frame"]
    unknown = messages[3].tree()["DescribeProducersRequest"]["tagged_fields"]["unknown_tag_42"]
    assert (unknown.value, unknown.offset, unknown.size) == (b"\xab\xcd", len(tagged) - 4, 4)
    assert messages[5].pair is messages[4]
    assert messages[5].tree()["DescribeProducersResponse"]["Topics"].children[1]["Name"].value == "good"
