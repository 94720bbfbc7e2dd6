"""Wireshark's Kafka field names in `-Y` select what tshark selects.

A filter written for tshark (`kafka.consumer_group == "billing"`, `kafka.message_value
contains "order"`) must run here unchanged. tshark is the reference: on every shipped and
third-party capture, every message tshark finds a `kafka.*` body field in must be found by
the same name here, unless tshark's reading of it is not to be trusted or the field's
value is null (see `explained`).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

import pytest

from kdissect.decode.schema import configure_definitions, set_sources
from kdissect.decode.schema.sources import kafka_python_source
from kdissect.decode.tree import Node
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages
from kdissect.present.fields import KAFKA_BODY_ALIASES
from kdissect.present.filter import FilterError, compile_filter, resolve
from tests.conftest import CAPTURES, PUBLIC_CAPTURES, missing

PORTS = [9092, 36333]  # one third-party capture's broker listens on 36333
# Values tshark prints raw: read one name at a time with -Y, never as a -T fields column.
RAW = frozenset({"kafka.message_key", "kafka.message_value", "kafka.header_key", "kafka.header_value",
                 "kafka.token_hmac", "kafka.sasl_authentication", "kafka.metadata", "kafka.config_value",
                 "kafka.error_message"})


def run_tshark(*arguments: str) -> str:
    if shutil.which("tshark") is None:
        missing("tshark is not installed (apt-get install tshark)")
    return subprocess.run(["tshark", *arguments], capture_output=True, text=True,
                          timeout=300, check=True).stdout


@functools.cache
def tshark_field_names() -> frozenset[str]:
    return frozenset(line.split("\t")[2] for line in run_tshark("-G", "fields").splitlines()
                     if line.startswith("F\t"))


def tshark_frames(path: Path, names: list[str]) -> tuple[dict[str, set[int]], dict[int, str]]:
    """The frames in which tshark finds each name, and its expert messages per frame."""
    plain = [n for n in names if n not in RAW]
    columns = [x for n in ["_ws.expert.message", *plain] for x in ("-e", n)]
    found: dict[str, set[int]] = {n: set() for n in names}
    experts: dict[int, str] = {}
    for line in run_tshark("-n", "-r", str(path), "-Y", "kafka", "-T", "fields", "-E", "occurrence=a",
                           "-e", "frame.number", *columns).splitlines():
        frame, expert, *values = line.split("\t")
        experts[int(frame)] = expert
        for name, value in zip(plain, values, strict=True):
            if value:
                found[name].add(int(frame))
    for name in sorted(RAW & set(names)):
        found[name] = {int(n) for n in run_tshark("-n", "-r", str(path), "-Y", name, "-T", "fields",
                                                   "-e", "frame.number").split()}
    return found, experts


def explained(name: str, tree: Node, expert: str) -> str | None:
    """Why tshark may find `name` in a message where kdissect's filter does not, or None."""
    if "Unsupported" in expert or "Malformed" in expert:
        return "tshark does not decode this version, or misreads it"
    leaves = {path.split(".")[-1] for path in KAFKA_BODY_ALIASES[name]}
    lengths = {f"{leaf}Length" for leaf in leaves}  # a record's null key is its length, -1, alone
    if any((node.name in leaves and node.value is None) or (node.name in lengths and node.value == -1)
           for node in tree.nodes()):
        return "the value is null: tshark shows the field, a kdissect filter counts it absent"
    if name == "kafka.message_timestamp_type" and any(
            node.name == "magic" and node.value == 0 for node in tree.nodes()):
        return "a magic 0 message has no timestamp type; tshark gives it one"
    return None


def capture_paths() -> list[Path]:
    """The shipped captures, and the third-party ones where they are (their absence fails
    CI in the interop tests)."""
    public = sorted(PUBLIC_CAPTURES.glob("*.pcap*")) if PUBLIC_CAPTURES.is_dir() else []
    return sorted(CAPTURES.glob("*.pcap")) + public


def test_every_alias_is_a_tshark_name_with_a_path_the_definitions_have():
    """No typo in the table: each name is one tshark knows, and resolves to real fields."""
    unknown = set(KAFKA_BODY_ALIASES) - tshark_field_names()
    # tshark 4.0 has no topic id or high watermark name; kafka.error_code is kept for kafka.error
    assert unknown <= {"kafka.topic_id", "kafka.high_watermark", "kafka.error_code"}, unknown
    for name in KAFKA_BODY_ALIASES:
        field = resolve(name)
        assert field.label != "absent" and field.paths, name


@pytest.mark.parametrize("path", capture_paths(), ids=lambda p: p.name)
def test_tshark_finds_no_kafka_field_that_the_same_name_misses_here(path: Path):
    names = sorted(set(KAFKA_BODY_ALIASES) & tshark_field_names())
    theirs, experts = tshark_frames(path, names)
    messages = list(read_messages(path, ports=PORTS))
    in_frame: dict[int, list[Message]] = {}
    for message in messages:
        in_frame.setdefault(message.frame.last_packet, []).append(message)
    missed = []
    for name in names:
        keep = compile_filter(name)
        ours = {m.frame.last_packet for m in messages if keep(m)}
        for frame in sorted(theirs[name] - ours):
            expert = experts.get(frame, "")
            if not any(explained(name, m.tree(), expert) for m in in_frame.get(frame, [])):
                missed.append((name, frame))
    assert missed == []


@pytest.mark.parametrize(("capture", "expression"), [
    ("incident.pcap", 'kafka.consumer_group == "billing"'),  # DescribeGroups' Groups[] and GroupId
    ("incident.pcap", 'kafka.protocol_name == "range"'),  # a described group's ProtocolData
    ("deepflow_00-produce-v2.pcap", "kafka.message_value"),  # inside a legacy message set
    ("deepflow_00-produce-v2.pcap", "kafka.offset_time"),  # Produce's LogAppendTimeMs
    ("gosniffer_kafka.pcap", "kafka.partition_id == 0"),  # Produce's Index, Metadata's PartitionIndex
    ("ndpi_kafka.pcapng", "kafka.producer_id == -1"),  # a record batch's producerId
    ("deepflow_mixed-with-unsupported.pcap", "kafka.leader_epoch"),  # OffsetCommit's CommittedLeaderEpoch
    ("deepflow_mixed-with-unsupported.pcap", "kafka.generation_id"),  # GenerationIdOrMemberEpoch too
], ids=lambda value: value if value.endswith(("pcap", "pcapng")) else None)
def test_where_tshark_decodes_the_same_expression_selects_the_same_frames(capture: str, expression: str):
    folder = CAPTURES if (CAPTURES / capture).is_file() else PUBLIC_CAPTURES
    if not (folder / capture).is_file():
        missing(f"third-party capture {capture} not found in {PUBLIC_CAPTURES}")
    keep = compile_filter(expression)
    ours = [m.frame.last_packet for m in read_messages(folder / capture, ports=PORTS) if keep(m)]
    theirs = [int(n) for n in run_tshark("-n", "-r", str(folder / capture), "-Y", expression,
                                         "-T", "fields", "-e", "frame.number").split()]
    assert ours == theirs and ours


def test_a_field_name_reaches_every_spelling_the_definitions_in_use_give_it():
    """Kafka's own CreateTopics definition writes `timeoutMs` and `validateOnly` (every other
    message writes `TimeoutMs`); kafka-python ships Kafka's files, this project's own spell
    them as the rest. A filter finds the field under either name, with either source."""
    if kafka_python_source() is None:
        missing("kafka-python is not installed (pip install -e '.[test]')")
    path = CAPTURES / "tansu_records.pcap"
    create = [m.frame.last_packet for m in read_messages(path) if m.api_key == 19 and m.is_request]
    try:
        for installed in (True, False):
            configure_definitions(installed=installed)
            names = {node.name for m in read_messages(path) if m.api_key == 19 and m.is_request
                     for node in m.tree().nodes()}
            assert ("timeoutMs" in names) is installed  # the tree shows the source's own spelling
            for expression in ("TimeoutMs == 5000", "kafka.timeout == 5000", "ValidateOnly == false",
                               *(["timeoutMs == 5000"] if installed else [])):
                keep = compile_filter(expression)
                assert [m.frame.last_packet for m in read_messages(path) if keep(m) and m.api_key == 19] \
                    == create, (installed, expression)
        with pytest.raises(FilterError, match="unknown field 'timeoutMs'"):
            compile_filter("timeoutMs == 5000")  # our own files alone do not have that spelling
    finally:
        set_sources(None)
