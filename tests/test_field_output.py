"""`-T fields -e NAME`: columns of chosen fields, checked against tshark's own -T fields on
the same captures, and against what the clients of the Tansu session sent (its sidecar)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CAPTURES, PUBLIC_CAPTURES, missing
from tests.every_message import TreesBuilt, reading_captures

HEADER_COLUMNS = ["frame.number", "frame.time_epoch", "frame.time_relative", "ip.src", "ip.dst",
                  "tcp.srcport", "tcp.dstport", "kafka.request_key", "kafka.request.version",
                  "kafka.correlation_id", "kafka.len"]


def kdissect(*args: str) -> str:
    run = subprocess.run([sys.executable, "-m", "kdissect", *args], capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    return run.stdout


def tshark_fields(path: Path, columns: list[str], *options: str) -> list[str]:
    if shutil.which("tshark") is None:
        missing("tshark is not installed (apt-get install tshark)")
    command = ["tshark", "-n", "-r", str(path), "-Y", "kafka", "-T", "fields", *options,
               *(x for column in columns for x in ("-e", column))]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=True).stdout.splitlines()


def options(columns: list[str]) -> list[str]:
    return ["-T", "fields", *(x for column in columns for x in ("-e", column))]


@pytest.mark.parametrize("name", ["quorum_story.pcap", "incident.pcap", "tansu_records.pcap",
                                  "gosniffer_kafka.pcap", "deepflow_mixed-with-unsupported.pcap"])
def test_header_columns_are_tsharks_row_for_row(name: str):
    """Frame numbers, times to the nanosecond, addresses, ports, a request's API key and
    version, correlation ids and lengths: the same text as tshark's, on captures where each
    frame holds at most one Kafka message. (A response's API key is left out: tshark loses
    the pairing after a request of a version it cannot decode.)"""
    path = CAPTURES / name if (CAPTURES / name).is_file() else PUBLIC_CAPTURES / name
    if not path.is_file():
        missing(f"third-party capture {name} not found in {PUBLIC_CAPTURES}")
    ours = kdissect(*options(HEADER_COLUMNS), str(path)).splitlines()
    assert ours == tshark_fields(path, HEADER_COLUMNS) and len(ours) >= 4


def test_body_fields_where_tshark_decodes_them():
    """Group names, protocol names and members of DescribeGroups, as tshark reads them."""
    columns = ["frame.number", "kafka.consumer_group", "kafka.protocol_name"]
    path = CAPTURES / "incident.pcap"
    ours = kdissect(*options(columns), "-Y", "kafka.consumer_group", str(path)).splitlines()
    theirs = [row for row in tshark_fields(path, columns) if row.split("\t")[1]]
    assert ours == theirs and len(ours) == 4


def test_record_keys_are_the_keys_the_producers_sent():
    """Every Produce request's record keys, in order, are what kafka-python produced
    (the session's sidecar), through every compression codec."""
    path = CAPTURES / "tansu_records.pcap"
    session = json.loads((CAPTURES / "tansu_records.json").read_text())
    rows = kdissect(*options(["key"]), "-E", "aggregator=/s", "-Y", 'api_key == 0 && direction == "request"',
                    str(path)).splitlines()
    keys = [key for row in rows for key in row.split(" ") if row]
    sent = [record["key"] for record in session["produced"] if record["key"] is not None]
    assert sorted(keys) == sorted(sent) and keys  # bytes as hex, as tshark writes them


def test_occurrence_aggregator_quote_and_header():
    path = str(CAPTURES / "tansu_topic_partitions.pcap")
    select = ["-Y", "frame.number == 32"]  # a Metadata response naming several topics
    every = kdissect(*options(["Topics[].Name"]), *select, path).strip()
    names = every.split(",")
    assert len(names) > 1
    assert kdissect(*options(["Topics[].Name"]), "-E", "occurrence=f", *select, path).strip() == names[0]
    assert kdissect(*options(["Topics[].Name"]), "-E", "occurrence=l", *select, path).strip() == names[-1]
    assert kdissect(*options(["Topics[].Name"]), "-E", "aggregator=;", *select, path).strip() == ";".join(names)
    quoted = kdissect(*options(["frame.number", "Topics[].Name"]), "-E", "quote=d", "-E", "separator=,",
                      "-E", "header=y", *select, path).splitlines()
    assert quoted == ['"frame.number","Topics[].Name"', f'"32","{every}"']


@pytest.mark.parametrize(("name", "columns"), [
    ("incident.pcap", ["number", "frame", "time_relative", "api_name", "latency_ms", "ErrorCode", "kafka.topic_name"]),
    ("tansu_records.pcap", ["number", "stream", "kafka.topic_name", "key", "kafka.error", "notes"]),
])
def test_jobs_do_not_change_the_columns(name: str, columns: list[str]):
    """With --jobs the workers make the body columns and the parent the rest: the same rows."""
    path = str(CAPTURES / name)
    assert kdissect(*options(columns), "-j", "2", path) == kdissect(*options(columns), "-j", "1", path) != ""


# Columns of Produce and Fetch bodies outside their record batches, and of other APIs.
OUTSIDE_RECORDS = ["kafka.topic_name", "kafka.partition_id", "kafka.error", "ErrorCode", "Acks", "TimeoutMs",
                   "HighWatermark", "LogStartOffset", "ProducerId", "Topics[].Partitions[].Index"]


RECORD_COLUMNS = [
    "key", "value", "offset", "timestamp", "timestampDelta", "offsetDelta", "keyLength", "valueLength",
    "headers", "headerKey", "headerValue", "headers[].headerKey", "records[].key", "records", "records[0].value",
    "records[-1].offset", "baseOffset", "batchLength", "partitionLeaderEpoch", "magic", "crc", "lastOffsetDelta",
    "baseTimestamp", "maxTimestamp", "producerId", "producerEpoch", "baseSequence", "recordCount", "compression",
    "timestampType", "isTransactional", "isControl", "Records", "kafka.message_value", "kafka.batch_codec",
    "kafka.producer_id", "kafka.topic_name", "Topics[].Partitions[].Records",
]  # fmt: skip


QUORUM_COLUMNS = ["CurrentVoters[].lag", "Observers[-1].lag", "ReplicaId"]  # lag: derived by a dissector


def tree_values(message, field) -> list:
    """A field's values read from the message's whole annotated tree, as filters read every
    body before flat values were read for them."""
    from kdissect.decode.dissect import message_body
    from kdissect.present.fields import TreeBody, body_api_keys

    if message.api_key not in field.apis or message.api_key not in body_api_keys():
        return []
    if not message.is_request and message.pair is None:
        return []
    body = message_body(message.tree(keep=False))
    return [] if body is None else [value for path in field.paths for value in TreeBody(body).values(path)]


def comparable(values: list) -> list:
    """Values as compared: every struct alike (a tree node, a dict: present, equal to nothing)."""
    from kdissect.decode.tree import Node

    return ["struct" if isinstance(value, dict | Node) else value for value in values]


@pytest.mark.parametrize("columns", [OUTSIDE_RECORDS, ["kafka.topic_name", "key", "value", "ErrorCode"],
                                     ["kafka.topic_name", "Topics[].Name"], RECORD_COLUMNS,
                                     QUORUM_COLUMNS])
def test_bodies_read_as_values_give_what_the_tree_gives(columns: list[str], monkeypatch):
    """Columns and filters read bodies from flat values, record batches too (`record_values`),
    index only the names they start with and walk only where those can lie: the values are
    those of the whole annotated tree, on every shipped, fuzz-found and third-party capture
    (legacy message sets, every compression codec, batches cut short)."""
    from kdissect.pipeline import read_messages
    from kdissect.present.fields import BodyReading
    from kdissect.present.filter import FieldContext, resolve

    fields = [resolve(name) for name in columns]
    reading = BodyReading.of(path for field in fields for path in field.paths)
    assert reading.into_records == ("key" in columns) and reading.names is not None
    # partitions are not walked for names that only topics have; the values a dissector
    # derives (DescribeQuorum's lag) are made only for a path that names them
    assert ("Partitions" in reading.skip) == (columns == ["kafka.topic_name", "Topics[].Name"])
    assert reading.generated == (columns is QUORUM_COLUMNS)
    trees = TreesBuilt(monkeypatch)
    compared = data_plane = 0
    for path in reading_captures():
        for message in read_messages(str(path)):
            read = trees.during(lambda m=message: [comparable(list(field.values(FieldContext(m, lambda: 0.0, reading))))
                                                   for field in fields])
            whole = [comparable(tree_values(message, field)) for field in fields]
            differ = [f.name for f, a, b in zip(fields, read, whole, strict=True) if a != b]
            assert read == whole, (path.name, message.number, differ)
            compared += any(read)
            data_plane += message.api_key in (0, 1) and any(read)
    assert compared > 50 and (data_plane > 20 or columns is QUORUM_COLUMNS)
    assert not {0, 1} & set(trees.keys)  # no Produce or Fetch body took the tree (those that decode)


@pytest.mark.parametrize(("args", "says"), [
    (["-T", "fields"], "-T fields needs at least one -e FIELD"),
    (["-e", "api_key"], "-e needs -T fields"),
    (["-E", "header=y"], "-E needs -T fields"),
    (["-T", "fields", "-e", "api_key", "--stats"], "it does not combine with --stats"),
    (["-T", "fields", "-e", "no_such_field"], "-e: unknown field 'no_such_field'"),
    (["-T", "fields", "-e", "Topics"], "-e: field 'Topics' is a struct"),
    (["-T", "fields", "-e", "api_key", "-E", "colour=red"], "-E: 'colour=red': not an option"),
    (["-T", "fields", "-e", "api_key", "-E", "header"], "-E: 'header' is not name=value"),
])
def test_usage_errors_are_one_line_and_status_2(args: list[str], says: str):
    run = subprocess.run([sys.executable, "-m", "kdissect", *args, str(CAPTURES / "quorum_story.pcap")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 2 and run.stdout == ""
    assert says in run.stderr.splitlines()[-1] and "Traceback" not in run.stderr


def test_the_readme_example_is_real_output():
    readme = (CAPTURES.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split("$ kdissect -T fields ", 1)[1].split("```", 1)[0]
    command, _, shown = block.partition("\n      ")[2].partition("\n")
    assert command.endswith("captures/tansu_records.pcap")
    rows = kdissect("-T", "fields", "-e", "frame.number", "-e", "api_name", "-e", "latency_ms", "-e",
                    "kafka.topic_name", "-e", "ErrorCode", "-E", "header=y", "-Y", "api_key == 0", "-c", "4",
                    str(CAPTURES / "tansu_records.pcap"))
    assert block.startswith("-e frame.number -e api_name -e latency_ms -e kafka.topic_name -e ErrorCode \\\n")
    assert command.strip() == "-E header=y -Y 'api_key == 0' -c 4 captures/tansu_records.pcap"
    assert shown == rows
