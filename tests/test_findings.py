"""Findings: the incident capture's story is found, at the right times, from what the peer
encoded (its sidecar); the clean captures hold no high-severity finding; crafted captures
with lost bytes, TLS and malformed bodies give their traffic findings."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

import kdissect
from kdissect.present import findings as F
from kdissect.present.findings import Finding, Severity, Thresholds
from tests.craft import (
    Conversation,
    ethernet,
    kafka_request,
    metadata_response,
    records,
    write_pcap,
)
from tests.test_differential_kio import encode, framed
from tests.test_generated import _header_of, kio_entity_type, newest_kio_versions

CAPTURES = Path(__file__).resolve().parents[1] / "captures"


@pytest.fixture(scope="module")
def incident() -> tuple[Any, list[Finding], dict[str, Any]]:
    capture = kdissect.read_pcap(CAPTURES / "incident.pcap")
    sidecar = json.loads((CAPTURES / "incident.json").read_text())
    return capture, F.find(capture), sidecar


def response_of(capture: Any, sidecar: dict[str, Any], api_name: str, step: int) -> int:
    """The capture's response number for the peer's exchange of `api_name` at `step`,
    found by the client's port and correlation id the peer logged (not by decoding bodies)."""
    exchange = next(e for e in sidecar["exchanges"]
                    if e["api_name"] == api_name and e.get("step") == step)
    return response_number(capture, exchange)


def response_number(capture: Any, exchange: dict[str, Any]) -> int:
    """The capture's response number for one exchange the peer logged."""
    table = capture.exchanges
    match = table[(table.client == f"127.0.0.1:{exchange['client_port']}")
                  & (table.correlation_id == exchange["correlation_id"])]
    assert len(match) == 1
    return int(match.response.iloc[0])


def the(found: list[Finding], kind: str, **details: Any) -> Finding:
    matches = [f for f in found if f.id == kind
               and all(f.details.get(k) == v for k, v in details.items())]
    assert len(matches) == 1, (kind, details, [f.summary for f in found if f.id == kind])
    return matches[0]


def event_step(sidecar: dict[str, Any], event: str, **facts: Any) -> int:
    return next(e["step"] for e in sidecar["events"] if e["event"] == event
                and all(e.get(k) == v for k, v in facts.items()))


QUORUM, PRODUCERS, PARTITIONS = "DescribeQuorum", "DescribeProducers", "DescribeTopicPartitions"


def test_incident_quorum_findings_are_found_at_the_steps_the_peer_told(incident):
    capture, found, sidecar = incident
    at = lambda api, step: response_of(capture, sidecar, api, step)  # noqa: E731
    lost = event_step(sidecar, "quorum leader lost, election")
    assert the(found, "quorum.no_leader").messages == (at(QUORUM, lost),)
    assert the(found, "quorum.no_leader").severity is Severity.HIGH
    changed = event_step(sidecar, "leader change", replica_id=2)
    assert the(found, "quorum.leader_change", leader_to=2).messages[-1] == at(QUORUM, changed)
    joined = event_step(sidecar, "observer joined", replica_id=102)
    assert the(found, "quorum.observer_joined", replica_id=102).messages[-1] == at(QUORUM, joined)
    stall = (event_step(sidecar, "high watermark stops advancing"),
             event_step(sidecar, "high watermark advances again"))
    # The evidence: every answer showing the stuck value, from the one where it was reached.
    stuck = the(found, "quorum.hw_stall")
    assert stuck.messages == tuple(at(QUORUM, s) for s in range(stall[0] - 1, stall[1]))
    assert stuck.count == len(stuck.messages) and f"in {stuck.count} answers" in stuck.summary
    stale = event_step(sidecar, "observer stopped fetching", replica_id=101)
    fetch = the(found, "quorum.stale_fetch", replica_id=101)
    assert fetch.messages[0] == at(QUORUM, stale) and fetch.severity is Severity.MEDIUM


def test_incident_voter_lag_episode_lies_within_the_lagging_steps(incident):
    capture, found, sidecar = incident
    behind = event_step(sidecar, "voter falls behind", replica_id=3)
    caught_up = event_step(sidecar, "voter caught up", replica_id=3)
    episodes = [f for f in found if f.id == "quorum.voter_lag" and f.details["replica_id"] == 3
                and not f.details["majority_lagging"]]
    assert len(episodes) == 1
    lagging = {response_of(capture, sidecar, QUORUM, s) for s in range(behind, caught_up)}
    assert set(episodes[0].messages) <= lagging
    assert episodes[0].messages[-1] == response_of(capture, sidecar, QUORUM, caught_up - 1)
    # the peer's own numbers: leader's log end offset minus voter 3's at the peak
    peak = episodes[0].details["peak_message"]
    exchange = next(e for e in sidecar["exchanges"] if e["api_name"] == QUORUM and e.get("step")
                    is not None and response_of(capture, sidecar, QUORUM, e["step"]) == peak)
    partition = exchange["response"]["Topics"][0]["Partitions"][0]
    ends = {v["ReplicaId"]: v["LogEndOffset"] for v in partition["CurrentVoters"]}
    assert episodes[0].details["peak_lag"] == ends[partition["LeaderId"]] - ends[3]


def test_incident_producer_findings(incident):
    capture, found, sidecar = incident
    at = lambda step: response_of(capture, sidecar, PRODUCERS, step)  # noqa: E731
    bump = event_step(sidecar, "epoch bump", producer_id=3002)
    assert the(found, "producer.epoch_bump", producer_id=3002).messages[-1] == at(bump)
    rewind = event_step(sidecar, "sequence numbers go backwards", producer_id=3004)
    backwards = the(found, "producer.sequence_backwards", producer_id=3004)
    assert backwards.messages[-1] == at(rewind) and backwards.severity is Severity.HIGH
    opened = event_step(sidecar, "transaction opened and never closed", producer_id=7001)
    for partition in (0, 1):
        hanging = the(found, "producer.open_transaction", producer_id=7001, partition=partition)
        assert hanging.messages[0] == at(opened)
        assert hanging.last_time - hanging.first_time > Thresholds().transaction_s
    errors = (event_step(sidecar, "partition error"), event_step(sidecar, "partition recovered"))
    burst = the(found, "traffic.error_burst", error="NOT_LEADER_OR_FOLLOWER")
    assert burst.messages == tuple(at(s) for s in range(*errors))
    assert burst.details["topic"] == "orders" and burst.details["client_id"] == "kdissect-story"


def test_incident_partition_findings(incident):
    capture, found, sidecar = incident
    at = lambda step: response_of(capture, sidecar, PARTITIONS, step)  # noqa: E731
    down = event_step(sidecar, "broker 3 offline: ISR shrinks")
    back = event_step(sidecar, "broker 3 back: ISR expands")
    shrink = the(found, "partition.isr_shrink", brokers=[3])
    assert shrink.messages == (at(down),) and len(shrink.details["partitions"]) == 5
    assert the(found, "partition.isr_expand", brokers=[3]).messages == (at(back),)
    offline = the(found, "partition.offline_replicas", brokers=[3])
    assert offline.messages == tuple(at(s) for s in range(down, back))
    leaderless = (event_step(sidecar, "orders-2 leaderless"),
                  event_step(sidecar, "orders-2 has a leader again"))
    assert the(found, "partition.leaderless", topic="orders", partition=2).messages == tuple(
        at(s) for s in range(*leaderless))
    elr = event_step(sidecar, "payments-1 below min ISR: ELR in use")
    assert the(found, "partition.elr_in_use", topic="payments", partition=1).messages[0] == at(elr)


def test_incident_traffic_findings(incident):
    capture, found, sidecar = incident
    slow_step = event_step(sidecar, "DescribeTopicPartitions answered 1.5 s late")
    slow = the(found, "traffic.slow", api=PARTITIONS)
    assert at_least_one_and_only(slow.messages, response_of(capture, sidecar, PARTITIONS, slow_step))
    assert slow.details["worst_ms"] > 1500
    unanswered = the(found, "traffic.unanswered")
    (number,) = unanswered.messages
    request = capture.message(number)
    last_answered = response_of(capture, sidecar, PARTITIONS, slow_step + 10)
    assert request.api_name == PARTITIONS and request.is_request and number > last_answered


def test_incident_coordinator_move_is_found_when_the_new_coordinator_is_named(incident):
    capture, found, sidecar = incident
    lookups = [e for e in sidecar["exchanges"] if e["api_name"] == "FindCoordinator"]
    assert [[c["NodeId"] for c in e["response"]["Coordinators"]] for e in lookups] == [[3], [-1], [2]]
    unavailable, moved = (response_number(capture, e) for e in lookups[1:])
    move = the(found, "groups.coordinator_moved", key="billing")
    assert move.messages == (unavailable, moved) and move.severity is Severity.MEDIUM
    assert (move.details["node_from"], move.details["node_to"]) == (3, 2)
    assert move.details["errors"] == ["COORDINATOR_NOT_AVAILABLE"]
    assert move.details["since_message"] == response_number(capture, lookups[0])
    assert (move.first_time, move.last_time) == (capture.message(unavailable).time, capture.message(moved).time)
    step = event_step(sidecar, "group coordinator on broker 2", node_id=2)
    assert event_step(sidecar, "group coordinator not available") == step - 1
    assert response_of(capture, sidecar, QUORUM, step) < moved < response_of(capture, sidecar, QUORUM, step + 1)


def at_least_one_and_only(messages: tuple[int, ...], response: int) -> bool:
    return response in messages and len(messages) == 2  # the request and its response


def test_incident_high_findings_are_exactly_the_broken_things(incident):
    _, found, _ = incident
    assert {f.id for f in found if f.severity is Severity.HIGH} == {
        "producer.open_transaction", "producer.sequence_backwards", "partition.elr_in_use",
        "partition.leaderless", "quorum.no_leader", "quorum.hw_stall", "quorum.voter_lag"}
    assert found == sorted(found, key=lambda f: (-f.severity, f.first_time, f.id, f.messages))


@pytest.mark.parametrize("name", ["quorum_story", "producers_story", "tansu_topic_partitions"])
def test_clean_captures_have_no_high_severity_finding(name):
    found = F.find(kdissect.read_pcap(CAPTURES / f"{name}.pcap"))
    assert [f.summary for f in found if f.severity is Severity.HIGH] == []


def test_clean_quorum_story_events_are_found_at_their_normal_severity():
    capture = kdissect.read_pcap(CAPTURES / "quorum_story.pcap")
    found = F.find(capture)
    assert the(found, "quorum.leader_change", leader_to=2).severity is Severity.LOW
    assert the(found, "quorum.voter_lag", replica_id=3).severity is Severity.MEDIUM
    assert the(found, "quorum.observer_joined", replica_id=102).severity is Severity.INFO


def test_thresholds_change_what_is_found():
    capture = kdissect.read_pcap(CAPTURES / "incident.pcap")
    relaxed = Thresholds.parse(["transaction_s=1000", "voter_lag=100000"])
    kinds = {f.id for f in F.find(capture, relaxed)}
    assert "producer.open_transaction" not in kinds and "quorum.voter_lag" not in kinds
    assert "quorum.hw_stall" in kinds


@pytest.mark.parametrize("setting", ["nope=1", "voter_lag", "voter_lag=abc", "slow_ms=-1", "slow_ms=nan", "slow_ms=inf",
                                     "slow_factor=1e400"])
def test_bad_threshold_settings_are_refused_with_a_reason(setting):
    with pytest.raises(ValueError, match="threshold"):
        Thresholds.parse([setting])


def test_a_registered_detector_slots_in(monkeypatch):
    def every_metadata(evidence: F.Evidence):
        table = evidence.table("messages")
        hits = F.rows(table[table.api_name == "Metadata"], ("number", "time"))
        yield F._finding("test.metadata", Severity.INFO, "metadata seen",
                         hits, evidence.streams)

    monkeypatch.setitem(F.DETECTORS, "test.metadata", every_metadata)
    found = F.find(kdissect.read_pcap(CAPTURES / "quorum_story.pcap"))
    assert the(found, "test.metadata").count == 6


def test_detectors_run_without_the_cycle_collector_and_give_it_back(monkeypatch):
    """The detectors' rows hold no cycles: the collector is kept out while they run, and
    is as the caller had it afterwards (on, or off)."""
    import gc

    seen = []

    def collector_state(_evidence: F.Evidence):
        seen.append(gc.isenabled())
        return []

    monkeypatch.setitem(F.DETECTORS, "test.collector", collector_state)
    capture = kdissect.read_pcap(CAPTURES / "quorum_story.pcap")
    assert gc.isenabled()
    first = F.find(capture)
    assert gc.isenabled() and seen == [False]
    gc.disable()
    try:
        again = F.find(capture)
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert seen == [False, False] and [f.record() for f in again] == [f.record() for f in first]


@pytest.mark.parametrize("command", [["--findings"], ["report", "-o", "page.html"]])
def test_the_commands_that_keep_every_message_read_without_the_cycle_collector(
        command, tmp_path, monkeypatch, capsys):
    import gc

    from kdissect.cli import main
    from kdissect.present import analysis

    seen = []
    read = analysis.read_pcap

    def reading(*args, **kwargs):
        seen.append(gc.isenabled())
        return read(*args, **kwargs)

    monkeypatch.setattr(analysis, "read_pcap", reading)
    monkeypatch.chdir(tmp_path)
    assert main([*command, str(CAPTURES / "quorum_story.pcap")]) == 0
    capsys.readouterr()
    assert seen == [False] and gc.isenabled()


# -- crafted captures: lost bytes, TLS, malformed bodies ---------------------------------


def crafted(tmp_path: Path, conversation: Conversation, drop: set[int] = frozenset()) -> Path:
    packets = [p for i, p in enumerate(conversation.packets) if i not in drop]
    return write_pcap(tmp_path / "crafted.pcap", records(packets, wrap=ethernet))


def test_lost_bytes_make_a_gap_finding_with_the_bytes_counted(tmp_path):
    talk = Conversation.between(("10.0.0.2", 40000), ("10.0.0.1", 9092))
    talk.handshake()
    for correlation_id in range(1, 4):
        talk.send(True, kafka_request(3, 1, correlation_id))
        talk.send(False, metadata_response(correlation_id, filler=3000), chunk=1000)
    lost = next(i for i, p in enumerate(talk.packets) if len(bytes(p.payload.payload)) == 1000)
    found = F.find(kdissect.read_pcap(crafted(tmp_path, talk, {lost + 1})))
    gap = the(found, "capture.gap")
    assert gap.details["lost_bytes"] == 1000 and gap.severity is Severity.MEDIUM


def test_a_capture_without_kafka_says_so_at_its_first_packet(tmp_path):
    """Not a damaged file: the finding names the ports seen and `--port`, placed at the
    capture's first packet (the listing's time 0), not before it."""
    talk = Conversation.between(("10.0.0.2", 40001), ("10.0.0.1", 80))
    talk.handshake()
    talk.send(True, b"GET / HTTP/1.1\r\nHost: example\r\n\r\n")
    capture = kdissect.read_pcap(crafted(tmp_path, talk))
    found = F.find(capture)
    assert [f.id for f in found] == ["capture.no_kafka"]
    [none] = found
    assert "port 80" in none.summary and "--port" in none.summary
    assert none.first_time == none.last_time == capture.start == 1_700_000_000.0
    assert "0.000s..0.000s" in F.render_text(found, capture.start)


def test_a_request_shown_at_the_hold_limit_and_never_answered_is_unanswered(tmp_path):
    """A request released before the capture ends (no answer within the hold limit) and
    never answered after is a `traffic.unanswered` finding, as one still held at the end."""
    talk = Conversation.between(("10.0.0.2", 40002), ("10.0.0.1", 9092))
    talk.handshake()
    talk.send(True, kafka_request(3, 1, 1))  # never answered
    held = len(talk.packets)
    for correlation_id in range(2, 4):  # 40 s later: past the hold limit
        talk.send(True, kafka_request(3, 1, correlation_id))
    items = records(talk.packets, wrap=ethernet)
    items = items[:held] + [replace(item, timestamp=item.timestamp + 40.0) for item in items[held:]]
    capture = kdissect.read_pcap(write_pcap(tmp_path / "held.pcap", items))
    first = capture.message_list[0]
    assert first.correlation_id == 1 and first.pair is None
    assert "kafka.response_overdue" in {n.id for n in first.notes}
    unanswered = [f for f in F.find(capture) if f.id == "traffic.unanswered"]
    assert 1 in [n for f in unanswered for n in f.messages]


def test_tls_on_the_kafka_port_is_a_finding(tmp_path):
    talk = Conversation.between(("10.0.0.2", 40001), ("10.0.0.1", 9092))
    talk.handshake()
    hello = bytes.fromhex("160301") + struct.pack(">H", 200) + b"\x01" + bytes(199)
    talk.send(True, hello)
    talk.send(False, bytes.fromhex("160303") + struct.pack(">H", 80) + b"\x02" + bytes(79))
    found = F.find(kdissect.read_pcap(crafted(tmp_path, talk)))
    assert the(found, "capture.tls").count == 1


def test_malformed_bodies_are_a_finding_naming_the_api(tmp_path):
    talk = Conversation.between(("10.0.0.2", 40002), ("10.0.0.1", 9092))
    talk.handshake()
    # DescribeQuorum v0 (header v2): a topic array claiming 100 topics in 3 bytes
    body = b"\x00" + bytes([101]) + b"\x05ab"
    header = struct.pack(">hhih", 55, 0, 7, 5) + b"craft"
    message = header + body
    talk.send(True, struct.pack(">i", len(message)) + message)
    found = F.find(kdissect.read_pcap(crafted(tmp_path, talk)))
    malformed = the(found, "traffic.malformed", api="DescribeQuorum")
    assert malformed.messages == (1,) and malformed.details["problems"]
    assert malformed.summary.startswith("1 malformed DescribeQuorum message, first: ")


# -- small mechanisms ----------------------------------------------------------------------


@given(st.lists(st.booleans(), max_size=40))
def test_episodes_are_the_maximal_runs_of_active_rows(flags):
    rows = [{"i": i, "on": on} for i, on in enumerate(flags)]
    runs = list(F.episodes(rows, lambda r: r["on"]))
    assert [r["i"] for run in runs for r in run] == [i for i, on in enumerate(flags) if on]
    for run in runs:
        assert [r["i"] for r in run] == list(range(run[0]["i"], run[-1]["i"] + 1))
        assert run[0]["i"] == 0 or not flags[run[0]["i"] - 1]
        assert run[-1]["i"] == len(flags) - 1 or not flags[run[-1]["i"] + 1]


@given(st.lists(st.floats(0, 1000), max_size=30), st.floats(0.1, 100))
def test_the_densest_window_is_the_largest_that_fits(times, window):
    items = [{"time": t} for t in sorted(times)]
    best = F._densest(items, window)
    if not items:
        assert best == []
        return
    assert best[-1]["time"] - best[0]["time"] <= window
    for i, start in enumerate(items):
        fitting = [x for x in items[i:] if x["time"] - start["time"] <= window]
        assert len(fitting) <= len(best)


# -- the command ---------------------------------------------------------------------------


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kdissect", *args], capture_output=True,
                          text=True, timeout=120)


def test_findings_command_jsonl_gives_one_object_per_finding():
    done = run("--findings", "-T", "jsonl", str(CAPTURES / "incident.pcap"))
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    expected = F.find(kdissect.read_pcap(CAPTURES / "incident.pcap"))
    assert [r["id"] for r in records] == [f.id for f in expected]
    assert set(records[0]) == {"id", "severity", "summary", "first_time", "last_time", "count",
                               "messages", "connection", "details"}
    assert records[0]["severity"] == "high" and records[0]["first_time"].endswith("+00:00")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_findings_times_count_from_the_first_packet_as_the_listing_does(jobs):
    """A finding's span starts at the listed time of one of its evidence messages (seconds
    since the capture's first packet, not since its first Kafka message)."""
    capture = str(CAPTURES / "incident.pcap")
    found = run("--findings", "-j", jobs, capture)
    listed = run("-j", jobs, capture)
    assert found.returncode == listed.returncode == 0, found.stderr + listed.stderr
    times = {int(line.split()[0]): float(line.split()[1]) for line in listed.stdout.splitlines()}
    assert min(times.values()) > 0.01  # the capture starts before its first message
    lines = found.stdout.splitlines()
    checked = 0
    for head, evidence in zip(lines, lines[2:], strict=False):
        if head[:1].isupper() and evidence.strip().startswith("messages:"):
            shown = [int(n) for n in evidence.split(":")[1].replace("...", "").split(",")]
            start = float(head.split()[2].split("s..")[0])
            assert any(abs(start - times[n]) < 0.0006 for n in shown), head  # the time of one of them
            checked += 1
    assert checked >= 5


def test_the_readme_shows_the_findings_of_the_incident_capture_as_they_are():
    """The README's excerpt is the command's output: its first findings, and the count line."""
    readme = (CAPTURES.parent / "README.md").read_text()
    prompt = "$ kdissect --findings captures/incident.pcap\n"
    shown = readme[readme.index(prompt) + len(prompt):].split("```")[0].splitlines()
    done = run("--findings", str(CAPTURES / "incident.pcap"))
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    head = shown[:shown.index("...")]
    assert len(head) >= 6 and out[:len(head)] == head
    assert shown[-1] == out[-1]
    assert not any("(s)" in line for line in out)  # counts come with their nouns in the plural


def test_findings_command_json_is_one_array_of_the_jsonl_objects():
    lines = run("--findings", "-T", "jsonl", str(CAPTURES / "incident.pcap"))
    array = run("--findings", "-T", "json", str(CAPTURES / "incident.pcap"))
    assert lines.returncode == array.returncode == 0, array.stderr
    assert json.loads(array.stdout) == [json.loads(line) for line in lines.stdout.splitlines()]
    none = run("--findings", "-T", "json", str(CAPTURES / "tansu_records.pcap"))  # nothing went wrong
    assert none.returncode == 0 and none.stdout == "[]\n"


def test_findings_command_text_and_errors():
    done = run("--findings", str(CAPTURES / "quorum_story.pcap"))
    assert done.returncode == 0 and "quorum.leader_change" in done.stdout
    assert "3 findings: 1 medium, 1 low, 1 info" in done.stdout
    one = run("--findings", str(CAPTURES / "tansu_topic_partitions.pcap"))
    assert one.returncode == 0 and one.stdout.endswith("\n1 finding: 1 low\n")
    assert run("--findings", "no-such.pcap").returncode == 2
    refused = run("--findings", "--threshold", "bogus=1", str(CAPTURES / "quorum_story.pcap"))
    assert refused.returncode == 2 and "unknown threshold" in refused.stderr


def test_findings_of_a_rotated_set_are_those_of_the_whole_capture(tmp_path):
    """Several files are read as one capture, as the message list reads them: the incident
    split at random packets (inside messages too) gives the same findings, word for word,
    on one process and on two."""
    from tools.split_capture import packet_count, random_cuts, split

    data = (CAPTURES / "incident.pcap").read_bytes()
    parts = []
    for index, part in enumerate(split(data, random_cuts(packet_count(data), 4, seed=3))):
        parts.append(tmp_path / f"incident-{index}.pcap")
        parts[-1].write_bytes(part)
    whole = run("--findings", "-T", "jsonl", str(CAPTURES / "incident.pcap"))
    assert whole.returncode == 0 and whole.stdout.count("\n") > 10, whole.stderr
    for jobs in ("1", "2"):
        rotated = run("--findings", "-T", "jsonl", "-j", jobs, *map(str, parts))
        assert rotated.returncode == 0, rotated.stderr
        assert rotated.stdout == whole.stdout


def test_findings_command_refuses_what_it_cannot_read(tmp_path):
    one = str(CAPTURES / "quorum_story.pcap")
    mixed_stdin = run("--findings", "-", one)
    assert mixed_stdin.returncode == 2 and "read alone" in mixed_stdin.stderr
    folder = run("--findings", str(tmp_path))
    assert folder.returncode == 2 and "is a directory" in folder.stderr
    assert run("--findings", "-j", "0", one).returncode == 2
    with open(one, "rb") as stdin:
        piped = subprocess.run([sys.executable, "-m", "kdissect", "--findings", "-"], capture_output=True,
                               text=True, timeout=120, stdin=stdin)
    assert piped.returncode == 0 and piped.stdout == run("--findings", one).stdout


def join_group_v5(correlation_id: int, client_id: bytes, group: bytes) -> bytes:
    """A JoinGroup v5 request (classic encoding), written field by field."""

    def string(raw: bytes) -> bytes:
        return struct.pack(">h", len(raw)) + raw

    body = (string(group) + struct.pack(">ii", 10_000, 30_000) + string(b"") + struct.pack(">h", -1)
            + string(b"consumer") + struct.pack(">i", 1) + string(b"range")
            + struct.pack(">i", 4) + b"\x00\x01\x00\x00")
    return kafka_request(11, 5, correlation_id, client_id=client_id, body=body)


def test_a_join_group_storm_is_a_finding_from_headers_alone(tmp_path):
    packets = []
    for member in range(3):
        talk = Conversation.between((f"10.0.0.{member + 2}", 41000), ("10.0.0.1", 9092))
        talk.handshake()
        for correlation_id in range(1, 5):
            talk.send(True, join_group_v5(correlation_id, f"consumer-{member}".encode(), b"billing"))
        packets += talk.packets
    found = F.find(kdissect.read_pcap(write_pcap(tmp_path / "joins.pcap",
                                                 records(packets, wrap=ethernet))))
    storm = the(found, "groups.join_storm")
    assert storm.count == 12 and storm.details["clients"] == ["consumer-0", "consumer-1",
                                                              "consumer-2"]
    assert storm.details["group"] in ("?", "billing")  # "billing" once JoinGroup is decoded
    quieter = F.find(kdissect.read_pcap(tmp_path / "joins.pcap"), Thresholds(join_storm=13))
    assert not [f for f in quieter if f.id == "groups.join_storm"]


def test_throttled_answers_are_a_finding(tmp_path):
    from tests.test_report import describe_producers_request
    from tools.kio_codec import encode_response, read_request

    talk = Conversation.between(("10.0.0.2", 40200), ("10.0.0.1", 9092))
    talk.handshake()
    for correlation_id, throttle in ((1, 0), (2, 250), (3, 900)):
        frame = describe_producers_request(correlation_id, "slowpoke", "orders")
        answer, _ = encode_response(read_request(frame[4:]), {"throttle_time": throttle, "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0, "error_code": 0,
                                               "error_message": None, "active_producers": []}]}]})
        talk.send(True, frame)
        talk.send(False, answer)
    found = F.find(kdissect.read_pcap(crafted(tmp_path, talk)))
    throttled = the(found, "traffic.throttled", client_id="slowpoke")
    assert throttled.messages == (4, 6) and throttled.details["worst_ms"] == 900


def s16(text: bytes) -> bytes:
    return struct.pack(">h", len(text)) + text


def test_not_coordinator_then_a_new_node_is_a_move_and_a_repeated_answer_is_not(tmp_path):
    """FindCoordinator v1 (one key at the top level) and a Heartbeat answering NOT_COORDINATOR,
    answered by kio: node 1, node 1 again, NOT_COORDINATOR, node 4 on another host; then a
    transactional id's coordinator moving from node 2 to 3 with no error (low)."""
    from tools.kio_codec import encode_response, read_request

    talk = Conversation.between(("10.0.0.2", 40300), ("10.0.0.1", 9092))
    talk.handshake()
    find = s16(b"orders-app") + b"\x00"  # Key, KeyType 0: a group
    heartbeat = s16(b"orders-app") + struct.pack(">i", 5) + s16(b"member-1")
    audit = s16(b"audit-txn") + b"\x01"  # KeyType 1: a transactional id, moving without errors
    script = [(10, find, {"node_id": 1, "host": "b1", "port": 9092}), (10, find, {"node_id": 1, "host": "b1", "port": 9092}),
              (12, heartbeat, {"error_code": 16}), (10, find, {"node_id": 4, "host": "b4", "port": 9093}),
              (10, audit, {"node_id": 2, "host": "b2", "port": 9092}), (10, audit, {"node_id": 3, "host": "b3", "port": 9092})]
    for correlation_id, (api_key, body, answer) in enumerate(script, 1):
        frame = kafka_request(api_key, 1, correlation_id, body=body)
        response, _ = encode_response(read_request(frame[4:]), {"throttle_time": 0, "error_code": 0,
                                                                "error_message": None, **answer})
        talk.send(True, frame)
        talk.send(False, response)
    found = F.find(kdissect.read_pcap(crafted(tmp_path, talk)))
    move = the(found, "groups.coordinator_moved", key="orders-app")
    assert move.messages == (6, 8) and move.severity is Severity.MEDIUM
    assert (move.details["address_from"], move.details["address_to"]) == ("b1:9092", "b4:9093")
    assert move.details["errors"] == ["NOT_COORDINATOR"] and move.details["since_message"] == 4
    quiet = the(found, "groups.coordinator_moved", key="audit-txn")
    assert quiet.severity is Severity.LOW and quiet.messages == (12,) and quiet.details["errors"] == []
    assert quiet.summary == "transactional id audit-txn: coordinator 2 (b2:9092) -> 3 (b3:9092)"
    assert len([f for f in found if f.id == "groups.coordinator_moved"]) == 2  # 1 -> 1 is no move


def pipelined_fetches(tmp_path, timeline):
    """A capture of Fetch v15 exchanges (MaxWaitMs 500, kio-encoded) on one connection:
    `timeline` is (correlation id, is request, seconds) in wire order."""
    from kio.schema.fetch.v15 import request as fetch_request
    from kio.schema.fetch.v15 import response as fetch_response
    from kio.schema.request_header.v2.header import RequestHeader
    from kio.schema.response_header.v1.header import ResponseHeader

    from tests.craft import Record
    from tests.test_traffic_tables import encoded

    asked = fetch_request.FetchRequest(
        cluster_id=None, replica_state=fetch_request.ReplicaState(replica_id=-1, replica_epoch=-1),
        max_wait=timedelta(milliseconds=500), min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, topics=(), forgotten_topics_data=(), rack_id="")
    answered = fetch_response.FetchResponse(throttle_time=timedelta(0), error_code=ErrorCode.none,
                                            session_id=0, responses=())
    talk = Conversation.between(("10.0.0.2", 40400), ("10.0.0.1", 9092))
    timed = [(packet, 0.0) for packet in talk.handshake()]
    for correlation_id, is_request, at in timeline:
        if is_request:
            header = RequestHeader(request_api_key=1, request_api_version=15, correlation_id=correlation_id,
                                   client_id="pipeliner")
            payload = encoded(header) + encoded(asked)
        else:
            payload = encoded(ResponseHeader(correlation_id=correlation_id)) + encoded(answered)
        timed += [(packet, at) for packet in talk.send(is_request, len(payload).to_bytes(4, "big") + payload)]
    path = write_pcap(tmp_path / "pipelined.pcap", [Record(bytes(ethernet(packet)), 1_700_000_000.0 + at)
                                                    for packet, at in timed])
    return kdissect.read_pcap(path)


def test_a_long_poll_is_slow_only_beyond_the_wait_it_asked_for_and_the_finding_gives_both(tmp_path):
    """Fetch asks the broker to hold its answer up to MaxWaitMs (500 ms here, kio-encoded):
    answered after 1.2 s it is 0.7 s beyond the wait, not slow; after 3 s it is. The
    finding's latency is the message list's (3000 ms), and it says what lies beyond the wait."""
    capture = pipelined_fetches(tmp_path, ((1, True, 0.01), (1, False, 1.21), (2, True, 1.22), (2, False, 4.22)))
    assert [round(latency) for latency in capture.exchanges.latency_ms] == [1200, 3000]
    slow = the(F.find(capture), "traffic.slow", api="Fetch")
    assert slow.messages == (3, 4) and slow.count == 1
    assert slow.details["worst_ms"] == pytest.approx(3000.0)
    assert slow.details["worst_beyond_wait_ms"] == pytest.approx(2500.0)
    assert "up to 3000.0 ms, 2500.0 ms beyond the wait its request allowed" in slow.summary


def test_a_request_pipelined_behind_a_slow_one_is_not_slow_itself(tmp_path):
    """A broker answers one request of a connection at a time: a second Fetch sent 50 ms
    after the first waits until the first is answered (3 s later, 2.5 s beyond its
    MaxWaitMs) and is answered 10 ms after it. Its latency is 2.96 s, but only the first
    exchange is slow; the second's 2.95 s are time queued behind it."""
    capture = pipelined_fetches(tmp_path, ((1, True, 0.01), (2, True, 0.06), (1, False, 3.01), (2, False, 3.02)))
    assert [round(latency) for latency in capture.exchanges.latency_ms] == [3000, 2960]
    rows = F.exchange_rows(capture.message_list)
    assert [round(r["queued_ms"]) for r in rows] == [0, 2950]
    slow = the(F.find(capture), "traffic.slow", api="Fetch")
    assert slow.messages == (1, 3) and slow.count == 1
    assert "worst_queued_ms" not in slow.details and "queued" not in slow.summary


def test_a_slow_request_that_was_also_queued_says_how_long_it_queued(tmp_path):
    """The second Fetch is slow in its own right (answered 4 s after the first answer, 3.5 s
    beyond its wait): the finding names it and says how much of its latency was queued."""
    capture = pipelined_fetches(tmp_path, ((1, True, 0.01), (2, True, 0.06), (1, False, 0.51), (2, False, 4.51)))
    slow = the(F.find(capture), "traffic.slow", api="Fetch")
    assert slow.messages == (2, 4) and slow.details["worst_queued_ms"] == pytest.approx(450.0)
    assert "up to 4450.0 ms (450.0 ms of it queued behind earlier requests of its connection)" in slow.summary


def test_body_facts_read_from_values_are_the_trees():
    """Where the fast path takes a body, its error codes (with their topics, in the tree's
    order), throttle, group and wait come from its flat values: exactly the facts a walk of
    its whole annotated tree gives, on every shipped, fuzz-found and third-party capture."""
    from tests.every_message import count_passing, reading_captures

    seen: dict[str, int] = {}

    def same(message) -> bool:
        values = message.fast_values(keep=False) if F._values_tell(message) else None
        if values is None:
            return False
        client_id = (message if message.is_request else message.pair).client_id or ""
        by_values = list(F._walk_values(message, values, client_id))
        assert by_values == list(F._walk_body(message, message.tree(keep=False), client_id))
        for fact in by_values:
            seen[fact.kind] = seen.get(fact.kind, 0) + 1
        return True

    assert count_passing(reading_captures(), same) > 400
    assert seen["error"] >= 8 and seen["wait"] >= 2, seen  # the shipped captures' alone


def test_an_error_code_in_a_tagged_field_is_found(tmp_path):
    """CreateTopics v7 answers TopicConfigErrorCode in a tagged field, which flat values leave
    out: the error is still found (kio encodes the exchange)."""
    from kio.schema.create_topics.v7 import request as create_request
    from kio.schema.create_topics.v7 import response as create_response

    from tests.test_traffic_tables import kio_capture

    asked = create_request.CreateTopicsRequest(topics=(create_request.CreatableTopic(
        name="audit", num_partitions=3, replication_factor=1, assignments=(), configs=()),),
        timeout=timedelta(seconds=30), validate_only=False)
    answered = create_response.CreateTopicsResponse(throttle_time=timedelta(0), topics=(
        create_response.CreatableTopicResult(
            name="audit", topic_id=None, error_code=ErrorCode.none, error_message=None,
            topic_config_error_code=ErrorCode.topic_authorization_failed, num_partitions=3,
            replication_factor=1, configs=None),))
    found = F.find(kdissect.read_pcap(kio_capture(tmp_path, [(19, 7, asked, answered)])))
    error = the(found, "traffic.errors", topic="audit")
    assert error.details["error"] == "TOPIC_AUTHORIZATION_FAILED" and error.details["api"] == "CreateTopics"


def stand_in(api_key: int, version: int, kind: str) -> Any:
    """What the walks read of a message, for a frame read outside any capture."""
    from types import SimpleNamespace

    from kdissect.apis import api_name

    return SimpleNamespace(is_request=kind == "request", time=0.0, number=1, api_key=api_key, api_version=version,
                           kind=kind, api_name=api_name(api_key), frame=SimpleNamespace(connection=SimpleNamespace(index=0)))


@pytest.mark.parametrize(("api_key", "version", "kind"),
                         [(key, version, kind) for key, version in newest_kio_versions()
                          for kind in ("request", "response")])
@settings(max_examples=5, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_body_facts_read_from_values_are_the_trees_on_kio_messages_of_every_api(api_key, version, kind, data):
    """The same on random messages of the newest version of every API kio has (error codes
    anywhere, under named topics, throttles, groups, waits), encoded by kio."""
    from kdissect.decode.dissect import dissect_request, dissect_response
    from kdissect.decode.values import fast_body

    header = data.draw(_header_of(api_key, version, kind))
    entity_type = kio_entity_type(api_key, version, kind)
    frame = framed(encode(type(header), header), encode(entity_type, data.draw(st.from_type(entity_type))))
    message = stand_in(api_key, version, kind)
    values = fast_body(frame, kind, api_key, version) if F._values_tell(message) else None
    if values is not None:
        tree = dissect_request(frame) if kind == "request" else dissect_response(frame, api_key, version)
        assert list(F._walk_values(message, values, "")) == list(F._walk_body(message, tree, ""))
