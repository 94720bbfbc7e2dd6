"""Real captures decode cleanly, and agree with tshark where tshark 4.0 decodes the version.

Every message of the third-party captures and of the shipped Tansu captures, with
an installed kafka-python's definitions or kdissect's own alone, gets a tree that tiles its
frame with no error note. librdkafka's ApiVersions v0 request carries 4 zero bytes past the v0
layout (an early KIP-35 draft's empty API-key array), which tshark calls malformed ("Dissected
message does not end at the pdu length offset"): here it is named, with a note. For every
message tshark decodes without complaint, topic names, partitions, error codes,
offsets and group ids are the same values, in the same order.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import missing
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

from kdissect.decode.schema import configure_definitions, set_sources
from kdissect.decode.tree import Node
from kdissect.notes import Severity
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages

PORTS = [9092, 36333]
TSHARK_FIELDS = ("kafka.topic_name", "kafka.partition_id", "kafka.error", "kafka.offset", "kafka.consumer_group")
# Where the record data holds offsets tshark reads and kdissect leaves as bytes for now.
RECORDS_CARRIERS = {(0, "request"), (1, "response")}


def messages(path: Path) -> list[Message]:
    return list(read_messages(path, ports=PORTS))


def error_notes(tree: Node) -> list[str]:
    return [n.message for n in tree.all_notes() if n.severity is Severity.ERROR]


def captures(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in (".pcap", ".pcapng"))


@pytest.fixture(params=[True, False], ids=["with-kafka-python", "kdissect-only"])
def definitions(request: pytest.FixtureRequest) -> Iterator[None]:
    configure_definitions(installed=request.param)
    yield
    set_sources(None)


@pytest.mark.usefixtures("definitions")
def test_every_third_party_message_decodes_without_an_error(public_captures: Path) -> None:
    decoded = set()
    quirks: list[str | None] = []
    for path in captures(public_captures):
        for message in messages(path):
            tree = message.tree()
            assert tree.tiling_errors() == [], path.name
            assert error_notes(tree) == [], (path.name, message.number)
            if tree.children[-1].name == "draft_api_keys":
                quirks.append(message.client_id)
                assert (message.api_key, message.api_version, message.is_request) == (18, 0, True)
                assert [n.id for n in tree.all_notes()] == ["kafka.client_quirk"]
            if message.api_key is not None:
                assert tree.children[2].type == "struct", (path.name, message.number)  # the body decoded
                decoded.add((message.api_key, message.api_version))
    assert {(0, 1), (0, 2), (0, 3), (0, 7), (0, 9), (1, 12), (1, 13), (2, 0), (3, 0), (3, 12), (8, 8),
            (11, 7), (12, 4), (13, 4), (14, 5), (18, 3), (22, 4)} <= decoded
    assert quirks and set(quirks) == {"rdkafka"}  # the four of ndpi_kafka.pcapng, all librdkafka's


@pytest.mark.usefixtures("definitions")
def test_every_shipped_capture_message_decodes_without_any_note(shipped_captures: Path) -> None:
    apis = set()
    for path in captures(shipped_captures):
        for message in messages(path):
            tree = message.tree()
            assert tree.tiling_errors() == [], path.name
            assert [str(n) for n in tree.all_notes()] == [], (path.name, message.number)
            assert tree.children[2].type == "struct"
            apis.add(message.api_key)
    assert {0, 3, 18, 19, 22, 55, 61, 75} <= apis


# -- tshark ---------------------------------------------------------------------------------


def tshark_rows(path: Path) -> dict[int, tuple[list[str], ...]]:
    """Per packet number: tshark's values of TSHARK_FIELDS, for messages it decoded without complaint."""
    if shutil.which("tshark") is None:
        missing("tshark is not installed")
    command = ["tshark", "-r", str(path), "-Y", "kafka", "-T", "fields", "-E", "occurrence=a",
               "-e", "frame.number", "-e", "_ws.expert.message"]
    for port in PORTS:
        command[3:3] = ["-d", f"tcp.port=={port},kafka"]
    for field in TSHARK_FIELDS:
        command += ["-e", field]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        number, expert, *values = line.split("\t")
        if not expert:
            rows[int(number)] = tuple(v.split(",") if v else [] for v in values)
    return rows


def walk(node: Node, parent: Node | None = None) -> Iterator[tuple[Node, Node | None]]:
    yield node, parent
    for child in node.children:
        yield from walk(child, node)


def kdissect_values(message: Message) -> tuple[list[str], ...]:
    topics, partitions, errors, offsets, groups = [], [], [], [], []
    body = message.tree().children[2]
    for node, parent in walk(body):
        container = parent.type if parent is not None else ""
        if node.name in ("Topic", "TopicName") or (node.name == "Name" and "Topic" in container):
            topics.append(str(node.value))
        elif node.name == "PartitionIndex" or (node.name in ("Partition", "Index") and "Partition" in container):
            partitions.append(str(node.value))
        elif node.name == "PartitionIndexes":
            partitions.extend(str(c.value) for c in node.children if c.name != "length")
        elif node.name == "ErrorCode":
            errors.append(str(node.value))
        elif node.name in ("BaseOffset", "Offset", "CommittedOffset", "FetchOffset", "OldStyleOffsets"):
            offsets.extend(str(c.value) for c in node.children if c.name != "length") if node.children \
                else offsets.append(str(node.value))
        elif node.name == "GroupId":
            groups.append(str(node.value))
    return topics, partitions, errors, offsets, groups


def decoded_by_tshark(folder: Path) -> Iterator[tuple[Path, Message, tuple[list[str], ...]]]:
    """(capture, message, tshark's values) for every message of the third-party captures
    whose last packet tshark decodes."""
    for path in captures(folder):
        rows = tshark_rows(path)
        for message in messages(path):
            theirs = rows.get(message.frame.last_packet)
            if theirs is not None and message.api_key is not None:
                yield path, message, theirs


def test_values_agree_with_tshark_where_it_decodes(public_captures: Path) -> None:
    compared = 0
    for path, message, theirs in decoded_by_tshark(public_captures):
        ours = kdissect_values(message)
        kind = "request" if message.is_request else "response"
        for field, mine, tshark in zip(TSHARK_FIELDS, ours, theirs, strict=True):
            if field == "kafka.offset" and (message.api_key, kind) in RECORDS_CARRIERS:
                continue
            if field == "kafka.error" and not tshark:
                continue  # tshark 4.0 shows no error field for some responses it reads
            assert mine == tshark, (path.name, message.number, field)
        compared += 1
    assert compared >= 15


@pytest.mark.parametrize("name", ["deepflow_00-produce-v2.pcap", "gosniffer_kafka.pcap"])
def test_old_produce_versions_dropped_by_kafka_4_decode(public_captures: Path, name: str) -> None:
    produce = [m for m in messages(public_captures / name) if m.api_key == 0]
    assert produce and all(m.api_version in (1, 2) for m in produce)
    request = next(m for m in produce if m.is_request).tree().children[2]
    assert request["TopicData"].value == 1
    assert request.child("TransactionalId") is None  # only from v3 on


# -- APIs Kafka 4 removed: frames built here, read by tshark and by kdissect ----------------


def s16(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def request(key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    payload = struct.pack(">hhi", key, version, correlation_id) + s16("ctl") + body
    return struct.pack(">i", len(payload)) + payload


def response(correlation_id: int, body: bytes) -> bytes:
    return struct.pack(">ii", len(body) + 4, correlation_id) + body


ZOOKEEPER_ERA = [  # StopReplica v0, v1 and ControlledShutdown v1, v2 (LeaderAndIsr, UpdateMetadata below)
    (request(5, 0, 11, struct.pack(">ii?i", 1, 2, True, 2) + s16("t0") + struct.pack(">i", 3) + s16("t1")
             + struct.pack(">i", 4)),
     response(11, struct.pack(">hi", 0, 1) + s16("t0") + struct.pack(">ih", 3, 6))),
    (request(5, 1, 12, struct.pack(">iiq?i", 1, 2, 99, False, 1) + s16("alpha") + struct.pack(">iii", 2, 0, 7)),
     response(12, struct.pack(">hi", 0, 2) + s16("alpha") + struct.pack(">ih", 0, 0) + s16("alpha")
              + struct.pack(">ih", 7, 0))),
    (request(7, 1, 14, struct.pack(">i", 3)),
     response(14, struct.pack(">hi", 0, 1) + s16("gamma") + struct.pack(">i", 2))),
    (request(7, 2, 15, struct.pack(">iq", 3, 77)), response(15, struct.pack(">hi", 15, 0))),
]


def array(items: list[bytes]) -> bytes:
    return struct.pack(">i", len(items)) + b"".join(items)


def int32s(values: list[int], compact: bool = False) -> bytes:
    items = [struct.pack(">i", v) for v in values]
    return bytes([len(items) + 1]) + b"".join(items) if compact else array(items)


def partition_state(version: int, topic: str | None, index: int) -> bytes:
    """LeaderAndIsr partition state, classic versions: leader 2, ISR [2, 3], replicas [2, 3, 4]."""
    state = (s16(topic) if topic is not None else b"") + struct.pack(">iiii", index, 5, 2, 7)
    state += int32s([2, 3]) + struct.pack(">i", 11) + int32s([2, 3, 4])
    state += (int32s([4]) + int32s([])) if version >= 3 else b""
    return state + (b"\x01" if version >= 1 else b"")


def leader_and_isr(version: int) -> tuple[bytes, bytes]:
    leaders = array([struct.pack(">i", 2) + s16("broker2") + struct.pack(">i", 9092)])
    errors = array([s16("lai") + struct.pack(">ih", 0, 0), s16("lai") + struct.pack(">ih", 1, 6)])
    if version < 2:
        states = array([partition_state(version, "lai", 0), partition_state(version, "lai", 1)])
        body = struct.pack(">ii", 1, 5) + states + leaders
    else:
        states = array([s16("lai") + array([partition_state(version, None, 0), partition_state(version, None, 1)])])
        body = struct.pack(">iiq", 1, 5, 42) + states + leaders
    return request(4, version, 20 + version, body), response(20 + version, struct.pack(">h", 0) + errors)


def leader_and_isr_v4() -> tuple[bytes, bytes]:
    """The first flexible version: compact strings and arrays, tagged-field blocks."""
    def text(value: str) -> bytes:
        return bytes([len(value) + 1]) + value.encode()
    state = struct.pack(">iiii", 4, 5, 2, 7) + int32s([2, 3], True) + struct.pack(">i", 11)
    state += int32s([2, 3, 4], True) + int32s([], True) + int32s([], True) + b"\x01\x00"
    topics = b"\x02" + text("lai") + b"\x02" + state + b"\x00"
    leaders = b"\x02" + struct.pack(">i", 2) + text("b2") + struct.pack(">i", 9092) + b"\x00"
    payload = struct.pack(">hhi", 4, 4, 30) + s16("ctl") + b"\x00" + struct.pack(">iiq", 1, 5, 42)
    payload += topics + leaders + b"\x00"
    answer = struct.pack(">ib", 30, 0) + struct.pack(">h", 0) + b"\x02" + text("lai") + struct.pack(">ih", 4, 0)
    return struct.pack(">i", len(payload)) + payload, struct.pack(">i", len(answer) + 2) + answer + b"\x00\x00"


def update_metadata(version: int) -> tuple[bytes, bytes]:
    """UpdateMetadata v4 (partitions listed one by one) or v5 (by topic, with the broker epoch).

    tshark 4.0 reads offline replicas in versions 0-3 too, which those versions lack, so only
    these two are compared.
    """
    state = struct.pack(">iiii", 3, 5, 2, 7) + int32s([2, 3]) + struct.pack(">i", 11) + int32s([2, 3, 4])
    state += int32s([4])
    endpoint = struct.pack(">i", 9092) + s16("h1") + s16("PLAINTEXT") + struct.pack(">h", 0)
    brokers = array([struct.pack(">i", 2) + array([endpoint]) + s16("r1")])
    if version == 4:
        body = struct.pack(">ii", 1, 5) + array([s16("um") + state])
    else:
        body = struct.pack(">iiq", 1, 5, 42) + array([s16("um") + array([state])])
    return request(6, version, 40 + version, body + brokers), response(40 + version, struct.pack(">h", 0))


def write_exchanges(path: Path, exchanges: list[tuple[bytes, bytes]]) -> None:
    packets, client_seq, server_seq = [], 1000, 5000
    for ask, answer in exchanges:
        packets.append(Ether() / IP(src="10.0.0.1", dst="10.0.0.2")
                       / TCP(sport=40000, dport=9092, flags="PA", seq=client_seq, ack=server_seq) / Raw(ask))
        client_seq += len(ask)
        packets.append(Ether() / IP(src="10.0.0.2", dst="10.0.0.1")
                       / TCP(sport=9092, dport=40000, flags="PA", seq=server_seq, ack=client_seq) / Raw(answer))
        server_seq += len(answer)
    wrpcap(str(path), packets)


def test_zookeeper_era_apis_decode_as_tshark_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "zookeeper_era.pcap"
    exchanges = [*ZOOKEEPER_ERA, *(leader_and_isr(v) for v in range(4)), leader_and_isr_v4(),
                 update_metadata(4), update_metadata(5)]
    write_exchanges(path, exchanges)
    rows = tshark_rows(path)
    decoded = messages(path)
    assert len(decoded) == 2 * len(exchanges) == len(rows)
    for message in decoded:
        tree = message.tree()
        assert [str(n) for n in tree.all_notes()] == [] and tree.tiling_errors() == []
        assert kdissect_values(message) == rows[message.frame.last_packet], message.number
