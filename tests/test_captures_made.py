"""The captures shipped in captures/ are what their scripts and sidecar files say they are.

Everything here is checked with tools kdissect did not write: tshark reads the
captures (TCP health, Kafka headers) and kafka-python's protocol classes decode
the message bodies, which must equal the values the sidecars say were encoded.
One live test re-records the Tansu session end to end.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin.cluster import DescribeQuorumResponse
from kafka.protocol.admin.topics import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kafka.protocol.admin.transactions import DescribeProducersRequest, DescribeProducersResponse

from tests.conftest import missing

STORIES = ("producers_story", "quorum_story")
BROKER_SESSION = "tansu_topic_partitions"
CAPTURES = (BROKER_SESSION, *STORIES)
COMPLETE_CONVERSATION = 31  # tshark's tcp.completeness: SYN, SYN-ACK, ACK, data, FIN
DESCRIBE_TOPIC_PARTITIONS, DESCRIBE_PRODUCERS, DESCRIBE_QUORUM = 75, 61, 55
KAFKA_PYTHON_RESPONSES = {DESCRIBE_PRODUCERS: DescribeProducersResponse,
                          DESCRIBE_QUORUM: DescribeQuorumResponse}


# -- reading captures with tshark ----------------------------------------------------

def tshark(pcap: Path, *arguments: str) -> list[list[str]]:
    """Rows of tab-separated fields printed by tshark for one capture."""
    executable = shutil.which("tshark")
    if executable is None:
        missing("tshark is not installed (apt-get install tshark)")
    run = subprocess.run([executable, "-n", "-r", str(pcap), *arguments],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    return [line.split("\t") for line in run.stdout.splitlines() if line]


def kafka_headers(pcap: Path, port: int) -> list[list[str]]:
    """(source port, request api key, api version, correlation id) per Kafka message."""
    return tshark(pcap, "-d", f"tcp.port=={port},kafka", "-Y", "kafka", "-T", "fields",
                  "-e", "tcp.srcport", "-e", "kafka.request_key", "-e", "kafka.api_version",
                  "-e", "kafka.correlation_id")


def requests_on_wire(pcap: Path, port: int) -> list[tuple[int, int, int, int]]:
    return [(int(source), int(key), int(version), int(correlation))
            for source, key, version, correlation in kafka_headers(pcap, port)
            if int(source) != port]


def responses_on_wire(pcap: Path, port: int) -> list[int]:
    return [int(row[3]) for row in kafka_headers(pcap, port) if int(row[0]) == port]


@dataclass(frozen=True, slots=True)
class WireMessage:
    """One Kafka message cut from a TCP stream that tshark printed, without its size prefix."""

    stream: int
    source_port: int
    data: bytes


def wire_messages(pcap: Path) -> list[WireMessage]:
    """Every Kafka message in capture order (loopback captures: segments arrive in order)."""
    pending: dict[tuple[int, int], bytes] = defaultdict(bytes)
    messages = []
    for stream, source, payload in tshark(pcap, "-Y", "tcp.len > 0", "-T", "fields",
                                          "-e", "tcp.stream", "-e", "tcp.srcport",
                                          "-e", "tcp.payload"):
        key = (int(stream), int(source))
        buffered = pending[key] + bytes.fromhex(payload)
        while len(buffered) >= 4 and len(buffered) >= 4 + int.from_bytes(buffered[:4], "big"):
            end = 4 + int.from_bytes(buffered[:4], "big")
            messages.append(WireMessage(key[0], key[1], buffered[4:end]))
            buffered = buffered[end:]
        pending[key] = buffered
    assert not any(pending.values()), "a Kafka message was cut short"
    return messages


# -- sidecars --------------------------------------------------------------------------

def sidecar(captures: Path, name: str) -> dict[str, Any]:
    return json.loads((captures / f"{name}.json").read_text())


def kafka_port(document: dict[str, Any]) -> int:
    return int((document.get("peer") or document["broker"])["port"])


def snake_case(value: Any) -> Any:
    """Sidecar values keyed the way kafka-python names fields (ProducerId -> producer_id)."""
    if isinstance(value, dict):
        return {re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower(): snake_case(item)
                for key, item in value.items()}
    if isinstance(value, list):
        return [snake_case(item) for item in value]
    return value


def story_exchanges(document: dict[str, Any], api_key: int) -> list[dict[str, Any]]:
    return [exchange for exchange in document["exchanges"] if exchange["api_key"] == api_key]


def served_api(document: dict[str, Any]) -> int:
    keys = {exchange["api_key"] for exchange in document["exchanges"] if "step" in exchange}
    assert len(keys) == 1
    return keys.pop()


# -- every capture -----------------------------------------------------------------------

@pytest.mark.parametrize("name", CAPTURES)
def test_capture_is_small_and_its_tcp_streams_are_complete_and_clean(shipped_captures: Path,
                                                                     name: str) -> None:
    pcap = shipped_captures / f"{name}.pcap"
    assert 2_000 < pcap.stat().st_size < 64_000
    assert tshark(pcap, "-Y", "tcp.analysis.flags") == []
    last_state: dict[str, int] = {}
    for stream, completeness in tshark(pcap, "-T", "fields", "-e", "tcp.stream",
                                       "-e", "tcp.completeness"):
        last_state[stream] = int(completeness)
    assert len(last_state) >= 2
    assert set(last_state.values()) == {COMPLETE_CONVERSATION}


@pytest.mark.parametrize("name", CAPTURES)
def test_every_request_is_answered_on_its_connection(shipped_captures: Path, name: str) -> None:
    pcap = shipped_captures / f"{name}.pcap"
    port = kafka_port(sidecar(shipped_captures, name))
    asked: dict[int, list[bytes]] = defaultdict(list)
    answered: dict[int, list[bytes]] = defaultdict(list)
    for message in wire_messages(pcap):
        if message.source_port == port:
            answered[message.stream].append(message.data[0:4])
        else:
            asked[message.stream].append(message.data[4:8])
    assert asked == answered  # same correlation ids, in the same order, per connection
    count = sum(len(ids) for ids in asked.values())
    assert count == len(requests_on_wire(pcap, port)) == len(responses_on_wire(pcap, port))


# -- the scripted peer's stories -----------------------------------------------------------

@pytest.mark.parametrize("name", STORIES)
def test_sidecar_exchanges_are_on_the_wire_in_order(shipped_captures: Path, name: str) -> None:
    document = sidecar(shipped_captures, name)
    port = kafka_port(document)
    pcap = shipped_captures / document["capture"]
    expected = [(e["client_port"], e["api_key"], e["api_version"], e["correlation_id"])
                for e in document["exchanges"]]
    assert requests_on_wire(pcap, port) == expected
    assert responses_on_wire(pcap, port) == [e["correlation_id"] for e in document["exchanges"]]
    assert 10 <= len(story_exchanges(document, served_api(document))) <= 30


@pytest.mark.parametrize("name", STORIES)
def test_story_responses_on_the_wire_hold_the_sidecar_values(shipped_captures: Path,
                                                             name: str) -> None:
    document = sidecar(shipped_captures, name)
    port = kafka_port(document)
    api_key = served_api(document)
    responses = [m for m in wire_messages(shipped_captures / document["capture"])
                 if m.source_port == port]
    checked = 0
    for exchange, response in zip(document["exchanges"], responses, strict=True):
        assert response.data[:4] == exchange["correlation_id"].to_bytes(4, "big", signed=True)
        if exchange["api_key"] != api_key:
            continue
        decoded = KAFKA_PYTHON_RESPONSES[api_key].decode(
            response.data, version=exchange["api_version"], header=True)
        assert decoded.to_dict() == snake_case(exchange["response"])
        checked += 1
    assert checked == len(story_exchanges(document, api_key))


def test_producers_requests_on_the_wire_hold_the_sidecar_values(shipped_captures: Path) -> None:
    document = sidecar(shipped_captures, "producers_story")
    port = kafka_port(document)
    requests = [m for m in wire_messages(shipped_captures / document["capture"])
                if m.source_port != port]
    for exchange, request in zip(document["exchanges"], requests, strict=True):
        if exchange["api_key"] == DESCRIBE_PRODUCERS:
            decoded = DescribeProducersRequest.decode(request.data, version=0, header=True)
            assert decoded.to_dict() == snake_case(exchange["request"])


def producer_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for exchange in story_exchanges(document, DESCRIBE_PRODUCERS):
        for topic in exchange["response"]["Topics"]:
            for partition in topic["Partitions"]:
                for state in partition["ActiveProducers"]:
                    rows.append({"step": exchange["step"], "topic": topic["Name"],
                                 "partition": partition["PartitionIndex"], **state})
    return rows


def test_producers_story_advances_bumps_an_epoch_and_leaves_a_transaction_open(
        shipped_captures: Path) -> None:
    rows = producer_rows(sidecar(shipped_captures, "producers_story"))
    by_writer: dict[tuple[int, int, str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_writer[(row["ProducerId"], row["ProducerEpoch"], row["topic"], row["partition"])].append(row)
    assert len({key[2:] for key in by_writer}) == 5 and len({key[2] for key in by_writer}) == 2
    for history in by_writer.values():
        sequences = [row["LastSequence"] for row in history]
        assert sequences == sorted(sequences)
    assert sum(len({row["LastSequence"] for row in h}) > 3 for h in by_writer.values()) >= 4
    epochs = Counter(key[0] for key in {key[:2] for key in by_writer})
    assert [producer for producer, count in epochs.items() if count > 1] == [3002]
    open_offsets = {(row["ProducerId"], row["partition"], row["CurrentTxnStartOffset"])
                    for row in rows if row["CurrentTxnStartOffset"] != -1}
    assert {producer for producer, _, _ in open_offsets} == {7001}
    assert len(open_offsets) == 2  # one offset per partition, unchanged call after call
    assert {row["CoordinatorEpoch"] for row in rows if row["ProducerId"] != 7001} == {-1}


def test_producers_story_has_a_partition_error_with_a_message(shipped_captures: Path) -> None:
    document = sidecar(shipped_captures, "producers_story")
    errors = [(exchange["step"], partition["ErrorCode"], partition["ErrorMessage"])
              for exchange in story_exchanges(document, DESCRIBE_PRODUCERS)
              for topic in exchange["response"]["Topics"]
              for partition in topic["Partitions"] if partition["ErrorCode"] != 0]
    assert errors and all(code == 6 and message for _, code, message in errors)


def quorum_partitions(document: dict[str, Any]) -> list[tuple[int, int, dict[str, Any]]]:
    return [(exchange["step"], exchange["api_version"],
             exchange["response"]["Topics"][0]["Partitions"][0])
            for exchange in story_exchanges(document, DESCRIBE_QUORUM)]


def test_quorum_story_covers_every_version_and_tells_its_story(shipped_captures: Path) -> None:
    document = sidecar(shipped_captures, "quorum_story")
    pcap = shipped_captures / document["capture"]
    versions = {version for _, key, version, _ in requests_on_wire(pcap, kafka_port(document))
                if key == DESCRIBE_QUORUM}
    assert versions == {0, 1, 2}
    partitions = quorum_partitions(document)
    watermarks = [partition["HighWatermark"] for _, _, partition in partitions]
    assert watermarks == sorted(set(watermarks))
    leaders = [(partition["LeaderId"], partition["LeaderEpoch"]) for _, _, partition in partitions]
    assert len(set(leaders)) == 2 and leaders[0][1] + 1 == leaders[-1][1]
    assert leaders[0][0] != leaders[-1][0]
    observer_counts = [len(partition["Observers"]) for _, _, partition in partitions]
    assert observer_counts[0] < observer_counts[-1]


def test_quorum_story_has_a_voter_falling_behind_and_catching_up(shipped_captures: Path) -> None:
    lags: dict[int, list[int]] = defaultdict(list)
    for _, version, partition in quorum_partitions(sidecar(shipped_captures, "quorum_story")):
        if version == 2:
            for voter in partition["CurrentVoters"]:
                lags[voter["ReplicaId"]].append(partition["HighWatermark"] - voter["LogEndOffset"])
    laggards = [lag for lag in lags.values() if max(lag) > 100]
    assert len(laggards) == 1
    peak = laggards[0].index(max(laggards[0]))
    assert laggards[0][peak - 2] < laggards[0][peak - 1] < laggards[0][peak]
    assert laggards[0][-1] == 0


def test_quorum_v2_responses_carry_nodes_with_listeners(shipped_captures: Path) -> None:
    document = sidecar(shipped_captures, "quorum_story")
    for exchange in story_exchanges(document, DESCRIBE_QUORUM):
        nodes = exchange["response"].get("Nodes")
        if exchange["api_version"] < 2:
            assert nodes is None
        else:
            assert [node["NodeId"] for node in nodes] == [1, 2, 3]
            assert all(node["Listeners"][0]["Port"] == 9093 for node in nodes)


# -- the real broker -------------------------------------------------------------------------

def request_counts(pcap: Path, port: int) -> Counter[int]:
    return Counter(key for _, key, _, _ in requests_on_wire(pcap, port))


def test_tansu_capture_holds_its_session(shipped_captures: Path) -> None:
    document = sidecar(shipped_captures, BROKER_SESSION)
    pcap = shipped_captures / document["capture"]
    counts = request_counts(pcap, kafka_port(document))
    calls = document["describe_topic_partitions"]
    assert counts[DESCRIBE_TOPIC_PARTITIONS] == len(calls) == 5
    assert counts[0] == document["produced_records"]  # one Produce request per record sent
    assert counts[19] == 1 and counts[22] == 1  # CreateTopics, InitProducerId (idempotence)


def describe_topic_partitions_on_wire(pcap: Path, port: int) -> list[tuple[Any, Any]]:
    """Each DescribeTopicPartitions request with its response, decoded by kafka-python."""
    messages = wire_messages(pcap)
    requests = [m for m in messages if m.source_port != port
                and int.from_bytes(m.data[:2], "big") == DESCRIBE_TOPIC_PARTITIONS]
    answers = {(m.stream, m.data[:4]): m for m in messages if m.source_port == port}
    return [(DescribeTopicPartitionsRequest.decode(m.data, version=0, header=True),
             DescribeTopicPartitionsResponse.decode(answers[(m.stream, m.data[4:8])].data,
                                                    version=0, header=True))
            for m in requests]


def test_tansu_describe_topic_partitions_requests_and_answers(shipped_captures: Path) -> None:
    document = sidecar(shipped_captures, BROKER_SESSION)
    calls = document["describe_topic_partitions"]
    exchanges = describe_topic_partitions_on_wire(shipped_captures / document["capture"],
                                                  kafka_port(document))
    assert len(exchanges) == len(calls)
    for call, (request, response) in zip(calls, exchanges, strict=True):
        arguments = call["arguments"]
        assert [topic.name for topic in request.topics] == arguments["topics"]
        assert request.response_partition_limit == arguments.get("response_partition_limit",
                                                                 2000)
        cursor = arguments.get("cursor")
        assert (request.cursor is None) == (cursor is None)
        if cursor is not None:
            assert (request.cursor.topic_name, request.cursor.partition_index) == (
                cursor["topic_name"], cursor["partition_index"])
        answered = [(topic.name, topic.error_code, len(topic.partitions))
                    for topic in response.topics]
        assert answered == [(topic["name"], topic["error_code"], len(topic["partitions"]))
                            for topic in call["result"]["topics"]]
    assert exchanges[-1][1].topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_recording_says_clearly_when_tcpdump_is_missing(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from tools.recording import RecordingError, Tcpdump

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RecordingError, match="tcpdump is not installed"):
        Tcpdump(tmp_path / "never.pcap", "tcp port 9").start()
    assert not (tmp_path / "never.pcap").exists()


def test_recording_says_clearly_when_the_broker_is_missing(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from tools.recording import RecordingError, TansuBroker

    monkeypatch.setenv("CALF_TANSU_BIN", str(tmp_path / "no-tansu-here"))
    with pytest.raises(RecordingError, match="no Tansu broker binary"):
        TansuBroker().start()


@pytest.mark.broker
def test_tansu_recording_end_to_end(tmp_path: Path) -> None:
    from tools.record_broker import record

    pcap = tmp_path / "session.pcap"
    document = record(pcap)
    port = kafka_port(document)
    assert request_counts(pcap, port)[DESCRIBE_TOPIC_PARTITIONS] == 5
    exchanges = describe_topic_partitions_on_wire(pcap, port)
    assert [request.cursor is not None for request, _ in exchanges] == [
        False, False, True, True, False]
    assert [topic.name for topic in exchanges[0][1].topics] == ["orders", "payments", "audit"]
    assert exchanges[-1][1].topics[0].error_code == 3
