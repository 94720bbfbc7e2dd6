"""The command's outputs an operator relies on: time columns, frame numbers, --top,
--interval, --stats as JSON, --export with filters, -i's counts and change marks,
and one clear line for each mistake. Real captures, checked against tshark where it
can say, else against the messages themselves."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import math
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

import kdissect
from kdissect import cli
from kdissect.ingest.capture import read_records
from kdissect.pipeline import read_messages
from tests.conftest import CAPTURES, missing
from tests.test_cli import PRODUCERS, QUORUM, SUMMARY, TANSU
from tests.test_cli import kdissect as run

FRAMES = re.compile(r"^ *(?P<number>\d+) +(?P<frame>\d+) +(?P<time>\S+) ")


def lines(*args: str | Path) -> list[str]:
    return run(*args).stdout.splitlines()


def tshark_fields(path: Path, *fields: str) -> list[list[str]]:
    if shutil.which("tshark") is None:
        missing("tshark is not installed")
    command = ["tshark", "-r", str(path), "-T", "fields", *(x for f in fields for x in ("-e", f))]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


def test_relative_time_and_frame_numbers_agree_with_tshark_when_filtered():
    """The time column stays relative to the capture's first packet when a filter hides
    the first messages, as tshark's is; --frames is the number Wireshark shows."""
    relative = {int(n): float(t) for n, t in tshark_fields(QUORUM, "frame.number", "frame.time_relative")}
    shown = [FRAMES.match(line) for line in lines("--frames", "-Y", "api_key == 55 && api_version == 2", QUORUM)]
    assert len(shown) == 24 and all(shown)
    for match in shown:
        assert match is not None
        assert float(match["time"]) == pytest.approx(relative[int(match["frame"])], abs=1e-6)
    assert float(shown[0]["time"]) > 1.0  # not restarted at the first message shown


def test_absolute_time_prints_the_date_and_delta_time_the_gap_to_the_previous_shown():
    messages = [m for m in read_messages(QUORUM) if m.api_key == 55][:4]
    for option in ("a", "ad"):
        shown = lines("-t", option, "--api", "55", "-c", "4", QUORUM)
        for line, message in zip(shown, messages, strict=True):
            date = datetime.fromtimestamp(message.time, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
            assert f" {date} " in line
    deltas = [float(line.split()[1]) for line in lines("-t", "d", "--api", "55", "-c", "4", QUORUM)]
    expected = [0.0] + [b.time - a.time for a, b in itertools.pairwise(messages)]
    assert deltas == pytest.approx(expected, abs=2e-6)


def test_a_slow_response_names_its_requests_client():
    shown = lines("-Y", "latency_ms > 5", QUORUM)
    assert shown and all(" Response " in line and "client=kdissect-story" in line for line in shown)
    assert all(float(re.search(r" ([\d.]+) ms", line)[1]) > 5 for line in shown)  # type: ignore[index]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_response_names_its_requests_client_in_json_and_the_messages_table(jobs):
    """As the listing and `client_id` in filters: a response header has no client id, so a
    paired response carries its request's; an unpaired one none."""
    records = [json.loads(line) for line in run("-T", "jsonl", "-j", jobs, TANSU).stdout.splitlines()]
    by_number = {record["number"]: record for record in records}
    responses = [record for record in records if record["direction"] == "response"]
    assert responses and all(record["client_id"] for record in responses if record["pair"] is not None)
    for record in responses:
        request = by_number.get(record["pair"])
        assert record["client_id"] == (None if request is None else request["client_id"])
    table = kdissect.read_pcap(TANSU, jobs=int(jobs)).messages
    shown = {int(n): (None if pd.isna(c) else c) for n, c in zip(table.number, table.client_id, strict=True)}
    assert shown == {number: record["client_id"] for number, record in by_number.items()}


def test_top_lists_the_slowest_exchanges_one_line_each():
    messages = list(read_messages(QUORUM))
    slowest = sorted((m for m in messages if m.latency is not None), key=lambda m: -m.latency)[:3]
    out = lines("--top", "3", QUORUM)
    assert out[:2] == ["Slowest 3 exchanges", "=" * 19]
    for line, response in zip(out[2:], slowest, strict=True):
        assert line.split()[0] == f"{response.latency * 1000:.3f}"
        assert f"{response.api_name} v{response.api_version}" in line
        assert 'client "kdissect-story"' in line and f"#{response.number}<-#{response.pair.number}" in line
        assert line.endswith("no error")
    producers = " ".join(lines("--top", "50", "-Y", "ErrorCode != 0", PRODUCERS))
    assert producers.count("NOT_LEADER_OR_FOLLOWER") == 2
    answered = sum(m.latency is not None for m in messages)
    every = lines("--top", "500", QUORUM)  # more asked for than there are: the title says so
    assert every[0] == f"All {answered} answered exchanges, slowest first (fewer than --top 500)"
    assert len(every) == 2 + answered


def test_top_and_interval_decode_only_the_bodies_they_need(monkeypatch):
    """`--top N` reads latencies from the headers: the only bodies it decodes are those of
    the N answers it lists, for their errors. `--interval` counts every answer's errors, but
    decodes no request (no Produce request for the topics, which only --stats counts)."""
    from kdissect.pair.message import Message

    decoded: list[tuple[int, bool]] = []
    values = Message.values

    def counted(message: Message, *, keep: bool = True):
        decoded.append((message.number, message.is_request))
        return values(message, keep=keep)

    monkeypatch.setattr(Message, "values", counted)
    for options in (["--top", "2"], ["--top", "2", "-T", "json"], ["--interval", "1s", "--top", "2"], ["--stats"]):
        decoded.clear()
        with contextlib.redirect_stdout(io.StringIO()):
            assert cli.main([*options, "-j", "1", str(TANSU)]) == 0
        answers, requests = ({n for n, asked in decoded if asked is wanted} for wanted in (False, True))
        if "--interval" in options:
            assert len(answers) > 30 and not requests
        elif "--top" in options:
            assert len(answers) == 2 and not requests, options
        else:  # --stats counts what Produce requests carried
            assert len(answers) > 30 and requests


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_time_relative_filters_on_the_listings_time_column(jobs):
    """`time_relative` (Wireshark's `frame.time_relative`) counts from the capture's first
    packet, as the listing's time column does; `time` is epoch seconds."""
    listed = lines("-j", jobs, QUORUM)
    times = [float(line.split()[1]) for line in listed]
    middle = len(times) // 2
    cut = (times[middle - 1] + times[middle]) / 2
    assert times[middle - 1] < cut < times[middle]
    later = [line for line, time in zip(listed, times, strict=True) if time > cut]
    assert lines("-j", jobs, "-Y", f"time_relative > {cut}", QUORUM) == later
    assert lines("-j", jobs, "-Y", f"frame.time_relative > {cut}", QUORUM) == later
    assert lines("-j", jobs, "-Y", f"time > {cut}", QUORUM) == listed  # epoch seconds: all later


def test_a_blank_filter_is_no_filter_as_for_tshark():
    assert lines("-Y", " ", QUORUM) == lines("-Y", "", QUORUM) == lines(QUORUM)


def test_interval_buckets_count_from_the_first_packet():
    messages = list(read_messages(QUORUM))
    start = next(iter(read_records(QUORUM)))[1] / 1e9  # the first packet (ns), Kafka or not
    data = json.loads(run("--interval", "500ms", "-T", "json", QUORUM).stdout)
    rows = data["intervals"]
    assert set(data) == {"intervals"}
    assert len(rows) == math.floor((max(m.time for m in messages) - start) / 0.5) + 1
    for row in rows:
        inside = [m for m in messages if row["start"] <= m.time - start < row["end"]]
        assert row["requests"] == sum(m.is_request for m in inside)
        assert row["responses"] == sum(not m.is_request for m in inside)
        latencies = sorted(m.latency * 1000 for m in inside if m.latency is not None)
        if latencies:
            assert row["p99_ms"] == pytest.approx(latencies[round(0.99 * (len(latencies) - 1))], abs=1e-6)
        else:
            assert row["p99_ms"] is None
    text = lines("--interval", "0.5", QUORUM)
    assert text[0] == "Intervals of 0.5 s from the capture's first packet"
    assert len(text) == 3 + len(rows) + 1


def test_a_fine_interval_over_a_long_quiet_capture_stays_as_small_as_its_messages(tmp_path):
    """Two exchanges an hour apart, in 0.5 ms buckets: 7.2 million buckets, all but a few
    empty. Stretches of three or more empty buckets are one line of the text and left out
    of the JSON; shorter ones show as they are (the bucket between a request and its
    answer, 1 ms later)."""
    from tests.craft import (
        Conversation,
        ethernet,
        kafka_response,
        metadata_request,
        records,
        write_pcap,
    )

    talk = Conversation.between(("10.0.0.1", 40000), ("10.0.0.2", 9092))
    talk.handshake()
    for correlation_id in (1, 2):
        talk.send(True, metadata_request(correlation_id))
        talk.send(False, kafka_response(correlation_id, b"\x00" * 40))
    first, second = talk.packets[:5], talk.packets[5:]  # handshake and exchange 1; exchange 2
    path = write_pcap(tmp_path / "quiet.pcap", records(first, wrap=ethernet)
                      + records(second, start=1_700_003_600.0, wrap=ethernet))
    text = lines("--interval", "0.5ms", path)
    assert len(text) < 20
    stretches = [int(found) for found in re.findall(r"\((\d+) intervals without messages\)", "\n".join(text))]
    handshake, between = sorted(stretches)  # before the first message; between the exchanges
    assert handshake == 6 and abs(between - (7_200_000 - 9)) <= 1
    rows = json.loads(run("--interval", "0.5ms", "-T", "json", path).stdout)["intervals"]
    assert sum(row["requests"] for row in rows) == 2 and sum(row["responses"] for row in rows) == 2
    assert len(rows) <= 8 and (0, 0) in [(row["requests"], row["responses"]) for row in rows]
    assert all(row["end"] - row["start"] == pytest.approx(0.0005) for row in rows)


def test_an_interval_finer_than_a_microsecond_is_refused_in_one_line():
    result = run("--interval", "1e-310s", QUORUM, check=False)
    assert result.returncode == 2 and "shorter than a microsecond" in result.stderr
    assert len(lines("--interval", "1us", QUORUM)) > 3


def test_stats_as_json_count_what_the_text_counts():
    data = json.loads(run("--stats", "-T", "json", PRODUCERS).stdout)
    apis = {(a["api_name"], a["api_version"]): a for a in data["apis"]}  # as the messages name them
    assert apis[("DescribeProducers", 0)]["requests"] == 14
    assert apis[("DescribeProducers", 0)]["errors"] == {"NOT_LEADER_OR_FOLLOWER": 2}
    # ApiVersions bodies are decoded now (from the installed definitions): no errors, which
    # is {} and not None (None says "not decoded")
    assert apis[("ApiVersions", 4)]["errors"] == {}
    assert [c["client_id"] for c in data["clients"]] == ["kdissect-story"]
    assert data["clients"][0]["exchanges"] == 17 and data["clients"][0]["errors"] == 2
    text = run("--stats", PRODUCERS).stdout
    assert re.search(r"^ApiVersions .* 0$", text, re.M)  # decoded: no errors, not n/d
    assert re.search(r'^"kdissect-story" +17 +2 ', text, re.M)


def test_export_honours_the_filter_and_the_count(tmp_path: Path):
    run("--export", tmp_path / "out", "--format", "csv", "-Y", "api_key == 55", "-c", "5", QUORUM)
    exported = pd.read_csv(tmp_path / "out" / "messages.csv")
    assert exported["api_key"].tolist() == [55] * 5
    assert exported["number"].tolist() == [m.number for m in read_messages(QUORUM) if m.api_key == 55][:5]
    run("--export", tmp_path / "errors", "--format", "csv", "-Y", "ErrorCode != 0", PRODUCERS)
    assert len(pd.read_csv(tmp_path / "errors" / "messages.csv")) == 2


def test_export_into_a_file_is_one_clear_line(tmp_path: Path):
    target = tmp_path / "taken"
    target.write_text("")
    for where in (target, target / "below"):
        result = run("--export", where, QUORUM, check=False)
        assert result.returncode == 2
        assert len(result.stderr.splitlines()) == 1 and "is not a directory" in result.stderr
        assert "internal error" not in result.stderr


def test_a_filter_error_is_one_line_naming_the_field_and_both_types():
    result = run("-Y", 'Topics[].Partitions[].LeaderId == "one"', TANSU, check=False)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "kdissect: -Y: cannot compare field 'Topics[].Partitions[].LeaderId' (int32) with \"one\" (string)"]


def test_info_counts_say_what_they_count_and_mark_changes():
    producers = {int(line.split()[0]): line for line in lines("-i", "--api", "61", PRODUCERS)}
    capture = kdissect.read_pcap(PRODUCERS)
    table = capture.producers.dropna(subset=["producer_id"])
    for number, rows in table.groupby("number"):
        assert f"producers={rows.producer_id.nunique()} ({len(rows)} partition entries)" in producers[number]
    bumped = [line for line in producers.values() if "changed since" in line]
    assert bumped and all("producer epoch" in line for line in bumped)
    quorum = [line for line in lines("-i", "--api", "55", QUORUM) if "changed since" in line]
    assert len(quorum) == 1
    assert quorum[0].split()[0] == "42"
    assert quorum[0].endswith("changed since #40: leader 1->2 epoch 7->8 (__cluster_metadata:0)")
    hidden = lines("-i", "-Y", "api_key == 55 && correlation_id == 9", QUORUM)  # #40 is not shown
    assert hidden[-1] == quorum[0]


def test_read_pcap_takes_api_names_as_the_command_does():
    by_name = kdissect.read_pcap(QUORUM, apis=["DescribeQuorum"])
    assert len(by_name) == len(kdissect.read_pcap(QUORUM, apis=[55])) == 32
    assert len(lines("--api", "DescribeQuorum", QUORUM)) == 32
    filtered = kdissect.read_pcap(QUORUM, filter="LeaderId == 2")
    assert filtered.messages.number.tolist() == [42, 44, 46, 48, 50]
    with pytest.raises(ValueError, match="'Nope' is not a Kafka API"):
        kdissect.read_pcap(QUORUM, apis=["Nope"])
    # One API alone need not be wrapped in a list: a name is not read letter by letter.
    alone = [kdissect.read_pcap(QUORUM, apis=api) for api in ("DescribeQuorum", 55, "55")]
    assert [len(capture) for capture in alone] == [32, 32, 32]
    with pytest.raises(ValueError, match="'Nope' is not a Kafka API"):
        kdissect.read_pcap(QUORUM, apis="Nope")


def test_trees_and_messages_print_as_text_outside_jupyter():
    capture = kdissect.read_pcap(QUORUM)
    text = repr(capture.tree(8))
    assert text.startswith("DescribeQuorumResponse message v0 [0x0000, 111B]\n+-- Frame")
    shown = repr(capture.message(8)).splitlines()
    assert SUMMARY.match(shown[0]) and shown[1] == text.splitlines()[0]


def test_expert_ids_filter_and_travel_in_json(public_captures: Path):
    capture = public_captures / "ndpi_kafka.pcapng"
    records = [json.loads(line) for line in
               run("-T", "jsonl", "-Y", 'expert == "kafka.request_missing"', capture).stdout.splitlines()]
    assert records and all(r["direction"] == "response" and r["pair"] is None for r in records)
    assert all(any(n["id"] == "kafka.request_missing" for n in r["notes"]) for r in records)
    orphans = [m for m in read_messages(capture) if not m.is_request and m.pair is None]
    assert [r["number"] for r in records] == [m.number for m in orphans]


@pytest.mark.parametrize("options", [("-V",), ("-V", "-x", "--frames"), ("-x",)])
def test_message_text_encoded_piece_by_piece_is_the_text(options: tuple[str, ...]):
    """Into a file or pipe the text of -V and -x is encoded by kdissect, each piece of a message
    with a character beyond ASCII by itself (`_TextSink._write_encoded`): the text written as
    text (to a str, where nothing is encoded) encoded whole; output of both kinds in one."""
    records = CAPTURES / "tansu_records.pcap"  # record headers beyond ASCII
    written = run("-j", "1", *options, records, PRODUCERS).stdout
    with contextlib.redirect_stdout(io.StringIO()) as text:
        assert cli.main(["-j", "1", *options, str(records), str(PRODUCERS)]) == 0
    assert written == text.getvalue()
    assert written.isascii() is ("-V" not in options)  # -x shows the bytes beyond ASCII as dots


@pytest.mark.parametrize("options", [(), ("-V",), ("-T", "json"), ("-V", "--jobs", "2")])
def test_a_full_disk_is_said_as_such_not_as_an_internal_error(options: tuple[str, ...]):
    if not Path("/dev/full").exists():
        missing("no /dev/full (a device whose every write fails: disk full) on this system")
    command = [sys.executable, "-m", "kdissect", *options, str(PRODUCERS)]
    with open("/dev/full", "w") as full:
        result = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.splitlines() == ["kdissect: cannot write the output: No space left on device"]
