"""`-i` summary info and the meaning every definition carries, on real bytes.

The everyday APIs' summaries agree with tshark on the third-party captures
(topics, groups, members, generations, partition counts, error names) and with
the records table and the sidecar on the shipped Tansu capture; broker and
producer ids, error codes, timestamps and durations read the same in every API,
in the tree and in the rows, and a per-API rule still wins where it has one.
"""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

import kdissect
from kdissect.decode.schema import message_plan
from kdissect.decode.schema.plan import (
    BROKER_ID,
    DURATION_MS,
    ERROR_CODE,
    PRODUCER_ID,
    TIMESTAMP_MS,
)
from kdissect.dissectors.summaries import entities, record_count
from kdissect.error_codes import error_name
from kdissect.pair.message import Message
from kdissect.present.summary import info
from tests.craft import Conversation, ethernet, kafka_request, records, write_pcap
from tests.test_interop_captures import decoded_by_tshark, messages, tshark_rows

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
TANSU = CAPTURES / "tansu_records.pcap"
# APIs whose `partitions=` counts exactly the partitions tshark lists, per direction.
PARTITION_COUNTS = {0, 2, 8}


def facts(message: Message) -> dict[str, str]:
    """The `label=value` words of a message's `-i` info."""
    words = info(message, body_info=True).split(" ")
    return dict(word.split("=", 1) for word in words if "=" in word)


def test_summary_info_agrees_with_tshark_on_third_party_captures(public_captures: Path) -> None:
    compared = Counter[str]()
    for path, message, theirs in decoded_by_tshark(public_captures):
        topics, partitions, errors, _, groups = theirs
        said = facts(message)
        assert said.get("topics", "") == ",".join(dict.fromkeys(topics)), (path.name, message.number)
        assert said.get("group", "") == ",".join(dict.fromkeys(groups)), (path.name, message.number)
        named = Counter(error_name(int(code)) for code in errors if code != "0")
        expected = ",".join(f"{name}x{n}" if n > 1 else name for name, n in named.items())
        assert said.get("errors", "") == expected, (path.name, message.number)
        if message.api_key in PARTITION_COUNTS and partitions:
            assert said["partitions"] == str(len(partitions)), (path.name, message.number)
            compared["partitions"] += 1
        compared["messages"] += 1
        compared["topics"] += bool(topics)
        compared["groups"] += bool(groups)
    assert compared["messages"] >= 15 and compared["topics"] >= 8 and compared["groups"] >= 3
    assert compared["partitions"] >= 4


def test_group_members_and_generations_agree_with_tshark(public_captures: Path) -> None:
    import subprocess

    seen = 0
    for name in ("deepflow_13-leave-group-v4.pcap", "deepflow_14-sync-group-v5.pcap",
                 "deepflow_mixed-with-unsupported.pcap"):
        path = public_captures / name
        tshark_rows(path)  # skips or fails when tshark is absent
        out = subprocess.run(["tshark", "-r", str(path), "-d", "tcp.port==36333,kafka", "-Y", "kafka", "-T", "fields", "-E", "occurrence=f", "-e", "frame.number",
                              "-e", "kafka.member_id", "-e", "kafka.generation_id"],
                             capture_output=True, text=True, check=True).stdout
        members = {int(n): (m, g) for n, m, g in (line.split("\t") for line in out.splitlines())}
        for message in messages(path):
            said = facts(message)
            member, generation = members.get(message.frame.last_packet, ("", ""))
            if message.is_request and member and message.api_key in (8, 12, 13, 14):
                assert said["member"] == member and said.get("generation", generation) == generation
                seen += 1
    assert seen >= 4


def test_produce_and_fetch_summaries_count_what_the_records_table_holds() -> None:
    capture = kdissect.read_pcap(TANSU)
    table = capture.records
    produce = fetch = 0
    for message in capture.message_list:
        said = facts(message)
        if message.api_key == 0 and message.is_request:
            body = message.values()
            assert body is not None
            sent = [p["Records"] for t in body["TopicData"] for p in t["PartitionData"]]
            assert said["records"] == str(int((table.number == message.number).sum()))
            assert said["bytes"] == str(sum(len(r) for r in sent))
            assert said["partitions"] == str(len(sent)) and said["acks"] == "-1"
            produce += 1
        elif message.api_key == 1 and not message.is_request:
            rows = table[table.number == message.number]
            assert said["records"] == str(len(rows))
            body = message.values()
            assert body is not None
            marks = [p["HighWatermark"] for t in body["Responses"] for p in t["Partitions"]]
            assert said["high_watermarks"] == ",".join(map(str, dict.fromkeys(marks)))
            fetch += 1
    assert produce == 6 and fetch == 1


def test_transactional_summaries_name_the_transaction_and_the_producer() -> None:
    lines = {(m.api_name, m.is_request): facts(m) for m in kdissect.read_pcap(TANSU).message_list
             if m.api_key in (10, 24, 26)}
    assert lines[("FindCoordinator", True)] == {"key": "kdissect-txn", "key_type": "transaction",
                                                "client": "kdissect-records-txn"}
    assert lines[("FindCoordinator", False)]["coordinator"].startswith("kdissect-txn->111@127.0.0.1:")
    add = lines[("AddPartitionsToTxn", True)]
    assert (add["transactional_id"], add["partitions"], add["topics"]) == ("kdissect-txn", "2", "records")
    end = lines[("EndTxn", True)]
    assert end["result"] == "commit" and end["producer"] == add["producer"]


def test_record_count_reads_batch_headers_and_stops_at_a_cut_batch() -> None:
    capture = kdissect.read_pcap(TANSU)
    request = next(m for m in capture.message_list if m.api_key == 0 and m.is_request)
    body = request.values()
    assert body is not None
    blob = body["TopicData"][0]["PartitionData"][0]["Records"]
    whole = record_count(blob)
    assert whole == int(((capture.records.number == request.number)
                         & (capture.records.partition_index == 0)).sum())
    assert record_count(blob[:-1]) < whole  # the cut batch is not counted
    assert record_count(b"") == 0


def test_every_definition_types_broker_ids_and_error_codes_for_the_generic_meaning() -> None:
    metadata = message_plan(3, 12, "response")
    assert metadata is not None
    fields = {f.name: f for f in metadata.body.fields}
    assert fields["ControllerId"].meaning == BROKER_ID and fields["ThrottleTimeMs"].meaning == DURATION_MS
    brokers = fields["Brokers"].element
    assert brokers is not None and brokers.struct is not None
    assert {f.name: f.meaning for f in brokers.struct.fields}["NodeId"] == BROKER_ID
    produce = message_plan(0, 9, "response")
    assert produce is not None
    partition = produce.body.fields[0].element.struct.fields[1].element.struct  # type: ignore[union-attr]
    meanings = {f.name: f.meaning for f in partition.fields}
    assert meanings["ErrorCode"] == ERROR_CODE and meanings["LogAppendTimeMs"] == TIMESTAMP_MS
    init = message_plan(22, 4, "response")
    assert init is not None and {f.name: f.meaning for f in init.body.fields}["ProducerId"] == PRODUCER_ID
    assert entities(metadata.body, {"Topics": [{"Name": "a"}, {"Name": "b"}]}, "topicName") == ["a", "b"]


MEANINGFUL = ("ProducerId", "MaxWaitMs", "TransactionTimeoutMs", "ControllerId", "PreferredReadReplica",
              "LogAppendTimeMs", "ErrorCode", "ThrottleTimeMs")


def row_displays(row: tuple, found: dict[str, set[str]]) -> None:
    if row[0] in MEANINGFUL:
        found.setdefault(row[0], set()).add(row[3])
    for child in row[7] or ():
        row_displays(child, found)


def test_generic_meaning_reads_alike_in_tree_and_rows_across_apis() -> None:
    capture = kdissect.read_pcap(TANSU)
    shown: dict[tuple[str | None, str, str], set[str]] = {}
    laid_out = 0
    for message in capture.message_list:
        rows = message.rows()  # before the tree: a message with a tree is not laid out again
        in_tree: dict[str, set[str]] = {}
        for node, _, _ in message.tree(keep=False).walk():
            if node.name in MEANINGFUL:
                in_tree.setdefault(node.name, set()).add(node.display)
        if rows is not None:
            in_rows: dict[str, set[str]] = {}
            row_displays(rows, in_rows)
            assert in_rows == in_tree, message.number
            laid_out += 1
        for name, displays in in_tree.items():
            shown.setdefault((message.api_name, message.kind, name), set()).update(displays)
    assert laid_out >= 60  # the rest refuse the fast path (tagged fields present): tree only
    assert shown[("InitProducerId", "request", "ProducerId")] == {"-1 (none)"}
    assert shown[("Fetch", "request", "MaxWaitMs")] == {"500 (500 ms)"}
    assert shown[("InitProducerId", "request", "TransactionTimeoutMs")] >= {"60000 (1 min)"}
    assert shown[("Fetch", "response", "PreferredReadReplica")] == {"-1 (none)"}
    assert shown[("Produce", "response", "LogAppendTimeMs")] == {"-1"}  # none given: plain
    assert shown[("Metadata", "response", "ControllerId")] == {"111"}


def test_an_error_code_reads_by_name_in_any_api(public_captures: Path) -> None:
    (_, response) = kdissect.read_pcap(public_captures / "deepflow_11-join-group-v7.pcap").message_list
    assert response.tree().children[2]["ErrorCode"].display == "-1 (UNKNOWN_SERVER_ERROR)"


def test_strings_from_the_wire_are_escaped_in_the_summary(tmp_path: Path) -> None:
    def text(value: bytes) -> bytes:
        return struct.pack(">h", len(value)) + value

    group, member = b"pay\x1b[31m<script>", b"m\n1"
    talk = Conversation.between(("10.0.0.2", 40100), ("10.0.0.1", 9092))
    talk.handshake()
    talk.send(True, kafka_request(12, 0, 1, body=text(group) + struct.pack(">i", 3) + text(member)))
    path = write_pcap(tmp_path / "heartbeat.pcap", records(talk.packets, wrap=ethernet))
    (message,) = kdissect.read_pcap(path).message_list
    line = info(message, body_info=True)
    assert line.isprintable() and "\x1b" not in line and "\n" not in line
    assert "group=pay" in line and "generation=3" in line


def test_coordinator_and_group_summaries_say_what_the_peer_encoded() -> None:
    """The incident's FindCoordinator and DescribeGroups answers, as kio encoded them (sidecar)."""
    import json

    capture = kdissect.read_pcap(CAPTURES / "incident.pcap")
    sidecar = json.loads((CAPTURES / "incident.json").read_text())
    exchanges = capture.exchanges
    checked = 0
    for exchange in sidecar["exchanges"]:
        if exchange["api_name"] not in ("FindCoordinator", "DescribeGroups"):
            continue
        match = exchanges[(exchanges.client == f"127.0.0.1:{exchange['client_port']}")
                          & (exchanges.correlation_id == exchange["correlation_id"])]
        said = facts(capture.message(int(match.response.iloc[0])))
        answer = exchange["response"]
        if exchange["api_name"] == "FindCoordinator":
            (coordinator,) = answer["Coordinators"]
            node = ("none" if coordinator["NodeId"] == -1
                    else f"{coordinator['NodeId']}@{coordinator['Host']}:{coordinator['Port']}")
            assert said["coordinator"] == f"{coordinator['Key']}->{node}"
            assert said.get("errors", "NONE") == error_name(coordinator["ErrorCode"])
        else:
            (group,) = answer["Groups"]
            assert (said["group"], said["states"], said["protocols"]) == (
                group["GroupId"], group["GroupState"], group["ProtocolData"])
        checked += 1
    assert checked == 5
