"""The `kdissect` command driven as a user drives it: a subprocess, real captures, real output."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap, wrpcap

from tests.conftest import CAPTURES

QUORUM = CAPTURES / "quorum_story.pcap"
PRODUCERS = CAPTURES / "producers_story.pcap"
TANSU = CAPTURES / "tansu_topic_partitions.pcap"
SUMMARY = re.compile(
    r"^ *(?P<number>\d+) +(?P<time>-?[\d.:]+) +(?P<src>\S+) -> (?P<dst>\S+) +(?P<api>\S+|\(request missing\)) "
    r"(?:v(?P<version>\d+) )?(?P<kind>Request|Response) corr=(?P<corr>\S+)(?P<rest>.*)$"
)


def kdissect(*args: str | Path, input: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "kdissect", *map(str, args)]
    result = subprocess.run(command, input=input, capture_output=True, timeout=120,
                            env={**os.environ, "PYTHONIOENCODING": "utf-8"},
                            text=input is None)  # fmt: skip
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}: {result.stderr}")
    assert "Traceback" not in str(result.stderr)
    return result


def summary(path: Path, *args: str) -> list[dict[str, str]]:
    lines = kdissect(*args, path).stdout.splitlines()
    parsed = [SUMMARY.match(line) for line in lines]
    assert all(parsed), [line for line, match in zip(lines, parsed, strict=True) if not match]
    return [match.groupdict() for match in parsed if match]


def test_summary_lists_every_message_paired_with_latency():
    rows = summary(QUORUM)
    assert len(rows) == 50  # 25 requests, each answered (the sidecar's exchanges plus bootstrap)
    assert [int(r["number"]) for r in rows] == list(range(1, 51))
    responses = [r for r in rows if r["kind"] == "Response"]
    assert len(responses) == 25
    assert all(re.search(r" \d+\.\d{3} ms", r["rest"]) for r in responses)
    quorum = [r for r in rows if r["api"] == "DescribeQuorum"]
    assert {r["version"] for r in quorum} == {"0", "1", "2"}
    first = rows[0]
    assert first["dst"] == "127.0.0.1:9092" and "client=kdissect-story" in first["rest"]
    assert not any("[" in r["rest"] for r in rows)  # no notes on a clean capture


def test_info_adds_what_the_bodies_say():
    rows = summary(QUORUM, "-i", "--api", "55")
    answer = next(r for r in rows if r["kind"] == "Response" and r["version"] == "2")
    assert re.search(r"topics=__cluster_metadata leader=\d+ epoch=\d+ hw=\d+ voters=3", answer["rest"])
    rows = summary(PRODUCERS, "-i", "--api", "DescribeProducers")
    assert any("errors=NOT_LEADER_OR_FOLLOWER" in r["rest"] for r in rows)
    assert any("open_txns=2" in r["rest"] for r in rows)


def test_verbose_prints_the_seed_format_tree():
    out = kdissect("-V", "-c", "2", "--api", "61", PRODUCERS).stdout
    assert "\nDescribeProducersRequest message v0 [0x0000, " in out
    assert "+-- RequestHeader v2 [0x0004, " in out
    assert "|   +-- request_api_key int16 = 61 (DescribeProducers) [0x0004, 2B]" in out
    assert re.search(r"    \+-- Topics \[\]TopicRequest = 2 elements \[0x[0-9a-f]{4}, \d+B\] "
                     r"The topics to list producers for\.", out)
    assert "DescribeProducersResponse message v0" in out
    assert re.search(r"LastTimestamp int64 = \d+ \(20\d\d-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC\)", out)


def test_hex_dump_rows_of_sixteen_bytes():
    out = kdissect("-x", "-c", "1", QUORUM).stdout.splitlines()
    rows = [line for line in out[1:] if line]
    assert rows and rows[0].startswith("0000")
    data = bytes.fromhex("".join(re.findall(r"\b[0-9a-f]{2}\b", " ".join(r[6:54] for r in rows))))
    assert len(data) == 50 and data[:4] == (46).to_bytes(4, "big")  # ApiVersions v4 request


def test_json_array_has_every_field_and_trees_that_tile():
    records = json.loads(kdissect("-T", "json", TANSU).stdout)
    assert len(records) == 64
    by_number = {r["number"]: r for r in records}
    for record in records:
        assert {"number", "frame", "time", "stream", "src", "dst", "direction", "api_key",
                "api_name", "api_version", "correlation_id", "client_id", "length", "pair",
                "latency_ms", "notes", "tree"} <= set(record)
        partner = by_number[record["pair"]]
        assert partner["pair"] == record["number"] and partner["correlation_id"] == record["correlation_id"]
        assert (record["latency_ms"] is None) == (record["direction"] == "request")
        tree = record["tree"]
        assert tree["type"] == "message" and tree["offset"] == 0 and tree["size"] == record["length"] + 4
        assert _tiling_problems(tree) == []
    response = next(r for r in records if r["api_key"] == 75 and r["direction"] == "response")
    body = response["tree"]["children"][2]
    assert body["name"] == "DescribeTopicPartitionsResponse" and body["type"] == "struct"
    topic = body["children"][1]["children"][1]
    assert topic["name"] == "DescribeTopicPartitionsResponseTopic[0]" and topic["value"] is None
    topic_id = next(c for c in topic["children"] if c["name"] == "TopicId")["value"]
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", topic_id)
    elr = next(c for c in topic["children"] if c["name"] == "Partitions")["children"][1]
    assert next(c for c in elr["children"] if c["name"] == "EligibleLeaderReplicas")["value"] == 0


def _tiling_problems(node: dict) -> list[str]:
    wire = [c for c in node["children"] if not c.get("generated")]
    problems = []
    if wire:
        cursor = node["offset"]
        for child in wire:
            if child["offset"] != cursor:
                problems.append(f"{child['name']} at {child['offset']} not {cursor}")
            cursor = child["offset"] + child["size"]
        if cursor != node["offset"] + node["size"]:
            problems.append(f"{node['name']} children end at {cursor}")
    for child in node["children"]:
        problems += _tiling_problems(child)
    return problems


def test_jsonl_is_one_object_per_line_and_filters_apply():
    lines = kdissect("-T", "jsonl", "-Y", "api_key == 55 and direction == 'response'", QUORUM).stdout
    records = [json.loads(line) for line in lines.splitlines()]
    assert len(records) == 16
    assert all(r["api_name"] == "DescribeQuorum" and r["latency_ms"] > 0 for r in records)


def test_jsonl_streams_from_standard_input_before_the_capture_ends():
    data = QUORUM.read_bytes()
    process = subprocess.Popen([sys.executable, "-m", "kdissect", "-T", "jsonl", "-"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin and process.stdout
    process.stdin.write(data[: len(data) // 3])  # the first third only
    process.stdin.flush()
    started = time.monotonic()
    first = process.stdout.readline()  # must arrive while stdin is still open
    assert time.monotonic() - started < 30
    assert json.loads(first)["number"] == 1
    process.stdin.write(data[len(data) // 3 :])
    process.stdin.close()
    rest = process.stdout.read().splitlines()
    assert process.wait(timeout=60) == 0
    assert len(rest) == 49


def test_summary_lines_stream_from_a_pipe_before_the_capture_ends():
    """Summary lines are written in batches from a file, but one by one from a live pipe."""
    data = QUORUM.read_bytes()
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as a user has it
    process = subprocess.Popen([sys.executable, "-m", "kdissect", "-"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment)
    assert process.stdin and process.stdout
    process.stdin.write(data[: len(data) // 3])  # the first third only
    process.stdin.flush()
    ready, _, _ = select.select([process.stdout], [], [], 30)  # while stdin is still open
    if not ready:
        process.kill()
    assert ready, "no line within 30 s of the first third of the capture"
    first = process.stdout.readline()
    assert first.split()[0] == b"1"
    process.stdin.write(data[len(data) // 3 :])
    process.stdin.close()
    rest = process.stdout.read().splitlines()
    assert process.wait(timeout=60) == 0
    assert [first.rstrip(b"\n"), *rest] == kdissect(QUORUM).stdout.encode().splitlines()


def test_capture_notes_keep_their_place_among_the_lines_however_stdout_is_buffered():
    """Lines are written in batches; a capture-level note on stderr still comes after the
    lines listed before it, as it would with every line written at once."""
    cut = Path(__file__).parent / "fuzz_regressions" / "pipeline-ae7351e709ea.pcap"  # cut short mid-way
    outputs = []
    for unbuffered in (False, True):
        environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
        if unbuffered:
            environment["PYTHONUNBUFFERED"] = "1"
        done = subprocess.run([sys.executable, "-m", "kdissect", "--jobs", "1", str(cut)], env=environment,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=True)
        outputs.append(done.stdout.decode().splitlines())
    assert outputs[0] == outputs[1]
    noted = [n for n, line in enumerate(outputs[0]) if line.startswith("kdissect: ")]
    assert noted == [8, 9] and len(outputs[0]) == 10  # the cut comes after the eight messages before it


def test_count_api_and_port_options():
    rows = summary(QUORUM, "-c", "3", "--api", "DescribeQuorum")
    assert len(rows) == 3 and all(r["api"] == "DescribeQuorum" for r in rows)
    assert len(summary(QUORUM, "--no-detect", "--port", "19092")) == 50  # 9092 always is Kafka


def test_stats_per_api_and_connection(public_captures: Path):
    out = kdissect("--stats", PRODUCERS).stdout
    row = next(line for line in out.splitlines() if line.startswith("DescribeProducers"))
    fields = row.split()
    assert fields[1:5] == ["0", "14", "14", "0"]  # version, requests, responses, unanswered
    assert fields[-1] == "2"  # error codes counted in the decoded responses
    assert "DescribeProducers v0: NOT_LEADER_OR_FOLLOWER x2" in out.splitlines()
    assert "Connections" in out and "kdissect-story" in out
    out = kdissect("--stats", public_captures / "arkime_kafka.pcap").stdout
    assert re.search(r"ListOffsets +0 +1 +0 +1 ", out)


def test_public_captures_headers(public_captures: Path):
    rows = summary(public_captures / "deepflow_18-api-versions-v3.pcap")
    assert [(r["api"], r["version"], r["kind"]) for r in rows] == [
        ("ApiVersions", "3", "Request"), ("ApiVersions", "3", "Response")]
    rows = summary(public_captures / "deepflow_00-produce-v9.pcap")  # port 36333, detected
    assert [(r["api"], r["version"], r["corr"]) for r in rows] == [("Produce", "9", "47")] * 2
    rows = summary(public_captures / "ndpi_kafka.pcapng")
    assert any(r["api"] == "(request missing)" and "request missing" in r["rest"] for r in rows)


def test_capture_cut_mid_stream_pairs_after_resynchronisation(tmp_path: Path):
    packets = rdpcap(str(PRODUCERS))
    # Cut just before the first response of a DescribeProducers exchange: its request is gone.
    responses = [i for i, p in enumerate(packets)
                 if p.haslayer(TCP) and p[TCP].sport == 9092 and len(p[TCP].payload) > 40]
    cut = responses[3]
    wrpcap(str(tmp_path / "cut.pcap"), packets[cut:])
    rows = summary(tmp_path / "cut.pcap")
    orphan = min((r for r in rows if r["kind"] == "Response"), key=lambda r: float(r["time"]))
    assert orphan["api"] == "(request missing)" and "request missing" in orphan["rest"]
    # The orphan waited for the next response to confirm the resynchronisation, so it
    # may be listed after a request that followed it on the wire; nothing else is late.
    later = [r for r in rows if r is not orphan]
    assert len(later) >= 10 and all("request missing" not in r["rest"] for r in later)
    assert all(re.search(r" \d+\.\d{3} ms", r["rest"]) for r in later if r["kind"] == "Response")
    assert sum(r["kind"] == "Request" for r in later) == sum(r["kind"] == "Response" for r in later)
    # `--stats` names the orphan's API the way the listing does.
    stats = kdissect("--stats", tmp_path / "cut.pcap").stdout
    assert re.search(r"^\(request missing\) +0 +1 +0 ", stats, re.M), stats


def test_hostile_client_id_cannot_reach_the_terminal(tmp_path: Path):
    client_id = b"evil\x1b[2J\x1b]0;pwned\x07\xe2\x80\xae"
    header = (18).to_bytes(2, "big") + (0).to_bytes(2, "big") + (1).to_bytes(4, "big")
    body = header + len(client_id).to_bytes(2, "big") + client_id
    frame = len(body).to_bytes(4, "big") + body
    packet = Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=5555, dport=9092, flags="PA", seq=1) / frame
    wrpcap(str(tmp_path / "evil.pcap"), [packet])
    for args in ((), ("-V",), ("-T", "json"), ("--stats",)):
        out = kdissect(*args, tmp_path / "evil.pcap").stdout
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "evil\\x1b[2J" in kdissect(tmp_path / "evil.pcap").stdout


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["no-such-file.pcap"], "no-such-file.pcap: No such file or directory"),
        (["tests"], "tests: is a directory"),
        (["pyproject.toml"], "pyproject.toml: not a pcap or pcapng file"),
        (["-Y", "latency_ms >", str(QUORUM)], "cannot parse filter"),
        (["-Y", "nope == 1", str(QUORUM)], "unknown field 'nope'"),
        (["--port", "70000", str(QUORUM)], "is not a TCP port"),
        (["--api", "Bogus", str(QUORUM)], "'Bogus' is not a Kafka API key or name"),
        (["-T", "xml", str(QUORUM)], "invalid choice"),
    ],
)
def test_usage_errors_and_unreadable_inputs_exit_2_with_one_clear_line(args: list[str], complaint: str):
    result = subprocess.run([sys.executable, "-m", "kdissect", *args], capture_output=True, text=True,
                            cwd=CAPTURES.parent, timeout=60)  # fmt: skip
    assert result.returncode == 2
    assert complaint in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("mode", [["-T", "json"], ["--stats"], ["--top", "3"], ["--interval", "10s"]])
def test_an_unreadable_file_gives_its_error_and_no_empty_report(mode: list[str]):
    result = subprocess.run([sys.executable, "-m", "kdissect", *mode, "no-such-file.pcap"],
                            capture_output=True, text=True, cwd=CAPTURES.parent, timeout=60)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.strip() == "kdissect: no-such-file.pcap: No such file or directory"


def test_good_files_still_decode_beside_a_bad_one():
    result = kdissect("no-such-file.pcap", QUORUM, check=False)
    assert result.returncode == 2
    assert len(result.stdout.splitlines()) == 50


def test_help_and_version():
    out = kdissect("--help").stdout
    for option in ("-V", "-x", "-T", "--port", "--api", "-Y", "-c", "--stats", "--export", "-i",
                   "--top", "--interval", "--frames", "ErrorCode != 0"):
        assert option in out
    assert "examples:" in out and "tcpdump" in out
    assert re.fullmatch(r"kdissect \d+\.\d+\.\d+\n", kdissect("--version").stdout)


def test_broken_pipe_is_quiet():
    shell = f"{sys.executable} -m kdissect {QUORUM} | head -1"
    result = subprocess.run(shell, shell=True, capture_output=True, text=True, timeout=60)
    assert result.stdout.count("\n") == 1 and result.stderr == ""
